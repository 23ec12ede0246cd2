/*
 * report.c - check results: collected and printed in the run's process,
 * written as record lines in a child (see report.h).
 *
 * Fixed-size tables: a conformance run has a few dozen tests and a bounded
 * number of distinct failure places (rule x file:line), and a crash handler
 * must be able to read the counts without locks or allocation. Overflow of
 * the failure table is itself reported, never silent.
 */
#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TESTS 256
#define MAX_FAILURES 1024
#define TEXT_MAX 480

#define RECORD "@@conf\t"
/* Different findings at one place (e.g. one line of a loop over ops) are
 * printed up to this many times; beyond it, and for identical ones, only
 * the count grows. */
#define MAX_EXAMPLES 5

typedef struct test_result {
  char name[96];
  const char* status; /* "pass" "warn" "fail" "skip" "crash" "timeout" */
  char reason[TEXT_MAX];
  int fails[CONF_GRADES];
  int skipped;
} test_result;

typedef struct failure {
  int test; /* index into tests */
  const conf_rule* rule;
  char rule_id[128]; /* rule->id, or "<test>.finishes" */
  conf_grade grade;
  char where[96];
  char observed[TEXT_MAX];
  int count;
  int distinct; /* different observed texts printed (first included) */
  unsigned long seen[MAX_EXAMPLES]; /* their hashes */
} failure;

/* What a test that crashed or hung broke; its id is "<test>.finishes". */
static const conf_rule finishes = {
    "test.finishes", CONF_REQUIRED, "(the callbacks the test made)",
    "Every call returns and the process survives: a plugin that hangs "
    "blocks TF's threads for good, and one that crashes ends the host "
    "process (the user's Python program)."};

static conf_report_config cfg;
static test_result tests[MAX_TESTS];
static int ntests;
static int current = -1; /* running test, or -1 */
static failure failures[MAX_FAILURES];
static int nfailures;
static int dropped_failures;
static int passes[CONF_GRADES];
static int quiet;

void conf_report_quiet(int q) {
  quiet = q;
}
static int fails[CONF_GRADES];

const char* conf_grade_name(conf_grade g) {
  switch (g) {
    case CONF_REQUIRED:
      return "required";
    case CONF_RECOMMENDED:
      return "recommended";
    case CONF_SIMDEV:
      return "simdev";
    default:
      return "?";
  }
}

static int grade_fails_run(conf_grade g) {
  return g == CONF_REQUIRED || (g == CONF_SIMDEV && cfg.simdev) ||
         (g == CONF_RECOMMENDED && cfg.strict);
}

void conf_report_init(const conf_report_config* config) {
  cfg = *config;
}

const conf_rule* conf_report_find_rule(const char* id) {
  for (const conf_rule* const* const* t = cfg.tables; t && *t; t++) {
    for (const conf_rule* const* r = *t; *r != NULL; r++) {
      if (strcmp((*r)->id, id) == 0) return *r;
    }
  }
  return NULL;
}

/* Copies s into dst (cap bytes), turning tabs and newlines into spaces so
 * that a message stays one record field on one line. */
static void copy_flat(char* dst, size_t cap, const char* s) {
  size_t i = 0;
  for (; s != NULL && s[i] != '\0' && i + 1 < cap; i++) {
    dst[i] = (s[i] == '\t' || s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
  }
  dst[i] = '\0';
}

static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

/* ------------------------------------------------------------ tests */

void conf_report_test_begin(const char* name) {
  if (ntests == MAX_TESTS) {
    fprintf(stderr, "%s:%d: more than %d tests\n", __FILE__, __LINE__,
            MAX_TESTS);
    abort();
  }
  current = ntests++;
  test_result* t = &tests[current];
  memset(t, 0, sizeof(*t));
  copy_flat(t->name, sizeof(t->name), name);
  if (!cfg.child) printf("[ RUN  ] %s\n", name);
  fflush(stdout);
}

static void print_repeats(int test) {
  for (int i = 0; i < nfailures; i++) {
    const failure* f = &failures[i];
    if (f->test == test && f->count > 1) {
      printf("  (%s at %s failed %d times in this test)\n", f->rule_id,
             f->where, f->count);
    }
  }
}

void conf_report_test_end(void) {
  if (current < 0) return;
  test_result* t = &tests[current];
  if (t->status == NULL) {
    int run_fail = 0, any_fail = 0;
    for (int g = 0; g < CONF_GRADES; g++) {
      any_fail |= t->fails[g] > 0;
      run_fail |= t->fails[g] > 0 && grade_fails_run((conf_grade)g);
    }
    t->status = run_fail ? "fail"
                : any_fail ? "warn"
                : t->skipped ? "skip"
                : "pass";
  }
  if (!cfg.child) {
    print_repeats(current);
    const char* tag = strcmp(t->status, "pass") == 0   ? "[   OK ]"
                      : strcmp(t->status, "warn") == 0 ? "[ WARN ]"
                      : strcmp(t->status, "skip") == 0 ? "[ SKIP ]"
                                                       : "[ FAIL ]";
    if (t->reason[0] != '\0') {
      printf("%s %s (%s)\n", tag, t->name, t->reason);
    } else {
      printf("%s %s\n", tag, t->name);
    }
  }
  fflush(stdout);
  current = -1;
}

/* ------------------------------------------------------------ results */

/* djb2: telling texts apart, not security. */
static unsigned long text_hash(const char* s) {
  unsigned long h = 5381;
  for (; s != NULL && *s; s++) h = h * 33 + (unsigned char)*s;
  return h;
}

static void add_failure(const conf_rule* rule, const char* rule_id,
                        conf_grade grade, const char* where,
                        const char* observed) {
  fails[grade]++;
  if (current >= 0) tests[current].fails[grade]++;
  for (int i = 0; i < nfailures; i++) {
    failure* f = &failures[i];
    if (f->test == current && strcmp(f->rule_id, rule_id) == 0 &&
        strcmp(f->where, where) == 0) {
      f->count++;
      unsigned long h = text_hash(observed);
      for (int k = 0; k < f->distinct; k++) {
        if (f->seen[k] == h) return;
      }
      if (f->distinct < MAX_EXAMPLES) {
        f->seen[f->distinct++] = h;
        printf("    also: %s\n", observed);
        fflush(stdout);
      }
      return;
    }
  }
  if (nfailures == MAX_FAILURES) {
    dropped_failures++;
    return;
  }
  failure* f = &failures[nfailures++];
  f->test = current;
  f->rule = rule;
  copy_flat(f->rule_id, sizeof(f->rule_id), rule_id);
  f->grade = grade;
  copy_flat(f->where, sizeof(f->where), where);
  copy_flat(f->observed, sizeof(f->observed), observed);
  f->count = 1;
  f->distinct = 1;
  f->seen[0] = text_hash(observed);
  printf("  %s [%s] %s", grade_fails_run(grade) ? "FAIL" : "WARN",
         conf_grade_name(grade), f->rule_id);
  if (rule != NULL) printf(" (%s)", rule->callback);
  printf("\n    observed: %s\n", f->observed);
  if (rule != NULL) printf("    expected: %s\n", rule->expected);
  printf("    at %s\n", f->where);
  fflush(stdout);
}

/* One record line, in one write (shorter than PIPE_BUF, so it is never
 * interleaved with another writer's), to the parent's record pipe. */
static void write_record(const char* fmt, ...) {
  char line[2 * TEXT_MAX + 256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = (size_t)n < sizeof(line) - 1 ? (size_t)n : sizeof(line) - 2;
  if (line[len - 1] != '\n') line[len++] = '\n';
  ssize_t w = write(cfg.record_fd, line, len);
  (void)w; /* the parent is gone: nobody to tell */
}

static void record_result(const conf_rule* rule, int ok, const char* where,
                          const char* observed) {
  if (quiet) return;
  if (cfg.child) {
    if (ok) {
      write_record(RECORD "P\t%s\n", rule->id);
    } else {
      char flat[TEXT_MAX];
      copy_flat(flat, sizeof(flat), observed);
      write_record(RECORD "F\t%s\t%s\t%s\n", rule->id, where, flat);
    }
    return;
  }
  if (ok) {
    passes[rule->grade]++;
  } else {
    add_failure(rule, rule->id, rule->grade, where, observed);
  }
}

static int vcheck(const conf_rule* rule, int ok, const char* file, int line,
                  const char* fmt, va_list ap) {
  char where[96];
  char observed[TEXT_MAX] = "";
  if (!ok) {
    snprintf(where, sizeof(where), "%s:%d", base_name(file), line);
    vsnprintf(observed, sizeof(observed), fmt, ap);
  } else {
    where[0] = '\0';
  }
  record_result(rule, ok, where, observed);
  return ok;
}

int conf_check(const conf_rule* rule, int ok, const char* file, int line,
               const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vcheck(rule, ok, file, line, fmt, ap);
  va_end(ap);
  return ok;
}

int conf_check_cmp(const conf_rule* rule, int ok, const char* file, int line,
                   const char* what, const char* op, int64_t a, int64_t b) {
  return conf_check(rule, ok, file, line, "%s: %lld, expected %s %lld", what,
                    (long long)a, op, (long long)b);
}

/* Formats into a one-line text (tabs and newlines flattened, so that it
 * stays one record field). */
static void vformat_flat(char* out, size_t cap, const char* fmt, va_list ap) {
  char text[TEXT_MAX];
  vsnprintf(text, sizeof(text), fmt, ap);
  copy_flat(out, cap, text);
}

void conf_note(const char* fmt, ...) {
  if (quiet) return;
  char text[TEXT_MAX];
  va_list ap;
  va_start(ap, fmt);
  vformat_flat(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (cfg.child) {
    write_record(RECORD "N\t%s\n", text);
  } else {
    printf("  note: %s\n", text);
    fflush(stdout);
  }
}

void conf_skip(const char* fmt, ...) {
  char text[TEXT_MAX];
  va_list ap;
  va_start(ap, fmt);
  vformat_flat(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (cfg.child) {
    write_record(RECORD "S\t%s\n", text);
  } else if (current >= 0) {
    tests[current].skipped = 1;
    copy_flat(tests[current].reason, sizeof(tests[current].reason), text);
  }
}

void conf_report_test_abort(const char* status, const char* observed) {
  if (current < 0) return;
  char id[160];
  snprintf(id, sizeof(id), "%s.finishes", tests[current].name);
  add_failure(&finishes, id, CONF_REQUIRED, "(the test's process)", observed);
  tests[current].status = status;
  copy_flat(tests[current].reason, sizeof(tests[current].reason), observed);
}

/* Splits "a\tb\tc" in place into at most n fields; returns the count. */
static int split_tabs(char* s, char** field, int n) {
  int k = 0;
  while (k < n) {
    field[k++] = s;
    char* tab = strchr(s, '\t');
    if (tab == NULL || k == n) break;
    *tab = '\0';
    s = tab + 1;
  }
  return k;
}

int conf_report_ingest(const char* line) {
  size_t rl = strlen(RECORD);
  if (strncmp(line, RECORD, rl) != 0) return 0;
  if (cfg.child) {
    /* A grandchild's record: pass it up unchanged. */
    write_record("%s", line);
    return 1;
  }
  char buf[2 * TEXT_MAX];
  strncpy(buf, line + rl, sizeof(buf) - 1);
  buf[sizeof(buf) - 1] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  char* f[4] = {0};
  int n = split_tabs(buf, f, 4);
  const conf_rule* rule = n >= 2 ? conf_report_find_rule(f[1]) : NULL;
  if (f[0][0] == 'P' && rule != NULL) {
    passes[rule->grade]++;
  } else if (f[0][0] == 'F' && n == 4 && rule != NULL) {
    add_failure(rule, rule->id, rule->grade, f[2], f[3]);
  } else if (f[0][0] == 'N' && n >= 2) {
    printf("  note: %s\n", f[1]);
  } else if (f[0][0] == 'S' && n >= 2) {
    conf_skip("%s", f[1]);
  } else {
    /* An unknown rule or a torn line: the child and parent disagree. */
    add_failure(NULL, "harness.record", CONF_REQUIRED, "(report.c)", line);
  }
  return 1;
}

/* ------------------------------------------------------------ summary */

int conf_report_run_failed(void) {
  for (int g = 0; g < CONF_GRADES; g++) {
    if (fails[g] > 0 && grade_fails_run((conf_grade)g)) return 1;
  }
  return 0;
}

void conf_report_print_summary(const conf_report_meta* meta) {
  int by_status[6] = {0};
  static const char* const names[6] = {"pass", "warn", "fail",
                                       "skip", "crash", "timeout"};
  for (int i = 0; i < ntests; i++) {
    for (int k = 0; k < 6; k++) {
      if (tests[i].status != NULL && strcmp(tests[i].status, names[k]) == 0) {
        by_status[k]++;
      }
    }
  }
  printf("\n== %s: platform %s, type %s, %d device(s) reported, %d tested\n",
         meta->plugin, meta->platform_name ? meta->platform_name : "(none)",
         meta->platform_type ? meta->platform_type : "(none)",
         meta->device_count, meta->devices_tested);
  printf("tests: %d passed, %d with warnings, %d failed, %d skipped, "
         "%d crashed, %d timed out\n",
         by_status[0], by_status[1], by_status[2], by_status[3], by_status[4],
         by_status[5]);
  for (int g = 0; g < CONF_GRADES; g++) {
    if (g == CONF_SIMDEV && !cfg.simdev && passes[g] + fails[g] == 0) {
      printf("%-12s not run (--simdev)\n", conf_grade_name((conf_grade)g));
      continue;
    }
    printf("%-12s %d passed, %d failed%s\n", conf_grade_name((conf_grade)g),
           passes[g], fails[g],
           grade_fails_run((conf_grade)g) ? "" : " (does not fail the run)");
  }
  if (dropped_failures > 0) {
    printf("(%d further failure places not listed: table full)\n",
           dropped_failures);
  }
  printf("result: %s\n", conf_report_run_failed() ? "FAIL" : "PASS");
  fflush(stdout);
}

/* ------------------------------------------------------------ JSON */

static void json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; s != NULL && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      fprintf(f, "\\%c", c);
    } else if (c < 0x20 || c >= 0x80) {
      /* Bytes above 0x7f are escaped one by one (as Latin-1): a plugin's
       * message need not be valid UTF-8, the JSON must be. */
      fprintf(f, "\\u%04x", c);
    } else {
      fputc(c, f);
    }
  }
  fputc('"', f);
}

int conf_report_write_json(const char* path, const conf_report_meta* meta) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "simdev_conformance: cannot write --json %s: %s\n", path,
            strerror(errno));
    return -1;
  }
  fprintf(f, "{\n  \"schema\": 1,\n  \"plugin\": ");
  json_str(f, meta->plugin);
  fprintf(f, ",\n  \"platform\": ");
  if (meta->platform_name != NULL) {
    fprintf(f, "{\"name\": ");
    json_str(f, meta->platform_name);
    fprintf(f, ", \"type\": ");
    json_str(f, meta->platform_type);
    fprintf(f, "}");
  } else {
    fprintf(f, "null");
  }
  if (meta->device_count >= 0) {
    fprintf(f, ",\n  \"device_count\": %d", meta->device_count);
  } else {
    fprintf(f, ",\n  \"device_count\": null");
  }
  fprintf(f, ",\n  \"devices_tested\": %d", meta->devices_tested);
  fprintf(f, ",\n  \"result\": \"%s\"",
          conf_report_run_failed() ? "fail" : "pass");
  fprintf(f, ",\n  \"summary\": {");
  for (int g = 0; g < CONF_GRADES; g++) {
    fprintf(f, "%s\"%s\": {\"passed\": %d, \"failed\": %d}", g ? ", " : "",
            conf_grade_name((conf_grade)g), passes[g], fails[g]);
  }
  fprintf(f, "},\n  \"tests\": [");
  for (int i = 0; i < ntests; i++) {
    fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
    json_str(f, tests[i].name);
    fprintf(f, ", \"status\": ");
    json_str(f, tests[i].status ? tests[i].status : "crash");
    if (tests[i].reason[0] != '\0') {
      fprintf(f, ", \"reason\": ");
      json_str(f, tests[i].reason);
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n  \"failures\": [");
  for (int i = 0; i < nfailures; i++) {
    const failure* x = &failures[i];
    fprintf(f, "%s\n    {\"test\": ", i ? "," : "");
    json_str(f, x->test >= 0 ? tests[x->test].name : "");
    fprintf(f, ", \"rule\": ");
    json_str(f, x->rule_id);
    fprintf(f, ", \"grade\": ");
    json_str(f, conf_grade_name(x->grade));
    fprintf(f, ", \"callback\": ");
    json_str(f, x->rule ? x->rule->callback : "");
    fprintf(f, ",\n     \"expected\": ");
    json_str(f, x->rule ? x->rule->expected : "");
    fprintf(f, ",\n     \"observed\": ");
    json_str(f, x->observed);
    fprintf(f, ", \"where\": ");
    json_str(f, x->where);
    fprintf(f, ", \"count\": %d}", x->count);
  }
  fprintf(f, "\n  ]\n}\n");
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "simdev_conformance: writing %s failed\n", path);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ crash */

static size_t put_str(char* buf, size_t at, size_t cap, const char* s) {
  while (s != NULL && *s && at < cap) buf[at++] = *s++;
  return at;
}

size_t conf_put_num(char* buf, size_t at, size_t cap, long v) {
  char tmp[24];
  int n = 0;
  if (v < 0 && at < cap) {
    buf[at++] = '-';
    v = -v;
  }
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (n > 0 && at < cap) buf[at++] = tmp[--n];
  return at;
}

void conf_report_crash_summary(int fd) {
  /* A child's counts live in its parent, which reports the crash. */
  if (cfg.child) return;
  char buf[1024];
  const size_t cap = sizeof(buf);
  size_t n = 0;
  n = put_str(buf, n, cap, "summary so far:\n");
  for (int g = 0; g < CONF_GRADES; g++) {
    n = put_str(buf, n, cap, conf_grade_name((conf_grade)g));
    n = put_str(buf, n, cap, ": ");
    n = conf_put_num(buf, n, cap, passes[g]);
    n = put_str(buf, n, cap, " passed, ");
    n = conf_put_num(buf, n, cap, fails[g]);
    n = put_str(buf, n, cap, " failed\n");
  }
  ssize_t w = write(fd, buf, n);
  (void)w;
}
