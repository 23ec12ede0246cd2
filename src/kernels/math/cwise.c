/*
 * cwise.c - unary elementwise ops and the gradients of activations (the
 * driver and the binary ops are in cwise_binary.c, BiasAdd in cwise_bias.c).
 *
 * The ops are the U (unary) and G (gradient) rows of arith/ewops.h, THE
 * list of pure float elementwise ops: unary ops (Neg, Square, Sqrt, Exp, Log,
 * Tanh, Sigmoid, Relu, the activations Relu6, Elu, Selu, Softplus, Softsign,
 * and Erf, Sign, Floor, Round, ...) and the gradients of activations
 * (ReluGrad, TanhGrad, EluGrad, ...). Their loops, op structs, kernels and
 * registration rows are generated from those rows (a new row needs nothing
 * here, unless it is marked I64: then its int64 loop). They run
 * through the shared elementwise driver with a flat plan (cwise.h), so they
 * get the same parallel split as the binary ops.
 *
 * Numerics follow TF's CPU kernels where they are observable: Relu keeps NaN
 * and -0 (it is max(x, 0) with x on ties), ReluGrad is
 * gradients * (features > 0) so a NaN gradient stays NaN, int64 Neg wraps.
 * Transcendentals use libm (TF uses Eigen's approximations; both are within a
 * few ulp). The float arithmetic itself is in arith/scalar.h.
 */
#include "kernels/math/cwise.h"

/* ---- loops ------------------------------------------------------------ */

/* The float loops of every unary and gradient row of arith/ewops.h: the
 * scalar functions of arith/scalar.h (shared with the fused elementwise
 * evaluator, ewprog.c, so fused == unfused bit for bit). Gradient operands
 * are in the row's (in0, in1) order, their OpDef's. */
#define CW_UNARY_LOOPS(Op, stem, ints)                   \
  SK_CW_UNARY(stem##_f32, float, sa_cws_##stem##_f32(a)) \
  SK_CW_UNARY(stem##_f64, double, sa_cws_##stem##_f64(a))
#define CW_GRAD_LOOPS(Op, stem, shape, in0, in1)             \
  SK_CW_BINARY(stem##_f32, float, sa_cws_##stem##_f32(a, b)) \
  SK_CW_BINARY(stem##_f64, double, sa_cws_##stem##_f64(a, b))
SA_EWOPS(CW_UNARY_LOOPS, SA_EWOPS_NONE, CW_GRAD_LOOPS)

/* The int64 loops of the rows marked I64 (integer semantics, not
 * scalar.h's): Neg wraps; int32 Sign is TF's DEVICE_DEFAULT kernel (host
 * memory), not ours. */
SK_CW_UNARY(neg_i64, int64_t, (int64_t)(0 - (uint64_t)a))
SK_CW_UNARY(sign_i64, int64_t, (a > 0) - (a < 0))

/* ---- unary ops --------------------------------------------------------- */

/* TF thread: y = op(x), same shape. */
static void unary_compute(sk_launch* l, void* state) {
  const sk_cw_op* op = state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape s;
  if (x == NULL || !sk_shape_of(l, x, &s)) return;
  TF_DataType dt = TF_TensorType(x);
  sk_cw_loop loop = sk_cw_pick(l, &op->loops, dt, op->name);
  TF_Tensor* y = sk_output(l, 0, &s);
  if (loop == NULL || y == NULL) return;
  sk_cw_bcast plan;
  sk_cw_bcast_flat(s.n, &plan);
  sk_cw_launch(l, loop, dt, x, x, y, &plan, op->name);
}

/* ---- gradient ops: z = f(input 0, input 1), no broadcasting ------------ */

/* ReluGrad and the other activation gradients check shapes (TF's
 * ValidateSameShape: rows marked SHAPE); the Eigen-based gradients
 * (TanhGrad, ...: COUNT) only check element counts and take input 0's
 * shape. */
typedef struct grad_op {
  sk_cw_op op;
  bool same_shape;
} grad_op;
#define CW_SAME_SHAPE true
#define CW_SAME_COUNT false

static void grad_compute(sk_launch* l, void* state) {
  const grad_op* g = state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* y = sk_input(l, 1);
  sk_shape xs, ys;
  if (x == NULL || y == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, y, &ys))
    return;
  char a[400], b[400];
  if (g->same_shape && !sk_shape_eq(&xs, &ys)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Inputs to operation %s of type %s must have the same size and "
            "shape.  Input 0: %s != input 1: %s",
            g->op.name, g->op.name, sk_shape_str(&xs, a, sizeof(a)),
            sk_shape_str(&ys, b, sizeof(b)));
    return;
  }
  if (xs.n != ys.n) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "The two arguments to a cwise op must have same number of "
            "elements, got %lld and %lld",
            (long long)xs.n, (long long)ys.n);
    return;
  }
  TF_DataType dt = TF_TensorType(x);
  sk_cw_loop loop = sk_cw_pick(l, &g->op.loops, dt, g->op.name);
  TF_Tensor* z = sk_output(l, 0, &xs);
  if (loop == NULL || z == NULL) return;
  sk_cw_bcast plan;
  sk_cw_bcast_flat(xs.n, &plan);
  sk_cw_launch(l, loop, dt, x, y, z, &plan, g->op.name);
}

/* ---- registration ------------------------------------------------------ */

/* Per row: the op (its name is the launch label), its kernel's create
 * function, and its registration row. */
#define CW_UNARY_OP(Op, stem, ints)                               \
  static const sk_cw_op k_##stem = {                              \
      #Op, {stem##_f32, stem##_f64, SK_CW_I64_LOOP(ints, stem)}}; \
  SK_CW_CREATE(stem##_create, unary_compute, &k_##stem)
#define CW_GRAD_OP(Op, stem, shape, in0, in1)                             \
  static const grad_op k_##stem = {{#Op, {stem##_f32, stem##_f64, NULL}}, \
                                   CW_SAME_##shape};                      \
  SK_CW_CREATE(stem##_create, grad_compute, &k_##stem)
SA_EWOPS(CW_UNARY_OP, SA_EWOPS_NONE, CW_GRAD_OP)

#define CW_UNARY_ROW(Op, stem, ints) \
  {#Op, stem##_create, "T", SK_CW_TYPES(ints), NULL},
#define CW_GRAD_ROW(Op, stem, shape, in0, in1) \
  {#Op, stem##_create, "T", sk_cw_real_types, NULL},
// clang-format off
static const sk_op kOps[] = {
    SA_EWOPS(CW_UNARY_ROW, SA_EWOPS_NONE, CW_GRAD_ROW)
    {NULL, NULL, NULL, NULL, NULL},
};
// clang-format on

bool sk_register_cwise(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
