/*
 * simdev_conformance - a conformance harness for TensorFlow PluggableDevice
 * plugins (StreamExecutor C API, tensorflow/c/experimental/stream_executor/
 * stream_executor.h, TF 2.21), for any plugin, not only simdev.
 *
 * It loads a plugin as TensorFlow does (dlopen RTLD_NOW|RTLD_LOCAL, dlsym
 * "SE_InitPlugin"), registers it with TF-style pre-filled structs, runs TF's
 * own validation, then drives every callback the way TF's C++ wrappers do
 * and checks the contracts TF relies on. Every check names a rule with a
 * grade (harness.h): only "required" failures fail the run. It needs TF's
 * libtensorflow_framework.so.2 (loaded at run time, tf.c) but neither Python
 * nor TF's runtime, so it runs well under gdb and valgrind.
 *
 * Each test runs in its own process (child.c), so a crash or a hang is
 * reported as that test's failure and the other tests still run; --no-fork
 * runs everything in this process, for gdb. Usage: --help, and
 * docs/conformance.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setenv, strsignal under -std=c11 */
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance.h"
#include "report.h"

#define RUNNER_RULES(X)                                                       \
  X(R_DEVICES_AT_LEAST, "devices.count_at_least", REQUIRED,                   \
    "get_device_count",                                                       \
    "At least --require-devices devices: asked for by whoever runs the "      \
    "harness on a machine that has the hardware (TF itself accepts 0).")      \
  X(R_SETUP_REPEATS, "registration.repeatable", REQUIRED, "SE_InitPlugin",    \
    "Registration that succeeded once succeeds in every fresh process: TF "   \
    "aborts the process when a plugin fails to register, so a plugin that "   \
    "registers only sometimes makes `import tensorflow` crash sometimes.")
CONF_RULES(conf_runner_rules, RUNNER_RULES)

extern const conf_rule* const conf_kernel_rules[];
extern const harness_test conf_kernel_tests[];

static const harness_test* const all_tests[] = {conf_generic_tests,
                                                conf_generic_streams_tests,
                                                conf_generic_work_tests,
                                                conf_generic_callbacks_tests,
                                                conf_generic_order_tests,
                                                conf_generic_faults_tests,
                                                conf_kernel_tests,
                                                NULL};
static const conf_rule* const* const all_rules[] = {
    conf_common_rules,
    conf_imports_rules,
    conf_registration_rules,
    conf_runner_rules,
    conf_generic_rules,
    conf_generic_streams_rules,
    conf_generic_work_rules,
    conf_generic_callbacks_rules,
    conf_generic_order_rules,
    conf_generic_faults_rules,
    conf_simdev_rules,
    conf_kernel_rules,
    NULL};

static void usage(FILE* f) {
  fprintf(
      f,
      "usage: simdev_conformance [options] PLUGIN.so\n"
      "\n"
      "Drives a TensorFlow PluggableDevice plugin through the StreamExecutor\n"
      "C API as TensorFlow 2.21 does, and grades what it finds:\n"
      "  required     TF rejects the plugin, aborts, hangs, corrupts data or\n"
      "               fails ops without it (only these fail the run)\n"
      "  recommended  TF tolerates it; tools or users lose something\n"
      "  simdev       simdev's own guarantees (--simdev)\n"
      "\n"
      "options:\n"
      "  --list               print the tests and every rule, then exit\n"
      "  --filter SUBSTR      run only tests whose name contains SUBSTR\n"
      "                       (repeatable; registration always runs)\n"
      "  --exclude SUBSTR     leave out tests whose name contains SUBSTR\n"
      "                       (repeatable; after --filter)\n"
      "  --json FILE          also write the results as JSON (schema 1)\n"
      "  --timeout SECONDS    per test (default 60, or $CONF_TIMEOUT); a test\n"
      "                       that runs longer is killed and fails\n"
      "  --require-devices N  fewer than N devices is a failure (default 0:\n"
      "                       a machine without the hardware reports none)\n"
      "  --strict             recommended failures fail the run too\n"
      "  --simdev             also run simdev's own checks\n"
      "  --faults SPEC        the faults.* tests' own host callbacks fail as\n"
      "                       SPEC says, in the part of SIMDEV_FAULTS's\n"
      "                       grammar a harness can inject from TF's side:\n"
      "                       callback:nth=N and callback:every=N (N\n"
      "                       decimal, >= 1), comma-separated, at most 16\n"
      "                       rules; default callback:nth=1. The other\n"
      "                       kinds (alloc, memcpy_*, launch, stream,\n"
      "                       event), p= and seed= are the plugin's own:\n"
      "                       set them through it (simdev: SIMDEV_FAULTS)\n"
      "  --no-fork            run every test in this process (for gdb);\n"
      "                       default: one process per test\n"
      "  --tf-dir DIR         the tensorflow package directory whose\n"
      "                       libtensorflow_framework.so.2 (and, for the\n"
      "                       kernel checks, libtensorflow_cc.so.2) to load:\n"
      "                       the TF release the plugin was built for\n"
      "  --preload LIB        dlopen LIB (RTLD_GLOBAL) before the plugin,\n"
      "                       repeatable; e.g. libpython3.11.so.1.0 for a\n"
      "                       plugin that links TF's Python extension\n"
      "  --lib-path DIR       add DIR to the library search path (repeatable)\n"
      "  --help               this text\n"
      "\n"
      "exit status: 0 pass, 1 a failure that fails the run, 2 usage or set-up\n"
      "error (TF not loadable, or the plugin not loadable for a reason no rule\n"
      "explains: registration.imports reports files dlopen cannot load and TF\n"
      "functions the plugin imports that TF does not export).\n");
}

/* ------------------------------------------------------------ options */

static int parse_int(const char* s, int* out) {
  char* end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < 0 || v > 1000000) return 0;
  *out = (int)v;
  return 1;
}

static int add_list(const char** list, int* n, const char* v,
                    const char* opt) {
  if (*n == CONF_MAX_LIST) {
    fprintf(stderr, "simdev_conformance: at most %d %s\n", CONF_MAX_LIST, opt);
    return 0;
  }
  list[(*n)++] = v;
  return 1;
}

/* Returns 0 to go on, or an exit status. lib_path collects --lib-path. */
static int parse(int argc, char** argv, conf_options* o, char* lib_path,
                 size_t lib_cap, int* list) {
  const char* env_timeout = getenv("CONF_TIMEOUT");
  o->timeout_s = 60;
  if (env_timeout != NULL &&
      (!parse_int(env_timeout, &o->timeout_s) || o->timeout_s == 0)) {
    fprintf(stderr,
            "simdev_conformance: CONF_TIMEOUT=%s is not a number of seconds\n",
            env_timeout);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKES_VALUE                                                    \
  do {                                                                 \
    if (v == NULL) {                                                   \
      fprintf(stderr, "simdev_conformance: %s needs a value\n", a);    \
      return 2;                                                        \
    }                                                                  \
    i++;                                                               \
  } while (0)
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return -1;
    } else if (strcmp(a, "--list") == 0) {
      *list = 1;
    } else if (strcmp(a, "--simdev") == 0) {
      o->simdev = 1;
    } else if (strcmp(a, "--strict") == 0) {
      o->strict = 1;
    } else if (strcmp(a, "--no-fork") == 0) {
      o->no_fork = 1;
    } else if (strcmp(a, "--faults") == 0) {
      TAKES_VALUE;
      char why[512];
      if (!conf_faults_option_ok(v, why, sizeof(why))) {
        fprintf(stderr, "simdev_conformance: %s\n", why);
        return 2;
      }
      /* The tests' processes inherit it (generic_faults.c reads it). */
      setenv("CONF_FAULTS", v, 1);
    } else if (strcmp(a, "--filter") == 0) {
      TAKES_VALUE;
      if (!add_list(o->filters, &o->nfilters, v, "--filter")) return 2;
    } else if (strcmp(a, "--exclude") == 0) {
      TAKES_VALUE;
      if (!add_list(o->excludes, &o->nexcludes, v, "--exclude")) return 2;
    } else if (strcmp(a, "--preload") == 0) {
      TAKES_VALUE;
      if (!add_list(o->preload, &o->npreload, v, "--preload")) return 2;
    } else if (strcmp(a, "--lib-path") == 0) {
      TAKES_VALUE;
      size_t used = strlen(lib_path);
      snprintf(lib_path + used, lib_cap - used, "%s%s", used ? ":" : "", v);
    } else if (strcmp(a, "--json") == 0) {
      TAKES_VALUE;
      o->json = v;
    } else if (strcmp(a, "--tf-dir") == 0) {
      TAKES_VALUE;
      o->tf_dir = v;
    } else if (strcmp(a, "--timeout") == 0 || strcmp(a, "--require-devices") == 0) {
      TAKES_VALUE;
      int* dst = a[2] == 't' ? &o->timeout_s : &o->require_devices;
      if (!parse_int(v, dst) || (dst == &o->timeout_s && *dst == 0)) {
        fprintf(stderr, "simdev_conformance: %s %s: not a valid number\n", a,
                v);
        return 2;
      }
    } else if (strcmp(a, "--run-test") == 0) {
      TAKES_VALUE;
      o->run_test = v;
    } else if (strcmp(a, "--child-case") == 0) {
      TAKES_VALUE;
      o->child_case = v;
    } else if (a[0] == '-') {
      fprintf(stderr, "simdev_conformance: unknown option %s (see --help)\n",
              a);
      return 2;
    } else if (o->plugin == NULL) {
      o->plugin = a;
    } else {
      fprintf(stderr,
              "simdev_conformance: one plugin per run (%s, then %s); filters "
              "are --filter SUBSTR\n",
              o->plugin, a);
      return 2;
    }
#undef TAKES_VALUE
  }
  return 0;
}

/* --lib-path: the dynamic loader reads LD_LIBRARY_PATH once, at start, so
 * the program starts again with it set (once: the marker stops a loop). */
static void reexec_with_lib_path(char** argv, const char* lib_path) {
  if (lib_path[0] == '\0' || getenv("CONF_LIB_PATH_SET") != NULL) return;
  const char* old = getenv("LD_LIBRARY_PATH");
  size_t n = strlen(lib_path) + (old ? strlen(old) : 0) + 2;
  char* value = malloc(n);
  if (value == NULL) abort();
  snprintf(value, n, "%s%s%s", lib_path, old && *old ? ":" : "",
           old ? old : "");
  setenv("LD_LIBRARY_PATH", value, 1);
  setenv("CONF_LIB_PATH_SET", "1", 1);
  free(value);
  execv("/proc/self/exe", argv);
  perror("simdev_conformance: re-executing with --lib-path");
  exit(2);
}

static void print_list(void) {
  printf("tests:\n  registration\n");
  for (int l = 0; all_tests[l] != NULL; l++) {
    for (const harness_test* t = all_tests[l]; t->name != NULL; t++) {
      printf("  %s\n", t->name);
    }
  }
  for (const harness_test* t = conf_simdev_tests; t->name != NULL; t++) {
    printf("  %s  (--simdev)\n", t->name);
  }
  printf("  teardown\n\nrules (id, grade, callback):\n");
  for (int l = 0; all_rules[l] != NULL; l++) {
    for (const conf_rule* const* r = all_rules[l]; *r != NULL; r++) {
      printf("  %-44s %-12s %s\n", (*r)->id, conf_grade_name((*r)->grade),
             (*r)->callback);
    }
  }
}

/* ------------------------------------------------------------ signals */

/* The test running in this process, for the crash message. */
static const char* volatile running = "";

static void put(const char* s) {
  ssize_t w = write(STDOUT_FILENO, s, strlen(s));
  (void)w;
}

static void on_crash(int sig) {
  char digits[24];
  digits[conf_put_num(digits, 0, sizeof(digits) - 1, sig)] = '\0';
  put("CRASH: signal ");
  put(digits);
  put(" in test '");
  put((const char*)running);
  put("'\n");
  conf_report_crash_summary(STDOUT_FILENO);
  /* Die of the same signal, so gdb, core dumps and valgrind see it. */
  signal(sig, SIG_DFL);
  raise(sig);
}

static void on_alarm(int sig) {
  (void)sig;
  put("TIMEOUT: test '");
  put((const char*)running);
  put("' did not finish (hang)\n");
  conf_report_crash_summary(STDOUT_FILENO);
  _exit(1);
}

static void install_handlers(int watchdog) {
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
    signal(sigs[i], on_crash);
  }
  if (watchdog) signal(SIGALRM, on_alarm);
}

/* ------------------------------------------------------------ running */

static const harness_test* find_test(const conf_options* o, const char* name) {
  for (int l = 0; all_tests[l] != NULL; l++) {
    for (const harness_test* t = all_tests[l]; t->name != NULL; t++) {
      if (strcmp(t->name, name) == 0) return t;
    }
  }
  for (const harness_test* t = conf_simdev_tests; o->simdev && t->name; t++) {
    if (strcmp(t->name, name) == 0) return t;
  }
  return NULL;
}

static int selected(const conf_options* o, const char* name) {
  for (int i = 0; i < o->nexcludes; i++) {
    if (strstr(name, o->excludes[i]) != NULL) return 0;
  }
  if (o->nfilters == 0) return 1;
  for (int i = 0; i < o->nfilters; i++) {
    if (strstr(name, o->filters[i]) != NULL) return 1;
  }
  return 0;
}

/* Runs t in this process (--no-fork, or the child of --run-test). */
static void run_here(conf_env* e, const harness_test* t) {
  conf_probes_reset();
  running = t->name;
  /* The run's own process has a watchdog; a test's process is watched by
   * the run's (conf_collect_child). */
  if (e->opt->run_test == NULL) alarm((unsigned)e->opt->timeout_s);
  t->fn(e);
  alarm(0);
  running = "";
  conf_gates_open_all();
}

/* Runs t in a child process and reports how that process ended. */
static void run_in_child(conf_env* e, const harness_test* t) {
  int out_fd, rec_fd;
  int pid = conf_spawn_test(e, t->name, &out_fd, &rec_fd);
  if (pid < 0) {
    conf_report_test_abort("crash", "could not start the test's process");
    return;
  }
  int status =
      conf_collect_child(pid, out_fd, rec_fd, e->opt->timeout_s, "  | ");
  char why[128];
  if (status < 0) {
    snprintf(why, sizeof(why), "did not finish within %d s (hang?)",
             e->opt->timeout_s);
    conf_report_test_abort("timeout", why);
  } else if (WIFSIGNALED(status)) {
    snprintf(why, sizeof(why), "killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
    conf_report_test_abort("crash", why);
  } else if (WEXITSTATUS(status) != 0) {
    snprintf(why, sizeof(why),
             "exited with status %d (valgrind errors? the plugin called "
             "exit?)",
             WEXITSTATUS(status));
    conf_report_test_abort("crash", why);
  }
}

static void run_test(conf_env* e, const harness_test* t) {
  conf_report_test_begin(t->name);
  if (e->ndev == 0 && !(t->flags & CONF_DEVICELESS)) {
    conf_skip("the plugin reports 0 devices (get_device_count); TF creates "
              "none either");
  } else if (e->opt->no_fork) {
    run_here(e, t);
  } else {
    run_in_child(e, t);
  }
  conf_report_test_end();
}

static void run_all(conf_env* e) {
  for (int l = 0; all_tests[l] != NULL; l++) {
    for (const harness_test* t = all_tests[l]; t->name != NULL; t++) {
      if (selected(e->opt, t->name)) run_test(e, t);
    }
  }
  for (const harness_test* t = conf_simdev_tests; e->opt->simdev && t->name;
       t++) {
    if (selected(e->opt, t->name)) run_test(e, t);
  }
}

static void teardown_test(conf_env* e) {
  conf_report_test_begin("teardown");
  running = "teardown";
  alarm((unsigned)e->opt->timeout_s);
  conf_teardown(e);
  alarm(0);
  conf_report_test_end();
}

/* The child of --run-test: registration again (its passes were counted in
 * the parent; a failure here is one), the test, teardown. Results are
 * record lines; the exit status is 0 unless something outside the checks
 * went wrong. */
static int child_test_main(conf_env* e) {
  const harness_test* t = find_test(e->opt, e->opt->run_test);
  if (t == NULL) {
    fprintf(stderr, "simdev_conformance: no test '%s'\n", e->opt->run_test);
    return 2;
  }
  running = t->name;
  conf_report_quiet(1);
  int ok = conf_load(e, e->opt->plugin) && conf_setup(e, CONF_MAX_DEVICES);
  conf_report_quiet(0);
  ok = ok && (e->ndev > 0 || (t->flags & CONF_DEVICELESS));
  if (!ok) {
    /* Only a failure is recorded: the passes were the parent's. */
    EXPECT(R_SETUP_REPEATS, 0,
           "registration or device creation failed in the test's own "
           "process (%d devices)",
           e->ndev);
  }
  if (!ok) return 0;
  run_here(e, t);
  conf_teardown(e);
  return 0;
}

static int child_case_main(conf_env* e) {
  running = e->opt->child_case;
  const conf_child_case* c = conf_child_cases;
  while (c->name != NULL && strcmp(c->name, e->opt->child_case) != 0) c++;
  if (c->name == NULL) {
    fprintf(stderr, "simdev_conformance: no child case '%s'\n",
            e->opt->child_case);
    return 2;
  }
  if (conf_load(e, e->opt->plugin)) c->fn(e);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  static conf_options opt;
  static char lib_path[4096];
  int list = 0;
  int rc = parse(argc, argv, &opt, lib_path, sizeof(lib_path), &list);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if (list) {
    print_list();
    return 0;
  }
  if (opt.plugin == NULL) {
    usage(stderr);
    return 2;
  }
  reexec_with_lib_path(argv, lib_path);
  conf_set_timeout_s(opt.timeout_s);

  int child = opt.run_test != NULL || opt.child_case != NULL;
  conf_report_config rc_cfg = {.child = child,
                               .record_fd = CONF_RECORD_FD,
                               .simdev = opt.simdev,
                               .strict = opt.strict,
                               .tables = all_rules};
  conf_report_init(&rc_cfg);
  char err[2048];
  if (conf_tf_load(opt.tf_dir, err, sizeof(err)) != 0) {
    fprintf(stderr, "simdev_conformance: %s\n", err);
    return 2;
  }
  static conf_env env;
  conf_env* e = &env;
  e->opt = &opt;
  e->device_count = -1;
  e->st = conf_status_new();
  install_handlers(!child);
  if (opt.run_test != NULL) return child_test_main(e);
  if (opt.child_case != NULL) return child_case_main(e);

  conf_report_test_begin("registration");
  running = "registration";
  alarm((unsigned)opt.timeout_s);
  int loaded = conf_load(e, opt.plugin);
  if (!loaded && e->dl == NULL && !conf_report_run_failed()) {
    /* dlopen failed; conf_load printed why and what to try: a set-up
     * error, not a verdict on the plugin. When registration.imports failed
     * (the file is not loadable, or TF lacks functions it imports), that is
     * the verdict: reported below like any failure. */
    return 2;
  }
  int registered = loaded && conf_setup(e, CONF_MAX_DEVICES);
  alarm(0);
  if (registered && opt.require_devices > 0) {
    EXPECT_CMP(R_DEVICES_AT_LEAST, e->device_count, >=, opt.require_devices,
               "get_device_count");
  }
  conf_report_test_end();
  if (registered) {
    printf("  plugin: platform %s, type %s, %d device(s)%s\n",
           e->platform.name, e->platform.type, e->device_count,
           e->device_count == 0 ? ": device checks are skipped" : "");
  }
  conf_report_meta meta = {.plugin = opt.plugin,
                           .platform_name =
                               registered ? e->platform.name : NULL,
                           .platform_type =
                               registered ? e->platform.type : NULL,
                           .device_count = e->device_count,
                           .devices_tested = e->ndev};
  /* Copies: teardown hands the structs back to the plugin. */
  static char name[128], type[128];
  if (registered) {
    snprintf(name, sizeof(name), "%s", e->platform.name);
    snprintf(type, sizeof(type), "%s", e->platform.type);
    meta.platform_name = name;
    meta.platform_type = type;
  }
  if (registered) {
    if (opt.no_fork) {
      run_all(e);
      teardown_test(e);
    } else {
      /* The children open the devices themselves: release them first (a
       * real device may allow one process at a time). */
      int ndev = e->ndev;
      teardown_test(e);
      e->ndev = ndev; /* what the children will create */
      run_all(e);
      e->ndev = 0;
    }
  }
  /* Like TF, never dlclose a plugin: its threads and atexit handlers may
   * still reference its code. */
  conf_status_free(e->st);
  conf_report_print_summary(&meta);
  if (opt.json != NULL && conf_report_write_json(opt.json, &meta) != 0) {
    return 2;
  }
  return conf_report_run_failed() ? 1 : 0;
}
