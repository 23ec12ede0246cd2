/*
 * softmax.c - Softmax and LogSoftmax over the last axis, and the fused
 * softmax cross-entropy losses (sparse int labels and dense labels).
 *
 * Every op works row by row on a [rows, classes] view: one row is the last
 * axis. A row is numerically stable the usual way: subtract the row's max
 * before exp; the sum of exps is accumulated in double in index order, so
 * results are deterministic and rows are independent (sim_parallel_for
 * spreads rows; the cut never changes a row's arithmetic).
 *
 * SparseSoftmaxCrossEntropyWithLogits keeps its labels (int32 or int64: the
 * Tlabels attribute is left unconstrained) in device memory, so the range
 * check [0, classes) runs on the stream worker before any row is computed
 * and fails the launch with InvalidArgument, as TF's CPU kernel does.
 *
 * Thread contract: *_compute run on TF's thread (shapes only); *_run and the
 * row functions run on the stream worker and touch only their args.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/framework/sk.h"

#define SM_GRAIN_ELEMS 32768

/* Rows per parallel range: about SM_GRAIN_ELEMS elements. */
static int64_t sm_grain(int64_t cols) {
  int64_t g = SM_GRAIN_ELEMS / (cols > 0 ? cols : 1);
  return g < 1 ? 1 : g;
}

/* ---- Softmax / LogSoftmax ------------------------------------------------ */

typedef struct sm_args {
  TF_DataType dt;
  bool log;
  const void* x;
  void* y;
  int64_t rows, cols;
} sm_args;

/* One row per type: m = max, s = sum exp(x - m) (double), then the output. */
#define SM_ROWS(NAME, T, EXP)                                   \
  static void NAME(const sm_args* a, int64_t r0, int64_t r1) {  \
    int64_t c = a->cols;                                        \
    for (int64_t r = r0; r < r1; r++) {                         \
      const T* x = (const T*)a->x + r * c;                      \
      T* y = (T*)a->y + r * c;                                  \
      T m = x[0];                                               \
      for (int64_t j = 1; j < c; j++)                           \
        if (x[j] > m || x[j] != x[j]) m = m != m ? m : x[j];    \
      double s = 0;                                             \
      if (a->log) {                                             \
        for (int64_t j = 0; j < c; j++) s += EXP(x[j] - m);     \
        T ls = (T)log(s);                                       \
        for (int64_t j = 0; j < c; j++) y[j] = (x[j] - m) - ls; \
      } else {                                                  \
        for (int64_t j = 0; j < c; j++) {                       \
          y[j] = EXP(x[j] - m);                                 \
          s += y[j];                                            \
        }                                                       \
        for (int64_t j = 0; j < c; j++) y[j] = (T)(y[j] / s);   \
      }                                                         \
    }                                                           \
  }

SM_ROWS(sm_rows_f32, float, expf)
SM_ROWS(sm_rows_f64, double, exp)

static void sm_range(void* arg, int64_t r0, int64_t r1) {
  const sm_args* a = arg;
  if (a->dt == TF_FLOAT)
    sm_rows_f32(a, r0, r1);
  else
    sm_rows_f64(a, r0, r1);
}

static void sm_run(sk_launch* l, void* args) {
  (void)l;
  sm_args* a = args;
  sim_parallel_for(a->rows, sm_grain(a->cols), sm_range, a);
}

static void sm_compute(sk_launch* l, void* state) {
  bool is_log = state != NULL;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape s;
  char buf[128];
  if (x == NULL || !sk_shape_of(l, x, &s)) return;
  if (s.nd < 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "logits must have >= 1 dimension, got %s",
            sk_shape_str(&s, buf, sizeof(buf)));
    return;
  }
  TF_Tensor* y = sk_output(l, 0, &s);
  sm_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || s.n == 0) return;
  a->dt = TF_TensorType(x);
  a->log = is_log;
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->cols = s.d[s.nd - 1];
  a->rows = s.n / a->cols;
  sk_work(l, sm_run, is_log ? "LogSoftmax" : "Softmax");
}

/* ---- cross-entropy ------------------------------------------------------- */

/* Both losses: row r of logits at x + r*xrs (column stride xcs, 0 when
 * broadcast); dense labels likewise at lab + r*lrs, lcs; sparse labels in
 * `ids` (int32 or int64). */
typedef struct xent_args {
  TF_DataType dt;
  bool sparse;
  const void* x;
  int64_t xrs, xcs;
  const void* lab;
  int64_t lrs, lcs;
  TF_DataType id_dt;
  const void* ids;
  void* loss;
  void* back;
  int64_t rows, cols;
} xent_args;

static int64_t xent_label(const xent_args* a, int64_t r) {
  return sk_index(a->id_dt, a->ids, r);
}

/* loss = sum_j p_j * (log(sum exp) - (x_j - m)), backprop = softmax - p,
 * where p is the label distribution (one-hot for sparse labels). */
#define XENT_ROWS(NAME, T, EXP)                                  \
  static void NAME(const xent_args* a, int64_t r0, int64_t r1) { \
    int64_t c = a->cols;                                         \
    for (int64_t r = r0; r < r1; r++) {                          \
      const T* x = (const T*)a->x + r * a->xrs;                  \
      T* b = (T*)a->back + r * c;                                \
      T m = c > 0 ? x[0] : 0;                                    \
      for (int64_t j = 1; j < c; j++) {                          \
        T v = x[j * a->xcs];                                     \
        if (v > m || v != v) m = m != m ? m : v;                 \
      }                                                          \
      double s = 0;                                              \
      for (int64_t j = 0; j < c; j++) {                          \
        b[j] = EXP(x[j * a->xcs] - m);                           \
        s += b[j];                                               \
      }                                                          \
      T ls = (T)log(s);                                          \
      double loss = 0;                                           \
      if (a->sparse) {                                           \
        int64_t k = xent_label(a, r);                            \
        for (int64_t j = 0; j < c; j++) b[j] = (T)(b[j] / s);    \
        b[k] -= (T)1;                                            \
        loss = ls - (x[k * a->xcs] - m);                         \
      } else {                                                   \
        const T* p = (const T*)a->lab + r * a->lrs;              \
        for (int64_t j = 0; j < c; j++) {                        \
          T pj = p[j * a->lcs];                                  \
          loss += (double)(pj * (ls - (x[j * a->xcs] - m)));     \
          b[j] = (T)(b[j] / s) - pj;                             \
        }                                                        \
      }                                                          \
      ((T*)a->loss)[r] = (T)loss;                                \
    }                                                            \
  }

XENT_ROWS(xent_rows_f32, float, expf)
XENT_ROWS(xent_rows_f64, double, exp)

static void xent_range(void* arg, int64_t r0, int64_t r1) {
  const xent_args* a = arg;
  if (a->dt == TF_FLOAT)
    xent_rows_f32(a, r0, r1);
  else
    xent_rows_f64(a, r0, r1);
}

/* Fails the launch if a sparse label is outside [0, cols). */
static bool xent_labels_ok(sk_launch* l, const xent_args* a) {
  int64_t bad = -1;
  for (int64_t r = 0; r < a->rows && bad < 0; r++) {
    int64_t k = xent_label(a, r);
    if (k < 0 || k >= a->cols) bad = r;
  }
  if (bad < 0) return true;
  char vals[256];
  size_t n = 0;
  for (int64_t r = 0; r < a->rows && n < 200; r++)
    n += (size_t)snprintf(vals + n, sizeof(vals) - n, " %" PRId64,
                          xent_label(a, r));
  if (a->rows > 0 && n >= 200) snprintf(vals + n, sizeof(vals) - n, " ...");
  sk_fail(l, TF_INVALID_ARGUMENT,
          "Received a label value of %" PRId64
          " which is outside the valid range of [0, %" PRId64
          ").  Label values:%s",
          xent_label(a, bad), a->cols, vals);
  return false;
}

static void xent_run(sk_launch* l, void* args) {
  xent_args* a = args;
  if (a->sparse && !xent_labels_ok(l, a)) return;
  sim_parallel_for(a->rows, sm_grain(a->cols), xent_range, a);
}

/* Allocates loss [rows] and backprop [rows, cols] and queues the rows. */
static void xent_queue(sk_launch* l, xent_args* a, int64_t rows, int64_t cols,
                       const char* label) {
  sk_shape ls = {.nd = 1, .d = {rows}, .n = rows};
  sk_shape bs = {.nd = 2, .d = {rows, cols}, .n = rows * cols};
  TF_Tensor* loss = sk_output(l, 0, &ls);
  TF_Tensor* back = sk_output(l, 1, &bs);
  if (!sk_ok(l) || rows == 0) return;
  a->loss = sk_mdata(loss);
  a->back = sk_mdata(back);
  a->rows = rows;
  a->cols = cols;
  sk_work(l, xent_run, label);
}

static void sparse_xent_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* ids = sk_input(l, 1);
  sk_shape xs, is;
  char b1[128], b2[128];
  if (x == NULL || ids == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, ids, &is))
    return;
  if (xs.nd != 2) {
    sk_fail(l, TF_INVALID_ARGUMENT, "logits must be 2-D, but got shape %s",
            sk_shape_str(&xs, b1, sizeof(b1)));
  } else if (is.nd != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "labels must be 1-D, but got shape %s",
            sk_shape_str(&is, b1, sizeof(b1)));
  } else if (xs.d[0] != is.d[0]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "logits and labels must have the same first dimension, got "
            "logits shape %s and labels shape %s",
            sk_shape_str(&xs, b1, sizeof(b1)),
            sk_shape_str(&is, b2, sizeof(b2)));
  } else if (xs.d[1] == 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Must have at least one class, but got logits shape %s",
            sk_shape_str(&xs, b1, sizeof(b1)));
  }
  xent_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l)) return;
  a->dt = TF_TensorType(x);
  a->sparse = true;
  a->x = sk_data(x);
  a->xrs = xs.d[1];
  a->xcs = 1;
  a->id_dt = TF_TensorType(ids);
  a->ids = sk_data(ids);
  if (a->id_dt != TF_INT32 && a->id_dt != TF_INT64) {
    sk_fail(l, TF_INVALID_ARGUMENT, "labels must be int32 or int64");
    return;
  }
  xent_queue(l, a, xs.d[0], xs.d[1], "SparseSoftmaxCrossEntropyWithLogits");
}

/* Broadcasts shapes a and b (rank <= 2) to [rows, cols]; sets the row and
 * column strides of each (0 along a broadcast dimension). */
static bool xent_broadcast(const sk_shape* a, const sk_shape* b, int64_t* rows,
                           int64_t* cols, int64_t st[2][2]) {
  if (a->nd > 2 || b->nd > 2 || (a->nd < 2 && b->nd < 2)) return false;
  const sk_shape* in[2] = {a, b};
  int64_t d[2][2];
  for (int i = 0; i < 2; i++) {
    d[i][0] = in[i]->nd == 2 ? in[i]->d[0] : 1;
    d[i][1] = in[i]->nd >= 1 ? in[i]->d[in[i]->nd - 1] : 1;
  }
  int64_t out[2];
  for (int k = 0; k < 2; k++) {
    if (d[0][k] != d[1][k] && d[0][k] != 1 && d[1][k] != 1) return false;
    out[k] = d[0][k] == 1 ? d[1][k] : d[0][k];
  }
  for (int i = 0; i < 2; i++) {
    st[i][0] = d[i][0] == 1 && out[0] != 1 ? 0 : d[i][1];
    st[i][1] = d[i][1] == 1 && out[1] != 1 ? 0 : 1;
  }
  *rows = out[0];
  *cols = out[1];
  return true;
}

static void dense_xent_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* p = sk_input(l, 1);
  sk_shape xs, ps;
  char b1[128], b2[128];
  if (x == NULL || p == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, p, &ps))
    return;
  int64_t rows = 0, cols = 0, st[2][2];
  if (xs.nd > 2 || ps.nd > 2 || (xs.nd < 2 && ps.nd < 2)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "logits and labels must be either 2-dimensional, or broadcasted "
            "to be 2-dimensional");
    return;
  }
  if (!xent_broadcast(&xs, &ps, &rows, &cols, st)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "logits and labels must be broadcastable: logits_size=%s "
            "labels_size=%s",
            sk_shape_str(&xs, b1, sizeof(b1)),
            sk_shape_str(&ps, b2, sizeof(b2)));
    return;
  }
  xent_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l)) return;
  a->dt = TF_TensorType(x);
  a->x = sk_data(x);
  a->xrs = st[0][0];
  a->xcs = st[0][1];
  a->lab = sk_data(p);
  a->lrs = st[1][0];
  a->lcs = st[1][1];
  xent_queue(l, a, rows, cols, "SoftmaxCrossEntropyWithLogits");
}

/* ---- registration -------------------------------------------------------- */

static int kLogTag; /* non-NULL state marks LogSoftmax */

static void* softmax_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, sm_compute, NULL, NULL);
}
static void* log_softmax_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, sm_compute, &kLogTag, NULL);
}
static void* sparse_xent_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, sparse_xent_compute, NULL, NULL);
}
static void* dense_xent_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, dense_xent_compute, NULL, NULL);
}

static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, 0};

/* Tlabels is left unconstrained: one kernel serves int32 and int64 labels. */
static const sk_op kOps[] = {
    {"Softmax", softmax_create, "T", kFloatTypes, NULL},
    {"LogSoftmax", log_softmax_create, "T", kFloatTypes, NULL},
    {"SparseSoftmaxCrossEntropyWithLogits", sparse_xent_create, "T",
     kFloatTypes, NULL},
    {"SoftmaxCrossEntropyWithLogits", dense_xent_create, "T", kFloatTypes,
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_softmax(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
