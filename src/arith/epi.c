/*
 * epi.c - sa_epi_apply: the fused ops' epilogue y = act(y + bias), on the
 * block of output the arithmetic just wrote. Callers: sa_gemm (each row
 * block), the convolution's zero-only case, TF's fused kernels
 * (src/kernels/framework/fused.h says why they match the unfused kernels bit
 * for bit) and the XLA handler simdev_matmul_bias_act.
 *
 * One loop per activation and dtype, the switch outside the loops, and a
 * contiguous variant (inc == 1, every GEMM output and NHWC depthwise) that
 * the compiler vectorizes where the activation allows.
 *
 * Thread contract: runs on the stream worker or a pool thread, on the rows
 * it is given only; pure arithmetic (arith/scalar.h), no framework calls.
 */
#include "arith/sa.h"
#include "arith/scalar.h"

/* Vectorize at -O2 too (as src/kernels/math/cwise.h explains: GCC's "very
 * cheap" cost model skips loops of unknown trip count). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#endif

/* Defines epi_<name>_<SUF>: rows of n elements, y = EXPR(v) with v = y + b
 * (and `al`, alpha in T, for LeakyRelu). */
#define EPI_LOOP(name, T, SUF, EXPR)                                      \
  static void epi_##name##_##SUF(T* c, const T* bias, T al, int64_t rows, \
                                 int64_t n, int64_t ldc, int64_t inc) {   \
    (void)al;                                                             \
    for (int64_t r = 0; r < rows; r++) {                                  \
      T* y = c + r * ldc;                                                 \
      if (inc == 1) {                                                     \
        for (int64_t j = 0; j < n; j++) {                                 \
          const T v = sa_cws_add_##SUF(y[j], bias[j]);                    \
          y[j] = (EXPR);                                                  \
        }                                                                 \
      } else {                                                            \
        for (int64_t j = 0; j < n; j++) {                                 \
          const T v = sa_cws_add_##SUF(y[j * inc], bias[j]);              \
          y[j * inc] = (EXPR);                                            \
        }                                                                 \
      }                                                                   \
    }                                                                     \
  }

#define EPI_TYPE(T, SUF)                                     \
  EPI_LOOP(none, T, SUF, v)                                  \
  EPI_LOOP(relu, T, SUF, sa_cws_relu_##SUF(v))               \
  EPI_LOOP(relu6, T, SUF, sa_cws_relu6_##SUF(v))             \
  EPI_LOOP(elu, T, SUF, sa_cws_elu_##SUF(v))                 \
  EPI_LOOP(leakyrelu, T, SUF, sa_cws_leakyrelu_##SUF(v, al)) \
  EPI_LOOP(tanh, T, SUF, sa_cws_tanh_##SUF(v))               \
  EPI_LOOP(sigmoid, T, SUF, sa_cws_sigmoid_##SUF(v))

EPI_TYPE(float, f32)
EPI_TYPE(double, f64)

#define EPI_DISPATCH(T, SUF)                                                  \
  do {                                                                        \
    T* y = c;                                                                 \
    const T* b = e->bias;                                                     \
    const T al = (T)e->alpha;                                                 \
    switch (e->act) {                                                         \
      case SA_ACT_NONE: epi_none_##SUF(y, b, al, rows, n, ldc, inc); break;   \
      case SA_ACT_RELU: epi_relu_##SUF(y, b, al, rows, n, ldc, inc); break;   \
      case SA_ACT_RELU6: epi_relu6_##SUF(y, b, al, rows, n, ldc, inc); break; \
      case SA_ACT_ELU: epi_elu_##SUF(y, b, al, rows, n, ldc, inc); break;     \
      case SA_ACT_LEAKYRELU:                                                  \
        epi_leakyrelu_##SUF(y, b, al, rows, n, ldc, inc);                     \
        break;                                                                \
      case SA_ACT_TANH: epi_tanh_##SUF(y, b, al, rows, n, ldc, inc); break;   \
      case SA_ACT_SIGMOID:                                                    \
        epi_sigmoid_##SUF(y, b, al, rows, n, ldc, inc);                       \
        break;                                                                \
    }                                                                         \
  } while (0)

void sa_epi_apply(const sa_epi* e, void* c, int64_t rows, int64_t n,
                  int64_t ldc, int64_t inc) {
  if (e == NULL || rows <= 0 || n <= 0) return;
  if (e->dt == SA_F32)
    EPI_DISPATCH(float, f32);
  else
    EPI_DISPATCH(double, f64);
}
