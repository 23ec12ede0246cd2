/*
 * harness.h - rules, checks and their report.
 *
 * Every check names a rule: a stable dotted id ("host_callback.returns_true"),
 * a grade, the callback it is about and one sentence saying what is expected
 * and by whom. A failing check adds what the plugin did ("observed"), so a
 * plugin author reads, in one place, which callback, whose contract, and what
 * their plugin did instead. Rule ids are what the harness's own tests assert
 * on: keep them stable.
 *
 * Grades
 *   required     TF rejects the plugin, aborts, hangs, corrupts data or fails
 *                ops without it. The sentence cites TF 2.21's code.
 *   recommended  TF tolerates it; tools or users lose something.
 *   simdev       simdev's own guarantees (--simdev).
 * Only required failures fail a run (and simdev failures when --simdev was
 * asked for; recommended ones too with --strict).
 *
 * Each source file owns its rules and lists them in one X-macro:
 *
 *   #define MY_RULES(X) \
 *     X(R_CB_TRUE, "host_callback.returns_true", REQUIRED, "host_callback", \
 *       "TF's CStream::DoHostCallbackWithStatus turns false into ...")
 *   CONF_RULES(conf_my_rules, MY_RULES)
 *
 * which defines one `static const conf_rule` per entry and the NULL-ended
 * table `conf_my_rules` that --list prints (report.c knows every table).
 *
 * Checks run on the main thread only (callbacks on a plugin's threads record
 * what they saw and the main thread checks afterwards). Nothing aborts:
 * ENSURE jumps to the test's `out:` label so the test can release gates and
 * destroy its streams before returning.
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_HARNESS_H_
#define SIMDEV_TESTS_CONFORMANCE_HARNESS_H_

#include <stdint.h>

typedef enum conf_grade {
  CONF_REQUIRED,
  CONF_RECOMMENDED,
  CONF_SIMDEV,
  CONF_GRADES
} conf_grade;

typedef struct conf_rule {
  const char* id;       /* "host_callback.returns_true" */
  conf_grade grade;
  const char* callback; /* the SP_* member or C API function it is about */
  const char* expected; /* one sentence: what is expected, by whom, why */
} conf_rule;

#define CONF_RULE_DEFINE_(sym, id, grade, cb, expected) \
  static const conf_rule sym = {id, CONF_##grade, cb, expected};
#define CONF_RULE_REF_(sym, id, grade, cb, expected) &sym,
/* Defines the rules of LIST and the table `name` (NULL-ended). */
#define CONF_RULES(name, LIST)  \
  LIST(CONF_RULE_DEFINE_)       \
  const conf_rule* const name[] = {LIST(CONF_RULE_REF_) NULL};

/* Rules shared between files: LIST's entries declared in a header with
 * CONF_RULES_DECLARE and defined (non-static) in one file. */
#define CONF_RULE_DECLARE_(sym, id, grade, cb, expected) \
  extern const conf_rule sym;
#define CONF_RULE_DEFINE_SHARED_(sym, id, grade, cb, expected) \
  const conf_rule sym = {id, CONF_##grade, cb, expected};
#define CONF_RULES_DECLARE(LIST) LIST(CONF_RULE_DECLARE_)
#define CONF_RULES_SHARED(name, LIST) \
  LIST(CONF_RULE_DEFINE_SHARED_)      \
  const conf_rule* const name[] = {LIST(CONF_RULE_REF_) NULL};

const char* conf_grade_name(conf_grade g);

/* Records one evaluation of `rule`. On failure, `fmt` (printf) says what the
 * plugin did. Returns ok. */
int conf_check(const conf_rule* rule, int ok, const char* file, int line,
               const char* fmt, ...) __attribute__((format(printf, 5, 6)));
/* Records a failure of `rule` without a condition (e.g. a status). */
#define EXPECT(rule, cond, ...) \
  conf_check(&(rule), (cond) != 0, __FILE__, __LINE__, __VA_ARGS__)
/* EXPECT, then `goto out` if it failed. */
#define ENSURE(rule, cond, ...)             \
  do {                                      \
    if (!EXPECT(rule, cond, __VA_ARGS__)) { \
      goto out;                             \
    }                                       \
  } while (0)

/* a OP b on int64 values; `what` names the quantity ("bytes_in_use after
 * allocating 1 MiB"). Observed: "what: A, expected OP B". */
int conf_check_cmp(const conf_rule* rule, int ok, const char* file, int line,
                   const char* what, const char* op, int64_t a, int64_t b);
#define EXPECT_CMP(rule, a, op, b, what)                                   \
  conf_check_cmp(&(rule), (int64_t)(a)op(int64_t)(b), __FILE__, __LINE__, \
                 (what), #op, (int64_t)(a), (int64_t)(b))
#define ENSURE_CMP(rule, a, op, b, what)          \
  do {                                            \
    if (!EXPECT_CMP(rule, a, op, b, what)) {      \
      goto out;                                   \
    }                                             \
  } while (0)

/* A note: neither a pass nor a failure (observations, values). */
void conf_note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* Marks the running test skipped, with the reason (e.g. no timers). */
void conf_skip(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* A named test. `fn` receives the runner's environment (conformance.h). */
struct conf_env;
enum {
  /* Runs when the plugin reports 0 devices (every other test is skipped
   * then: TF creates no device either). */
  CONF_DEVICELESS = 1,
};
typedef struct harness_test {
  const char* name;
  void (*fn)(struct conf_env* env);
  unsigned flags;
} harness_test;

#endif /* SIMDEV_TESTS_CONFORMANCE_HARNESS_H_ */
