/*
 * generic_callbacks.c - generic checks of host callbacks (they run once, in
 * order, with a live status; an error marks the stream bad; a callback may
 * enqueue work on its own stream) and of timers. Valid for any plugin (see
 * generic.c for the ground rules: gates, the safety net, no check that depends
 * on timing).
 */
#include <stdio.h>
#include <stdlib.h>

#include "conformance.h"
#include "generic.h"

#define GENERIC_CALLBACKS_RULES(X)                                           \
  X(R_CB_RUNS, "host_callback.runs", REQUIRED, "host_callback",              \
    "A host callback for which host_callback returned true runs once, in "   \
    "stream order, before the stream reports done: "                         \
    "CStream::DoHostCallbackWithStatus hands over a context only "           \
    "HostCallbackTrampoline frees, and stream.h makes callbacks occupy the " \
    "stream like device work, so a dropped callback leaves whoever waits "   \
    "for it waiting forever (TF 2.21's own PluggableDevice runtime makes no " \
    "host callbacks; users of TF's Stream interface do).")                   \
  X(R_CB_STATUS, "host_callback.gets_status", REQUIRED, "host_callback",     \
    "The callback is called with a non-NULL TF_Status: TF passes none of "   \
    "its own, and HostCallbackTrampoline writes the callback's result into " \
    "the one it gets (Set_TF_Status_from_Status), so NULL crashes the "      \
    "process.")                                                              \
  X(R_CB_FRESH, "host_callback.fresh_status", RECOMMENDED, "host_callback",  \
    "The TF_Status given to the callback is OK at entry (as TF's own test "  \
    "plugin passes it): the trampoline overwrites it, but a status still "   \
    "holding an earlier error hints that the plugin reads stale results.")   \
  X(R_CB_ERROR, "stream_status.reports_callback_error", RECOMMENDED,         \
    "get_stream_status",                                                     \
    "After a host callback returned an error, get_stream_status reports an " \
    "error, so CStream::RefreshStatus would mark the stream bad. TF 2.21 "   \
    "never reads the callback's status back and stream.h calls its effect "  \
    "platform-dependent, but a plugin that forgets the error turns a "       \
    "failed callback into a silent success for whoever asks.")               \
  X(R_CB_ENQUEUE, "host_callback.may_enqueue", RECOMMENDED, "host_callback", \
    "A host callback can enqueue more work on its own stream without "       \
    "deadlocking. TF 2.21 never does (its completion callbacks run on "      \
    "EventMgr's thread pool, not in host callbacks) and CUDA forbids API "   \
    "calls in host functions, but callers written for CPU-like devices do.") \
  X(R_TIMER_FNS, "timer.callbacks", RECOMMENDED,                             \
    "create_timer_fns / create_timer / start_timer / stop_timer",            \
    "When timers are offered, create_timer_fns fills nanoseconds and the "   \
    "timer callbacks are set and return OK. TF 2.21 never calls "            \
    "create_timer_fns or the timer callbacks (CStream has no event-based "   \
    "timer); profilers of other TF releases do.")                            \
  X(R_TIMER_MEASURES, "timer.measures_stream_time", RECOMMENDED,             \
    "SP_TimerFns.nanoseconds",                                               \
    "A timer started and stopped around 2 ms of stream work reports at "     \
    "least 1 ms and no more than the host saw pass.")
CONF_RULES(conf_generic_callbacks_rules, GENERIC_CALLBACKS_RULES)

/* "had not run" / "had run 3 times", for messages. */
static const char* ran_text(int ran) {
  static char buf[32];
  if (ran == 0) return "had not run";
  snprintf(buf, sizeof(buf), "had run %d times", ran);
  return buf;
}

/* ------------------------------------------------------------ callbacks */

/* The one test that grades host_callback.runs: the others hold work at a
 * gate with host callbacks and are skipped when callbacks do not run
 * (generic_callbacks_run). */
static void test_host_callback(conf_env* e) {
  conf_probe p1, p2;
  SP_Stream s = conf_stream_new(e, 0);
  if (s == NULL) goto out;
  /* TF_Bool true: enqueued (a stub returning false breaks TF). */
  int ok1 = EXPECT(R_HOST_CB_TRUE,
                   conf_enqueue_probe(e, 0, s, &p1, -1, 0, TF_OK, NULL),
                   "host_callback returned false (first of two callbacks)");
  int ok2 = EXPECT(R_HOST_CB_TRUE,
                   conf_enqueue_probe(e, 0, s, &p2, -1, 0, TF_OK, NULL),
                   "host_callback returned false (second of two callbacks)");
  TF_Code c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream holding two host callbacks returned %s",
         conf_code_name(c));
  conf_probe r1 = conf_probe_get(&p1), r2 = conf_probe_get(&p2);
  if (ok1) {
    EXPECT(R_CB_RUNS, r1.ran == 1,
           "host_callback returned true, and the callback %s when the stream "
           "reported done",
           ran_text(r1.ran));
  }
  if (ok2) {
    EXPECT(R_CB_RUNS, r2.ran == 1,
           "host_callback returned true for a second callback, and it %s "
           "when the stream reported done",
           ran_text(r2.ran));
  }
  if (r1.ran && r2.ran) {
    EXPECT(R_CB_RUNS, r1.order < r2.order,
           "two host callbacks on one stream ran out of order: the first "
           "enqueued finished #%d, the second #%d",
           r1.order, r2.order);
  }
  if (r1.ran) {
    /* TF's trampoline writes its result into the status it is given. */
    EXPECT(R_CB_STATUS, r1.status_nonnull,
           "the host callback was called with a NULL TF_Status");
    if (r1.status_nonnull) {
      EXPECT(R_CB_FRESH, r1.code_at_entry == TF_OK,
             "the host callback's TF_Status held %s at entry",
             conf_code_name(r1.code_at_entry));
    }
  }
  e->se.get_stream_status(D0, s, conf_st(e));
  EXPECT_OK(R_STREAM_STATUS_OK, e->st, "get_stream_status after OK callbacks");
out:
  conf_stream_free(e, 0, s);
}

/* A callback that returns an error marks its stream bad (TF's
 * HostCallbackError test). Uses its own stream: the error is sticky. */
static void test_host_callback_error(conf_env* e) {
  conf_probe p;
  SP_Stream s = conf_stream_new(e, 0);
  if (s == NULL || !generic_callbacks_run(e, s)) goto out;
  ENSURE(R_HOST_CB_TRUE,
         conf_enqueue_probe(e, 0, s, &p, -1, 0, TF_INTERNAL,
                            "conformance: injected callback failure"),
         "host_callback returned false");
  conf_sync(e, 0, s); /* may report the error itself */
  int ran = conf_probe_get(&p).ran;
  EXPECT(R_CB_RUNS, ran == 1,
         "host_callback returned true for a callback returning an error, "
         "and it %s when the stream reported done",
         ran_text(ran));
  e->se.get_stream_status(D0, s, conf_st(e));
  EXPECT(R_CB_ERROR, conf_status_code(e->st) != TF_OK,
         "get_stream_status returned OK after a host callback on the stream "
         "returned INTERNAL (\"conformance: injected callback failure\")");
out:
  conf_stream_free(e, 0, s);
}

/* A host callback that enqueues more work on its own stream. TF 2.21 never
 * does this (see the rule), but a plugin that deadlocks on it surprises
 * anyone who does. */
typedef struct reenter_arg {
  conf_env* e;
  SP_Stream s;
  SP_DeviceMemoryBase* d;
  const void* src;
  size_t n;
  TF_Status* st;
  conf_probe done; /* signalled (under the probe mutex) at the end */
} reenter_arg;

static void reenter_main(void* arg, TF_Status* status) {
  reenter_arg* r = arg;
  conf_status_set(r->st, TF_OK, "");
  r->e->se.memcpy_htod(&r->e->dev[0], r->s, r->d, r->src, r->n, r->st);
  TF_Status* st2 = conf_status_new();
  r->e->se.get_stream_status(&r->e->dev[0], r->s, st2);
  if (conf_status_code(r->st) == TF_OK && conf_status_code(st2) != TF_OK) {
    conf_status_set(r->st, conf_status_code(st2), conf_status_msg(st2));
  }
  conf_status_free(st2);
  if (status != NULL) conf_status_set(status, TF_OK, "");
  conf_probe_mark_ran(&r->done);
}

static void test_callback_enqueues(conf_env* e) {
  enum { kN = 4096 };
  /* On the heap: if the callback never finishes, it still holds these
   * after the test returned (then they are leaked on purpose). */
  typedef struct buffers {
    unsigned char src[kN], dst[kN];
    SP_DeviceMemoryBase d;
    reenter_arg r;
  } buffers;
  buffers* b = calloc(1, sizeof(*b));
  SP_Stream s = conf_stream_new(e, 0);
  int stuck = 0;
  if (b == NULL || s == NULL || !generic_callbacks_run(e, s)) goto out;
  b->d = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, b->d.opaque != NULL, "allocate(%d) returned NULL", kN);
  conf_fill(b->src, kN, 17);
  b->r.e = e;
  b->r.s = s;
  b->r.d = &b->d;
  b->r.src = b->src;
  b->r.n = kN;
  b->r.st = conf_status_new();
  ENSURE(R_HOST_CB_TRUE, e->se.host_callback(D0, s, reenter_main, &b->r),
         "host_callback returned false");
  if (!EXPECT(R_CB_ENQUEUE, conf_probe_wait_ran(&b->r.done, conf_safety_ms()),
              "a host callback calling memcpy_htod and get_stream_status on "
              "its own stream had not returned after %d ms (deadlock?)",
              conf_safety_ms())) {
    /* The plugin's thread is stuck inside the callback: waiting for or
     * destroying the stream would hang this test too. */
    stuck = 1;
    conf_note("the stream, its callback's buffers and status are leaked");
    goto out;
  }
  EXPECT_OK(R_CB_ENQUEUE, b->r.st,
            "memcpy_htod + get_stream_status from a host callback");
  e->se.memcpy_dtoh(D0, s, b->dst, &b->d, kN, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  TF_Code c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for the stream after the callback's copy returned %s",
         conf_code_name(c));
  long at = generic_first_diff(b->dst, b->src, kN);
  EXPECT(R_CB_ENQUEUE, at < 0,
         "the copy a host callback enqueued on its own stream, read back "
         "behind it: byte %ld differs",
         at);
out:
  if (stuck) return;
  conf_stream_free(e, 0, s);
  if (b != NULL) {
    if (b->d.opaque != NULL) conf_free(e, 0, &b->d);
    if (b->r.st != NULL) conf_status_free(b->r.st);
    free(b);
  }
}

/* ------------------------------------------------------------ timers */

static void test_timer(conf_env* e) {
  SP_TimerFns tf = {.struct_size = SP_TIMER_FNS_STRUCT_SIZE};
  int have_tf = 0;
  SP_Timer t = NULL;
  conf_probe p;
  SP_Stream s = NULL;
  if (e->pfns.create_timer_fns == NULL || e->se.create_timer == NULL) {
    conf_skip(
        "no timers (create_timer_fns or create_timer is not set); TF "
        "2.21 never calls create_timer_fns");
    return;
  }
  ENSURE(R_TIMER_FNS,
         e->se.destroy_timer && e->se.start_timer && e->se.stop_timer,
         "create_timer is set but destroy_timer, start_timer or stop_timer "
         "is NULL");
  s = conf_stream_new(e, 0);
  if (s == NULL || !generic_callbacks_run(e, s)) goto out;
  /* TF before 2.15 called this at registration and validated the result
   * (ValidateSPTimerFns); TF 2.21 no longer calls it. */
  e->pfns.create_timer_fns(&e->platform, &tf, conf_st(e));
  ENSURE_OK(R_TIMER_FNS, e->st, "create_timer_fns");
  have_tf = 1;
  EXPECT(R_TIMER_FNS, tf.struct_size != 0,
         "create_timer_fns set SP_TimerFns.struct_size to 0");
  ENSURE(R_TIMER_FNS, tf.nanoseconds != NULL,
         "create_timer_fns returned OK and left nanoseconds NULL");
  e->se.create_timer(D0, &t, conf_st(e));
  ENSURE_OK(R_TIMER_FNS, e->st, "create_timer");
  ENSURE(R_TIMER_FNS, t != NULL,
         "create_timer returned OK and left the timer NULL");

  /* The timer measures stream time: a 2 ms callback between start and
   * stop, all enqueued in a few microseconds of host time. The interval
   * lies inside the host's, from before start_timer to after the sync
   * (no fixed upper bound: a loaded machine makes both longer). */
  uint64_t host0 = conf_now_ns();
  e->se.start_timer(D0, s, t, conf_st(e));
  ENSURE_OK(R_TIMER_FNS, e->st, "start_timer");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, s, &p, -1, 2, TF_OK, NULL),
         "host_callback returned false");
  e->se.stop_timer(D0, s, t, conf_st(e));
  ENSURE_OK(R_TIMER_FNS, e->st, "stop_timer");
  TF_Code c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream holding a timed callback returned %s",
         conf_code_name(c));
  uint64_t host = conf_now_ns() - host0;
  uint64_t ns = tf.nanoseconds(t);
  EXPECT(R_TIMER_MEASURES, ns >= 1000000u,
         "the timer reported %llu ns around a host callback that sleeps "
         "2 ms",
         (unsigned long long)ns);
  /* 1% for a plugin whose clock is not the host's CLOCK_MONOTONIC. */
  EXPECT(R_TIMER_MEASURES, ns <= host + host / 100,
         "the timer reported %llu ns; the host saw %llu ns pass from before "
         "start_timer to after the stream was done",
         (unsigned long long)ns, (unsigned long long)host);
out:
  conf_stream_free(e, 0, s);
  if (t != NULL) e->se.destroy_timer(D0, t);
  if (have_tf) e->pfns.destroy_timer_fns(&e->platform, &tf);
}

/* ------------------------------------------------------------ list */

const harness_test conf_generic_callbacks_tests[] = {
    {"generic.host_callback", test_host_callback, 0},
    {"generic.host_callback_error", test_host_callback_error, 0},
    {"generic.callback_enqueues", test_callback_enqueues, 0},
    {"generic.timer", test_timer, 0},
    {NULL, NULL, 0},
};
