/*
 * test_faults.c - SIMDEV_FAULTS (faults.c and its sites): the grammar and
 * every error it reports, each kind failing exactly the operation its rule
 * names and nothing else, the counters (exact under concurrent
 * allocations), p's determinism under a seed,
 * sticky stream errors, and memory stats after an injected alloc failure.
 */
#include "testutil.h"

/* Every test installs its own plan; the teardown removes it. */
static int teardown(void** state) {
  assert_int_equal(sim_faults_set(NULL, NULL, 0), SIM_OK);
  return tu_teardown(state);
}

static void set_plan(const char* spec) {
  char msg[256];
  int err = sim_faults_set(spec, msg, sizeof(msg));
  if (err != SIM_OK) fail_msg("sim_faults_set(\"%s\"): %s", spec, msg);
}

/* ---- grammar ------------------------------------------------------------ */

static void grammar_valid(void** state) {
  static const char* const ok[] = {
      "",
      "alloc:nth=5",
      "alloc:after_bytes=64M",
      "alloc:after_bytes=3K,alloc:after_bytes=1G,alloc:after_bytes=100",
      "memcpy_h2d:every=100",
      "memcpy_d2h:p=0.25,memcpy_d2d:p=1,seed=42",
      "launch:op=MatMul:nth=3",
      "launch:nth=3:op=MatMul",
      "launch:every=7",
      "stream:fail_at=1000",
      "event:nth=2",
      "callback:nth=1",
      "seed=0,callback:p=.5",
      "alloc:nth=9223372036854775808",
  };
  char msg[256];
  for (size_t i = 0; i < TU_ARRAY_SIZE(ok); i++) {
    int err = sim_faults_check(ok[i], msg, sizeof(msg));
    if (err != SIM_OK) fail_msg("\"%s\" refused: %s", ok[i], msg);
  }
  assert_int_equal(sim_faults_check(NULL, msg, sizeof(msg)), SIM_OK);
}

static void grammar_errors(void** state) {
  /* spec, the rule the message must quote, what it must say */
  static const char* const bad[][3] = {
      {"alloc:nth=5,allok:nth=1", "allok:nth=1", "unknown kind"},
      {"alloc", "alloc", "no trigger"},
      {"launch:op=MatMul", "launch:op=MatMul", "no trigger"},
      {"alloc:nth", "alloc:nth", "expected key=value"},
      {"alloc:=5", "alloc:=5", "expected key=value"},
      {"alloc:count=5", "alloc:count=5", "unknown key \"count\""},
      {"alloc:nth=1:nth=2", "alloc:nth=1:nth=2", "duplicate key \"nth\""},
      {"launch:op=A:op=B:nth=1", "launch:op=A:op=B:nth=1", "duplicate key"},
      {"alloc:nth=1:every=2", "alloc:nth=1:every=2", "more than one trigger"},
      {"memcpy_h2d:after_bytes=1K", "memcpy_h2d:after_bytes=1K",
       "not valid for memcpy_h2d"},
      {"alloc:op=MatMul:nth=1", "alloc:op=MatMul:nth=1", "not valid for alloc"},
      {"stream:nth=3", "stream:nth=3", "not valid for stream"},
      {"event:fail_at=3", "event:fail_at=3", "not valid for event"},
      {"alloc:nth=", "alloc:nth=", "decimal count"},
      {"alloc:nth=0", "alloc:nth=0", "counts start at 1"},
      {"alloc:every=0", "alloc:every=0", "counts start at 1"},
      {"stream:fail_at=0", "stream:fail_at=0", "counts start at 1"},
      {"alloc:nth=-1", "alloc:nth=-1", "decimal count"},
      {"alloc:nth=+1", "alloc:nth=+1", "decimal count"},
      {"alloc:nth=1x", "alloc:nth=1x", "decimal count"},
      {"alloc:nth=0x10", "alloc:nth=0x10", "decimal count"},
      {"alloc:nth=99999999999999999999", "alloc:nth=99999999999999999999",
       "decimal count"},
      {"alloc:after_bytes=64m", "alloc:after_bytes=64m", "bad size suffix"},
      {"alloc:after_bytes=64MB", "alloc:after_bytes=64MB", "after_bytes"},
      {"alloc:after_bytes=0", "alloc:after_bytes=0", "at least 1"},
      {"alloc:after_bytes=K", "alloc:after_bytes=K", "after_bytes"},
      {"alloc:after_bytes=9999999999999G", "alloc:after_bytes=9999999999999G",
       "too large"},
      {"alloc:p=0", "alloc:p=0", "(0, 1]"},
      {"alloc:p=1.5", "alloc:p=1.5", "(0, 1]"},
      {"alloc:p=-0.5", "alloc:p=-0.5", "(0, 1]"},
      {"alloc:p=1e-3", "alloc:p=1e-3", "(0, 1]"},
      {"alloc:p=.", "alloc:p=.", "(0, 1]"},
      {"alloc:nth=1,,event:nth=1", "", "empty rule"},
      {"alloc:nth=1,", "", "empty rule"},
      {"alloc: nth=1", "alloc: nth=1", "no spaces"},
      {"seed=1,seed=2,alloc:nth=1", "seed=2", "seed given twice"},
      {"seed=x", "seed=x", "seed= needs"},
  };
  char msg[512];
  for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++) {
    msg[0] = '\0';
    int err = sim_faults_check(bad[i][0], msg, sizeof(msg));
    if (err != SIM_EINVAL) fail_msg("\"%s\" accepted (%d)", bad[i][0], err);
    char quoted[128];
    snprintf(quoted, sizeof(quoted), "rule \"%s\"", bad[i][1]);
    if (strstr(msg, "SIMDEV_FAULTS") == NULL || strstr(msg, quoted) == NULL ||
        strstr(msg, bad[i][2]) == NULL)
      fail_msg("\"%s\": message \"%s\" lacks SIMDEV_FAULTS, %s or \"%s\"",
               bad[i][0], msg, quoted, bad[i][2]);
    /* sim_faults_set refuses it the same way. */
    assert_int_equal(sim_faults_set(bad[i][0], msg, sizeof(msg)), SIM_EINVAL);
  }
  /* More rules than the plan holds. */
  char many[1024] = "";
  for (int i = 0; i < 33; i++) strcat(many, i ? ",event:nth=1" : "event:nth=1");
  assert_int_equal(sim_faults_check(many, msg, sizeof(msg)), SIM_EINVAL);
  assert_non_null(strstr(msg, "more than 32 rules"));
}

/* A refused plan leaves the installed one (and its counts) in force. */
static void bad_set_keeps_plan(void** state) {
  tu_fix* f = *state;
  set_plan("alloc:nth=2");
  void* a = sim_mem_alloc(f->dev, 64);
  char msg[256];
  assert_int_equal(sim_faults_set("alloc:nth=x", msg, sizeof(msg)), SIM_EINVAL);
  void* b = sim_mem_alloc(f->dev, 64); /* still the 2nd: refused */
  assert_non_null(a);
  assert_null(b);
  assert_int_equal(sim_faults_injected(SIM_FAULT_ALLOC), 1);
  sim_mem_free(f->dev, a);
}

/* ---- alloc -------------------------------------------------------------- */

static void alloc_nth_every(void** state) {
  tu_fix* f = *state;
  sim_mem_stats before, after;
  sim_mem_get_stats(f->dev, &before);
  set_plan("alloc:nth=3");
  void* p[6];
  for (int i = 0; i < 6; i++) p[i] = sim_mem_alloc(f->dev, 1000);
  for (int i = 0; i < 6; i++)
    if ((p[i] == NULL) != (i == 2)) fail_msg("allocation %d: %p", i + 1, p[i]);
  assert_int_equal(sim_faults_injected(SIM_FAULT_ALLOC), 1);
  /* sim_faults_last speaks of event records only. */
  char msg[256];
  assert_int_equal(sim_faults_last(msg, sizeof(msg)), 0);
  sim_mem_get_stats(f->dev, &after);
  assert_int_equal(after.num_failed, before.num_failed + 1);
  assert_int_equal(after.num_allocs, before.num_allocs + 5);
  for (int i = 0; i < 6; i++) sim_mem_free(f->dev, p[i]);

  set_plan("alloc:every=2"); /* counts start again at 1 */
  assert_int_equal(sim_faults_injected(SIM_FAULT_ALLOC), 0);
  for (int i = 0; i < 6; i++) p[i] = sim_mem_alloc(f->dev, 64);
  for (int i = 0; i < 6; i++)
    if ((p[i] == NULL) != (i % 2 == 1))
      fail_msg("every=2: allocation %d", i + 1);
  assert_int_equal(sim_faults_injected(SIM_FAULT_ALLOC), 3);
  for (int i = 0; i < 6; i++) sim_mem_free(f->dev, p[i]);

  /* Memory is as it was: an injected failure took nothing. */
  sim_mem_get_stats(f->dev, &after);
  assert_int_equal(after.bytes_in_use, before.bytes_in_use);
  assert_int_equal(after.num_failed, before.num_failed + 4);
  assert_int_equal(after.num_frees, before.num_frees + 8);
}

/* after_bytes counts bytes requested, failed requests included: once past
 * the limit every allocation fails, even an empty one. */
static void alloc_after_bytes(void** state) {
  tu_fix* f = *state;
  set_plan("alloc:after_bytes=1K");
  void* a = sim_mem_alloc(f->dev, 512);
  void* b = sim_mem_alloc(f->dev, 512); /* total 1024: not above */
  void* c = sim_mem_alloc(f->dev, 1);   /* 1025: refused */
  void* d = sim_mem_alloc(f->dev, 0);
  sim_mem_free(f->dev, a); /* frees give nothing back */
  void* e = sim_mem_alloc(f->dev, 64);
  assert_non_null(a);
  assert_non_null(b);
  assert_null(c);
  assert_null(d);
  assert_null(e);
  assert_int_equal(sim_faults_injected(SIM_FAULT_ALLOC), 3);
  sim_mem_free(f->dev, b);
}

/* p is a pure function of (seed, rule, operation number): the same seed
 * gives the same failures, another seed others. */
static void alloc_p_deterministic(void** state) {
  tu_fix* f = *state;
  enum { N = 256 };
  int pattern[3][N];
  const char* specs[3] = {"seed=7,alloc:p=0.5", "alloc:p=0.5,seed=7",
                          "seed=8,alloc:p=0.5"};
  for (int r = 0; r < 3; r++) {
    set_plan(specs[r]);
    for (int i = 0; i < N; i++) {
      void* p = sim_mem_alloc(f->dev, 64);
      pattern[r][i] = p == NULL;
      sim_mem_free(f->dev, p);
    }
  }
  int fails = 0, differ = 0;
  for (int i = 0; i < N; i++) {
    if (pattern[0][i] != pattern[1][i]) fail_msg("seed 7 differs at %d", i);
    fails += pattern[0][i];
    differ += pattern[0][i] != pattern[2][i];
  }
  /* Binomial(256, 0.5): 128 +- 8; outside [64, 192] the hash is broken. */
  if (fails < 64 || fails > 192) fail_msg("p=0.5 failed %d of %d", fails, N);
  assert_true(differ > 0);
  set_plan("alloc:p=1");
  void* p = sim_mem_alloc(f->dev, 64);
  assert_null(p);
}

/* Allocations from several threads at once: a rule counts every matching
 * operation exactly once, whatever the interleaving, so the number of
 * failures is the plan's, not the schedule's (which thread meets them is
 * the schedule's). */
enum { kAllocThreads = 4, kAllocsEach = 1000 };

typedef struct alloc_thread {
  pthread_t th;
  sim_device* dev;
  pthread_barrier_t* start;
  int nulls;
} alloc_thread;

static void* alloc_thread_main(void* arg) {
  alloc_thread* t = arg;
  pthread_barrier_wait(t->start); /* all threads allocate together */
  for (int i = 0; i < kAllocsEach; i++) {
    void* p = sim_mem_alloc(t->dev, 64);
    if (p == NULL) t->nulls++;
    sim_mem_free(t->dev, p);
  }
  return NULL;
}

/* Runs kAllocThreads x kAllocsEach allocations under spec; checks that
 * exactly `want` failed, by the threads' count, the fault counter and the
 * device's num_failed. */
static void threads_fail_exactly(tu_fix* f, const char* spec, int want) {
  sim_mem_stats before, after;
  sim_mem_get_stats(f->dev, &before);
  set_plan(spec);
  alloc_thread* t = tu_calloc(f, kAllocThreads, sizeof(*t));
  pthread_barrier_t start;
  TU_PT(pthread_barrier_init(&start, NULL, kAllocThreads));
  for (int i = 0; i < kAllocThreads; i++) {
    t[i].dev = f->dev;
    t[i].start = &start;
    TU_PT(pthread_create(&t[i].th, NULL, alloc_thread_main, &t[i]));
  }
  int nulls = 0;
  for (int i = 0; i < kAllocThreads; i++) {
    TU_PT(pthread_join(t[i].th, NULL));
    nulls += t[i].nulls;
  }
  TU_PT(pthread_barrier_destroy(&start));
  sim_mem_get_stats(f->dev, &after);
  if (nulls != want || sim_faults_injected(SIM_FAULT_ALLOC) != (uint64_t)want ||
      after.num_failed - before.num_failed != (uint64_t)want)
    fail_msg("%s: %d NULLs, %llu injected, %llu num_failed; want %d", spec,
             nulls, (unsigned long long)sim_faults_injected(SIM_FAULT_ALLOC),
             (unsigned long long)(after.num_failed - before.num_failed), want);
  assert_int_equal(after.num_allocs - before.num_allocs,
                   kAllocThreads * kAllocsEach - want);
  assert_int_equal(after.bytes_in_use, before.bytes_in_use);
}

static void alloc_threads_exact(void** state) {
  tu_fix* f = *state;
  threads_fail_exactly(f, "alloc:every=10", kAllocThreads * kAllocsEach / 10);
  threads_fail_exactly(f, "alloc:nth=1234", 1);
}

/* ---- stream items ------------------------------------------------------- */

/* A copy of n bytes of kind `kind` from src to dst on s. */
static void copy(sim_stream* s, void* dst, const void* src, int kind) {
  assert_int_equal(sim_memcpy_async_kind(s, dst, src, 8, kind), SIM_OK);
}

static void memcpy_kinds(void** state) {
  tu_fix* f = *state;
  sim_stream* s = f->s[0];
  char* dev = sim_mem_alloc(f->dev, 64);
  char* host = tu_calloc(f, 1, 64);
  assert_non_null(dev);
  memcpy(host, "AAAAAAAA", 8);
  set_plan("memcpy_d2h:nth=2");
  copy(s, dev, host, SIM_TRACE_MEMCPY_H2D);     /* not a d2h */
  copy(s, host + 8, dev, SIM_TRACE_MEMCPY_D2H); /* d2h 1: done */
  copy(s, dev + 8, dev, SIM_TRACE_MEMCPY_D2D);  /* not a d2h */
  memcpy(host + 32, "BBBBBBBB", 8);
  copy(s, host + 32, dev, SIM_TRACE_MEMCPY_D2H); /* d2h 2: fails */
  copy(s, host + 40, dev, SIM_TRACE_MEMCPY_H2H); /* drained */
  assert_int_equal(sim_stream_synchronize(s), SIM_EFAILED);
  assert_memory_equal(host + 8, "AAAAAAAA", 8);
  assert_memory_equal(host + 32, "BBBBBBBB", 8); /* not copied */
  assert_memory_equal(host + 40, "\0\0\0\0\0\0\0\0", 8);
  char msg[256];
  assert_int_equal(sim_stream_status(s, msg, sizeof(msg)), SIM_EFAILED);
  if (strncmp(msg, "injected by SIMDEV_FAULTS (memcpy_d2h:nth=2)", 44) != 0 ||
      strstr(msg, "memcpy_d2h of 8 bytes") == NULL)
    fail_msg("stream message: %s", msg);
  assert_int_equal(sim_faults_injected(SIM_FAULT_MEMCPY_D2H), 1);
  assert_int_equal(sim_faults_injected(SIM_FAULT_MEMCPY_H2D), 0);
  /* Other streams are untouched; later d2h copies there work. */
  sim_stream* s2 = f->s[1];
  copy(s2, host + 48, dev, SIM_TRACE_MEMCPY_D2H);
  assert_int_equal(sim_stream_synchronize(s2), SIM_OK);
  assert_memory_equal(host + 48, "AAAAAAAA", 8);

  set_plan("memcpy_h2d:every=2,memcpy_d2d:nth=1");
  copy(s2, dev, host, SIM_TRACE_MEMCPY_H2D); /* h2d 1 */
  assert_int_equal(sim_stream_synchronize(s2), SIM_OK);
  copy(s2, dev + 8, dev, SIM_TRACE_MEMCPY_D2D); /* d2d 1: fails */
  assert_int_equal(sim_stream_synchronize(s2), SIM_EFAILED);
  assert_int_equal(sim_faults_injected(SIM_FAULT_MEMCPY_D2D), 1);
  assert_int_equal(sim_faults_injected(SIM_FAULT_MEMCPY_H2D), 0);
  sim_mem_free(f->dev, dev);
}

static void kernel_init(tu_item* it, const char* op) {
  tu_item_init(it, 0, NULL);
  it->work.trace.kind = SIM_TRACE_KERNEL;
  it->work.trace.type = sim_trace_intern(op);
  it->work.trace.name = sim_trace_intern("node");
  assert_int_not_equal(it->work.trace.type, 0);
}

static void launch_op(void** state) {
  tu_fix* f = *state;
  sim_stream* s = f->s[0];
  tu_item* k = tu_calloc(f, 6, sizeof(tu_item));
  const char* ops[6] = {"Relu", "MatMul", "Relu", "MatMul", "Relu", "MatMul"};
  for (int i = 0; i < 6; i++) kernel_init(&k[i], ops[i]);
  tu_item_init(&k[4], 0, NULL); /* a plain item: not a launch */
  set_plan("launch:op=MatMul:nth=2");
  for (int i = 0; i < 6; i++)
    assert_int_equal(sim_stream_submit(s, &k[i].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_EFAILED);
  static const int ran[6] = {1, 1, 1, 0, 0, 0};
  static const int status[6] = {SIM_OK,      SIM_OK,      SIM_OK,
                                SIM_EFAILED, SIM_ESTREAM, SIM_ESTREAM};
  for (int i = 0; i < 6; i++) {
    if (k[i].run_calls != ran[i] || k[i].done_calls != 1 ||
        k[i].done_status != status[i])
      fail_msg("item %d: run %d done %d status %d", i, k[i].run_calls,
               k[i].done_calls, k[i].done_status);
  }
  char msg[256];
  sim_stream_status(s, msg, sizeof(msg));
  if (strstr(msg, "injected by SIMDEV_FAULTS (launch:op=MatMul:nth=2)") !=
          msg ||
      strstr(msg, "kernel MatMul (node) not run") == NULL)
    fail_msg("stream message: %s", msg);
  assert_int_equal(sim_faults_injected(SIM_FAULT_LAUNCH), 1);

  /* Without op=, every kernel item counts. */
  tu_item* k2 = tu_calloc(f, 3, sizeof(tu_item));
  for (int i = 0; i < 3; i++) kernel_init(&k2[i], i == 1 ? "Add" : "Relu");
  set_plan("launch:every=2");
  for (int i = 0; i < 3; i++)
    assert_int_equal(sim_stream_submit(f->s[1], &k2[i].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[1]), SIM_EFAILED);
  assert_int_equal(k2[0].run_calls, 1);
  assert_int_equal(k2[1].run_calls, 0);
  assert_int_equal(k2[1].done_status, SIM_EFAILED);
}

/* stream:fail_at=3: each stream's third item that may be skipped fails;
 * event records (always run) are not counted. */
static void stream_fail_at(void** state) {
  tu_fix* f = *state;
  tu_item* a = tu_calloc(f, 4, sizeof(tu_item));
  tu_item* b = tu_calloc(f, 4, sizeof(tu_item));
  for (int i = 0; i < 4; i++) {
    tu_item_init(&a[i], i, NULL);
    tu_item_init(&b[i], i, NULL);
  }
  sim_event* e = tu_event_new(f);
  set_plan("stream:fail_at=3");
  assert_int_equal(sim_stream_submit(f->s[0], &a[0].work), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &a[1].work), SIM_OK);
  assert_int_equal(sim_event_record(e, f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &a[2].work), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &a[3].work), SIM_OK);
  for (int i = 0; i < 4; i++)
    assert_int_equal(sim_stream_submit(f->s[1], &b[i].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_EFAILED);
  assert_int_equal(sim_stream_synchronize(f->s[1]), SIM_EFAILED);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(a[i].run_calls, i < 2);
    assert_int_equal(b[i].run_calls, i < 2);
  }
  assert_int_equal(a[2].done_status, SIM_EFAILED);
  assert_int_equal(a[3].done_status, SIM_ESTREAM);
  assert_int_equal(sim_event_query(e), SIM_EVENT_COMPLETE);
  char msg[256];
  sim_stream_status(f->s[1], msg, sizeof(msg));
  if (strstr(msg,
             "injected by SIMDEV_FAULTS (stream:fail_at=3): item 3 of "
             "stream simdev0-s") != msg)
    fail_msg("stream message: %s", msg);
  assert_int_equal(sim_faults_injected(SIM_FAULT_STREAM), 2);
  /* A stream created after the plan counts from its own first item. */
  sim_stream* s3 = tu_add_stream(f);
  tu_item* c = tu_calloc(f, 3, sizeof(tu_item));
  for (int i = 0; i < 3; i++) {
    tu_item_init(&c[i], i, NULL);
    assert_int_equal(sim_stream_submit(s3, &c[i].work), SIM_OK);
  }
  assert_int_equal(sim_stream_synchronize(s3), SIM_EFAILED);
  assert_int_equal(c[1].run_calls, 1);
  assert_int_equal(c[2].run_calls, 0);
}

static void event_nth(void** state) {
  tu_fix* f = *state;
  sim_event* e = tu_event_new(f);
  tu_gate* g = tu_gate_submit(f, f->s[0]);
  set_plan("event:nth=2");
  assert_int_equal(sim_event_record(e, f->s[0]), SIM_OK);
  assert_int_equal(sim_event_query(e), SIM_EVENT_PENDING);
  assert_int_equal(sim_event_record(e, f->s[1]), SIM_EFAILED);
  char msg[256];
  assert_int_equal(sim_faults_last(msg, sizeof(msg)), 1);
  assert_non_null(strstr(msg, "injected by SIMDEV_FAULTS (event:nth=2)"));
  /* The refused record left the event on its first record. */
  assert_int_equal(sim_event_query(e), SIM_EVENT_PENDING);
  tu_gate_open(g);
  assert_int_equal(sim_event_synchronize(e), SIM_OK);
  assert_int_equal(sim_event_record(e, f->s[1]), SIM_OK);
  assert_int_equal(sim_event_synchronize(e), SIM_OK);
  /* Streams are not in error: the refusal was the call's, not theirs. */
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[1]), SIM_OK);
  assert_int_equal(sim_faults_injected(SIM_FAULT_EVENT), 1);
}

/* Only the caller's records are event operations: device_sim's own
 * (stream-on-stream waits, device synchronize's markers) are never
 * refused, nor counted. */
static void event_internal_records(void** state) {
  tu_fix* f = *state;
  sim_event* e = tu_event_new(f);
  set_plan("event:every=1");
  tu_gate* g = tu_gate_submit(f, f->s[0]);
  assert_int_equal(sim_stream_wait_stream(f->s[1], f->s[0]), SIM_OK);
  tu_item* it = tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(it, 0, NULL);
  it->observe = g;
  assert_int_equal(sim_stream_submit(f->s[1], &it->work), SIM_OK);
  tu_gate_open(g);
  assert_int_equal(sim_device_synchronize(f->dev), SIM_OK);
  assert_int_equal(it->saw_open, 1); /* the wait held it behind the gate */
  assert_int_equal(sim_faults_injected(SIM_FAULT_EVENT), 0);
  assert_int_equal(sim_event_record(e, f->s[0]), SIM_EFAILED);
  assert_int_equal(sim_faults_injected(SIM_FAULT_EVENT), 1);
}

typedef struct cb_state {
  int calls;
  int saw_status;
} cb_state;

static int host_fn(void* arg, int stream_status, char* msg, size_t len) {
  cb_state* c = arg;
  c->calls++;
  c->saw_status = stream_status;
  return 0;
}

/* The callback runs (TF's work in it is done), then its item fails. */
static void callback_nth(void** state) {
  tu_fix* f = *state;
  cb_state* cb = tu_calloc(f, 2, sizeof(cb_state));
  tu_item* after = tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(after, 0, NULL);
  set_plan("callback:nth=1");
  assert_int_equal(sim_host_callback_async(f->s[0], host_fn, &cb[0]), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &after->work), SIM_OK);
  assert_int_equal(sim_host_callback_async(f->s[0], host_fn, &cb[1]), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_EFAILED);
  assert_int_equal(cb[0].calls, 1);
  assert_int_equal(cb[0].saw_status, SIM_OK);
  assert_int_equal(after->run_calls, 0); /* drained */
  assert_int_equal(after->done_status, SIM_ESTREAM);
  assert_int_equal(cb[1].calls, 1); /* callbacks always run */
  assert_int_equal(cb[1].saw_status, SIM_EFAILED);
  char msg[256];
  sim_stream_status(f->s[0], msg, sizeof(msg));
  if (strstr(msg,
             "injected by SIMDEV_FAULTS (callback:nth=1): host callback "
             "ran, then failed") != msg)
    fail_msg("stream message: %s", msg);
  assert_int_equal(sim_faults_injected(SIM_FAULT_CALLBACK), 1);
}

/* With no plan nothing fails and nothing is counted. */
static void empty_plan(void** state) {
  tu_fix* f = *state;
  set_plan("alloc:every=1");
  set_plan("");
  void* p = sim_mem_alloc(f->dev, 64);
  assert_non_null(p);
  sim_mem_free(f->dev, p);
  tu_item* it = tu_calloc(f, 1, sizeof(tu_item));
  kernel_init(it, "MatMul");
  assert_int_equal(sim_stream_submit(f->s[0], &it->work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  for (int k = 0; k < SIM_FAULT_KIND_COUNT; k++)
    assert_int_equal(sim_faults_injected(k), 0);
}

#define T(name) cmocka_unit_test_setup_teardown(name, tu_setup2, teardown)

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T(grammar_valid),
      T(grammar_errors),
      T(bad_set_keeps_plan),
      T(alloc_nth_every),
      T(alloc_after_bytes),
      T(alloc_p_deterministic),
      T(alloc_threads_exact),
      T(memcpy_kinds),
      T(launch_op),
      T(stream_fail_at),
      T(event_nth),
      T(event_internal_records),
      T(callback_nth),
      T(empty_plan),
  };
  return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
