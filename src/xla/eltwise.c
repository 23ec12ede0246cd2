/*
 * eltwise.c - simdev_relu, simdev_relu_grad and simdev_empty.
 *
 *   simdev_relu(x) -> y, any rank, y's shape = x's.
 *   simdev_relu_grad(dy, x) -> dx = dy * (x > 0), all three shapes equal.
 *   simdev_empty() -> f32[]: writes 0 through the stream. It measures what
 *     one call costs apart from its arithmetic (validation, the queue, the
 *     future, the worker's wake-up).
 * dtype float32 or float64, the same for all; no attributes.
 *
 * The scalar functions are arith/scalar.h's (TF's Relu and ReluGrad
 * kernels run them), spread over device_sim's pool on the worker.
 *
 * Handlers run on the thread XLA calls them from (sx.h); the run
 * functions on the stream worker.
 */
#include <stdio.h>
#include <string.h>

#include "arith/scalar.h"
#include "sx_internal.h"

/* Elements per pool task: small arrays stay on the worker. */
#define EW_GRAIN 32768

typedef struct ew_job {
  sx_job job; /* first */
  sa_dtype dt;
  int64_t n;
  const void* a; /* x (relu) or dy (relu_grad) */
  const void* b; /* x (relu_grad); NULL for relu */
  void* out;
} ew_job;

static void relu_range(void* arg, int64_t lo, int64_t hi) {
  const ew_job* g = arg;
  if (g->dt == SA_F32) {
    const float* x = g->a;
    float* y = g->out;
    for (int64_t i = lo; i < hi; i++) y[i] = sa_cws_relu_f32(x[i]);
  } else {
    const double* x = g->a;
    double* y = g->out;
    for (int64_t i = lo; i < hi; i++) y[i] = sa_cws_relu_f64(x[i]);
  }
}

static void relu_grad_range(void* arg, int64_t lo, int64_t hi) {
  const ew_job* g = arg;
  if (g->dt == SA_F32) {
    const float *dy = g->a, *x = g->b;
    float* dx = g->out;
    for (int64_t i = lo; i < hi; i++) dx[i] = sa_cws_relugrad_f32(dy[i], x[i]);
  } else {
    const double *dy = g->a, *x = g->b;
    double* dx = g->out;
    for (int64_t i = lo; i < hi; i++) dx[i] = sa_cws_relugrad_f64(dy[i], x[i]);
  }
}

static XLA_FFI_Error_Code ew_run(sx_job* j, sim_device* dev, char* msg,
                                 size_t len) {
  ew_job* g = (ew_job*)j;
  sim_parallel_for(g->n, EW_GRAIN, g->b ? relu_grad_range : relu_range, g);
  return XLA_FFI_Error_Code_OK;
}

static XLA_FFI_Error* eltwise(XLA_FFI_CallFrame* frame, const char* target,
                              bool grad) {
  if (sx_metadata(frame)) return NULL;
  sx_call c;
  XLA_FFI_Error* e = sx_begin(&c, frame, target, grad ? 2 : 1, 1);
  if (e) return e;
  sa_dtype dt = 0;
  sx_buf a, b, out;
  const char* first = grad ? "dy" : "x";
  if ((e = sx_buffer(&c, grad ? "operand dy" : "operand x", sx_arg(&c, 0), &dt,
                     NULL, &a)) ||
      (grad &&
       (e = sx_buffer(&c, "operand x", sx_arg(&c, 1), &dt, first, &b))) ||
      (e = sx_buffer(&c, grad ? "result dx" : "result y", sx_ret(&c, 0), &dt,
                     first, &out)) ||
      (e = sx_attrs_known(&c, NULL, 0)))
    return e;
  char why[16];
  snprintf(why, sizeof(why), " (%s's)", first);
  if ((grad && ((e = sx_rank(&c, &b, a.rank, why)) ||
                (e = sx_shape(&c, &b, a.dims)))) ||
      (e = sx_rank(&c, &out, a.rank, why)) || (e = sx_shape(&c, &out, a.dims)))
    return e;
  if (out.elems == 0) return NULL;
  ew_job* j = sx_job_new(sizeof(*j), ew_run);
  if (j == NULL) return sx_no_memory(&c);
  j->dt = dt;
  j->n = out.elems;
  j->a = a.data;
  j->b = grad ? b.data : NULL;
  j->out = out.data;
  return sx_launch(&c, &j->job);
}

XLA_FFI_Error* simdev_xla_relu(XLA_FFI_CallFrame* frame) {
  return eltwise(frame, "simdev_relu", false);
}

XLA_FFI_Error* simdev_xla_relu_grad(XLA_FFI_CallFrame* frame) {
  return eltwise(frame, "simdev_relu_grad", true);
}

/* ---- simdev_empty ---------------------------------------------------------
 */

typedef struct empty_job {
  sx_job job; /* first */
  float* out;
} empty_job;

static XLA_FFI_Error_Code empty_run(sx_job* j, sim_device* dev, char* msg,
                                    size_t len) {
  *((empty_job*)j)->out = 0.f;
  return XLA_FFI_Error_Code_OK;
}

XLA_FFI_Error* simdev_xla_empty(XLA_FFI_CallFrame* frame) {
  if (sx_metadata(frame)) return NULL;
  sx_call c;
  XLA_FFI_Error* e = sx_begin(&c, frame, "simdev_empty", 0, 1);
  if (e) return e;
  sa_dtype dt = SA_F32; /* the result must be f32 */
  sx_buf out;
  if ((e = sx_buffer(&c, "result", sx_ret(&c, 0), &dt, NULL, &out)) ||
      (e = sx_rank(&c, &out, 0, "")) || (e = sx_attrs_known(&c, NULL, 0)))
    return e;
  empty_job* j = sx_job_new(sizeof(*j), empty_run);
  if (j == NULL) return sx_no_memory(&c);
  j->out = out.data;
  return sx_launch(&c, &j->job);
}
