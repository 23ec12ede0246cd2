/*
 * cwise.c - unary elementwise ops and the gradients of activations (the
 * driver and the binary ops are in cwise_binary.c, BiasAdd in cwise_bias.c).
 *
 * Unary ops (Neg, Square, Sqrt, Rsqrt, Exp, Log, Tanh, Sigmoid, Relu, Abs,
 * Reciprocal, the activations Relu6, Elu, Selu, Softplus, Softsign, and Erf,
 * Sign, Floor, Ceil, Round, Log1p, Expm1) and gradient ops (ReluGrad,
 * TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad, Relu6Grad, EluGrad, SeluGrad,
 * SoftplusGrad, SoftsignGrad) run through the shared elementwise driver with a
 * flat plan (cwise.h), so they get the same parallel split as the binary ops.
 *
 * Numerics follow TF's CPU kernels where they are observable: Relu keeps NaN
 * and -0 (it is max(x, 0) with x on ties), ReluGrad is
 * gradients * (features > 0) so a NaN gradient stays NaN, int64 Neg wraps.
 * Transcendentals use libm (TF uses Eigen's approximations; both are within a
 * few ulp). The float arithmetic itself is in arith/scalar.h.
 */
#include "kernels/math/cwise.h"

/* ---- unary ops --------------------------------------------------------- */

/* Float ops: the scalar functions of arith/scalar.h (shared with the fused
 * elementwise evaluator, ewprog.c, so fused == unfused bit for bit). */
#define UNARY_OP(op)                                 \
  SK_CW_UNARY(op##_f32, float, sa_cws_##op##_f32(a)) \
  SK_CW_UNARY(op##_f64, double, sa_cws_##op##_f64(a))

// clang-format off
UNARY_OP(neg)
UNARY_OP(square)
UNARY_OP(sqrt)
UNARY_OP(rsqrt)
UNARY_OP(exp)
UNARY_OP(log)
UNARY_OP(tanh)
UNARY_OP(sigmoid)
UNARY_OP(relu)
UNARY_OP(abs)
UNARY_OP(reciprocal)
SK_CW_UNARY(neg_i64, int64_t, (int64_t)(0 - (uint64_t)a))
UNARY_OP(relu6)
UNARY_OP(elu)
UNARY_OP(selu)
UNARY_OP(softplus)
UNARY_OP(softsign)
UNARY_OP(erf)
UNARY_OP(sign)
SK_CW_UNARY(sign_i64, int64_t, (a > 0) - (a < 0))
UNARY_OP(floor)
UNARY_OP(ceil)
UNARY_OP(round)
UNARY_OP(log1p)
UNARY_OP(expm1)
// clang-format on

static const sk_cw_op kNeg = {"Neg", {neg_f32, neg_f64, neg_i64}};
static const sk_cw_op kSquare = {"Square", {square_f32, square_f64, NULL}};
static const sk_cw_op kSqrt = {"Sqrt", {sqrt_f32, sqrt_f64, NULL}};
static const sk_cw_op kRsqrt = {"Rsqrt", {rsqrt_f32, rsqrt_f64, NULL}};
static const sk_cw_op kExp = {"Exp", {exp_f32, exp_f64, NULL}};
static const sk_cw_op kLog = {"Log", {log_f32, log_f64, NULL}};
static const sk_cw_op kTanh = {"Tanh", {tanh_f32, tanh_f64, NULL}};
static const sk_cw_op kSigmoid = {"Sigmoid", {sigmoid_f32, sigmoid_f64, NULL}};
static const sk_cw_op kRelu = {"Relu", {relu_f32, relu_f64, NULL}};
static const sk_cw_op kAbs = {"Abs", {abs_f32, abs_f64, NULL}};
static const sk_cw_op kReciprocal = {"Reciprocal",
                                     {reciprocal_f32, reciprocal_f64, NULL}};
static const sk_cw_op kRelu6 = {"Relu6", {relu6_f32, relu6_f64, NULL}};
static const sk_cw_op kElu = {"Elu", {elu_f32, elu_f64, NULL}};
static const sk_cw_op kSelu = {"Selu", {selu_f32, selu_f64, NULL}};
static const sk_cw_op kSoftplus = {"Softplus",
                                   {softplus_f32, softplus_f64, NULL}};
static const sk_cw_op kSoftsign = {"Softsign",
                                   {softsign_f32, softsign_f64, NULL}};
static const sk_cw_op kErf = {"Erf", {erf_f32, erf_f64, NULL}};
static const sk_cw_op kSign = {"Sign", {sign_f32, sign_f64, sign_i64}};
static const sk_cw_op kFloor = {"Floor", {floor_f32, floor_f64, NULL}};
static const sk_cw_op kCeil = {"Ceil", {ceil_f32, ceil_f64, NULL}};
static const sk_cw_op kRound = {"Round", {round_f32, round_f64, NULL}};
static const sk_cw_op kLog1p = {"Log1p", {log1p_f32, log1p_f64, NULL}};
static const sk_cw_op kExpm1 = {"Expm1", {expm1_f32, expm1_f64, NULL}};

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

/* Operand order follows each op's OpDef (arith/scalar.h lists it). */
#define GRAD_OP(op)                                      \
  SK_CW_BINARY(op##_f32, float, sa_cws_##op##_f32(a, b)) \
  SK_CW_BINARY(op##_f64, double, sa_cws_##op##_f64(a, b))

// clang-format off
GRAD_OP(relugrad)
GRAD_OP(tanhgrad)
GRAD_OP(sigmoidgrad)
GRAD_OP(sqrtgrad)
GRAD_OP(rsqrtgrad)
GRAD_OP(relu6grad)
GRAD_OP(softplusgrad)
GRAD_OP(softsigngrad)
GRAD_OP(elugrad)
GRAD_OP(selugrad)
// clang-format on

/* ReluGrad and the other activation gradients check shapes (TF's
 * ValidateSameShape); the Eigen-based gradients (TanhGrad, ...) only check
 * element counts and take input 0's shape. */
typedef struct grad_op {
  sk_cw_op op;
  bool same_shape;
} grad_op;

static const grad_op kReluGrad = {
    {"ReluGrad", {relugrad_f32, relugrad_f64, NULL}}, true};
static const grad_op kTanhGrad = {
    {"TanhGrad", {tanhgrad_f32, tanhgrad_f64, NULL}}, false};
static const grad_op kSigmoidGrad = {
    {"SigmoidGrad", {sigmoidgrad_f32, sigmoidgrad_f64, NULL}}, false};
static const grad_op kSqrtGrad = {
    {"SqrtGrad", {sqrtgrad_f32, sqrtgrad_f64, NULL}}, false};
static const grad_op kRsqrtGrad = {
    {"RsqrtGrad", {rsqrtgrad_f32, rsqrtgrad_f64, NULL}}, false};

static const grad_op kRelu6Grad = {
    {"Relu6Grad", {relu6grad_f32, relu6grad_f64, NULL}}, true};
static const grad_op kEluGrad = {{"EluGrad", {elugrad_f32, elugrad_f64, NULL}},
                                 true};
static const grad_op kSeluGrad = {
    {"SeluGrad", {selugrad_f32, selugrad_f64, NULL}}, true};
static const grad_op kSoftplusGrad = {
    {"SoftplusGrad", {softplusgrad_f32, softplusgrad_f64, NULL}}, true};
static const grad_op kSoftsignGrad = {
    {"SoftsignGrad", {softsigngrad_f32, softsigngrad_f64, NULL}}, true};

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

SK_CW_CREATE(neg_create, unary_compute, &kNeg)
SK_CW_CREATE(square_create, unary_compute, &kSquare)
SK_CW_CREATE(sqrt_create, unary_compute, &kSqrt)
SK_CW_CREATE(rsqrt_create, unary_compute, &kRsqrt)
SK_CW_CREATE(exp_create, unary_compute, &kExp)
SK_CW_CREATE(log_create, unary_compute, &kLog)
SK_CW_CREATE(tanh_create, unary_compute, &kTanh)
SK_CW_CREATE(sigmoid_create, unary_compute, &kSigmoid)
SK_CW_CREATE(relu_create, unary_compute, &kRelu)
SK_CW_CREATE(abs_create, unary_compute, &kAbs)
SK_CW_CREATE(reciprocal_create, unary_compute, &kReciprocal)
SK_CW_CREATE(relugrad_create, grad_compute, &kReluGrad)
SK_CW_CREATE(tanhgrad_create, grad_compute, &kTanhGrad)
SK_CW_CREATE(sigmoidgrad_create, grad_compute, &kSigmoidGrad)
SK_CW_CREATE(sqrtgrad_create, grad_compute, &kSqrtGrad)
SK_CW_CREATE(rsqrtgrad_create, grad_compute, &kRsqrtGrad)
SK_CW_CREATE(relu6_create, unary_compute, &kRelu6)
SK_CW_CREATE(elu_create, unary_compute, &kElu)
SK_CW_CREATE(selu_create, unary_compute, &kSelu)
SK_CW_CREATE(softplus_create, unary_compute, &kSoftplus)
SK_CW_CREATE(softsign_create, unary_compute, &kSoftsign)
SK_CW_CREATE(erf_create, unary_compute, &kErf)
SK_CW_CREATE(sign_create, unary_compute, &kSign)
SK_CW_CREATE(floor_create, unary_compute, &kFloor)
SK_CW_CREATE(ceil_create, unary_compute, &kCeil)
SK_CW_CREATE(round_create, unary_compute, &kRound)
SK_CW_CREATE(log1p_create, unary_compute, &kLog1p)
SK_CW_CREATE(expm1_create, unary_compute, &kExpm1)
SK_CW_CREATE(relu6grad_create, grad_compute, &kRelu6Grad)
SK_CW_CREATE(elugrad_create, grad_compute, &kEluGrad)
SK_CW_CREATE(selugrad_create, grad_compute, &kSeluGrad)
SK_CW_CREATE(softplusgrad_create, grad_compute, &kSoftplusGrad)
SK_CW_CREATE(softsigngrad_create, grad_compute, &kSoftsignGrad)

#define FLOATS sk_cw_real_types
static const sk_op kOps[] = {
    {"Neg", neg_create, "T", sk_cw_real_i64_types, NULL},
    {"Square", square_create, "T", FLOATS, NULL},
    {"Sqrt", sqrt_create, "T", FLOATS, NULL},
    {"Rsqrt", rsqrt_create, "T", FLOATS, NULL},
    {"Exp", exp_create, "T", FLOATS, NULL},
    {"Log", log_create, "T", FLOATS, NULL},
    {"Tanh", tanh_create, "T", FLOATS, NULL},
    {"Sigmoid", sigmoid_create, "T", FLOATS, NULL},
    {"Relu", relu_create, "T", FLOATS, NULL},
    {"Abs", abs_create, "T", FLOATS, NULL},
    {"Reciprocal", reciprocal_create, "T", FLOATS, NULL},
    {"ReluGrad", relugrad_create, "T", FLOATS, NULL},
    {"TanhGrad", tanhgrad_create, "T", FLOATS, NULL},
    {"SigmoidGrad", sigmoidgrad_create, "T", FLOATS, NULL},
    {"SqrtGrad", sqrtgrad_create, "T", FLOATS, NULL},
    {"RsqrtGrad", rsqrtgrad_create, "T", FLOATS, NULL},
    {"Relu6", relu6_create, "T", FLOATS, NULL},
    {"Elu", elu_create, "T", FLOATS, NULL},
    {"Selu", selu_create, "T", FLOATS, NULL},
    {"Softplus", softplus_create, "T", FLOATS, NULL},
    {"Softsign", softsign_create, "T", FLOATS, NULL},
    {"Erf", erf_create, "T", FLOATS, NULL},
    /* int32 Sign: TF's DEVICE_DEFAULT kernel (host memory) */
    {"Sign", sign_create, "T", sk_cw_real_i64_types, NULL},
    {"Floor", floor_create, "T", FLOATS, NULL},
    {"Ceil", ceil_create, "T", FLOATS, NULL},
    {"Round", round_create, "T", FLOATS, NULL},
    {"Log1p", log1p_create, "T", FLOATS, NULL},
    {"Expm1", expm1_create, "T", FLOATS, NULL},
    {"Relu6Grad", relu6grad_create, "T", FLOATS, NULL},
    {"EluGrad", elugrad_create, "T", FLOATS, NULL},
    {"SeluGrad", selugrad_create, "T", FLOATS, NULL},
    {"SoftplusGrad", softplusgrad_create, "T", FLOATS, NULL},
    {"SoftsignGrad", softsigngrad_create, "T", FLOATS, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_cwise(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
