/*
 * generic_work.c - generic checks of work on streams: copies in all three
 * directions (async and sync), mem_zero/memset/memset32, host callbacks and
 * their errors, timers, synchronize_all_activity, and ordering against
 * queued work. Valid for any plugin (see generic.c for the ground rules).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define D0 (&e->dev[0])
#define MIB (1024u * 1024u)
#define SETTLE_MS 30

/* Odd on purpose: no plugin gets away with copying whole words only. */
#define COPY_N (MIB + 13)

/* ------------------------------------------------------------ copies */

static void test_memcpy_async(conf_env* e) {
  SP_DeviceMemoryBase d1 = {0}, d2 = {0};
  SP_Stream s = conf_stream_new(e, 0);
  /* TF copies from pinned staging memory and from ordinary tensors. */
  unsigned char* src = e->se.host_memory_allocate(D0, COPY_N);
  unsigned char* dst = malloc(COPY_N);
  REQUIRE(s != NULL && src != NULL && dst != NULL);
  d1 = conf_alloc(e, 0, COPY_N);
  d2 = conf_alloc(e, 0, COPY_N);
  REQUIRE(d1.opaque != NULL && d2.opaque != NULL);

  conf_fill(src, COPY_N, 1);
  memset(dst, 0, COPY_N);
  e->se.memcpy_htod(D0, s, &d1, src, COPY_N, conf_st(e));
  CHECK_OK(e->st, "memcpy_htod");
  e->se.memcpy_dtod(D0, s, &d2, &d1, COPY_N, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtod");
  e->se.memcpy_dtoh(D0, s, dst, &d2, COPY_N, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtoh");
  CHECK_EQ(conf_sync(e, 0, s), TF_OK);
  CHECK(memcmp(dst, src, COPY_N) == 0);

  /* Sub-buffers: TF adds byte offsets to opaque (DeviceMemoryBase slices).
   * Completion through TF's event fallback this time. */
  conf_fill(src, COPY_N, 2);
  memset(dst, 0, COPY_N);
  SP_DeviceMemoryBase s1 = conf_slice(&d1, 100, COPY_N - 100);
  SP_DeviceMemoryBase s2 = conf_slice(&d2, 3, COPY_N - 100);
  e->se.memcpy_htod(D0, s, &s1, src + 7, COPY_N - 100, conf_st(e));
  CHECK_OK(e->st, "memcpy_htod (slice)");
  e->se.memcpy_dtod(D0, s, &s2, &s1, COPY_N - 100, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtod (slice)");
  e->se.memcpy_dtoh(D0, s, dst, &s2, COPY_N - 100, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtoh (slice)");
  CHECK_EQ(conf_sync_by_event(e, 0, s), TF_OK);
  CHECK(memcmp(dst, src + 7, COPY_N - 100) == 0);

  /* Zero-byte copies happen (empty tensors) and must be harmless. */
  e->se.memcpy_htod(D0, s, &d1, src, 0, conf_st(e));
  CHECK_OK(e->st, "memcpy_htod(size 0)");
  e->se.memcpy_dtoh(D0, s, dst, &d1, 0, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtoh(size 0)");
  CHECK_EQ(conf_sync(e, 0, s), TF_OK);
out:
  conf_stream_free(e, 0, s);
  if (d1.opaque != NULL) conf_free(e, 0, &d1);
  if (d2.opaque != NULL) conf_free(e, 0, &d2);
  if (src != NULL) e->se.host_memory_deallocate(D0, src);
  free(dst);
}

static void test_memcpy_sync(conf_env* e) {
  SP_DeviceMemoryBase d1 = {0}, d2 = {0};
  unsigned char* src = malloc(COPY_N);
  unsigned char* dst = malloc(COPY_N);
  REQUIRE(src != NULL && dst != NULL);
  d1 = conf_alloc(e, 0, COPY_N);
  d2 = conf_alloc(e, 0, COPY_N);
  REQUIRE(d1.opaque != NULL && d2.opaque != NULL);
  conf_fill(src, COPY_N, 3);
  memset(dst, 0, COPY_N);

  /* StreamExecutor::SynchronousMemcpy: done when the call returns. */
  e->se.sync_memcpy_htod(D0, &d1, src, COPY_N, conf_st(e));
  CHECK_OK(e->st, "sync_memcpy_htod");
  const SP_DeviceMemoryBase* last = &d1;
  if (e->se.sync_memcpy_dtod != NULL) {
    e->se.sync_memcpy_dtod(D0, &d2, &d1, COPY_N, conf_st(e));
    CHECK_OK(e->st, "sync_memcpy_dtod");
    last = &d2;
  } else {
    harness_note("sync_memcpy_dtod not set (TF 2.21 does not call it)");
  }
  e->se.sync_memcpy_dtoh(D0, dst, last, COPY_N, conf_st(e));
  CHECK_OK(e->st, "sync_memcpy_dtoh");
  CHECK(memcmp(dst, src, COPY_N) == 0);
out:
  if (d1.opaque != NULL) conf_free(e, 0, &d1);
  if (d2.opaque != NULL) conf_free(e, 0, &d2);
  free(src);
  free(dst);
}

/* mem_zero, memset and memset32 on sub-buffers; sizes are in bytes. */
static void test_memset(conf_env* e) {
  enum { kN = 4096 };
  unsigned char host[kN];
  SP_DeviceMemoryBase d = {0};
  SP_Stream s = conf_stream_new(e, 0);
  REQUIRE(s != NULL);
  d = conf_alloc(e, 0, kN);
  REQUIRE(d.opaque != NULL);
  memset(host, 0xAB, kN);
  e->se.sync_memcpy_htod(D0, &d, host, kN, conf_st(e));
  REQUIRE_OK(e->st, "sync_memcpy_htod");

  SP_DeviceMemoryBase z = conf_slice(&d, 8, 100);
  e->se.mem_zero(D0, s, &z, 100, conf_st(e));
  CHECK_OK(e->st, "mem_zero");
  SP_DeviceMemoryBase m8 = conf_slice(&d, 200, 77);
  e->se.memset(D0, s, &m8, 0x5C, 77, conf_st(e));
  CHECK_OK(e->st, "memset");
  SP_DeviceMemoryBase m32 = conf_slice(&d, 400, 64);
  e->se.memset32(D0, s, &m32, 0xDEADBEEFu, 64, conf_st(e));
  CHECK_OK(e->st, "memset32");
  CHECK_EQ(conf_sync(e, 0, s), TF_OK);

  memset(host, 0, kN);
  e->se.sync_memcpy_dtoh(D0, host, &d, kN, conf_st(e));
  REQUIRE_OK(e->st, "sync_memcpy_dtoh");
  CHECK_EQ(conf_find_not(host, 8, 0xAB), -1);
  CHECK_EQ(conf_find_not(host + 8, 100, 0x00), -1);
  CHECK_EQ(conf_find_not(host + 108, 92, 0xAB), -1);
  CHECK_EQ(conf_find_not(host + 200, 77, 0x5C), -1);
  CHECK_EQ(conf_find_not(host + 277, 123, 0xAB), -1);
  int words_ok = 1;
  for (int i = 0; i < 16; i++) {
    uint32_t w;
    memcpy(&w, host + 400 + 4 * i, 4);
    words_ok &= w == 0xDEADBEEFu;
  }
  CHECKF(words_ok, "memset32 pattern not found in all 16 words");
  /* 64 bytes, not 64 words. */
  CHECK_EQ(conf_find_not(host + 464, kN - 464, 0xAB), -1);
out:
  conf_stream_free(e, 0, s);
  if (d.opaque != NULL) conf_free(e, 0, &d);
}

/* ------------------------------------------------------------ callbacks */

static void test_host_callback(conf_env* e) {
  conf_probe p1, p2;
  SP_Stream s = conf_stream_new(e, 0);
  REQUIRE(s != NULL);
  /* TF_Bool true: enqueued (a stub returning false breaks TF). */
  CHECK(conf_enqueue_probe(e, 0, s, &p1, -1, 0, TF_OK, NULL));
  CHECK(conf_enqueue_probe(e, 0, s, &p2, -1, 0, TF_OK, NULL));
  CHECK_EQ(conf_sync(e, 0, s), TF_OK);
  conf_probe r1 = conf_probe_get(&p1), r2 = conf_probe_get(&p2);
  CHECK_EQ(r1.ran, 1);
  CHECK_EQ(r2.ran, 1);
  CHECK_LT(r1.order, r2.order);
  /* TF's trampoline writes its result into the status it is given. */
  CHECKF(r1.status_nonnull, "host callback got a NULL TF_Status");
  CHECK_EQ(r1.code_at_entry, TF_OK);
  e->se.get_stream_status(D0, s, conf_st(e));
  CHECK_OK(e->st, "get_stream_status after OK callbacks");
out:
  conf_stream_free(e, 0, s);
}

/* A callback that returns an error marks its stream bad (TF's
 * HostCallbackError test). Uses its own stream: the error is sticky. */
static void test_host_callback_error(conf_env* e) {
  conf_probe p;
  SP_Stream s = conf_stream_new(e, 0);
  REQUIRE(s != NULL);
  REQUIRE(conf_enqueue_probe(e, 0, s, &p, -1, 0, TF_INTERNAL,
                             "conformance: injected callback failure"));
  conf_sync(e, 0, s); /* may report the error itself */
  CHECK_EQ(conf_probe_get(&p).ran, 1);
  e->se.get_stream_status(D0, s, conf_st(e));
  CHECKF(TF_GetCode(e->st) != TF_OK,
         "get_stream_status is OK after a host callback failed");
out:
  conf_stream_free(e, 0, s);
}

/* A host callback that enqueues more work on its own stream, as TF's
 * completion closures do when they run the next op. Enqueueing from the
 * plugin's own thread must not deadlock. */
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
  TF_SetStatus(r->st, TF_OK, "");
  r->e->se.memcpy_htod(&r->e->dev[0], r->s, r->d, r->src, r->n, r->st);
  TF_Status* st2 = TF_NewStatus();
  r->e->se.get_stream_status(&r->e->dev[0], r->s, st2);
  if (TF_GetCode(r->st) == TF_OK && TF_GetCode(st2) != TF_OK) {
    TF_SetStatus(r->st, TF_GetCode(st2), TF_Message(st2));
  }
  TF_DeleteStatus(st2);
  if (status != NULL) TF_SetStatus(status, TF_OK, "");
  conf_probe_mark_ran(&r->done);
}

static void test_callback_enqueues(conf_env* e) {
  enum { kN = 4096 };
  unsigned char src[kN], dst[kN];
  reenter_arg r = {0};
  SP_DeviceMemoryBase d = {0};
  SP_Stream s = conf_stream_new(e, 0);
  REQUIRE(s != NULL);
  d = conf_alloc(e, 0, kN);
  REQUIRE(d.opaque != NULL);
  conf_fill(src, kN, 17);
  memset(dst, 0, kN);
  r.e = e;
  r.s = s;
  r.d = &d;
  r.src = src;
  r.n = kN;
  r.st = TF_NewStatus();
  REQUIRE(e->se.host_callback(D0, s, reenter_main, &r));
  CHECKF(conf_probe_wait_ran(&r.done, conf_safety_ms()),
         "a host callback that enqueues on its own stream never finished");
  CHECK_OK(r.st, "memcpy_htod + get_stream_status from a host callback");
  e->se.memcpy_dtoh(D0, s, dst, &d, kN, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtoh");
  CHECK_EQ(conf_sync(e, 0, s), TF_OK);
  CHECK(memcmp(dst, src, kN) == 0);
out:
  conf_stream_free(e, 0, s);
  if (d.opaque != NULL) conf_free(e, 0, &d);
  if (r.st != NULL) TF_DeleteStatus(r.st);
}

/* ------------------------------------------------------------ timers */

static void test_timer(conf_env* e) {
  SP_TimerFns tf = {.struct_size = SP_TIMER_FNS_STRUCT_SIZE};
  int have_tf = 0;
  SP_Timer t = NULL;
  conf_probe p;
  SP_Stream s = NULL;
  if (e->pfns.create_timer_fns == NULL || e->se.create_timer == NULL) {
    harness_note("no timers (create_timer_fns/create_timer unset): skipped");
    return;
  }
  REQUIRE(e->se.destroy_timer && e->se.start_timer && e->se.stop_timer);
  /* TF before 2.15 called this at registration and validated the result
   * (ValidateSPTimerFns); TF 2.21 no longer calls it. */
  e->pfns.create_timer_fns(&e->platform, &tf, conf_st(e));
  REQUIRE_OK(e->st, "create_timer_fns");
  have_tf = 1;
  CHECK(tf.struct_size != 0);
  REQUIRE(tf.nanoseconds != NULL);
  s = conf_stream_new(e, 0);
  REQUIRE(s != NULL);
  e->se.create_timer(D0, &t, conf_st(e));
  REQUIRE_OK(e->st, "create_timer");
  REQUIRE(t != NULL);

  /* The timer measures stream time: a 2 ms callback between start and
   * stop, all enqueued in a few microseconds of host time. The interval
   * lies inside the host's, from before start_timer to after the sync
   * (no fixed upper bound: a loaded machine makes both longer). */
  uint64_t host0 = conf_now_ns();
  e->se.start_timer(D0, s, t, conf_st(e));
  REQUIRE_OK(e->st, "start_timer");
  REQUIRE(conf_enqueue_probe(e, 0, s, &p, -1, 2, TF_OK, NULL));
  e->se.stop_timer(D0, s, t, conf_st(e));
  REQUIRE_OK(e->st, "stop_timer");
  CHECK_EQ(conf_sync(e, 0, s), TF_OK);
  uint64_t host = conf_now_ns() - host0;
  uint64_t ns = tf.nanoseconds(t);
  CHECK_GE_U64(ns, 1000000u);
  /* 1% for a plugin whose clock is not the host's CLOCK_MONOTONIC. */
  CHECK_LE_U64(ns, host + host / 100);
out:
  conf_stream_free(e, 0, s);
  if (t != NULL) e->se.destroy_timer(D0, t);
  if (have_tf) e->pfns.destroy_timer_fns(&e->platform, &tf);
}

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
  REQUIRE(a != NULL && b != NULL && src != NULL && dst != NULL);
  d = conf_alloc(e, 0, kN);
  REQUIRE(d.opaque != NULL);
  conf_fill(src, kN, 4);
  e->se.sync_memcpy_htod(D0, &d, src, kN, conf_st(e));
  REQUIRE_OK(e->st, "sync_memcpy_htod");

  /* Nothing pending. */
  e->se.synchronize_all_activity(D0, conf_st(e));
  CHECK_OK(e->st, "synchronize_all_activity (idle)");

  /* Work held on two streams, released (by helpers started first, so that a
   * blocking enqueue cannot hang the test) while the host is blocked - or,
   * on a slow machine, before it got there: the checks hold either way. */
  l0 = conf_gate_open_later(0, 20);
  l1 = conf_gate_open_later(1, 40);
  have_later = 1;
  REQUIRE(conf_enqueue_probe(e, 0, a, &p1, 0, 0, TF_OK, NULL));
  REQUIRE(conf_enqueue_probe(e, 0, b, &p2, 1, 0, TF_OK, NULL));
  e->se.memcpy_dtoh(D0, b, dst, &d, kN, conf_st(e));
  REQUIRE_OK(e->st, "memcpy_dtoh");
  e->se.synchronize_all_activity(D0, conf_st(e));
  CHECK_OK(e->st, "synchronize_all_activity");
  CHECK_EQ(conf_probe_get(&p1).ran, 1);
  CHECK_EQ(conf_probe_get(&p2).ran, 1);
  CHECKF(memcmp(dst, src, kN) == 0,
         "synchronize_all_activity returned before a queued copy ran");
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
 * pageable memory a blocking copy is legal; CUDA does it). */
static void test_ordering(conf_env* e) {
  enum { kN = 256 * 1024 };
  conf_probe gate_probe;
  const char* blocked = NULL;
  pthread_t safety;
  int have_safety = 0;
  SP_DeviceMemoryBase d = {0}, d2 = {0};
  SP_Event ev = NULL;
  unsigned char* pattern = malloc(kN);
  unsigned char* h = e->se.host_memory_allocate(D0, kN);
  unsigned char* h2 = e->se.host_memory_allocate(D0, kN);
  SP_Stream s = conf_stream_new(e, 0);
  SP_Stream s2 = conf_stream_new(e, 0);
  REQUIRE(s != NULL && s2 != NULL && pattern && h && h2);
  memset(h, 0, kN);
  memset(h2, 0, kN);
  d = conf_alloc(e, 0, kN);
  d2 = conf_alloc(e, 0, kN);
  REQUIRE(d.opaque != NULL && d2.opaque != NULL);
  conf_fill(pattern, kN, 5);
  e->se.sync_memcpy_htod(D0, &d, pattern, kN, conf_st(e));
  REQUIRE_OK(e->st, "sync_memcpy_htod");
  e->se.create_event(D0, &ev, conf_st(e));
  REQUIRE_OK(e->st, "create_event");

  /* If an enqueue blocks until the stream drains, the helper opens the gate
   * and the check below names the call instead of the run hanging. */
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  REQUIRE(conf_enqueue_probe(e, 0, s, &gate_probe, 0, 0, TF_OK, NULL));
  e->se.memcpy_dtoh(D0, s, h, &d, kN, conf_st(e));
  REQUIRE_OK(e->st, "memcpy_dtoh");
  NOTE_BLOCKED("memcpy_dtoh");
  /* Same stream, FIFO: device-to-device behind the same gate. */
  e->se.memcpy_dtod(D0, s, &d2, &d, kN, conf_st(e));
  REQUIRE_OK(e->st, "memcpy_dtod");
  NOTE_BLOCKED("memcpy_dtod");
  e->se.record_event(D0, s, ev, conf_st(e));
  REQUIRE_OK(e->st, "record_event");
  NOTE_BLOCKED("record_event");
  /* Another stream reads d2 only after the event. */
  e->se.wait_for_event(D0, s2, ev, conf_st(e));
  REQUIRE_OK(e->st, "wait_for_event");
  NOTE_BLOCKED("wait_for_event");
  e->se.memcpy_dtoh(D0, s2, h2, &d2, kN, conf_st(e));
  REQUIRE_OK(e->st, "memcpy_dtoh (second stream)");
  NOTE_BLOCKED("memcpy_dtoh (second stream)");

  conf_sleep_ms(SETTLE_MS);
  int h_untouched = conf_find_not(h, kN, 0) == -1;
  int h2_untouched = conf_find_not(h2, kN, 0) == -1;
  CHECKF(blocked == NULL, "%s blocked the host until queued work finished",
         blocked);
  if (blocked == NULL && !conf_probe_get(&gate_probe).ran) {
    CHECKF(h_untouched, "memcpy_dtoh ran before the work queued ahead of it");
    CHECKF(h2_untouched, "copy behind wait_for_event ran before the event");
  }
  conf_gate_open(0);
  CHECK_EQ(conf_sync(e, 0, s), TF_OK);
  CHECK_EQ(conf_sync(e, 0, s2), TF_OK);
  CHECK(memcmp(h, pattern, kN) == 0);
  CHECK(memcmp(h2, pattern, kN) == 0);
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
  int failures; /* read by the main thread after join */
  int poll;     /* complete by polling an event, not by blocking */
  SP_Event ev;
  TF_Status* st;
} worker_arg;

static void* worker_main(void* arg) {
  worker_arg* w = arg;
  const SP_Device* dev = &w->e->dev[0];
  const SP_StreamExecutor* se = &w->e->se;
  for (int r = 0; r < kRounds; r++) {
    conf_fill(w->src, kWorkN, (unsigned)(r * 31 + 7));
    TF_SetStatus(w->st, TF_OK, "");
    se->memcpy_htod(dev, w->s, &w->a, w->src, kWorkN, w->st);
    se->memcpy_dtod(dev, w->s, &w->b, &w->a, kWorkN, w->st);
    se->memcpy_dtoh(dev, w->s, w->dst, &w->b, kWorkN, w->st);
    if (TF_GetCode(w->st) != TF_OK) w->failures++;
    TF_SetStatus(w->st, TF_OK, "");
    if (w->poll) {
      /* TF's EventMgr: record a (reused) event, poll it from this thread. */
      se->record_event(dev, w->s, w->ev, w->st);
      SE_EventStatus es;
      while ((es = se->get_event_status(dev, w->ev)) == SE_EVENT_PENDING) {
        sched_yield();
      }
      if (es != SE_EVENT_COMPLETE) w->failures++;
    } else if (se->block_host_until_done != NULL) {
      se->block_host_until_done(dev, w->s, w->st);
    } else {
      se->record_event(dev, w->s, w->ev, w->st);
      se->block_host_for_event(dev, w->ev, w->st);
    }
    if (TF_GetCode(w->st) != TF_OK) w->failures++;
    if (memcmp(w->src, w->dst, kWorkN) != 0) w->failures++;
  }
  return NULL;
}

static void test_concurrent_streams(conf_env* e) {
  worker_arg* w = calloc(kWorkers, sizeof(*w));
  pthread_t th[kWorkers];
  int started = 0;
  REQUIRE(w != NULL);
  for (int i = 0; i < kWorkers; i++) {
    w[i].e = e;
    w[i].st = TF_NewStatus();
    w[i].poll = i % 2;
    e->se.create_event(D0, &w[i].ev, conf_st(e));
    REQUIRE_OK(e->st, "create_event");
    w[i].s = conf_stream_new(e, 0);
    w[i].a = conf_alloc(e, 0, kWorkN);
    w[i].b = conf_alloc(e, 0, kWorkN);
    REQUIRE(w[i].s != NULL && w[i].a.opaque != NULL && w[i].b.opaque);
  }
  for (; started < kWorkers; started++) {
    if (pthread_create(&th[started], NULL, worker_main, &w[started]) != 0) {
      break;
    }
  }
  CHECK_EQ(started, kWorkers);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started; i++) {
    CHECKF(w[i].failures == 0, "worker %d: %d failed rounds", i, w[i].failures);
  }
out:
  for (int i = 0; w != NULL && i < kWorkers; i++) {
    conf_stream_free(e, 0, w[i].s);
    if (w[i].a.opaque != NULL) conf_free(e, 0, &w[i].a);
    if (w[i].b.opaque != NULL) conf_free(e, 0, &w[i].b);
    if (w[i].st != NULL) TF_DeleteStatus(w[i].st);
    if (w[i].ev != NULL) e->se.destroy_event(D0, w[i].ev);
  }
  free(w);
}

const harness_test conf_generic_work_tests[] = {
    {"generic.memcpy_async", test_memcpy_async},
    {"generic.memcpy_sync", test_memcpy_sync},
    {"generic.memset", test_memset},
    {"generic.host_callback", test_host_callback},
    {"generic.host_callback_error", test_host_callback_error},
    {"generic.callback_enqueues", test_callback_enqueues},
    {"generic.timer", test_timer},
    {"generic.synchronize_all", test_synchronize_all},
    {"generic.ordering", test_ordering},
    {"generic.concurrent_streams", test_concurrent_streams},
    {NULL, NULL},
};
