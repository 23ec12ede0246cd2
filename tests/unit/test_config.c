/*
 * test_config.c - sim_config_from_env, sim_strerror, and the checked
 * pthread calls of sim.h (SIM_CHECK_PT, sim_mutex_trylock).
 *
 * Each test starts with every SIMDEV_* variable of kVars unset; the
 * teardown restores whatever the environment had before.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static const char* const kVars[] = {
    "SIMDEV_DEVICE_COUNT", "SIMDEV_MEMORY_MB",
    "SIMDEV_SYNC",         "SIMDEV_UNSAFE_EARLY_COMPLETION",
    "SIMDEV_DISABLE",      "SIMDEV_INLINE",
    "SIMDEV_TRACE",        "SIMDEV_TRACE_EVENTS",
    "SIMDEV_DISCRETE",     "SIMDEV_BFC",
    "SIMDEV_FAULTS"};

typedef struct saved_env {
  char* value[TU_ARRAY_SIZE(kVars)];
} saved_env;

static int setup(void** state) {
  saved_env* s = (saved_env*)calloc(1, sizeof(*s));
  if (s == NULL) return -1;
  for (size_t i = 0; i < TU_ARRAY_SIZE(kVars); i++) {
    const char* v = getenv(kVars[i]);
    s->value[i] = v ? strdup(v) : NULL;
    unsetenv(kVars[i]);
  }
  *state = s;
  return 0;
}

static int teardown(void** state) {
  saved_env* s = (saved_env*)*state;
  for (size_t i = 0; i < TU_ARRAY_SIZE(kVars); i++) {
    if (s->value[i] != NULL)
      setenv(kVars[i], s->value[i], 1);
    else
      unsetenv(kVars[i]);
    free(s->value[i]);
  }
  free(s);
  return 0;
}

static void defaults(void** state) {
  sim_config cfg;
  memset(&cfg, 0xab, sizeof(cfg));
  char msg[256] = "";
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.device_count, 1);
  assert_int_equal(cfg.memory_mb, 2048);
  assert_int_equal(cfg.disabled, 0);
}

static void expect_invalid(const char* var, const char* value);

/* SIMDEV_DISABLE=1 wins over every other variable, even invalid ones, so it
 * can switch off a plugin whose settings are broken; "0" changes nothing; any
 * other value is an error like every other setting's. */
static void disable_switch(void** state) {
  sim_config cfg;
  char msg[256] = "";
  setenv("SIMDEV_MEMORY_MB", "2g", 1);
  setenv("SIMDEV_DISABLE", "1", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.disabled, 1);
  assert_int_equal(cfg.device_count, 0);
  setenv("SIMDEV_DISABLE", "0", 1);
  expect_invalid("SIMDEV_MEMORY_MB", "2g");
  unsetenv("SIMDEV_MEMORY_MB");
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.disabled, 0);
  assert_int_equal(cfg.device_count, 1);
  static const char* const bad[] = {"2", "yes", "true", "-1", ""};
  for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++)
    expect_invalid("SIMDEV_DISABLE", bad[i]);
}

static void valid_values(void** state) {
  static const struct {
    const char* count;
    const char* mb;
    int want_count;
    uint64_t want_mb;
  } cases[] = {
      {"4", "64", 4, 64},
      {"1", "1", 1, 1},
      {"16", "1048576", 16, SIM_MAX_MEMORY_MB},
      {"2", "4096", 2, 4096},
  };
  for (size_t i = 0; i < TU_ARRAY_SIZE(cases); i++) {
    setenv("SIMDEV_DEVICE_COUNT", cases[i].count, 1);
    setenv("SIMDEV_MEMORY_MB", cases[i].mb, 1);
    sim_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    char msg[256] = "";
    assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
    assert_int_equal(cfg.device_count, cases[i].want_count);
    assert_int_equal(cfg.memory_mb, cases[i].want_mb);
  }
}

/* Only one variable set: the other keeps its default. */
static void one_var_set(void** state) {
  sim_config cfg;
  char msg[256];
  setenv("SIMDEV_MEMORY_MB", "128", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.device_count, 1);
  assert_int_equal(cfg.memory_mb, 128);

  unsetenv("SIMDEV_MEMORY_MB");
  setenv("SIMDEV_DEVICE_COUNT", "3", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.device_count, 3);
  assert_int_equal(cfg.memory_mb, 2048);
}

/* Sets var to `len` bytes of 'a', one more than its field holds: expects
 * SIM_EINVAL and a message naming var (the value is too long to quote). */
static void expect_too_long(const char* var, size_t len) {
  char* big = (char*)malloc(len + 1);
  assert_non_null(big);
  memset(big, 'a', len);
  big[len] = '\0';
  setenv(var, big, 1);
  free(big);
  sim_config cfg;
  char msg[512];
  memset(msg, 'X', sizeof(msg));
  int rc = sim_config_from_env(&cfg, msg, sizeof(msg));
  unsetenv(var);
  assert_int_equal(rc, SIM_EINVAL);
  assert_non_null(memchr(msg, '\0', sizeof(msg)));
  assert_non_null(strstr(msg, var));
}

/* Sets var=value, expects SIM_EINVAL and a message naming var and value. */
static void expect_invalid(const char* var, const char* value) {
  setenv(var, value, 1);
  sim_config cfg;
  char msg[512];
  memset(msg, 'X', sizeof(msg));
  int rc = sim_config_from_env(&cfg, msg, sizeof(msg));
  if (rc != SIM_EINVAL)
    fail_msg("%s=\"%s\": want SIM_EINVAL, got %d", var, value, rc);
  if (memchr(msg, '\0', sizeof(msg)) == NULL)
    fail_msg("%s=\"%s\": message not NUL-terminated", var, value);
  if (strstr(msg, var) == NULL)
    fail_msg("%s=\"%s\": message does not name the variable: \"%s\"", var,
             value, msg);
  if (strstr(msg, value) == NULL)
    fail_msg("%s=\"%s\": message does not show the value: \"%s\"", var, value,
             msg);
  unsetenv(var);
}

static void invalid_memory_mb(void** state) {
  static const char* const bad[] = {
      "abc",
      "0",
      "-5",
      "12abc",
      "99999999999999999999999999", /* overflows uint64 */
      "18446744073709551617",       /* 2^64 + 1 */
      "1048577",                    /* SIM_MAX_MEMORY_MB + 1 */
      "-1",
  };
  for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++)
    expect_invalid("SIMDEV_MEMORY_MB", bad[i]);
}

static void invalid_device_count(void** state) {
  static const char* const bad[] = {"0",  "17", "x",
                                    "-1", "1x", "99999999999999999999"};
  for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++)
    expect_invalid("SIMDEV_DEVICE_COUNT", bad[i]);
}

/* The launch switches are strict 0/1 flags, off by default. */
static void launch_flags(void** state) {
  char msg[256];
  sim_config cfg;
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.sync_launch, 0);
  assert_int_equal(cfg.unsafe_early_completion, 0);
  setenv("SIMDEV_SYNC", "1", 1);
  setenv("SIMDEV_UNSAFE_EARLY_COMPLETION", "1", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.sync_launch, 1);
  assert_int_equal(cfg.unsafe_early_completion, 1);
  unsetenv("SIMDEV_UNSAFE_EARLY_COMPLETION");
  static const char* const bad[] = {"2", "yes", "-1", "", "1x"};
  for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++) {
    expect_invalid("SIMDEV_SYNC", bad[i]);
    expect_invalid("SIMDEV_UNSAFE_EARLY_COMPLETION", bad[i]);
  }
}

/* SIMDEV_TRACE: any non-empty path (not opened here), "" when unset;
 * SIMDEV_TRACE_EVENTS: 1024..SIM_TRACE_MAX_RECORDS, default
 * SIM_TRACE_DEFAULT_RECORDS. */
static void trace_settings(void** state) {
  char msg[256];
  sim_config cfg;
  memset(&cfg, 0xab, sizeof(cfg));
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_string_equal(cfg.trace_path, "");
  assert_int_equal(cfg.trace_records, SIM_TRACE_DEFAULT_RECORDS);
  setenv("SIMDEV_TRACE", "/no/such/dir/t.json", 1);
  setenv("SIMDEV_TRACE_EVENTS", "1024", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_string_equal(cfg.trace_path, "/no/such/dir/t.json");
  assert_int_equal(cfg.trace_records, 1024);
  setenv("SIMDEV_TRACE_EVENTS", "1048576", 1); /* SIM_TRACE_MAX_RECORDS */
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.trace_records, SIM_TRACE_MAX_RECORDS);
  unsetenv("SIMDEV_TRACE_EVENTS");
  static const char* const bad[] = {"1023", "0", "1048577", "64k", "", "-1"};
  for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++)
    expect_invalid("SIMDEV_TRACE_EVENTS", bad[i]);
  /* Set but empty, and longer than trace_path holds: errors. */
  expect_invalid("SIMDEV_TRACE", "");
  size_t n = sizeof(cfg.trace_path);
  expect_too_long("SIMDEV_TRACE", n);
  /* The longest that fits is accepted. */
  char* big = (char*)malloc(n);
  assert_non_null(big);
  memset(big, 'b', n - 1);
  big[n - 1] = '\0';
  setenv("SIMDEV_TRACE", big, 1);
  int rc = sim_config_from_env(&cfg, msg, sizeof(msg));
  unsetenv("SIMDEV_TRACE");
  assert_int_equal(rc, SIM_OK);
  assert_int_equal(strlen(cfg.trace_path), n - 1);
  free(big);
}

/* The debugging switches (docs/debugging.md): SIMDEV_DISCRETE and SIMDEV_BFC
 * are 0/1 like the others; SIMDEV_FAULTS is copied whole (its grammar is
 * faults.c's, tested in test_faults.c), set-but-empty meaning no plan, and a
 * value too long for the field is an error, not a truncated plan. */
static void debug_settings(void** state) {
  char msg[256];
  sim_config cfg;
  memset(&cfg, 0xab, sizeof(cfg));
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.discrete, 0);
  assert_int_equal(cfg.bfc, 1);
  assert_string_equal(cfg.faults, "");
  setenv("SIMDEV_DISCRETE", "1", 1);
  setenv("SIMDEV_BFC", "0", 1);
  setenv("SIMDEV_FAULTS", "", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.discrete, 1);
  assert_int_equal(cfg.bfc, 0);
  assert_string_equal(cfg.faults, "");
  unsetenv("SIMDEV_DISCRETE");
  unsetenv("SIMDEV_BFC");
  static const char* const bad[] = {"2", "yes", "", "-1", "1 1"};
  for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++) {
    expect_invalid("SIMDEV_DISCRETE", bad[i]);
    expect_invalid("SIMDEV_BFC", bad[i]);
  }
  expect_too_long("SIMDEV_FAULTS", sizeof(cfg.faults));
  /* SIMDEV_DISABLE=1 still wins: the new variables are not read then. */
  setenv("SIMDEV_DISABLE", "1", 1);
  setenv("SIMDEV_DISCRETE", "nonsense", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.disabled, 1);
  assert_int_equal(cfg.bfc, 1);
  unsetenv("SIMDEV_DISABLE");
  unsetenv("SIMDEV_DISCRETE");
}

/* An alloc rule with SIMDEV_BFC unset turns BFC off (and says so through
 * bfc_off_for_faults); SIMDEV_BFC given either way is obeyed; rules of
 * other kinds leave BFC on. */
static void alloc_rule_turns_bfc_off(void** state) {
  char msg[256];
  sim_config cfg;
  setenv("SIMDEV_FAULTS", "alloc:nth=3", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.bfc, 0);
  assert_int_equal(cfg.bfc_off_for_faults, 1);
  setenv("SIMDEV_FAULTS", "launch:nth=2,seed=4,alloc:p=0.5", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.bfc, 0);
  assert_int_equal(cfg.bfc_off_for_faults, 1);
  setenv("SIMDEV_BFC", "1", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.bfc, 1);
  assert_int_equal(cfg.bfc_off_for_faults, 0);
  setenv("SIMDEV_BFC", "0", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.bfc, 0);
  assert_int_equal(cfg.bfc_off_for_faults, 0);
  unsetenv("SIMDEV_BFC");
  setenv("SIMDEV_FAULTS", "launch:nth=2,event:every=3", 1);
  assert_int_equal(sim_config_from_env(&cfg, msg, sizeof(msg)), SIM_OK);
  assert_int_equal(cfg.bfc, 1);
  assert_int_equal(cfg.bfc_off_for_faults, 0);
  assert_int_equal(
      sim_faults_has("launch:nth=2,event:every=3", SIM_FAULT_EVENT), 1);
  assert_int_equal(sim_faults_has("launch:nth=2", SIM_FAULT_ALLOC), 0);
  assert_int_equal(sim_faults_has("alloc:bogus=1", SIM_FAULT_ALLOC), 0);
  assert_int_equal(sim_faults_has(NULL, SIM_FAULT_ALLOC), 0);
  unsetenv("SIMDEV_FAULTS");
}

/* A bad value next to a good one: still an error naming the bad variable. */
static void invalid_with_other_valid(void** state) {
  setenv("SIMDEV_MEMORY_MB", "64", 1);
  expect_invalid("SIMDEV_DEVICE_COUNT", "17");
  setenv("SIMDEV_DEVICE_COUNT", "2", 1);
  expect_invalid("SIMDEV_MEMORY_MB", "abc");
}

/* The message is truncated to msg_len and NUL-terminated; nothing past
 * msg_len is written. */
static void message_truncated(void** state) {
  setenv("SIMDEV_MEMORY_MB", "12abc", 1);
  char buf[16];
  memset(buf, 'Z', sizeof(buf));
  sim_config cfg;
  assert_int_equal(sim_config_from_env(&cfg, buf, 8), SIM_EINVAL);
  assert_non_null(memchr(buf, '\0', 8));
  for (size_t i = 8; i < sizeof(buf); i++) assert_int_equal(buf[i], 'Z');
}

static void null_cfg(void** state) {
  char msg[64];
  assert_int_equal(sim_config_from_env(NULL, msg, sizeof(msg)), SIM_EINVAL);
}

static void strerror_all(void** state) {
  static const int codes[] = {SIM_OK,      SIM_EINVAL,  SIM_ENOMEM,
                              SIM_ESTREAM, SIM_EFAILED, SIM_ENOTREADY,
                              SIM_ESYS};
  for (size_t i = 0; i < TU_ARRAY_SIZE(codes); i++) {
    const char* s = sim_strerror(codes[i]);
    assert_non_null(s);
    assert_true(strlen(s) > 0);
    /* Distinct codes get distinct strings. */
    for (size_t j = 0; j < i; j++)
      assert_string_not_equal(s, sim_strerror(codes[j]));
  }
  /* Unknown codes: still a string, never NULL. */
  assert_non_null(sim_strerror(-1000));
  assert_non_null(sim_strerror(42));
}

/* The failing call: a mutex attribute of an invalid type (EINVAL: defined
 * behaviour, and no lock that helgrind would see misused). */
enum { kFailLine = __LINE__ + 2 }; /* the SIM_CHECK_PT line just below */
static void fail_a_pthread_call(pthread_mutexattr_t* a) {
  SIM_CHECK_PT(pthread_mutexattr_settype(a, -1));
}

/* SIM_CHECK_PT, behind sim_mutex_lock and the other wrappers: a failing
 * pthread call aborts with the caller's file and line, the call and its
 * error. In a forked child. */
static void pthread_failure_names_caller(void** state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0) _exit(3);
    fail_a_pthread_call(&a);
    _exit(0);
  }
  close(fds[1]);
  char text[4096];
  size_t n = 0;
  ssize_t r;
  while ((r = read(fds[0], text + n, sizeof(text) - 1 - n)) > 0) n += (size_t)r;
  text[n] = '\0';
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
    fail_msg("the child did not abort (status %#x):\n%s", status, text);
  char want[512];
  snprintf(want, sizeof(want),
           "simdev: %s:%d: invariant failed: pthread_mutexattr_settype(a, -1) "
           "returned %d (%s)\n",
           __FILE__, (int)kFailLine, EINVAL, strerror(EINVAL));
  if (strstr(text, want) == NULL)
    fail_msg("report lacks \"%s\":\n%s", want, text);
}

/* sim_mutex_trylock: 1 when it took the lock, 0 when the lock is held
 * (EBUSY, here held by this very thread), and the lock usable after. */
static void trylock_reports_busy(void** state) {
  (void)state;
  pthread_mutex_t m;
  sim_mutex_init(&m);
  assert_int_equal(sim_mutex_trylock(&m), 1);
  assert_int_equal(sim_mutex_trylock(&m), 0);
  sim_mutex_unlock(&m);
  assert_int_equal(sim_mutex_trylock(&m), 1);
  sim_mutex_unlock(&m);
  sim_mutex_destroy(&m);
}

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(launch_flags, setup, teardown),
      cmocka_unit_test_setup_teardown(trace_settings, setup, teardown),
      cmocka_unit_test_setup_teardown(debug_settings, setup, teardown),
      cmocka_unit_test_setup_teardown(defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(disable_switch, setup, teardown),
      cmocka_unit_test_setup_teardown(valid_values, setup, teardown),
      cmocka_unit_test_setup_teardown(one_var_set, setup, teardown),
      cmocka_unit_test_setup_teardown(invalid_memory_mb, setup, teardown),
      cmocka_unit_test_setup_teardown(invalid_device_count, setup, teardown),
      cmocka_unit_test_setup_teardown(invalid_with_other_valid, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(message_truncated, setup, teardown),
      cmocka_unit_test_setup_teardown(alloc_rule_turns_bfc_off, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(null_cfg, setup, teardown),
      cmocka_unit_test_setup_teardown(strerror_all, setup, teardown),
      cmocka_unit_test(pthread_failure_names_caller),
      cmocka_unit_test(trylock_reports_busy),
  };
  return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
