/*
 * test_xla_trace.c - SIMDEV_TRACE in libsimdev_xla.so (src/xla/runtime.c):
 * the trace file is started with the device, once per process; jobs are
 * kernel records named after their target; the file is written at exit.
 * Its own executable: the trace file is process-wide state (started once).
 *
 * The file appears only when the process exits, so its contents are
 * checked by an exit handler this test registers before the library's
 * (exit handlers run in reverse order: the library writes, then this one
 * reads, counts the records and removes the file); a wrong count makes the
 * process exit 1 with the reason on stderr, after cmocka's report. No
 * fork: jemalloc's fork handlers are a storm of false positives under
 * helgrind, and everything here must run under memcheck and helgrind.
 *
 *   build/tests/xla/test_xla_trace [test-name filter]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakeffi.h"

#define F32 XLA_FFI_DataType_F32
#define OK XLA_FFI_Error_Code_OK

typedef struct relu_call {
  ff_frame f;
  int64_t n;
  float x[64], y[64];
} relu_call;

static void relu_setup(relu_call* c) {
  c->n = 64;
  for (int i = 0; i < 64; i++) c->x[i] = (float)(i - 32), c->y[i] = -1;
  ff_init(&c->f);
  ff_arg(&c->f, F32, c->x, 1, &c->n);
  ff_ret(&c->f, F32, c->y, 1, &c->n);
}

/* In the child: no cmocka (its longjmp would leave the parent's frame);
 * any failure is an exit status the parent reports. */
static int relu_ok(void) {
  relu_call c;
  relu_setup(&c);
  ff_result r = {0};
  XLA_FFI_Error_Code err;
  XLA_FFI_Future* fut = ff_call_async(simdev_xla_relu, &c.f, &err);
  if (err != OK || fut == NULL || ff_wait_quiet(fut, &r) != 0 || r.code != OK)
    return 0;
  for (int i = 0; i < 64; i++)
    if (c.y[i] != (c.x[i] < 0 ? 0.f : c.x[i])) return 0;
  return 1;
}

#define PER_THREAD 10
#define AFTER_REINIT 5

static void* caller_main(void* arg) {
  int* ok = arg;
  for (int i = 0; i < PER_THREAD; i++) *ok &= relu_ok();
  return NULL;
}

static char dir[] = "/tmp/simdev_xla_traceXXXXXX";

static char* path_in_dir(const char* name) {
  static char buf[2][256];
  static int which;
  char* p = buf[which ^= 1];
  snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
  return p;
}

/* An unwritable path: init and every call with work fail naming the
 * variable (FAILED_PRECONDITION), and nothing is left half made: with the
 * variable unset the next init works. */
static void bad_trace_path(void** state) {
  char msg[512];
  setenv("SIMDEV_TRACE", "/nonexistent-simdev-dir/t.json", 1);
  assert_int_not_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  assert_non_null(strstr(msg, "SIMDEV_TRACE"));
  assert_non_null(strstr(msg, "/nonexistent-simdev-dir/t.json"));
  relu_call c;
  relu_setup(&c);
  ff_result r = ff_call(simdev_xla_relu, &c.f);
  ff_assert_error(&r, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                  "simdev_relu: ", "SIMDEV_TRACE");
  unsetenv("SIMDEV_TRACE");
  assert_int_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  assert_int_equal(simdev_xla_shutdown(), 0);
}

/* Records calls_recorded made (-1: it did not run or failed). */
static int expected_records = -1;

static int count(const char* text, const char* what) {
  int n = 0;
  for (const char* p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
    n++;
  return n;
}

/* Calls from two threads, a shutdown, a re-init with another path (the
 * first file is kept: once per process), more calls. The exit handler
 * checks that the first file holds exactly one kernel record per call. */
static void calls_recorded(void** state) {
  setenv("SIMDEV_TRACE", path_in_dir("t.json"), 1);
  char msg[512];
  assert_int_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  struct stat st;
  assert_int_equal(stat(path_in_dir("t.json"), &st), 0); /* checked, made */
  pthread_t t[2];
  int ok[2] = {1, 1};
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, caller_main, &ok[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  assert_true(ok[0] && ok[1]);
  assert_int_equal(simdev_xla_shutdown(), 0);
  setenv("SIMDEV_TRACE", path_in_dir("other.json"), 1);
  for (int i = 0; i < AFTER_REINIT; i++) assert_true(relu_ok());
  assert_int_equal(simdev_xla_shutdown(), 0);
  assert_int_not_equal(stat(path_in_dir("other.json"), &st), 0);
  unsetenv("SIMDEV_TRACE");
  expected_records = 2 * PER_THREAD + AFTER_REINIT;
}

/* Exit handler, registered before the library's: runs after it wrote. */
static void check_trace_file(void) {
  const char* path = path_in_dir("t.json");
  int bad = 0;
  if (expected_records >= 0) {
    static char text[1 << 20];
    FILE* f = fopen(path, "r");
    size_t len = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f) fclose(f);
    text[len] = '\0';
    int relu = count(text, "\"name\":\"simdev_relu\",\"cat\":\"kernel\"");
    int kernels = count(text, "\"cat\":\"kernel\"");
    if (relu != expected_records || kernels != expected_records ||
        strstr(text, "\"simdev0-s0\"") == NULL) {
      fprintf(stderr,
              "test_xla_trace: %s at exit: %d simdev_relu kernel records, %d "
              "kernel records, track simdev0-s0 %s; expected %d of each\n",
              path, relu, kernels,
              strstr(text, "\"simdev0-s0\"") ? "present" : "missing",
              expected_records);
      bad = 1;
    }
  }
  unlink(path);
  unlink(path_in_dir("other.json"));
  rmdir(dir);
  if (bad) _exit(1);
}

int main(int argc, char** argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  unsetenv("SIMDEV_SYNC");
  unsetenv("SIMDEV_MEMORY_MB");
  unsetenv("SIMDEV_DISABLE");
  unsetenv("SIMDEV_TRACE");
  if (mkdtemp(dir) == NULL) return 1;
  if (atexit(check_trace_file) != 0) return 1; /* before the library's */
  const struct CMUnitTest tests[] = {
      /* In this order: once calls_recorded has started the trace file
       * (once per process), later SIMDEV_TRACE values are ignored. */
      cmocka_unit_test(bad_trace_path),
      cmocka_unit_test(calls_recorded),
  };
  return cmocka_run_group_tests_name("xla_trace", tests, NULL, NULL);
}
