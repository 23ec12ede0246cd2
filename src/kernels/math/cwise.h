/*
 * cwise.h - internal interface of the elementwise kernel family (cwise*.c).
 *
 * Files and what they own (each registers its own ops, see sk.h)
 *   cwise.c         unary ops (Relu, Exp, Relu6, Elu, Round, ...), the
 *                   same-shape gradient ops (ReluGrad, TanhGrad, EluGrad, ...),
 *                   generated from arith/ewops.h's rows
 *   cwise_binary.c  broadcasting (sk_cw_bcast_*), the one elementwise driver
 *                   most cwise ops run through, the dtype lists, binary ops
 *                   (AddV2, ...) and sk_cw_binary_compute, which the
 *                   other binary ops reuse; it needs nothing from the others
 *   cwise_bias.c    BiasAdd (a broadcast add) and BiasAddGrad (a
 *                   deterministic blocked reduction)
 *   cwise_addn.c    AddN: N same-shape inputs summed in one pass (its own
 *                   flat loop, not N - 1 driver launches)
 *   cwise_leaky.c   LeakyRelu, LeakyReluGrad (attribute alpha, which the
 *                   driver's loops cannot carry: their own flat loop)
 *   cwise_compare.c comparisons (bool output), logical ops, FloorDiv and
 *                   FloorMod (int64: the worker-side zero-divisor check)
 *   cwise_select.c  Select, SelectV2 (three operands: their own broadcast
 *                   walk, moving raw elements)
 *   arith/scalar.h  (src/arith) the float ops' scalar functions (sa_cws_*),
 *                   shared with the fused elementwise evaluator (ewprog.c)
 *   arith/ewops.h   (src/arith) THE list of the pure float ops (X-macro):
 *                   cwise.c, cwise_binary.c and ewprog.c expand its rows
 *
 * The driver. Every elementwise op is an inner loop `sk_cw_loop` applied to
 * an output of n elements whose two operands are walked with per-dimension
 * strides (0 on broadcast dimensions). sk_cw_bcast_plan collapses the shapes
 * first: dimensions of size 1 vanish and neighbours with the same broadcast
 * pattern merge, so same-shape and scalar cases become one dimension, and
 * bias-like row or column broadcasts become two. The loop then only sees
 * contiguous runs along the last collapsed dimension, with each operand
 * either contiguous or a repeated scalar (sk_cw_mode).
 *
 * Thread contract: plans and launches are built on TF's thread; the loops run
 * on the stream worker and its sim_parallel_for helpers, on disjoint output
 * ranges, touching only the pointers they are given.
 */
#ifndef SIMDEV_KERNELS_CWISE_H_
#define SIMDEV_KERNELS_CWISE_H_

/* The table of the pure float ops, whose kernels cwise.c and cwise_binary.c
 * generate (macros only). */
#include "arith/ewops.h"
#include "kernels/framework/sk.h"

/* Elements per sim_parallel_for grain for cheap elementwise work. */
#define SK_CW_GRAIN (1 << 15)

/* How the inner loop reads its operands over one run. */
typedef enum sk_cw_mode {
  SK_CW_VV = 0, /* x[i], y[i] */
  SK_CW_SV = 1, /* x[0], y[i] */
  SK_CW_VS = 2, /* x[i], y[0] */
} sk_cw_mode;

/* z[i] = f(x, y) for i in [0, n). z may be x or y (the same element only). */
typedef void (*sk_cw_loop)(const void* x, const void* y, void* z, int64_t n,
                           sk_cw_mode mode);

/* One loop per input dtype; NULL where the op is not registered for it
 * (b: bool inputs, for the logical ops; left out of most initializers). */
typedef struct sk_cw_loops {
  sk_cw_loop f32, f64, i64, b;
} sk_cw_loops;

/* A data check of operand y run on the stream worker before the loops (y
 * is only readable there): returns false after sk_fail (e.g. an integer
 * division by zero). ny is y's element count. */
typedef bool (*sk_cw_check)(sk_launch* l, const void* y, int64_t ny);

/* An op's name (the launch label, static), its loops, and the check its
 * int64 kernel runs on y first (NULL: none; left out of most initializers).
 * Kernels keep a pointer to a static const sk_cw_op as their state. */
typedef struct sk_cw_op {
  const char* name;
  sk_cw_loops loops;
  sk_cw_check int_check;
} sk_cw_op;

/* Defines `static void* fn(TF_OpKernelConstruction*)` creating a kernel that
 * runs `compute` with `desc` (a pointer to static const data) as state. */
#define SK_CW_CREATE(fn, compute, desc)                    \
  static void* fn(TF_OpKernelConstruction* c) {            \
    return sk_kernel_new(c, compute, (void*)(desc), NULL); \
  }

/* Defines an sk_cw_loop `name` reading operands of type T and writing
 * elements of type Z (bool for comparisons), computing EXPR from `a` (x's
 * element) and `b` (y's element). The scalar operand is read once before
 * its loop, so z may alias the other operand (when Z is T). */
#define SK_CW_BINARY_TO(name, T, Z, EXPR)                               \
  static void name(const void* xv, const void* yv, void* zv, int64_t n, \
                   sk_cw_mode mode) {                                   \
    const T* x = xv;                                                    \
    const T* y = yv;                                                    \
    Z* z = zv;                                                          \
    if (mode == SK_CW_SV) {                                             \
      const T a = x[0];                                                 \
      for (int64_t i = 0; i < n; i++) {                                 \
        const T b = y[i];                                               \
        z[i] = (EXPR);                                                  \
      }                                                                 \
    } else if (mode == SK_CW_VS) {                                      \
      const T b = y[0];                                                 \
      for (int64_t i = 0; i < n; i++) {                                 \
        const T a = x[i];                                               \
        z[i] = (EXPR);                                                  \
      }                                                                 \
    } else {                                                            \
      for (int64_t i = 0; i < n; i++) {                                 \
        const T a = x[i], b = y[i];                                     \
        z[i] = (EXPR);                                                  \
      }                                                                 \
    }                                                                   \
  }

/* The same with output type T. */
#define SK_CW_BINARY(name, T, EXPR) SK_CW_BINARY_TO(name, T, T, EXPR)

/* An sk_cw_loop for a unary op: EXPR of `a`; y and mode are ignored (unary
 * ops always run flat plans). */
#define SK_CW_UNARY(name, T, EXPR)                                      \
  static void name(const void* xv, const void* yv, void* zv, int64_t n, \
                   sk_cw_mode mode) {                                   \
    (void)yv;                                                           \
    (void)mode;                                                         \
    const T* x = xv;                                                    \
    T* z = zv;                                                          \
    for (int64_t i = 0; i < n; i++) {                                   \
      const T a = x[i];                                                 \
      z[i] = (EXPR);                                                    \
    }                                                                   \
  }

/* For the rows of arith/ewops.h (SA_EWOPS): SK_CW_I64_LOOP(ints, stem) is
 * the op's int64 loop `<stem>_i64` (which the expanding file defines) for a
 * row marked I64, NULL for FLT; SK_CW_TYPES(ints) its registration types
 * (the driver's real types, plus int64 for I64). */
#define SK_CW_I64_LOOP(ints, stem) SK_CW_I64_LOOP_##ints(stem)
#define SK_CW_I64_LOOP_I64(stem) stem##_i64
#define SK_CW_I64_LOOP_FLT(stem) NULL
#define SK_CW_TYPES(ints) SK_CW_TYPES_##ints
#define SK_CW_TYPES_I64 sk_cw_real_i64_types
#define SK_CW_TYPES_FLT sk_cw_real_types

/* Vectorize the loops even at -O2 (GCC's default "very cheap" cost model
 * skips loops of unknown trip count): applies to every function defined
 * after this point in the including file. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#endif

/* The ops' scalar arithmetic, after the pragma: compiled with the same
 * optimize options as the loops that inline it (GCC may refuse to inline a
 * function whose options differ from its caller's). */
#include "arith/scalar.h"

/* The loop of `loops` for dtype dt; fails the launch if there is none.
 * half and bfloat16 get the float32 loop: the driver converts operands to
 * float and rounds results to nearest even (bool results stay bool). */
sk_cw_loop sk_cw_pick(sk_launch* l, const sk_cw_loops* loops, TF_DataType dt,
                      const char* op);

/* A collapsed iteration space: out has nd >= 1 dimensions d, operands are
 * read at element offsets sum(i[k] * sx[k]) and sum(i[k] * sy[k]). */
typedef struct sk_cw_bcast {
  int nd;
  int64_t n;
  int64_t d[SK_MAX_DIMS];
  int64_t sx[SK_MAX_DIMS];
  int64_t sy[SK_MAX_DIMS];
} sk_cw_bcast;

/* NumPy/TF broadcasting of x against y: the output shape and the plan.
 * Returns false (launch untouched) if the shapes are incompatible. An output
 * shape TF would refuse (arith/dims.h) gets out->n = -1 and no plan: the
 * caller's sk_output then fails the launch. */
bool sk_cw_bcast_shapes(const sk_shape* x, const sk_shape* y, sk_shape* out,
                        sk_cw_bcast* plan);
/* The plan for operands already padded to out's rank (each dimension of x
 * and y equal to out's or 1). */
void sk_cw_bcast_plan(const sk_shape* out, const sk_shape* x, const sk_shape* y,
                      sk_cw_bcast* plan);
/* The plan for two operands of n elements each (no broadcasting). */
void sk_cw_bcast_flat(int64_t n, sk_cw_bcast* plan);

/* Fills the argument block and queues the work: z = loop(x, y) over plan.
 * dt is the operands' dtype; the output's element size is z's (bool for
 * comparisons). Does nothing for an empty plan (n == 0). `label` must be
 * static. */
void sk_cw_launch(sk_launch* l, sk_cw_loop loop, TF_DataType dt,
                  const TF_Tensor* x, const TF_Tensor* y, TF_Tensor* z,
                  const sk_cw_bcast* plan, const char* label);

/* sk_cw_launch with a check of y first (check may be NULL). */
void sk_cw_launch_checked(sk_launch* l, sk_cw_loop loop, TF_DataType dt,
                          const TF_Tensor* x, const TF_Tensor* y, TF_Tensor* z,
                          const sk_cw_bcast* plan, sk_cw_check check,
                          const char* label);

/* Called instead of failing when a binary op's shapes do not broadcast
 * (Equal / NotEqual with incompatible_shape_error=false). TF thread. */
typedef void (*sk_cw_mismatch_fn)(sk_launch* l);

/* TF thread: the compute function of every broadcasting binary op: z =
 * op(x, y) over inputs 0 and 1, InvalidArgument "Incompatible shapes: ..."
 * (or mismatch(l) if not NULL) when they do not broadcast, op->int_check on
 * int64 operands. */
void sk_cw_binary_compute(sk_launch* l, const sk_cw_op* op,
                          sk_cw_mismatch_fn mismatch);

/* 16-bit floats as the float32 loops see them: sk_cw_conv(dt) is
 * SK_CW_HALF, SK_CW_BF16 or 0 (no conversion); load16 widens n elements
 * exactly, store16 rounds n floats to nearest even (NaN stays NaN). Any
 * thread. */
enum { SK_CW_HALF = 1, SK_CW_BF16 = 2 };
int sk_cw_conv(TF_DataType dt);
void sk_cw_load16(int cv, const uint16_t* in, float* out, int64_t n);
void sk_cw_store16(int cv, const float* in, uint16_t* out, int64_t n);

/* AddV2's loops, for BiasAdd. */
extern const sk_cw_loops sk_cw_add_loops;

/* Registration type lists (cwise_binary.c). */
extern const TF_DataType sk_cw_float_types[];     /* float32, float64 */
extern const TF_DataType sk_cw_float_i64_types[]; /* ... and int64 */
/* float32, float64, half, bfloat16: for ops run by the driver, which feeds
 * 16-bit floats to the float32 loop (see sk_cw_pick) */
extern const TF_DataType sk_cw_real_types[];
extern const TF_DataType sk_cw_real_i64_types[]; /* ... and int64 */

#endif /* SIMDEV_KERNELS_CWISE_H_ */
