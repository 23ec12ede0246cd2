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

#include "kernels/array/array.h"

typedef struct scatter_args {
  const void* idx;
  TF_DataType it, t;
  const char* src; /* TensorScatter*: the input tensor; NULL: zeros */
  const char* upd;
  char* y;
  size_t es;
  bool add;
  int k;                   /* index depth */
  int64_t rows, slice;     /* N index rows, elements per slice */
  int64_t st[SK_MAX_DIMS]; /* output strides (in slices) of the K dims */
  sk_shape os;
  int64_t total; /* output elements */
} scatter_args;

/* The slice offset of index row r, or -1 if out of range. */
static int64_t row_offset(const scatter_args* a, int64_t r) {
  int64_t off = 0;
  for (int j = 0; j < a->k; j++) {
    int64_t v = sk_index(a->it, a->idx, r * a->k + j);
    if (v < 0 || v >= a->os.d[j]) return -1;
    off += v * a->st[j];
  }
  return off;
}

static void scatter_cols(void* arg, int64_t b, int64_t e) {
  const scatter_args* a = arg;
  for (int64_t r = 0; r < a->rows; r++) {
    int64_t yo = row_offset(a, r) * a->slice, uo = r * a->slice;
    if (!a->add) {
      memcpy(a->y + (size_t)(yo + b) * a->es, a->upd + (size_t)(uo + b) * a->es,
             (size_t)(e - b) * a->es);
    } else if (a->t == TF_FLOAT) {
      float* y = (float*)a->y;
      const float* u = (const float*)a->upd;
      for (int64_t c = b; c < e; c++) y[yo + c] += u[uo + c];
    } else if (a->t == TF_DOUBLE) {
      double* y = (double*)a->y;
      const double* u = (const double*)a->upd;
      for (int64_t c = b; c < e; c++) y[yo + c] += u[uo + c];
    } else { /* int64, wrapping */
      uint64_t* y = (uint64_t*)a->y;
      const uint64_t* u = (const uint64_t*)a->upd;
      for (int64_t c = b; c < e; c++) y[yo + c] += u[uo + c];
    }
  }
}

static void scatter_run(sk_launch* l, void* args) {
  scatter_args* a = args;
  for (int64_t r = 0; r < a->rows; r++) {
    if (row_offset(a, r) >= 0) continue;
    char b[SK_MAX_DIMS * 24 + 4], o[256];
    size_t n = 0;
    for (int j = 0; j < a->k && n < sizeof(b); j++)
      n += (size_t)snprintf(b + n, sizeof(b) - n, j ? ", %lld" : "%lld",
                            (long long)sk_index(a->it, a->idx, r * a->k + j));
    sk_fail(l, TF_INVALID_ARGUMENT,
            "indices[%lld] = [%s] does not index into shape %s", (long long)r,
            b, sk_shape_str(&a->os, o, sizeof(o)));
    return;
  }
  if (a->src == NULL)
    memset(a->y, 0, (size_t)a->total * a->es);
  else if (a->src != a->y)
    memcpy(a->y, a->src, (size_t)a->total * a->es);
  if (a->slice == 0) return;
  int64_t grain = SKA_GRAIN / (a->rows > 0 ? a->rows : 1);
  sim_parallel_for(a->slice, grain > 0 ? grain : 1, scatter_cols, a);
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
  a->k = (int)is.d[is.nd - 1];
  a->rows = 1;
  for (int i = 0; i < is.nd - 1; i++) a->rows *= is.d[i];
  a->slice = 1;
  for (int i = a->k; i < os->nd; i++) a->slice *= os->d[i];
  int64_t s = 1;
  for (int j = a->k - 1; j >= 0; j--) {
    a->st[j] = s;
    s *= os->d[j];
  }
  a->idx = sk_data(it);
  a->it = TF_TensorType(it);
  a->t = TF_TensorType(ut);
  a->src = src ? sk_data(src) : NULL;
  a->upd = sk_data(ut);
  a->y = sk_mdata(y);
  a->es = TF_DataTypeSize(a->t);
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
