/*
 * test_xla_runtime.c - the life of a call in libsimdev_xla.so, through the
 * fake FFI: the future completed by the stream worker ("simdev0-s0"), many
 * calls in flight (none lost, counts exact), calls from two threads at
 * once, a worker-side failure (im2col scratch larger than the device
 * region) setting the future's error while the next call works,
 * SIMDEV_SYNC=1 returning results and errors directly, bad settings
 * (init's message and the handlers' error), and shutdown draining queued
 * work before it returns.
 *
 * Settings are read when the device is created, so each test that changes
 * one shuts the runtime down first and after (the next call re-creates
 * it). No test depends on timing: completion is observed through the
 * futures, which the runtime must complete before shutdown returns.
 *
 *   build/tests/xla/test_xla_runtime [test-name filter]
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fakeffi.h"

#define F32 XLA_FFI_DataType_F32
#define OK XLA_FFI_Error_Code_OK

typedef struct counts {
  uint64_t enq, ok, failed;
} counts;
static counts now(void) {
  counts c;
  simdev_xla_counts(&c.enq, &c.ok, &c.failed);
  return c;
}

/* relu of n floats: x[i] = i - n/2, so y is known. */
typedef struct relu_call {
  ff_frame f;
  float* x;
  float* y;
  int64_t n;
} relu_call;

static void relu_setup(relu_call* c, int64_t n) {
  c->n = n;
  c->x = malloc((size_t)n * sizeof(float) + 4);
  c->y = malloc((size_t)n * sizeof(float) + 4);
  for (int64_t i = 0; i < n; i++) c->x[i] = (float)(i - n / 2), c->y[i] = -1;
  ff_init(&c->f);
  ff_arg(&c->f, F32, c->x, 1, &n);
  ff_ret(&c->f, F32, c->y, 1, &n);
}
/* Number of wrong elements of y. */
static int64_t relu_wrong(const relu_call* c) {
  int64_t bad = 0;
  for (int64_t i = 0; i < c->n; i++)
    bad += c->y[i] != (c->x[i] < 0 ? 0.f : c->x[i]);
  return bad;
}
static void relu_free(relu_call* c) {
  free(c->x), free(c->y);
}

/* A convolution whose im2col scratch is 2.25 MiB: x [1,64,64,16], w 3x3,
 * SAME (64 output columns x 144 patch values x 4 bytes x 64 rows). */
typedef struct conv_call {
  ff_frame f;
  float x[64 * 64 * 16], w[3 * 3 * 16 * 8], y[64 * 64 * 8];
} conv_call;
static void conv_setup(conv_call* c) {
  static const int64_t dx[] = {1, 64, 64, 16}, dw[] = {3, 3, 16, 8},
                       dy[] = {1, 64, 64, 8};
  uint64_t seed = 1;
  ff_fill(c->x, F32, 64 * 64 * 16, &seed);
  ff_fill(c->w, F32, 3 * 3 * 16 * 8, &seed);
  ff_init(&c->f);
  ff_arg(&c->f, F32, c->x, 4, dx);
  ff_arg(&c->f, F32, c->w, 4, dw);
  ff_ret(&c->f, F32, c->y, 4, dy);
  ff_conv_attrs(&c->f, 1, 1, 1, 1, "SAME", NULL);
}

static void async_completion(void** state) {
  assert_int_equal(simdev_xla_init(NULL, 0), 0);
  assert_int_equal(simdev_xla_init(NULL, 0), 0); /* idempotent */
  counts before = now();
  relu_call c;
  relu_setup(&c, 1000);
  XLA_FFI_Error_Code err;
  XLA_FFI_Future* fut = ff_call_async(simdev_xla_relu, &c.f, &err);
  assert_int_equal(err, OK);
  assert_non_null(fut); /* asynchronous: a future, no result yet promised */
  ff_result r = {0};
  ff_wait(fut, &r);
  assert_int_equal(r.code, OK);
  assert_string_equal(r.completer, "simdev0-s0"); /* the stream's worker */
  assert_int_equal(relu_wrong(&c), 0);
  counts after = now();
  assert_int_equal(after.enq - before.enq, 1);
  assert_int_equal(after.ok - before.ok, 1);
  assert_int_equal(after.failed - before.failed, 0);
  relu_free(&c);
}

/* Calls that complete without the stream and failed validations are not
 * counted; nothing is queued for them. */
static void not_queued_not_counted(void** state) {
  counts before = now();
  relu_call c;
  relu_setup(&c, 0);
  ff_result r = ff_call(simdev_xla_relu, &c.f);
  assert_int_equal(r.code, OK);
  assert_false(r.had_future);
  relu_free(&c);
  relu_setup(&c, 4);
  c.f.rdims[0][0] = 5;
  r = ff_call(simdev_xla_relu, &c.f);
  assert_true(r.returned_error);
  relu_free(&c);
  counts after = now();
  assert_int_equal(after.enq, before.enq);
  assert_int_equal(after.ok + after.failed, before.ok + before.failed);
}

static void many_in_flight(void** state) {
  int n = 400 / ff_scale() + 4;
  relu_call* c = calloc((size_t)n, sizeof(*c));
  XLA_FFI_Future** fut = calloc((size_t)n, sizeof(*fut));
  counts before = now();
  for (int i = 0; i < n; i++) { /* all queued before any is waited for */
    relu_setup(&c[i], 1 + i * 37 % 5000);
    XLA_FFI_Error_Code err;
    fut[i] = ff_call_async(simdev_xla_relu, &c[i].f, &err);
    assert_int_equal(err, OK);
    assert_non_null(fut[i]);
  }
  for (int i = 0; i < n; i++) {
    ff_result r = {0};
    ff_wait(fut[i], &r);
    assert_int_equal(r.code, OK);
    assert_int_equal(relu_wrong(&c[i]), 0);
    relu_free(&c[i]);
  }
  counts after = now();
  assert_int_equal(after.enq - before.enq, n);
  assert_int_equal(after.ok - before.ok, n);
  assert_int_equal(ff_live_futures(), 0);
  free(c), free(fut);
}

/* Two threads calling at once (helgrind checks the runtime's locking). */
typedef struct caller {
  pthread_t t;
  int calls, failures, wrong;
} caller;

static void* caller_main(void* arg) {
  caller* me = arg;
  for (int i = 0; i < me->calls; i++) {
    relu_call c;
    relu_setup(&c, 100 + i);
    XLA_FFI_Error_Code err;
    XLA_FFI_Future* fut = ff_call_async(simdev_xla_relu, &c.f, &err);
    ff_result r = {0};
    if (err != OK || fut == NULL || ff_wait_quiet(fut, &r) != 0 || r.code != OK)
      me->failures++;
    else
      me->wrong += relu_wrong(&c) != 0;
    relu_free(&c);
  }
  return NULL;
}

static void concurrent_callers(void** state) {
  caller cs[2] = {{.calls = 60 / ff_scale() + 2},
                  {.calls = 60 / ff_scale() + 2}};
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&cs[i].t, NULL, caller_main, &cs[i]), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pthread_join(cs[i].t, NULL), 0);
    assert_int_equal(cs[i].failures, 0);
    assert_int_equal(cs[i].wrong, 0);
  }
}

/* shutdown waits for queued work: every future is complete when it
 * returns, and the next call creates the device again. */
static void shutdown_drains(void** state) {
  int n = 50 / ff_scale() + 3;
  relu_call* c = calloc((size_t)n, sizeof(*c));
  XLA_FFI_Future** fut = calloc((size_t)n, sizeof(*fut));
  counts before = now();
  for (int i = 0; i < n; i++) {
    relu_setup(&c[i], 20000);
    XLA_FFI_Error_Code err;
    fut[i] = ff_call_async(simdev_xla_relu, &c[i].f, &err);
    assert_non_null(fut[i]);
  }
  assert_int_equal(simdev_xla_shutdown(), 0);
  for (int i = 0; i < n; i++) assert_true(ff_is_complete(fut[i]));
  counts after = now();
  assert_int_equal(after.ok - before.ok, n);
  for (int i = 0; i < n; i++) {
    ff_result r = {0};
    ff_wait(fut[i], &r);
    assert_int_equal(r.code, OK);
    assert_int_equal(relu_wrong(&c[i]), 0);
    relu_free(&c[i]);
  }
  free(c), free(fut);
  assert_int_equal(simdev_xla_shutdown(), 0); /* nothing there: fine */
  relu_call again;
  relu_setup(&again, 10);
  assert_int_equal(ff_call(simdev_xla_relu, &again.f).code, OK);
  assert_int_equal(relu_wrong(&again), 0);
  relu_free(&again);
}

static void worker_error(void** state) {
  simdev_xla_shutdown();
  setenv("SIMDEV_MEMORY_MB", "1", 1);
  counts before = now();
  conv_call* cv = malloc(sizeof(*cv));
  conv_setup(cv);
  XLA_FFI_Error_Code err;
  XLA_FFI_Future* fut = ff_call_async(simdev_xla_conv2d, &cv->f, &err);
  assert_int_equal(err, OK); /* valid: the failure comes from the worker */
  assert_non_null(fut);
  ff_result r = {0};
  ff_wait(fut, &r);
  ff_assert_error(&r, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "simdev_conv2d: ",
                  "device memory exhausted: 2359296 bytes of im2col scratch "
                  "do not fit in simdev device 0 (SIMDEV_MEMORY_MB=1");
  assert_string_equal(r.completer, "simdev0-s0");
  counts after = now();
  assert_int_equal(after.enq - before.enq, 1);
  assert_int_equal(after.failed - before.failed, 1);
  /* The stream is not poisoned: the next call works. */
  relu_call c;
  relu_setup(&c, 100);
  assert_int_equal(ff_call(simdev_xla_relu, &c.f).code, OK);
  assert_int_equal(relu_wrong(&c), 0);
  relu_free(&c);
  free(cv);
  unsetenv("SIMDEV_MEMORY_MB");
  simdev_xla_shutdown();
  assert_int_equal(ff_live_errors(), 0);
}

static void sync_mode(void** state) {
  simdev_xla_shutdown();
  setenv("SIMDEV_SYNC", "1", 1);
  counts before = now();
  relu_call c;
  relu_setup(&c, 3000);
  ff_result r = ff_call(simdev_xla_relu, &c.f);
  assert_int_equal(r.code, OK);
  assert_false(r.had_future); /* done before the handler returned */
  assert_null(c.f.cf.future);
  assert_int_equal(relu_wrong(&c), 0);
  relu_free(&c);
  counts after = now();
  assert_int_equal(after.enq - before.enq, 1);
  assert_int_equal(after.ok - before.ok, 1);
  /* A worker-side error is returned directly. */
  simdev_xla_shutdown();
  setenv("SIMDEV_MEMORY_MB", "1", 1);
  conv_call* cv = malloc(sizeof(*cv));
  conv_setup(cv);
  r = ff_call(simdev_xla_conv2d, &cv->f);
  assert_true(r.returned_error);
  ff_assert_error(&r, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                  "simdev_conv2d: ", "im2col scratch");
  free(cv);
  unsetenv("SIMDEV_MEMORY_MB");
  unsetenv("SIMDEV_SYNC");
  simdev_xla_shutdown();
}

static void bad_settings(void** state) {
  char msg[512];
  simdev_xla_shutdown();
  setenv("SIMDEV_MEMORY_MB", "lots", 1);
  assert_int_not_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  assert_non_null(strstr(msg, "SIMDEV_MEMORY_MB"));
  relu_call c;
  relu_setup(&c, 10);
  ff_result r = ff_call(simdev_xla_relu, &c.f);
  ff_assert_error(&r, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                  "simdev_relu: ", "SIMDEV_MEMORY_MB");
  unsetenv("SIMDEV_MEMORY_MB");

  setenv("SIMDEV_DISABLE", "1", 1);
  assert_int_not_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  assert_non_null(strstr(msg, "SIMDEV_DISABLE=1"));
  r = ff_call(simdev_xla_relu, &c.f);
  ff_assert_error(&r, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                  "simdev_relu: ", "SIMDEV_DISABLE=1");
  unsetenv("SIMDEV_DISABLE");

  setenv("SIMDEV_SYNC", "2", 1);
  assert_int_not_equal(simdev_xla_init(NULL, 0), 0); /* msg may be NULL */
  unsetenv("SIMDEV_SYNC");
  /* Fixed: the next call creates the device. */
  assert_int_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  assert_string_equal(msg, "");
  assert_int_equal(ff_call(simdev_xla_relu, &c.f).code, OK);
  assert_int_equal(relu_wrong(&c), 0);
  relu_free(&c);
  assert_int_equal(ff_live_errors(), 0);
}

/* SIMDEV_FAULTS: a bad plan fails init naming it; a stream:fail_at plan
 * fails a job and the jobs behind it on the stream (sticky), and shutdown
 * after that is clean. */
static void faults(void** state) {
  char msg[512];
  simdev_xla_shutdown();
  setenv("SIMDEV_FAULTS", "stream:fail_at=0", 1);
  assert_int_not_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  assert_non_null(strstr(msg, "SIMDEV_FAULTS"));
  assert_non_null(strstr(msg, "rule \"stream:fail_at=0\""));
  setenv("SIMDEV_FAULTS", "stream:fail_at=2", 1);
  assert_int_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  relu_call c[3];
  ff_result r[3];
  for (int i = 0; i < 3; i++) {
    relu_setup(&c[i], 10);
    r[i] = ff_call(simdev_xla_relu, &c[i].f);
  }
  assert_int_equal(r[0].code, OK);
  assert_int_equal(relu_wrong(&c[0]), 0);
  /* The message is the stream's first failure: the rule that made it. */
  ff_assert_error(&r[1], XLA_FFI_Error_Code_INTERNAL, "simdev_relu: ",
                  "injected by SIMDEV_FAULTS (stream:fail_at=2)");
  ff_assert_error(&r[2], XLA_FFI_Error_Code_INTERNAL, "simdev_relu: ",
                  "not run: the simdev stream failed earlier: injected by "
                  "SIMDEV_FAULTS (stream:fail_at=2)");
  for (int i = 0; i < 3; i++) relu_free(&c[i]);
  simdev_xla_shutdown();
  /* launch rules match a target by name, tracing on or off. */
  setenv("SIMDEV_FAULTS", "launch:op=simdev_relu:nth=2", 1);
  assert_int_equal(simdev_xla_init(msg, sizeof(msg)), 0);
  for (int i = 0; i < 2; i++) {
    relu_setup(&c[i], 10);
    r[i] = ff_call(simdev_xla_relu, &c[i].f);
  }
  assert_int_equal(r[0].code, OK);
  ff_assert_error(&r[1], XLA_FFI_Error_Code_INTERNAL, "simdev_relu: ",
                  "injected by SIMDEV_FAULTS (launch:op=simdev_relu:nth=2)");
  for (int i = 0; i < 2; i++) relu_free(&c[i]);
  unsetenv("SIMDEV_FAULTS");
  assert_int_equal(simdev_xla_shutdown(), 0);
  relu_call again; /* a new device, no plan */
  relu_setup(&again, 10);
  assert_int_equal(ff_call(simdev_xla_relu, &again.f).code, OK);
  assert_int_equal(relu_wrong(&again), 0);
  relu_free(&again);
  assert_int_equal(ff_live_errors(), 0);
}

/* ---- XLA's continuation on the worker ---------------------------------- */

/* What a continuation saw; read by the main thread after `done`. */
typedef struct cont_state {
  pthread_mutex_t mu; /* guards started, done */
  pthread_cond_t cv;
  int started, done;
  bool until_refused; /* keep calling until a call is refused */
  char thread[32];
  relu_call* calls; /* ncalls of them, grown as needed */
  XLA_FFI_Future** futs;
  int ncalls, cap;
  XLA_FFI_Error_Code refused; /* the refusal's code (OK: none) */
  int inside, release;        /* shutdown_waits_for_a_caller's caller */
  int shutdown_rc;            /* shutdown_on_worker_refused */
} cont_state;

static void set_flag(cont_state* st, int* flag) {
  pthread_mutex_lock(&st->mu);
  *flag = 1;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

/* Below ctest's timeout (300 s), far above any correct run (valgrind
 * included). */
#define FLAG_TIMEOUT_S 120

/* Waits for *flag. A flag never set means the runtime hangs, and other
 * threads are stuck inside it, so no cmocka failure could clean up: say
 * which flag and stop the process (ctest reports the abort). */
#define wait_flag(st, flag) wait_flag_at((st), (flag), #flag)
static void wait_flag_at(cont_state* st, int* flag, const char* what) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += FLAG_TIMEOUT_S;
  int rc = 0;
  pthread_mutex_lock(&st->mu);
  while (!*flag && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&st->cv, &st->mu, &until);
  int set = *flag;
  pthread_mutex_unlock(&st->mu);
  if (!set) {
    fprintf(stderr,
            "test_xla_runtime: %s not set after %d s: the runtime "
            "hangs\n",
            what, FLAG_TIMEOUT_S);
    abort();
  }
}

/* A continuation as XLA runs it: the next simdev call of the program, made
 * on the thread that completed the previous call's future. */
static void continuation(void* arg) {
  cont_state* st = arg;
  pthread_getname_np(pthread_self(), st->thread, sizeof(st->thread));
  set_flag(st, &st->started);
  do {
    if (st->ncalls == st->cap) { /* no fixed cap: the loop's length is
                                    the other thread's timing */
      st->cap = st->cap ? 2 * st->cap : 16;
      st->calls = realloc(st->calls, (size_t)st->cap * sizeof(*st->calls));
      st->futs = realloc(st->futs, (size_t)st->cap * sizeof(*st->futs));
      if (st->calls == NULL || st->futs == NULL) abort();
    }
    relu_call* c = &st->calls[st->ncalls];
    relu_setup(c, 50);
    XLA_FFI_Error_Code err;
    XLA_FFI_Future* fut = ff_call_async(simdev_xla_relu, &c->f, &err);
    if (err != OK) {
      st->refused = err;
      relu_free(c);
      break;
    }
    st->futs[st->ncalls++] = fut;
    if (st->until_refused) usleep(1000);
  } while (st->until_refused);
  set_flag(st, &st->done);
}

static void cont_init(cont_state* st, bool until_refused) {
  memset(st, 0, sizeof(*st));
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->cv, NULL);
  st->until_refused = until_refused;
}

static void cont_finish(cont_state* st) {
  for (int i = 0; i < st->ncalls; i++) {
    ff_result r = {0};
    ff_wait(st->futs[i], &r);
    assert_int_equal(r.code, OK);
    assert_int_equal(relu_wrong(&st->calls[i]), 0);
    relu_free(&st->calls[i]);
  }
  free(st->calls);
  free(st->futs);
  pthread_cond_destroy(&st->cv);
  pthread_mutex_destroy(&st->mu);
}

/* A handler called by the continuation on simdev0-s0 queues its job and
 * returns (it must not wait for its own stream). */
static void continuation_on_worker(void** state) {
  cont_state* st = malloc(sizeof(*st));
  cont_init(st, false);
  ff_set_continuation(continuation, st);
  relu_call c;
  relu_setup(&c, 100);
  ff_result r = ff_call(simdev_xla_relu, &c.f);
  assert_int_equal(r.code, OK);
  wait_flag(st, &st->done);
  assert_string_equal(st->thread, "simdev0-s0");
  assert_int_equal(st->refused, OK);
  assert_int_equal(st->ncalls, 1);
  cont_finish(st);
  relu_free(&c);
  free(st);
}

/* A shutdown while a continuation runs on the worker: shutdown drains the
 * stream, so it waits for that continuation; the continuation's calls made
 * once the shutdown began are refused at once (UNAVAILABLE) instead of
 * waiting for the shutdown, which would wait for them: no deadlock. */
static void shutdown_during_continuation(void** state) {
  cont_state* st = malloc(sizeof(*st));
  cont_init(st, true);
  ff_set_continuation(continuation, st);
  relu_call c;
  relu_setup(&c, 100);
  XLA_FFI_Error_Code err;
  XLA_FFI_Future* fut = ff_call_async(simdev_xla_relu, &c.f, &err);
  assert_non_null(fut);
  wait_flag(st, &st->started); /* the worker is inside the continuation */
  assert_int_equal(simdev_xla_shutdown(), 0);
  /* shutdown returned: the continuation ended, refused, and every call it
   * queued before the refusal ran. */
  wait_flag(st, &st->done);
  assert_int_equal(st->refused, XLA_FFI_Error_Code_UNAVAILABLE);
  for (int i = 0; i < st->ncalls; i++) assert_true(ff_is_complete(st->futs[i]));
  ff_result r = {0};
  ff_wait(fut, &r);
  assert_int_equal(r.code, OK);
  cont_finish(st);
  relu_free(&c);
  free(st);
}

/* The caller stopped inside XLA_FFI_Future_Create: it holds the runtime
 * until the test releases it. */
static void hold_caller(void* arg) {
  cont_state* st = arg;
  set_flag(st, &st->inside);
  wait_flag(st, &st->release);
}

typedef struct caller_call {
  relu_call c;
  XLA_FFI_Future* fut;
  XLA_FFI_Error_Code err;
} caller_call;

static void* held_caller_main(void* arg) {
  caller_call* cc = arg;
  cc->fut = ff_call_async(simdev_xla_relu, &cc->c.f, &cc->err);
  return NULL;
}

static void* shutdown_main(void* arg) {
  *(int*)arg = simdev_xla_shutdown();
  return NULL;
}

/* A shutdown that must wait for a handler on another thread (between
 * taking the device and queuing its job) while a continuation on the
 * worker calls handlers: those calls are refused at once (UNAVAILABLE),
 * not left waiting for the shutdown, which waits for the worker. The
 * order is forced by flags, never by timing: the held caller is released
 * only after the continuation was refused. (Before the fix, the
 * continuation's call waited forever: ctest's timeout caught it.) */
static void shutdown_waits_for_a_caller(void** state) {
  cont_state* st = malloc(sizeof(*st));
  cont_init(st, true);
  caller_call held;
  relu_setup(&held.c, 20);
  ff_set_create_hook(hold_caller, st);
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, held_caller_main, &held), 0);
  wait_flag(st, &st->inside);
  /* A job whose completion starts the continuation on the worker. */
  ff_set_continuation(continuation, st);
  relu_call c;
  relu_setup(&c, 100);
  XLA_FFI_Error_Code err;
  XLA_FFI_Future* fut = ff_call_async(simdev_xla_relu, &c.f, &err);
  assert_non_null(fut);
  wait_flag(st, &st->started);
  int shut_rc = -1;
  assert_int_equal(pthread_create(&tb, NULL, shutdown_main, &shut_rc), 0);
  wait_flag(st, &st->done); /* refused: the shutdown has begun */
  /* Release and join before any assert: a failed assert must not leave
   * the held caller and the shutdown blocked. */
  XLA_FFI_Error_Code refused = st->refused;
  set_flag(st, &st->release);
  assert_int_equal(pthread_join(ta, NULL), 0);
  assert_int_equal(pthread_join(tb, NULL), 0);
  assert_int_equal(refused, XLA_FFI_Error_Code_UNAVAILABLE);
  assert_int_equal(shut_rc, 0);
  assert_int_equal(held.err, OK); /* it got in before the shutdown */
  ff_result r = {0};
  ff_wait(held.fut, &r);
  assert_int_equal(r.code, OK);
  assert_int_equal(relu_wrong(&held.c), 0);
  ff_wait(fut, &r);
  assert_int_equal(r.code, OK);
  cont_finish(st);
  relu_free(&held.c);
  relu_free(&c);
  free(st);
}

/* simdev_xla_shutdown on the worker (a continuation) refuses: draining its
 * own stream would wait for itself. */
static void shutdown_refused_on_worker_cont(void* arg) {
  cont_state* st = arg;
  st->shutdown_rc = simdev_xla_shutdown();
  set_flag(st, &st->done);
}

static void shutdown_on_worker_refused(void** state) {
  cont_state* st = malloc(sizeof(*st));
  cont_init(st, false);
  ff_set_continuation(shutdown_refused_on_worker_cont, st);
  relu_call c;
  relu_setup(&c, 10);
  assert_int_equal(ff_call(simdev_xla_relu, &c.f).code, OK);
  wait_flag(st, &st->done);
  assert_int_equal(st->shutdown_rc, -1); /* SIM_EINVAL, as sx.h says */
  /* The runtime still works. */
  assert_int_equal(ff_call(simdev_xla_relu, &c.f).code, OK);
  assert_int_equal(relu_wrong(&c), 0);
  cont_finish(st);
  relu_free(&c);
  free(st);
}

int main(int argc, char** argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  /* The tests set these themselves. */
  unsetenv("SIMDEV_SYNC");
  unsetenv("SIMDEV_MEMORY_MB");
  unsetenv("SIMDEV_DISABLE");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(async_completion),
      cmocka_unit_test(not_queued_not_counted),
      cmocka_unit_test(many_in_flight),
      cmocka_unit_test(concurrent_callers),
      cmocka_unit_test(shutdown_drains),
      cmocka_unit_test(worker_error),
      cmocka_unit_test(sync_mode),
      cmocka_unit_test(bad_settings),
      cmocka_unit_test(faults),
      cmocka_unit_test(continuation_on_worker),
      cmocka_unit_test(shutdown_during_continuation),
      cmocka_unit_test(shutdown_waits_for_a_caller),
      cmocka_unit_test(shutdown_on_worker_refused),
  };
  return cmocka_run_group_tests_name("xla_runtime", tests, NULL,
                                     ff_teardown_shutdown);
}
