/*
 * harness.h - a tiny check framework for the conformance harness.
 *
 * Checks count passes and failures; a failing check prints file:line, the
 * expression as written and, for the typed variants, both values. Nothing
 * aborts: REQUIRE jumps to the test's `out:` label so the test can release
 * gates and destroy its streams before returning (a test that returned with a
 * host callback still blocked would hang the teardown).
 *
 * Checks are called on the main thread only. Callbacks that run on a
 * plugin's worker threads record what they saw (under a mutex) and the main
 * thread checks it afterwards.
 *
 * The runner prints "[ RUN  ] name" / "[   OK ] name" / "[ FAIL ] name" per
 * test and, last, a line of exactly the form "N passed, N failed".
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_HARNESS_H_
#define SIMDEV_TESTS_CONFORMANCE_HARNESS_H_

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Defined in simdev_conformance.c. */
extern int harness_passes;
extern int harness_fails;

static inline int harness_check(int ok, const char* file, int line,
                                const char* expr) {
  if (ok) {
    harness_passes++;
    return 1;
  }
  harness_fails++;
  printf("%s:%d: check failed: %s\n", file, line, expr);
  fflush(stdout);
  return 0;
}

/* Like harness_check, plus a printf-style explanation on failure. */
static inline int harness_checkf(int ok, const char* file, int line,
                                 const char* expr, const char* fmt, ...) {
  if (!harness_check(ok, file, line, expr)) {
    va_list ap;
    va_start(ap, fmt);
    printf("    ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return 0;
  }
  return 1;
}

static inline int harness_check_i64(int ok, const char* file, int line,
                                    const char* expr, int64_t a, int64_t b) {
  return harness_checkf(ok, file, line, expr, "values: %" PRId64 " vs %" PRId64,
                        a, b);
}

static inline int harness_check_u64(int ok, const char* file, int line,
                                    const char* expr, uint64_t a, uint64_t b) {
  return harness_checkf(ok, file, line, expr,
                        "values: %" PRIu64 " (0x%" PRIx64 ") vs %" PRIu64
                        " (0x%" PRIx64 ")",
                        a, a, b, b);
}

static inline int harness_check_str(const char* file, int line,
                                    const char* expr, const char* a,
                                    const char* b) {
  int ok = a != NULL && b != NULL && strcmp(a, b) == 0;
  return harness_checkf(ok, file, line, expr, "values: \"%s\" vs \"%s\"",
                        a ? a : "(null)", b ? b : "(null)");
}

/* Prints a note that is neither a pass nor a failure (skips, observations). */
static inline void harness_note(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("  note: ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

#define CHECK(expr) harness_check((expr) != 0, __FILE__, __LINE__, #expr)
/* CHECKF(expr, fmt, ...): fmt is required. */
#define CHECKF(expr, ...) \
  harness_checkf((expr) != 0, __FILE__, __LINE__, #expr, __VA_ARGS__)

#define CHECK_CMP_I64_(a, op, b)                                    \
  harness_check_i64((int64_t)(a)op(int64_t)(b), __FILE__, __LINE__, \
                    #a " " #op " " #b, (int64_t)(a), (int64_t)(b))
#define CHECK_CMP_U64_(a, op, b)                                      \
  harness_check_u64((uint64_t)(a)op(uint64_t)(b), __FILE__, __LINE__, \
                    #a " " #op " " #b, (uint64_t)(a), (uint64_t)(b))

#define CHECK_EQ(a, b) CHECK_CMP_I64_(a, ==, b)
#define CHECK_NE(a, b) CHECK_CMP_I64_(a, !=, b)
#define CHECK_GE(a, b) CHECK_CMP_I64_(a, >=, b)
#define CHECK_LE(a, b) CHECK_CMP_I64_(a, <=, b)
#define CHECK_GT(a, b) CHECK_CMP_I64_(a, >, b)
#define CHECK_LT(a, b) CHECK_CMP_I64_(a, <, b)
#define CHECK_EQ_U64(a, b) CHECK_CMP_U64_(a, ==, b)
#define CHECK_GE_U64(a, b) CHECK_CMP_U64_(a, >=, b)
#define CHECK_LE_U64(a, b) CHECK_CMP_U64_(a, <=, b)
#define CHECK_STREQ(a, b) \
  harness_check_str(__FILE__, __LINE__, #a " == " #b, (a), (b))

/* On failure, jump to the enclosing function's cleanup label `out`. */
#define REQUIRE(expr)   \
  do {                  \
    if (!CHECK(expr)) { \
      goto out;         \
    }                   \
  } while (0)
#define REQUIRE_EQ(a, b)   \
  do {                     \
    if (!CHECK_EQ(a, b)) { \
      goto out;            \
    }                      \
  } while (0)

/* A named test. `fn` receives the runner's environment (conformance.h). */
struct conf_env;
typedef struct harness_test {
  const char* name;
  void (*fn)(struct conf_env* env);
} harness_test;

#endif /* SIMDEV_TESTS_CONFORMANCE_HARNESS_H_ */
