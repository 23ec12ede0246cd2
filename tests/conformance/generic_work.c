/*
 * generic_work.c - generic checks of work on streams: copies in all three
 * directions (async and sync), mem_zero/memset/memset32, host callbacks and
 * their errors, timers, synchronize_all_activity, and ordering against
 * queued work. Valid for any plugin (see generic.c for the ground rules:
 * gates, the safety net, no check that depends on timing).
 *
 * Set-up copies go through memcpy_htod/memcpy_dtoh on a stream, the path TF
 * uses, not through sync_memcpy_* (which TF 2.21 validates but does not
 * call): a plugin whose synchronous copies are broken still gets its
 * ordering checked.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* under -std=c11 */
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "generic.h"

#define GENERIC_WORK_RULES(X)                                                  \
  X(R_COPY_DATA, "memcpy.copies_data", REQUIRED,                               \
    "memcpy_htod / memcpy_dtod / memcpy_dtoh",                                 \
    "Asynchronous copies deliver every source byte, at odd sizes and "         \
    "between sub-buffers at byte offsets: TF's tensor copies "                 \
    "(PluggableDeviceUtil, CStream::Memcpy) and its slices (a "                \
    "DeviceMemoryBase pointing into a larger buffer) depend on it.")           \
  X(R_COPY_ZERO, "memcpy.size_zero", RECOMMENDED, "memcpy_htod / memcpy_dtoh", \
    "A zero-byte copy returns OK and does nothing: PluggableDeviceUtil "       \
    "skips the copy for empty tensors, other callers of CStream::Memcpy "      \
    "may not.")                                                                \
  X(R_SYNC_COPY, "sync_memcpy.copies", RECOMMENDED,                            \
    "sync_memcpy_htod / sync_memcpy_dtoh / sync_memcpy_dtod",                  \
    "Synchronous copies return OK with the data in place: "                    \
    "ValidateSPStreamExecutor requires sync_memcpy_htod and "                  \
    "sync_memcpy_dtoh and CStreamExecutor::SynchronousMemcpy forwards to "     \
    "them, but TF 2.21's PluggableDevice runtime does not call them "          \
    "(sync_memcpy_dtod never: there is no synchronous device-to-device "       \
    "copy in StreamExecutor).")                                                \
  X(R_MEMSET_DATA, "memset.writes_bytes", RECOMMENDED,                         \
    "mem_zero / memset / memset32",                                            \
    "mem_zero, memset and memset32 write their value into exactly `size` "     \
    "bytes of the (sub-)buffer and nothing else: ValidateSPStreamExecutor "    \
    "requires all three and CStream::MemZero/Memset32 forward to them, but "   \
    "TF 2.21's PluggableDevice runtime does not call them.")                   \
  X(R_CB_RUNS, "host_callback.runs", REQUIRED, "host_callback",                \
    "A host callback for which host_callback returned true runs once, in "     \
    "stream order, before the stream reports done: "                           \
    "CStream::DoHostCallbackWithStatus hands over a context only "             \
    "HostCallbackTrampoline frees, and stream.h makes callbacks occupy the "   \
    "stream like device work, so a dropped callback leaves whoever waits "     \
    "for it waiting forever.")                                                 \
  X(R_CB_STATUS, "host_callback.gets_status", REQUIRED, "host_callback",       \
    "The callback is called with a non-NULL TF_Status: TF passes none of "     \
    "its own, and HostCallbackTrampoline writes the callback's result into "   \
    "the one it gets (Set_TF_Status_from_Status), so NULL crashes the "        \
    "process.")                                                                \
  X(R_CB_FRESH, "host_callback.fresh_status", RECOMMENDED, "host_callback",    \
    "The TF_Status given to the callback is OK at entry (as TF's own test "    \
    "plugin passes it): the trampoline overwrites it, but a status still "     \
    "holding an earlier error hints that the plugin reads stale results.")     \
  X(R_CB_ERROR, "stream_status.reports_callback_error", REQUIRED,              \
    "get_stream_status",                                                       \
    "After a host callback returned an error, get_stream_status reports an "   \
    "error: CStream::RefreshStatus latches it so the stream is no longer "     \
    "ok(), which PluggableDeviceUtil's copies and SyncAll check; reporting "   \
    "OK turns a failed step into a success.")                                  \
  X(R_CB_ENQUEUE, "host_callback.may_enqueue", RECOMMENDED, "host_callback",   \
    "A host callback can enqueue more work on its own stream without "         \
    "deadlocking. TF 2.21 never does (its completion callbacks run on "        \
    "EventMgr's thread pool, not in host callbacks) and CUDA forbids API "     \
    "calls in host functions, but callers written for CPU-like devices do.")   \
  X(R_TIMER_FNS, "timer.callbacks", RECOMMENDED,                               \
    "create_timer_fns / create_timer / start_timer / stop_timer",              \
    "When timers are offered, create_timer_fns fills nanoseconds and the "     \
    "timer callbacks are set and return OK. TF 2.21 never calls "              \
    "create_timer_fns or the timer callbacks (CStream has no event-based "     \
    "timer); profilers of other TF releases do.")                              \
  X(R_TIMER_MEASURES, "timer.measures_stream_time", RECOMMENDED,               \
    "SP_TimerFns.nanoseconds",                                                 \
    "A timer started and stopped around 2 ms of stream work reports at "       \
    "least 1 ms and no more than the host saw pass.")                          \
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
CONF_RULES(conf_generic_work_rules, GENERIC_WORK_RULES)

#define D0 (&e->dev[0])
#define MIB (1024u * 1024u)
#define SETTLE_MS 30

/* Odd on purpose: no plugin gets away with copying whole words only. */
#define COPY_N (MIB + 13)

/* Index of the first byte where a and b differ, or -1. */
static long first_diff(const void* a, const void* b, size_t n) {
  const unsigned char* x = a;
  const unsigned char* y = b;
  for (size_t i = 0; i < n; i++) {
    if (x[i] != y[i]) return (long)i;
  }
  return -1;
}

/* "had not run" / "had run 3 times", for messages. */
static const char* ran_text(int ran) {
  static char buf[32];
  if (ran == 0) return "had not run";
  snprintf(buf, sizeof(buf), "had run %d times", ran);
  return buf;
}

/* Waits for every stream of device 0 without events: block_host_until_done
 * when the plugin has it, else synchronize_all_activity (both wait for the
 * work itself, so they tell an event that completed early from a copy
 * that went wrong). */
static TF_Code wait_without_events(conf_env* e, SP_Stream s) {
  TF_Status* st = conf_st(e);
  if (e->se.block_host_until_done != NULL) {
    e->se.block_host_until_done(D0, s, st);
  } else {
    e->se.synchronize_all_activity(D0, st);
  }
  return conf_status_code(st);
}

/* Writes n bytes of src to device memory d with memcpy_htod on s, then waits
 * for s. For set-up; returns 1 if both succeeded. */
static int put(conf_env* e, SP_Stream s, SP_DeviceMemoryBase* d,
               const void* src, size_t n) {
  e->se.memcpy_htod(D0, s, d, src, n, conf_st(e));
  if (!EXPECT_OK(R_COPY_OK, e->st, "memcpy_htod")) return 0;
  TF_Code c = conf_sync(e, 0, s);
  return EXPECT(R_STREAM_SYNC, c == TF_OK,
                "waiting for a stream after memcpy_htod returned %s",
                conf_code_name(c));
}

/* ------------------------------------------------------------ copies */

static void test_memcpy_async(conf_env* e) {
  SP_DeviceMemoryBase d1 = {0}, d2 = {0};
  SP_Stream s = conf_stream_new(e, 0);
  /* TF copies from pinned staging memory and from ordinary tensors. */
  unsigned char* src = e->se.host_memory_allocate(D0, COPY_N);
  unsigned char* dst = malloc(COPY_N);
  if (s == NULL || dst == NULL) goto out;
  ENSURE(R_HOST_MEM, src != NULL, "host_memory_allocate(%u) returned NULL",
         (unsigned)COPY_N);
  d1 = conf_alloc(e, 0, COPY_N);
  d2 = conf_alloc(e, 0, COPY_N);
  ENSURE(R_ALLOCATE, d1.opaque != NULL && d2.opaque != NULL,
         "allocate(%u) returned NULL", (unsigned)COPY_N);

  conf_fill(src, COPY_N, 1);
  memset(dst, 0, COPY_N);
  e->se.memcpy_htod(D0, s, &d1, src, COPY_N, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_htod");
  e->se.memcpy_dtod(D0, s, &d2, &d1, COPY_N, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtod");
  e->se.memcpy_dtoh(D0, s, dst, &d2, COPY_N, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  TF_Code c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after three copies returned %s",
         conf_code_name(c));
  long at = first_diff(dst, src, COPY_N);
  EXPECT(R_COPY_DATA, at < 0,
         "host -> device -> device -> host copy of %u bytes: byte %ld "
         "differs",
         (unsigned)COPY_N, at);

  /* Sub-buffers: TF adds byte offsets to opaque (DeviceMemoryBase slices).
   * Completion through TF's event fallback this time. */
  const size_t n = COPY_N - 100;
  conf_fill(src, COPY_N, 2);
  memset(dst, 0, COPY_N);
  SP_DeviceMemoryBase s1 = conf_slice(&d1, 100, n);
  SP_DeviceMemoryBase s2 = conf_slice(&d2, 3, n);
  e->se.memcpy_htod(D0, s, &s1, src + 7, n, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_htod (sub-buffer)");
  e->se.memcpy_dtod(D0, s, &s2, &s1, n, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtod (sub-buffers)");
  e->se.memcpy_dtoh(D0, s, dst, &s2, n, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtoh (sub-buffer)");
  c = conf_sync_by_event(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "create_event + record_event + block_host_for_event after three "
         "copies returned %s",
         conf_code_name(c));
  at = first_diff(dst, src + 7, n);
  if (at >= 0 && wait_without_events(e, s) == TF_OK &&
      first_diff(dst, src + 7, n) < 0) {
    /* The data was right, only late: the event completed too early. */
    EXPECT(R_EVENT_PENDING, 0,
           "block_host_for_event returned as if the event were complete "
           "before the copies recorded ahead of it had run (byte %ld "
           "arrived only later)",
           at);
  } else {
    EXPECT(R_COPY_DATA, at < 0,
           "copy of %zu bytes through sub-buffers (device offsets 100 and "
           "3): byte %ld differs",
           n, at);
  }

  /* Zero-byte copies happen (empty tensors) and must be harmless. */
  e->se.memcpy_htod(D0, s, &d1, src, 0, conf_st(e));
  EXPECT_OK(R_COPY_ZERO, e->st, "memcpy_htod(size 0)");
  e->se.memcpy_dtoh(D0, s, dst, &d1, 0, conf_st(e));
  EXPECT_OK(R_COPY_ZERO, e->st, "memcpy_dtoh(size 0)");
  c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after zero-byte copies returned %s",
         conf_code_name(c));
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
  if (src == NULL || dst == NULL) goto out;
  d1 = conf_alloc(e, 0, COPY_N);
  d2 = conf_alloc(e, 0, COPY_N);
  ENSURE(R_ALLOCATE, d1.opaque != NULL && d2.opaque != NULL,
         "allocate(%u) returned NULL", (unsigned)COPY_N);
  conf_fill(src, COPY_N, 3);
  memset(dst, 0, COPY_N);

  /* StreamExecutor::SynchronousMemcpy: done when the call returns. */
  e->se.sync_memcpy_htod(D0, &d1, src, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_htod");
  e->se.sync_memcpy_dtoh(D0, dst, &d1, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_dtoh");
  long at = first_diff(dst, src, COPY_N);
  EXPECT(R_SYNC_COPY, at < 0,
         "sync_memcpy_htod then sync_memcpy_dtoh of %u bytes: byte %ld "
         "differs",
         (unsigned)COPY_N, at);
  if (e->se.sync_memcpy_dtod == NULL) {
    conf_note("sync_memcpy_dtod not set (optional; TF 2.21 does not call it)");
    goto out;
  }
  memset(dst, 0, COPY_N);
  e->se.sync_memcpy_dtod(D0, &d2, &d1, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_dtod");
  e->se.sync_memcpy_dtoh(D0, dst, &d2, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_dtoh");
  at = first_diff(dst, src, COPY_N);
  EXPECT(R_SYNC_COPY, at < 0,
         "sync_memcpy_dtod then sync_memcpy_dtoh of %u bytes: byte %ld "
         "differs",
         (unsigned)COPY_N, at);
out:
  if (d1.opaque != NULL) conf_free(e, 0, &d1);
  if (d2.opaque != NULL) conf_free(e, 0, &d2);
  free(src);
  free(dst);
}

/* One range of the memset test's buffer: [from, from + n) holds `value`. */
static void expect_range(const unsigned char* host, size_t from, size_t n,
                         unsigned char value, const char* what) {
  long at = conf_find_not(host + from, n, value);
  EXPECT(R_MEMSET_DATA, at < 0, "%s: byte %zu is 0x%02x, expected 0x%02x", what,
         from + (size_t)(at < 0 ? 0 : at), at < 0 ? 0 : host[from + at], value);
}

/* mem_zero, memset and memset32 on sub-buffers; sizes are in bytes. */
static void test_memset(conf_env* e) {
  enum { kN = 4096 };
  unsigned char host[kN];
  SP_DeviceMemoryBase d = {0};
  SP_Stream s = conf_stream_new(e, 0);
  if (s == NULL) goto out;
  d = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, d.opaque != NULL, "allocate(%d) returned NULL", kN);
  memset(host, 0xAB, kN);
  if (!put(e, s, &d, host, kN)) goto out;

  SP_DeviceMemoryBase z = conf_slice(&d, 8, 100);
  e->se.mem_zero(D0, s, &z, 100, conf_st(e));
  EXPECT_OK(R_MEMSET_OK, e->st, "mem_zero");
  SP_DeviceMemoryBase m8 = conf_slice(&d, 200, 77);
  e->se.memset(D0, s, &m8, 0x5C, 77, conf_st(e));
  EXPECT_OK(R_MEMSET_DATA, e->st, "memset");
  SP_DeviceMemoryBase m32 = conf_slice(&d, 400, 64);
  e->se.memset32(D0, s, &m32, 0xDEADBEEFu, 64, conf_st(e));
  EXPECT_OK(R_MEMSET_OK, e->st, "memset32");

  /* Wait before reading back, so that a read-back copy that ignores its
   * stream (memcpy.stream_order, graded in generic.ordering) still sees
   * the result here. */
  TF_Code c = conf_sync(e, 0, s);
  ENSURE(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after mem_zero, memset and memset32 returned "
         "%s",
         conf_code_name(c));
  memset(host, 0, kN);
  e->se.memcpy_dtoh(D0, s, host, &d, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  c = conf_sync(e, 0, s);
  ENSURE(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after memcpy_dtoh returned %s",
         conf_code_name(c));
  expect_range(host, 0, 8, 0xAB, "bytes before mem_zero's range");
  expect_range(host, 8, 100, 0x00, "mem_zero(100 bytes at offset 8)");
  expect_range(host, 108, 92, 0xAB, "bytes after mem_zero's range");
  expect_range(host, 200, 77, 0x5C, "memset(0x5C, 77 bytes at offset 200)");
  expect_range(host, 277, 123, 0xAB, "bytes after memset's range");
  int bad_word = -1;
  for (int i = 0; i < 16 && bad_word < 0; i++) {
    uint32_t w;
    memcpy(&w, host + 400 + 4 * i, 4);
    if (w != 0xDEADBEEFu) bad_word = i;
  }
  EXPECT(R_MEMSET_DATA, bad_word < 0,
         "memset32(0xDEADBEEF, 64 bytes at offset 400): word %d does not "
         "hold the pattern",
         bad_word);
  /* 64 bytes, not 64 words. */
  expect_range(host, 464, kN - 464, 0xAB,
               "bytes after memset32's 64 bytes (size is in bytes, not "
               "words)");
out:
  conf_stream_free(e, 0, s);
  if (d.opaque != NULL) conf_free(e, 0, &d);
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
  long at = first_diff(b->dst, b->src, kN);
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
  if (!put(e, a, &d, src, kN)) goto out;

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
  long at = first_diff(dst, src, kN);
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
  if (!put(e, s, &d, pattern, kN)) goto out;
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
  long at = first_diff(h, pattern, kN);
  conf_check(early_h ? &R_ORDER : &R_COPY_DATA, at < 0, __FILE__, __LINE__,
             "memcpy_dtoh behind a held host callback: byte %ld of the "
             "result differs%s",
             at,
             early_h ? " (the copy ran at enqueue time, before the work "
                       "queued ahead of it)"
                     : "");
  at = first_diff(h2, pattern, kN);
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

const harness_test conf_generic_work_tests[] = {
    {"generic.memcpy_async", test_memcpy_async, 0},
    {"generic.memcpy_sync", test_memcpy_sync, 0},
    {"generic.memset", test_memset, 0},
    {"generic.host_callback", test_host_callback, 0},
    {"generic.host_callback_error", test_host_callback_error, 0},
    {"generic.callback_enqueues", test_callback_enqueues, 0},
    {"generic.timer", test_timer, 0},
    {"generic.synchronize_all", test_synchronize_all, 0},
    {"generic.ordering", test_ordering, 0},
    {"generic.concurrent_streams", test_concurrent_streams, 0},
    {NULL, NULL, 0},
};
