/*
 * simdev_conformance - a conformance harness for TensorFlow PluggableDevice
 * plugins (StreamExecutor C API, tensorflow/c/experimental/stream_executor/
 * stream_executor.h, TF 2.21).
 *
 * It loads a plugin exactly as TensorFlow does (dlopen RTLD_NOW|RTLD_LOCAL,
 * dlsym "SE_InitPlugin"), registers it with TF-style pre-filled structs, runs
 * TF's own validation, then drives every callback the way TF's C++ wrappers
 * do and checks the contracts TF relies on: memory, streams, events, copies,
 * memsets, host callbacks, timers, ordering, error propagation, teardown. It
 * needs TF's headers and libtensorflow_framework (for TF_Status) but neither
 * Python nor the TF runtime, so it runs well under gdb and valgrind.
 *
 * Usage
 *   simdev_conformance PLUGIN.so [FILTER] [--simdev] [--list]
 *
 *   PLUGIN.so  path of the plugin (anything with SE_InitPlugin)
 *   FILTER     run only tests whose name contains FILTER (registration and
 *              teardown always run)
 *   --simdev   also run simdev's own checks (simdev_checks.c); leave it out
 *              for any other plugin
 *   --list     print test names and exit
 *
 * Output: one line per test ("[ RUN  ] generic.events", then "[   OK ]" or
 * "[ FAIL ]"), each failed check as file:line plus the expression and the
 * values, and last a line "N passed, N failed" (checks, not tests). The exit
 * status is 0 only if nothing failed.
 *
 * Environment: CONF_TIMEOUT (seconds per test, default 60; a test that runs
 * longer is a hang and fails the run). Everything else is passed to the
 * plugin unchanged.
 *
 * Pointing it at your own plugin
 *   1. Build the harness against the same TF version as your plugin:
 *        cmake -S simdev -B build -DSIMDEV_TF_DIR=.../site-packages/tensorflow
 *        cmake --build build --target simdev_conformance
 *      or by hand:
 *        cc -std=c11 -I$TF/include tests/conformance/{simdev_conformance,
 *          registration,child,util,generic,generic_work,simdev_checks}.c
 *          $TF/libtensorflow_framework.so.2 -Wl,-rpath,$TF -ldl -lpthread
 *   2. build/tests/conformance/simdev_conformance /path/to/libmyplugin.so
 *   3. Under valgrind (the harness itself is clean; tf.supp covers TF's own
 *      static initializers if they ever need it):
 *        valgrind --error-exitcode=1 --leak-check=full \
 *          --errors-for-leak-kinds=definite,indirect \
 *          --suppressions=tests/conformance/tf.supp \
 *          simdev_conformance /path/to/libmyplugin.so
 *        valgrind --tool=helgrind --error-exitcode=1 simdev_conformance ...
 *   4. Debug one test: gdb --args simdev_conformance libmyplugin.so events
 *   Only the generic checks apply to other plugins; they need nothing but
 *   the header's contracts (device pointers are never dereferenced).
 *
 * Internal: simdev_conformance PLUGIN.so --child CASE runs one child case
 * (see conf_run_child): environment-dependent checks need a fresh process
 * because a plugin is initialized once per process.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance.h"

int harness_passes;
int harness_fails;

/* ------------------------------------------------------------ watchdog */

static const char* volatile current_test = "";

/* Appends a decimal number to buf (async-signal-safe). */
static size_t put_num(char* buf, size_t at, long v) {
  char tmp[24];
  int n = 0;
  if (v < 0) {
    buf[at++] = '-';
    v = -v;
  }
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (n > 0) buf[at++] = tmp[--n];
  return at;
}

static size_t put_str(char* buf, size_t at, const char* s, size_t cap) {
  while (*s && at < cap) buf[at++] = *s++;
  return at;
}

/* A test that does not finish is a hang (a missed wakeup, a callback that
 * never runs, a blocking enqueue): report it and end the process. */
static void on_alarm(int sig) {
  (void)sig;
  static char buf[512];
  size_t n = 0;
  n = put_str(buf, n, "TIMEOUT: test '", 200);
  n = put_str(buf, n, current_test, 300);
  n = put_str(buf, n, "' did not finish (hang)\n", 400);
  n = put_num(buf, n, harness_passes);
  n = put_str(buf, n, " passed, ", 480);
  n = put_num(buf, n, harness_fails + 1);
  n = put_str(buf, n, " failed\n", 500);
  ssize_t w = write(STDOUT_FILENO, buf, n);
  (void)w;
  _exit(1);
}

/* A crash inside the plugin: say in which test, then die of the same signal
 * (so gdb, core dumps and valgrind still see it). */
static void on_crash(int sig) {
  static char buf[512];
  size_t n = 0;
  n = put_str(buf, n, "CRASH: signal ", 100);
  n = put_num(buf, n, sig);
  n = put_str(buf, n, " in test '", 200);
  n = put_str(buf, n, current_test, 300);
  n = put_str(buf, n, "'\n", 400);
  ssize_t w = write(STDOUT_FILENO, buf, n);
  (void)w;
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_crash_handlers(void) {
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
    signal(sigs[i], on_crash);
  }
}

static unsigned timeout_s(void) {
  const char* v = getenv("CONF_TIMEOUT");
  long t = v ? strtol(v, NULL, 10) : 0;
  return t > 0 ? (unsigned)t : 60u;
}

static void watchdog_arm(const char* name) {
  current_test = name;
  alarm(timeout_s());
}

static void watchdog_disarm(void) {
  alarm(0);
  current_test = "";
}

/* ------------------------------------------------------------ runner */

static void run_test(conf_env* e, const harness_test* t) {
  int before = harness_fails;
  printf("[ RUN  ] %s\n", t->name);
  fflush(stdout);
  conf_probes_reset();
  watchdog_arm(t->name);
  t->fn(e);
  watchdog_disarm();
  conf_gates_open_all();
  printf("%s %s\n", harness_fails == before ? "[   OK ]" : "[ FAIL ]", t->name);
  fflush(stdout);
}

static void run_list(conf_env* e, const harness_test* list,
                     const char* filter) {
  for (const harness_test* t = list; t->name != NULL; t++) {
    if (filter == NULL || strstr(t->name, filter) != NULL) run_test(e, t);
  }
}

static void print_list(const harness_test* list) {
  for (const harness_test* t = list; t->name != NULL; t++) {
    printf("%s\n", t->name);
  }
}

static int finish(void) {
  printf("%d passed, %d failed\n", harness_passes, harness_fails);
  fflush(stdout);
  return harness_fails == 0 ? 0 : 1;
}

/* One child case in this (fresh) process: see conf_run_child. */
static int child_main(conf_env* e, const char* plugin, const char* name) {
  const conf_child_case* c = conf_child_cases;
  while (c->name != NULL && strcmp(c->name, name) != 0) c++;
  if (!CHECKF(c->name != NULL, "unknown child case '%s'", name)) {
    return finish();
  }
  e->st = TF_NewStatus();
  watchdog_arm(name);
  if (conf_load(e, plugin)) c->fn(e);
  watchdog_disarm();
  TF_DeleteStatus(e->st);
  return finish();
}

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s PLUGIN.so [FILTER] [--simdev] [--list]\n"
          "  (see the comment at the top of simdev_conformance.c)\n",
          argv0);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2 || argv[1][0] == '-') {
    usage(argv[0]);
    return 2;
  }
  static conf_env env;
  conf_env* e = &env;
  const char* filter = NULL;
  const char* child = NULL;
  int list = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--simdev") == 0) {
      e->simdev = 1;
    } else if (strcmp(argv[i], "--list") == 0) {
      list = 1;
    } else if (strcmp(argv[i], "--child") == 0 && i + 1 < argc) {
      child = argv[++i];
    } else if (argv[i][0] != '-' && filter == NULL) {
      filter = argv[i];
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  if (list) {
    print_list(conf_generic_tests);
    print_list(conf_generic_work_tests);
    print_list(conf_simdev_tests);
    return 0;
  }
  signal(SIGALRM, on_alarm);
  install_crash_handlers();
  if (child != NULL) return child_main(e, argv[1], child);

  e->st = TF_NewStatus();
  printf("[ RUN  ] registration\n");
  current_test = "registration";
  watchdog_arm("registration");
  int usable = conf_load(e, argv[1]) && conf_setup(e, CONF_MAX_DEVICES);
  watchdog_disarm();
  printf("%s registration\n", usable ? "[   OK ]" : "[ FAIL ]");
  if (usable) {
    printf("  plugin: platform %s, type %s, %d device(s)\n", e->platform.name,
           e->platform.type, e->device_count);
    run_list(e, conf_generic_tests, filter);
    run_list(e, conf_generic_work_tests, filter);
    if (e->simdev) run_list(e, conf_simdev_tests, filter);
  }
  if (e->dl != NULL) {
    int before = harness_fails;
    printf("[ RUN  ] teardown\n");
    watchdog_arm("teardown");
    conf_teardown(e);
    watchdog_disarm();
    printf("%s teardown\n", harness_fails == before ? "[   OK ]" : "[ FAIL ]");
  }
  /* Like TF, never dlclose a plugin: its threads and atexit handlers may
   * still reference its code. */
  TF_DeleteStatus(e->st);
  return finish();
}
