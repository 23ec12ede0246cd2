/*
 * matmul.c - simdev_matmul and simdev_matmul_bias_act: batched GEMM through
 * sa_gemm (the GEMM TF's MatMul kernels run), the fused one with
 * sa_gemm's epilogue (bias + activation, as TF's _FusedMatMul).
 *
 * simdev_matmul(a, b) -> c, row-major, with *B the leading batch dims,
 * equal on every operand and the result (vmap's broadcast_all):
 *   a [*B, m, k] ([*B, k, m] if transpose_a)
 *   b [*B, k, n] ([*B, n, k] if transpose_b)
 *   c [*B, m, n]
 *   attributes transpose_a, transpose_b: bool (pred) scalars, required.
 * simdev_matmul_bias_act(a, b, bias) -> c = act(a x b + bias), bias [*B, n];
 *   attributes also activation: none|relu|relu6|elu|leaky_relu|tanh|sigmoid
 *   and alpha: f32 scalar (leaky_relu's slope; required always).
 * dtype float32 or float64, the same for all.
 *
 * Handlers run on the thread XLA calls them from (sx.h); mm_run on the
 * stream worker.
 */
#include <inttypes.h>
#include <string.h>

#include "sx_internal.h"

typedef struct mm_job {
  sx_job job; /* first */
  sa_dtype dt;
  bool ta, tb;
  int64_t batch, m, n, k; /* batch: product of *B */
  const char* a;
  const char* b;
  const char* bias; /* NULL: plain matmul */
  char* c;
  enum sa_act act;
  float alpha;
} mm_job;

/* Worker: one sa_gemm per batch element; the fused epilogue takes that
 * element's bias row. An empty contraction (k == 0, fused only: the plain
 * one is written on the calling thread) is act(0 + bias). */
static XLA_FFI_Error_Code mm_run(sx_job* j, sim_device* dev, char* msg,
                                 size_t len) {
  const mm_job* g = (const mm_job*)j;
  size_t es = sa_dtype_size(g->dt);
  int64_t lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
  for (int64_t i = 0; i < g->batch; i++) {
    const char* a = g->a + (size_t)(i * g->m * g->k) * es;
    const char* b = g->b + (size_t)(i * g->k * g->n) * es;
    char* c = g->c + (size_t)(i * g->m * g->n) * es;
    sa_epi epi = {g->dt, NULL, g->act, g->alpha};
    if (g->bias != NULL) epi.bias = g->bias + (size_t)(i * g->n) * es;
    const sa_epi* ep = g->bias != NULL ? &epi : NULL;
    sa_gemm(g->dt, g->ta, g->tb, g->m, g->n, g->k, a, lda, b, ldb, 0., c, g->n,
            ep); /* k == 0: zeros, then ep */
  }
  return XLA_FFI_Error_Code_OK;
}

static const struct {
  const char* name;
  enum sa_act act;
} acts[] = {
    {"none", SA_ACT_NONE},
    {"relu", SA_ACT_RELU},
    {"relu6", SA_ACT_RELU6},
    {"elu", SA_ACT_ELU},
    {"leaky_relu", SA_ACT_LEAKYRELU},
    {"tanh", SA_ACT_TANH},
    {"sigmoid", SA_ACT_SIGMOID},
};

static XLA_FFI_Error* parse_act(const sx_call* c, enum sa_act* act) {
  const char* s;
  size_t len;
  XLA_FFI_Error* e = sx_attr_str(c, "activation", &s, &len);
  if (e) return e;
  for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++)
    if (strlen(acts[i].name) == len && memcmp(acts[i].name, s, len) == 0) {
      *act = acts[i].act;
      return NULL;
    }
  return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "attribute 'activation' must be one of none, relu, relu6, "
                  "elu, leaky_relu, tanh, sigmoid, got '%.*s'",
                  (int)(len > 64 ? 64 : len), s);
}

/* Decodes and checks the call into *g; *out_elems is c's element count. */
static XLA_FFI_Error* mm_decode(const sx_call* c, bool fused, mm_job* g,
                                int64_t* out_elems) {
  static const char* const plain_attrs[] = {"transpose_a", "transpose_b"};
  static const char* const fused_attrs[] = {"activation", "alpha",
                                            "transpose_a", "transpose_b"};
  XLA_FFI_Error* e;
  sa_dtype dt = 0;
  sx_buf a, b, bias, out;
  if ((e = sx_buffer(c, "operand a", sx_arg(c, 0), &dt, NULL, &a)) ||
      (e = sx_buffer(c, "operand b", sx_arg(c, 1), &dt, "a", &b)) ||
      (fused &&
       (e = sx_buffer(c, "operand bias", sx_arg(c, 2), &dt, "a", &bias))) ||
      (e = sx_buffer(c, "result c", sx_ret(c, 0), &dt, "a", &out)))
    return e;
  if ((e = fused ? sx_attrs_known(c, fused_attrs, 4)
                 : sx_attrs_known(c, plain_attrs, 2)) ||
      (e = sx_attr_bool(c, "transpose_a", &g->ta)) ||
      (e = sx_attr_bool(c, "transpose_b", &g->tb)))
    return e;
  g->act = SA_ACT_NONE;
  g->alpha = 0;
  if (fused &&
      ((e = parse_act(c, &g->act)) || (e = sx_attr_f32(c, "alpha", &g->alpha))))
    return e;

  if ((e = sx_min_rank(c, &a, 2)) || (e = sx_rank(c, &b, a.rank, " (a's)")))
    return e;
  int64_t nb = a.rank - 2;
  if ((e = sx_batch(c, &b, &a, nb))) return e;
  int64_t m = a.dims[nb + (g->ta ? 1 : 0)], k = a.dims[nb + (g->ta ? 0 : 1)];
  int64_t kb = b.dims[nb + (g->tb ? 1 : 0)], n = b.dims[nb + (g->tb ? 0 : 1)];
  if (k != kb)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "contracting dims differ: operand a has k = %" PRId64
                    " (axis %" PRId64 "%s), operand b has %" PRId64
                    " (axis %" PRId64 "%s)",
                    k, nb + (g->ta ? 0 : 1), g->ta ? ", transpose_a" : "", kb,
                    nb + (g->tb ? 1 : 0), g->tb ? ", transpose_b" : "");
  int64_t want[SX_MAX_RANK];
  memcpy(want, a.dims, (size_t)nb * sizeof(int64_t));
  if (fused) {
    want[nb] = n;
    if ((e = sx_rank(c, &bias, nb + 1, " (a's minus 1)")) ||
        (e = sx_shape(c, &bias, want)))
      return e;
  }
  want[nb] = m;
  want[nb + 1] = n;
  if ((e = sx_rank(c, &out, a.rank, " (a's)")) || (e = sx_shape(c, &out, want)))
    return e;
  if (m > SA_BLAS_MAX || n > SA_BLAS_MAX || k > SA_BLAS_MAX)
    return sx_error(c, XLA_FFI_Error_Code_UNIMPLEMENTED,
                    "m = %" PRId64 ", n = %" PRId64 ", k = %" PRId64
                    ": simdev's GEMM (OpenBLAS) takes sizes up to %" PRId64,
                    m, n, k, (int64_t)SA_BLAS_MAX);
  g->dt = dt;
  g->batch = sx_prod(a.dims, nb);
  g->m = m;
  g->n = n;
  g->k = k;
  g->a = a.data;
  g->b = b.data;
  g->bias = fused ? bias.data : NULL;
  g->c = out.data;
  *out_elems = out.elems;
  return NULL;
}

static XLA_FFI_Error* matmul(XLA_FFI_CallFrame* frame, const char* target,
                             bool fused) {
  if (sx_metadata(frame)) return NULL;
  sx_call c;
  mm_job g = {0};
  int64_t elems = 0;
  XLA_FFI_Error* e = sx_begin(&c, frame, target, fused ? 3 : 2, 1);
  if (e || (e = mm_decode(&c, fused, &g, &elems))) return e;
  if (elems == 0) return NULL;
  if (g.k == 0 && !fused) { /* an empty sum: zeros, no stream needed */
    sa_gemm(g.dt, false, false, (int64_t)(elems / g.n), g.n, 0, NULL, 1, NULL,
            1, 0., g.c, g.n, NULL);
    return NULL;
  }
  mm_job* j = sx_job_new(sizeof(*j), mm_run);
  if (j == NULL) return sx_no_memory(&c);
  sx_job hdr = j->job;
  *j = g;
  j->job = hdr;
  return sx_launch(&c, &j->job);
}

XLA_FFI_Error* simdev_xla_matmul(XLA_FFI_CallFrame* frame) {
  return matmul(frame, "simdev_matmul", false);
}

XLA_FFI_Error* simdev_xla_matmul_bias_act(XLA_FFI_CallFrame* frame) {
  return matmul(frame, "simdev_matmul_bias_act", true);
}
