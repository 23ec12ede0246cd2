/*
 * apply.c - the training (optimizer) kernels on SIMDEV, registered only
 * where TF exports kernels_experimental.h's functions (2.16-2.18;
 * variables.h says why): the ResourceApply* and ResourceSparseApply* ops
 * TF 2.18.1's GPU device registers, for the dtypes it registers them
 * (float16, float32, float64; measured with the tensorflow 2.18.1 GPU
 * wheel's kernel registry). One table (kApply) describes every op: its
 * variables, scalars and gradient, the attributes that change the update,
 * and TF's checks in TF's order with TF's messages; apply_math.c has one
 * update per optimizer, shared by the dense op and the sparse one.
 *
 * Like resource_ops.c's updates, each kernel is synchronous: lock the
 * variables (TF's order; sparse ops in copy-on-read mode, as TF's sparse
 * kernels ask), take their tensors (TF copies a shared buffer first, queued
 * on the stream), check, queue the update (sk_work_now) and unlock. The
 * hyperparameters stay in device memory, as with TF's GPU kernels, and are
 * read by the queued step on the stream, never on TF's thread. A sparse
 * op's indices are host memory (TF's GPU kernels keep them on the device):
 * its out-of-range index must fail the op with TF's InvalidArgument before
 * anything is queued, and a queued step cannot fail (sk.h).
 *
 * Differences from TF's kernels (docs/kernel-api.md, "Variables"): the
 * variables are always locked (TF locks only with use_locking=true, except
 * for the sparse ops' copy-on-read switch): TF_GetInputTensorFromVariable
 * may replace a variable's buffer, which needs the mutex (variables.h); no
 * complex64/complex128 kernels (TF's GPU has them for ten of these ops);
 * the hyperparameters' values are not checked (ProximalAdagrad's
 * "lr is not a positive scalar", the sparse Ftrl's "lr_power is not a
 * non-positive scalar": TF's GPU kernels skip these value checks too; the
 * shape checks are TF's); a variable whose dtype is not T fails with
 * InvalidArgument (TF CPU CHECK-fails: the process aborts), as does a vhat
 * or accum_update of another shape than var (TF reads past it), and a
 * non-scalar sign_decay (TF checks alpha's / logbase's shape twice instead).
 *
 * Thread contract: compute functions on TF's thread; apply_step on the
 * stream worker and sim_parallel_for's helpers (disjoint ranges); kApply
 * is read-only.
 */
#include "kernels/variables/apply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/variables/variables.h"

/* Elements per parallel range of an update. */
#define APPLY_GRAIN (1 << 14)
#define MAX_INPUTS 12
#define MAX_CHECKS 14

/* One of TF's checks: k = 's' input `in` is a scalar ("<msg><shape>"),
 * 'v' input `in` has var's shape ("<msg><var shape> <shape of `shown`>"),
 * 'r' var has rank >= 1, 'i' the indices are a vector, 'd' grad's dims
 * after the first are var's, 'n' grad's first dim is the indices' count,
 * 'z' the elements of a row are not 0. */
typedef struct check {
  char k;
  int8_t in, shown;
  const char* msg;
} check;

typedef struct apply_op {
  const char* name;
  skv_opt opt;
  int8_t nvars, grad, indices; /* indices -1: dense */
  int8_t scalars[SKV_MAX_SCALARS];
  int8_t nscalars;
  const char* bool_attrs; /* 'n' use_nesterov, 'u' update_slots, 'm' ... */
  bool keras_index;       /* SparseKerasMomentum's index message */
  const char* const* host;
  check checks[MAX_CHECKS];
} apply_op;

#define S(i, m) \
  { 's', i, i, m }
#define V(i, m) \
  { 'v', i, i, m }
#define VS(i, s, m) \
  { 'v', i, s, m }
#define RANK \
  { 'r', 0, 0, NULL }
#define IVEC \
  { 'i', 0, 0, NULL }
#define DIMS \
  { 'd', 0, 0, NULL }
#define NCHK \
  { 'n', 0, 0, NULL }
#define INNER \
  { 'z', 0, 0, NULL }

#define LR "lr is not a scalar: "
#define LR_ "lr is not a scalar : "
#define LRP "lr is not a positive scalar: "
#define MOM "momentum is not a scalar: "
#define EPS "epsilon is not a scalar: "
#define RHO "rho is not a scalar: "
#define B1P "beta1_power is not a scalar: "
#define B2P "beta2_power is not a scalar: "
#define B1 "beta1 is not a scalar: "
#define B2 "beta2 is not a scalar: "
#define L1 "l1 regularization strength is not a scalar: "
#define L2 "l2 regularization strength is not a scalar: "
#define L1N "l1 regularization strength is not a non-negative scalar: "
#define L2N "l2 regularization strength is not a non-negative scalar: "
#define L2S "l2 shrinkage regularization strength is not a scalar: "
#define L2SN \
  "l2 shrinkage regularization strength is not a non-negative scalar: "
#define SAME(a) "var and " a " do not have the same shape"
#define GRAD SAME("grad")

static const char* const kHVar[] = {"var", NULL};
static const char* const kHAccum[] = {"var", "accum", NULL};
static const char* const kHM[] = {"var", "m", NULL};
static const char* const kHMV[] = {"var", "m", "v", NULL};
static const char* const kHMVV[] = {"var", "m", "v", "vhat", NULL};
static const char* const kHRms[] = {"var", "ms", "mom", NULL};
static const char* const kHCRms[] = {"var", "mg", "ms", "mom", NULL};
static const char* const kHDelta[] = {"var", "accum", "accum_update", NULL};
static const char* const kHFtrl[] = {"var", "accum", "linear", NULL};
static const char* const kHSAccum[] = {"var", "accum", "indices", NULL};
static const char* const kHSDelta[] = {"var", "accum", "accum_update",
                                       "indices", NULL};
static const char* const kHSFtrl[] = {"var", "accum", "linear", "indices",
                                      NULL};

/* The ops, in the order of docs/kernel-api.md's list; inputs as TF's op
 * definitions number them. */
static const apply_op kApply[] = {
    {"ResourceApplyGradientDescent",
     SKV_GRADIENT_DESCENT,
     1,
     2,
     -1,
     {1},
     1,
     "",
     false,
     kHVar,
     {S(1, "alpha is not a scalar: "), V(2, SAME("delta"))}},
    {"ResourceApplyMomentum",
     SKV_MOMENTUM,
     2,
     3,
     -1,
     {2, 4},
     2,
     "n",
     false,
     kHAccum,
     {S(2, LR), V(1, SAME("accum")), V(3, GRAD), S(4, MOM)}},
    {"ResourceApplyKerasMomentum",
     SKV_KERAS_MOMENTUM,
     2,
     3,
     -1,
     {2, 4},
     2,
     "n",
     false,
     kHAccum,
     {S(2, LR), V(1, SAME("accum")), V(3, GRAD), S(4, MOM)}},
    {"ResourceApplyAdam",
     SKV_ADAM,
     3,
     9,
     -1,
     {3, 4, 5, 6, 7, 8},
     6,
     "n",
     false,
     kHMV,
     {S(3, B1P), S(4, B2P), S(5, LR_), S(6, B1), S(7, B2), S(8, EPS),
      V(1, SAME("m")), V(2, SAME("v")), V(9, GRAD)}},
    {"ResourceApplyAdamWithAmsgrad",
     SKV_AMSGRAD,
     4,
     10,
     -1,
     {4, 5, 6, 7, 8, 9},
     6,
     "",
     false,
     kHMVV,
     {S(4, B1P), S(5, B2P), S(6, LR_), S(7, B1), S(8, B2), S(9, EPS),
      V(1, SAME("m")), V(2, SAME("v")), V(10, GRAD), V(3, SAME("vhat"))}},
    {"ResourceApplyAdaMax",
     SKV_ADAMAX,
     3,
     8,
     -1,
     {3, 4, 5, 6, 7},
     5,
     "",
     false,
     kHMV,
     {S(3, B1P), S(4, LR_), S(5, B1), S(6, B2), S(7, EPS), V(1, SAME("m")),
      V(2, SAME("v")), V(8, GRAD)}},
    {"ResourceApplyRMSProp",
     SKV_RMSPROP,
     3,
     7,
     -1,
     {3, 4, 5, 6},
     4,
     "",
     false,
     kHRms,
     {S(3, LR_), S(4, RHO), S(5, MOM), S(6, EPS), V(1, SAME("ms")),
      V(2, SAME("mom")), V(7, GRAD)}},
    /* TF's mg message prints ms's shape. */
    {"ResourceApplyCenteredRMSProp",
     SKV_CENTERED_RMSPROP,
     4,
     8,
     -1,
     {4, 5, 6, 7},
     4,
     "",
     false,
     kHCRms,
     {S(4, LR_), S(5, RHO), S(6, MOM), S(7, EPS), VS(1, 2, SAME("mg")),
      V(2, SAME("ms")), V(3, SAME("mom")), V(8, GRAD)}},
    {"ResourceApplyAdagrad",
     SKV_ADAGRAD,
     2,
     3,
     -1,
     {2},
     1,
     "u",
     false,
     kHAccum,
     {S(2, LR), V(1, SAME("accum")), V(3, GRAD)}},
    {"ResourceApplyAdagradV2",
     SKV_ADAGRAD_V2,
     2,
     4,
     -1,
     {2, 3},
     2,
     "u",
     false,
     kHAccum,
     {S(2, LR), S(3, EPS), V(1, SAME("accum")), V(4, GRAD)}},
    {"ResourceApplyAdadelta",
     SKV_ADADELTA,
     3,
     6,
     -1,
     {3, 4, 5},
     3,
     "",
     false,
     kHDelta,
     {S(3, LR), S(4, RHO), S(5, EPS), V(1, SAME("accum")), V(6, GRAD),
      V(2, SAME("accum_update"))}},
    {"ResourceApplyProximalAdagrad",
     SKV_PROXIMAL_ADAGRAD,
     2,
     5,
     -1,
     {2, 3, 4},
     3,
     "",
     false,
     kHAccum,
     {V(1, SAME("accum")), S(2, LRP), S(3, L1N), S(4, L2N), V(5, GRAD)}},
    {"ResourceApplyFtrl",
     SKV_FTRL,
     3,
     3,
     -1,
     {4, 5, 6, 7},
     4,
     "m",
     false,
     kHFtrl,
     {V(1, SAME("accum")), V(2, SAME("linear")), V(3, GRAD), S(4, LR), S(5, L1),
      S(6, L2), S(7, "lr_power is not a scalar")}},
    {"ResourceApplyFtrlV2",
     SKV_FTRL_V2,
     3,
     3,
     -1,
     {4, 5, 6, 7, 8},
     5,
     "m",
     false,
     kHFtrl,
     {V(1, SAME("accum")), V(2, SAME("linear")), V(3, GRAD), S(4, LR), S(5, L1),
      S(6, L2), S(8, "lr_power is not a scalar"), S(7, L2S)}},
    {"ResourceApplyAddSign",
     SKV_ADDSIGN,
     2,
     6,
     -1,
     {2, 3, 4, 5},
     4,
     "",
     false,
     kHM,
     {S(2, LR), S(3, "alpha is not a scalar: "),
      S(4, "sign_decay is not a scalar: "), S(5, "beta is not a scalar: "),
      V(1, SAME("m")), V(6, GRAD)}},
    {"ResourceApplyPowerSign",
     SKV_POWERSIGN,
     2,
     6,
     -1,
     {2, 3, 4, 5},
     4,
     "",
     false,
     kHM,
     {S(2, LR), S(3, "logbase is not a scalar: "),
      S(4, "sign_decay is not a scalar: "), S(5, "beta is not a scalar: "),
      V(1, SAME("m")), V(6, GRAD)}},
    /* ---- sparse: rows of var at indices ---- */
    {"ResourceSparseApplyAdadelta",
     SKV_ADADELTA,
     3,
     6,
     7,
     {3, 4, 5},
     3,
     "",
     false,
     kHSDelta,
     {V(1, SAME("accum_grad")), V(2, SAME("accum_update")), RANK, S(3, LR),
      S(4, RHO), S(5, EPS), IVEC, DIMS, NCHK}},
    {"ResourceSparseApplyAdagrad",
     SKV_ADAGRAD,
     2,
     3,
     4,
     {2},
     1,
     "u",
     false,
     kHSAccum,
     {V(1, SAME("accum")), RANK, S(2, LR), IVEC, DIMS, NCHK, INNER}},
    {"ResourceSparseApplyAdagradV2",
     SKV_ADAGRAD_V2,
     2,
     4,
     5,
     {2, 3},
     2,
     "u",
     false,
     kHSAccum,
     {V(1, SAME("accum")), RANK, S(2, LR), S(3, EPS), IVEC, DIMS, NCHK, INNER}},
    {"ResourceSparseApplyProximalAdagrad",
     SKV_PROXIMAL_ADAGRAD,
     2,
     5,
     6,
     {2, 3, 4},
     3,
     "",
     false,
     kHSAccum,
     {V(1, SAME("accum")), RANK, S(2, LRP), S(3, L1N), S(4, L2N), IVEC, DIMS,
      NCHK, INNER}},
    {"ResourceSparseApplyFtrl",
     SKV_FTRL,
     3,
     3,
     4,
     {5, 6, 7, 8},
     4,
     "m",
     false,
     kHSFtrl,
     {V(1, SAME("accum")), V(2, SAME("linear")), RANK, IVEC, S(5, LRP),
      S(6, L1N), S(7, L2N), S(8, "lr_power is not a non-positive scalar: "),
      DIMS, NCHK, INNER}},
    {"ResourceSparseApplyFtrlV2",
     SKV_FTRL_V2,
     3,
     3,
     4,
     {5, 6, 7, 8, 9},
     5,
     "m",
     false,
     kHSFtrl,
     {V(1, SAME("accum")), V(2, SAME("linear")), RANK, IVEC, S(5, LRP),
      S(6, L1N), S(7, L2N), S(9, "lr_power is not a non-positive scalar: "),
      DIMS, NCHK, INNER, S(8, L2SN)}},
    {"ResourceSparseApplyKerasMomentum",
     SKV_KERAS_MOMENTUM,
     2,
     3,
     4,
     {2, 5},
     2,
     "n",
     true,
     kHSAccum,
     {V(1, SAME("accum")), RANK, S(2, LR_), IVEC, DIMS, NCHK, S(5, MOM)}},
};
#define NAPPLY (int)(sizeof(kApply) / sizeof(kApply[0]))

typedef struct apply_state {
  const apply_op* op;
  TF_DataType dt;
  unsigned flags;
} apply_state;

/* ---- the update, on the stream ----------------------------------------- */

typedef struct range_ctx {
  const skv_apply* a;
  const skv_hp* hp;
  int64_t xo, go;
} range_ctx;

static void apply_range(void* arg, int64_t b, int64_t e) {
  const range_ctx* c = arg;
  skv_apply_range(c->a, c->hp, c->xo + b, c->go + b, e - b);
}

static void apply_step(void* args) {
  const skv_apply* a = args;
  skv_hp hp;
  skv_apply_prep(a, &hp);
  range_ctx c = {a, &hp, 0, 0};
  if (a->indices == NULL) {
    sim_parallel_for(a->n, APPLY_GRAIN, apply_range, &c);
    return;
  }
  /* Rows in the indices' order: a duplicate index updates its row again,
   * with the values the first update left (TF CPU's order). */
  for (int64_t i = 0; i < a->nindices; i++) {
    c.xo = sk_index(a->index_dt, a->indices, i) * a->inner;
    c.go = i * a->inner;
    if (a->inner >= APPLY_GRAIN)
      sim_parallel_for(a->inner, APPLY_GRAIN, apply_range, &c);
    else
      apply_range(&c, 0, a->inner);
  }
}

/* ---- checks (TF thread) ------------------------------------------------ */

/* TF's checks of `op` on the inputs t (var and slots locked), in TF's
 * order; false after failing the launch with the first one's message. */
static bool run_checks(sk_launch* l, const apply_op* op, TF_Tensor* const* t,
                       int64_t* inner) {
  const TF_Tensor* var = t[0];
  const TF_Tensor* grad = t[op->grad];
  const TF_Tensor* ind = op->indices >= 0 ? t[op->indices] : NULL;
  char a[256], b[256];
  *inner = 1;
  for (int c = 0; c < MAX_CHECKS && op->checks[c].k; c++) {
    const check* k = &op->checks[c];
    const TF_Tensor* x = t[k->in];
    switch (k->k) {
      case 's':
        if (TF_NumDims(x) != 0) {
          sk_fail(l, TF_INVALID_ARGUMENT, "%s%s", k->msg,
                  skv_shape_string(x, a, sizeof(a)));
          return false;
        }
        break;
      case 'v':
        if (!skv_same_shape(var, x)) {
          sk_fail(l, TF_INVALID_ARGUMENT, "%s%s %s", k->msg,
                  skv_shape_string(var, a, sizeof(a)),
                  skv_shape_string(t[k->shown], b, sizeof(b)));
          return false;
        }
        break;
      case 'r':
        if (TF_NumDims(var) < 1) {
          sk_fail(l, TF_INVALID_ARGUMENT, "var must be at least 1 dimensional");
          return false;
        }
        break;
      case 'i':
        if (TF_NumDims(ind) != 1) {
          sk_fail(l, TF_INVALID_ARGUMENT, "indices must be one-dimensional");
          return false;
        }
        break;
      case 'd':
        /* A grad of another rank fails at the first dim it lacks (TF
         * would read a dim grad does not have). */
        for (int d = 1; d < TF_NumDims(var) || d < TF_NumDims(grad); d++) {
          if (d >= TF_NumDims(var) || d >= TF_NumDims(grad) ||
              TF_Dim(var, d) != TF_Dim(grad, d)) {
            sk_fail(l, TF_INVALID_ARGUMENT,
                    "var and grad must match in dimension %d", d);
            return false;
          }
          /* Can overflow only for an empty var (dim 0 is 0): its rows'
           * dims are not bounded by any allocation. */
          if (__builtin_mul_overflow(*inner, TF_Dim(grad, d), inner)) {
            sk_fail(l, TF_INVALID_ARGUMENT,
                    "var's rows have more than 2^63 elements");
            return false;
          }
        }
        break;
      case 'n':
        if (TF_NumDims(grad) < 1 || TF_Dim(grad, 0) != TF_Dim(ind, 0)) {
          sk_fail(l, TF_INVALID_ARGUMENT,
                  "grad must be the same size as indices in the first "
                  "dimension.");
          return false;
        }
        break;
      case 'z':
        if (*inner <= 0) {
          sk_fail(l, TF_INVALID_ARGUMENT,
                  "Inner dimension should be greater than zero.");
          return false;
        }
        break;
    }
  }
  return true;
}

/* The indices in [0, var's first dim): host memory, read here. */
static bool indices_ok(sk_launch* l, const apply_op* op, const TF_Tensor* var,
                       const TF_Tensor* ind) {
  const int64_t rows = TF_Dim(var, 0), n = TF_Dim(ind, 0);
  for (int64_t i = 0; i < n; i++) {
    const long long k = (long long)sk_index_at(ind, i);
    if (k >= 0 && k < rows) continue;
    if (op->keras_index)
      sk_fail(l, TF_INVALID_ARGUMENT,
              "indices[%lld] = %lld is not in [0, %lld)", (long long)i, k,
              (long long)rows);
    else
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Index %lld at offset %lld in indices is out of range", k,
              (long long)i);
    return false;
  }
  return true;
}

/* ---- the compute function (TF thread) ---------------------------------- */

/* False (the launch failed) when variable input k is the variable of an
 * earlier input j: the same buffer (sparse: no copy), or TF's copy-on-write
 * just copied it from t[j]'s buffer (dense: the launch holds t[j], so TF
 * sees it shared and moves the variable to a copy; the update would then
 * write j's slot into a buffer the variable no longer owns). TF's CPU
 * kernel updates the one buffer as both; simdev refuses it. Sound because
 * a variable's tensor, once fetched, shares its buffer with no other
 * variable (TF copied it if it did). */
static bool distinct(sk_launch* l, const apply_op* op, TF_Tensor* const* t,
                     int k) {
  if (TF_TensorByteSize(t[k]) == 0) return true;
  const void* from = skv_copied_from();
  for (int j = 0; j < k; j++) {
    const void* dj = TF_TensorData(t[j]);
    if (TF_TensorByteSize(t[j]) > 0 &&
        (dj == TF_TensorData(t[k]) || dj == from)) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "%s: variable inputs %d and %d are one variable; simdev "
              "updates each variable input on its own buffer and refuses "
              "this (TF's CPU kernel applies both updates to one buffer)",
              op->name, j, k);
      return false;
    }
  }
  return true;
}

static void apply_compute(sk_launch* l, void* state) {
  const apply_state* st = state;
  const apply_op* op = st->op;
  const bool sparse = op->indices >= 0;
  const int nin = TF_NumInputs(sk_context(l));
  if (nin > MAX_INPUTS) {
    sk_fail(l, TF_INTERNAL, "%s: %d inputs", op->name, nin);
    return;
  }
  TF_Tensor* t[MAX_INPUTS] = {0};
  for (int i = op->nvars; i < nin; i++)
    if ((t[i] = sk_input(l, i)) == NULL) return;
  static const int kVars[SKV_MAX_VARS] = {0, 1, 2, 3};
  TF_VariableInputLockHolder* h = skv_lock(l, kVars, op->nvars, sparse);
  if (h == NULL) return;
  for (int k = 0; k < op->nvars; k++) {
    if ((t[k] = skv_tensor(l, k, sparse)) == NULL || !distinct(l, op, t, k)) {
      skv_unlock(h);
      return;
    }
  }
  int64_t inner = 1;
  bool ok = run_checks(l, op, t, &inner);
  for (int k = 0; ok && k < op->nvars; k++) {
    if (TF_TensorType(t[k]) != st->dt) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Trying to update variable with wrong dtype. Expected %s got %s",
              sk_dtype_tf_name(st->dt), sk_dtype_tf_name(TF_TensorType(t[k])));
      ok = false;
    }
  }
  if (ok && sparse) ok = indices_ok(l, op, t[0], t[op->indices]);
  skv_apply a = {.opt = op->opt,
                 .dt = st->dt,
                 .flags = st->flags,
                 .nvars = op->nvars,
                 .nscalars = op->nscalars,
                 .g = ok ? sk_data(t[op->grad]) : NULL};
  for (int k = 0; ok && k < op->nvars; k++) a.x[k] = sk_mdata(t[k]);
  for (int j = 0; ok && j < op->nscalars; j++)
    a.scalars[j] = sk_data(t[op->scalars[j]]);
  bool work = false;
  if (ok && sparse) {
    a.indices = sk_data(t[op->indices]);
    a.index_dt = TF_TensorType(t[op->indices]);
    a.nindices = TF_Dim(t[op->indices], 0);
    a.inner = inner;
    work = a.nindices > 0 && inner > 0;
  } else if (ok) {
    a.n = TF_TensorElementCount(t[0]);
    work = a.n > 0;
  }
  /* Queued before the unlock: the next holder of the mutexes queues its
   * work behind this update. */
  if (work) sk_work_now(l, apply_step, &a, sizeof(a), op->name);
  skv_unlock(h);
}

/* ---- construction and registration ------------------------------------ */

static void* apply_create(TF_OpKernelConstruction* c, int id) {
  apply_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->op = &kApply[id];
  bool locking = false, on = false;
  /* use_locking is read (TF reads it) but the kernel locks either way
   * (the header says why). */
  bool ok =
      sk_attr_type(c, "T", &st->dt) && sk_attr_bool(c, "use_locking", &locking);
  for (const char* f = st->op->bool_attrs; ok && *f; f++) {
    const char* name = *f == 'n'   ? "use_nesterov"
                       : *f == 'u' ? "update_slots"
                                   : "multiply_linear_by_lr";
    ok = sk_attr_bool(c, name, &on);
    if (ok && on)
      st->flags |= *f == 'n'   ? SKV_NESTEROV
                   : *f == 'u' ? SKV_UPDATE_SLOTS
                               : SKV_MULTIPLY_LR;
  }
  if (!ok) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, apply_compute, st, free);
}

/* One create function per row (sk_op's create takes no argument). */
#define CREATE(i)                                       \
  static void* create_##i(TF_OpKernelConstruction* c) { \
    return apply_create(c, i);                          \
  }
/* clang-format off */
CREATE(0) CREATE(1) CREATE(2) CREATE(3) CREATE(4) CREATE(5) CREATE(6)
CREATE(7) CREATE(8) CREATE(9) CREATE(10) CREATE(11) CREATE(12) CREATE(13)
CREATE(14) CREATE(15) CREATE(16) CREATE(17) CREATE(18) CREATE(19) CREATE(20)
CREATE(21) CREATE(22)
#undef CREATE
static void* (*const kCreate[])(TF_OpKernelConstruction*) = {
    create_0,  create_1,  create_2,  create_3,  create_4,  create_5,
    create_6,  create_7,  create_8,  create_9,  create_10, create_11,
    create_12, create_13, create_14, create_15, create_16, create_17,
    create_18, create_19, create_20, create_21, create_22};
/* clang-format on */
_Static_assert(sizeof(kCreate) / sizeof(kCreate[0]) == NAPPLY,
               "one create function per kApply row");

/* TF 2.18.1's GPU kernels for these ops: float16, float32, float64
 * (complex64/128 too for ten of them, not here; no bfloat16). */
static const TF_DataType kTypes[] = {TF_HALF, TF_FLOAT, TF_DOUBLE, 0};
static const TF_DataType kIndexTypes[] = {TF_INT32, TF_INT64, 0};

bool sk_register_apply(char* msg, size_t len) {
  const char* missing = NULL;
  /* Nothing to register where TF lacks the variable functions (2.19+):
   * TF then places these ops with their variables on the CPU, or fails
   * placement (docs/graph-optimizer.md, "TF1 optimizers"). */
  if (!skv_resolve(&missing)) return true;
  static sk_op ops[NAPPLY + 1];
  for (int i = 0; i < NAPPLY; i++) {
    const apply_op* a = &kApply[i];
    ops[i] = (sk_op){.name = a->name,
                     .create = kCreate[i],
                     .type_attr = "T",
                     .types = kTypes,
                     .host_memory = a->host,
                     .type_attr2 = a->indices >= 0 ? "Tindices" : NULL,
                     .types2 = a->indices >= 0 ? kIndexTypes : NULL,
                     .sync = 1};
  }
  return sk_register_ops(ops, msg, len);
}
