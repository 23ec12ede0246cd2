/*
 * test_xla_conv.c - simdev_conv2d and its backprops through the fake FFI:
 * results against direct-loop references (float32 and float64; SAME, VALID
 * and EXPLICIT padding, strides, dilations, groups, batch dims, zero
 * sizes, the 1x1 and whole-image shortcuts, several im2col chunks), and
 * every validation error.
 *
 *   build/tests/xla/test_xla_conv [test-name filter]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeffi.h"

#define F32 XLA_FFI_DataType_F32
#define F64 XLA_FFI_DataType_F64
#define INVAL XLA_FFI_Error_Code_INVALID_ARGUMENT
#define UNIMPL XLA_FFI_Error_Code_UNIMPLEMENTED

enum { FWD, BP_INPUT, BP_FILTER };

typedef struct cv_case {
  int64_t n, h, w, c, kh, kw, kc, o, sh, sw, dh, dw;
  const char* pad;
  int64_t pads[4]; /* EXPLICIT: top, bottom, left, right */
} cv_case;

/* Output size and padding before, written from XLA's definition (the
 * padded input, then floor((padded - dilated window) / stride) + 1), not
 * from simdev's sa_conv_window. */
static int64_t out_size(const cv_case* k, int axis, int64_t* before) {
  int64_t in = axis ? k->w : k->h, ks = axis ? k->kw : k->kh;
  int64_t s = axis ? k->sw : k->sh, d = axis ? k->dw : k->dh;
  int64_t eff = (ks - 1) * d + 1, lo = 0, hi = 0;
  if (!strcmp(k->pad, "SAME")) {
    int64_t out = (in + s - 1) / s;
    int64_t total = (out - 1) * s + eff - in;
    if (total < 0) total = 0;
    lo = total / 2, hi = total - lo;
  } else if (!strcmp(k->pad, "EXPLICIT")) {
    lo = k->pads[2 * axis], hi = k->pads[2 * axis + 1];
  }
  *before = lo;
  int64_t padded = in + lo + hi;
  return padded < eff ? 0 : (padded - eff) / s + 1;
}

/* One call of kind on batch dims bd[nb], checked against the direct
 * loops: every product x[n, ih, iw, g*kc + ci] * w[kh, kw, ci, o] that
 * XLA's convolution sums, visited once, added to y, dx or dw. */
static void check_conv(XLA_FFI_DataType dt, int kind, const cv_case* k,
                       const int64_t* bd, int nb) {
  int64_t pt, pl, oh = out_size(k, 0, &pt), ow = out_size(k, 1, &pl);
  int64_t batch = 1;
  for (int i = 0; i < nb; i++) batch *= bd[i];
  int64_t xn = k->n * k->h * k->w * k->c, fn = k->kh * k->kw * k->kc * k->o,
          yn = k->n * oh * ow * k->o;
  size_t es = dt == F32 ? 4 : 8;
  void* x = malloc((size_t)(batch * xn) * es + 8);
  void* f = malloc((size_t)(batch * fn) * es + 8);
  void* y = malloc((size_t)(batch * yn) * es + 8);
  uint64_t seed = (uint64_t)(xn * 7 + fn * 13 + yn + kind);
  ff_fill(x, dt, batch * xn, &seed);
  ff_fill(f, dt, batch * fn, &seed);
  ff_fill(y, dt, batch * yn, &seed);
  void* res = kind == FWD ? y : kind == BP_INPUT ? x : f;
  int64_t rn = kind == FWD ? yn : kind == BP_INPUT ? xn : fn;
  memset(res, 0x7f, (size_t)(batch * rn) * es); /* garbage, not zeros */
  long double* ref = calloc((size_t)(batch * rn) + 1, sizeof(long double));
  long double* mag = calloc((size_t)(batch * rn) + 1, sizeof(long double));
  int64_t* cnt = calloc((size_t)(batch * rn) + 1, sizeof(int64_t));
  int64_t groups = k->kc ? k->c / k->kc : 1, og = k->o / (groups ? groups : 1);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t n = 0; n < k->n; n++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++)
          for (int64_t o = 0; o < k->o; o++)
            for (int64_t u = 0; u < k->kh; u++)
              for (int64_t v = 0; v < k->kw; v++)
                for (int64_t ci = 0; ci < k->kc; ci++) {
                  int64_t ih = i * k->sh - pt + u * k->dh;
                  int64_t iw = j * k->sw - pl + v * k->dw;
                  if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                  int64_t c = (o / og) * k->kc + ci;
                  int64_t xi =
                      b * xn + ((n * k->h + ih) * k->w + iw) * k->c + c;
                  int64_t fi =
                      b * fn + ((u * k->kw + v) * k->kc + ci) * k->o + o;
                  int64_t yi = b * yn + ((n * oh + i) * ow + j) * k->o + o;
                  /* the product of the two operands, into the result */
                  int64_t ri = kind == FWD ? yi : kind == BP_INPUT ? xi : fi;
                  long double t =
                      (long double)(kind == BP_INPUT ? ff_get(y, dt, yi)
                                                     : ff_get(x, dt, xi)) *
                      (kind == BP_FILTER ? ff_get(y, dt, yi)
                                         : ff_get(f, dt, fi));
                  ref[ri] += t;
                  mag[ri] += fabsl(t);
                  cnt[ri]++;
                }
  static const int64_t zeros[4] = {0};
  int64_t dx[10], df[10], dy[10];
  for (int i = 0; i < nb; i++) dx[i] = df[i] = dy[i] = bd[i];
  int64_t gx[4] = {k->n, k->h, k->w, k->c}, gf[4] = {k->kh, k->kw, k->kc, k->o},
          gy[4] = {k->n, oh, ow, k->o};
  memcpy(dx + nb, gx, sizeof(gx));
  memcpy(df + nb, gf, sizeof(gf));
  memcpy(dy + nb, gy, sizeof(gy));
  ff_frame fr;
  ff_init(&fr);
  if (kind == FWD) {
    ff_arg(&fr, dt, x, nb + 4, dx);
    ff_arg(&fr, dt, f, nb + 4, df);
    ff_ret(&fr, dt, y, nb + 4, dy);
  } else if (kind == BP_INPUT) {
    ff_arg(&fr, dt, y, nb + 4, dy);
    ff_arg(&fr, dt, f, nb + 4, df);
    ff_ret(&fr, dt, x, nb + 4, dx);
  } else {
    ff_arg(&fr, dt, x, nb + 4, dx);
    ff_arg(&fr, dt, y, nb + 4, dy);
    ff_ret(&fr, dt, f, nb + 4, df);
  }
  ff_conv_attrs(&fr, k->sh, k->sw, k->dh, k->dw, k->pad,
                strcmp(k->pad, "EXPLICIT") ? zeros : k->pads);
  static XLA_FFI_Handler* const h[] = {simdev_xla_conv2d,
                                       simdev_xla_conv2d_backprop_input,
                                       simdev_xla_conv2d_backprop_filter};
  ff_result r = ff_call(h[kind], &fr);
  if (r.code != XLA_FFI_Error_Code_OK) fail_msg("%s", r.msg);
  double u = dt == F32 ? ldexp(1, -24) : ldexp(1, -53);
  for (int64_t i = 0; i < batch * rn; i++) {
    double got = ff_get(res, dt, i);
    double bound = (double)((cnt[i] + 8) * u * mag[i]);
    if (!(fabs(got - (double)ref[i]) <= bound))
      fail_msg(
          "kind %d %s n%d h%d w%d c%d k%dx%dx%dx%d s%d,%d d%d,%d %s: "
          "element %d got %.17g want %.17g (bound %.3g)",
          kind, dt == F32 ? "f32" : "f64", (int)k->n, (int)k->h, (int)k->w,
          (int)k->c, (int)k->kh, (int)k->kw, (int)k->kc, (int)k->o, (int)k->sh,
          (int)k->sw, (int)k->dh, (int)k->dw, k->pad, (int)i, got,
          (double)ref[i], bound);
  }
  free(x), free(f), free(y), free(ref), free(mag), free(cnt);
}

static const cv_case cases[] = {
    {1, 5, 5, 3, 3, 3, 3, 4, 1, 1, 1, 1, "SAME", {0}},
    {2, 7, 6, 4, 3, 2, 4, 5, 2, 1, 1, 1, "VALID", {0}},
    {2, 6, 7, 4, 2, 3, 4, 3, 2, 2, 1, 2, "EXPLICIT", {1, 2, 0, 3}},
    {1, 9, 8, 2, 3, 3, 2, 3, 3, 2, 2, 3, "SAME", {0}},
    {1, 4, 4, 3, 1, 1, 3, 5, 1, 1, 1, 1, "VALID", {0}}, /* 1x1: direct */
    {2, 3, 3, 2, 3, 3, 2, 4, 1, 1, 1, 1, "VALID", {0}}, /* whole: direct */
    {1, 4, 4, 3, 1, 1, 3, 5, 2, 2, 1, 1, "SAME", {0}},  /* 1x1 strided */
    {1, 5, 5, 2, 2, 2, 2, 2, 1, 1, 1, 1, "EXPLICIT", {0, 0, 0, 0}},
    {1, 2, 5, 1, 3, 1, 1, 2, 2, 1, 1, 1, "VALID", {0}}, /* oh = 0 */
    /* input smaller than the filter: oh = 0, where TF would refuse */
    {1, 1, 5, 2, 3, 1, 2, 2, 1, 1, 1, 1, "VALID", {0}},
    {1, 2, 4, 2, 2, 3, 2, 3, 1, 1, 1, 4, "EXPLICIT", {0, 0, 1, 1}},
    {0, 5, 5, 3, 3, 3, 3, 4, 1, 1, 1, 1, "SAME", {0}},  /* n = 0 */
    {1, 4, 4, 0, 3, 3, 0, 2, 1, 1, 1, 1, "SAME", {0}},  /* c = 0: zeros */
    {1, 4, 4, 3, 3, 3, 3, 0, 1, 1, 1, 1, "SAME", {0}},  /* o = 0 */
    {1, 0, 4, 3, 1, 1, 3, 2, 1, 1, 1, 1, "VALID", {0}}, /* h = 0 */
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Grouped (forward only: the backprops refuse groups). */
static const cv_case grouped[] = {
    {1, 8, 8, 6, 3, 3, 2, 6, 1, 2, 2, 1, "SAME", {0}},
    {2, 6, 7, 4, 2, 3, 2, 6, 2, 2, 1, 2, "EXPLICIT", {1, 2, 0, 3}},
    {1, 5, 5, 4, 1, 1, 1, 8, 1, 1, 1, 1, "VALID", {0}}, /* depthwise-like */
};

static void sweep(int kind) {
  static const int64_t b1[] = {2}, b2[] = {2, 1}, b0[] = {0};
  for (int dti = 0; dti < 2; dti++) {
    XLA_FFI_DataType dt = dti ? F64 : F32;
    for (size_t i = 0; i < NCASES; i++) {
      check_conv(dt, kind, &cases[i], NULL, 0);
      check_conv(dt, kind, &cases[i], b1, 1);
    }
    check_conv(dt, kind, &cases[0], b2, 2);
    check_conv(dt, kind, &cases[0], b0, 1); /* a batch of none */
    if (kind == FWD)
      for (size_t i = 0; i < sizeof(grouped) / sizeof(grouped[0]); i++) {
        check_conv(dt, kind, &grouped[i], NULL, 0);
        check_conv(dt, kind, &grouped[i], b1, 1);
      }
  }
  /* im2col in several chunks of 4 MiB (and sa_gemm over the pool). */
  if (ff_scale() == 1) {
    static const cv_case big = {1, 96, 96, 16, 3, 3,      16,
                                8, 1,  1,  1,  1, "SAME", {0}};
    check_conv(F32, kind, &big, NULL, 0);
  }
}

static void conv_results(void** state) {
  sweep(FWD);
}
static void backprop_input_results(void** state) {
  sweep(BP_INPUT);
}
static void backprop_filter_results(void** state) {
  sweep(BP_FILTER);
}

/* ---- validation ------------------------------------------------------------
 */

static float X[4096], W[4096], Y[4096];

/* A valid conv2d: x [1,5,5,3], w [3,3,3,4] -> y [1,5,5,4], SAME. */
static void frame(ff_frame* f, int kind) {
  static const int64_t dx[] = {1, 5, 5, 3}, dw[] = {3, 3, 3, 4},
                       dy[] = {1, 5, 5, 4};
  ff_init(f);
  if (kind == FWD) {
    ff_arg(f, F32, X, 4, dx);
    ff_arg(f, F32, W, 4, dw);
    ff_ret(f, F32, Y, 4, dy);
  } else if (kind == BP_INPUT) {
    ff_arg(f, F32, Y, 4, dy);
    ff_arg(f, F32, W, 4, dw);
    ff_ret(f, F32, X, 4, dx);
  } else {
    ff_arg(f, F32, X, 4, dx);
    ff_arg(f, F32, Y, 4, dy);
    ff_ret(f, F32, W, 4, dw);
  }
  ff_conv_attrs(f, 1, 1, 1, 1, "SAME", NULL);
}

static void replace_i64s(ff_frame* f, const char* name, int n,
                         const int64_t* v) {
  ff_attr_remove(f, name);
  ff_attr_i64s(f, name, n, v);
}

static void conv_errors(void** state) {
  const char* prefix = "simdev_conv2d: ";
  XLA_FFI_Handler* h = simdev_xla_conv2d;
  ff_frame f;
  for (int kind = 0; kind < 3; kind++) { /* the base frames are valid */
    static XLA_FFI_Handler* const hs[] = {simdev_xla_conv2d,
                                          simdev_xla_conv2d_backprop_input,
                                          simdev_xla_conv2d_backprop_filter};
    frame(&f, kind);
    assert_int_equal(ff_call(hs[kind], &f).code, XLA_FFI_Error_Code_OK);
  }
  frame(&f, FWD);
  f.abufs[0].dtype = XLA_FFI_DataType_S32;
  FF_EXPECT(h, f, INVAL, "operand x must be float32 or float64, got s32");
  frame(&f, FWD);
  f.abufs[1].dtype = F64;
  FF_EXPECT(h, f, INVAL, "operand w must be f32 like x, got f64");
  frame(&f, FWD);
  f.abufs[0].rank = 3;
  FF_EXPECT(h, f, INVAL, "operand x must have rank >= 4, got 3");
  frame(&f, FWD);
  f.abufs[1].rank = 5, f.adims[1][4] = 1;
  FF_EXPECT(h, f, INVAL, "operand w must have rank 4 (x's), got 5");
  frame(&f, FWD);
  f.rdims[0][3] = 3;
  FF_EXPECT(h, f, INVAL, "result y must have shape [1,5,5,4], got [1,5,5,3]");
  frame(&f, FWD);
  f.adims[1][2] = 2;
  FF_EXPECT(h, f, INVAL,
            "the input depth 3 (operand x) is not a multiple of "
            "the filter's input depth 2 (operand w)");
  frame(&f, FWD);
  f.adims[0][3] = 4, f.adims[1][2] = 2, f.adims[1][3] = 3, f.rdims[0][3] = 3;
  FF_EXPECT(h, f, INVAL,
            "the output depth 3 (operand w) is not a multiple of "
            "the 2 groups");
  frame(&f, FWD);
  f.adims[1][0] = 0;
  FF_EXPECT(h, f, INVAL,
            "operand w must have a filter height and width >= 1, "
            "got 0x3");
  frame(&f, FWD); /* an input smaller than the filter: y [1,0,3,4] */
  f.adims[0][1] = 1;
  ff_attr_remove(&f, "padding");
  ff_attr_str(&f, "padding", "VALID");
  FF_EXPECT(h, f, INVAL, "result y must have shape [1,0,3,4], got [1,5,5,4]");
  {
    static const int64_t dx[] = {2, 1, 5, 5, 3}, dw[] = {3, 3, 3, 3, 4},
                         dy[] = {2, 1, 5, 5, 4};
    ff_init(&f);
    ff_arg(&f, F32, X, 5, dx);
    ff_arg(&f, F32, W, 5, dw);
    ff_ret(&f, F32, Y, 5, dy);
    ff_conv_attrs(&f, 1, 1, 1, 1, "SAME", NULL);
    FF_EXPECT(h, f, INVAL,
              "operand w must have the batch dims [2] of operand "
              "x, got [3]");
  }
  /* Attributes. */
  frame(&f, FWD);
  ff_attr_remove(&f, "strides");
  FF_EXPECT(h, f, INVAL, "attribute 'strides' missing");
  frame(&f, FWD);
  ff_attr_remove(&f, "explicit_paddings");
  FF_EXPECT(h, f, INVAL, "attribute 'explicit_paddings' missing");
  frame(&f, FWD);
  replace_i64s(&f, "strides", 3, (const int64_t[]){1, 1, 1});
  FF_EXPECT(h, f, INVAL, "attribute 'strides' must have 2 elements, got 3");
  frame(&f, FWD);
  replace_i64s(&f, "strides", 2, (const int64_t[]){0, 1});
  FF_EXPECT(h, f, INVAL, "attribute 'strides' must be >= 1, got [0,1]");
  frame(&f, FWD);
  replace_i64s(&f, "dilations", 2, (const int64_t[]){1, -2});
  FF_EXPECT(h, f, INVAL, "attribute 'dilations' must be >= 1, got [1,-2]");
  frame(&f, FWD);
  ff_attr_remove(&f, "dilations");
  ff_attr_array(&f, "dilations", XLA_FFI_DataType_S32, 2,
                (const int32_t[]){1, 1}, sizeof(int32_t));
  FF_EXPECT(h, f, INVAL,
            "attribute 'dilations' must be an s64 array, got s32 "
            "array");
  frame(&f, FWD);
  ff_attr_remove(&f, "padding");
  ff_attr_str(&f, "padding", "same");
  FF_EXPECT(h, f, INVAL,
            "attribute 'padding' must be SAME, VALID or EXPLICIT, "
            "got 'same'");
  frame(&f, FWD);
  ff_attr_remove(&f, "padding");
  ff_attr_i64(&f, "padding", 0);
  FF_EXPECT(h, f, INVAL,
            "attribute 'padding' must be a string, got s64 scalar");
  frame(&f, FWD);
  replace_i64s(&f, "explicit_paddings", 4, (const int64_t[]){1, 0, 0, 0});
  FF_EXPECT(h, f, INVAL,
            "attribute 'explicit_paddings' must be all zeros "
            "unless padding is EXPLICIT, got [1,0,0,0] with SAME");
  frame(&f, FWD);
  ff_attr_remove(&f, "padding");
  ff_attr_str(&f, "padding", "EXPLICIT");
  replace_i64s(&f, "explicit_paddings", 4, (const int64_t[]){-1, 0, 0, 0});
  FF_EXPECT(h, f, INVAL,
            "attribute 'explicit_paddings' must be >= 0, got "
            "[-1,0,0,0]");
  frame(&f, FWD);
  replace_i64s(&f, "strides", 2, (const int64_t[]){(int64_t)1 << 40, 1});
  FF_EXPECT(h, f, UNIMPL, "simdev takes values up to 2147483647");
  /* Sizes each within OpenBLAS's int whose im2col row (ow * k * 8 bytes)
   * overflows 64 bits: refused before any scratch size is computed (the
   * plan's arithmetic once wrapped to 64 bytes here). No data is read. */
  {
    const int64_t c = ((int64_t)1 << 31) - ((int64_t)1 << 17) + 4;
    const int64_t pl = (int64_t)1 << 30, pr = ((int64_t)1 << 16) + 1;
    ff_init(&f);
    ff_arg(&f, F64, X, 4, (const int64_t[]){1, 1, 1, c});
    ff_arg(&f, F64, W, 4, (const int64_t[]){1, 1, c, 1});
    ff_ret(&f, F64, Y, 4, (const int64_t[]){1, 1, 1 + pl + pr, 1});
    ff_conv_attrs(&f, 1, 1, 1, 1, "EXPLICIT", (const int64_t[]){0, 0, pl, pr});
    FF_EXPECT(h, f, UNIMPL, "the convolution is too large for simdev");
  }
  frame(&f, FWD);
  ff_attr_str(&f, "data_format", "NHWC");
  FF_EXPECT(h, f, INVAL, "unexpected attribute 'data_format'");

  /* The backprops: their own names; groups refused. */
  prefix = "simdev_conv2d_backprop_input: ";
  h = simdev_xla_conv2d_backprop_input;
  frame(&f, BP_INPUT);
  f.adims[0][1] = 4;
  FF_EXPECT(h, f, INVAL, "operand dy must have shape [1,5,5,4], got [1,4,5,4]");
  frame(&f, BP_INPUT);
  f.rdims[0][3] = 6, f.adims[1][2] = 3; /* dx depth 6, filter depth 3 */
  FF_EXPECT(h, f, UNIMPL,
            "grouped convolutions (2 groups) have no backprop in "
            "simdev");
  frame(&f, BP_INPUT);
  f.rbufs[0].dtype = F64;
  FF_EXPECT(h, f, INVAL, "result dx must be f32 like dy, got f64");
  prefix = "simdev_conv2d_backprop_filter: ";
  h = simdev_xla_conv2d_backprop_filter;
  frame(&f, BP_FILTER);
  f.rdims[0][2] = 1, f.rdims[0][3] = 6, f.adims[1][3] = 6; /* 3 groups */
  FF_EXPECT(h, f, UNIMPL, "grouped convolutions (3 groups) have no backprop");
  frame(&f, BP_FILTER);
  f.adims[1][3] = 5;
  FF_EXPECT(h, f, INVAL, "operand dy must have shape [1,5,5,4], got [1,5,5,5]");
  frame(&f, BP_FILTER);
  f.rbufs[0].rank = 3;
  FF_EXPECT(h, f, INVAL, "result dw must have rank 4 (x's), got 3");
  assert_int_equal(ff_live_errors(), 0);
  assert_int_equal(ff_live_futures(), 0);
}

int main(int argc, char** argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(conv_results),
      cmocka_unit_test(backprop_input_results),
      cmocka_unit_test(backprop_filter_results),
      cmocka_unit_test(conv_errors),
  };
  return cmocka_run_group_tests_name("xla_conv", tests, NULL,
                                     ff_teardown_shutdown);
}
