/*
 * test_ewprog.c - src/arith/ewprog.c without TensorFlow: the fusable-op
 * table, the program parser and its error messages, the N-input broadcast
 * plan, and the blockwise evaluator (block and range boundaries, gathers of
 * broadcast inputs, an output that is also an input). The numerics of each
 * op against TF and NumPy are tests/tf/test_kernels_fused_elementwise.py's.
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

#include "arith/ewops.h"
#include "arith/ewprog.h"

static void table(void** state) {
  (void)state;
  assert_int_equal(sa_ewprog_arity("Neg"), 1);
  assert_int_equal(sa_ewprog_arity("AddV2"), 2);
  assert_int_equal(sa_ewprog_arity("ReluGrad"), 2);
  assert_int_equal(sa_ewprog_arity("EluGrad"), 2);
  assert_int_equal(sa_ewprog_arity("Add"), -1); /* legacy name: not fused */
  assert_int_equal(sa_ewprog_arity("neg"), -1);
  assert_int_equal(sa_ewprog_arity("Neg "), -1);
  assert_int_equal(sa_ewprog_arity(""), -1);
  assert_int_equal(sa_ewprog_arity(NULL), -1);
  int n = sa_ewprog_count();
  assert_true(n >= 29);
  for (int i = 0; i < n; i++) {
    const char* name = sa_ewprog_name(i);
    assert_non_null(name);
    int a = sa_ewprog_arity(name);
    assert_true(a == 1 || a == 2);
    for (int j = 0; j < i; j++)
      assert_string_not_equal(sa_ewprog_name(j), name);
  }
  assert_null(sa_ewprog_name(n));
  assert_null(sa_ewprog_name(-1));
}

/* The fusable-op table is arith/ewops.h's rows, all of them, in order, with
 * their arities (ewprog.c expands the rows, so this holds by construction:
 * checked here so a change to that construction cannot drop a row). That
 * each row also has its unfused SIMDEV kernel is
 * tests/tf/test_kernels_fused_elementwise.py's test_ewops_row_registered. */
static void table_is_ewops(void** state) {
  (void)state;
  static const struct {
    const char* name;
    int arity;
  } rows[] = {
#define ROW_U(Op, stem, ints) {#Op, 1},
#define ROW_B(Op, stem, ints) {#Op, 2},
#define ROW_G(Op, stem, shape, in0, in1) {#Op, 2},
      SA_EWOPS(ROW_U, ROW_B, ROW_G)
#undef ROW_U
#undef ROW_B
#undef ROW_G
  };
  int n = (int)(sizeof(rows) / sizeof(rows[0]));
  assert_int_equal(sa_ewprog_count(), n);
  for (int i = 0; i < n; i++) {
    assert_string_equal(sa_ewprog_name(i), rows[i].name);
    assert_int_equal(sa_ewprog_arity(rows[i].name), rows[i].arity);
  }
}

static void parse_good(void** state) {
  (void)state;
  static sa_ewprog p;
  char err[300];
  assert_true(sa_ewprog_parse("$0 $1 Sub $2 Mul", 3, &p, err, sizeof(err)));
  assert_int_equal(p.nins, 5);
  assert_int_equal(p.nops, 2);
  assert_int_equal(p.max_depth, 2);
  assert_int_equal(p.ins[0].op, -1);
  assert_int_equal(p.ins[1].arg, 1);
  assert_true(p.ins[2].op >= 0);
  assert_true(sa_ewprog_parse("$0", 1, &p, err, sizeof(err)));
  assert_int_equal(p.nops, 0);
  assert_true(sa_ewprog_parse("$15 Neg", 16, &p, err, sizeof(err)));
}

/* The program fails to parse and the message contains `key`. */
static void bad(const char* program, int n, const char* key) {
  static sa_ewprog p;
  char err[300];
  assert_false(sa_ewprog_parse(program, n, &p, err, sizeof(err)));
  if (strstr(err, key) == NULL)
    fail_msg("'%s': got \"%s\", want \"%s\"", program, err, key);
}

static void parse_bad(void** state) {
  (void)state;
  bad("$0 Foo", 1, "token 1 'Foo' at byte 3: unknown op");
  bad("$0 $0", 1, "leaves 2 values");
  bad("$0 Sub", 1, "token 1 'Sub' at byte 3: stack underflow");
  bad("Neg", 1, "token 0 'Neg' at byte 0: stack underflow");
  bad("$1 Neg", 1, "input 1 out of range (N = 1)");
  bad("$ Neg", 1, "token 0 '$' at byte 0: not an input");
  bad("$-1 Neg", 1, "not an input");
  bad("$00 Neg", 1, "not an input");
  bad("$99999999999 Neg", 1, "not an input");
  bad("$0  Neg", 1, "empty token 1 at byte 3");
  bad(" $0", 1, "empty token 0 at byte 0");
  bad("$0 Neg ", 1, "empty token 2 at byte 7");
  bad("", 1, "empty program");
  bad("$0", 0, "N = 0 inputs");
  bad("$0", 17, "N = 17 inputs");
  char buf[SA_EWPROG_MAX_LEN + 64];
  strcpy(buf, "$0");
  for (int i = 0; i < 65; i++) strcat(buf, " Neg");
  bad(buf, 1, "token 65 'Neg' at byte 259: more than 64 ops");
  strcpy(buf, "$0");
  for (int i = 0; i < 16; i++) strcat(buf, " $0");
  bad(buf, 1, "token 16 '$0' at byte 48: stack deeper than 16");
  strcpy(buf, "$0");
  while (strlen(buf) <= SA_EWPROG_MAX_LEN) strcat(buf, " Abs");
  bad(buf, 1, "longer than the limit of 4096");
  /* a tiny error buffer is still terminated */
  static sa_ewprog p;
  char small[8];
  assert_false(sa_ewprog_parse("$0 Foo", 1, &p, small, sizeof(small)));
  assert_int_equal(strlen(small), 7);
}

static bool bcast(int nin, const int* rank,
                  const int64_t (*dims)[SA_EWPROG_MAX_DIMS], int* out_rank,
                  int64_t* out, sa_ewprog_plan* plan, int* a, int* b) {
  return sa_ewprog_broadcast(nin, rank, dims, out_rank, out, plan, a, b);
}

static void broadcast(void** state) {
  (void)state;
  static sa_ewprog_plan plan;
  int64_t out[SA_EWPROG_MAX_DIMS];
  int nd, a = -1, b = -1;
  /* [2,1,5,1] x [3,1,7] x [5,1] -> [2,3,5,7] */
  int rank[3] = {4, 3, 2};
  int64_t dims[3][SA_EWPROG_MAX_DIMS] = {{2, 1, 5, 1}, {3, 1, 7}, {5, 1}};
  assert_true(bcast(3, rank, (const int64_t(*)[SA_EWPROG_MAX_DIMS])dims, &nd,
                    out, &plan, &a, &b));
  assert_int_equal(nd, 4);
  assert_int_equal(out[0], 2);
  assert_int_equal(out[1], 3);
  assert_int_equal(out[2], 5);
  assert_int_equal(out[3], 7);
  assert_int_equal(plan.n, 210);
  assert_int_equal(plan.nd, 4); /* four different broadcast patterns */
  assert_false(plan.direct[0]);
  /* input 0 along dim 2 (size 5): stride 1; dim 0 (size 2): stride 5 */
  assert_int_equal(plan.s[0][0], 5);
  assert_int_equal(plan.s[0][1], 0);
  assert_int_equal(plan.s[0][2], 1);
  assert_int_equal(plan.s[0][3], 0);
  /* same shapes collapse to one dimension, direct */
  int r2[2] = {3, 3};
  int64_t d2[2][SA_EWPROG_MAX_DIMS] = {{2, 3, 4}, {2, 3, 4}};
  assert_true(bcast(2, r2, (const int64_t(*)[SA_EWPROG_MAX_DIMS])d2, &nd, out,
                    &plan, &a, &b));
  assert_int_equal(plan.nd, 1);
  assert_int_equal(plan.d[0], 24);
  assert_true(plan.direct[0] && plan.direct[1]);
  /* scalars: rank 0, one element */
  int r0[2] = {0, 0};
  int64_t d0[2][SA_EWPROG_MAX_DIMS] = {{0}, {0}};
  assert_true(bcast(2, r0, (const int64_t(*)[SA_EWPROG_MAX_DIMS])d0, &nd, out,
                    &plan, &a, &b));
  assert_int_equal(nd, 0);
  assert_int_equal(plan.n, 1);
  /* 0 against 1 is 0; 0 against 2 is incompatible */
  int r3[3] = {2, 1, 2};
  int64_t d3[3][SA_EWPROG_MAX_DIMS] = {{3, 0}, {1}, {2, 1}};
  assert_false(bcast(3, r3, (const int64_t(*)[SA_EWPROG_MAX_DIMS])d3, &nd, out,
                     &plan, &a, &b));
  assert_int_equal(a, 0);
  assert_int_equal(b, 2);
  d3[2][0] = 3;
  assert_true(bcast(3, r3, (const int64_t(*)[SA_EWPROG_MAX_DIMS])d3, &nd, out,
                    &plan, &a, &b));
  assert_int_equal(plan.n, 0);
}

/* x * y + z with x [rows, 1], y [cols], z [rows, cols] (z is also the
 * output: an input the output may reuse), evaluated over ranges that do not
 * fall on block or row boundaries. */
static void evaluate(void** state) {
  (void)state;
  enum { R = 37, C = 301 };
  static sa_ewprog prog;
  static sa_ewprog_plan plan;
  char err[300];
  assert_true(
      sa_ewprog_parse("$0 $1 Mul $2 AddV2", 3, &prog, err, sizeof(err)));
  int rank[3] = {2, 1, 2};
  int64_t dims[3][SA_EWPROG_MAX_DIMS] = {{R, 1}, {C}, {R, C}};
  int64_t out[SA_EWPROG_MAX_DIMS];
  int nd, a, b;
  assert_true(sa_ewprog_broadcast(3, rank,
                                  (const int64_t(*)[SA_EWPROG_MAX_DIMS])dims,
                                  &nd, out, &plan, &a, &b));
  assert_true(plan.direct[2]);
  static double x[R], y[C], z[R * C], want[R * C];
  for (int i = 0; i < R; i++) x[i] = i + 1;
  for (int j = 0; j < C; j++) y[j] = 0.5 * j;
  for (int k = 0; k < R * C; k++) z[k] = -k;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) want[i * C + j] = x[i] * y[j] + z[i * C + j];
  const double* in[3] = {x, y, z};
  const int64_t cuts[] = {0, 1, 255, 256, 257, 1000, 5000, R * C};
  for (size_t c = 0; c + 1 < sizeof(cuts) / sizeof(cuts[0]); c++)
    sa_ewprog_eval_f64(&prog, &plan, in, z, cuts[c], cuts[c + 1]);
  for (int k = 0; k < R * C; k++)
    if (z[k] != want[k]) fail_msg("element %d: %g, want %g", k, z[k], want[k]);

  /* float, unary chain and a program without ops */
  static float f[1000], g[1000];
  for (int k = 0; k < 1000; k++) f[k] = (float)(k - 500) / 100;
  assert_true(
      sa_ewprog_parse("$0 Relu $0 Neg Maximum", 1, &prog, err, sizeof(err)));
  int r1 = 1;
  int64_t d1[1][SA_EWPROG_MAX_DIMS] = {{1000}};
  assert_true(sa_ewprog_broadcast(1, &r1,
                                  (const int64_t(*)[SA_EWPROG_MAX_DIMS])d1, &nd,
                                  out, &plan, &a, &b));
  const float* fin[1] = {f};
  sa_ewprog_eval_f32(&prog, &plan, fin, g, 0, 1000);
  for (int k = 0; k < 1000; k++) assert_true(g[k] == (f[k] < 0 ? -f[k] : f[k]));
  assert_true(sa_ewprog_parse("$0", 1, &prog, err, sizeof(err)));
  memset(g, 0, sizeof(g));
  sa_ewprog_eval_f32(&prog, &plan, fin, g, 3, 999);
  assert_true(g[2] == 0 && g[999] == 0);
  assert_memory_equal(g + 3, f + 3, sizeof(float) * 996);
}

/* Empty inputs whose broadcast has more than 2**63 - 1 elements: refused
 * as TF's TensorShape would (n = -1, no plan), not wrapped to 0. */
static void broadcast_overflow(void** state) {
  (void)state;
  static sa_ewprog_plan plan;
  int64_t out[SA_EWPROG_MAX_DIMS];
  int nd, a = -1, b = -1;
  int rank[2] = {3, 3};
  int64_t dims[2][SA_EWPROG_MAX_DIMS] = {{(int64_t)1 << 32, 1, 0},
                                         {1, (int64_t)1 << 32, 0}};
  assert_true(bcast(2, rank, (const int64_t(*)[SA_EWPROG_MAX_DIMS])dims, &nd,
                    out, &plan, &a, &b));
  assert_int_equal(nd, 3);
  assert_true(out[0] == (int64_t)1 << 32 && out[1] == (int64_t)1 << 32);
  assert_int_equal(plan.n, -1);
  /* The 0 first: an empty, valid shape. */
  int64_t ok[2][SA_EWPROG_MAX_DIMS] = {{0, (int64_t)1 << 32, 1},
                                       {0, 1, (int64_t)1 << 32}};
  assert_true(bcast(2, rank, (const int64_t(*)[SA_EWPROG_MAX_DIMS])ok, &nd, out,
                    &plan, &a, &b));
  assert_int_equal(plan.n, 0);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(table),
      cmocka_unit_test(table_is_ewops),
      cmocka_unit_test(parse_good),
      cmocka_unit_test(parse_bad),
      cmocka_unit_test(broadcast),
      cmocka_unit_test(evaluate),
      cmocka_unit_test(broadcast_overflow),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
