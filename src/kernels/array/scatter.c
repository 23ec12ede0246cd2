/*
 * scatter.c - ScatterNd, TensorScatterUpdate and TensorScatterAdd.
 *
 * indices is [N..., K]: each of its N rows names a slice (the first K
 * dimensions) of the output, which receives the matching slice of updates.
 * The output starts as zeros (ScatterNd) or a copy of `tensor`; every index
 * is checked first on the stream worker (the lowest bad row fails the op
 * with TF CPU's message, nothing is written); then the rows are applied in
 * order, the work split by columns of the slice, so duplicate indices add
 * (ScatterNd, TensorScatterAdd) or the last one wins (TensorScatterUpdate)
 * the same way on every run. shape lives in host memory. Thread contract
 * as in sk.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith/gather.h"
#include "kernels/array/array.h"

typedef struct scatter_args {
  sa_scatter s;
  TF_DataType t;
  bool add;
  const char* src; /* TensorScatter*: the input tensor; NULL: zeros */
  sk_shape os;
  int64_t total; /* output elements */
} scatter_args;

/* The combine function (arith/gather.h): y += u (float, double, int64
 * wrapping) or y = u. */
static void combine(const void* ctx, char* yp, const char* up, bool ubcast,
                    int64_t n) {
  (void)ubcast; /* never: these ops have no scalar updates */
  const scatter_args* a = ctx;
  if (!a->add) {
    memcpy(yp, up, (size_t)n * a->s.es);
  } else if (a->t == TF_FLOAT) {
    float* y = (float*)yp;
    const float* u = (const float*)up;
    for (int64_t c = 0; c < n; c++) y[c] += u[c];
  } else if (a->t == TF_DOUBLE) {
    double* y = (double*)yp;
    const double* u = (const double*)up;
    for (int64_t c = 0; c < n; c++) y[c] += u[c];
  } else { /* int64, wrapping */
    uint64_t* y = (uint64_t*)yp;
    const uint64_t* u = (const uint64_t*)up;
    for (int64_t c = 0; c < n; c++) y[c] += u[c];
  }
}

static void scatter_run(sk_launch* l, void* args) {
  scatter_args* a = args;
  const sa_nd* nd = &a->s.nd;
  int64_t r = sa_nd_bad(nd, a->s.rows);
  if (r >= 0) {
    char b[SK_MAX_DIMS * 24 + 4], o[256];
    sa_nd_row_string(nd, r, b, sizeof(b));
    sk_fail(l, TF_INVALID_ARGUMENT,
            "indices[%lld] = [%s] does not index into shape %s", (long long)r,
            b, sk_shape_str(&a->os, o, sizeof(o)));
    return;
  }
  if (a->src == NULL)
    memset(a->s.y, 0, (size_t)a->total * a->s.es);
  else if (a->src != a->s.y)
    memcpy(a->s.y, a->src, (size_t)a->total * a->s.es);
  sa_scatter_run(&a->s);
}

/* Checks indices/updates against the output shape os with TF's rules:
 * updates.shape == indices.shape[:-1] + os[K:]. */
static bool scatter_shapes(sk_launch* l, const sk_shape* is, const sk_shape* us,
                           const sk_shape* os) {
  char b1[256], b2[256], b3[256];
  if (is->nd < 1) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Indices shape must have rank at least one. Found:%s",
            sk_shape_str(is, b1, sizeof(b1)));
    return false;
  }
  int k = (int)is->d[is->nd - 1];
  bool ok = k <= os->nd && us->nd == is->nd - 1 + os->nd - k;
  for (int i = 0; ok && i < is->nd - 1; i++) ok = us->d[i] == is->d[i];
  for (int i = k; ok && i < os->nd; i++)
    ok = us->d[is->nd - 1 + i - k] == os->d[i];
  if (!ok) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "updates.shape %s does not match indices.shape %s and the output "
            "shape %s (want indices.shape[:-1] + shape[indices.shape[-1]:])",
            sk_shape_str(us, b1, sizeof(b1)), sk_shape_str(is, b2, sizeof(b2)),
            sk_shape_str(os, b3, sizeof(b3)));
    return false;
  }
  return true;
}

static void scatter_launch(sk_launch* l, TF_Tensor* src, TF_Tensor* it,
                           TF_Tensor* ut, const sk_shape* os, bool add,
                           const char* label) {
  sk_shape is, us;
  if (!sk_shape_of(l, it, &is) || !sk_shape_of(l, ut, &us) ||
      !scatter_shapes(l, &is, &us, os))
    return;
  if (TF_TensorType(it) == TF_INT32 && os->nd > 0 && os->d[0] > INT32_MAX) {
    sk_fail(l, TF_INVALID_ARGUMENT, /* TF CPU's check and words */
            "params_shape[0] too large for int32 indexing: %lld > %d",
            (long long)os->d[0], INT32_MAX);
    return;
  }
  if (os->n == 0 && is.n > 0) { /* TF CPU's check */
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Indices and updates specified for empty output shape");
    return;
  }
  TF_Tensor* y = sk_output(l, 0, os);
  scatter_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os->n == 0) return;
  int k = (int)is.d[is.nd - 1];
  a->s.rows = 1;
  for (int i = 0; i < is.nd - 1; i++) a->s.rows *= is.d[i];
  a->s.slice = 1;
  for (int i = k; i < os->nd; i++) a->s.slice *= os->d[i];
  sa_nd_init(&a->s.nd, sk_data(it), TF_TensorType(it) == TF_INT64, os->d, k);
  a->t = TF_TensorType(ut);
  a->src = src ? sk_data(src) : NULL;
  a->s.upd = sk_data(ut);
  a->s.y = sk_mdata(y);
  a->s.es = TF_DataTypeSize(a->t);
  a->s.combine = combine;
  a->s.ctx = a;
  a->add = add;
  a->os = *os;
  a->total = os->n;
  sk_work(l, scatter_run, label);
}

static void scatter_nd_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* it = sk_input(l, 0);
  TF_Tensor* ut = sk_input(l, 1);
  TF_Tensor* st = sk_input(l, 2);
  sk_shape ss, os;
  if (it == NULL || ut == NULL || st == NULL || !sk_shape_of(l, st, &ss))
    return;
  if (ss.nd != 1) { /* TF CPU's check and message (scatter_nd_op.cc) */
    sk_fail(l, TF_INVALID_ARGUMENT, "Shape must be a vector");
    return;
  }
  if (!sk_shape_from_tensor(l, st, NULL, &os)) return;
  scatter_launch(l, NULL, it, ut, &os, true, "ScatterNd");
}

static int add_marker;
static void tensor_scatter_compute(sk_launch* l, void* state) {
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* it = sk_input(l, 1);
  TF_Tensor* ut = sk_input(l, 2);
  sk_shape os;
  if (x == NULL || it == NULL || ut == NULL || !sk_shape_of(l, x, &os)) return;
  bool add = state == &add_marker;
  scatter_launch(l, x, it, ut, &os, add,
                 add ? "TensorScatterAdd" : "TensorScatterUpdate");
}

static void* scatter_nd_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, scatter_nd_compute, NULL, NULL);
}
static void* tensor_scatter_update_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, tensor_scatter_compute, NULL, NULL);
}
static void* tensor_scatter_add_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, tensor_scatter_compute, &add_marker, NULL);
}

/* ---- registration ---------------------------------------------------------
 */

static const TF_DataType kAddTypes[] = {TF_FLOAT, TF_DOUBLE, TF_INT64, 0};
static const TF_DataType kMoveTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF,  TF_BFLOAT16,  TF_INT64, TF_UINT8,
    TF_BOOL,  TF_INT8,   TF_INT16, TF_COMPLEX64, 0};
static const TF_DataType kIndexTypes[] = {TF_INT32, TF_INT64, 0};
static const char* const kShapeHost[] = {"shape", NULL};

static const sk_op kOps[] = {
    {"ScatterNd", scatter_nd_create, "T", kAddTypes, kShapeHost, "Tindices",
     kIndexTypes},
    {"TensorScatterUpdate", tensor_scatter_update_create, "T", kMoveTypes, NULL,
     "Tindices", kIndexTypes},
    {"TensorScatterAdd", tensor_scatter_add_create, "T", kAddTypes, NULL,
     "Tindices", kIndexTypes},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_scatter(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
