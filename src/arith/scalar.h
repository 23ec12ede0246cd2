/*
 * scalar.h - the scalar arithmetic of simdev's float elementwise ops:
 * one `static inline` function per op and type, sa_cws_<op>_f32 and
 * sa_cws_<op>_f64. The unfused kernels (cwise.c, cwise_binary.c) build
 * their loops from these functions, and the fused elementwise evaluator
 * (ewprog.c) calls the same ones, so an expression fused into
 * _SimdevFusedElementwise gives the unfused chain's results bit for bit.
 * Change an op's numerics here and both follow. Which ops exist, their
 * TF names and operand orders: arith/ewops.h (a new op: its functions here
 * and one row there).
 *
 * Plain C with libm only (no TensorFlow): ewprog.c includes it and stays
 * usable without TF. The build uses -std=c11, which turns off GCC's
 * floating-point contraction, so an expression rounds the same way wherever
 * it is inlined (no FMA in one copy and not in the other).
 *
 * Binary and gradient ops take (a, b) in the op's operand order: x, y for
 * AddV2 etc.; (gradients, features) for ReluGrad, Relu6Grad, SoftplusGrad,
 * SoftsignGrad; (gradients, outputs) for EluGrad, SeluGrad; (y, dy) for
 * TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad (their OpDefs' order).
 *
 * Numerics follow TF's CPU kernels where they are observable (cwise.c and
 * cwise_binary.c say which); transcendentals use libm.
 *
 * Thread contract: pure functions, any thread.
 */
#ifndef SIMDEV_ARITH_SCALAR_H_
#define SIMDEV_ARITH_SCALAR_H_

#include <math.h>

/* libm by operand type: SA_CW_M(exp, a) is expf(a) for a float a. */
// clang-format off
#define SA_CW_M(fn, a) _Generic((a), float: fn##f, default: fn)(a)
// clang-format on

/* Selu's constants (Klambauer et al.), as TF's functor uses them. */
#define SA_CWS_SELU_SCALE 1.0507009873554804934193349852946
#define SA_CWS_SELU_SCALE_ALPHA (1.7580993408473768599402175208123)

/* tanhf from glibc goes through a slow expm1f (25x slower than TF's CPU
 * kernel); double exp is fast and, for |x| >= 1e-4, (e - 1) / (e + 1) in
 * double keeps a relative error near 1e-12, so the float result is
 * correctly rounded in practice. Below 1e-4, tanh(x) rounds to x; above
 * 10, to +-1. NaN goes through exp and stays NaN. */
static inline float sa_cws_tanhf_via_exp(float x) {
  double d = x, ad = fabs(d);
  if (ad < 1e-4) return x;
  if (ad > 10) return copysignf(1.f, x);
  double e = exp(2 * ad);
  return (float)copysign((e - 1) / (e + 1), d);
}

/* Defines sa_cws_<name>_f32(float a) and sa_cws_<name>_f64(double a)
 * returning EXPR of `a`, converted to the operand type. */
#define SA_CWS_UNARY(name, EXPR)                       \
  static inline float sa_cws_##name##_f32(float a) {   \
    return (EXPR);                                     \
  }                                                    \
  static inline double sa_cws_##name##_f64(double a) { \
    return (EXPR);                                     \
  }

/* The same for EXPR of `a` and `b`. */
#define SA_CWS_BINARY(name, EXPR)                                \
  static inline float sa_cws_##name##_f32(float a, float b) {    \
    return (EXPR);                                               \
  }                                                              \
  static inline double sa_cws_##name##_f64(double a, double b) { \
    return (EXPR);                                               \
  }

// clang-format off
/* ---- unary ops and activations (cwise.c) ---- */
SA_CWS_UNARY(neg, -a)
SA_CWS_UNARY(square, a * a)
SA_CWS_UNARY(sqrt, SA_CW_M(sqrt, a))
SA_CWS_UNARY(rsqrt, 1 / SA_CW_M(sqrt, a))
SA_CWS_UNARY(exp, SA_CW_M(exp, a))
SA_CWS_UNARY(log, SA_CW_M(log, a))
static inline float sa_cws_tanh_f32(float a) { return sa_cws_tanhf_via_exp(a); }
static inline double sa_cws_tanh_f64(double a) { return tanh(a); }
SA_CWS_UNARY(sigmoid, 1 / (1 + SA_CW_M(exp, -a)))
/* max(x, 0) with x on ties: NaN and -0 stay. */
SA_CWS_UNARY(relu, a < 0 ? 0 : a)
SA_CWS_UNARY(abs, SA_CW_M(fabs, a))
SA_CWS_UNARY(reciprocal, 1 / a)
/* The activations of relu_op_functor.h's family. Elu and Selu use expm1,
 * which is exact near 0 where TF's exp(x) - 1 cancels (within one ulp of
 * exp(x) of each other everywhere). */
SA_CWS_UNARY(relu6, a < 0 ? 0 : a > 6 ? 6 : a)
SA_CWS_UNARY(elu, a < 0 ? SA_CW_M(expm1, a) : a)
SA_CWS_UNARY(selu, a < 0 ? SA_CWS_SELU_SCALE_ALPHA * SA_CW_M(expm1, a)
                         : SA_CWS_SELU_SCALE * a)
/* TF's thresholds: above -t softplus(x) rounds to x, below t to exp(x),
 * t = log(epsilon) + 2 (float32: -13.94, float64: -34.04). */
static inline float sa_cws_softplus_f32(float a) {
  return a > 13.942385f ? a : a < -13.942385f ? expf(a) : log1pf(expf(a));
}
static inline double sa_cws_softplus_f64(double a) {
  return a > 34.043653389117154 ? a
         : a < -34.043653389117154 ? exp(a) : log1p(exp(a));
}
SA_CWS_UNARY(softsign, a / (SA_CW_M(fabs, a) + 1))
SA_CWS_UNARY(erf, SA_CW_M(erf, a))
/* NaN stays NaN (as Eigen's sign); zeros give +0. */
SA_CWS_UNARY(sign, isnan(a) ? a : (a > 0) - (a < 0))
SA_CWS_UNARY(floor, SA_CW_M(floor, a))
SA_CWS_UNARY(ceil, SA_CW_M(ceil, a))
/* Half to even: rint in the default rounding mode (TF never changes it). */
SA_CWS_UNARY(round, SA_CW_M(rint, a))
SA_CWS_UNARY(log1p, SA_CW_M(log1p, a))
SA_CWS_UNARY(expm1, SA_CW_M(expm1, a))

/* ---- gradients of activations (cwise.c) ---- */
/* (gradients a, features b); a NaN gradient stays NaN */
SA_CWS_BINARY(relugrad, a * (b > 0 ? 1 : 0))
SA_CWS_BINARY(relu6grad, a * (b > 0 && b < 6 ? 1 : 0))
SA_CWS_BINARY(softplusgrad, a / (SA_CW_M(exp, -b) + 1))
SA_CWS_BINARY(softsigngrad,
              a / ((SA_CW_M(fabs, b) + 1) * (SA_CW_M(fabs, b) + 1)))
/* (y a, dy b) */
SA_CWS_BINARY(tanhgrad, b * (1 - a * a))
SA_CWS_BINARY(sigmoidgrad, b * a * (1 - a))
SA_CWS_BINARY(sqrtgrad, 0.5f * b / a)
SA_CWS_BINARY(rsqrtgrad, -0.5f * (b * a) * (a * a))
/* (gradients a, outputs b): Elu and Selu differentiate through their
 * output, as TF's kernels do. */
SA_CWS_BINARY(elugrad, b < 0 ? a * (b + 1) : a)
SA_CWS_BINARY(selugrad, b < 0 ? a * (b + SA_CWS_SELU_SCALE_ALPHA)
                              : a * SA_CWS_SELU_SCALE)

/* ---- broadcasting binary ops (cwise_binary.c) ---- */
SA_CWS_BINARY(add, a + b)
SA_CWS_BINARY(sub, a - b)
SA_CWS_BINARY(mul, a * b)
SA_CWS_BINARY(div, a / b)
/* 0 wherever b == 0, even for a NaN a */
SA_CWS_BINARY(divnonan, b == 0 ? 0 : a / b)
/* NaN from either side, else std::max / std::min (a on ties, so
 * max(-0, +0) is -0) */
SA_CWS_BINARY(max, isnan(a) ? a : isnan(b) ? b : a < b ? b : a)
SA_CWS_BINARY(min, isnan(a) ? a : isnan(b) ? b : b < a ? b : a)
SA_CWS_BINARY(sqdiff, (a - b) * (a - b))
static inline float sa_cws_pow_f32(float a, float b) { return powf(a, b); }
static inline double sa_cws_pow_f64(double a, double b) { return pow(a, b); }
// clang-format on

/* ---- LeakyRelu (cwise_leaky.c, and the fused ops' epilogue, epi.c):
 * features a, alpha b already converted to the operand type, as TF does;
 * for alpha <= 1 TF's CPU writes max(a, alpha a), the same values except
 * for signs of zero. ---- */
// clang-format off
SA_CWS_BINARY(leakyrelu, a > 0 ? a : a * b)
// clang-format on

#endif /* SIMDEV_ARITH_SCALAR_H_ */
