/*
 * reduce.c - Sum, Mean, Max, Min, Prod over a list of axes.
 *
 * The axes arrive in `reduction_indices`, kept in host memory (int32 or
 * int64: the Tidx attribute is left unconstrained and the dtype is read at
 * run time), so the compute function validates them like TF's CPU kernel
 * (InvalidArgument for an out-of-range or duplicate axis) and plans the
 * whole reduction before anything is queued.
 *
 * Planning. Size-1 dimensions are dropped and neighbouring dimensions that
 * are both reduced or both kept are merged. What remains is an alternating
 * list; it is read as  outer kept dims x reduced dims x K,  where K is the
 * last dimension if it is kept (1 otherwise). The output is row-major over
 * the kept dims, so output (o, k) is element o*K + k.
 *
 * Determinism. The work is cut into fixed units (o, k-block, r-block): at
 * most RED_KBLOCK outputs of one K row, over at most ~RED_UNIT_ELEMS input
 * elements. The cut depends only on the shape, never on the thread count.
 * Each unit accumulates in a fixed order (float32 in double); with more than
 * one r-block per output, the partial results go to scratch memory and a
 * second pass merges them in r-block order. Results are bit-identical from
 * run to run.
 *
 * Conventions that follow TF's CPU kernels: Max/Min propagate NaN; reducing
 * a zero-size dimension gives Sum 0, Prod 1, Max -inf, Min +inf, Mean NaN
 * (int64 Max / Min: the lowest / highest value; integer Mean 0); integer
 * sums and products wrap, integer Mean divides the wrapped sum toward zero;
 * reducing nothing (no axes, or only size-1 axes) aliases the input.
 *
 * Thread contract: compute functions run on TF's thread and read only host
 * memory (the axes); the red_* run functions run on the stream worker and
 * spread their units with sim_parallel_for.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/sk.h"

#define RED_KBLOCK 1024      /* outputs per unit along K */
#define RED_UNIT_ELEMS 32768 /* input elements per unit (about) */

typedef enum red_kind {
  RED_SUM,
  RED_MEAN,
  RED_MAX,
  RED_MIN,
  RED_PROD
} red_kind;

/* An accumulator: double for float types; for integers wrapping uint64
 * (sums, products: the low bits are those of TF's wrapping int32 / int64
 * arithmetic) or int64 (Max, Min). */
typedef union red_acc {
  double f;
  uint64_t u;
  int64_t i;
} red_acc;

/* The arithmetic of one (op, dtype). `count` is the number of reduced
 * elements; store divides by it when `mean` is set. */
typedef struct red_ops {
  void (*init)(red_acc* a, int64_t n);
  /* a[0] over x[0..n) (contiguous). */
  void (*row)(red_acc* a, const void* x, int64_t n);
  /* a[j] over x[r*stride + j] for r < rows, j < k. */
  void (*cols)(red_acc* a, const void* x, int64_t rows, int64_t stride,
               int64_t k);
  void (*merge)(red_acc* a, const red_acc* b, int64_t n);
  void (*store)(void* y, const red_acc* a, int64_t n, bool mean, int64_t count);
} red_ops;

#define OP_SUM(a, v) ((a) + (v))
#define OP_PROD(a, v) ((a) * (v))
/* NaN wins: once the accumulator is NaN, no comparison replaces it. */
#define OP_MAX(a, v) (((v) > (a) || (v) != (v)) ? (v) : (a))
#define OP_MIN(a, v) (((v) < (a) || (v) != (v)) ? (v) : (a))

/* Mean's division: floats divide the double sum; integers truncate the
 * wrapped sum to T first and divide in T (toward zero), as TF's integer
 * Mean; an empty integer Mean gives 0 instead of dividing by zero. */
#define MEAN_FLOAT(T, v, c) ((v) / (double)(c))
/* Divided in int64: TF divides by the count cast to T, which for counts of
 * 2^32 and more could be 0 or -1 (SIGFPE on INT32_MIN / -1). */
#define MEAN_INT(T, v, c) \
  ((c) == 0 ? (T)0 : (T)((int64_t)(T)(v) / (int64_t)(c)))

#define RED_DEFINE(NAME, T, M, ACC, INIT, OP, MEAN)                          \
  static void NAME##_init(red_acc* a, int64_t n) {                           \
    for (int64_t i = 0; i < n; i++) a[i].M = (INIT);                         \
  }                                                                          \
  static void NAME##_row(red_acc* a, const void* xv, int64_t n) {            \
    const T* x = xv;                                                         \
    ACC acc = a->M;                                                          \
    for (int64_t i = 0; i < n; i++) acc = OP(acc, (ACC)x[i]);                \
    a->M = acc;                                                              \
  }                                                                          \
  static void NAME##_cols(red_acc* a, const void* xv, int64_t rows,          \
                          int64_t stride, int64_t k) {                       \
    const T* x = xv;                                                         \
    for (int64_t r = 0; r < rows; r++, x += stride)                          \
      for (int64_t j = 0; j < k; j++) a[j].M = OP(a[j].M, (ACC)x[j]);        \
  }                                                                          \
  static void NAME##_merge(red_acc* a, const red_acc* b, int64_t n) {        \
    for (int64_t i = 0; i < n; i++) a[i].M = OP(a[i].M, b[i].M);             \
  }                                                                          \
  static void NAME##_store(void* yv, const red_acc* a, int64_t n, bool mean, \
                           int64_t count) {                                  \
    T* y = yv;                                                               \
    if (mean)                                                                \
      for (int64_t i = 0; i < n; i++) y[i] = (T)MEAN(T, a[i].M, count);      \
    else                                                                     \
      for (int64_t i = 0; i < n; i++) y[i] = (T)a[i].M;                      \
  }                                                                          \
  static const red_ops NAME = {NAME##_init, NAME##_row, NAME##_cols,         \
                               NAME##_merge, NAME##_store};

RED_DEFINE(sum_f32, float, f, double, 0.0, OP_SUM, MEAN_FLOAT)
RED_DEFINE(sum_f64, double, f, double, 0.0, OP_SUM, MEAN_FLOAT)
RED_DEFINE(sum_i64, int64_t, u, uint64_t, 0, OP_SUM, MEAN_INT)
RED_DEFINE(sum_i32, int32_t, u, uint64_t, 0, OP_SUM, MEAN_INT)
RED_DEFINE(prod_f32, float, f, double, 1.0, OP_PROD, MEAN_FLOAT)
RED_DEFINE(prod_f64, double, f, double, 1.0, OP_PROD, MEAN_FLOAT)
RED_DEFINE(prod_i64, int64_t, u, uint64_t, 1, OP_PROD, MEAN_INT)
RED_DEFINE(prod_i32, int32_t, u, uint64_t, 1, OP_PROD, MEAN_INT)
RED_DEFINE(max_f32, float, f, double, -INFINITY, OP_MAX, MEAN_FLOAT)
RED_DEFINE(max_f64, double, f, double, -INFINITY, OP_MAX, MEAN_FLOAT)
RED_DEFINE(max_i64, int64_t, i, int64_t, INT64_MIN, OP_MAX, MEAN_INT)
RED_DEFINE(min_f32, float, f, double, INFINITY, OP_MIN, MEAN_FLOAT)
RED_DEFINE(min_f64, double, f, double, INFINITY, OP_MIN, MEAN_FLOAT)
RED_DEFINE(min_i64, int64_t, i, int64_t, INT64_MAX, OP_MIN, MEAN_INT)

static const red_ops* red_ops_for(red_kind kind, TF_DataType dt) {
  bool f32 = dt == TF_FLOAT, f64 = dt == TF_DOUBLE;
  bool i64 = dt == TF_INT64, i32 = dt == TF_INT32;
  switch (kind) {
    case RED_SUM:
    case RED_MEAN:
      return f32   ? &sum_f32
             : f64 ? &sum_f64
             : i64 ? &sum_i64
             : i32 ? &sum_i32
                   : NULL;
    case RED_PROD:
      return f32   ? &prod_f32
             : f64 ? &prod_f64
             : i64 ? &prod_i64
             : i32 ? &prod_i32
                   : NULL;
    case RED_MAX:
      return f32 ? &max_f32 : f64 ? &max_f64 : i64 ? &max_i64 : NULL;
    case RED_MIN:
      return f32 ? &min_f32 : f64 ? &min_f64 : i64 ? &min_i64 : NULL;
  }
  return NULL;
}

/* ---- the plan ------------------------------------------------------------ */

typedef struct red_args {
  const red_ops* ops;
  bool mean;
  size_t esize;
  const char* x;
  char* y;
  red_acc* part; /* [O][nrb][K] partial results when nrb > 1 */
  int nouter, nred;
  int64_t osize[SK_MAX_DIMS], ostride[SK_MAX_DIMS];
  int64_t rsize[SK_MAX_DIMS], rstride[SK_MAX_DIMS];
  int64_t O, R, K;
  int64_t kb, nkb; /* K block size and count */
  int64_t rb, nrb; /* reduced-index block size and count */
  int64_t nout;    /* output elements (fill runs) */
} red_args;

/* Drops size-1 dims and merges neighbours with the same flag, then splits
 * the result into outer kept dims, reduced dims and K (see the header). */
static void red_plan(red_args* a, const sk_shape* s, const bool* red) {
  int64_t cs[SK_MAX_DIMS];
  bool cr[SK_MAX_DIMS];
  int m = 0;
  for (int i = 0; i < s->nd; i++) {
    if (s->d[i] == 1) continue;
    if (m > 0 && cr[m - 1] == red[i]) {
      cs[m - 1] *= s->d[i];
    } else {
      cs[m] = s->d[i];
      cr[m++] = red[i];
    }
  }
  int64_t stride[SK_MAX_DIMS];
  int64_t st = 1;
  for (int j = m - 1; j >= 0; j--) {
    stride[j] = st;
    st *= cs[j];
  }
  bool inner_kept = m > 0 && !cr[m - 1];
  a->K = inner_kept ? cs[m - 1] : 1;
  a->O = 1;
  a->R = 1;
  for (int j = 0; j < m - (inner_kept ? 1 : 0); j++) {
    if (cr[j]) {
      a->rsize[a->nred] = cs[j];
      a->rstride[a->nred++] = stride[j];
      a->R *= cs[j];
    } else {
      a->osize[a->nouter] = cs[j];
      a->ostride[a->nouter++] = stride[j];
      a->O *= cs[j];
    }
  }
  a->kb = a->K < RED_KBLOCK ? a->K : RED_KBLOCK;
  a->nkb = (a->K + a->kb - 1) / a->kb;
  a->rb = RED_UNIT_ELEMS / a->kb;
  if (a->rb < 1) a->rb = 1;
  a->nrb = (a->R + a->rb - 1) / a->rb;
}

/* Input offset of outer index o. */
static int64_t red_outer_offset(const red_args* a, int64_t o) {
  int64_t off = 0;
  for (int j = a->nouter - 1; j >= 0; j--) {
    off += (o % a->osize[j]) * a->ostride[j];
    o /= a->osize[j];
  }
  return off;
}

/* Accumulates reduced indices [r0, r1) of the K slice starting at `base`
 * (kn outputs) into acc, walking the reduced dims like an odometer so that
 * each run along the innermost reduced dim is one call. */
static void red_accumulate(const red_args* a, red_acc* acc, int64_t base,
                           int64_t kn, int64_t r0, int64_t r1) {
  int64_t idx[SK_MAX_DIMS];
  int64_t off = 0, r = r0;
  for (int j = a->nred - 1; j >= 0; j--) {
    idx[j] = r % a->rsize[j];
    off += idx[j] * a->rstride[j];
    r /= a->rsize[j];
  }
  int in = a->nred - 1;
  int64_t istride = a->rstride[in];
  for (r = r0; r < r1;) {
    int64_t run = a->rsize[in] - idx[in];
    if (run > r1 - r) run = r1 - r;
    const char* p = a->x + (size_t)(base + off) * a->esize;
    if (a->K == 1)
      a->ops->row(acc, p, run); /* innermost reduced dim has stride 1 */
    else
      a->ops->cols(acc, p, run, istride, kn);
    r += run;
    idx[in] += run;
    off += run * istride;
    for (int j = in; j > 0 && idx[j] == a->rsize[j]; j--) {
      off -= idx[j] * a->rstride[j];
      idx[j] = 0;
      idx[j - 1]++;
      off += a->rstride[j - 1];
    }
  }
}

/* Units [u0, u1): unit u is (o, k-block, r-block), r-block fastest. */
static void red_units(void* arg, int64_t u0, int64_t u1) {
  const red_args* a = arg;
  red_acc acc[RED_KBLOCK];
  for (int64_t u = u0; u < u1; u++) {
    int64_t rbi = u % a->nrb, t = u / a->nrb;
    int64_t kbi = t % a->nkb, o = t / a->nkb;
    int64_t k0 = kbi * a->kb;
    int64_t kn = a->K - k0 < a->kb ? a->K - k0 : a->kb;
    int64_t r0 = rbi * a->rb;
    int64_t r1 = r0 + a->rb < a->R ? r0 + a->rb : a->R;
    a->ops->init(acc, kn);
    red_accumulate(a, acc, red_outer_offset(a, o) + k0, kn, r0, r1);
    if (a->nrb == 1)
      a->ops->store(a->y + (size_t)(o * a->K + k0) * a->esize, acc, kn, a->mean,
                    a->R);
    else
      memcpy(a->part + (o * a->nrb + rbi) * a->K + k0, acc,
             (size_t)kn * sizeof(*acc));
  }
}

/* Merges the r-block partials of units (o, k-block) in [u0, u1). */
static void red_merge(void* arg, int64_t u0, int64_t u1) {
  const red_args* a = arg;
  red_acc acc[RED_KBLOCK];
  for (int64_t u = u0; u < u1; u++) {
    int64_t kbi = u % a->nkb, o = u / a->nkb;
    int64_t k0 = kbi * a->kb;
    int64_t kn = a->K - k0 < a->kb ? a->K - k0 : a->kb;
    const red_acc* p = a->part + o * a->nrb * a->K + k0;
    memcpy(acc, p, (size_t)kn * sizeof(*acc));
    for (int64_t b = 1; b < a->nrb; b++) a->ops->merge(acc, p + b * a->K, kn);
    a->ops->store(a->y + (size_t)(o * a->K + k0) * a->esize, acc, kn, a->mean,
                  a->R);
  }
}

/* Units per parallel range so that a range covers ~RED_UNIT_ELEMS. */
static int64_t red_grain(int64_t elems_per_unit) {
  if (elems_per_unit < 1) elems_per_unit = 1;
  int64_t g = RED_UNIT_ELEMS / elems_per_unit;
  return g < 1 ? 1 : g;
}

static void red_run(sk_launch* l, void* args) {
  (void)l;
  red_args* a = args;
  int64_t rn = a->R < a->rb ? a->R : a->rb;
  sim_parallel_for(a->O * a->nkb * a->nrb, red_grain(rn * a->kb), red_units, a);
  if (a->nrb > 1)
    sim_parallel_for(a->O * a->nkb, red_grain(a->nrb * a->kb), red_merge, a);
}

/* Reducing over a zero-size dimension: every output is the identity. */
static void red_fill_range(void* arg, int64_t b, int64_t e) {
  const red_args* a = arg;
  red_acc acc[RED_KBLOCK];
  for (int64_t i = b * RED_KBLOCK; i < e * RED_KBLOCK && i < a->nout;
       i += RED_KBLOCK) {
    int64_t n = a->nout - i < RED_KBLOCK ? a->nout - i : RED_KBLOCK;
    a->ops->init(acc, n);
    a->ops->store(a->y + (size_t)i * a->esize, acc, n, a->mean, 0);
  }
}

static void red_fill_run(sk_launch* l, void* args) {
  (void)l;
  red_args* a = args;
  sim_parallel_for((a->nout + RED_KBLOCK - 1) / RED_KBLOCK, 32, red_fill_range,
                   a);
}

/* ---- compute (TF thread) ------------------------------------------------- */

typedef struct red_state {
  red_kind kind;
  bool keep_dims;
  const char* name;
} red_state;

/* Marks the axes listed in `t` (int32 or int64, any shape) in red[]. */
static bool red_read_axes(sk_launch* l, const TF_Tensor* t, int nd, bool* red) {
  TF_DataType dt = TF_TensorType(t);
  int64_t n = TF_TensorElementCount(t);
  const void* p = sk_data(t);
  for (int i = 0; i < nd; i++) red[i] = false;
  if (dt != TF_INT32 && dt != TF_INT64) {
    sk_fail(l, TF_INVALID_ARGUMENT, "reduction_indices must be int32 or int64");
    return false;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t v = sk_index(dt, p, i);
    if (v < -nd || v >= nd) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Invalid reduction dimension (%lld for input with %d "
              "dimension(s))",
              (long long)v, nd);
      return false;
    }
    int ax = (int)(v < 0 ? v + nd : v);
    if (red[ax]) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Invalid reduction arguments: Axes contains duplicate "
              "dimension: %d",
              ax);
      return false;
    }
    red[ax] = true;
  }
  return true;
}

static void red_compute(sk_launch* l, void* state) {
  const red_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* axes = sk_input(l, 1);
  sk_shape s, os;
  bool red[SK_MAX_DIMS];
  if (x == NULL || axes == NULL || !sk_shape_of(l, x, &s) ||
      !red_read_axes(l, axes, s.nd, red))
    return;
  os.nd = 0;
  /* R: the reduced count. When x has an element it is exact (it divides
   * s.n). An empty x's dims need not have a product that fits int64
   * ([0, 5, 2**62, 4]: arith/dims.h), and then only whether R is 0, 1 or more
   * matters (2 stands for more): R == 1 aliases, R == 0 with a non-empty
   * output fills, and any other R leaves the output empty (a kept dim is
   * 0), so nothing runs. */
  int64_t R = 1;
  for (int i = 0; i < s.nd; i++) {
    if (red[i]) {
      if (s.n > 0)
        R *= s.d[i];
      else
        R = R == 0 || s.d[i] == 0 ? 0 : (R == 1 && s.d[i] == 1 ? 1 : 2);
    }
    if (!red[i] || st->keep_dims) os.d[os.nd++] = red[i] ? 1 : s.d[i];
  }
  if (!sk_shape_count(l, &os)) return;
  TF_DataType dt = TF_TensorType(x);
  const red_ops* ops = red_ops_for(st->kind, dt);
  if (ops == NULL) {
    sk_fail(l, TF_UNIMPLEMENTED, "simdev %s does not support %s", st->name,
            sk_dtype_name(dt));
    return;
  }
  if (R == 1) { /* nothing to reduce: the output is the input */
    sk_output_alias(l, 0, x, dt, &os);
    return;
  }
  TF_Tensor* y = sk_output(l, 0, &os);
  red_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os.n == 0) return;
  a->ops = ops;
  a->mean = st->kind == RED_MEAN;
  a->esize = TF_DataTypeSize(dt);
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->nout = os.n;
  if (R == 0) {
    sk_work(l, red_fill_run, st->name);
    return;
  }
  red_plan(a, &s, red);
  if (a->nrb > 1) {
    int64_t np;
    if (!sk_size_mul(l, a->O, a->nrb, &np, st->name) ||
        !sk_size_mul(l, np, a->K, &np, st->name))
      return;
    a->part = sk_temp_n(l, np, sizeof(red_acc));
    if (a->part == NULL) return;
  }
  sk_work(l, red_run, st->name);
}

static void* red_create(TF_OpKernelConstruction* c, red_kind kind,
                        const char* name) {
  bool keep = false;
  if (!sk_attr_bool(c, "keep_dims", &keep)) return NULL;
  red_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->kind = kind;
  st->keep_dims = keep;
  st->name = name;
  return sk_kernel_new(c, red_compute, st, free);
}

static void* sum_create(TF_OpKernelConstruction* c) {
  return red_create(c, RED_SUM, "Sum");
}
static void* mean_create(TF_OpKernelConstruction* c) {
  return red_create(c, RED_MEAN, "Mean");
}
static void* max_create(TF_OpKernelConstruction* c) {
  return red_create(c, RED_MAX, "Max");
}
static void* min_create(TF_OpKernelConstruction* c) {
  return red_create(c, RED_MIN, "Min");
}
static void* prod_create(TF_OpKernelConstruction* c) {
  return red_create(c, RED_PROD, "Prod");
}

static const TF_DataType kDevTypes[] = {TF_FLOAT, TF_DOUBLE, TF_INT64, 0};
static const TF_DataType kI32[] = {TF_INT32, 0};
static const char* const kAxesHost[] = {"reduction_indices", NULL};
/* int32 as TF's GPU build: every argument in host memory. Max and Min
 * int32 are TF's own DEVICE_DEFAULT kernels. */
static const char* const kAllHost[] = {"input", "reduction_indices", "output",
                                       NULL};

/* Tidx is left unconstrained: one kernel serves int32 and int64 axes. */
static const sk_op kOps[] = {
    {"Sum", sum_create, "T", kDevTypes, kAxesHost},
    {"Sum", sum_create, "T", kI32, kAllHost},
    {"Mean", mean_create, "T", kDevTypes, kAxesHost},
    {"Mean", mean_create, "T", kI32, kAllHost},
    {"Max", max_create, "T", kDevTypes, kAxesHost},
    {"Min", min_create, "T", kDevTypes, kAxesHost},
    {"Prod", prod_create, "T", kDevTypes, kAxesHost},
    {"Prod", prod_create, "T", kI32, kAllHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_reduce(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
