/*
 * testutil.h - helpers shared by the device_sim unit tests (header-only).
 *
 * Rules the helpers follow, and the tests should too:
 *   - cmocka asserts longjmp, so they are only ever called on the main
 *     thread. Work items and helper threads record what they saw; the main
 *     thread asserts after a synchronization point (stream/device
 *     synchronize, a join, or the helper's own mutex).
 *   - Anything a queued work item can touch lives in memory owned by the
 *     fixture (tu_fix), not on a test's stack: if an assert fails while work
 *     is still queued, the teardown opens every gate, drains the streams and
 *     only then frees that memory.
 *   - Shared state between a worker and the main thread is either read after
 *     a synchronize (the library's locks order it) or protected by a mutex, so
 *     helgrind sees a happens-before edge; no bare atomics.
 */
#ifndef SIMDEV_TESTS_UNIT_TESTUTIL_H_
#define SIMDEV_TESTS_UNIT_TESTUTIL_H_

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cmocka.h relies on the headers above (stdarg, stddef, setjmp). */
#include <cmocka.h>

#include "sim.h"

/* Small regions keep the tests fast and let exhaustion tests finish. */
#define TU_MEMORY_MB 64
#define TU_MAX_STREAMS 16
#define TU_MAX_GATES 32
#define TU_MAX_BLOCKS 64
#define TU_MAX_EVENTS 32
/* How long a test waits for something that must happen before calling it a
 * hang. Generous: helgrind slows everything down by 100x. */
#define TU_TIMEOUT_MS 30000

#define TU_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define tu_container_of(ptr, type, member) \
  ((type*)((char*)(ptr)-offsetof(type, member)))

/* A failing pthread call in a test is a broken test, not a test failure. */
#define TU_PT(call)                                                        \
  do {                                                                     \
    int tu_rc_ = (call);                                                   \
    if (tu_rc_ != 0) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
              strerror(tu_rc_));                                           \
      abort();                                                             \
    }                                                                      \
  } while (0)

/* ---------------------------------------------------------------- time */

static inline uint64_t tu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void tu_sleep_us(unsigned us) {
  struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static inline void tu_sleep_ms(unsigned ms) { tu_sleep_us(ms * 1000u); }

/* Condition variables of the helpers: waited on without a timeout only
 * (a wait with a deadline polls: tu_wait_flag). */
static inline void tu_cond_init(pthread_cond_t* c) {
  TU_PT(pthread_cond_init(c, NULL));
}

/* Waits until *flag != 0 or timeout_ms passed; returns *flag. m must be
 * held; it is released while waiting and held again on return. The timeout
 * is a hang detector (TU_TIMEOUT_MS), never reached by working code.
 *
 * It polls (m dropped, 1 ms sleeps) instead of pthread_cond_timedwait: when
 * a timed wait times out just as another thread signals, glibc 2.36 passes
 * the signal on with pthread_cond_signal without the mutex, and helgrind
 * reports that ("associated lock is not held by calling thread"). */
static inline int tu_wait_flag(pthread_mutex_t* m, const int* flag,
                               int timeout_ms) {
  const uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * 1000000u;
  while (!*flag && tu_now_ns() < deadline) {
    TU_PT(pthread_mutex_unlock(m));
    tu_sleep_ms(1);
    TU_PT(pthread_mutex_lock(m));
  }
  return *flag;
}

/* ---------------------------------------------------------------- scale */

/* SIMDEV_TEST_SCALE divides the iteration counts (valgrind runs set it). */
static inline int tu_scale(void) {
  const char* s = getenv("SIMDEV_TEST_SCALE");
  if (s == NULL || *s == '\0') return 1;
  char* end;
  long v = strtol(s, &end, 10);
  if (*end != '\0' || v < 1 || v > 1000000) return 1;
  return (int)v;
}

static inline int tu_scaled(int n) {
  int v = n / tu_scale();
  return v < 1 ? 1 : v;
}

/* ---------------------------------------------------------------- gate */

/* A work item that blocks its stream until the main thread opens it. */
typedef struct tu_gate {
  sim_work work;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
  int entered; /* the worker reached run */
  int run_calls;
  int done_calls;
  int done_status;
} tu_gate;

static inline int tu_gate_run(sim_work* w, char* msg, size_t msg_len) {
  tu_gate* g = tu_container_of(w, tu_gate, work);
  TU_PT(pthread_mutex_lock(&g->mu));
  g->entered = 1;
  g->run_calls++;
  TU_PT(pthread_cond_broadcast(&g->cv));
  while (!g->open) TU_PT(pthread_cond_wait(&g->cv, &g->mu));
  TU_PT(pthread_mutex_unlock(&g->mu));
  return SIM_OK;
}

static inline void tu_gate_done(sim_work* w, int status) {
  tu_gate* g = tu_container_of(w, tu_gate, work);
  TU_PT(pthread_mutex_lock(&g->mu));
  g->done_calls++;
  g->done_status = status;
  TU_PT(pthread_cond_broadcast(&g->cv));
  TU_PT(pthread_mutex_unlock(&g->mu));
}

static inline void tu_gate_init(tu_gate* g) {
  memset(g, 0, sizeof(*g));
  TU_PT(pthread_mutex_init(&g->mu, NULL));
  tu_cond_init(&g->cv);
  g->work.run = tu_gate_run;
  g->work.done = tu_gate_done;
  g->work.label = "tu_gate";
}

static inline void tu_gate_fini(tu_gate* g) {
  TU_PT(pthread_mutex_destroy(&g->mu));
  TU_PT(pthread_cond_destroy(&g->cv));
}

static inline void tu_gate_open(tu_gate* g) {
  TU_PT(pthread_mutex_lock(&g->mu));
  g->open = 1;
  TU_PT(pthread_cond_broadcast(&g->cv));
  TU_PT(pthread_mutex_unlock(&g->mu));
}

/* 1 once the worker is blocked inside the gate, 0 on timeout. */
static inline int tu_gate_wait_entered(tu_gate* g, int timeout_ms) {
  TU_PT(pthread_mutex_lock(&g->mu));
  int r = tu_wait_flag(&g->mu, &g->entered, timeout_ms);
  TU_PT(pthread_mutex_unlock(&g->mu));
  return r;
}

static inline int tu_gate_is_open(tu_gate* g) {
  TU_PT(pthread_mutex_lock(&g->mu));
  int r = g->open;
  TU_PT(pthread_mutex_unlock(&g->mu));
  return r;
}

/* ---------------------------------------------------------------- fixture */

typedef struct tu_fix {
  sim_device* dev;
  sim_stream* s[TU_MAX_STREAMS];
  int ns;
  tu_gate* gates[TU_MAX_GATES];
  int ngates;
  void* blocks[TU_MAX_BLOCKS]; /* freed after the device is gone */
  int nblocks;
  sim_event* events[TU_MAX_EVENTS]; /* destroyed by the teardown */
  int nevents;
} tu_fix;

/* Zeroed memory owned by the fixture: safe for work items to point into
 * even if the test fails while they are still queued. */
static inline void* tu_calloc(tu_fix* f, size_t n, size_t size) {
  if (f->nblocks == TU_MAX_BLOCKS) abort();
  void* p = calloc(n ? n : 1, size ? size : 1);
  if (p == NULL) abort();
  f->blocks[f->nblocks++] = p;
  return p;
}

/* An event the teardown destroys (so a failing test does not leak it). */
static inline sim_event* tu_event_new(tu_fix* f) {
  if (f->nevents == TU_MAX_EVENTS) abort();
  sim_event* e = NULL;
  assert_int_equal(sim_event_create(&e), SIM_OK);
  assert_non_null(e);
  f->events[f->nevents++] = e;
  return e;
}

static inline tu_gate* tu_gate_new(tu_fix* f) {
  if (f->ngates == TU_MAX_GATES) abort();
  tu_gate* g = (tu_gate*)malloc(sizeof(*g));
  if (g == NULL) abort();
  tu_gate_init(g);
  f->gates[f->ngates++] = g;
  return g;
}

/* A new gate submitted to s (asserts the submit worked). */
static inline tu_gate* tu_gate_submit(tu_fix* f, sim_stream* s) {
  tu_gate* g = tu_gate_new(f);
  assert_int_equal(sim_stream_submit(s, &g->work), SIM_OK);
  return g;
}

static inline sim_stream* tu_add_stream(tu_fix* f) {
  if (f->ns == TU_MAX_STREAMS) abort();
  sim_stream* s = NULL;
  assert_int_equal(sim_stream_create(f->dev, &s), SIM_OK);
  assert_non_null(s);
  f->s[f->ns++] = s;
  return s;
}

/* Destroys a stream of the fixture now (and forgets it). */
static inline void tu_destroy_stream(tu_fix* f, sim_stream* s) {
  for (int i = 0; i < f->ns; i++) {
    if (f->s[i] == s) {
      f->s[i] = f->s[--f->ns];
      sim_stream_destroy(s);
      return;
    }
  }
  abort();
}

/* Flags of the devices the fixtures create: SIM_DEVICE_DISCRETE when the
 * environment has SIMDEV_DISCRETE=1 (ctest's unit.<name>.discrete variants),
 * so every test runs against discrete memory too. Tests reach device bytes
 * from host code only through sim_mem_alias (tu_bytes), as simdev's own
 * code does; a direct access would fault in that variant. */
static inline unsigned tu_device_flags(void) {
  const char* s = getenv("SIMDEV_DISCRETE");
  return s != NULL && strcmp(s, "1") == 0 ? SIM_DEVICE_DISCRETE : 0u;
}
static inline int tu_device_create(int ordinal, uint64_t mb, sim_device** out) {
  return sim_device_create_ex(ordinal, mb, tu_device_flags(), out);
}
/* Host access to device bytes (or any bytes): through the alias. */
static inline void* tu_bytes(const void* p) {
  return sim_mem_alias(p);
}

static inline int tu_setup_streams(void** state, int nstreams) {
  tu_fix* f = (tu_fix*)calloc(1, sizeof(*f));
  if (f == NULL) return -1;
  *state = f;
  if (tu_device_create(0, TU_MEMORY_MB, &f->dev) != SIM_OK) return -1;
  for (int i = 0; i < nstreams; i++) {
    if (sim_stream_create(f->dev, &f->s[i]) != SIM_OK) return -1;
    f->ns++;
  }
  return 0;
}

static inline int tu_teardown(void** state) {
  tu_fix* f = (tu_fix*)*state;
  if (f == NULL) return 0;
  /* Open every gate first, or draining a failed test's streams would hang. */
  for (int i = 0; i < f->ngates; i++) tu_gate_open(f->gates[i]);
  for (int i = 0; i < f->ns; i++) sim_stream_destroy(f->s[i]);
  for (int i = 0; i < f->nevents; i++) sim_event_destroy(f->events[i]);
  if (f->dev != NULL) sim_device_destroy(f->dev);
  for (int i = 0; i < f->ngates; i++) {
    tu_gate_fini(f->gates[i]);
    free(f->gates[i]);
  }
  for (int i = 0; i < f->nblocks; i++) free(f->blocks[i]);
  free(f);
  *state = NULL;
  return 0;
}

static inline int tu_setup0(void** state) { return tu_setup_streams(state, 0); }
static inline int tu_setup1(void** state) { return tu_setup_streams(state, 1); }
static inline int tu_setup2(void** state) { return tu_setup_streams(state, 2); }
static inline int tu_setup3(void** state) { return tu_setup_streams(state, 3); }

/* ---------------------------------------------------------------- log */

/* Ids appended by work items. Capacity is fixed up front (no realloc on a
 * worker); only one worker appends to a given log at a time, and the main
 * thread reads it after a synchronize. */
typedef struct tu_log {
  int* v;
  size_t n;
  size_t cap;
  int overflow;
} tu_log;

static inline tu_log* tu_log_new(tu_fix* f, size_t cap) {
  tu_log* l = (tu_log*)tu_calloc(f, 1, sizeof(*l));
  l->v = (int*)tu_calloc(f, cap, sizeof(int));
  l->cap = cap;
  return l;
}

static inline void tu_log_append(tu_log* l, int id) {
  if (l->n == l->cap) {
    l->overflow = 1;
    return;
  }
  l->v[l->n++] = id;
}

/* ---------------------------------------------------------------- items */

/* A configurable work item: appends its id to a log, optionally sleeps,
 * returns `ret` (writing fail_msg), records how it was called. */
typedef struct tu_item {
  sim_work work;
  int id;
  int ret;
  const char* fail_msg;
  unsigned sleep_us;
  tu_log* log;
  sim_stream* self;  /* if set, run records sim_stream_is_current(self) */
  sim_stream* other; /* if set, run records sim_stream_is_current(other) */
  tu_gate* observe;  /* if set, run records observe->open under its lock */
  /* Results (written on the worker). */
  int run_calls;
  int done_calls;
  int done_status;
  int run_before_done; /* run_calls when done was called */
  int cur_self;
  int cur_other;
  int saw_open;
  int ran_observed; /* set under observe->mu */
} tu_item;

static inline int tu_item_run(sim_work* w, char* msg, size_t msg_len) {
  tu_item* it = tu_container_of(w, tu_item, work);
  it->run_calls++;
  if (it->log != NULL) tu_log_append(it->log, it->id);
  if (it->self != NULL) it->cur_self = sim_stream_is_current(it->self);
  if (it->other != NULL) it->cur_other = sim_stream_is_current(it->other);
  if (it->observe != NULL) {
    TU_PT(pthread_mutex_lock(&it->observe->mu));
    it->saw_open = it->observe->open;
    it->ran_observed = 1;
    TU_PT(pthread_cond_broadcast(&it->observe->cv));
    TU_PT(pthread_mutex_unlock(&it->observe->mu));
  }
  if (it->sleep_us) tu_sleep_us(it->sleep_us);
  if (it->ret != 0 && it->fail_msg != NULL && msg != NULL && msg_len > 0)
    snprintf(msg, msg_len, "%s", it->fail_msg);
  return it->ret;
}

static inline void tu_item_done(sim_work* w, int status) {
  tu_item* it = tu_container_of(w, tu_item, work);
  it->done_calls++;
  it->done_status = status;
  it->run_before_done = it->run_calls;
}

static inline void tu_item_init(tu_item* it, int id, tu_log* log) {
  memset(it, 0, sizeof(*it));
  it->work.run = tu_item_run;
  it->work.done = tu_item_done;
  it->work.label = "tu_item";
  it->id = id;
  it->log = log;
  it->done_status = 12345; /* not a sim_err: "done never called" */
}

/* Reads observe-protected results of an item on the main thread. */
static inline int tu_item_ran_observed(tu_item* it) {
  TU_PT(pthread_mutex_lock(&it->observe->mu));
  int r = it->ran_observed;
  TU_PT(pthread_mutex_unlock(&it->observe->mu));
  return r;
}

/* ---------------------------------------------------------------- calls */

/* Runs fn(arg) on a helper thread so the main thread can bound how long a
 * blocking call takes (and so detect a hang instead of hanging). */
typedef struct tu_call {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int (*fn)(void*);
  void* arg;
  int finished;
  int rc;
  uint64_t start_ns;
  uint64_t end_ns;
} tu_call;

static inline void* tu_call_main(void* p) {
  tu_call* c = (tu_call*)p;
  int rc = c->fn(c->arg);
  uint64_t end = tu_now_ns();
  TU_PT(pthread_mutex_lock(&c->mu));
  c->rc = rc;
  c->end_ns = end;
  c->finished = 1;
  TU_PT(pthread_cond_broadcast(&c->cv));
  TU_PT(pthread_mutex_unlock(&c->mu));
  return NULL;
}

static inline void tu_call_start(tu_call* c, int (*fn)(void*), void* arg) {
  memset(c, 0, sizeof(*c));
  TU_PT(pthread_mutex_init(&c->mu, NULL));
  tu_cond_init(&c->cv);
  c->fn = fn;
  c->arg = arg;
  c->start_ns = tu_now_ns();
  TU_PT(pthread_create(&c->th, NULL, tu_call_main, c));
}

/* 1 if the call finished within timeout_ms. */
static inline int tu_call_wait(tu_call* c, int timeout_ms) {
  TU_PT(pthread_mutex_lock(&c->mu));
  int r = tu_wait_flag(&c->mu, &c->finished, timeout_ms);
  TU_PT(pthread_mutex_unlock(&c->mu));
  return r;
}

static inline int tu_call_finished(tu_call* c) {
  TU_PT(pthread_mutex_lock(&c->mu));
  int r = c->finished;
  TU_PT(pthread_mutex_unlock(&c->mu));
  return r;
}

/* Joins the helper (must be able to finish) and returns fn's result. */
static inline int tu_call_join(tu_call* c) {
  TU_PT(pthread_join(c->th, NULL));
  TU_PT(pthread_mutex_destroy(&c->mu));
  TU_PT(pthread_cond_destroy(&c->cv));
  return c->rc;
}

static inline int tu_stream_sync_fn(void* s) {
  return sim_stream_synchronize((sim_stream*)s);
}
static inline int tu_event_sync_fn(void* e) {
  return sim_event_synchronize((sim_event*)e);
}
static inline int tu_device_sync_fn(void* d) {
  return sim_device_synchronize((sim_device*)d);
}

/* Opens gates after a delay, on a helper thread. */
typedef struct tu_opener {
  tu_call call;
  tu_gate* gates[8];
  int n;
  unsigned delay_ms;
} tu_opener;

static inline int tu_opener_fn(void* arg) {
  tu_opener* o = (tu_opener*)arg;
  for (int i = 0; i < o->n; i++) {
    tu_sleep_ms(o->delay_ms);
    tu_gate_open(o->gates[i]);
  }
  return 0;
}

static inline void tu_opener_start(tu_opener* o, unsigned delay_ms) {
  o->delay_ms = delay_ms;
  tu_call_start(&o->call, tu_opener_fn, o);
}

/* ---------------------------------------------------------------- main */

/* argv[1], if given, selects tests by name (cmocka glob: '*' and '?'), so a
 * single test runs in-process under gdb or valgrind:
 *   gdb --args build/tests/unit/test_stream queue_order */
static inline void tu_init(int argc, char** argv) {
  if (argc > 1 && argv[1] != NULL && argv[1][0] != '\0')
    cmocka_set_test_filter(argv[1]);
}

#endif /* SIMDEV_TESTS_UNIT_TESTUTIL_H_ */
