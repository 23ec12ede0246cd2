/*
 * fused_epi.c - skf_apply: the fused ops' epilogue y = act(y + bias), on
 * the block of output the arithmetic just wrote (fused.h says who calls it
 * and why it matches the unfused kernels bit for bit).
 *
 * One loop per activation and dtype, the switch outside the loops, and a
 * contiguous variant (inc == 1, every GEMM output and NHWC depthwise) that
 * the compiler vectorizes where the activation allows.
 *
 * Thread contract: runs on the stream worker or a pool thread, on the rows
 * it is given only; pure arithmetic (cwise_scalar.h), no framework calls.
 */
#include "kernels/cwise_scalar.h"
#include "kernels/fused.h"

/* Vectorize at -O2 too (see cwise.h: GCC's "very cheap" cost model skips
 * loops of unknown trip count). */
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
          const T v = sk_cws_add_##SUF(y[j], bias[j]);                    \
          y[j] = (EXPR);                                                  \
        }                                                                 \
      } else {                                                            \
        for (int64_t j = 0; j < n; j++) {                                 \
          const T v = sk_cws_add_##SUF(y[j * inc], bias[j]);              \
          y[j * inc] = (EXPR);                                            \
        }                                                                 \
      }                                                                   \
    }                                                                     \
  }

#define EPI_TYPE(T, SUF)                                     \
  EPI_LOOP(none, T, SUF, v)                                  \
  EPI_LOOP(relu, T, SUF, sk_cws_relu_##SUF(v))               \
  EPI_LOOP(relu6, T, SUF, sk_cws_relu6_##SUF(v))             \
  EPI_LOOP(elu, T, SUF, sk_cws_elu_##SUF(v))                 \
  EPI_LOOP(leakyrelu, T, SUF, sk_cws_leakyrelu_##SUF(v, al)) \
  EPI_LOOP(tanh, T, SUF, sk_cws_tanh_##SUF(v))               \
  EPI_LOOP(sigmoid, T, SUF, sk_cws_sigmoid_##SUF(v))

EPI_TYPE(float, f32)
EPI_TYPE(double, f64)

#define EPI_DISPATCH(T, SUF)                                                   \
  do {                                                                         \
    T* y = c;                                                                  \
    const T* b = e->bias;                                                      \
    const T al = (T)e->alpha;                                                  \
    switch (e->act) {                                                          \
      case SKF_NONE: epi_none_##SUF(y, b, al, rows, n, ldc, inc); break;       \
      case SKF_RELU: epi_relu_##SUF(y, b, al, rows, n, ldc, inc); break;       \
      case SKF_RELU6: epi_relu6_##SUF(y, b, al, rows, n, ldc, inc); break;     \
      case SKF_ELU: epi_elu_##SUF(y, b, al, rows, n, ldc, inc); break;         \
      case SKF_LEAKYRELU:                                                      \
        epi_leakyrelu_##SUF(y, b, al, rows, n, ldc, inc);                      \
        break;                                                                 \
      case SKF_TANH: epi_tanh_##SUF(y, b, al, rows, n, ldc, inc); break;       \
      case SKF_SIGMOID: epi_sigmoid_##SUF(y, b, al, rows, n, ldc, inc); break; \
    }                                                                          \
  } while (0)

void skf_apply(const skf_epi* e, void* c, int64_t rows, int64_t n, int64_t ldc,
               int64_t inc) {
  if (e == NULL || rows <= 0 || n <= 0) return;
  if (e->dt == TF_FLOAT)
    EPI_DISPATCH(float, f32);
  else
    EPI_DISPATCH(double, f64);
}
