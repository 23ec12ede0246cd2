/*
 * conv_backprop.c - Conv2DBackpropInput and Conv2DBackpropFilter (float32,
 * float64, NHWC) on the conv.c machinery (see conv.h and the top of conv.c).
 *
 *   Conv2DBackpropInput   col = dy x filter^T per chunk of output rows, then
 *                         col2im adds every col entry back to the input pixel
 *                         it was copied from. col2im gathers: one task owns
 *                         one row of dx and sums into it in a fixed (chunk,
 *                         kh, kw) order, so the result does not depend on the
 *                         thread count and no two tasks write the same bytes.
 *   Conv2DBackpropFilter  dW = sum over chunks of im2col(x)^T x dy (gemm with
 *                         beta = 1 after the first chunk).
 * Both accept dilations > 1 (TF's CPU kernels refuse them); grouped
 * convolutions are refused with InvalidArgument as on CPU.
 *
 * Thread contract: compute functions run on TF's thread and read the
 * host-memory size input (input_sizes / filter_sizes); run functions and
 * col2im run on the stream worker and read only skc_args.
 */
#include <string.h>

#include "kernels/conv.h"

/* Op names, and the names TF's CPU messages give the kernels. */
static const char* const kOpNames[] = {"Conv2D", "Conv2DBackpropInput",
                                       "Conv2DBackpropFilter"};
static const char* const kCpuNames[] = {"Conv2D", "Conv2DCustomBackpropInput",
                                        "Conv2DCustomBackpropFilter"};

/* ---- col2im and run functions (worker) --------------------------------- */

static void add_n(TF_DataType dt, void* d, const void* s, int64_t n) {
  if (dt == TF_FLOAT) {
    float* fd = d;
    const float* fs = s;
    for (int64_t i = 0; i < n; i++) fd[i] += fs[i];
  } else {
    double* dd = d;
    const double* ds = s;
    for (int64_t i = 0; i < n; i++) dd[i] += ds[i];
  }
}

/* Adds into dx row (n, ih) every col entry of output rows [oa, ob) of image
 * n that was copied from it. col row 0 is output row r0. */
static void col2im_row(const skc_args* a, int64_t r0, int64_t n, int64_t ih,
                       int64_t oa, int64_t ob) {
  const skc_geom* g = &a->g;
  size_t es = a->es;
  int64_t k = g->kh * g->kw * g->c;
  char* dxrow = (char*)a->x + (size_t)((n * g->h + ih) * g->w * g->c) * es;
  for (int64_t kh = 0; kh < g->kh; kh++) {
    int64_t t = ih + g->pt - kh * g->dh;
    if (t < 0) break;
    if (t % g->sh != 0) continue;
    int64_t oh = t / g->sh;
    if (oh < oa || oh >= ob) continue;
    const char* colrow =
        (const char*)a->col + (size_t)((n * g->oh + oh - r0) * g->ow * k) * es;
    for (int64_t iw = 0; iw < g->w; iw++) {
      char* d = dxrow + (size_t)(iw * g->c) * es;
      for (int64_t kw = 0; kw < g->kw; kw++) {
        int64_t u = iw + g->pl - kw * g->dw;
        if (u < 0) break;
        if (u % g->sw != 0 || u / g->sw >= g->ow) continue;
        const char* s =
            colrow + (size_t)((u / g->sw) * k + (kh * g->kw + kw) * g->c) * es;
        add_n(a->dt, d, s, g->c);
      }
    }
  }
}

typedef struct col2im_job {
  const skc_args* a;
  int64_t r0, r1; /* output rows of the chunk */
  int64_t n0;     /* first image of the chunk */
} col2im_job;

static void col2im_range(void* arg, int64_t lo, int64_t hi) {
  const col2im_job* j = arg;
  const skc_geom* g = &j->a->g;
  for (int64_t t = lo; t < hi; t++) {
    int64_t n = j->n0 + t / g->h, ih = t % g->h;
    int64_t oa = j->r0 - n * g->oh, ob = j->r1 - n * g->oh;
    col2im_row(j->a, j->r0, n, ih, oa < 0 ? 0 : oa, ob > g->oh ? g->oh : ob);
  }
}

static void col2im(const skc_args* a, int64_t r0, int64_t r1) {
  const skc_geom* g = &a->g;
  int64_t n0 = r0 / g->oh, n1 = (r1 - 1) / g->oh + 1;
  col2im_job j = {a, r0, r1, n0};
  int64_t per_row = g->w * g->c * g->kh * g->kw;
  int64_t grain = per_row >= 32768 ? 1 : 32768 / (per_row ? per_row : 1);
  sim_parallel_for((n1 - n0) * g->h, grain, col2im_range, &j);
}

static void bp_input_run(sk_launch* l, void* args) {
  (void)l;
  const skc_args* a = args;
  const skc_geom* g = &a->g;
  int64_t k = g->kh * g->kw * g->c;
  if (a->zero_only || !a->direct)
    memset(a->x, 0, (size_t)(g->n * g->h * g->w * g->c) * a->es);
  if (a->zero_only) return;
  if (a->direct) { /* dx = dy x filter^T */
    sk_gemm(a->dt, false, true, g->n * g->oh * g->ow, k, g->o, a->y, g->o,
             a->f, g->o, 0., a->x, k);
    return;
  }
  int64_t rows = g->n * g->oh;
  for (int64_t r0 = 0; r0 < rows; r0 += a->chunk_rows) {
    int64_t nr = rows - r0 < a->chunk_rows ? rows - r0 : a->chunk_rows;
    const char* dy = (const char*)a->y + (size_t)(r0 * g->ow * g->o) * a->es;
    sk_gemm(a->dt, false, true, nr * g->ow, k, g->o, dy, g->o, a->f, g->o, 0.,
             a->col, k);
    col2im(a, r0, r0 + nr);
  }
}

static void bp_filter_run(sk_launch* l, void* args) {
  (void)l;
  const skc_args* a = args;
  const skc_geom* g = &a->g;
  int64_t k = g->kh * g->kw * g->c;
  if (a->zero_only) {
    memset(a->f, 0, (size_t)(k * g->o) * a->es);
    return;
  }
  if (a->direct) { /* dW = x^T x dy */
    sk_gemm(a->dt, true, false, k, g->o, g->n * g->oh * g->ow, a->x, k, a->y,
             g->o, 0., a->f, g->o);
    return;
  }
  int64_t rows = g->n * g->oh;
  for (int64_t r0 = 0; r0 < rows; r0 += a->chunk_rows) {
    int64_t nr = rows - r0 < a->chunk_rows ? rows - r0 : a->chunk_rows;
    const char* dy = (const char*)a->y + (size_t)(r0 * g->ow * g->o) * a->es;
    skc_im2col(a, r0, nr, 0);
    sk_gemm(a->dt, true, false, k, g->o, nr * g->ow, a->col, k, dy, g->o,
             r0 == 0 ? 0. : 1., a->f, g->o);
  }
}

/* ---- validation and launch (TF thread) ---------------------------------- */

/* Reads the int32 host-memory size input `i` (input_sizes / filter_sizes). */
static bool read_sizes(sk_launch* l, int i, const char* what, int64_t* v,
                       int* count) {
  TF_Tensor* t = sk_input(l, i);
  sk_shape s;
  if (t == NULL || !sk_shape_of(l, t, &s)) return false;
  if (s.nd != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "%s: %s input must be 1-dim, not %d",
            kOpNames[i == 0 ? SKC_BP_INPUT : SKC_BP_FILTER], what, s.nd);
    return false;
  }
  if (i != 0 && s.d[0] != 4) {
    sk_fail(l, TF_INVALID_ARGUMENT, "%s: filter must be 4-dimensional",
            kCpuNames[SKC_BP_FILTER]);
    return false;
  }
  if (s.d[0] != 4 && s.d[0] != 2) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Conv2DBackpropInput requires input_sizes to contain 4 values or "
            "2 values, but got: %lld",
            (long long)s.d[0]);
    return false;
  }
  const int32_t* d = sk_data(t);
  for (int64_t j = 0; j < s.d[0]; j++) {
    if (d[j] < 0) {
      sk_fail(l, TF_INVALID_ARGUMENT, "Dimension %d must be >= 0", d[j]);
      return false;
    }
    v[j] = d[j];
  }
  *count = (int)s.d[0];
  return true;
}

/* Checks x / filter / dy shapes of a backprop against each other (TF's
 * ConvBackpropComputeDimensions) and fills g. */
static bool bp_geometry(sk_launch* l, const skc_attrs* at, const sk_shape* xs,
                        const sk_shape* fs, const sk_shape* ys, skc_geom* g) {
  const char* who = kCpuNames[at->op];
  const char* names[3] = {"input", "filter", "out_backprop"};
  const sk_shape* all[3] = {xs, fs, ys};
  for (int i = 0; i < 3; i++) {
    if (all[i]->nd != 4) {
      sk_fail(l, TF_INVALID_ARGUMENT, "%s: %s must be 4-dimensional", who,
              names[i]);
      return false;
    }
  }
  *g = (skc_geom){.n = xs->d[0],
                  .h = xs->d[1],
                  .w = xs->d[2],
                  .c = xs->d[3],
                  .kh = fs->d[0],
                  .kw = fs->d[1],
                  .kc = fs->d[2],
                  .o = fs->d[3],
                  .groups = 1};
  if (g->n != ys->d[0]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "%s: input and out_backprop must have the same batch size. Input "
            "batch: %lld, outbackprop batch: %lld, batch_dim: 0",
            who, (long long)g->n, (long long)ys->d[0]);
    return false;
  }
  if (g->kc == 0 || g->c % g->kc != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "%s: input depth must be evenly divisible by filter depth", who);
    return false;
  }
  if (g->c != g->kc) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "%s: gradients of grouped convolutions are not supported (as on "
            "CPU): input depth %lld, filter input depth %lld",
            who, (long long)g->c, (long long)g->kc);
    return false;
  }
  if (g->o != ys->d[3]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "%s: filter and out_backprop must have the same out_depth", who);
    return false;
  }
  if (!skc_spatial(l, at, g)) return false;
  int64_t want[2] = {g->oh, g->ow}, in[2] = {g->h, g->w};
  int64_t k[2] = {g->kh, g->kw}, st[2] = {g->sh, g->sw}, dl[2] = {g->dh, g->dw};
  for (int i = 0; i < 2; i++) {
    if (ys->d[1 + i] != want[i]) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "%s: Size of out_backprop doesn't match computed: actual = "
              "%lld, computed = %lld spatial_dim: %d input: %lld filter: "
              "%lld output: %lld stride: %lld dilation: %lld",
              who, (long long)ys->d[1 + i], (long long)want[i], 1 + i,
              (long long)in[i], (long long)k[i], (long long)ys->d[1 + i],
              (long long)st[i], (long long)dl[i]);
      return false;
    }
  }
  return true;
}

static void bp_input_compute(sk_launch* l, void* state) {
  const skc_attrs* at = state;
  int64_t v[4];
  int count = 0;
  if (!read_sizes(l, 0, "input_sizes", v, &count)) return;
  TF_Tensor* f = sk_input(l, 1);
  TF_Tensor* dy = sk_input(l, 2);
  sk_shape fs, ys;
  if (f == NULL || dy == NULL || !sk_shape_of(l, f, &fs) ||
      !sk_shape_of(l, dy, &ys))
    return;
  sk_shape xs = {4, {v[0], v[1], v[2], v[3]}, 0};
  if (count == 2) { /* [rows, cols]: batch from dy, depth from the filter */
    if (ys.nd != 4 || fs.nd != 4) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "%s: filter and out_backprop must be 4-dimensional",
              kCpuNames[SKC_BP_INPUT]);
      return;
    }
    xs = (sk_shape){4, {ys.d[0], v[0], v[1], fs.d[2]}, 0};
  }
  xs.n = xs.d[0] * xs.d[1] * xs.d[2] * xs.d[3];
  skc_geom g;
  if (!bp_geometry(l, at, &xs, &fs, &ys, &g)) return;
  TF_Tensor* dx = sk_output(l, 0, &xs);
  if (!sk_ok(l) || xs.n == 0) return;
  skc_args* a = skc_prepare(l, &g, TF_TensorType(f));
  if (a == NULL) return;
  a->x = sk_mdata(dx);
  a->f = sk_mdata(f);
  a->y = sk_mdata(dy);
  sk_work(l, bp_input_run, "Conv2DBackpropInput");
}

static void bp_filter_compute(sk_launch* l, void* state) {
  const skc_attrs* at = state;
  int64_t v[4];
  int count = 0;
  TF_Tensor* x = sk_input(l, 0);
  if (x == NULL || !read_sizes(l, 1, "filter_sizes", v, &count)) return;
  TF_Tensor* dy = sk_input(l, 2);
  sk_shape xs, ys;
  if (dy == NULL || !sk_shape_of(l, x, &xs) || !sk_shape_of(l, dy, &ys)) return;
  sk_shape fs = {4, {v[0], v[1], v[2], v[3]}, v[0] * v[1] * v[2] * v[3]};
  skc_geom g;
  if (!bp_geometry(l, at, &xs, &fs, &ys, &g)) return;
  TF_Tensor* df = sk_output(l, 0, &fs);
  if (!sk_ok(l) || fs.n == 0) return;
  skc_args* a = skc_prepare(l, &g, TF_TensorType(x));
  if (a == NULL) return;
  a->x = sk_mdata(x);
  a->f = sk_mdata(df);
  a->y = sk_mdata(dy);
  sk_work(l, bp_filter_run, "Conv2DBackpropFilter");
}

/* ---- registration ------------------------------------------------------- */

static void* bp_input_create(TF_OpKernelConstruction* c) {
  return skc_create(c, SKC_BP_INPUT, bp_input_compute);
}

static void* bp_filter_create(TF_OpKernelConstruction* c) {
  return skc_create(c, SKC_BP_FILTER, bp_filter_compute);
}

static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, 0};
static const char* const kInputSizesHost[] = {"input_sizes", NULL};
static const char* const kFilterSizesHost[] = {"filter_sizes", NULL};

static const sk_op kOps[] = {
    {"Conv2DBackpropInput", bp_input_create, "T", kFloatTypes, kInputSizesHost},
    {"Conv2DBackpropFilter", bp_filter_create, "T", kFloatTypes,
     kFilterSizesHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_conv_backprop(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
