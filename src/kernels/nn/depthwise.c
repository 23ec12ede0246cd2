/*
 * depthwise.c - DepthwiseConv2dNative, DepthwiseConv2dNativeBackpropInput,
 * DepthwiseConv2dNativeBackpropFilter (float32, float64; NHWC and NCHW;
 * depth multiplier, strides, dilations, SAME / VALID / EXPLICIT padding).
 *
 * Output channel o = c * M + m of a depthwise convolution reads only input
 * channel c, with filter[kh, kw, c, m]. Each output element is a sum of at
 * most KH*KW products, too few for a gemm to pay off (im2col would copy the
 * input KH*KW times to multiply it once), so all three ops are direct loops:
 *   forward        y[n, oh, ow, o] = sum over taps of x[n, ih, iw, c] f[tap, o]
 *   input grad     dx gathered: each input pixel sums, in a fixed tap order,
 *                  the output pixels that read it
 *   filter grad    df[tap, o] = sum over (n, oh, ow) of x dy, one task per
 *                  (tap, channel block), summed in a fixed (n, oh, ow) order
 *                  in float64 (the sums are long)
 * Tasks own disjoint outputs and sum in orders fixed by the shapes alone, so
 * results are bit-identical run to run whatever the thread count.
 *
 * Layouts are handled with element strides (n, h, w, c) for the input-like
 * and output-like tensors, so NCHW costs nothing extra. TF's CPU kernels
 * refuse NCHW and dilations (forward: Unimplemented; its backprops ignore
 * dilations): SIMDEV computes both, as TF's GPU kernels do.
 *
 * _FusedDepthwiseConv2dNative (TF's op for the forward op + BiasAdd [+
 * activation], written by the graph optimizer's remapper) is the forward
 * loop with fused.h's epilogue applied to each output pixel's channels as
 * soon as the pixel's sums are done. TF CPU has no real kernel for it
 * (without oneDNN its CPU registration is a no-op; oneDNN rewrites only some
 * fusions): the tests hold SIMDEV to NumPy and to the unfused chain.
 *
 * Validation follows TF's CPU kernels (codes and messages).
 *
 * Thread contract: create functions run at kernel construction; compute
 * functions on TF's thread (they read the host-memory size inputs and
 * validate everything); *_run functions and their helpers on the stream
 * worker, reading only a dw_args.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/nn/conv.h"

enum dw_op { DW_FWD, DW_BP_INPUT, DW_BP_FILTER };

static const char* const kCpuNames[] = {"DepthwiseConv2dNative",
                                        "DepthwiseConv2DBackpropInput",
                                        "DepthwiseConv2DBackpropFilter"};

typedef struct dw_state {
  enum dw_op op;
  bool fused; /* _FusedDepthwiseConv2dNative: input 2 is the bias */
  skf_attrs fx;
  int64_t stride_attr[4]; /* as given, checked at compute time as TF does */
  skc_attrs at;           /* strides, dilations, padding, layout */
} dw_state;

/* The run functions' arguments. */
typedef struct dw_args {
  TF_DataType dt;
  sa_conv_geom g; /* c: input depth; o = c * mult; kc unused */
  int64_t mult;
  int64_t xs[4], ys[4]; /* element strides of (n, h, w, c): input, output */
  const void* x;        /* input (forward, filter grad) */
  const void* f;        /* filter (forward, input grad) */
  const void* dy;       /* output gradient (backprops) */
  void* out;            /* y, dx or df */
  double* acc;          /* filter grad: float64 sums, laid out as df */
  int64_t cb;           /* filter grad: channels per task */
  const sa_epi* ep;     /* forward, fused: the epilogue (at epi), or NULL */
  sa_epi epi;
} dw_args;

/* ---- arithmetic (worker) ------------------------------------------------ */

/* The input row (or -1) that tap k of output row `o` reads. */
static inline int64_t in_pos(int64_t o, int64_t k, int64_t s, int64_t d,
                             int64_t pad, int64_t size) {
  int64_t i = o * s - pad + k * d;
  return i >= 0 && i < size ? i : -1;
}

/* The output row (or -1) whose tap k reads input row i. */
static inline int64_t out_pos(int64_t i, int64_t k, int64_t s, int64_t d,
                              int64_t pad, int64_t size) {
  int64_t t = i + pad - k * d;
  if (t < 0 || t % s != 0) return -1;
  return t / s < size ? t / s : -1;
}

#define DW_KERNELS(T)                                                        \
  static void fwd_rows_##T(void* arg, int64_t lo, int64_t hi) {              \
    const dw_args* a = arg;                                                  \
    const sa_conv_geom* g = &a->g;                                           \
    const T* x = a->x;                                                       \
    const T* f = a->f;                                                       \
    T* y = a->out;                                                           \
    int64_t M = a->mult, C = g->c;                                           \
    for (int64_t r = lo; r < hi; r++) {                                      \
      int64_t n = r / g->oh, oh = r % g->oh;                                 \
      for (int64_t ow = 0; ow < g->ow; ow++) {                               \
        T* yp = y + n * a->ys[0] + oh * a->ys[1] + ow * a->ys[2];            \
        for (int64_t o = 0; o < g->o; o++) yp[o * a->ys[3]] = 0;             \
        for (int64_t kh = 0; kh < g->kh; kh++) {                             \
          int64_t ih = in_pos(oh, kh, g->sh, g->dh, g->pt, g->h);            \
          if (ih < 0) continue;                                              \
          for (int64_t kw = 0; kw < g->kw; kw++) {                           \
            int64_t iw = in_pos(ow, kw, g->sw, g->dw, g->pl, g->w);          \
            if (iw < 0) continue;                                            \
            const T* xp = x + n * a->xs[0] + ih * a->xs[1] + iw * a->xs[2];  \
            const T* fp = f + (kh * g->kw + kw) * C * M;                     \
            for (int64_t c = 0; c < C; c++) {                                \
              T xv = xp[c * a->xs[3]];                                       \
              for (int64_t m = 0; m < M; m++)                                \
                yp[(c * M + m) * a->ys[3]] += xv * fp[c * M + m];            \
            }                                                                \
          }                                                                  \
        }                                                                    \
        sa_epi_apply(a->ep, yp, 1, g->o, 0, a->ys[3]);                       \
      }                                                                      \
    }                                                                        \
  }                                                                          \
  static void bpi_rows_##T(void* arg, int64_t lo, int64_t hi) {              \
    const dw_args* a = arg;                                                  \
    const sa_conv_geom* g = &a->g;                                           \
    const T* f = a->f;                                                       \
    const T* dy = a->dy;                                                     \
    T* dx = a->out;                                                          \
    int64_t M = a->mult, C = g->c;                                           \
    for (int64_t r = lo; r < hi; r++) {                                      \
      int64_t n = r / g->h, ih = r % g->h;                                   \
      for (int64_t iw = 0; iw < g->w; iw++) {                                \
        T* xp = dx + n * a->xs[0] + ih * a->xs[1] + iw * a->xs[2];           \
        for (int64_t c = 0; c < C; c++) xp[c * a->xs[3]] = 0;                \
        for (int64_t kh = 0; kh < g->kh; kh++) {                             \
          int64_t oh = out_pos(ih, kh, g->sh, g->dh, g->pt, g->oh);          \
          if (oh < 0) continue;                                              \
          for (int64_t kw = 0; kw < g->kw; kw++) {                           \
            int64_t ow = out_pos(iw, kw, g->sw, g->dw, g->pl, g->ow);        \
            if (ow < 0) continue;                                            \
            const T* yp = dy + n * a->ys[0] + oh * a->ys[1] + ow * a->ys[2]; \
            const T* fp = f + (kh * g->kw + kw) * C * M;                     \
            for (int64_t c = 0; c < C; c++) {                                \
              T s = 0;                                                       \
              for (int64_t m = 0; m < M; m++)                                \
                s += yp[(c * M + m) * a->ys[3]] * fp[c * M + m];             \
              xp[c * a->xs[3]] += s;                                         \
            }                                                                \
          }                                                                  \
        }                                                                    \
      }                                                                      \
    }                                                                        \
  }                                                                          \
  /* Task t: tap t / blocks, channels [c0, c0 + cb) of block t % blocks. */  \
  static void bpf_tasks_##T(void* arg, int64_t lo, int64_t hi) {             \
    const dw_args* a = arg;                                                  \
    const sa_conv_geom* g = &a->g;                                           \
    const T* x = a->x;                                                       \
    const T* dy = a->dy;                                                     \
    T* df = a->out;                                                          \
    int64_t M = a->mult, C = g->c, blocks = (C + a->cb - 1) / a->cb;         \
    for (int64_t t = lo; t < hi; t++) {                                      \
      int64_t tap = t / blocks, c0 = (t % blocks) * a->cb;                   \
      int64_t c1 = c0 + a->cb < C ? c0 + a->cb : C;                          \
      int64_t kh = tap / g->kw, kw = tap % g->kw;                            \
      double* acc = a->acc + tap * C * M;                                    \
      for (int64_t j = c0 * M; j < c1 * M; j++) acc[j] = 0;                  \
      for (int64_t n = 0; n < g->n; n++) {                                   \
        for (int64_t oh = 0; oh < g->oh; oh++) {                             \
          int64_t ih = in_pos(oh, kh, g->sh, g->dh, g->pt, g->h);            \
          if (ih < 0) continue;                                              \
          for (int64_t ow = 0; ow < g->ow; ow++) {                           \
            int64_t iw = in_pos(ow, kw, g->sw, g->dw, g->pl, g->w);          \
            if (iw < 0) continue;                                            \
            const T* xp = x + n * a->xs[0] + ih * a->xs[1] + iw * a->xs[2];  \
            const T* yp = dy + n * a->ys[0] + oh * a->ys[1] + ow * a->ys[2]; \
            for (int64_t c = c0; c < c1; c++) {                              \
              double xv = xp[c * a->xs[3]];                                  \
              for (int64_t m = 0; m < M; m++)                                \
                acc[c * M + m] += xv * (double)yp[(c * M + m) * a->ys[3]];   \
            }                                                                \
          }                                                                  \
        }                                                                    \
      }                                                                      \
      T* dp = df + tap * C * M;                                              \
      for (int64_t j = c0 * M; j < c1 * M; j++) dp[j] = (T)acc[j];           \
    }                                                                        \
  }

DW_KERNELS(float)
DW_KERNELS(double)

/* Grain (in rows) giving each task about 32K multiply-adds. */
static int64_t row_grain(const sa_conv_geom* g, int64_t cols) {
  int64_t per_row = cols * g->kh * g->kw * g->o;
  return per_row >= 32768 ? 1 : 32768 / (per_row ? per_row : 1);
}

static void fwd_run(sk_launch* l, void* args) {
  (void)l;
  const dw_args* a = args;
  bool f32 = a->dt == TF_FLOAT;
  sim_parallel_for(a->g.n * a->g.oh, row_grain(&a->g, a->g.ow),
                   f32 ? fwd_rows_float : fwd_rows_double, args);
}

static void bpi_run(sk_launch* l, void* args) {
  (void)l;
  const dw_args* a = args;
  bool f32 = a->dt == TF_FLOAT;
  sim_parallel_for(a->g.n * a->g.h, row_grain(&a->g, a->g.w),
                   f32 ? bpi_rows_float : bpi_rows_double, args);
}

static void bpf_run(sk_launch* l, void* args) {
  (void)l;
  const dw_args* a = args;
  bool f32 = a->dt == TF_FLOAT;
  int64_t blocks = (a->g.c + a->cb - 1) / a->cb;
  sim_parallel_for(a->g.kh * a->g.kw * blocks, 1,
                   f32 ? bpf_tasks_float : bpf_tasks_double, args);
}

/* ---- validation and geometry (TF thread) -------------------------------- */

/* Element strides of (n, h, w, c) for a contiguous tensor of shape s. */
static void strides_of(bool nchw, const sk_shape* s, int64_t st[4]) {
  if (nchw) { /* [N, C, H, W] */
    st[3] = s->d[2] * s->d[3];
    st[1] = s->d[3];
    st[2] = 1;
    st[0] = s->d[1] * st[3];
  } else { /* [N, H, W, C] */
    st[3] = 1;
    st[2] = s->d[3];
    st[1] = s->d[2] * s->d[3];
    st[0] = s->d[1] * st[1];
  }
}

/* (n, h, w, c) of a 4-d shape in the op's layout. */
static void dims_of(bool nchw, const sk_shape* s, int64_t d[4]) {
  d[0] = s->d[0];
  d[1] = s->d[nchw ? 2 : 1];
  d[2] = s->d[nchw ? 3 : 2];
  d[3] = s->d[nchw ? 1 : 3];
}

/* Geometry from input dims (n, h, w, c) and filter shape; checks strides
 * and the output size as TF's GetWindowedOutputSizeVerbose. */
static bool geometry(sk_launch* l, const dw_state* st, const int64_t xd[4],
                     const sk_shape* fs, sa_conv_geom* g) {
  *g = (sa_conv_geom){.n = xd[0],
                      .h = xd[1],
                      .w = xd[2],
                      .c = xd[3],
                      .kh = fs->d[0],
                      .kw = fs->d[1],
                      .kc = 1,
                      .o = xd[3] * fs->d[3],
                      .groups = xd[3]};
  if (st->at.sh <= 0) {
    sk_fail(l, TF_INVALID_ARGUMENT, "Stride must be > 0, but got %lld",
            (long long)st->at.sh);
    return false;
  }
  return skc_spatial(l, &st->at, g);
}

static sk_shape shape4(bool nchw, int64_t n, int64_t h, int64_t w, int64_t c) {
  sk_shape s = {4, {n, h, w, c}, 0};
  if (nchw) {
    s.d[1] = c;
    s.d[2] = h;
    s.d[3] = w;
  }
  /* Sizes may come from input_sizes / filter_sizes: -1 when TF would
   * refuse the shape (sk_output then fails the launch). */
  if (sa_dims_check(s.d, 4, 0, &s.n, NULL, 0) != SIM_OK) s.n = -1;
  return s;
}

static dw_args* new_args(sk_launch* l, const sa_conv_geom* g, int64_t mult,
                         TF_DataType dt, bool nchw, const sk_shape* xs,
                         const sk_shape* ys) {
  dw_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return NULL;
  a->dt = dt;
  a->g = *g;
  a->mult = mult;
  strides_of(nchw, xs, a->xs);
  strides_of(nchw, ys, a->ys);
  return a;
}

static void fwd_compute(sk_launch* l, void* state) {
  const dw_state* st = state;
  bool nchw = st->at.nchw;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* f = sk_input(l, 1);
  sk_shape xs, fs;
  char buf[256];
  if (x == NULL || f == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, f, &fs))
    return;
  if (xs.nd != 4) {
    sk_fail(l, TF_INVALID_ARGUMENT, "input must be 4-dimensional%s",
            sk_shape_str(&xs, buf, sizeof(buf)));
    return;
  }
  if (fs.nd != 4) {
    sk_fail(l, TF_INVALID_ARGUMENT, "filter must be 4-dimensional: %s",
            sk_shape_str(&fs, buf, sizeof(buf)));
    return;
  }
  int64_t xd[4];
  dims_of(nchw, &xs, xd);
  if (xd[3] != fs.d[2]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "input and filter must have the same depth: %lld vs %lld",
            (long long)xd[3], (long long)fs.d[2]);
    return;
  }
  sa_conv_geom g;
  if (!geometry(l, st, xd, &fs, &g)) return;
  sk_shape ys = shape4(nchw, g.n, g.oh, g.ow, g.o);
  TF_Tensor* y = sk_output(l, 0, &ys);
  sa_epi epi;
  if (st->fused && !skf_bias(l, 2, g.o, &ys, &st->fx, TF_TensorType(x), &epi))
    return;
  if (!sk_ok(l) || ys.n == 0) return;
  dw_args* a = new_args(l, &g, fs.d[3], TF_TensorType(x), nchw, &xs, &ys);
  if (a == NULL) return;
  a->x = sk_data(x);
  a->f = sk_data(f);
  a->out = sk_mdata(y);
  if (st->fused) {
    a->epi = epi;
    a->ep = &a->epi;
  }
  sk_work(l, fwd_run,
          st->fused ? "_FusedDepthwiseConv2dNative" : "DepthwiseConv2dNative");
}

/* Reads the 4 sizes of host-memory int32 input i (input_sizes or
 * filter_sizes) into *v as TF's CPU kernels check them, counted. */
static bool read_sizes(sk_launch* l, int i, enum dw_op op, sk_shape* v) {
  TF_Tensor* t = sk_input(l, i);
  sk_shape s;
  if (t == NULL || !sk_shape_of(l, t, &s)) return false;
  const char* what = op == DW_BP_INPUT ? "input" : "filter";
  if (s.nd != 1 || s.d[0] != 4) {
    sk_fail(l, TF_INVALID_ARGUMENT, "%s: %s must be 4-dimensional",
            kCpuNames[op], what);
    return false;
  }
  const int32_t* d = sk_data(t);
  v->nd = 4;
  for (int j = 0; j < 4; j++) {
    if (d[j] < 0) {
      sk_fail(l, TF_INVALID_ARGUMENT, "Dimension %d of %s_sizes must be >= 0",
              j, what);
      return false;
    }
    v->d[j] = d[j];
  }
  return sk_shape_count(l, v);
}

/* Checks input / filter / out_backprop shapes against each other as TF's
 * CPU backprops do and fills g. */
static bool bp_geometry(sk_launch* l, const dw_state* st, const sk_shape* xs,
                        const sk_shape* fs, const sk_shape* ys,
                        sa_conv_geom* g) {
  const char* who = kCpuNames[st->op];
  if (!skc_bp_ranks(l, who, xs, fs, ys)) return false;
  int64_t xd[4], yd[4];
  dims_of(st->at.nchw, xs, xd);
  dims_of(st->at.nchw, ys, yd);
  if (xd[0] != yd[0]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "%s: input and out_backprop must have the same batch size", who);
    return false;
  }
  if (xd[3] != fs->d[2]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "%s: input and filter must have the same in_depth", who);
    return false;
  }
  if (fs->d[2] * fs->d[3] != yd[3]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "%s: depth_multiplier * in_depth not equal to out_depth", who);
    return false;
  }
  if (!geometry(l, st, xd, fs, g)) return false;
  int64_t want[2] = {g->oh, g->ow};
  const char* dim[2] = {"rows", "cols"};
  for (int i = 0; i < 2; i++) {
    if (yd[1 + i] != want[i]) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "%s: Number of %s of out_backprop doesn't match computed: "
              "actual = %lld, computed = %lld",
              who, dim[i], (long long)yd[1 + i], (long long)want[i]);
      return false;
    }
  }
  return true;
}

static void bpi_compute(sk_launch* l, void* state) {
  const dw_state* st = state;
  sk_shape xs;
  if (!read_sizes(l, 0, DW_BP_INPUT, &xs)) return;
  TF_Tensor* f = sk_input(l, 1);
  TF_Tensor* dy = sk_input(l, 2);
  sk_shape fs, ys;
  if (f == NULL || dy == NULL || !sk_shape_of(l, f, &fs) ||
      !sk_shape_of(l, dy, &ys))
    return;
  sa_conv_geom g;
  if (!bp_geometry(l, st, &xs, &fs, &ys, &g)) return;
  TF_Tensor* dx = sk_output(l, 0, &xs);
  if (!sk_ok(l) || xs.n == 0) return;
  dw_args* a =
      new_args(l, &g, fs.d[3], TF_TensorType(f), st->at.nchw, &xs, &ys);
  if (a == NULL) return;
  a->f = sk_data(f);
  a->dy = sk_data(dy);
  a->out = sk_mdata(dx);
  sk_work(l, bpi_run, "DepthwiseConv2dNativeBackpropInput");
}

static void bpf_compute(sk_launch* l, void* state) {
  const dw_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape fs;
  if (x == NULL || !read_sizes(l, 1, DW_BP_FILTER, &fs)) return;
  TF_Tensor* dy = sk_input(l, 2);
  sk_shape xs, ys;
  if (dy == NULL || !sk_shape_of(l, x, &xs) || !sk_shape_of(l, dy, &ys)) return;
  sa_conv_geom g;
  if (!bp_geometry(l, st, &xs, &fs, &ys, &g)) return;
  TF_Tensor* df = sk_output(l, 0, &fs);
  if (!sk_ok(l) || fs.n == 0) return;
  dw_args* a =
      new_args(l, &g, fs.d[3], TF_TensorType(x), st->at.nchw, &xs, &ys);
  if (a == NULL) return;
  a->x = sk_data(x);
  a->dy = sk_data(dy);
  a->out = sk_mdata(df);
  /* Blocks of channels keep every task's sums (cb * M) small and give the
   * workers enough tasks when the filter has few taps. */
  a->cb = 32;
  a->acc = sk_temp_n(l, fs.n, sizeof(double));
  if (!sk_ok(l)) return;
  sk_work(l, bpf_run, "DepthwiseConv2dNativeBackpropFilter");
}

/* ---- attributes and registration (construction) ------------------------ */

static bool window4(TF_OpKernelConstruction* c, const char* name,
                    int64_t v[4]) {
  int n = 0;
  int64_t buf[8];
  if (!sk_attr_int32s(c, name, buf, 8, &n)) return false;
  if (n != 4) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Sliding window %s field must specify 4 dimensions",
                         name);
    return false;
  }
  memcpy(v, buf, 4 * sizeof(int64_t));
  return true;
}

/* The fused op's padding: SAME or VALID (its OpDef has no EXPLICIT and no
 * explicit_paddings attribute). */
static bool fused_padding(TF_OpKernelConstruction* c, skc_attrs* at) {
  char pad[16];
  if (!sk_attr_string(c, "padding", pad, sizeof(pad))) return false;
  at->pad = strcmp(pad, "SAME") == 0 ? SA_PAD_SAME : SA_PAD_VALID;
  if (strcmp(pad, "SAME") == 0 || strcmp(pad, "VALID") == 0) return true;
  sk_construction_fail(c, TF_INVALID_ARGUMENT,
                       "_FusedDepthwiseConv2dNative: padding must be SAME or "
                       "VALID, got %s",
                       pad);
  return false;
}

static void* dw_create(TF_OpKernelConstruction* c, enum dw_op op,
                       sk_compute_fn fn, bool fused) {
  dw_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->op = op;
  st->fused = fused;
  skc_attrs* at = &st->at;
  char fmt[16];
  int64_t s[4], d[4];
  bool ok = sk_attr_string(c, "data_format", fmt, sizeof(fmt)) &&
            window4(c, "strides", s);
  if (ok) {
    at->nchw = strcmp(fmt, "NCHW") == 0;
    int hi = at->nchw ? 2 : 1, wi = at->nchw ? 3 : 2, ci = at->nchw ? 1 : 3;
    if (s[hi] != s[wi]) {
      sk_construction_fail(c, TF_INVALID_ARGUMENT,
                           "Current implementation only supports equal "
                           "length strides in the row and column dimensions.");
      ok = false;
    } else if (s[0] != 1 || s[ci] != 1) {
      sk_construction_fail(c, TF_INVALID_ARGUMENT,
                           "Current implementation does not yet support "
                           "strides in the batch and depth dimensions.");
      ok = false;
    }
    at->sh = s[hi];
    at->sw = s[wi];
    ok = ok &&
         (fused ? fused_padding(c, at) &&
                      skf_attrs_read(c, "DepthwiseConv2D", &st->fx)
                : skc_padding_attrs(c, at)) &&
         window4(c, "dilations", d);
    if (ok && (d[0] != 1 || d[ci] != 1 || d[hi] <= 0 || d[wi] <= 0)) {
      sk_construction_fail(c, TF_INVALID_ARGUMENT,
                           "%s: dilations must be 1 in the batch and depth "
                           "dimensions and positive in the others, got [%lld, "
                           "%lld, %lld, %lld]",
                           kCpuNames[op], (long long)d[0], (long long)d[1],
                           (long long)d[2], (long long)d[3]);
      ok = false;
    }
    at->dh = d[hi];
    at->dw = d[wi];
  }
  if (!ok) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, fn, st, free);
}

static void* fwd_create(TF_OpKernelConstruction* c) {
  return dw_create(c, DW_FWD, fwd_compute, false);
}
static void* fused_create(TF_OpKernelConstruction* c) {
  return dw_create(c, DW_FWD, fwd_compute, true);
}
static void* bpi_create(TF_OpKernelConstruction* c) {
  return dw_create(c, DW_BP_INPUT, bpi_compute, false);
}
static void* bpf_create(TF_OpKernelConstruction* c) {
  return dw_create(c, DW_BP_FILTER, bpf_compute, false);
}

static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, 0};
static const char* const kInputSizesHost[] = {"input_sizes", NULL};
static const char* const kFilterSizesHost[] = {"filter_sizes", NULL};

static const sk_op kOps[] = {
    {"DepthwiseConv2dNative", fwd_create, "T", kFloatTypes, NULL},
    {"_FusedDepthwiseConv2dNative", fused_create, "T", kFloatTypes, NULL},
    {"DepthwiseConv2dNativeBackpropInput", bpi_create, "T", kFloatTypes,
     kInputSizesHost},
    {"DepthwiseConv2dNativeBackpropFilter", bpf_create, "T", kFloatTypes,
     kFilterSizesHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_depthwise(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
