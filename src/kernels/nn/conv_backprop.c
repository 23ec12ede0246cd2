/*
 * conv_backprop.c - Conv2DBackpropInput and Conv2DBackpropFilter (float32,
 * float64, NHWC) on conv.c's attributes and geometry and src/arith's
 * arithmetic (sa_conv_bp_input / sa_conv_bp_filter, in arith/conv.c):
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
 * host-memory size input (input_sizes / filter_sizes); run functions run
 * on the stream worker and read only their sa_conv.
 */
#include <string.h>

#include "kernels/nn/conv.h"

/* Op names, and the names TF's CPU messages give the kernels. */
static const char* const kOpNames[] = {"Conv2D", "Conv2DBackpropInput",
                                       "Conv2DBackpropFilter"};
static const char* const kCpuNames[] = {"Conv2D", "Conv2DCustomBackpropInput",
                                        "Conv2DCustomBackpropFilter"};

/* ---- run functions (worker): src/arith's ------------------------------- */

static void bp_input_run(sk_launch* l, void* args) {
  (void)l;
  sa_conv_bp_input(args);
}

static void bp_filter_run(sk_launch* l, void* args) {
  (void)l;
  sa_conv_bp_filter(args);
}

/* ---- validation and launch (TF thread) ---------------------------------- */

/* Reads the int32 host-memory size input `i` (input_sizes / filter_sizes)
 * into *v: 4 dims, or input_sizes' [rows, cols]; counted (TF CPU's first
 * check of input_sizes). */
static bool read_sizes(sk_launch* l, int i, const char* what, sk_shape* v) {
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
  return sk_shape_from_tensor(l, t, NULL, v);
}

bool skc_bp_ranks(sk_launch* l, const char* who, const sk_shape* x,
                  const sk_shape* f, const sk_shape* dy) {
  const char* names[3] = {"input", "filter", "out_backprop"};
  const sk_shape* all[3] = {x, f, dy};
  for (int i = 0; i < 3; i++) {
    if (all[i]->nd != 4) {
      sk_fail(l, TF_INVALID_ARGUMENT, "%s: %s must be 4-dimensional", who,
              names[i]);
      return false;
    }
  }
  return true;
}

/* Checks x / filter / dy shapes of a backprop against each other (TF's
 * ConvBackpropComputeDimensions) and fills g. */
static bool bp_geometry(sk_launch* l, const skc_attrs* at, const sk_shape* xs,
                        const sk_shape* fs, const sk_shape* ys,
                        sa_conv_geom* g) {
  const char* who = kCpuNames[at->op];
  if (!skc_bp_ranks(l, who, xs, fs, ys)) return false;
  *g = (sa_conv_geom){.n = xs->d[0],
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
  sk_shape xs;
  if (!read_sizes(l, 0, "input_sizes", &xs)) return;
  TF_Tensor* f = sk_input(l, 1);
  TF_Tensor* dy = sk_input(l, 2);
  sk_shape fs, ys;
  if (f == NULL || dy == NULL || !sk_shape_of(l, f, &fs) ||
      !sk_shape_of(l, dy, &ys))
    return;
  if (xs.nd == 2) { /* [rows, cols]: batch from dy, depth from the filter */
    if (ys.nd != 4 || fs.nd != 4) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "%s: filter and out_backprop must be 4-dimensional",
              kCpuNames[SKC_BP_INPUT]);
      return;
    }
    xs = (sk_shape){4, {ys.d[0], xs.d[0], xs.d[1], fs.d[2]}, 0};
    if (!sk_shape_count(l, &xs)) return;
  }
  sa_conv_geom g;
  if (!bp_geometry(l, at, &xs, &fs, &ys, &g)) return;
  TF_Tensor* dx = sk_output(l, 0, &xs);
  if (!sk_ok(l) || xs.n == 0) return;
  sa_conv* a = skc_prepare(l, &g, TF_TensorType(f));
  if (a == NULL) return;
  a->x = sk_mdata(dx);
  a->f = sk_mdata(f);
  a->y = sk_mdata(dy);
  sk_work(l, bp_input_run, "Conv2DBackpropInput");
}

static void bp_filter_compute(sk_launch* l, void* state) {
  const skc_attrs* at = state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape fs;
  if (x == NULL || !read_sizes(l, 1, "filter_sizes", &fs)) return;
  TF_Tensor* dy = sk_input(l, 2);
  sk_shape xs, ys;
  if (dy == NULL || !sk_shape_of(l, x, &xs) || !sk_shape_of(l, dy, &ys)) return;
  sa_conv_geom g;
  if (!bp_geometry(l, at, &xs, &fs, &ys, &g)) return;
  TF_Tensor* df = sk_output(l, 0, &fs);
  if (!sk_ok(l) || fs.n == 0) return;
  sa_conv* a = skc_prepare(l, &g, TF_TensorType(x));
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
