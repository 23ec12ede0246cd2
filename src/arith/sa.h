/*
 * sa.h - simdev's dense arithmetic (src/arith/, prefix sa_): GEMM over
 * OpenBLAS, the fused ops' bias + activation epilogue, and 2-D convolution
 * as im2col + GEMM with its two backprops.
 *
 * Neither TensorFlow nor XLA is in here. Two front ends call it from their
 * stream workers: TF's kernels (src/kernels, through TF's kernel C API) and
 * the XLA FFI handlers (src/xla, for JAX). Both therefore get the same bits
 * for a product or a convolution: the cut of C into row blocks and the
 * convolution's chunks depend only on shapes and the machine's core count,
 * never on who asked or on timing.
 *
 * The element-wise scalar functions (sa_cws_*) are in arith/scalar.h, the
 * module's second public header: header-only, included by the TF-free
 * elementwise evaluator as well.
 *
 * Layout: row-major, NHWC images, HWIO filters ([KH, KW, C/groups, O]).
 * Types: float32 and float64 only (sa_dtype).
 *
 * Thread contract: every function is a pure function of its arguments and
 * may spread its work over sim_parallel_for (device_sim's pool), which runs
 * inline on a pool thread or inside another parallel loop. Call them from a
 * stream worker (or any thread that may use the pool: never while holding
 * a lock a pool task could want). Buffers must not overlap unless stated.
 */
#ifndef SIMDEV_ARITH_SA_H_
#define SIMDEV_ARITH_SA_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. The values are TF_FLOAT and TF_DOUBLE's, so that the
 * kernels may cast a checked TF_DataType (they static-assert it). */
typedef enum sa_dtype { SA_F32 = 1, SA_F64 = 2 } sa_dtype;

/* Bytes per element of dt. */
static inline size_t sa_dtype_size(sa_dtype dt) {
  return dt == SA_F32 ? sizeof(float) : sizeof(double);
}

/* ---- the epilogue: y = act(y + bias[channel]) (epi.c) ------------------ */

enum sa_act {
  SA_ACT_NONE, /* bias only */
  SA_ACT_RELU,
  SA_ACT_RELU6,
  SA_ACT_ELU,
  SA_ACT_LEAKYRELU,
  SA_ACT_TANH,
  SA_ACT_SIGMOID,
};

typedef struct sa_epi {
  sa_dtype dt;
  const void* bias; /* one value per output channel (column of C) */
  enum sa_act act;
  float alpha; /* LeakyRelu's slope, converted to dt before use */
} sa_epi;

/* Applies e to `rows` rows of `n` elements at c: row r starts at element
 * r * ldc, its element j sits at j * inc and takes bias[j]. The add is
 * BiasAdd's (a + b in the type) and each activation is arith/scalar.h's
 * function, so the epilogue equals the unfused chain bit for bit. e == NULL
 * does nothing. */
void sa_epi_apply(const sa_epi* e, void* c, int64_t rows, int64_t n,
                  int64_t ldc, int64_t inc);

/* ---- GEMM (gemm.c) ----------------------------------------------------- */

/* Sets OpenBLAS single-threaded (simdev spreads products itself, gemm.c
 * says why). Call once before the first sa_gemm; idempotent. */
void sa_blas_init(void);

/* Largest m, n, k, lda, ldb and ldc sa_gemm takes (OpenBLAS's int). */
#define SA_BLAS_MAX INT32_MAX

/* C[m, n] = op(A)[m, k] x op(B)[k, n] + beta * C, row-major, op = transpose
 * when ta / tb; then the epilogue ep (NULL: none) on each block of rows
 * right after that block's product. m or n of 0 does nothing; k of 0 gives
 * beta * C (then ep). Sizes must be <= SA_BLAS_MAX (callers check: their
 * own error message names the op). The blocks do not depend on ep: with ep,
 * C has the bits of the product without ep, then ep. */
void sa_gemm(sa_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
             const void* a, int64_t lda, const void* b, int64_t ldb,
             double beta, void* c, int64_t ldc, const sa_epi* ep);

/* ---- convolution (conv.c) ---------------------------------------------- */

enum sa_pad { SA_PAD_SAME, SA_PAD_VALID, SA_PAD_EXPLICIT };

/* Output size and padding before along one spatial axis, TF's and XLA's
 * rule (TF: GetWindowedOutputSizeVerbose): VALID (in - eff + stride) /
 * stride, SAME ceil(in / stride) with the excess split low-first, EXPLICIT
 * pads[0] before and pads[1] after; eff = (k - 1) * dil + 1. stride and dil
 * must be >= 1, in >= 0; in, k and pads may be as large as an empty
 * tensor's dim or an attribute: every step is computed checked. Returns
 *   SA_WINDOW_OK        *out and *before set;
 *   SA_WINDOW_NEGATIVE  the output size would be negative (*out holds it,
 *                       for the caller's message);
 *   SA_WINDOW_OVERFLOW  a step (eff, a sum of sizes and paddings, SAME's
 *                       padding) does not fit int64; *out and *before
 *                       unspecified.
 * Callers report the last two as TF's InvalidArgument. */
enum sa_window { SA_WINDOW_OK, SA_WINDOW_NEGATIVE, SA_WINDOW_OVERFLOW };
enum sa_window sa_conv_window(enum sa_pad pad, int64_t in, int64_t k,
                              int64_t dil, int64_t stride,
                              const int64_t pads[2], int64_t* out,
                              int64_t* before);

/* Geometry of one convolution; every size in elements. */
typedef struct sa_conv_geom {
  int64_t n, h, w, c;    /* input (NHWC) */
  int64_t kh, kw, kc, o; /* filter; kc = input channels per group */
  int64_t oh, ow;        /* output spatial size */
  int64_t sh, sw, dh, dw;
  int64_t pt, pl; /* padding before rows / columns */
  int64_t groups; /* c / kc; 0 for an input of depth 0 (output: zeros) */
} sa_conv_geom;

/* False when the GEMMs of g would exceed SA_BLAS_MAX or one row of its
 * im2col scratch would not fit in an int64 count of bytes (the caller
 * reports it, naming the op). Call it before sa_conv_plan, whose scratch
 * size arithmetic relies on it. */
bool sa_conv_sizes_ok(const sa_conv_geom* g);

/* One convolution's plan and buffers, for sa_conv_fwd / _bp_input /
 * _bp_filter. Fill it with sa_conv_plan, then set the buffers. */
typedef struct sa_conv {
  sa_dtype dt;
  size_t es; /* element size */
  sa_conv_geom g;
  /* The forward roles: x input, f filter, y output. Backprops write the
   * gradient in its forward slot: dx in x, dW in f; dy sits in y. */
  void* x;
  void* f;
  void* y;
  void* col;          /* im2col scratch of chunk_rows output rows */
  int64_t chunk_rows; /* output rows (n, oh) per chunk */
  bool direct;        /* col would be x itself: no im2col, one gemm */
  bool zero_only;     /* nothing to multiply: the output is zeros */
  const sa_epi* ep;   /* forward only: the epilogue (usually &epi), or NULL */
  sa_epi epi;
} sa_conv;

/* Fills a's type, geometry, direct, zero_only and chunk_rows for g (buffers
 * and ep NULL; g must pass sa_conv_sizes_ok) and returns the bytes of im2col
 * scratch a->col must point to (0: none needed). Chunks hold whole output rows
 * (n, oh) and at most SA_CONV_SCRATCH_BYTES unless one row alone is larger. */
size_t sa_conv_plan(sa_conv* a, const sa_conv_geom* g, sa_dtype dt);
#define SA_CONV_SCRATCH_BYTES ((size_t)4 << 20)

/* y = conv(x, f), then a->ep. Grouped convolutions (groups > 1) too. */
void sa_conv_fwd(const sa_conv* a);
/* dx (in a->x) = the input gradient of dy (in a->y) and f; groups == 1. */
void sa_conv_bp_input(const sa_conv* a);
/* dW (in a->f) = the filter gradient of x and dy (in a->y); groups == 1. */
void sa_conv_bp_filter(const sa_conv* a);

/* im2col: col = the patches of output rows [r0, r0 + rows) for channel
 * group grp (exposed for the unit tests). */
void sa_conv_im2col(const sa_conv* a, int64_t r0, int64_t rows, int64_t grp);

#ifdef __cplusplus
}
#endif

#endif /* SIMDEV_ARITH_SA_H_ */
