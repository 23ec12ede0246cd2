/*
 * ewops.h - THE list of simdev's pure float elementwise ops: every op whose
 * result is a function of its operands' elements alone (no attributes), as
 * one X-macro row each. Every consumer expands the same rows:
 *   - src/kernels/math/cwise.c: the unary and gradient ops' loops, op
 *     structs, kernels and registration rows;
 *   - src/kernels/math/cwise_binary.c: the same for the broadcasting binary
 *     ops (their int64 loops and the legacy Add stay its own);
 *   - src/arith/ewprog.c: the fusable-op table of _SimdevFusedElementwise
 *     (ewprog.h), which the graph optimizer's elementwise pass reads.
 * So a new float op is its sa_cws_<stem>_f32/_f64 in scalar.h plus one row
 * here: the unfused SIMDEV kernel (float, double, half, bfloat16) and its
 * fusion follow. A row without its scalar functions fails the plugin's link
 * (-Wl,--no-undefined); an I64 row without the consumer's int64 loop fails
 * to compile. tests/tf/test_kernels_fused_elementwise.py reads this file
 * (tests/tf/ewtable.py) and checks each row against TF's OpDef and the
 * registered SIMDEV kernels.
 *
 * SA_EWOPS(U, B, G) expands one macro per op, in the table's order:
 *   U(Op, stem, ints)               unary: y = sa_cws_<stem>(x)
 *   B(Op, stem, ints)               binary, NumPy/TF broadcasting:
 *                                   z = sa_cws_<stem>(x, y)
 *   G(Op, stem, shape, in0, in1)    gradient of an activation, no
 *                                   broadcasting: z = sa_cws_<stem>(in0, in1)
 * with
 *   Op     TF's op name (an identifier; consumers stringize it)
 *   stem   the scalar functions sa_cws_<stem>_f32 and _f64 (scalar.h)
 *   ints   I64: the unfused op also has an int64 kernel, whose loop
 *          <stem>_i64 the consuming kernel file defines itself (integer
 *          semantics are not scalar.h's: wrapping, no NaN); FLT: float
 *          types only. The fused op is float and double either way.
 *   shape  SHAPE: TF's kernel requires equal shapes (ValidateSameShape);
 *          COUNT: only equal element counts, the output shaped as in0
 *          (TF's Eigen-based gradients)
 *   in0, in1  the OpDef's input names, in operand order (the order of
 *          sa_cws_<stem>'s (a, b) and of a program's operands)
 * Pass SA_EWOPS_NONE for a kind a consumer does not expand.
 *
 * Plain preprocessor text, no declarations: any module may include it.
 */
#ifndef SIMDEV_ARITH_EWOPS_H_
#define SIMDEV_ARITH_EWOPS_H_

/* Expands to nothing: the argument for a kind of row a consumer skips. */
#define SA_EWOPS_NONE(...)

// clang-format off
#define SA_EWOPS(U, B, G)                                   \
  U(Neg, neg, I64)                                          \
  U(Abs, abs, FLT)                                          \
  U(Square, square, FLT)                                    \
  U(Sqrt, sqrt, FLT)                                        \
  U(Rsqrt, rsqrt, FLT)                                      \
  U(Exp, exp, FLT)                                          \
  U(Expm1, expm1, FLT)                                      \
  U(Log, log, FLT)                                          \
  U(Log1p, log1p, FLT)                                      \
  U(Tanh, tanh, FLT)                                        \
  U(Sigmoid, sigmoid, FLT)                                  \
  U(Relu, relu, FLT)                                        \
  U(Relu6, relu6, FLT)                                      \
  U(Elu, elu, FLT)                                          \
  U(Selu, selu, FLT)                                        \
  U(Softplus, softplus, FLT)                                \
  U(Softsign, softsign, FLT)                                \
  U(Erf, erf, FLT)                                          \
  U(Reciprocal, reciprocal, FLT)                            \
  U(Sign, sign, I64)                                        \
  U(Floor, floor, FLT)                                      \
  U(Ceil, ceil, FLT)                                        \
  U(Round, round, FLT)                                      \
  B(AddV2, add, I64)                                        \
  B(Sub, sub, I64)                                          \
  B(Mul, mul, I64)                                          \
  B(RealDiv, div, FLT)                                      \
  B(DivNoNan, divnonan, FLT)                                \
  B(Maximum, max, I64)                                      \
  B(Minimum, min, I64)                                      \
  B(SquaredDifference, sqdiff, FLT)                         \
  B(Pow, pow, FLT)                                          \
  G(ReluGrad, relugrad, SHAPE, gradients, features)         \
  G(Relu6Grad, relu6grad, SHAPE, gradients, features)       \
  G(SoftplusGrad, softplusgrad, SHAPE, gradients, features) \
  G(SoftsignGrad, softsigngrad, SHAPE, gradients, features) \
  G(EluGrad, elugrad, SHAPE, gradients, outputs)            \
  G(SeluGrad, selugrad, SHAPE, gradients, outputs)          \
  G(TanhGrad, tanhgrad, COUNT, y, dy)                       \
  G(SigmoidGrad, sigmoidgrad, COUNT, y, dy)                 \
  G(SqrtGrad, sqrtgrad, COUNT, y, dy)                       \
  G(RsqrtGrad, rsqrtgrad, COUNT, y, dy)
// clang-format on

#endif /* SIMDEV_ARITH_EWOPS_H_ */
