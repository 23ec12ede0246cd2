/*
 * pooling.c - 2-D pooling on NHWC tensors: MaxPool, AvgPool and their
 * gradients MaxPoolGrad, AvgPoolGrad (float32, float64).
 *
 * Geometry follows TF: ksize/strides are 4 ints with batch and depth 1;
 * VALID gives (in - k + s) / s outputs (negative: InvalidArgument), SAME
 * gives ceil(in / s) with the padding split before/after (smaller half
 * before), EXPLICIT (MaxPool, MaxPoolGrad) takes explicit_paddings. Padded
 * positions never take part: a max ignores them, an average divides by the
 * number of real elements in its window.
 *
 * Semantics copied from TF's CPU kernels, which tests compare against:
 *   MaxPool      starts from the lowest finite value and takes v when
 *                v > max, so NaNs are skipped and an all -inf window gives
 *                the lowest finite value.
 *   MaxPoolGrad  ignores orig_output and recomputes each window's argmax
 *                from orig_input: the first element in row-major order,
 *                replaced only by a strictly larger one; each gradient goes
 *                to its window's argmax.
 *
 * Determinism and parallelism. Every unit of sim_parallel_for writes only
 * its own outputs. The gradients are gathers, not scatters: phase 1 stores
 * each output's argmax (MaxPoolGrad), phase 2 visits each input pixel and
 * adds the gradients of the windows covering it in output raster order,
 * which is the order TF's CPU scatter adds them in.
 *
 * Thread contract: create functions read attributes on TF's thread; compute
 * functions validate shapes there; *_run functions and unit functions run
 * on the stream worker and touch only their args.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/sk.h"

#define POOL_GRAIN_ELEMS 32768
#define POOL_CBLOCK 256 /* channels per stack buffer */

typedef enum pool_kind {
  POOL_MAX,
  POOL_AVG,
  POOL_MAX_GRAD,
  POOL_AVG_GRAD
} pool_kind;
typedef enum pool_pad { PAD_VALID, PAD_SAME, PAD_EXPLICIT } pool_pad;

/* Attributes of one node, read at construction. */
typedef struct pool_state {
  pool_kind kind;
  const char* name;
  int64_t kh, kw, sh, sw;
  pool_pad pad;
  int64_t explicit_pad[4]; /* top, bottom, left, right */
} pool_state;

/* Shapes of one launch: input [n, h, w, c], output [n, oh, ow, c]. */
typedef struct pool_geom {
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw;
  int64_t pt, pl; /* padding before rows / columns */
} pool_geom;

typedef struct pool_args {
  pool_geom g;
  TF_DataType dt;
  const void* x;  /* forward input, or orig_input for MaxPoolGrad */
  void* y;        /* forward output, or the input gradient */
  const void* dy; /* output gradient (grads) */
  int64_t* am;    /* MaxPoolGrad: argmax per output element */
  bool avg;       /* AvgPool, AvgPoolGrad */
} pool_args;

/* ---- windows ------------------------------------------------------------- */

/* The real rows [*b, *e) of window `o` along one spatial dimension. */
static void pool_window(int64_t o, int64_t s, int64_t k, int64_t pad,
                        int64_t in, int64_t* b, int64_t* e) {
  int64_t start = o * s - pad;
  *e = start + k < in ? start + k : in;
  *b = start > 0 ? start : 0;
}

/* The outputs [*b, *e) whose windows cover input row i. */
static void pool_covering(int64_t i, int64_t s, int64_t k, int64_t pad,
                          int64_t out, int64_t* b, int64_t* e) {
  int64_t t = i + pad - k + 1;
  *b = t <= 0 ? 0 : (t + s - 1) / s;
  int64_t last = (i + pad) / s;
  *e = last + 1 < out ? last + 1 : out;
}

static int64_t pool_grain(int64_t work_per_unit) {
  int64_t g = POOL_GRAIN_ELEMS / (work_per_unit > 0 ? work_per_unit : 1);
  return g < 1 ? 1 : g;
}

/* ---- per-type loops ------------------------------------------------------ */

/* Output pixels [p0, p1) of MaxPool or AvgPool. */
#define POOL_FWD(NAME, T, LOWEST)                                           \
  static void NAME(const pool_args* a, bool avg, int64_t p0, int64_t p1) {  \
    const pool_geom* g = &a->g;                                             \
    double acc[POOL_CBLOCK];                                                \
    for (int64_t p = p0; p < p1; p++) {                                     \
      int64_t ow = p % g->ow, t = p / g->ow, oh = t % g->oh, n = t / g->oh; \
      int64_t hb, he, wb, we;                                               \
      pool_window(oh, g->sh, g->kh, g->pt, g->h, &hb, &he);                 \
      pool_window(ow, g->sw, g->kw, g->pl, g->w, &wb, &we);                 \
      T* y = (T*)a->y + p * g->c;                                           \
      const T* x = (const T*)a->x + n * g->h * g->w * g->c;                 \
      for (int64_t c0 = 0; c0 < g->c; c0 += POOL_CBLOCK) {                  \
        int64_t cn = g->c - c0 < POOL_CBLOCK ? g->c - c0 : POOL_CBLOCK;     \
        for (int64_t c = 0; c < cn; c++) acc[c] = avg ? 0.0 : (LOWEST);     \
        for (int64_t h = hb; h < he; h++)                                   \
          for (int64_t w = wb; w < we; w++) {                               \
            const T* v = x + (h * g->w + w) * g->c + c0;                    \
            if (avg)                                                        \
              for (int64_t c = 0; c < cn; c++) acc[c] += v[c];              \
            else                                                            \
              for (int64_t c = 0; c < cn; c++)                              \
                acc[c] = v[c] > acc[c] ? v[c] : acc[c];                     \
          }                                                                 \
        double cnt = (double)((he - hb) * (we - wb));                       \
        for (int64_t c = 0; c < cn; c++)                                    \
          y[c0 + c] = (T)(avg ? acc[c] / cnt : acc[c]);                     \
      }                                                                     \
    }                                                                       \
  }

/* Output pixels [p0, p1): argmax of each window (-1 if it has no element). */
#define POOL_ARGMAX(NAME, T)                                                \
  static void NAME(const pool_args* a, int64_t p0, int64_t p1) {            \
    const pool_geom* g = &a->g;                                             \
    T best[POOL_CBLOCK];                                                    \
    for (int64_t p = p0; p < p1; p++) {                                     \
      int64_t ow = p % g->ow, t = p / g->ow, oh = t % g->oh, n = t / g->oh; \
      int64_t hb, he, wb, we;                                               \
      pool_window(oh, g->sh, g->kh, g->pt, g->h, &hb, &he);                 \
      pool_window(ow, g->sw, g->kw, g->pl, g->w, &wb, &we);                 \
      int64_t* am = a->am + p * g->c;                                       \
      int64_t base = n * g->h * g->w * g->c;                                \
      const T* x = (const T*)a->x;                                          \
      for (int64_t c0 = 0; c0 < g->c; c0 += POOL_CBLOCK) {                  \
        int64_t cn = g->c - c0 < POOL_CBLOCK ? g->c - c0 : POOL_CBLOCK;     \
        bool first = true;                                                  \
        for (int64_t c = 0; c < cn; c++) am[c0 + c] = -1;                   \
        for (int64_t h = hb; h < he; h++)                                   \
          for (int64_t w = wb; w < we; w++) {                               \
            int64_t i = base + (h * g->w + w) * g->c + c0;                  \
            for (int64_t c = 0; c < cn; c++)                                \
              if (first || best[c] < x[i + c]) {                            \
                best[c] = x[i + c];                                         \
                am[c0 + c] = i + c;                                         \
              }                                                             \
            first = false;                                                  \
          }                                                                 \
      }                                                                     \
    }                                                                       \
  }

/* Input pixels [q0, q1) of a gradient: dx = sum over covering windows, in
 * output raster order, of dy (MaxPoolGrad: where the window's argmax is
 * this element) or dy / count (AvgPoolGrad). */
#define POOL_GATHER(NAME, T)                                               \
  static void NAME(const pool_args* a, bool avg, int64_t q0, int64_t q1) { \
    const pool_geom* g = &a->g;                                            \
    const T* dy = a->dy;                                                   \
    for (int64_t q = q0; q < q1; q++) {                                    \
      int64_t w = q % g->w, t = q / g->w, h = t % g->h, n = t / g->h;      \
      int64_t ohb, ohe, owb, owe;                                          \
      pool_covering(h, g->sh, g->kh, g->pt, g->oh, &ohb, &ohe);            \
      pool_covering(w, g->sw, g->kw, g->pl, g->ow, &owb, &owe);            \
      T* dx = (T*)a->y + q * g->c;                                         \
      int64_t qi = q * g->c;                                               \
      for (int64_t c = 0; c < g->c; c++) dx[c] = 0;                        \
      for (int64_t oh = ohb; oh < ohe; oh++)                               \
        for (int64_t ow = owb; ow < owe; ow++) {                           \
          int64_t o = ((n * g->oh + oh) * g->ow + ow) * g->c;              \
          if (avg) {                                                       \
            int64_t hb, he, wb, we;                                        \
            pool_window(oh, g->sh, g->kh, g->pt, g->h, &hb, &he);          \
            pool_window(ow, g->sw, g->kw, g->pl, g->w, &wb, &we);          \
            T inv = (T)(1.0 / (double)((he - hb) * (we - wb)));            \
            for (int64_t c = 0; c < g->c; c++) dx[c] += dy[o + c] * inv;   \
          } else {                                                         \
            const int64_t* am = a->am + o;                                 \
            for (int64_t c = 0; c < g->c; c++)                             \
              if (am[c] == qi + c) dx[c] += dy[o + c];                     \
          }                                                                \
        }                                                                  \
    }                                                                      \
  }

POOL_FWD(pool_fwd_f32, float, -FLT_MAX)
POOL_FWD(pool_fwd_f64, double, -DBL_MAX)
POOL_ARGMAX(pool_argmax_f32, float)
POOL_ARGMAX(pool_argmax_f64, double)
POOL_GATHER(pool_gather_f32, float)
POOL_GATHER(pool_gather_f64, double)

/* ---- range functions and run functions (stream worker) ------------------- */

static void fwd_range(void* arg, int64_t b, int64_t e) {
  const pool_args* a = arg;
  if (a->dt == TF_FLOAT)
    pool_fwd_f32(a, a->avg, b, e);
  else
    pool_fwd_f64(a, a->avg, b, e);
}

static void argmax_range(void* arg, int64_t b, int64_t e) {
  const pool_args* a = arg;
  if (a->dt == TF_FLOAT)
    pool_argmax_f32(a, b, e);
  else
    pool_argmax_f64(a, b, e);
}

static void gather_range(void* arg, int64_t b, int64_t e) {
  const pool_args* a = arg;
  if (a->dt == TF_FLOAT)
    pool_gather_f32(a, a->avg, b, e);
  else
    pool_gather_f64(a, a->avg, b, e);
}

/* Forward: one unit per output pixel. */
static void fwd_run(sk_launch* l, void* args) {
  (void)l;
  pool_args* a = args;
  const pool_geom* g = &a->g;
  sim_parallel_for(g->n * g->oh * g->ow, pool_grain(g->c * g->kh * g->kw),
                   fwd_range, a);
}

/* Gradients: MaxPoolGrad's argmax per output pixel first, then one gather
 * unit per input pixel (at most `cover` windows each). */
static void grad_run(sk_launch* l, void* args) {
  (void)l;
  pool_args* a = args;
  const pool_geom* g = &a->g;
  if (!a->avg)
    sim_parallel_for(g->n * g->oh * g->ow, pool_grain(g->c * g->kh * g->kw),
                     argmax_range, a);
  int64_t cover = ((g->kh + g->sh - 1) / g->sh) * ((g->kw + g->sw - 1) / g->sw);
  sim_parallel_for(g->n * g->h * g->w, pool_grain(g->c * cover), gather_range,
                   a);
}

/* ---- geometry (TF thread) ------------------------------------------------ */

/* Output size and padding-before of one spatial dimension. */
static bool pool_dim(sk_launch* l, const pool_state* st, int64_t in, int64_t k,
                     int64_t s, const int64_t* explicit_pad, int64_t* out,
                     int64_t* before) {
  if (k <= 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Sliding window ksize must be positive, got %lld", (long long)k);
    return false;
  }
  if (s <= 0) {
    sk_fail(l, TF_INVALID_ARGUMENT, "Stride must be > 0, but got %lld",
            (long long)s);
    return false;
  }
  /* k and s are int32 attributes and explicit paddings are below k, but
   * in may be any dim of an empty input ([0, 2**63 - 1, 1, 1]): the sums
   * with it are checked. */
  const char* what = "pooling output size";
  int64_t pb = 0, pa = 0, t;
  if (st->pad == PAD_SAME) {
    if (!sk_size_add(l, in, s - 1, &t, what)) return false;
    *out = t / s;
    int64_t total = (*out - 1) * s + k - in; /* (*out - 1) * s < in */
    pb = total > 0 ? total / 2 : 0;
  } else {
    if (st->pad == PAD_EXPLICIT) {
      pb = explicit_pad[0];
      pa = explicit_pad[1];
      if (pb >= k || pa >= k) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "Padding %lld,%lld needs to be smaller than the window size "
                "%lld",
                (long long)pb, (long long)pa, (long long)k);
        return false;
      }
    }
    if (!sk_size_add(l, in, pb + pa - k + s, &t, what)) return false;
    *out = t / s;
    if (*out < 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Computed output size would be negative: %lld [input_size: "
              "%lld, effective_filter_size: %lld, stride: %lld]",
              (long long)*out, (long long)in, (long long)k, (long long)s);
      return false;
    }
  }
  *before = pb;
  return true;
}

/* Fills g from the NHWC input shape `in` (4 dims, checked by the caller). */
static bool pool_geometry(sk_launch* l, const pool_state* st, const int64_t* in,
                          pool_geom* g) {
  g->n = in[0];
  g->h = in[1];
  g->w = in[2];
  g->c = in[3];
  g->kh = st->kh;
  g->kw = st->kw;
  g->sh = st->sh;
  g->sw = st->sw;
  return pool_dim(l, st, g->h, g->kh, g->sh, st->explicit_pad, &g->oh,
                  &g->pt) &&
         pool_dim(l, st, g->w, g->kw, g->sw, st->explicit_pad + 2, &g->ow,
                  &g->pl);
}

/* [N, OH, OW, C], counted checked: explicit padding can make OH > H, so
 * the output of a valid input can pass 2**63 - 1 elements (false after
 * failing the launch: InvalidArgument). */
static bool pool_out_shape(sk_launch* l, const pool_geom* g, sk_shape* s) {
  *s = (sk_shape){.nd = 4, .d = {g->n, g->oh, g->ow, g->c}};
  return sk_shape_count(l, s);
}

/* ---- compute functions (TF thread) --------------------------------------- */

static void pool_fwd_compute(sk_launch* l, void* state) {
  const pool_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape xs;
  pool_geom g;
  if (x == NULL || !sk_shape_of(l, x, &xs)) return;
  if (xs.nd != 4) {
    sk_fail(l, TF_INVALID_ARGUMENT, "%s: input must be 4-dimensional",
            st->name);
    return;
  }
  if (!pool_geometry(l, st, xs.d, &g)) return;
  sk_shape ys;
  if (!pool_out_shape(l, &g, &ys)) return;
  TF_Tensor* y = sk_output(l, 0, &ys);
  pool_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || ys.n == 0) return;
  a->g = g;
  a->dt = TF_TensorType(x);
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->avg = st->kind == POOL_AVG;
  sk_work(l, fwd_run, st->name);
}

/* Fails unless `t` has shape `want` (the pooled output shape). */
static bool pool_expect(sk_launch* l, const TF_Tensor* t, const char* what,
                        const sk_shape* want) {
  sk_shape s;
  char b1[128], b2[128];
  if (!sk_shape_of(l, t, &s)) return false;
  if (sk_shape_eq(&s, want)) return true;
  sk_fail(l, TF_INVALID_ARGUMENT, "Expected %s shape to be %s, but got %s",
          what, sk_shape_str(want, b1, sizeof(b1)),
          sk_shape_str(&s, b2, sizeof(b2)));
  return false;
}

static void max_grad_compute(sk_launch* l, void* state) {
  const pool_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* y = sk_input(l, 1);
  TF_Tensor* dy = sk_input(l, 2);
  sk_shape xs;
  pool_geom g;
  if (x == NULL || y == NULL || dy == NULL || !sk_shape_of(l, x, &xs)) return;
  if (xs.nd != 4) {
    sk_fail(l, TF_INVALID_ARGUMENT, "tensor_in must be 4-dimensional");
    return;
  }
  if (!pool_geometry(l, st, xs.d, &g)) return;
  sk_shape ys;
  if (!pool_out_shape(l, &g, &ys)) return;
  if (!pool_expect(l, y, "orig_output", &ys) ||
      !pool_expect(l, dy, "grad", &ys))
    return;
  TF_Tensor* dx = sk_output(l, 0, &xs);
  pool_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || xs.n == 0) return;
  if (ys.n > 0) {
    a->am = sk_temp_n(l, ys.n, sizeof(int64_t));
    if (a->am == NULL) return;
  }
  a->g = g;
  a->dt = TF_TensorType(x);
  a->x = sk_data(x);
  a->dy = sk_data(dy);
  a->y = sk_mdata(dx);
  sk_work(l, grad_run, st->name);
}

static void avg_grad_compute(sk_launch* l, void* state) {
  const pool_state* st = state;
  TF_Tensor* shape = sk_input(l, 0);
  TF_Tensor* dy = sk_input(l, 1);
  sk_shape ss, xs, dys;
  pool_geom g;
  if (shape == NULL || dy == NULL || !sk_shape_of(l, shape, &ss) ||
      !sk_shape_of(l, dy, &dys))
    return;
  if (ss.nd != 1 || ss.n != 4 || TF_TensorType(shape) != TF_INT32) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "orig_input_shape must be 1-dimensional and 4 elements");
    return;
  }
  if (dys.nd != 4) {
    sk_fail(l, TF_INVALID_ARGUMENT, "out_backprop must be 4-dimensional");
    return;
  }
  const int32_t* d = sk_data(shape);
  xs.nd = 4;
  for (int i = 0; i < 4; i++) {
    if (d[i] < 0) {
      sk_fail(l, TF_INVALID_ARGUMENT, "Expected a non-negative size, got %d",
              d[i]);
      return;
    }
    xs.d[i] = d[i];
  }
  if (!sk_shape_count(l, &xs)) return; /* orig_input_shape: any int32s */
  if (!pool_geometry(l, st, xs.d, &g)) return;
  sk_shape ys;
  if (!pool_out_shape(l, &g, &ys)) return;
  if (!pool_expect(l, dy, "grad", &ys)) return;
  TF_Tensor* dx = sk_output(l, 0, &xs);
  pool_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || xs.n == 0) return;
  a->g = g;
  a->dt = TF_TensorType(dy);
  a->dy = sk_data(dy);
  a->y = sk_mdata(dx);
  a->avg = true;
  sk_work(l, grad_run, st->name);
}

/* ---- construction (TF thread) -------------------------------------------- */

/* Checks ksize/strides (4 ints, pooling over H and W only) and padding. */
static bool pool_read_attrs(TF_OpKernelConstruction* c, pool_state* st) {
  int64_t k[8], s[8];
  int nk = 0, ns = 0;
  char pad[16], fmt[16];
  if (!sk_attr_int32s(c, "ksize", k, 8, &nk) ||
      !sk_attr_int32s(c, "strides", s, 8, &ns) ||
      !sk_attr_string(c, "padding", pad, sizeof(pad)) ||
      !sk_attr_string(c, "data_format", fmt, sizeof(fmt)))
    return false;
  TF_Code bad = TF_INVALID_ARGUMENT;
  const char* why = NULL;
  if (strcmp(fmt, "NHWC") != 0) {
    why = "simdev pooling supports only the NHWC data format";
  } else if (nk != 4) {
    why = "Sliding window ksize field must specify 4 dimensions";
  } else if (ns != 4) {
    why = "Sliding window stride field must specify 4 dimensions";
  } else if (k[0] != 1 || s[0] != 1) {
    bad = TF_UNIMPLEMENTED;
    why = "Pooling is not yet supported on the batch dimension.";
  } else if (k[3] != 1 || s[3] != 1) {
    bad = TF_UNIMPLEMENTED;
    why = "simdev pooling does not support pooling across depth";
  }
  if (why != NULL) {
    sk_construction_fail(c, bad, "%s: %s", st->name, why);
    return false;
  }
  st->kh = k[1];
  st->kw = k[2];
  st->sh = s[1];
  st->sw = s[2];
  st->pad = strcmp(pad, "SAME") == 0    ? PAD_SAME
            : strcmp(pad, "VALID") == 0 ? PAD_VALID
                                        : PAD_EXPLICIT;
  if (st->pad != PAD_EXPLICIT) return true;
  int64_t p[8];
  int np = 0;
  if (!sk_attr_ints(c, "explicit_paddings", p, 8, &np)) return false;
  if (np != 8) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "explicit_paddings attribute must contain 8 values, "
                         "but got: %d",
                         np);
    return false;
  }
  for (int i = 0; i < 8; i++)
    if (p[i] < 0) {
      sk_construction_fail(c, TF_INVALID_ARGUMENT,
                           "All elements of explicit_paddings must be "
                           "nonnegative");
      return false;
    }
  if (p[0] || p[1] || p[6] || p[7]) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Nonzero explicit padding in the batch or depth "
                         "dimensions is not supported");
    return false;
  }
  memcpy(st->explicit_pad, p + 2, sizeof(st->explicit_pad));
  return true;
}

static void* pool_create(TF_OpKernelConstruction* c, pool_kind kind,
                         const char* name, sk_compute_fn compute) {
  pool_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->kind = kind;
  st->name = name;
  if (!pool_read_attrs(c, st)) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, compute, st, free);
}

static void* max_pool_create(TF_OpKernelConstruction* c) {
  return pool_create(c, POOL_MAX, "MaxPool", pool_fwd_compute);
}
static void* avg_pool_create(TF_OpKernelConstruction* c) {
  return pool_create(c, POOL_AVG, "AvgPool", pool_fwd_compute);
}
static void* max_pool_grad_create(TF_OpKernelConstruction* c) {
  return pool_create(c, POOL_MAX_GRAD, "MaxPoolGrad", max_grad_compute);
}
static void* avg_pool_grad_create(TF_OpKernelConstruction* c) {
  return pool_create(c, POOL_AVG_GRAD, "AvgPoolGrad", avg_grad_compute);
}

static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, 0};
static const char* const kShapeHost[] = {"orig_input_shape", NULL};

static const sk_op kOps[] = {
    {"MaxPool", max_pool_create, "T", kFloatTypes, NULL},
    {"AvgPool", avg_pool_create, "T", kFloatTypes, NULL},
    {"MaxPoolGrad", max_pool_grad_create, "T", kFloatTypes, NULL},
    {"AvgPoolGrad", avg_pool_grad_create, "T", kFloatTypes, kShapeHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_pooling(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
