/*
 * conv.c - Conv2D and _FusedConv2D (float32, float64, NHWC) as im2col +
 * OpenBLAS gemm, and the attributes and geometry the conv family shares
 * (conv_backprop.c has Conv2DBackpropInput and Conv2DBackpropFilter).
 *
 * The arithmetic is src/arith's (arith/sa.h; its conv.c describes im2col,
 * the bounded chunks and why results are bit-identical run to run): these
 * files validate on TF's thread, plan with sa_conv_plan, take the im2col
 * scratch as a temporary of the launch (sk_temp: device memory TF's
 * allocator hands out) and queue sa_conv_fwd / _bp_input / _bp_filter.
 *
 * Validation mirrors TF's Eigen CPU kernels (messages and codes), with two
 * deliberate differences: backprops accept dilations > 1 (TF's CPU kernels
 * refuse them; oneDNN and GPUs accept them), and grouped convolutions are
 * supported forward only, as on CPU. NHWC only: NCHW is Unimplemented for
 * Conv2D and InvalidArgument for the backprops, the codes TF's CPU uses.
 *
 * _FusedConv2D (TF's own op, which the graph optimizer's remapper writes for
 * Conv2D + BiasAdd [+ activation]) is Conv2D with fused.h's epilogue passed
 * to every sa_gemm of the chunk loop: bias and activation are applied to
 * each block of output rows right after its GEMM, not in another sweep.
 * Its attribute checks and messages are TF CPU's fused kernel's (NHWC
 * only); unlike TF CPU's it also runs grouped convolutions, as Conv2D does,
 * so that the remapper need not know the input depth. fused.c says which
 * fusions it implements.
 *
 * Files: conv.h (shared types and functions), this file (attributes,
 * geometry, Conv2D, _FusedConv2D and their registration),
 * conv_backprop.c (the backprops and theirs).
 *
 * Thread contract: create functions run at kernel construction, compute
 * functions on TF's thread (they validate everything and read the host-memory
 * size inputs); *_run functions run on the stream worker and read only
 * their sa_conv.
 */
#include "kernels/nn/conv.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- run functions (worker) --------------------------------------------- */

static void fwd_run(sk_launch* l, void* args) {
  (void)l;
  sa_conv_fwd(args);
}

/* ---- geometry (TF thread) ----------------------------------------------- */

/* Output size and padding before, as TF's GetWindowedOutputSizeVerbose,
 * with its message when the size would be negative; InvalidArgument too
 * when a step of it overflows int64 (an empty input's dim, a filter dim
 * times the dilation, explicit_paddings: sa_conv_window). */
static bool window(sk_launch* l, const skc_attrs* at, int64_t in, int64_t k,
                   int64_t dil, int64_t stride, const int64_t* pads,
                   int64_t* out, int64_t* before) {
  enum sa_window rc =
      sa_conv_window(at->pad, in, k, dil, stride, pads, out, before);
  if (rc == SA_WINDOW_OK) return true;
  if (rc == SA_WINDOW_OVERFLOW) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Computed output size overflows int64 [input_size: %lld, "
            "filter_size: %lld, dilation: %lld, stride: %lld, padding: "
            "%lld, %lld]",
            (long long)in, (long long)k, (long long)dil, (long long)stride,
            (long long)(at->pad == SA_PAD_EXPLICIT ? pads[0] : 0),
            (long long)(at->pad == SA_PAD_EXPLICIT ? pads[1] : 0));
    return false;
  }
  sk_fail(l, TF_INVALID_ARGUMENT,
          "Computed output size would be negative: %lld [input_size: %lld, "
          "effective_filter_size: %lld, stride: %lld]",
          (long long)*out, (long long)in, (long long)((k - 1) * dil + 1),
          (long long)stride);
  return false;
}

/* Fills output size and padding of g from its input and filter sizes. */
bool skc_spatial(sk_launch* l, const skc_attrs* at, sa_conv_geom* g) {
  g->sh = at->sh;
  g->sw = at->sw;
  g->dh = at->dh;
  g->dw = at->dw;
  return window(l, at, g->h, g->kh, g->dh, g->sh, &at->pads[0], &g->oh,
                &g->pt) &&
         window(l, at, g->w, g->kw, g->dw, g->sw, &at->pads[2], &g->ow, &g->pl);
}

/* The run function's arguments in launch memory and the im2col scratch as
 * a temporary of the launch. */
sa_conv* skc_prepare(sk_launch* l, const sa_conv_geom* g, TF_DataType dt) {
  if (!sa_conv_sizes_ok(g)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "simdev: convolution too large for the BLAS interface's int range");
    return NULL;
  }
  sa_conv* a = sk_args(l, sizeof(*a));
  if (a == NULL) return NULL;
  size_t scratch = sa_conv_plan(a, g, sk_sa_dtype(dt));
  if (scratch > 0) a->col = sk_temp(l, scratch);
  return sk_ok(l) ? a : NULL;
}

static bool rank4(sk_launch* l, const sk_shape* s, const char* what) {
  if (s->nd == 4) return true;
  char buf[256];
  sk_fail(l, TF_INVALID_ARGUMENT, "%s must be 4-dimensional: %s", what,
          sk_shape_str(s, buf, sizeof(buf)));
  return false;
}

/* ---- Conv2D (TF thread) ------------------------------------------------- */

static void fwd_compute(sk_launch* l, void* state) {
  const skc_attrs* at = state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* f = sk_input(l, 1);
  sk_shape xs, fs;
  if (x == NULL || f == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, f, &fs) || !rank4(l, &xs, "convolution input") ||
      !rank4(l, &fs, "convolution filter"))
    return;
  int ci = at->nchw ? 1 : 3, hi = at->nchw ? 2 : 1, wi = at->nchw ? 3 : 2;
  sa_conv_geom g = {.n = xs.d[0],
                    .h = xs.d[hi],
                    .w = xs.d[wi],
                    .c = xs.d[ci],
                    .kh = fs.d[0],
                    .kw = fs.d[1],
                    .kc = fs.d[2],
                    .o = fs.d[3]};
  if (g.kc <= 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "filter depth must be stricly positive, got %lld", (long long)g.kc);
    return;
  }
  if (g.c % g.kc != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "input depth must be evenly divisible by filter depth: %lld vs "
            "%lld",
            (long long)g.c, (long long)g.kc);
    return;
  }
  g.groups = g.c / g.kc; /* 0 for an input of depth 0: the output is zeros */
  if (g.groups > 0 && g.o % g.groups != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "output depth must be evenly divisible by number of groups: "
            "%lld vs %lld",
            (long long)g.o, (long long)g.groups);
    return;
  }
  if (!skc_spatial(l, at, &g)) return;
  sk_shape ys = {4, {g.n, g.oh, g.ow, g.o}, g.n * g.oh * g.ow * g.o};
  if (at->nchw) {
    ys.d[1] = g.o;
    ys.d[2] = g.oh;
    ys.d[3] = g.ow;
  }
  TF_Tensor* y = sk_output(l, 0, &ys);
  sa_epi epi;
  if (at->fused && !skf_bias(l, 2, g.o, &ys, &at->fx, TF_TensorType(x), &epi))
    return;
  if (!sk_ok(l) || ys.n == 0) return;
  if (at->nchw) {
    sk_fail(l, TF_UNIMPLEMENTED,
            "The Conv2D op currently only supports the NHWC tensor format on "
            "SIMDEV (as on CPU). The op was given the format: NCHW");
    return;
  }
  if (fs.n == 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "filter must not have zero elements (i.e. all dimensions must be "
            "non-zero)");
    return;
  }
  sa_conv* a = skc_prepare(l, &g, TF_TensorType(x));
  if (a == NULL) return;
  a->x = sk_mdata(x);
  a->f = sk_mdata(f);
  a->y = sk_mdata(y);
  if (at->fused) {
    a->epi = epi;
    a->ep = &a->epi;
  }
  sk_work(l, fwd_run, at->fused ? "_FusedConv2D" : "Conv2D");
}

/* ---- attributes and registration (construction) ------------------------ */

/* Reads a 4-entry window attribute (strides / dilations) into h, w. */
static bool window_attr(TF_OpKernelConstruction* c, const skc_attrs* at,
                        const char* name, const char* what, int64_t* h,
                        int64_t* w) {
  int64_t v[8];
  int n = 0;
  if (!sk_attr_int32s(c, name, v, 8, &n)) return false;
  if (n != 4) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Sliding window %s field must specify 4 dimensions",
                         name);
    return false;
  }
  int hi = at->nchw ? 2 : 1, wi = at->nchw ? 3 : 2, ci = at->nchw ? 1 : 3;
  if (v[0] != 1 || v[ci] != 1) {
    sk_construction_fail(c, TF_UNIMPLEMENTED,
                         "Current implementation does not yet support %s in "
                         "the batch and depth dimensions.",
                         name);
    return false;
  }
  if (v[hi] <= 0 || v[wi] <= 0) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT, "%s should be larger than 0.",
                         what);
    return false;
  }
  *h = v[hi];
  *w = v[wi];
  return true;
}

bool skc_padding_attrs(TF_OpKernelConstruction* c, skc_attrs* at) {
  char pad[16];
  int64_t v[16];
  int n = 0;
  if (!sk_attr_string(c, "padding", pad, sizeof(pad)) ||
      !sk_attr_ints(c, "explicit_paddings", v, 16, &n))
    return false;
  at->pad = strcmp(pad, "SAME") == 0    ? SA_PAD_SAME
            : strcmp(pad, "VALID") == 0 ? SA_PAD_VALID
                                        : SA_PAD_EXPLICIT;
  if (at->pad != SA_PAD_EXPLICIT) {
    if (n == 0) return true;
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "explicit_paddings attribute must be empty if the "
                         "padding attribute is not EXPLICIT");
    return false;
  }
  if (n != 8) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "explicit_paddings attribute must contain 8 values, "
                         "but got: %d",
                         n);
    return false;
  }
  for (int i = 0; i < 8; i++) {
    if (v[i] < 0) {
      sk_construction_fail(c, TF_INVALID_ARGUMENT,
                           "All elements of explicit_paddings must be "
                           "nonnegative");
      return false;
    }
  }
  int hi = at->nchw ? 2 : 1, wi = at->nchw ? 3 : 2, ci = at->nchw ? 1 : 3;
  if (v[0] || v[1] || v[2 * ci] || v[2 * ci + 1]) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Nonzero explicit padding in the batch or depth "
                         "dimensions is not supported");
    return false;
  }
  at->pads[0] = v[2 * hi];
  at->pads[1] = v[2 * hi + 1];
  at->pads[2] = v[2 * wi];
  at->pads[3] = v[2 * wi + 1];
  return true;
}

/* _FusedConv2D's own attributes: the fusion (fused.c), its extra inputs
 * (TArgs = [T], no host_args: those carry the int8 scales of cuDNN's
 * fusions), the filter layout. NHWC only, as TF CPU's fused kernel. */
static bool fused_attrs(TF_OpKernelConstruction* c, skc_attrs* at) {
  if (!skf_attrs_read(c, "Conv2D", &at->fx)) return false;
  TF_DataType t = 0, targs[8] = {0};
  int64_t nhost = 0;
  int32_t nargs = 0;
  char ff[16] = "";
  if (!sk_attr_type(c, "T", &t) || !sk_attr_size(c, "TArgs", &nargs, NULL))
    return false;
  /* more than 8: refused below by count */
  if (nargs >= 1 && nargs <= 8 && !sk_attr_types(c, "TArgs", targs, nargs))
    return false;
  if (!sk_attr_int(c, "num_host_args", &nhost) ||
      !sk_attr_string(c, "filter_format", ff, sizeof(ff)))
    return false;
  if (nargs != 1 || targs[0] != t) {
    char got[64];
    if (nargs != 1)
      snprintf(got, sizeof(got), "%d extra arguments", (int)nargs);
    else
      snprintf(got, sizeof(got), "a bias of type %s", sk_dtype_name(targs[0]));
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Fused Conv2D with BiasAdd must have one extra "
                         "argument: bias of type %s (SIMDEV got %s)",
                         sk_dtype_name(t), got);
    return false;
  }
  if (nhost != 0) {
    sk_construction_fail(c, TF_UNIMPLEMENTED,
                         "simdev: _FusedConv2D with host_args is not "
                         "implemented on SIMDEV (num_host_args = %lld)",
                         (long long)nhost);
    return false;
  }
  if (strcmp(ff, "HWIO") != 0) {
    sk_construction_fail(c, TF_UNIMPLEMENTED,
                         "simdev: _FusedConv2D supports filter_format HWIO "
                         "only on SIMDEV, got %s",
                         ff);
    return false;
  }
  if (at->nchw) {
    sk_construction_fail(c, TF_UNIMPLEMENTED,
                         "Fused conv implementation only supports NHWC tensor "
                         "format for now.");
    return false;
  }
  return true;
}

/* A kernel for `op` (Conv2D's fused form when `fused`). */
static void* create_kernel(TF_OpKernelConstruction* c, enum skc_op op,
                           sk_compute_fn fn, bool fused) {
  skc_attrs* at = sk_state_new(c, sizeof(*at));
  char fmt[16];
  if (at == NULL) return NULL;
  at->op = op;
  at->fused = fused;
  bool ok = sk_attr_string(c, "data_format", fmt, sizeof(fmt));
  at->nchw = ok && strcmp(fmt, "NCHW") == 0;
  if (ok && at->nchw && op != SKC_FWD) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Conv2DCustomBackprop%sOp only supports NHWC (on "
                         "SIMDEV as on CPU).",
                         op == SKC_BP_INPUT ? "Input" : "Filter");
    ok = false;
  }
  ok = ok &&
       window_attr(c, at, "dilations", "Dilated rates", &at->dh, &at->dw) &&
       window_attr(c, at, "strides", "Row and column strides", &at->sh,
                   &at->sw) &&
       skc_padding_attrs(c, at) && (!fused || fused_attrs(c, at));
  if (!ok) {
    free(at);
    return NULL;
  }
  return sk_kernel_new(c, fn, at, free);
}

void* skc_create(TF_OpKernelConstruction* c, enum skc_op op, sk_compute_fn fn) {
  return create_kernel(c, op, fn, false);
}

static void* fwd_create(TF_OpKernelConstruction* c) {
  return skc_create(c, SKC_FWD, fwd_compute);
}
static void* fused_create(TF_OpKernelConstruction* c) {
  return create_kernel(c, SKC_FWD, fwd_compute, true);
}
static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, 0};

static const sk_op kOps[] = {
    {"Conv2D", fwd_create, "T", kFloatTypes, NULL},
    {"_FusedConv2D", fused_create, "T", kFloatTypes, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_conv(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
