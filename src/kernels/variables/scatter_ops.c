/*
 * scatter_ops.c - ResourceScatterAdd/Sub/Mul/Div/Min/Max/Update and
 * ResourceScatterNdUpdate/Add/Sub/Min/Max on SIMDEV (TF 2.16-2.18, where
 * TF exports kernels_experimental.h's functions: variables.h): rows of
 * updates combined into the rows of a variable that indices name, in
 * place, with arith/gather.h's scatter walk (ScatterNd's core).
 *
 * Locks: TF's kernels switch the variable to copy-on-read mode
 * (EnsureSparseVariableAccess) and then update its buffer in place,
 * ResourceScatter* under the mutex shared (POD types), ResourceScatterNd*
 * exclusively. Here skv_lock's sparse flag does the first (a shared
 * buffer's copy queued on the stream) and the mutex is held exclusively
 * for both while the update is queued, so stream order is the mutex's.
 *
 * indices live in host memory (TF's GPU kernels keep them on the device):
 * a synchronous kernel cannot fail once its work is queued, so every
 * index is checked on TF's thread before anything is queued. A bad index
 * fails the op with TF CPU's message and nothing is written; TF CPU has
 * then applied the rows before the bad one (its loop checks as it goes),
 * TF's GPU skips bad indices and applies the rest.
 *
 * Numerics: the rows are applied one after the other, in index order,
 * each element once per row (arith/gather.h), so duplicate indices
 * accumulate in TF CPU's order: one IEEE operation per element and row;
 * half and bfloat16 through float32, rounded to nearest even after each
 * row (Eigen's half arithmetic); int64 adds wrap; Min/Max keep the
 * variable's element unless the update compares below (above) it, so a
 * NaN update leaves it and a NaN element stays (Eigen's cwiseMin/Max).
 * Update with duplicates: the last row wins.
 *
 * Thread contract: compute functions on TF's thread; the steps on the
 * stream worker (and sim_parallel_for's helpers), touching only their
 * args.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith/gather.h"
#include "kernels/framework/f16.h"
#include "kernels/variables/variables.h"

typedef enum op_kind { ASSIGN, ADD, SUB, MUL, DIV, MIN, MAX } op_kind;

typedef struct scatter_state {
  op_kind op;
  bool nd; /* ResourceScatterNd* */
  const char* name;
} scatter_state;

/* ---- the element operations (stream worker) ----------------------------- */

typedef struct combine_ctx {
  op_kind op;
  TF_DataType dt;
} combine_ctx;

#define APPLY(a, b, op)                    \
  ((op) == ADD   ? (a) + (b)               \
   : (op) == SUB ? (a) - (b)               \
   : (op) == MUL ? (a) * (b)               \
   : (op) == DIV ? (a) / (b)               \
   : (op) == MIN ? ((b) < (a) ? (b) : (a)) \
                 : ((a) < (b) ? (b) : (a)))

#define LOOP(T)                                        \
  do {                                                 \
    T* y = (T*)yp;                                     \
    const T* u = (const T*)up;                         \
    for (int64_t i = 0; i < n; i++)                    \
      y[i] = (T)APPLY(y[i], u[ubcast ? 0 : i], c->op); \
  } while (0)

#define LOOP16(TO, FROM)                                          \
  do {                                                            \
    uint16_t* y = (uint16_t*)yp;                                  \
    const uint16_t* u = (const uint16_t*)up;                      \
    for (int64_t i = 0; i < n; i++)                               \
      y[i] = FROM(APPLY(TO(y[i]), TO(u[ubcast ? 0 : i]), c->op)); \
  } while (0)

/* Complex add and subtract, part by part (the only complex ops here). */
#define LOOPC(T)                                 \
  do {                                           \
    T* y = (T*)yp;                               \
    const T* u = (const T*)up;                   \
    for (int64_t i = 0; i < 2 * n; i++) {        \
      T v = u[ubcast ? (i & 1) : i];             \
      y[i] = c->op == ADD ? y[i] + v : y[i] - v; \
    }                                            \
  } while (0)

static void combine(const void* ctx, char* yp, const char* up, bool ubcast,
                    int64_t n) {
  const combine_ctx* c = ctx;
  if (c->op == ASSIGN) {
    size_t es = TF_DataTypeSize(c->dt);
    if (!ubcast) {
      memcpy(yp, up, (size_t)n * es);
    } else {
      for (int64_t i = 0; i < n; i++) memcpy(yp + (size_t)i * es, up, es);
    }
    return;
  }
  switch (c->dt) {
    case TF_FLOAT: LOOP(float); break;
    case TF_DOUBLE: LOOP(double); break;
    case TF_HALF: LOOP16(skh_half_to_float, skh_float_to_half); break;
    case TF_BFLOAT16: LOOP16(skh_bf16_to_float, skh_float_to_bf16); break;
    case TF_COMPLEX64: LOOPC(float); break;
    case TF_COMPLEX128: LOOPC(double); break;
    default: /* TF_INT64: adds and subtractions wrap, Min/Max signed */
      if (c->op == ADD || c->op == SUB) {
        uint64_t* y = (uint64_t*)yp;
        const uint64_t* u = (const uint64_t*)up;
        for (int64_t i = 0; i < n; i++)
          y[i] = c->op == ADD ? y[i] + u[ubcast ? 0 : i]
                              : y[i] - u[ubcast ? 0 : i];
      } else {
        LOOP(int64_t);
      }
      break;
  }
}

typedef struct scatter_args {
  sa_scatter s;
  combine_ctx c;
} scatter_args;

static void scatter_step(void* args) {
  scatter_args* a = args;
  a->s.ctx = &a->c; /* args were copied: point at this copy */
  sa_scatter_run(&a->s);
}

/* ---- checks (TF thread) ------------------------------------------------- */

/* ResourceScatter*: updates.shape == indices.shape + params.shape[1:], or
 * a scalar. TF CPU checks the rank and that indices' shape is a prefix,
 * then reads updates as [N, size / N] whatever params' rows are (rows of
 * another length give undefined results there); simdev also requires the
 * rest to be params.shape[1:], with TF's words for the rule. */
static bool rows_shapes(sk_launch* l, const sk_shape* xs, const sk_shape* is,
                        const sk_shape* us) {
  char b1[256], b2[256], b3[256];
  if (xs->nd < 1) { /* TF CPU reads dim 0 of a scalar */
    sk_fail(l, TF_INVALID_ARGUMENT, "params must be at least 1 dimensional");
    return false;
  }
  if (us->nd == 0) return true;
  bool ok = us->nd == is->nd + xs->nd - 1;
  bool prefix = ok;
  for (int i = 0; prefix && i < is->nd; i++) prefix = us->d[i] == is->d[i];
  for (int i = 1; ok && prefix && i < xs->nd; i++)
    ok = us->d[is->nd + i - 1] == xs->d[i];
  if (ok && !prefix) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "The shape of indices (%s) must be a prefix of the shape of "
            "updates (%s)",
            sk_shape_str(is, b1, sizeof(b1)), sk_shape_str(us, b2, sizeof(b2)));
    return false;
  }
  if (!ok) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Must have updates.shape = indices.shape + params.shape[1:] or "
            "updates.shape = [], got updates.shape %s, indices.shape %s, "
            "params.shape %s",
            sk_shape_str(us, b1, sizeof(b1)), sk_shape_str(is, b2, sizeof(b2)),
            sk_shape_str(xs, b3, sizeof(b3)));
    return false;
  }
  return true;
}

/* ResourceScatterNd*: TF's ValidateScatterNdUpdateShape, its words. */
static bool nd_shapes(sk_launch* l, const sk_shape* xs, const sk_shape* is,
                      const sk_shape* us) {
  char b1[256], b2[256];
  if (is->nd < 1) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Indices shape must have rank at least one. Found:%s",
            sk_shape_str(is, b1, sizeof(b1)));
    return false;
  }
  int64_t slice_dim = is->nd > 1 ? is->d[is->nd - 1] : 1;
  int batch_dim = is->nd > 1 ? is->nd - 1 : 1;
  bool prefix_ok = us->nd >= batch_dim;
  for (int d = 0; prefix_ok && d < batch_dim; d++)
    prefix_ok = us->d[d] == is->d[d];
  bool suffix_ok =
      slice_dim <= xs->nd && us->nd == batch_dim + xs->nd - slice_dim;
  for (int d = 0; suffix_ok && d < us->nd - batch_dim; d++)
    suffix_ok = us->d[d + batch_dim] == xs->d[d + slice_dim];
  if (us->nd < batch_dim || (suffix_ok && !prefix_ok)) {
    /* With the element counts of the two prefixes, as TF CPU prints them
     * (it reads dims an updates tensor of lower rank lacks: here those
     * count as 1). */
    int64_t pi = 1, pu = 1;
    for (int d = 0; d < batch_dim; d++) {
      pi *= d < is->nd ? is->d[d] : 1;
      pu *= d < us->nd ? us->d[d] : 1;
    }
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Dimensions [0,%d) of indices[shape=%s] = %lld must match "
            "dimensions [0,%d) of updates[shape=%s] = %lld",
            batch_dim, sk_shape_str(is, b1, sizeof(b1)), (long long)pi,
            batch_dim, sk_shape_str(us, b2, sizeof(b2)), (long long)pu);
    return false;
  }
  if (!suffix_ok) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Dimensions [%lld,%d) of input[shape=%s] must match dimensions "
            "[%lld,%d) of updates[shape=%s]",
            (long long)slice_dim, xs->nd, sk_shape_str(xs, b1, sizeof(b1)),
            (long long)slice_dim, us->nd, sk_shape_str(us, b2, sizeof(b2)));
    return false;
  }
  return true;
}

/* The index-space checks both kinds share (TF CPU's words). */
static bool index_space(sk_launch* l, TF_DataType it, int64_t n,
                        const sk_shape* xs) {
  if (it != TF_INT32) return true;
  if (n > INT32_MAX) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "indices has too many elements for int32 indexing: %lld > %d",
            (long long)n, INT32_MAX);
    return false;
  }
  if (xs->nd > 0 && xs->d[0] > INT32_MAX) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "params.shape[0] too large for int32 indexing: %lld > %d",
            (long long)xs->d[0], INT32_MAX);
    return false;
  }
  return true;
}

/* Checks everything and queues the update (under the caller's lock). */
static void scatter_plan(sk_launch* l, const scatter_state* st, TF_Tensor* x,
                         TF_Tensor* it, TF_Tensor* ut) {
  sk_shape xs, is, us;
  if (!sk_shape_of(l, x, &xs) || !sk_shape_of(l, it, &is) ||
      !sk_shape_of(l, ut, &us))
    return;
  if (TF_TensorType(x) != TF_TensorType(ut)) {
    /* TF CPU's words for ResourceScatter*; its ResourceScatterNd* kernels
     * CHECK-fail (abort) here. */
    sk_fail(l, TF_INVALID_ARGUMENT,
            "DType of scatter resource and updates does not match.");
    return;
  }
  if (!(st->nd ? nd_shapes(l, &xs, &is, &us) : rows_shapes(l, &xs, &is, &us)))
    return;
  if (!index_space(l, TF_TensorType(it), is.n, &xs)) return;
  scatter_args a = {.c = {.op = st->op, .dt = TF_TensorType(x)}};
  sa_scatter* s = &a.s;
  int k = st->nd ? (int)(is.nd > 1 ? is.d[is.nd - 1] : 1) : 1;
  s->rows = 1;
  if (st->nd) {
    for (int i = 0; i < (is.nd > 1 ? is.nd - 1 : 1); i++) s->rows *= is.d[i];
  } else {
    s->rows = is.n;
  }
  if (s->rows == 0) return; /* TF: nothing to check or do */
  if (st->nd && xs.n == 0) {
    char b[256];
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Indices and updates specified for empty output.  indices shape: "
            "%s",
            sk_shape_str(&is, b, sizeof(b)));
    return;
  }
  sa_nd_init(&s->nd, sk_data(it), TF_TensorType(it) == TF_INT64, xs.d, k);
  int64_t bad = sa_nd_bad(&s->nd, s->rows);
  if (bad >= 0) {
    char p[SK_MAX_DIMS * 24], v[SK_MAX_DIMS * 24 + 4], b[256];
    if (!st->nd) {
      sk_index_string(&is, bad, p, sizeof(p));
      sk_fail(l, TF_INVALID_ARGUMENT, "indices%s = %lld is not in [0, %lld)", p,
              (long long)sa_index(s->nd.idx64, s->nd.idx, bad),
              (long long)xs.d[0]);
      return;
    }
    sk_shape ps = is; /* indices.shape[:-1], for the position */
    if (ps.nd > 1) ps.nd--;
    sk_index_string(&ps, bad, p, sizeof(p));
    sa_nd_row_string(&s->nd, bad, v, sizeof(v));
    sk_fail(l, TF_INVALID_ARGUMENT,
            "indices%s = [%s] does not index into shape %s", p, v,
            sk_shape_str(&xs, b, sizeof(b)));
    return;
  }
  if (xs.n == 0) return; /* rows of no elements: nothing to write */
  s->slice = 1;
  for (int i = k; i < xs.nd; i++) s->slice *= xs.d[i];
  s->y = sk_mdata(x);
  s->upd = sk_data(ut);
  s->es = TF_DataTypeSize(TF_TensorType(x));
  s->ubcast = !st->nd && us.nd == 0;
  s->combine = combine;
  sk_work_now(l, scatter_step, &a, sizeof(a), st->name);
}

static void scatter_compute(sk_launch* l, void* state) {
  const scatter_state* st = state;
  TF_Tensor* it = sk_input(l, 1);
  TF_Tensor* ut = sk_input(l, 2);
  static const int kVar[] = {0};
  TF_VariableInputLockHolder* h =
      it != NULL && ut != NULL ? skv_lock(l, kVar, 1, true) : NULL;
  TF_Tensor* x = h != NULL ? skv_tensor(l, 0, true) : NULL;
  /* Queued before the unlock: the next holder of the mutex queues its
   * work behind this update. */
  if (x != NULL) scatter_plan(l, st, x, it, ut);
  skv_unlock(h);
}

/* ---- construction and registration ------------------------------------ */

static void* scatter_new(TF_OpKernelConstruction* c, op_kind op, bool nd,
                         const char* name) {
  scatter_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->op = op;
  st->nd = nd;
  st->name = name;
  return sk_kernel_new(c, scatter_compute, st, free);
}

#define CREATE(fn, op, nd, name)                \
  static void* fn(TF_OpKernelConstruction* c) { \
    return scatter_new(c, op, nd, name);        \
  }
CREATE(add_create, ADD, false, "ResourceScatterAdd")
CREATE(sub_create, SUB, false, "ResourceScatterSub")
CREATE(mul_create, MUL, false, "ResourceScatterMul")
CREATE(div_create, DIV, false, "ResourceScatterDiv")
CREATE(min_create, MIN, false, "ResourceScatterMin")
CREATE(max_create, MAX, false, "ResourceScatterMax")
CREATE(update_create, ASSIGN, false, "ResourceScatterUpdate")
CREATE(nd_update_create, ASSIGN, true, "ResourceScatterNdUpdate")
CREATE(nd_add_create, ADD, true, "ResourceScatterNdAdd")
CREATE(nd_sub_create, SUB, true, "ResourceScatterNdSub")
CREATE(nd_min_create, MIN, true, "ResourceScatterNdMin")
CREATE(nd_max_create, MAX, true, "ResourceScatterNdMax")

/* TF's GPU registrations, less int32 (no int32 variable on SIMDEV:
 * resource_ops.c's kMoveTypes) and variant. ResourceScatter*:
 * TF_CALL_GPU_NUMBER_TYPES (half, bfloat16, float, double); Update also
 * bool with int32 indices and int64 with int64 indices, as TF's GPU has
 * them. ResourceScatterNd*: int64 and the GPU numbers, and complex for
 * Update/Add/Sub. */
static const TF_DataType kNumbers[] = {TF_FLOAT, TF_DOUBLE, TF_HALF,
                                       TF_BFLOAT16, 0};
static const TF_DataType kBool[] = {TF_BOOL, 0};
static const TF_DataType kInt64[] = {TF_INT64, 0};
static const TF_DataType kNdAll[] = {TF_FLOAT,      TF_DOUBLE, TF_HALF,
                                     TF_BFLOAT16,   TF_INT64,  TF_COMPLEX64,
                                     TF_COMPLEX128, 0};
static const TF_DataType kNdMinMax[] = {TF_FLOAT,    TF_DOUBLE, TF_HALF,
                                        TF_BFLOAT16, TF_INT64,  0};
static const TF_DataType kIndexTypes[] = {TF_INT32, TF_INT64, 0};
static const TF_DataType kIndex32[] = {TF_INT32, 0};
static const TF_DataType kIndex64[] = {TF_INT64, 0};
/* The handle, and the indices (checked on TF's thread: the file's top). */
static const char* const kHost[] = {"resource", "indices", NULL};
static const char* const kHostNd[] = {"ref", "indices", NULL};

#define ROW(name, fn) \
  { name, fn, "dtype", kNumbers, kHost, "Tindices", kIndexTypes, .sync = 1 }
#define ND(name, fn, types) \
  { name, fn, "T", types, kHostNd, "Tindices", kIndexTypes, .sync = 1 }

static const sk_op kOps[] = {
    ROW("ResourceScatterAdd", add_create),
    ROW("ResourceScatterSub", sub_create),
    ROW("ResourceScatterMul", mul_create),
    ROW("ResourceScatterDiv", div_create),
    ROW("ResourceScatterMin", min_create),
    ROW("ResourceScatterMax", max_create),
    ROW("ResourceScatterUpdate", update_create),
    {"ResourceScatterUpdate", update_create, "dtype", kBool, kHost, "Tindices",
     kIndex32, .sync = 1},
    {"ResourceScatterUpdate", update_create, "dtype", kInt64, kHost, "Tindices",
     kIndex64, .sync = 1},
    ND("ResourceScatterNdUpdate", nd_update_create, kNdAll),
    ND("ResourceScatterNdAdd", nd_add_create, kNdAll),
    ND("ResourceScatterNdSub", nd_sub_create, kNdAll),
    ND("ResourceScatterNdMin", nd_min_create, kNdMinMax),
    ND("ResourceScatterNdMax", nd_max_create, kNdMinMax),
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_scatter_ops(char* msg, size_t len) {
  const char* missing = NULL;
  if (!skv_resolve(&missing)) return true; /* resource_ops.c says why */
  return sk_register_ops(kOps, msg, len);
}
