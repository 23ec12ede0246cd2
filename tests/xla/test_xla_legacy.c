/*
 * test_xla_legacy.c - simdev_xla_legacy_matmul (src/xla/legacy.c), the
 * target in XLA's legacy custom-call convention, called the way XLA:CPU
 * calls a version-3 target: fn(out, in, opaque, opaque_len, status). No
 * XLA, no Python. Products against a naive loop (float32 and float64, zero
 * sizes), opaque taken by length (not NUL-terminated), and every kind of bad
 * opaque: reported on stderr, the result left untouched, nothing read or
 * written out of bounds (the ASan and valgrind runs check that).
 *
 *   build/tests/xla/test_xla_legacy [test-name filter]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakeffi.h"

/* Calls the target with opaque (its length without a NUL) and returns what
 * it wrote on stderr (static buffer). */
static const char* call(void* out, const void** in, const char* opaque,
                        size_t len) {
  static char text[1024];
  fflush(stderr);
  FILE* tmp = tmpfile();
  assert_non_null(tmp);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(fileno(tmp), 2) >= 0);
  simdev_xla_legacy_matmul(out, in, opaque, len, NULL);
  fflush(stderr);
  assert_true(dup2(saved, 2) >= 0);
  close(saved);
  rewind(tmp);
  size_t n = fread(text, 1, sizeof(text) - 1, tmp);
  text[n] = '\0';
  fclose(tmp);
  return text;
}

static double get(const void* p, int f64, int64_t i) {
  return f64 ? ((const double*)p)[i] : ((const float*)p)[i];
}
static void set(void* p, int f64, int64_t i, double v) {
  if (f64)
    ((double*)p)[i] = v;
  else
    ((float*)p)[i] = (float)v;
}

/* c = a x b for one shape and type, against a naive loop in double within
 * 2 gamma_k (|a| x |b|) + tiny. */
static void check_product(int64_t m, int64_t k, int64_t n, int f64) {
  size_t es = f64 ? 8 : 4;
  void* a = malloc((size_t)(m * k) * es + 1);
  void* b = malloc((size_t)(k * n) * es + 1);
  void* c = malloc((size_t)(m * n) * es + 1);
  assert_true(a && b && c);
  unsigned seed = (unsigned)(m * 131 + k * 17 + n);
  for (int64_t i = 0; i < m * k; i++)
    set(a, f64, i, (double)(rand_r(&seed) % 2001 - 1000) / 1000.);
  for (int64_t i = 0; i < k * n; i++)
    set(b, f64, i, (double)(rand_r(&seed) % 2001 - 1000) / 1000.);
  for (int64_t i = 0; i < m * n; i++) set(c, f64, i, NAN); /* must go */
  char opaque[96];
  int len =
      snprintf(opaque, sizeof(opaque), "m=%lld,k=%lld,n=%lld,dtype=%s",
               (long long)m, (long long)k, (long long)n, f64 ? "f64" : "f32");
  const void* in[2] = {a, b};
  assert_string_equal(call(c, in, opaque, (size_t)len), "");
  double u = f64 ? ldexp(1, -53) : ldexp(1, -24);
  double kk = (double)(k > 0 ? k : 1);
  double gamma = kk * u / (1 - kk * u);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double want = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        double t = get(a, f64, i * k + p) * get(b, f64, p * n + j);
        want += t;
        mag += fabs(t);
      }
      double got = get(c, f64, i * n + j);
      assert_false(isnan(got));
      if (fabs(got - want) > 2 * gamma * mag + 1e-30) {
        fail_msg("m=%lld k=%lld n=%lld f64=%d: c[%lld,%lld] = %g, want %g",
                 (long long)m, (long long)k, (long long)n, f64, (long long)i,
                 (long long)j, got, want);
      }
    }
  free(a);
  free(b);
  free(c);
}

static void products(void** state) {
  /* 200 x 150 x 100 is past sa_gemm's parallel threshold: row blocks on
   * the pool's threads next to the calling one. */
  static const int64_t shapes[][3] = {{1, 1, 1},      {3, 4, 5}, {17, 33, 9},
                                      {70, 130, 65},  {3, 0, 4}, {1, 300, 1},
                                      {200, 150, 100}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
    for (int f64 = 0; f64 < 2; f64++)
      check_product(shapes[s][0], shapes[s][1], shapes[s][2], f64);
}

/* An empty result is not written; an empty contraction writes zeros. */
static void zero_sizes(void** state) {
  float c[4] = {7, 7, 7, 7};
  const void* in[2] = {NULL, NULL};
  assert_string_equal(call(c, in, "m=0,k=3,n=4,dtype=f32", 21), "");
  assert_string_equal(call(c, in, "m=2,k=3,n=0,dtype=f32", 21), "");
  for (int i = 0; i < 4; i++) assert_true(c[i] == 7);
  assert_string_equal(call(c, in, "m=2,k=0,n=2,dtype=f32", 21), "");
  for (int i = 0; i < 4; i++) assert_true(c[i] == 0);
}

/* opaque is taken by its length: bytes after it are never read. */
static void opaque_by_length(void** state) {
  float a[2] = {1, 2}, b[2] = {3, 4}, c[1] = {0};
  const void* in[2] = {a, b};
  const char* text = "m=1,k=2,n=1,dtype=f32 and more";
  assert_string_equal(call(c, in, text, 21), "");
  assert_true(c[0] == 11);
  /* One byte short: "dtype=f3" is an error. */
  const char* err = call(c, in, text, 20);
  assert_non_null(strstr(err, "dtype must be f32 or f64, got 'f3'"));
}

static void bad_opaques(void** state) {
  static const struct {
    const char* opaque;
    const char* why;
  } cases[] = {
      {"", "opaque is empty"},
      {"m=2,k=3,n=4,dtype=s32", "dtype must be f32 or f64, got 's32'"},
      {"m=2,k=3", "expected ',' after k=3"},
      {"m=2", "expected ',' after m=2"},
      {"m=-1,k=3,n=4,dtype=f32", "m needs a decimal size"},
      {"m=,k=3,n=4,dtype=f32", "m needs a decimal size"},
      {"k=3,m=2,n=4,dtype=f32", "expected 'm='"},
      {"m=2,k=3,n=4,type=f32", "expected 'dtype=' after n"},
      {"m=2,k=3,n=4,dtype=f32,", "dtype must be f32 or f64, got 'f32,'"},
      {"m=2,k=99999999999,n=4,dtype=f32", "k is larger than 2147483647"},
      {"m=2147483647,k=2147483647,n=2147483647,dtype=f64",
       "the operands' byte sizes overflow int64"},
  };
  float c[4] = {5, 5, 5, 5};
  float a[8] = {0}, b[8] = {0};
  const void* in[2] = {a, b};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char* err = call(c, in, cases[i].opaque, strlen(cases[i].opaque));
    if (strstr(err, cases[i].why) == NULL ||
        strncmp(err, "simdev_legacy_matmul: bad opaque \"", 34) != 0 ||
        strstr(err, "the result is left unwritten") == NULL)
      fail_msg("opaque \"%s\": got \"%s\", want \"%s\"", cases[i].opaque, err,
               cases[i].why);
    for (int j = 0; j < 4; j++) assert_true(c[j] == 5);
  }
  /* A NULL opaque and non-printable bytes are reported, not read past. */
  assert_non_null(strstr(call(c, in, NULL, 0), "opaque is empty"));
  const char bin[3] = {'m', '\n', '\x01'};
  assert_non_null(strstr(call(c, in, bin, 3), "bad opaque \"m??\""));
  /* ... in the dtype's part too: a NUL there used to end the shown value
   * early ("got 'f'"), hiding the rest. */
  const char nul[] =
      "m=2,k=3,n=4,dtype=f\0"
      "32\x7f";
  const char* err = call(c, in, nul, sizeof(nul) - 1);
  assert_non_null(strstr(err, "dtype must be f32 or f64, got 'f?32?'"));
  assert_non_null(strstr(err, "bad opaque \"m=2,k=3,n=4,dtype=f?32?\""));
  for (int j = 0; j < 4; j++) assert_true(c[j] == 5);
}

/* Buffers XLA never passes, but the target must not crash on. */
static void missing_buffers(void** state) {
  float c[4] = {5, 5, 5, 5};
  const void* in[2] = {NULL, NULL};
  assert_non_null(strstr(call(c, in, "m=2,k=3,n=2,dtype=f32", 21),
                         "XLA passed no operand buffers"));
  assert_non_null(strstr(call(c, NULL, "m=2,k=3,n=2,dtype=f32", 21),
                         "XLA passed no operand buffers"));
  assert_non_null(strstr(call(NULL, in, "m=2,k=3,n=2,dtype=f32", 21),
                         "XLA passed no result buffer"));
  for (int j = 0; j < 4; j++) assert_true(c[j] == 5);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(products),         cmocka_unit_test(zero_sizes),
      cmocka_unit_test(opaque_by_length), cmocka_unit_test(bad_opaques),
      cmocka_unit_test(missing_buffers),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
