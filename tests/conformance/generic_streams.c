/*
 * generic_streams.c - generic checks of streams and events: distinct
 * streams, nothing left behind when they are destroyed, stream dependencies,
 * events (pending until their work ran, waited for, reused). Valid for any
 * plugin (see generic.c for the ground rules: gates, the safety net, no check
 * that depends on timing).
 */
#include <dirent.h>
#include <stdint.h>

#include "conformance.h"
#include "generic.h"

#define GENERIC_STREAMS_RULES(X)                                               \
  X(R_STREAMS_DISTINCT, "stream.distinct", REQUIRED, "create_stream",          \
    "Live streams are distinct handles: TF creates a compute stream and "      \
    "separate host-to-device, device-to-host and device-to-device streams "    \
    "per device and orders them only through dependencies and events.")        \
  X(R_DESTROY_RELEASES, "stream.destroy_releases", RECOMMENDED,                \
    "destroy_stream / destroy_event",                                          \
    "Creating and destroying 32 streams and 256 events leaves no threads "     \
    "(/proc/self/task) or file descriptors behind. TF 2.21 keeps a "           \
    "device's streams for the life of the process and pools its events, "      \
    "so a leak costs little there; any caller that creates and destroys "      \
    "them (tests, tools, a long-lived process reinitializing devices) "        \
    "accumulates threads until the process fails.")                            \
  X(R_DEP_ORDER, "stream_dependency.orders", REQUIRED,                         \
    "create_stream_dependency",                                                \
    "create_stream_dependency returns OK, and work enqueued on the "           \
    "dependent stream afterwards starts only after the work enqueued on "      \
    "the other stream before the call finished: TF's copies wait for the "     \
    "compute stream this way (CStream::WaitFor(Stream*) in "                   \
    "PluggableDeviceUtil), so ignoring it copies tensors before the "          \
    "kernels producing them ran.")                                             \
  X(R_DEP_SNAPSHOT, "stream_dependency.only_earlier_work", RECOMMENDED,        \
    "create_stream_dependency",                                                \
    "The dependent stream waits only for work enqueued on the other stream "   \
    "before the call (Stream::WaitFor, as cudaStreamWaitEvent): waiting for "  \
    "later work too serializes TF's copy streams behind its compute "          \
    "stream.")                                                                 \
  X(R_WAIT_UNRECORDED, "event.wait_unrecorded", RECOMMENDED, "wait_for_event", \
    "wait_for_event on an event never recorded returns OK and waits for "      \
    "nothing, as in CUDA; TF 2.21 always records before it waits.")            \
  X(R_EVENT_COMPLETES, "event.completes", REQUIRED, "get_event_status",        \
    "Once the work recorded before an event has run, get_event_status "        \
    "says SE_EVENT_COMPLETE: EventMgr polls it until then, and the copies "    \
    "and tensor frees waiting on it never finish otherwise.")                  \
  X(R_EVENT_REUSE, "event.reusable", REQUIRED, "record_event",                 \
    "An event can be recorded again after it completed and completes "         \
    "again: TF's EventMgr keeps a pool of events and re-records them.")
CONF_RULES(conf_generic_streams_rules, GENERIC_STREAMS_RULES)

/* ------------------------------------------------------------ streams */

static void test_streams(conf_env* e) {
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  if (a == NULL || b == NULL) goto out; /* conf_stream_new checked it */
  EXPECT(R_STREAMS_DISTINCT, a != b,
         "create_stream returned the same handle %p twice", (void*)a);
  /* A fresh stream is OK (Stream::RefreshStatus). */
  e->se.get_stream_status(D0, a, conf_st(e));
  EXPECT_OK(R_STREAM_STATUS_OK, e->st, "get_stream_status(fresh stream)");
  e->se.get_stream_status(D0, b, conf_st(e));
  EXPECT_OK(R_STREAM_STATUS_OK, e->st, "get_stream_status(fresh stream)");
  /* An idle stream is done at once. */
  TF_Code c = conf_sync(e, 0, a);
  EXPECT(R_STREAM_SYNC, c == TF_OK, "waiting for an idle stream returned %s",
         conf_code_name(c));
out:
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
}

/* Entries of a /proc directory (not "." and ".."), or -1. */
static int count_entries(const char* path) {
  DIR* d = opendir(path);
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent* de = readdir(d); de != NULL; de = readdir(d)) {
    if (de->d_name[0] != '.') n++;
  }
  closedir(d);
  return n;
}

/* Destroying streams and events releases their threads and descriptors
 * (TF 2.21 keeps its streams and pools its events; other callers create and
 * destroy them, see the rule). The baseline is taken after one stream and one
 * event lived and died, so a plugin that starts a device-wide pool on first use
 * is not blamed; a plugin that retires threads asynchronously gets up to
 * conf_safety_ms() to do it. */
static void test_leaks(conf_env* e) {
  enum { kStreams = 32, kEvents = 256 };
  SP_Stream w = conf_stream_new(e, 0);
  if (w == NULL) return;
  conf_stream_free(e, 0, w);
  SP_Event wev = NULL;
  e->se.create_event(D0, &wev, conf_st(e));
  if (!EXPECT_OK(R_EVENT_CREATE, e->st, "create_event")) return;
  if (wev != NULL) e->se.destroy_event(D0, wev);

  const int threads0 = count_entries("/proc/self/task");
  const int fds0 = count_entries("/proc/self/fd");
  if (threads0 < 0 || fds0 < 0) {
    conf_skip("/proc/self/task or /proc/self/fd is not readable");
  }
  int streams = 0, events = 0;
  for (; streams < kStreams; streams++) {
    SP_Stream s = conf_stream_new(e, 0);
    if (s == NULL) break;
    conf_stream_free(e, 0, s); /* as ~CStream: wait, then destroy */
  }
  /* One check for the loop: 256 identical passes say nothing more. */
  TF_Code code = TF_OK;
  SP_Event x = NULL;
  for (; events < kEvents; events++) {
    x = NULL;
    e->se.create_event(D0, &x, conf_st(e));
    code = conf_status_code(e->st);
    if (code != TF_OK || x == NULL) break;
    e->se.destroy_event(D0, x);
  }
  EXPECT(R_EVENT_CREATE, events == kEvents,
         "create_event #%d (each earlier one destroyed) returned %s%s%s",
         events + 1, conf_code_name(code), code == TF_OK ? "" : ": ",
         code == TF_OK ? " and left the event NULL" : conf_status_msg(e->st));
  if (threads0 < 0 || fds0 < 0) return;

  const uint64_t t0 = conf_now_ns();
  const uint64_t deadline = t0 + (uint64_t)conf_safety_ms() * 1000000u;
  int threads, fds;
  for (;;) {
    threads = count_entries("/proc/self/task");
    fds = count_entries("/proc/self/fd");
    if ((threads <= threads0 && fds <= fds0) || conf_now_ns() >= deadline) {
      break;
    }
    conf_sleep_ms(10);
  }
  const long waited_ms = (long)((conf_now_ns() - t0) / 1000000u);
  EXPECT(R_DESTROY_RELEASES, threads <= threads0,
         "%d threads after creating and destroying %d streams and %d events, "
         "%d before (waited %ld ms for them to end): destroy_stream or "
         "destroy_event leaves threads running",
         threads, streams, events, threads0, waited_ms);
  EXPECT(R_DESTROY_RELEASES, fds <= fds0,
         "%d file descriptors leaked: %d open after creating and destroying "
         "%d streams and %d events, %d before (waited %ld ms)",
         fds - fds0, fds, streams, events, fds0, waited_ms);
}

/* Stream::WaitFor(Stream*): `dependent` does not start work enqueued after
 * the call until `other` finished what was enqueued on it before the call,
 * and only that. */
static void test_stream_dependency(conf_env* e) {
  conf_probe pa, pa2, pb;
  pthread_t safety;
  int have_safety = 0;
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  if (a == NULL || b == NULL || !generic_callbacks_run(e, a)) goto out;
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.create_stream_dependency(D0, b, a, conf_st(e));
  ENSURE_OK(R_DEP_ORDER, e->st, "create_stream_dependency");
  ENSURE(R_NO_BLOCK, conf_probe_get(&pa).ran == 0,
         "create_stream_dependency returned only after the work queued on "
         "the other stream had run (the harness released it after %d ms)",
         conf_safety_ms());
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &pa2, 1, 0, TF_OK, NULL),
         "host_callback returned false");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL),
         "host_callback returned false");

  conf_sleep_ms(SETTLE_MS);
  EXPECT(R_DEP_ORDER, conf_probe_get(&pb).ran == 0,
         "a host callback enqueued on the dependent stream after "
         "create_stream_dependency ran while the work enqueued on the other "
         "stream before it was held at a gate");
  /* Release a's first item only; b must then finish while a is still held
   * at gate 1 (if it does not, the wait gives up and `out` opens gate 1). */
  conf_gate_open(0);
  EXPECT(R_DEP_SNAPSHOT, conf_probe_wait_ran(&pb, conf_safety_ms()),
         "the dependent stream's work did not run within %d ms while only "
         "work enqueued on the other stream after create_stream_dependency "
         "was held: it waits for later work too",
         conf_safety_ms());
  conf_probe ra = conf_probe_get(&pa), ra2 = conf_probe_get(&pa2),
             rb = conf_probe_get(&pb);
  EXPECT(R_DEP_ORDER, ra.ran == 1,
         "the dependent stream's work ran while the work it depends on had "
         "run %d times",
         ra.ran);
  if (rb.ran) {
    EXPECT(R_DEP_ORDER, ra.order < rb.order,
           "the dependent stream's work finished (#%d) before the work it "
           "depends on (#%d)",
           rb.order, ra.order);
  }
  EXPECT(R_DEP_SNAPSHOT, ra2.ran == 0,
         "work held at a closed gate ran %d times (the gate was bypassed)",
         ra2.ran);
out:
  conf_gates_open_all();
  if (have_safety) conf_join_later(safety);
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
}

/* ------------------------------------------------------------ events */

static void test_events(conf_env* e) {
  conf_probe pa, pb;
  pthread_t safety;
  int have_safety = 0;
  SP_Event ev = NULL;
  SE_EventStatus st;
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  if (a == NULL || b == NULL) goto out;
  e->se.create_event(D0, &ev, conf_st(e));
  ENSURE_OK(R_EVENT_CREATE, e->st, "create_event");
  ENSURE(R_EVENT_CREATE, ev != NULL,
         "create_event returned OK and left the event NULL");
  if (!generic_callbacks_run(e, a)) goto out;
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_STATUS, st == SE_EVENT_COMPLETE || st == SE_EVENT_PENDING,
         "get_event_status of a never-recorded event returned %s (%d)",
         generic_event_status_name(st), (int)st);

  /* Waiting for a never-recorded event waits for nothing (as in CUDA). */
  e->se.wait_for_event(D0, a, ev, conf_st(e));
  EXPECT_OK(R_WAIT_UNRECORDED, e->st, "wait_for_event(never recorded)");
  TF_Code c = conf_sync(e, 0, a);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after wait_for_event(never recorded) returned "
         "%s",
         conf_code_name(c));

  /* Recorded behind a closed gate: pending until the gate opens. */
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.record_event(D0, a, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "record_event");
  ENSURE(R_NO_BLOCK, conf_probe_get(&pa).ran == 0,
         "record_event returned only after the work queued ahead of it had "
         "run (the harness released it after %d ms)",
         conf_safety_ms());
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_PENDING, st == SE_EVENT_PENDING,
         "get_event_status returned %s while the work recorded before the "
         "event was held at a gate",
         generic_event_status_name(st));
  /* Stream::WaitFor(Event*): b's later work waits for the event. */
  e->se.wait_for_event(D0, b, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "wait_for_event");
  ENSURE(R_NO_BLOCK, conf_probe_get(&pa).ran == 0,
         "wait_for_event returned only after the event completed (the "
         "harness released its work after %d ms)",
         conf_safety_ms());
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL),
         "host_callback returned false");
  conf_sleep_ms(SETTLE_MS);
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_PENDING, st == SE_EVENT_PENDING,
         "get_event_status returned %s %d ms after record_event while the "
         "work recorded before the event was held at a gate",
         generic_event_status_name(st), SETTLE_MS);
  EXPECT(R_EVENT_PENDING, conf_probe_get(&pb).ran == 0,
         "a host callback enqueued behind wait_for_event ran before the "
         "event could complete: the work recorded before the event was "
         "held at a gate");

  conf_gate_open(0);
  e->se.block_host_for_event(D0, ev, conf_st(e));
  EXPECT_OK(R_STREAM_SYNC, e->st, "block_host_for_event");
  EXPECT(R_EVENT_PENDING, conf_probe_get(&pa).ran == 1,
         "block_host_for_event returned as if the event were complete "
         "before the work recorded ahead of it had run");
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_COMPLETES, st == SE_EVENT_COMPLETE,
         "get_event_status returned %s after block_host_for_event returned",
         generic_event_status_name(st));
  c = conf_sync(e, 0, b);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for the stream that waited for the event returned %s",
         conf_code_name(c));
  conf_probe ra = conf_probe_get(&pa), rb = conf_probe_get(&pb);
  EXPECT(R_STREAM_SYNC, rb.ran == 1,
         "the stream reported done while a host callback queued on it had "
         "run %d times",
         rb.ran);
  if (ra.ran && rb.ran) {
    EXPECT(R_EVENT_PENDING, ra.order < rb.order,
           "the host callback behind wait_for_event finished (#%d) before the "
           "work recorded ahead of the event (#%d): the event completed "
           "early",
           rb.order, ra.order);
  }

  /* TF reuses events: record again on an idle stream. */
  e->se.record_event(D0, b, ev, conf_st(e));
  EXPECT_OK(R_EVENT_RECORD, e->st, "record_event (the same event again)");
  e->se.block_host_for_event(D0, ev, conf_st(e));
  EXPECT_OK(R_STREAM_SYNC, e->st, "block_host_for_event (recorded again)");
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_REUSE, st == SE_EVENT_COMPLETE,
         "an event recorded a second time on an idle stream reports %s after "
         "block_host_for_event",
         generic_event_status_name(st));
out:
  conf_gates_open_all();
  if (have_safety) conf_join_later(safety);
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
  if (ev != NULL) e->se.destroy_event(D0, ev);
}

/* ------------------------------------------------------------ list */

const harness_test conf_generic_streams_tests[] = {
    {"generic.streams", test_streams, 0},
    {"generic.leaks", test_leaks, 0},
    {"generic.stream_dependency", test_stream_dependency, 0},
    {"generic.events", test_events, 0},
    {NULL, NULL, 0},
};
