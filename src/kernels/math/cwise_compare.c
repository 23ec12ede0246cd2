/*
 * cwise_compare.c - broadcasting ops whose output or semantics differ from
 * arithmetic: the comparisons (Greater, GreaterEqual, Less, LessEqual,
 * Equal, NotEqual; bool output), the logical ops (LogicalAnd, LogicalOr,
 * LogicalNot on bool) and the floor division pair (FloorDiv, FloorMod).
 * All run through the shared driver (cwise.h); the driver takes the output
 * element size from the output tensor, so bool results need nothing else.
 *
 * Numerics as TF's CPU kernels: comparisons are IEEE (NaN compares unequal
 * to everything); FloorDiv(x, y) = floor(x / y) for floats; FloorMod for
 * floats is fmod(x, y) moved to y's sign when nonzero. For int64 both round
 * toward minus infinity, and a zero divisor anywhere in y fails the op with
 * InvalidArgument "Integer division by zero" (checked on the stream worker
 * before the loops, where y is readable). INT64_MIN / -1 wraps to INT64_MIN
 * (remainder 0) instead of trapping. Equal and NotEqual with
 * incompatible_shape_error=false give a scalar false / true for shapes that
 * do not broadcast, as TF does.
 *
 * Thread contract: as cwise.h; the checks and fills run on the stream worker
 * and touch only their arguments.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/math/cwise.h"

/* ---- comparisons and logical ops --------------------------------------- */

#define CMP_OP(op, EXPR)                        \
  SK_CW_BINARY_TO(op##_f32, float, bool, EXPR)  \
  SK_CW_BINARY_TO(op##_f64, double, bool, EXPR) \
  SK_CW_BINARY_TO(op##_i64, int64_t, bool, EXPR)

// clang-format off
CMP_OP(gt, a > b)
CMP_OP(ge, a >= b)
CMP_OP(lt, a < b)
CMP_OP(le, a <= b)
CMP_OP(eq, a == b)
CMP_OP(ne, a != b)
SK_CW_BINARY(eq_b, bool, a == b)
SK_CW_BINARY(ne_b, bool, a != b)
SK_CW_BINARY(and_b, bool, a && b)
SK_CW_BINARY(or_b, bool, a || b)
SK_CW_UNARY(not_b, bool, !a)
// clang-format on

static const sk_cw_op kGreater = {"Greater", {gt_f32, gt_f64, gt_i64}};
static const sk_cw_op kGreaterEqual = {"GreaterEqual",
                                       {ge_f32, ge_f64, ge_i64}};
static const sk_cw_op kLess = {"Less", {lt_f32, lt_f64, lt_i64}};
static const sk_cw_op kLessEqual = {"LessEqual", {le_f32, le_f64, le_i64}};
static const sk_cw_op kEqual = {"Equal", {eq_f32, eq_f64, eq_i64, eq_b}};
static const sk_cw_op kNotEqual = {"NotEqual", {ne_f32, ne_f64, ne_i64, ne_b}};
static const sk_cw_op kLogicalAnd = {"LogicalAnd", {NULL, NULL, NULL, and_b}};
static const sk_cw_op kLogicalOr = {"LogicalOr", {NULL, NULL, NULL, or_b}};
static const sk_cw_op kLogicalNot = {"LogicalNot", {NULL, NULL, NULL, not_b}};

/* ---- FloorDiv, FloorMod ------------------------------------------------ */

/* Toward minus infinity; y != 0 (checked); y == -1 avoids the trapping
 * INT64_MIN / -1 and wraps like TF's other int64 arithmetic. */
static inline int64_t fdiv_i64(int64_t x, int64_t y) {
  if (y == -1) return (int64_t)(0 - (uint64_t)x);
  int64_t q = x / y, r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? q - 1 : q;
}
static inline int64_t fmod_i64(int64_t x, int64_t y) {
  if (y == -1) return 0;
  int64_t r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
#define FMOD_FLOOR(T, FMOD)                              \
  static inline T floormod_##T(T x, T y) {               \
    T r = FMOD(x, y);                                    \
    return (r != 0 && ((y < 0) != (r < 0))) ? r + y : r; \
  }
FMOD_FLOOR(float, fmodf)
FMOD_FLOOR(double, fmod)

// clang-format off
SK_CW_BINARY(floordiv_f32, float, floorf(a / b))
SK_CW_BINARY(floordiv_f64, double, floor(a / b))
SK_CW_BINARY(floordiv_i64, int64_t, fdiv_i64(a, b))
SK_CW_BINARY(floormod_f32, float, floormod_float(a, b))
SK_CW_BINARY(floormod_f64, double, floormod_double(a, b))
SK_CW_BINARY(floormod_i64, int64_t, fmod_i64(a, b))
// clang-format on

/* Stream worker: TF CPU's check, over all of y (also broadcast parts). */
static bool nonzero_i64(sk_launch* l, const void* yv, int64_t ny) {
  const int64_t* y = yv;
  for (int64_t i = 0; i < ny; i++) {
    if (y[i] == 0) {
      sk_fail(l, TF_INVALID_ARGUMENT, "Integer division by zero");
      return false;
    }
  }
  return true;
}

static const sk_cw_op kFloorDiv = {
    "FloorDiv", {floordiv_f32, floordiv_f64, floordiv_i64}, nonzero_i64};
static const sk_cw_op kFloorMod = {
    "FloorMod", {floormod_f32, floormod_f64, floormod_i64}, nonzero_i64};

/* ---- compute functions ------------------------------------------------- */

static void binary_compute(sk_launch* l, void* state) {
  sk_cw_binary_compute(l, state, NULL);
}

/* Equal / NotEqual: incompatible_shape_error=false turns a broadcast failure
 * into a scalar result. */
typedef struct eq_state {
  const sk_cw_op* op;
  bool shape_error;
} eq_state;

typedef struct fill_args {
  bool* z;
  bool v;
} fill_args;

static void fill_run(sk_launch* l, void* args) {
  (void)l;
  fill_args* a = args;
  *a->z = a->v;
}

static void scalar_result(sk_launch* l, bool v) {
  sk_shape s = {.nd = 0, .n = 1};
  TF_Tensor* z = sk_output(l, 0, &s);
  fill_args* a = z != NULL ? sk_args(l, sizeof(*a)) : NULL;
  if (a == NULL) return;
  a->z = sk_mdata(z);
  a->v = v;
  sk_work(l, fill_run, "EqualityMismatch");
}
static void eq_mismatch(sk_launch* l) {
  scalar_result(l, false);
}
static void ne_mismatch(sk_launch* l) {
  scalar_result(l, true);
}

static void eq_compute(sk_launch* l, void* state) {
  const eq_state* st = state;
  sk_cw_mismatch_fn m = NULL;
  if (!st->shape_error) m = st->op == &kEqual ? eq_mismatch : ne_mismatch;
  sk_cw_binary_compute(l, st->op, m);
}

static void* eq_create_for(TF_OpKernelConstruction* c, const sk_cw_op* op) {
  eq_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->op = op;
  if (!sk_attr_bool(c, "incompatible_shape_error", &st->shape_error)) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, eq_compute, st, free);
}
static void* equal_create(TF_OpKernelConstruction* c) {
  return eq_create_for(c, &kEqual);
}
static void* notequal_create(TF_OpKernelConstruction* c) {
  return eq_create_for(c, &kNotEqual);
}

/* LogicalNot: y = !x, flat. */
static void not_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape s;
  if (x == NULL || !sk_shape_of(l, x, &s)) return;
  TF_Tensor* y = sk_output(l, 0, &s);
  if (y == NULL) return;
  sk_cw_bcast plan;
  sk_cw_bcast_flat(s.n, &plan);
  sk_cw_launch(l, not_b, TF_BOOL, x, x, y, &plan, "LogicalNot");
}

SK_CW_CREATE(greater_create, binary_compute, &kGreater)
SK_CW_CREATE(greaterequal_create, binary_compute, &kGreaterEqual)
SK_CW_CREATE(less_create, binary_compute, &kLess)
SK_CW_CREATE(lessequal_create, binary_compute, &kLessEqual)
SK_CW_CREATE(and_create, binary_compute, &kLogicalAnd)
SK_CW_CREATE(or_create, binary_compute, &kLogicalOr)
SK_CW_CREATE(not_create, not_compute, &kLogicalNot)
SK_CW_CREATE(floordiv_create, binary_compute, &kFloorDiv)
SK_CW_CREATE(floormod_create, binary_compute, &kFloorMod)

/* int32 comparisons and floor ops: TF's DEVICE_DEFAULT kernels (host
 * memory) serve them on SIMDEV. */
static const TF_DataType kEqTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF, TF_BFLOAT16, TF_INT64, TF_BOOL, 0};
#define F_I64 sk_cw_float_i64_types
#define R_I64 sk_cw_real_i64_types
static const sk_op kOps[] = {
    {"Greater", greater_create, "T", R_I64, NULL},
    {"GreaterEqual", greaterequal_create, "T", R_I64, NULL},
    {"Less", less_create, "T", R_I64, NULL},
    {"LessEqual", lessequal_create, "T", R_I64, NULL},
    {"Equal", equal_create, "T", kEqTypes, NULL},
    {"NotEqual", notequal_create, "T", kEqTypes, NULL},
    {"LogicalAnd", and_create, NULL, NULL, NULL},
    {"LogicalOr", or_create, NULL, NULL, NULL},
    {"LogicalNot", not_create, NULL, NULL, NULL},
    {"FloorDiv", floordiv_create, "T", F_I64, NULL},
    {"FloorMod", floormod_create, "T", F_I64, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_cwise_compare(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
