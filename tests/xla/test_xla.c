/*
 * test_xla.c - libsimdev_xla.so's handlers through a hand-built XLA FFI
 * (fakeffi.h), no XLA, no Python: the metadata handshake of every
 * handler; matmul, matmul_bias_act, relu, relu_grad and empty against
 * naive C references (float32 and float64, zero sizes, batch dims,
 * transposes, every activation); every validation error with its code and
 * message. Convolutions: test_xla_conv.c; async, SIMDEV_SYNC, worker
 * errors, settings and shutdown: test_xla_runtime.c.
 *
 *   build/tests/xla/test_xla [test-name filter]
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

static size_t esize(XLA_FFI_DataType dt) {
  return dt == F32 ? 4 : 8;
}
static double unit_roundoff(XLA_FFI_DataType dt) {
  return dt == F32 ? ldexp(1, -24) : ldexp(1, -53);
}

/* Every handler, by name, for the handshake and the common checks. */
static const struct {
  const char* name;
  XLA_FFI_Handler* h;
} handlers[] = {
    {"simdev_matmul", simdev_xla_matmul},
    {"simdev_matmul_bias_act", simdev_xla_matmul_bias_act},
    {"simdev_conv2d", simdev_xla_conv2d},
    {"simdev_conv2d_backprop_input", simdev_xla_conv2d_backprop_input},
    {"simdev_conv2d_backprop_filter", simdev_xla_conv2d_backprop_filter},
    {"simdev_relu", simdev_xla_relu},
    {"simdev_relu_grad", simdev_xla_relu_grad},
    {"simdev_empty", simdev_xla_empty},
};
#define NHANDLERS (sizeof(handlers) / sizeof(handlers[0]))

static void handshake(void** state) {
  for (size_t i = 0; i < NHANDLERS; i++) {
    int major, minor;
    uint32_t traits;
    int64_t type_id;
    assert_true(ff_metadata(handlers[i].h, &major, &minor, &traits, &type_id));
    assert_int_equal(major, XLA_FFI_API_MAJOR);
    assert_int_equal(minor, XLA_FFI_API_MINOR);
    assert_int_equal(traits, 0xa5a5u); /* untouched */
    assert_int_equal(type_id, 77);
  }
  assert_int_equal(ff_live_errors(), 0);
}

/* ---- matmul ---------------------------------------------------------------
 */

/* The naive product of batch element bi, and the bound on its rounding
 * error: (k + 2) u sum |a||b| (the GEMM's sum in the type), with the
 * reference itself in long double. */
static void mm_ref(XLA_FFI_DataType dt, const void* a, const void* b,
                   int64_t bi, int64_t m, int64_t n, int64_t k, bool ta,
                   bool tb, int64_t i, int64_t j, long double* ref,
                   double* bound) {
  long double s = 0, abs = 0;
  for (int64_t p = 0; p < k; p++) {
    int64_t ai = bi * m * k + (ta ? p * m + i : i * k + p);
    int64_t bj = bi * k * n + (tb ? j * k + p : p * n + j);
    long double t = (long double)ff_get(a, dt, ai) * ff_get(b, dt, bj);
    s += t;
    abs += fabsl(t);
  }
  *ref = s;
  *bound = (double)((k + 2) * unit_roundoff(dt) * abs);
}

static double act_ref(const char* act, double x, float alpha) {
  if (!strcmp(act, "none")) return x;
  if (!strcmp(act, "relu")) return x < 0 ? 0 : x;
  if (!strcmp(act, "relu6")) return x < 0 ? 0 : x > 6 ? 6 : x;
  if (!strcmp(act, "elu")) return x < 0 ? expm1(x) : x;
  if (!strcmp(act, "leaky_relu")) return x > 0 ? x : x * (double)alpha;
  if (!strcmp(act, "tanh")) return tanh(x);
  if (!strcmp(act, "sigmoid")) return 1 / (1 + exp(-x));
  fail_msg("unknown activation %s", act);
  return 0;
}

/* One matmul (act NULL) or matmul_bias_act call with batch dims bd[nb],
 * checked element by element against the reference. */
static void check_matmul(XLA_FFI_DataType dt, const int64_t* bd, int nb,
                         int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                         const char* act) {
  int64_t batch = 1;
  for (int i = 0; i < nb; i++) batch *= bd[i];
  size_t es = esize(dt);
  void* a = malloc((size_t)(batch * m * k) * es + 8);
  void* b = malloc((size_t)(batch * k * n) * es + 8);
  void* bias = malloc((size_t)(batch * n) * es + 8);
  void* c = malloc((size_t)(batch * m * n) * es + 8);
  uint64_t seed = (uint64_t)(m * 1000003 + n * 1009 + k);
  ff_fill(a, dt, batch * m * k, &seed);
  ff_fill(b, dt, batch * k * n, &seed);
  ff_fill(bias, dt, batch * n, &seed);
  memset(c, 0x7f, (size_t)(batch * m * n) * es); /* garbage, not zeros */
  int64_t da[10], db[10], dbias[10], dc[10];
  for (int i = 0; i < nb; i++) da[i] = db[i] = dbias[i] = dc[i] = bd[i];
  da[nb] = ta ? k : m, da[nb + 1] = ta ? m : k;
  db[nb] = tb ? n : k, db[nb + 1] = tb ? k : n;
  dbias[nb] = n;
  dc[nb] = m, dc[nb + 1] = n;
  ff_frame f;
  ff_init(&f);
  ff_arg(&f, dt, a, nb + 2, da);
  ff_arg(&f, dt, b, nb + 2, db);
  if (act) ff_arg(&f, dt, bias, nb + 1, dbias);
  ff_ret(&f, dt, c, nb + 2, dc);
  ff_attr_bool(&f, "transpose_b", tb); /* any order: ff_call sorts */
  ff_attr_bool(&f, "transpose_a", ta);
  const float alpha = 0.25f;
  if (act) {
    ff_attr_f32(&f, "alpha", alpha);
    ff_attr_str(&f, "activation", act);
  }
  ff_result r =
      ff_call(act ? simdev_xla_matmul_bias_act : simdev_xla_matmul, &f);
  if (r.code != XLA_FFI_Error_Code_OK) fail_msg("%s", r.msg);
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        long double ref;
        double bound;
        mm_ref(dt, a, b, bi, m, n, k, ta, tb, i, j, &ref, &bound);
        if (act) { /* every activation is 1-Lipschitz */
          double bv = ff_get(bias, dt, bi * n + j);
          double pre = (double)(ref + bv);
          bound += unit_roundoff(dt) * (fabs(pre) + 1) * 8;
          ref = act_ref(act, pre, alpha);
        }
        double got = ff_get(c, dt, (bi * m + i) * n + j);
        if (!(fabs(got - (double)ref) <= bound))
          fail_msg(
              "%s %s batch %d m=%d n=%d k=%d ta=%d tb=%d at [%d,%d,%d]: "
              "got %.17g, want %.17g (bound %.3g)",
              act ? act : "matmul", dt == F32 ? "f32" : "f64", (int)batch,
              (int)m, (int)n, (int)k, ta, tb, (int)bi, (int)i, (int)j, got,
              (double)ref, bound);
      }
  free(a), free(b), free(bias), free(c);
}

static void matmul_results(void** state) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {3, 5, 7}, {0, 4, 3},
                                      {4, 0, 3},   {4, 3, 0}, {17, 33, 65},
                                      {64, 64, 64}};
  static const int64_t bds[][2] = {{0, 0}, {2, 0}, {2, 3}};
  static const int nbs[] = {0, 1, 2};
  for (int dti = 0; dti < 2; dti++)
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
      for (int b = 0; b < 3; b++)
        for (int t = 0; t < 4; t++)
          check_matmul(dti ? F64 : F32, bds[b], nbs[b], shapes[s][0],
                       shapes[s][1], shapes[s][2], t & 1, t & 2, NULL);
  /* Large enough for sa_gemm to split rows over the pool. */
  if (ff_scale() == 1)
    for (int t = 0; t < 4; t++)
      check_matmul(F32, NULL, 0, 300, 130, 120, t & 1, t & 2, NULL);
  static const int64_t zb[] = {0};
  check_matmul(F32, zb, 1, 3, 4, 5, false, false, NULL); /* batch of 0 */
}

static void matmul_bias_act_results(void** state) {
  static const char* acts[] = {"none",       "relu", "relu6",  "elu",
                               "leaky_relu", "tanh", "sigmoid"};
  static const int64_t bd[] = {2};
  for (int dti = 0; dti < 2; dti++)
    for (int a = 0; a < 7; a++) {
      XLA_FFI_DataType dt = dti ? F64 : F32;
      check_matmul(dt, NULL, 0, 5, 6, 7, false, false, acts[a]);
      check_matmul(dt, bd, 1, 9, 4, 3, true, true, acts[a]);
      check_matmul(dt, NULL, 0, 3, 4, 0, false, true, acts[a]); /* act(bias) */
      check_matmul(dt, NULL, 0, 0, 4, 2, false, false, acts[a]);
    }
}

/* ---- relu, relu_grad, empty ------------------------------------------------
 */

static void check_relu(XLA_FFI_DataType dt, int rank, const int64_t* dims,
                       bool grad) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  size_t es = esize(dt);
  void* x = malloc((size_t)n * es + 8);
  void* dy = malloc((size_t)n * es + 8);
  void* y = malloc((size_t)n * es + 8);
  uint64_t seed = (uint64_t)n;
  ff_fill(x, dt, n, &seed);
  ff_fill(dy, dt, n, &seed);
  if (n > 2) { /* the edges: x == 0 and x == -0 give 0 */
    if (dt == F32)
      ((float*)x)[0] = 0.f, ((float*)x)[1] = -0.f;
    else
      ((double*)x)[0] = 0., ((double*)x)[1] = -0.;
  }
  memset(y, 0x7f, (size_t)n * es);
  ff_frame f;
  ff_init(&f);
  if (grad) ff_arg(&f, dt, dy, rank, dims);
  ff_arg(&f, dt, x, rank, dims);
  ff_ret(&f, dt, y, rank, dims);
  ff_result r = ff_call(grad ? simdev_xla_relu_grad : simdev_xla_relu, &f);
  if (r.code != XLA_FFI_Error_Code_OK) fail_msg("%s", r.msg);
  for (int64_t i = 0; i < n; i++) {
    double xv = ff_get(x, dt, i);
    double want = grad ? (xv > 0 ? ff_get(dy, dt, i) : 0) : (xv < 0 ? 0 : xv);
    if (ff_get(y, dt, i) != want)
      fail_msg("%s at %d: got %g want %g", grad ? "relu_grad" : "relu", (int)i,
               ff_get(y, dt, i), want);
  }
  free(x), free(dy), free(y);
}

static void relu_results(void** state) {
  static const int64_t d0[1] = {0}, d1[1] = {7}, d3[3] = {2, 0, 5},
                       d4[4] = {2, 3, 4, 5}, big[1] = {100000};
  for (int g = 0; g < 2; g++)
    for (int dti = 0; dti < 2; dti++) {
      XLA_FFI_DataType dt = dti ? F64 : F32;
      check_relu(dt, 0, NULL, g); /* a scalar */
      check_relu(dt, 1, d0, g);
      check_relu(dt, 1, d1, g);
      check_relu(dt, 3, d3, g);
      check_relu(dt, 4, d4, g);
      check_relu(dt, 1, big, g); /* over the pool */
    }
}

static void empty_result(void** state) {
  float out = NAN;
  ff_frame f;
  ff_init(&f);
  ff_ret(&f, F32, &out, 0, NULL);
  ff_result r = ff_call(simdev_xla_empty, &f);
  assert_int_equal(r.code, XLA_FFI_Error_Code_OK);
  assert_true(out == 0.f);
}

/* ---- validation ------------------------------------------------------------
 */

/* A valid matmul frame a [2,3] x b [3,4] -> c [2,4] (f32); tests break it. */
static float A[64], B[64], C[64], BIAS[64];
static void mm_frame(ff_frame* f, bool fused) {
  static const int64_t da[] = {2, 3}, db[] = {3, 4}, dc[] = {2, 4},
                       dbias[] = {4};
  ff_init(f);
  ff_arg(f, F32, A, 2, da);
  ff_arg(f, F32, B, 2, db);
  if (fused) ff_arg(f, F32, BIAS, 1, dbias);
  ff_ret(f, F32, C, 2, dc);
  ff_attr_bool(f, "transpose_a", false);
  ff_attr_bool(f, "transpose_b", false);
  if (fused) {
    ff_attr_str(f, "activation", "relu");
    ff_attr_f32(f, "alpha", 0.2f);
  }
}

static void matmul_errors(void** state) {
  const char* prefix = "simdev_matmul: ";
  XLA_FFI_Handler* h = simdev_xla_matmul;
  ff_frame f;
  mm_frame(&f, false);
  assert_int_equal(ff_call(h, &f).code, XLA_FFI_Error_Code_OK); /* valid */

  mm_frame(&f, false);
  f.abufs[0].dtype = XLA_FFI_DataType_S32;
  FF_EXPECT(h, f, INVAL, "operand a must be float32 or float64, got s32");
  mm_frame(&f, false);
  f.abufs[1].dtype = F64;
  FF_EXPECT(h, f, INVAL, "operand b must be f32 like a, got f64");
  mm_frame(&f, false);
  f.rbufs[0].dtype = XLA_FFI_DataType_BF16;
  FF_EXPECT(h, f, INVAL, "result c must be f32 like a, got bf16");
  mm_frame(&f, false);
  f.abufs[0].rank = 1;
  FF_EXPECT(h, f, INVAL, "operand a must have rank >= 2, got 1");
  mm_frame(&f, false);
  f.abufs[1].rank = 3, f.adims[1][2] = 1;
  FF_EXPECT(h, f, INVAL, "operand b must have rank 2 (a's), got 3");
  mm_frame(&f, false);
  f.rbufs[0].rank = 3;
  FF_EXPECT(h, f, INVAL, "result c must have rank 2 (a's), got 3");
  mm_frame(&f, false);
  f.adims[1][0] = 5;
  FF_EXPECT(h, f, INVAL,
            "contracting dims differ: operand a has k = 3 (axis 1)"
            ", operand b has 5 (axis 0)");
  mm_frame(&f, false);
  f.rdims[0][1] = 5;
  FF_EXPECT(h, f, INVAL, "result c must have shape [2,4], got [2,5]");
  mm_frame(&f, false);
  f.adims[0][0] = -1;
  FF_EXPECT(h, f, INVAL, "operand a has a negative dim -1 (axis 0)");
  mm_frame(&f, false);
  f.abufs[1].data = NULL;
  FF_EXPECT(h, f, INVAL, "operand b has 12 elements but no data");
  mm_frame(&f, false);
  f.adims[0][0] = (int64_t)1 << 62, f.adims[0][1] = 4;
  FF_EXPECT(h, f, INVAL, "operand a has more elements than int64 counts");
  mm_frame(&f, false);
  f.abufs[0].rank = 33;
  FF_EXPECT(h, f, UNIMPL, "operand a has rank 33; simdev takes 0 to 32");
  /* Batch dims. */
  {
    static const int64_t da[] = {2, 2, 3}, db[] = {3, 3, 4}, dc[] = {2, 2, 4};
    ff_init(&f);
    ff_arg(&f, F32, A, 3, da);
    ff_arg(&f, F32, B, 3, db);
    ff_ret(&f, F32, C, 3, dc);
    ff_attr_bool(&f, "transpose_a", false);
    ff_attr_bool(&f, "transpose_b", false);
    FF_EXPECT(h, f, INVAL,
              "operand b must have the batch dims [2] of operand a, "
              "got [3]");
  }
  /* Sizes past OpenBLAS's int (the buffers are never touched). */
  {
    static const int64_t da[] = {(int64_t)1 << 31, 0}, db[] = {0, 4},
                         dc[] = {(int64_t)1 << 31, 4}; /* never written */
    ff_init(&f);
    ff_arg(&f, F32, A, 2, da);
    ff_arg(&f, F32, B, 2, db);
    ff_ret(&f, F32, C, 2, dc);
    ff_attr_bool(&f, "transpose_a", false);
    ff_attr_bool(&f, "transpose_b", false);
    FF_EXPECT(h, f, UNIMPL,
              "m = 2147483648, n = 4, k = 0: simdev's GEMM "
              "(OpenBLAS) takes sizes up to 2147483647");
  }
  /* Attributes. */
  mm_frame(&f, false);
  ff_attr_remove(&f, "transpose_a");
  FF_EXPECT(h, f, INVAL, "attribute 'transpose_a' missing");
  mm_frame(&f, false);
  ff_attr_remove(&f, "transpose_b");
  ff_attr_i64(&f, "transpose_b", 1);
  FF_EXPECT(h, f, INVAL,
            "attribute 'transpose_b' must be a bool (pred) scalar, "
            "got s64 scalar");
  mm_frame(&f, false);
  ff_attr_remove(&f, "transpose_b");
  ff_attr_str(&f, "transpose_b", "yes");
  FF_EXPECT(h, f, INVAL,
            "attribute 'transpose_b' must be a bool (pred) scalar, "
            "got a string");
  mm_frame(&f, false);
  ff_attr_bool(&f, "transpose", true);
  FF_EXPECT(h, f, INVAL, "unexpected attribute 'transpose'");
  /* The frame itself. */
  mm_frame(&f, false);
  ff_arg(&f, F32, A, 0, NULL);
  FF_EXPECT(h, f, INVAL, "expected 2 operands and 1 result, got 3 and 1");
  mm_frame(&f, false);
  f.nrets = 0;
  FF_EXPECT(h, f, INVAL, "expected 2 operands and 1 result, got 2 and 0");
  mm_frame(&f, false);
  f.atypes[1] = (XLA_FFI_ArgType)7;
  FF_EXPECT(h, f, INVAL, "operand 1 is not a buffer");
  mm_frame(&f, false);
  f.cf.stage = XLA_FFI_ExecutionStage_INSTANTIATE;
  FF_EXPECT(h, f, INVAL, "called for execution stage 0, expected execute (3)");
  mm_frame(&f, false);
  f.cf.struct_size = 16;
  FF_EXPECT(h, f, INVAL, "call frame of 16 bytes");
  assert_int_equal(ff_live_errors(), 0);
  assert_int_equal(ff_live_futures(), 0);
}

static void matmul_bias_act_errors(void** state) {
  const char* prefix = "simdev_matmul_bias_act: ";
  XLA_FFI_Handler* h = simdev_xla_matmul_bias_act;
  ff_frame f;
  mm_frame(&f, true);
  assert_int_equal(ff_call(h, &f).code, XLA_FFI_Error_Code_OK);
  mm_frame(&f, true);
  f.abufs[2].dtype = F64;
  FF_EXPECT(h, f, INVAL, "operand bias must be f32 like a, got f64");
  mm_frame(&f, true);
  f.adims[2][0] = 3;
  FF_EXPECT(h, f, INVAL, "operand bias must have shape [4], got [3]");
  mm_frame(&f, true);
  f.abufs[2].rank = 2, f.adims[2][1] = 1;
  FF_EXPECT(h, f, INVAL, "operand bias must have rank 1 (a's minus 1), got 2");
  mm_frame(&f, true);
  ff_attr_remove(&f, "activation");
  ff_attr_str(&f, "activation", "gelu");
  FF_EXPECT(h, f, INVAL,
            "attribute 'activation' must be one of none, relu, "
            "relu6, elu, leaky_relu, tanh, sigmoid, got 'gelu'");
  mm_frame(&f, true);
  ff_attr_remove(&f, "activation");
  ff_attr_str(&f, "activation", "relu6x"); /* a prefix is not a match */
  FF_EXPECT(h, f, INVAL, "got 'relu6x'");
  mm_frame(&f, true);
  ff_attr_remove(&f, "alpha");
  FF_EXPECT(h, f, INVAL, "attribute 'alpha' missing");
  mm_frame(&f, true);
  ff_attr_remove(&f, "alpha");
  double d = 0.2;
  ff_attr_array(&f, "alpha", F64, 1, &d, sizeof(d));
  FF_EXPECT(h, f, INVAL,
            "attribute 'alpha' must be an f32 scalar, got f64 "
            "array");
  mm_frame(&f, true);
  ff_attr_remove(&f, "activation");
  FF_EXPECT(h, f, INVAL, "attribute 'activation' missing");
  mm_frame(&f, true);
  ff_attr_remove(&f, "activation");
  ff_attr_i64(&f, "activation", 1);
  FF_EXPECT(h, f, INVAL,
            "attribute 'activation' must be a string, got s64 "
            "scalar");
  mm_frame(&f, false); /* two operands */
  ff_attr_str(&f, "activation", "relu");
  ff_attr_f32(&f, "alpha", 0.2f);
  FF_EXPECT(h, f, INVAL, "expected 3 operands and 1 result, got 2 and 1");
  assert_int_equal(ff_live_errors(), 0);
}

static void eltwise_errors(void** state) {
  static const int64_t d[] = {2, 3}, d2[] = {3, 2}, d3[] = {2, 3, 1};
  const char* prefix = "simdev_relu: ";
  ff_frame f;
  ff_init(&f);
  ff_arg(&f, F32, A, 2, d);
  ff_ret(&f, F32, C, 2, d2);
  FF_EXPECT(simdev_xla_relu, f, INVAL,
            "result y must have shape [2,3], got [3,2]");
  ff_init(&f);
  ff_arg(&f, F32, A, 2, d);
  ff_ret(&f, F32, C, 3, d3);
  FF_EXPECT(simdev_xla_relu, f, INVAL,
            "result y must have rank 2 (x's), got 3");
  ff_init(&f);
  ff_arg(&f, XLA_FFI_DataType_F16, A, 2, d);
  ff_ret(&f, XLA_FFI_DataType_F16, C, 2, d);
  FF_EXPECT(simdev_xla_relu, f, INVAL,
            "operand x must be float32 or float64, got f16");
  ff_init(&f);
  ff_arg(&f, F32, A, 2, d);
  ff_ret(&f, F32, C, 2, d);
  ff_attr_f32(&f, "alpha", 1);
  FF_EXPECT(simdev_xla_relu, f, INVAL, "unexpected attribute 'alpha'");

  prefix = "simdev_relu_grad: ";
  ff_init(&f);
  ff_arg(&f, F32, A, 2, d);
  ff_arg(&f, F32, B, 2, d2);
  ff_ret(&f, F32, C, 2, d);
  FF_EXPECT(simdev_xla_relu_grad, f, INVAL,
            "operand x must have shape [2,3], got [3,2]");
  ff_init(&f);
  ff_arg(&f, F32, A, 2, d);
  ff_arg(&f, F64, B, 2, d);
  ff_ret(&f, F32, C, 2, d);
  FF_EXPECT(simdev_xla_relu_grad, f, INVAL,
            "operand x must be f32 like dy, got f64");
  ff_init(&f);
  ff_arg(&f, F32, A, 2, d);
  ff_ret(&f, F32, C, 2, d);
  FF_EXPECT(simdev_xla_relu_grad, f, INVAL,
            "expected 2 operands and 1 result, got 1 and 1");

  prefix = "simdev_empty: ";
  double out64;
  float out;
  ff_init(&f);
  ff_ret(&f, F64, &out64, 0, NULL);
  FF_EXPECT(simdev_xla_empty, f, INVAL, "result must be f32, got f64");
  ff_init(&f);
  ff_ret(&f, F32, &out, 1, d);
  FF_EXPECT(simdev_xla_empty, f, INVAL, "result must have rank 0, got 1");
  ff_init(&f);
  ff_arg(&f, F32, &out, 0, NULL);
  ff_ret(&f, F32, &out, 0, NULL);
  FF_EXPECT(simdev_xla_empty, f, INVAL,
            "expected 0 operands and 1 result, got 1 and 1");
  assert_int_equal(ff_live_errors(), 0);
}

int main(int argc, char** argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(handshake),
      cmocka_unit_test(matmul_results),
      cmocka_unit_test(matmul_bias_act_results),
      cmocka_unit_test(relu_results),
      cmocka_unit_test(empty_result),
      cmocka_unit_test(matmul_errors),
      cmocka_unit_test(matmul_bias_act_errors),
      cmocka_unit_test(eltwise_errors),
  };
  return cmocka_run_group_tests_name("xla", tests, NULL, ff_teardown_shutdown);
}
