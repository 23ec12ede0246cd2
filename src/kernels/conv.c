/*
 * conv.c - Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter (float32,
 * float64, NHWC) as im2col + OpenBLAS gemm.
 *
 * im2col turns the input patches of a run of output pixels into the rows of
 * a [pixels, KH*KW*Cg] matrix ("col"), so that
 *   Conv2D               y[pixels, O]  = col x filter[K, O]
 *   Conv2DBackpropFilter dW[K, O]     += col^T x dy[pixels, O]
 *   Conv2DBackpropInput  col           = dy x filter^T, then col2im adds each
 *                                        col entry back to the input pixel it
 *                                        came from
 * The col matrix is device scratch (sk_temp) of at most CONV_SCRATCH_BYTES:
 * the output is processed in chunks of whole output rows (n, oh), one gemm
 * per chunk (and group), so scratch stays bounded and gemm stays large.
 * When col would be the input itself (1x1 filter, stride 1, no padding; or a
 * filter covering the whole unpadded input) no scratch is used and the whole
 * op is a single gemm.
 *
 * Determinism: chunks depend only on shapes; im2col and col2im are spread
 * over sim_parallel_for by disjoint output rows, and col2im gathers (each
 * input row of dx is summed by one task, in a fixed kh, kw order), so results
 * are bit-identical run to run whatever the thread count.
 *
 * Validation mirrors TF's Eigen CPU kernels (messages and codes), with two
 * deliberate differences: backprops accept dilations > 1 (TF's CPU kernels
 * refuse them; oneDNN and GPUs accept them), and grouped convolutions are
 * supported forward only, as on CPU. NHWC only: NCHW is Unimplemented for
 * Conv2D and InvalidArgument for the backprops, the codes TF's CPU uses.
 *
 * _FusedConv2D (TF's own op, which the graph optimizer's remapper writes for
 * Conv2D + BiasAdd [+ activation]) is Conv2D with fused.h's epilogue passed
 * to every sk_gemm_ep of the chunk loop: bias and activation are applied to
 * each block of output rows right after its GEMM, not in another sweep.
 * Its attribute checks and messages are TF CPU's fused kernel's (NHWC
 * only, no groups); fused.c says which fusions it implements.
 *
 * Files: conv.h (shared types and functions), this file (attributes,
 * geometry, im2col, Conv2D, _FusedConv2D and their registration),
 * conv_backprop.c (the backprops and theirs).
 *
 * Thread contract: create functions run at kernel construction, compute
 * functions on TF's thread (they validate everything and read the host-memory
 * size inputs); *_run functions and their helpers run on the stream worker
 * and read only skc_args.
 */
#include "kernels/conv.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Upper bound of the im2col scratch per launch (unless one output row alone
 * is larger). 4 MiB keeps gemm's M in the thousands for common layers (1792
 * for 56x56x64 with a 3x3 filter) while col stays cache-resident; measured
 * as fast as or faster than 16 and 64 MiB chunks. */
#define CONV_SCRATCH_BYTES ((size_t)4 << 20)

/* ---- im2col (worker) --------------------------------------------------- */

typedef struct conv_job {
  const skc_args* a;
  int64_t r0;    /* first output row (n * OH + oh) of the chunk */
  int64_t group; /* channel group */
} conv_job;

/* col rows of output row r = (n, oh) for channel group `grp`. */
static void im2col_row(const skc_args* a, int64_t r, int64_t grp, char* dst) {
  const skc_geom* g = &a->g;
  size_t es = a->es, cb = (size_t)g->kc * es;
  int64_t n = r / g->oh, oh = r % g->oh;
  const char* img = (const char*)a->x + (size_t)(n * g->h * g->w * g->c) * es;
  bool whole = g->kc == g->c && g->dw == 1;
  for (int64_t ow = 0; ow < g->ow; ow++) {
    int64_t iw0 = ow * g->sw - g->pl;
    for (int64_t kh = 0; kh < g->kh; kh++, dst += (size_t)g->kw * cb) {
      int64_t ih = oh * g->sh - g->pt + kh * g->dh;
      if (ih < 0 || ih >= g->h) {
        memset(dst, 0, (size_t)g->kw * cb);
        continue;
      }
      const char* src = img + (size_t)((ih * g->w) * g->c + grp * g->kc) * es;
      if (whole && iw0 >= 0 && iw0 + g->kw <= g->w) {
        memcpy(dst, src + (size_t)(iw0 * g->c) * es, (size_t)g->kw * cb);
        continue;
      }
      for (int64_t kw = 0; kw < g->kw; kw++) {
        int64_t iw = iw0 + kw * g->dw;
        char* d = dst + (size_t)kw * cb;
        if (iw < 0 || iw >= g->w)
          memset(d, 0, cb);
        else
          memcpy(d, src + (size_t)(iw * g->c) * es, cb);
      }
    }
  }
}

static void im2col_range(void* arg, int64_t lo, int64_t hi) {
  const conv_job* j = arg;
  const skc_geom* g = &j->a->g;
  size_t row_bytes = (size_t)(g->ow * g->kh * g->kw * g->kc) * j->a->es;
  for (int64_t i = lo; i < hi; i++)
    im2col_row(j->a, j->r0 + i, j->group, (char*)j->a->col + i * row_bytes);
}

/* Grain (in output rows) giving each task ~32K elements of copying. */
static int64_t row_grain(const skc_geom* g, int64_t k) {
  int64_t per_row = g->ow * k;
  return per_row >= 32768 ? 1 : 32768 / (per_row ? per_row : 1);
}

void skc_im2col(const skc_args* a, int64_t r0, int64_t rows, int64_t grp) {
  conv_job j = {a, r0, grp};
  const skc_geom* g = &a->g;
  sim_parallel_for(rows, row_grain(g, g->kh * g->kw * g->kc), im2col_range, &j);
}

/* ---- run functions (worker) --------------------------------------------- */

static void fwd_run(sk_launch* l, void* args) {
  (void)l;
  const skc_args* a = args;
  const skc_geom* g = &a->g;
  if (a->zero_only) {
    memset(a->y, 0, (size_t)(g->n * g->oh * g->ow * g->o) * a->es);
    skf_apply(a->ep, a->y, g->n * g->oh * g->ow, g->o, g->o, 1);
    return;
  }
  int64_t og = g->o / g->groups, k = g->kh * g->kw * g->kc;
  if (a->direct) {
    sk_gemm_ep(a->dt, false, false, g->n * g->oh * g->ow, g->o, k, a->x, k,
               a->f, g->o, 0., a->y, g->o, a->ep);
    return;
  }
  int64_t rows = g->n * g->oh;
  for (int64_t r0 = 0; r0 < rows; r0 += a->chunk_rows) {
    int64_t nr = rows - r0 < a->chunk_rows ? rows - r0 : a->chunk_rows;
    char* y = (char*)a->y + (size_t)(r0 * g->ow * g->o) * a->es;
    for (int64_t grp = 0; grp < g->groups; grp++) {
      skc_im2col(a, r0, nr, grp);
      /* a->ep only with one group (_FusedConv2D refuses more) */
      sk_gemm_ep(a->dt, false, false, nr * g->ow, og, k, a->col, k,
                 (const char*)a->f + (size_t)(grp * og) * a->es, g->o, 0.,
                 y + (size_t)(grp * og) * a->es, g->o, a->ep);
    }
  }
}

/* ---- geometry (TF thread) ----------------------------------------------- */

/* Output size and padding before, as TF's GetWindowedOutputSizeVerbose. */
static bool window(sk_launch* l, const skc_attrs* at, int64_t in, int64_t k,
                   int64_t dil, int64_t stride, const int64_t* pads,
                   int64_t* out, int64_t* before) {
  int64_t eff = (k - 1) * dil + 1;
  switch (at->pad) {
    case SKC_PAD_VALID:
      *out = (in - eff + stride) / stride;
      *before = 0;
      break;
    case SKC_PAD_SAME: {
      *out = (in + stride - 1) / stride;
      int64_t need = (*out - 1) * stride + eff - in;
      *before = need > 0 ? need / 2 : 0;
      break;
    }
    case SKC_PAD_EXPLICIT:
      *out = (in + pads[0] + pads[1] - eff + stride) / stride;
      *before = pads[0];
      break;
  }
  if (*out >= 0) return true;
  sk_fail(l, TF_INVALID_ARGUMENT,
          "Computed output size would be negative: %lld [input_size: %lld, "
          "effective_filter_size: %lld, stride: %lld]",
          (long long)*out, (long long)in, (long long)eff, (long long)stride);
  return false;
}

/* Fills output size and padding of g from its input and filter sizes. */
bool skc_spatial(sk_launch* l, const skc_attrs* at, skc_geom* g) {
  g->sh = at->sh;
  g->sw = at->sw;
  g->dh = at->dh;
  g->dw = at->dw;
  return window(l, at, g->h, g->kh, g->dh, g->sh, &at->pads[0], &g->oh,
                &g->pt) &&
         window(l, at, g->w, g->kw, g->dw, g->sw, &at->pads[2], &g->ow, &g->pl);
}

/* Whether im2col of the input would be the input itself. */
static bool is_direct(const skc_geom* g) {
  if (g->groups != 1 || g->pt != 0 || g->pl != 0) return false;
  bool one = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 &&
             g->oh == g->h && g->ow == g->w;
  bool whole = g->kh == g->h && g->kw == g->w && g->oh == 1 && g->ow == 1 &&
               (g->dh == 1 || g->kh == 1) && (g->dw == 1 || g->kw == 1);
  return one || whole;
}

static bool blas_ok(sk_launch* l, const skc_geom* g) {
  int64_t k = g->kh * g->kw * g->kc, p = g->n * g->oh * g->ow;
  if (k <= INT_MAX && p <= INT_MAX && g->o <= INT_MAX) return true;
  sk_fail(l, TF_INVALID_ARGUMENT,
          "simdev: convolution too large for the BLAS interface's int range");
  return false;
}

/* Fills args for g and allocates the scratch for chunks of output rows. */
skc_args* skc_prepare(sk_launch* l, const skc_geom* g, TF_DataType dt) {
  if (!blas_ok(l, g)) return NULL;
  skc_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return NULL;
  a->dt = dt;
  a->es = dt == TF_FLOAT ? 4 : 8;
  a->g = *g;
  a->direct = is_direct(g);
  int64_t rows = g->n * g->oh;
  int64_t k = g->kh * g->kw * g->kc;
  a->zero_only =
      rows == 0 || g->ow == 0 || k == 0 || g->o == 0 || g->groups == 0;
  if (a->direct || a->zero_only) return a;
  size_t row_bytes = (size_t)(g->ow * k) * a->es;
  int64_t chunk = (int64_t)(CONV_SCRATCH_BYTES / row_bytes);
  a->chunk_rows = chunk < 1 ? 1 : chunk > rows ? rows : chunk;
  a->col = sk_temp(l, (size_t)a->chunk_rows * row_bytes);
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
  skc_geom g = {.n = xs.d[0],
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
  if (at->fused && g.groups != 1) {
    sk_fail(l, TF_UNIMPLEMENTED,
            "Fused conv implementation does not support grouped convolutions "
            "for now.");
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
  skf_epi epi;
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
  skc_args* a = skc_prepare(l, &g, TF_TensorType(x));
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
  if (!sk_attr_ints(c, name, v, 8, &n)) return false;
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
  at->pad = strcmp(pad, "SAME") == 0    ? SKC_PAD_SAME
            : strcmp(pad, "VALID") == 0 ? SKC_PAD_VALID
                                        : SKC_PAD_EXPLICIT;
  if (at->pad != SKC_PAD_EXPLICIT) {
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
  TF_Status* st = TF_NewStatus();
  TF_DataType t = 0, targs[2] = {0, 0};
  int64_t nhost = 0;
  int32_t nargs = 0, total = 0;
  char ff[16] = "";
  TF_OpKernelConstruction_GetAttrType(c, "T", &t, st);
  if (TF_GetCode(st) == TF_OK)
    TF_OpKernelConstruction_GetAttrSize(c, "TArgs", &nargs, &total, st);
  if (TF_GetCode(st) == TF_OK && nargs >= 1)
    TF_OpKernelConstruction_GetAttrTypeList(c, "TArgs", targs, 1, st);
  if (TF_GetCode(st) == TF_OK)
    TF_OpKernelConstruction_GetAttrInt64(c, "num_host_args", &nhost, st);
  bool ok = TF_GetCode(st) == TF_OK;
  if (!ok) TF_OpKernelConstruction_Failure(c, st);
  TF_DeleteStatus(st);
  ok = ok && sk_attr_string(c, "filter_format", ff, sizeof(ff));
  if (!ok) return false;
  if (nargs != 1 || targs[0] != t) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Fused Conv2D with BiasAdd must have one extra "
                         "argument: bias of type %s (SIMDEV got %d extra "
                         "arguments, the first of type %s)",
                         sk_dtype_name(t), (int)nargs, sk_dtype_name(targs[0]));
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
