/*
 * resize.c - ResizeBilinear, ResizeNearestNeighbor and their gradients
 * ResizeBilinearGrad, ResizeNearestNeighborGrad (NHWC; float32, float64,
 * float16, bfloat16 images; align_corners, half_pixel_centers).
 *
 * Coordinates follow TF's definitions, computed in float32 as TF's CPU
 * kernels compute them (so that the nearest pixel and the weights are the
 * same): scale = (in - 1) / (out - 1) with align_corners and out > 1, else
 * in / out; a source coordinate is (o + 0.5) * scale - 0.5 with
 * half_pixel_centers (bilinear; nearest: (o + 0.5) * scale), else o *
 * scale. Bilinear reads rows floor(c) and ceil(c), clamped to the image,
 * with weight c - floor(c); nearest takes round(c) with align_corners,
 * floor(c) otherwise, clamped. ResizeBilinear's output is float32 whatever
 * the image type, as in TF.
 *
 * The gradients scatter each output pixel's gradient to the input pixels it
 * read. To stay deterministic one task owns one image (batch entry) and a
 * block of channels, walks the output pixels in order and sums in float64.
 *
 * Thread contract: create at construction; compute functions on TF's
 * thread (they read the host-memory size input); run functions on the
 * stream worker, reading an rs_args.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/f16.h"
#include "kernels/framework/sk.h"

enum rs_op { RS_BILINEAR, RS_NEAREST, RS_BILINEAR_GRAD, RS_NEAREST_GRAD };

typedef struct rs_state {
  enum rs_op op;
  bool align, half;
} rs_state;

typedef struct rs_args {
  enum rs_op op;
  bool align, half;
  TF_DataType in_dt, out_dt;
  int64_t n, c;
  int64_t ih, iw; /* the forward's input (image) size */
  int64_t oh, ow; /* the forward's output size */
  float sh, sw;
  const void* in; /* image (forward) or gradient */
  void* out;
  double* acc; /* gradients: float64 sums, [n, ih, iw, c] */
} rs_args;

/* ---- coordinates (TF's definitions, float32) ---------------------------- */

static float scale_of(int64_t in, int64_t out, bool align) {
  return align && out > 1 ? (float)(in - 1) / (float)(out - 1)
                          : (float)in / (float)out;
}

typedef struct lerp {
  int64_t lo, hi;
  float w; /* weight of hi */
} lerp;

static lerp bilinear_at(int64_t o, float scale, int64_t in, bool half) {
  float c = half ? ((float)o + 0.5f) * scale - 0.5f : (float)o * scale;
  float f = floorf(c);
  lerp r;
  /* Both ends clamped into [0, in): past 2^24 pixels float rounding can put
   * c beyond the last pixel. */
  r.lo = f <= 0 ? 0 : (int64_t)f < in - 1 ? (int64_t)f : in - 1;
  int64_t ce = (int64_t)ceilf(c);
  r.hi = ce < 0 ? 0 : ce < in - 1 ? ce : in - 1;
  r.w = c - f;
  return r;
}

static int64_t nearest_at(int64_t o, float scale, int64_t in, bool align,
                          bool half) {
  float c = half ? ((float)o + 0.5f) * scale : (float)o * scale;
  int64_t i = align ? (int64_t)roundf(c) : (int64_t)floorf(c);
  if (i > in - 1) i = in - 1;
  if (i < 0) i = 0;
  return i;
}

/* ---- worker ------------------------------------------------------------- */

static void fwd_rows(void* arg, int64_t lo, int64_t hi) {
  const rs_args* a = arg;
  int64_t C = a->c;
  for (int64_t r = lo; r < hi; r++) {
    int64_t b = r / a->oh, y = r % a->oh;
    int64_t img = b * a->ih * a->iw * C;
    int64_t dst = r * a->ow * C;
    if (a->op == RS_NEAREST) {
      int64_t iy = nearest_at(y, a->sh, a->ih, a->align, a->half);
      size_t es = TF_DataTypeSize(a->out_dt);
      for (int64_t x = 0; x < a->ow; x++) {
        int64_t ix = nearest_at(x, a->sw, a->iw, a->align, a->half);
        memcpy((char*)a->out + (size_t)(dst + x * C) * es,
               (const char*)a->in + (size_t)(img + (iy * a->iw + ix) * C) * es,
               (size_t)C * es);
      }
      continue;
    }
    lerp ly = bilinear_at(y, a->sh, a->ih, a->half);
    float* out = a->out;
    for (int64_t x = 0; x < a->ow; x++) {
      lerp lx = bilinear_at(x, a->sw, a->iw, a->half);
      int64_t tl = img + (ly.lo * a->iw + lx.lo) * C;
      int64_t tr = img + (ly.lo * a->iw + lx.hi) * C;
      int64_t bl = img + (ly.hi * a->iw + lx.lo) * C;
      int64_t br = img + (ly.hi * a->iw + lx.hi) * C;
      for (int64_t c = 0; c < C; c++) {
        /* float32 like TF: top and bottom lerps, then the vertical one */
        float vtl = (float)skh_load(a->in_dt, a->in, tl + c);
        float vtr = (float)skh_load(a->in_dt, a->in, tr + c);
        float vbl = (float)skh_load(a->in_dt, a->in, bl + c);
        float vbr = (float)skh_load(a->in_dt, a->in, br + c);
        float top = vtl + (vtr - vtl) * lx.w;
        float bot = vbl + (vbr - vbl) * lx.w;
        out[dst + x * C + c] = top + (bot - top) * ly.w;
      }
    }
  }
}

/* Task t: image t / blocks, channels of block t % blocks. */
#define RS_CB 64
static void grad_tasks(void* arg, int64_t lo, int64_t hi) {
  const rs_args* a = arg;
  int64_t C = a->c, blocks = (C + RS_CB - 1) / RS_CB;
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / blocks, c0 = (t % blocks) * RS_CB;
    int64_t c1 = c0 + RS_CB < C ? c0 + RS_CB : C;
    double* acc = a->acc + b * a->ih * a->iw * C;
    for (int64_t p = 0; p < a->ih * a->iw; p++)
      for (int64_t c = c0; c < c1; c++) acc[p * C + c] = 0;
    for (int64_t y = 0; y < a->oh; y++) {
      for (int64_t x = 0; x < a->ow; x++) {
        int64_t g = ((b * a->oh + y) * a->ow + x) * C;
        if (a->op == RS_NEAREST_GRAD) {
          int64_t iy = nearest_at(y, a->sh, a->ih, a->align, a->half);
          int64_t ix = nearest_at(x, a->sw, a->iw, a->align, a->half);
          double* d = acc + (iy * a->iw + ix) * C;
          for (int64_t c = c0; c < c1; c++)
            d[c] += skh_load(a->in_dt, a->in, g + c);
          continue;
        }
        lerp ly = bilinear_at(y, a->sh, a->ih, a->half);
        lerp lx = bilinear_at(x, a->sw, a->iw, a->half);
        double wy = ly.w, wx = lx.w;
        double* tl = acc + (ly.lo * a->iw + lx.lo) * C;
        double* tr = acc + (ly.lo * a->iw + lx.hi) * C;
        double* bl = acc + (ly.hi * a->iw + lx.lo) * C;
        double* br = acc + (ly.hi * a->iw + lx.hi) * C;
        for (int64_t c = c0; c < c1; c++) {
          double v = skh_load(a->in_dt, a->in, g + c);
          tl[c] += v * (1 - wy) * (1 - wx);
          tr[c] += v * (1 - wy) * wx;
          bl[c] += v * wy * (1 - wx);
          br[c] += v * wy * wx;
        }
      }
    }
    int64_t base = b * a->ih * a->iw * C;
    for (int64_t p = 0; p < a->ih * a->iw; p++)
      for (int64_t c = c0; c < c1; c++)
        skh_store(a->out_dt, a->out, base + p * C + c, acc[p * C + c]);
  }
}

static void rs_run(sk_launch* l, void* args) {
  (void)l;
  rs_args* a = args;
  if (a->op == RS_BILINEAR || a->op == RS_NEAREST) {
    int64_t per = a->ow * a->c;
    sim_parallel_for(a->n * a->oh, per >= 16384 ? 1 : 16384 / (per ? per : 1),
                     fwd_rows, a);
  } else {
    sim_parallel_for(a->n * ((a->c + RS_CB - 1) / RS_CB), 1, grad_tasks, a);
  }
}

/* ---- validation (TF thread) --------------------------------------------- */

static bool rank4(sk_launch* l, const sk_shape* s, const char* what) {
  if (s->nd == 4) return true;
  char buf[256];
  sk_fail(l, TF_INVALID_ARGUMENT, "%s must be 4-dimensional%s", what,
          sk_shape_str(s, buf, sizeof(buf)));
  return false;
}

/* The host-memory int32 size input (2 values). */
static bool read_size(sk_launch* l, int i, bool grad, int64_t* h, int64_t* w) {
  TF_Tensor* t = sk_input(l, i);
  sk_shape s;
  if (t == NULL || !sk_shape_of(l, t, &s)) return false;
  if (s.nd != 1 || s.d[0] != 2) {
    char buf[256];
    sk_fail(l, TF_INVALID_ARGUMENT, "shape_t must have two elements%s",
            sk_shape_str(&s, buf, sizeof(buf)));
    return false;
  }
  const int32_t* d = sk_data(t);
  *h = d[0];
  *w = d[1];
  if (*h > 0 && *w > 0) return true;
  sk_fail(l, TF_INVALID_ARGUMENT,
          grad ? "shape_t's elements must be positive"
               : "output dimensions must be positive");
  return false;
}

static void rs_compute(sk_launch* l, void* state) {
  const rs_state* st = state;
  TF_Tensor* in = sk_input(l, 0);
  sk_shape is;
  if (in == NULL || !sk_shape_of(l, in, &is)) return;
  rs_args tmp = {.op = st->op, .align = st->align, .half = st->half};
  tmp.in_dt = TF_TensorType(in);
  tmp.out_dt = tmp.in_dt;
  sk_shape os;
  if (st->op == RS_BILINEAR || st->op == RS_NEAREST) {
    if (!rank4(l, &is, "input") || !read_size(l, 1, false, &tmp.oh, &tmp.ow))
      return;
    if (is.d[1] <= 0 || is.d[2] <= 0) {
      sk_fail(l, TF_INVALID_ARGUMENT, "input image must be of non-zero size");
      return;
    }
    tmp.n = is.d[0];
    tmp.ih = is.d[1];
    tmp.iw = is.d[2];
    tmp.c = is.d[3];
    if (st->op == RS_BILINEAR) tmp.out_dt = TF_FLOAT;
    os = (sk_shape){4, {tmp.n, tmp.oh, tmp.ow, tmp.c}, 0};
  } else if (st->op == RS_NEAREST_GRAD) {
    if (!rank4(l, &is, "input") || !read_size(l, 1, true, &tmp.ih, &tmp.iw))
      return;
    tmp.n = is.d[0];
    tmp.oh = is.d[1];
    tmp.ow = is.d[2];
    tmp.c = is.d[3];
    os = (sk_shape){4, {tmp.n, tmp.ih, tmp.iw, tmp.c}, 0};
  } else { /* bilinear grad: grads float32, original_image gives T, H, W */
    TF_Tensor* orig = sk_input(l, 1);
    sk_shape ogs;
    if (orig == NULL || !sk_shape_of(l, orig, &ogs) ||
        !rank4(l, &is, "input_grad") || !rank4(l, &ogs, "original_image"))
      return;
    if (ogs.d[1] <= 0 || ogs.d[2] <= 0) { /* TF CPU's check */
      sk_fail(l, TF_INVALID_ARGUMENT, "original dimensions must be positive");
      return;
    }
    tmp.out_dt = TF_TensorType(orig);
    tmp.n = is.d[0];
    tmp.oh = is.d[1];
    tmp.ow = is.d[2];
    tmp.c = is.d[3];
    tmp.ih = ogs.d[1];
    tmp.iw = ogs.d[2];
    os = (sk_shape){4, {tmp.n, tmp.ih, tmp.iw, tmp.c}, 0};
  }
  if (!sk_shape_count(l, &os)) return; /* size comes from a tensor */
  TF_Tensor* out = sk_output(l, 0, &os);
  if (!sk_ok(l) || os.n == 0) return;
  rs_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  *a = tmp;
  a->sh = scale_of(a->ih, a->oh, a->align);
  a->sw = scale_of(a->iw, a->ow, a->align);
  a->in = sk_data(in);
  a->out = sk_mdata(out);
  if (st->op == RS_BILINEAR_GRAD || st->op == RS_NEAREST_GRAD) {
    a->acc = sk_temp_n(l, os.n, sizeof(double));
    if (!sk_ok(l)) return;
  }
  static const char* const kLabels[] = {
      "ResizeBilinear", "ResizeNearestNeighbor", "ResizeBilinearGrad",
      "ResizeNearestNeighborGrad"};
  sk_work(l, rs_run, kLabels[st->op]);
}

/* ---- registration (construction) ---------------------------------------- */

static void* rs_create(TF_OpKernelConstruction* c, enum rs_op op) {
  rs_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->op = op;
  if (!sk_attr_bool(c, "align_corners", &st->align) ||
      !sk_attr_bool(c, "half_pixel_centers", &st->half)) {
    free(st);
    return NULL;
  }
  if (st->align && st->half) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "If half_pixel_centers is True, align_corners must "
                         "be False.");
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, rs_compute, st, free);
}

static void* bl_create(TF_OpKernelConstruction* c) {
  return rs_create(c, RS_BILINEAR);
}
static void* nn_create(TF_OpKernelConstruction* c) {
  return rs_create(c, RS_NEAREST);
}
static void* blg_create(TF_OpKernelConstruction* c) {
  return rs_create(c, RS_BILINEAR_GRAD);
}
static void* nng_create(TF_OpKernelConstruction* c) {
  return rs_create(c, RS_NEAREST_GRAD);
}

static const TF_DataType kTypes[] = {TF_FLOAT, TF_DOUBLE, TF_HALF, TF_BFLOAT16,
                                     0};
static const char* const kSizeHost[] = {"size", NULL};

static const sk_op kOps[] = {
    {"ResizeBilinear", bl_create, "T", kTypes, kSizeHost},
    {"ResizeNearestNeighbor", nn_create, "T", kTypes, kSizeHost},
    {"ResizeBilinearGrad", blg_create, "T", kTypes, NULL},
    {"ResizeNearestNeighborGrad", nng_create, "T", kTypes, kSizeHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_resize(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
