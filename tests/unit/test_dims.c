/*
 * test_dims.c - src/arith/dims.c without TensorFlow: the check every
 * shape passes before a kernel hands it to TF (sa_dims_check follows
 * TensorShape's rule: dims >= 0, the running product within int64, so
 * [0, 2**62, 4] is valid and [2**62, 4, 0] is not; bytes within INT64_MAX),
 * the overflow-checked add/mul, strides of empty shapes, the shape string.
 * That each kernel calls it is the sweep's "huge dims" cases'
 * (tests/sweep/specs*.py, Spec.huge).
 */
#define _GNU_SOURCE 1 /* the value CMake defines: no redefinition warning */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h relies on the headers above. */
#include <cmocka.h>

#include "device_sim/sim.h"
#include "arith/dims.h"

#define P62 ((int64_t)1 << 62)
#define P32 ((int64_t)1 << 32)

/* sa_dims_check's code for d (n and msg checked when ok / given). */
static int check(const int64_t* d, int nd, size_t es, int64_t* n, char* msg,
                 size_t len) {
  *n = -7; /* must stay untouched on failure */
  return sa_dims_check(d, nd, es, n, msg, len);
}

static void counts(void** state) {
  (void)state;
  int64_t n;
  char msg[256];
  assert_int_equal(check(NULL, 0, 4, &n, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(n, 1); /* a scalar */
  int64_t a[] = {2, 3, 4};
  assert_int_equal(check(a, 3, 8, &n, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(n, 24);
  int64_t big[] = {P32 - 1, P32 + 1}; /* 2**64 - 1 > INT64_MAX */
  assert_int_equal(check(big, 2, 0, &n, msg, sizeof(msg)), SIM_EINVAL);
  assert_int_equal(n, -7);
  assert_string_equal(msg,
                      "Shape [4294967295,4294967297] would have more than "
                      "2**63 - 1 elements");
  int64_t edge[] = {INT64_MAX}; /* exactly the limit: valid, bytes not */
  assert_int_equal(check(edge, 1, 0, &n, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(n, INT64_MAX);
  assert_int_equal(check(edge, 1, 1, &n, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(check(edge, 1, 2, &n, msg, sizeof(msg)), SIM_ENOMEM);
  assert_non_null(strstr(msg, "more than 2**63 - 1 bytes"));
  assert_non_null(strstr(msg, "[9223372036854775807]"));
}

static void zeros_follow_tf(void** state) {
  (void)state;
  int64_t n;
  char msg[256];
  int64_t lead[] = {0, P62, 4}; /* 0 first: every later product is 0 */
  assert_int_equal(check(lead, 3, 4, &n, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(n, 0);
  int64_t late[] = {P62, 4, 0}; /* overflows before the 0: TF refuses it */
  assert_int_equal(check(late, 3, 4, &n, msg, sizeof(msg)), SIM_EINVAL);
  assert_non_null(strstr(msg, "[4611686018427387904,4,0]"));
  int64_t mid[] = {P32, P32, 0, 1}; /* 2**64 wraps to 0 unchecked */
  assert_int_equal(check(mid, 4, 1, &n, msg, sizeof(msg)), SIM_EINVAL);
  int64_t fits[] = {P62, 0, P62}; /* 2**62, then 0: fine */
  assert_int_equal(check(fits, 3, 16, &n, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(n, 0);
}

static void negatives(void** state) {
  (void)state;
  int64_t n;
  char msg[256];
  int64_t d[] = {2, -1, 0};
  assert_int_equal(check(d, 3, 4, &n, msg, sizeof(msg)), SIM_EINVAL);
  assert_int_equal(n, -7);
  assert_string_equal(msg, "Dimension 1 of shape [2,-1,0] is -1: must be >= 0");
  int64_t first[] = {INT64_MIN};
  assert_int_equal(check(first, 1, 0, &n, msg, sizeof(msg)), SIM_EINVAL);
  /* No message buffer: still refused. */
  assert_int_equal(sa_dims_check(d, 3, 4, &n, NULL, 0), SIM_EINVAL);
  /* A short buffer is cut, NUL-terminated. */
  char small[10];
  memset(small, 'x', sizeof(small));
  assert_int_equal(check(d, 3, 4, &n, small, sizeof(small)), SIM_EINVAL);
  assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void bytes(void** state) {
  (void)state;
  int64_t n;
  char msg[256];
  int64_t d[] = {(int64_t)1 << 61}; /* 2**61 floats: 2**63 bytes */
  assert_int_equal(check(d, 1, 2, &n, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(check(d, 1, 4, &n, msg, sizeof(msg)), SIM_ENOMEM);
  assert_non_null(strstr(msg, "4-byte elements"));
  assert_int_equal(check(d, 1, 0, &n, msg, sizeof(msg)), SIM_OK);
  int64_t e[] = {0, P62};
  assert_int_equal(check(e, 2, SIZE_MAX, &n, msg, sizeof(msg)), SIM_ENOMEM);
}

static void add_mul(void** state) {
  (void)state;
  int64_t r = 0;
  assert_true(sa_add_ok(P62, P62 - 1, &r));
  assert_true(r == INT64_MAX);
  assert_false(sa_add_ok(P62, P62, &r)); /* Pad [[2**62, 2**62]] */
  assert_false(sa_add_ok(INT64_MAX, 1, &r));
  assert_false(sa_mul_ok(P32 - 1, P32 + 1, &r));
  assert_true(sa_mul_ok(P32, P32 / 2 - 1, &r));
  assert_true(r == INT64_MAX - P32 + 1); /* 2**63 - 2**32 */
  assert_true(sa_mul_ok(0, INT64_MAX, &r) && r == 0);
  assert_false(sa_mul_ok(4, P62, &r)); /* Tile of [4, 0] by [2**62, 1] */
}

static void strides(void** state) {
  (void)state;
  int64_t st[4];
  int64_t d[] = {2, 3, 4};
  sa_dims_strides(d, 3, st);
  assert_true(st[0] == 12 && st[1] == 4 && st[2] == 1);
  int64_t e[] = {0, P62, 4}; /* its suffix product 2**64 must not be formed */
  memset(st, 0x55, sizeof(st));
  sa_dims_strides(e, 3, st);
  assert_true(st[0] == 0 && st[1] == 0 && st[2] == 0);
  sa_dims_strides(NULL, 0, st); /* a scalar: nothing written */
}

static void strings(void** state) {
  (void)state;
  char b[32];
  int64_t d[] = {1, -2, 3};
  assert_string_equal(sa_dims_str(d, 3, b, sizeof(b)), "[1,-2,3]");
  assert_string_equal(sa_dims_str(NULL, 0, b, sizeof(b)), "[]");
  char tiny[5];
  assert_string_equal(sa_dims_str(d, 3, tiny, sizeof(tiny)), "[1,-");
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(counts),    cmocka_unit_test(zeros_follow_tf),
      cmocka_unit_test(negatives), cmocka_unit_test(bytes),
      cmocka_unit_test(add_mul),   cmocka_unit_test(strides),
      cmocka_unit_test(strings),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
