/*
 * generic_order.c - generic checks of when stream work runs:
 * synchronize_all_activity waits for every stream, copies keep stream order
 * behind held work and behind events, and streams work when used from
 * several threads at once. Valid for any plugin (see generic.c for the ground
 * rules: gates, the safety net, no check that depends on timing).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "generic.h"

#define GENERIC_ORDER_RULES(X)                                                 \
  X(R_SYNC_ALL, "synchronize_all.waits", REQUIRED, "synchronize_all_activity", \
    "synchronize_all_activity returns OK once the work on all the device's "   \
    "streams has finished: PluggableDevice::Sync (PluggableDeviceUtil::"       \
    "SyncAll) calls it before TF reads results, and fails with \""             \
    "PluggableDevice SyncAll failed.\" on an error.")                          \
  X(R_ORDER, "memcpy.stream_order", REQUIRED, "memcpy_dtoh",                   \
    "A copy runs in stream order, after the work enqueued on its stream "      \
    "before it, never at enqueue time: TF enqueues a device-to-host copy "     \
    "behind the stream dependency on the kernels producing its data "          \
    "(CopyPluggableDeviceTensorToCPU), so an early copy reads data not yet "   \
    "written.")                                                                \
  X(R_CONCURRENT, "stream.concurrent_use", REQUIRED,                           \
    "memcpy_* / record_event / get_event_status",                              \
    "Streams of one device work when used from several threads at once: TF "   \
    "drives its compute and copy streams from executor threads and polls "     \
    "events from EventMgr's thread; every thread's copies arrive intact.")
CONF_RULES(conf_generic_order_rules, GENERIC_ORDER_RULES)

/* ------------------------------------------------------------ sync */

static void test_synchronize_all(conf_env* e) {
  enum { kN = 64 * 1024 };
  conf_probe p1, p2;
  pthread_t l0, l1;
  int have_later = 0;
  SP_DeviceMemoryBase d = {0};
  unsigned char* src = malloc(kN);
  unsigned char* dst = calloc(1, kN);
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  if (a == NULL || b == NULL || src == NULL || dst == NULL) goto out;
  if (!generic_callbacks_run(e, a)) goto out;
  d = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, d.opaque != NULL, "allocate(%d) returned NULL", kN);
  conf_fill(src, kN, 4);
  if (!generic_put(e, a, &d, src, kN)) goto out;

  /* Nothing pending. */
  e->se.synchronize_all_activity(D0, conf_st(e));
  EXPECT_OK(R_SYNC_ALL, e->st, "synchronize_all_activity (idle device)");

  /* Work held on two streams, released (by helpers started first, so that a
   * blocking enqueue cannot hang the test) while the host is blocked - or,
   * on a slow machine, before it got there: the checks hold either way. */
  l0 = conf_gate_open_later(0, 20);
  l1 = conf_gate_open_later(1, 40);
  have_later = 1;
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &p1, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, b, &p2, 1, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.memcpy_dtoh(D0, b, dst, &d, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  e->se.synchronize_all_activity(D0, conf_st(e));
  EXPECT_OK(R_SYNC_ALL, e->st, "synchronize_all_activity");
  int r1 = conf_probe_get(&p1).ran, r2 = conf_probe_get(&p2).ran;
  EXPECT(R_SYNC_ALL, r1 == 1,
         "synchronize_all_activity returned while a host callback on one "
         "stream had run %d times",
         r1);
  EXPECT(R_SYNC_ALL, r2 == 1,
         "synchronize_all_activity returned while a host callback on another "
         "stream had run %d times",
         r2);
  long at = generic_first_diff(dst, src, kN);
  EXPECT(R_SYNC_ALL, at < 0,
         "synchronize_all_activity returned before a queued memcpy_dtoh had "
         "run (byte %ld of its destination differs)",
         at);
out:
  conf_gates_open_all();
  if (have_later) {
    conf_join_later(l0);
    conf_join_later(l1);
  }
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
  if (d.opaque != NULL) conf_free(e, 0, &d);
  free(src);
  free(dst);
}

/* ------------------------------------------------------------ ordering */

/* Names the first enqueue call that returned only after the gated probe ran
 * (the call waited for the stream to drain; the safety net opened the gate).
 */
#define NOTE_BLOCKED(what)                                    \
  do {                                                        \
    if (blocked == NULL && conf_probe_get(&gate_probe).ran) { \
      blocked = (what);                                       \
    }                                                         \
  } while (0)

/* Copies run in stream order, not at enqueue time: a device-to-host copy
 * queued behind a blocked callback must leave the host buffer alone. The
 * host buffers come from host_memory_allocate, the memory the header names
 * for asynchronous copies, so the enqueue must not block either (into
 * pageable memory a blocking copy is legal; CUDA does it).
 *
 * On the second stream a host callback sits between wait_for_event and the
 * copy, so an early copy there is blamed on the right callback: if the
 * callback ran, the event let the stream go early; if only the copy ran,
 * the copy ignored its stream. */
static void test_ordering(conf_env* e) {
  enum { kN = 256 * 1024 };
  conf_probe gate_probe, p2;
  const char* blocked = NULL;
  pthread_t safety;
  int have_safety = 0;
  int early_h = 0, early_h2 = 0, early_event = 0;
  SP_DeviceMemoryBase d = {0}, d2 = {0};
  SP_Event ev = NULL;
  unsigned char* pattern = malloc(kN);
  unsigned char* h = e->se.host_memory_allocate(D0, kN);
  unsigned char* h2 = e->se.host_memory_allocate(D0, kN);
  SP_Stream s = conf_stream_new(e, 0);
  SP_Stream s2 = conf_stream_new(e, 0);
  if (s == NULL || s2 == NULL || pattern == NULL) goto out;
  ENSURE(R_HOST_MEM, h != NULL && h2 != NULL,
         "host_memory_allocate(%d) returned NULL", kN);
  if (!generic_callbacks_run(e, s)) goto out;
  memset(h, 0, kN);
  memset(h2, 0, kN);
  d = conf_alloc(e, 0, kN);
  d2 = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, d.opaque != NULL && d2.opaque != NULL,
         "allocate(%d) returned NULL", kN);
  conf_fill(pattern, kN, 5);
  if (!generic_put(e, s, &d, pattern, kN)) goto out;
  e->se.create_event(D0, &ev, conf_st(e));
  ENSURE_OK(R_EVENT_CREATE, e->st, "create_event");
  ENSURE(R_EVENT_CREATE, ev != NULL,
         "create_event returned OK and left the event NULL");

  /* If an enqueue blocks until the stream drains, the helper opens the gate
   * and the check below names the call instead of the run hanging. */
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  ENSURE(R_HOST_CB_TRUE,
         conf_enqueue_probe(e, 0, s, &gate_probe, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.memcpy_dtoh(D0, s, h, &d, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  NOTE_BLOCKED("memcpy_dtoh");
  /* Same stream, FIFO: device-to-device behind the same gate. */
  e->se.memcpy_dtod(D0, s, &d2, &d, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "memcpy_dtod");
  NOTE_BLOCKED("memcpy_dtod");
  e->se.record_event(D0, s, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "record_event");
  NOTE_BLOCKED("record_event");
  /* Another stream reads d2 only after the event. */
  e->se.wait_for_event(D0, s2, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "wait_for_event");
  NOTE_BLOCKED("wait_for_event");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, s2, &p2, -1, 0, TF_OK, NULL),
         "host_callback returned false");
  NOTE_BLOCKED("host_callback");
  e->se.memcpy_dtoh(D0, s2, h2, &d2, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "memcpy_dtoh (second stream)");
  NOTE_BLOCKED("memcpy_dtoh (second stream)");

  conf_sleep_ms(SETTLE_MS);
  /* h2 before p2: on a stream that keeps its order, a changed h2 means p2
   * had run by then. */
  early_h = conf_find_not(h, kN, 0) != -1;
  early_h2 = conf_find_not(h2, kN, 0) != -1;
  early_event = conf_probe_get(&p2).ran != 0;
  EXPECT(R_NO_BLOCK, blocked == NULL,
         "%s returned only after the work queued ahead of it had run (the "
         "harness released that work after %d ms)",
         blocked, conf_safety_ms());
  if (blocked == NULL && !conf_probe_get(&gate_probe).ran) {
    EXPECT(R_ORDER, !early_h,
           "memcpy_dtoh ran before the work queued ahead of it: its host "
           "buffer changed while a host callback ahead of the copy was held "
           "at a gate");
    EXPECT(R_EVENT_PENDING, !early_event,
           "a host callback behind wait_for_event ran before the event could "
           "complete: the work recorded before it was held at a gate");
    EXPECT(R_ORDER, !early_h2 || early_event,
           "memcpy_dtoh on a second stream ran before the host callback "
           "queued ahead of it on that stream (which waits for an event "
           "whose work is held at a gate)");
  } else {
    early_h = early_h2 = early_event = 0; /* no verdict: the gate opened */
  }
  conf_gate_open(0);
  TF_Code c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK, "waiting for the first stream returned %s",
         conf_code_name(c));
  c = conf_sync(e, 0, s2);
  EXPECT(R_STREAM_SYNC, c == TF_OK, "waiting for the second stream returned %s",
         conf_code_name(c));
  /* Wrong data that an early copy already explains is blamed on it. */
  long at = generic_first_diff(h, pattern, kN);
  conf_check(early_h ? &R_ORDER : &R_COPY_DATA, at < 0, __FILE__, __LINE__,
             "memcpy_dtoh behind a held host callback: byte %ld of the "
             "result differs%s",
             at,
             early_h ? " (the copy ran at enqueue time, before the work "
                       "queued ahead of it)"
                     : "");
  at = generic_first_diff(h2, pattern, kN);
  conf_check(early_event ? &R_EVENT_PENDING
             : early_h2  ? &R_ORDER
                         : &R_COPY_DATA,
             at < 0, __FILE__, __LINE__,
             "memcpy_dtoh behind wait_for_event of a device-to-device copy's "
             "event: byte %ld of the result differs%s",
             at,
             early_event ? " (the second stream went on before the event "
                           "was complete)"
             : early_h2  ? " (the copy ran at enqueue time, before the work "
                           "queued ahead of it)"
                         : "");
out:
  conf_gates_open_all();
  if (have_safety) conf_join_later(safety);
  conf_stream_free(e, 0, s);
  conf_stream_free(e, 0, s2);
  if (ev != NULL) e->se.destroy_event(D0, ev);
  if (d.opaque != NULL) conf_free(e, 0, &d);
  if (d2.opaque != NULL) conf_free(e, 0, &d2);
  if (h != NULL) e->se.host_memory_deallocate(D0, h);
  if (h2 != NULL) e->se.host_memory_deallocate(D0, h2);
  free(pattern);
}

/* ------------------------------------------------------------ threads */

/* TF drives its compute, H2D, D2H and D2D streams from different threads at
 * once and polls events from yet another; this is mostly food for helgrind.
 * Half the workers block (block_host_until_done or the event fallback), half
 * poll a reused event as TF's EventMgr does. */
enum { kWorkers = 4, kRounds = 16, kWorkN = 8192 };

typedef struct worker_arg {
  conf_env* e;
  SP_Stream s;
  SP_DeviceMemoryBase a, b;
  unsigned char src[kWorkN], dst[kWorkN];
  int poll; /* complete by polling an event, not by blocking */
  SP_Event ev;
  TF_Status* st;
  /* Failed rounds by kind; read by the main thread after join. */
  int copy_failed, record_failed, wait_failed, bad_status, early, corrupt;
  SE_EventStatus last_bad; /* the last invalid event status seen */
} worker_arg;

static void* worker_main(void* arg) {
  worker_arg* w = arg;
  conf_env* e = w->e;
  const SP_StreamExecutor* se = &e->se;
  for (int r = 0; r < kRounds; r++) {
    conf_fill(w->src, kWorkN, (unsigned)(r * 31 + 7));
    conf_status_set(w->st, TF_OK, "");
    se->memcpy_htod(D0, w->s, &w->a, w->src, kWorkN, w->st);
    se->memcpy_dtod(D0, w->s, &w->b, &w->a, kWorkN, w->st);
    se->memcpy_dtoh(D0, w->s, w->dst, &w->b, kWorkN, w->st);
    if (conf_status_code(w->st) != TF_OK) w->copy_failed++;
    conf_status_set(w->st, TF_OK, "");
    int polled_complete = 0;
    if (w->poll) {
      /* TF's EventMgr: record a (reused) event, poll it from this thread. */
      se->record_event(D0, w->s, w->ev, w->st);
      if (conf_status_code(w->st) != TF_OK) w->record_failed++;
      SE_EventStatus es;
      while ((es = se->get_event_status(D0, w->ev)) == SE_EVENT_PENDING) {
        sched_yield();
      }
      if (es == SE_EVENT_COMPLETE) {
        polled_complete = 1;
      } else {
        w->bad_status++;
        w->last_bad = es;
      }
    } else if (se->block_host_until_done != NULL) {
      se->block_host_until_done(D0, w->s, w->st);
      if (conf_status_code(w->st) != TF_OK) w->wait_failed++;
    } else {
      se->record_event(D0, w->s, w->ev, w->st);
      if (conf_status_code(w->st) != TF_OK) w->record_failed++;
      se->block_host_for_event(D0, w->ev, w->st);
      if (conf_status_code(w->st) != TF_OK) w->wait_failed++;
    }
    if (memcmp(w->src, w->dst, kWorkN) != 0) {
      /* Late or wrong? Wait for the work itself and look again. */
      TF_Status* st = w->st;
      conf_status_set(st, TF_OK, "");
      if (se->block_host_until_done != NULL) {
        se->block_host_until_done(D0, w->s, st);
      } else {
        se->synchronize_all_activity(D0, st);
      }
      if (polled_complete && conf_status_code(st) == TF_OK &&
          memcmp(w->src, w->dst, kWorkN) == 0) {
        w->early++;
      } else {
        w->corrupt++;
      }
    }
  }
  return NULL;
}

static void test_concurrent_streams(conf_env* e) {
  worker_arg* w = calloc(kWorkers, sizeof(*w));
  pthread_t th[kWorkers];
  int started = 0;
  if (w == NULL) return;
  for (int i = 0; i < kWorkers; i++) {
    w[i].e = e;
    w[i].st = conf_status_new();
    w[i].poll = i % 2;
    e->se.create_event(D0, &w[i].ev, conf_st(e));
    ENSURE_OK(R_EVENT_CREATE, e->st, "create_event");
    ENSURE(R_EVENT_CREATE, w[i].ev != NULL,
           "create_event returned OK and left the event NULL");
    w[i].s = conf_stream_new(e, 0);
    if (w[i].s == NULL) goto out;
    w[i].a = conf_alloc(e, 0, kWorkN);
    w[i].b = conf_alloc(e, 0, kWorkN);
    ENSURE(R_ALLOCATE, w[i].a.opaque != NULL && w[i].b.opaque != NULL,
           "allocate(%d) returned NULL", kWorkN);
  }
  for (; started < kWorkers; started++) {
    if (pthread_create(&th[started], NULL, worker_main, &w[started]) != 0) {
      break;
    }
  }
  if (started < kWorkers) {
    conf_note("only %d of %d worker threads could be started", started,
              kWorkers);
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started; i++) {
    const char* how = w[i].poll ? "polling its event" : "blocking";
    EXPECT(R_COPY_OK, w[i].copy_failed == 0,
           "worker %d (%s): copies failed in %d of %d rounds", i, how,
           w[i].copy_failed, kRounds);
    EXPECT(R_EVENT_RECORD, w[i].record_failed == 0,
           "worker %d (%s): record_event failed in %d of %d rounds", i, how,
           w[i].record_failed, kRounds);
    EXPECT(R_STREAM_SYNC, w[i].wait_failed == 0,
           "worker %d (%s): waiting for its stream failed in %d of %d rounds",
           i, how, w[i].wait_failed, kRounds);
    EXPECT(R_EVENT_STATUS, w[i].bad_status == 0,
           "worker %d (%s): get_event_status returned %s in %d of %d rounds", i,
           how, generic_event_status_name(w[i].last_bad), w[i].bad_status,
           kRounds);
    EXPECT(R_EVENT_PENDING, w[i].early == 0,
           "worker %d (%s): the event reported SE_EVENT_COMPLETE before the "
           "copies recorded ahead of it had run, in %d of %d rounds",
           i, how, w[i].early, kRounds);
    EXPECT(R_CONCURRENT, w[i].corrupt == 0,
           "worker %d (%s): the data read back differed from the data "
           "written in %d of %d rounds (four threads copying at once)",
           i, how, w[i].corrupt, kRounds);
  }
out:
  for (int i = 0; i < kWorkers; i++) {
    conf_stream_free(e, 0, w[i].s);
    if (w[i].a.opaque != NULL) conf_free(e, 0, &w[i].a);
    if (w[i].b.opaque != NULL) conf_free(e, 0, &w[i].b);
    if (w[i].st != NULL) conf_status_free(w[i].st);
    if (w[i].ev != NULL) e->se.destroy_event(D0, w[i].ev);
  }
  free(w);
}

/* ------------------------------------------------------------ list */

const harness_test conf_generic_order_tests[] = {
    {"generic.synchronize_all", test_synchronize_all, 0},
    {"generic.ordering", test_ordering, 0},
    {"generic.concurrent_streams", test_concurrent_streams, 0},
    {NULL, NULL, 0},
};
