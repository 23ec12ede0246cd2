/*
 * test_trace.c - the recorder (sim.h, "tracing"): nothing recorded while
 * off; per stream, records in run order with enqueue <= start <= end; every
 * kind of item (kernels as the submitter names them, copies by direction,
 * memsets, events and waits with their peer, host callbacks, timers,
 * drained items, inline runs); memory records; a full ring drops its oldest
 * and counts them; several threads submitting to several streams; rings of
 * destroyed streams (kept, then bounded); snapshot windows; consumer
 * nesting; reset.
 *
 * Every test ends with no consumer and, after the fixture's teardown, calls
 * sim_trace_reset, so each starts from an empty recorder.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "testutil.h"

static int32_t my_tid(void) {
  return (int32_t)syscall(SYS_gettid);
}

/* For tests that make their own devices: no fixture. */
static int setup_none(void** state) {
  *state = NULL;
  return 0;
}

static int teardown(void** state) {
  while (sim_trace_active()) sim_trace_stop();
  tu_teardown(state);
  /* Nothing is alive any more: the recorder must agree to forget it all. */
  if (sim_trace_reset() != SIM_OK) {
    fprintf(stderr, "sim_trace_reset refused after teardown\n");
    return -1;
  }
  return 0;
}

static const sim_trace_stream* find_stream(const sim_trace_snapshot* snap,
                                           int device, int stream) {
  for (size_t i = 0; i < snap->nstreams; i++)
    if (snap->streams[i].device == device && snap->streams[i].stream == stream)
      return &snap->streams[i];
  return NULL;
}

static sim_trace_snapshot* take(void) {
  sim_trace_snapshot* snap = NULL;
  assert_int_equal(sim_trace_snapshot_take(0, 0, &snap), SIM_OK);
  assert_non_null(snap);
  return snap;
}

/* The records of one stream, with the invariants every stream's records
 * must satisfy: ids unique and from 1, enqueue <= start <= end, ascending
 * start and no overlap (items of a stream run one at a time). */
static const sim_trace_stream* checked_stream(const sim_trace_snapshot* snap,
                                              int device, int stream) {
  const sim_trace_stream* st = find_stream(snap, device, stream);
  if (st == NULL) fail_msg("no records for stream %d:%d", device, stream);
  assert_int_equal(st->key, sim_trace_stream_key(device, stream));
  for (size_t i = 0; i < st->count; i++) {
    const sim_trace_rec* r = &st->recs[i];
    if (r->id == 0) fail_msg("record %zu has no correlation id", i);
    if (!(r->enq_ns <= r->start_ns && r->start_ns <= r->end_ns))
      fail_msg("record %zu: enq %" PRIu64 " start %" PRIu64 " end %" PRIu64, i,
               r->enq_ns, r->start_ns, r->end_ns);
    if (i > 0 && r->start_ns < st->recs[i - 1].end_ns)
      fail_msg("record %zu starts before record %zu ended", i, i - 1);
  }
  return st;
}

/* ---- names ------------------------------------------------------------ */

static void kind_names(void** state) {
  static const char* const want[SIM_TRACE_KIND_COUNT] = {
      "other",      "kernel",      "memcpy_h2d",    "memcpy_d2h",
      "memcpy_d2d", "memcpy_h2h",  "memset",        "event_record",
      "event_wait", "stream_wait", "host_callback", "timer"};
  for (int k = 0; k < SIM_TRACE_KIND_COUNT; k++)
    assert_string_equal(sim_trace_kind_name(k), want[k]);
  assert_non_null(sim_trace_kind_name(-1));
  assert_non_null(sim_trace_kind_name(SIM_TRACE_KIND_COUNT));
}

static void intern_names(void** state) {
  uint32_t a = sim_trace_intern("sequential/dense/MatMul");
  uint32_t b = sim_trace_intern("MatMul");
  assert_true(a >= 1 && b >= 1 && a != b);
  char copy[] = "sequential/dense/MatMul";
  assert_int_equal(sim_trace_intern(copy), a); /* equal strings, one id */
  copy[0] = 'X';                               /* the table holds a copy */
  assert_string_equal(sim_trace_name(a), "sequential/dense/MatMul");
  assert_string_equal(sim_trace_name(b), "MatMul");
  assert_int_equal(sim_trace_intern(NULL), 0);
  assert_string_equal(sim_trace_name(0), "");
  assert_string_equal(sim_trace_name(1000000), "");
  assert_int_equal(sim_trace_intern(""), sim_trace_intern(""));
  /* Many names: all distinct, all found again (the table grows). */
  const int n = tu_scaled(5000);
  char buf[32];
  uint32_t first = 0;
  for (int i = 0; i < n; i++) {
    snprintf(buf, sizeof(buf), "node_%d", i);
    uint32_t id = sim_trace_intern(buf);
    if (i == 0) first = id;
    if (id != first + (uint32_t)i) fail_msg("name %d got id %u", i, id);
  }
  for (int i = 0; i < n; i += 7) {
    snprintf(buf, sizeof(buf), "node_%d", i);
    assert_int_equal(sim_trace_intern(buf), first + (uint32_t)i);
    assert_string_equal(sim_trace_name(first + (uint32_t)i), buf);
  }
}

/* ---- off / on ----------------------------------------------------------- */

static void off_records_nothing(void** state) {
  tu_fix* f = (tu_fix*)*state;
  assert_int_equal(sim_trace_active(), 0);
  tu_item* it = (tu_item*)tu_calloc(f, 8, sizeof(tu_item));
  for (int i = 0; i < 8; i++) {
    tu_item_init(&it[i], i, NULL);
    assert_int_equal(sim_stream_submit(f->s[0], &it[i].work), SIM_OK);
  }
  void* p = sim_mem_alloc(f->dev, 100);
  assert_non_null(p);
  sim_mem_free(f->dev, p);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  sim_trace_snapshot* snap = take();
  assert_int_equal(snap->nstreams, 0);
  assert_int_equal(snap->ndevices, 0);
  sim_trace_snapshot_free(snap);
}

static void start_limits(void** state) {
  assert_int_equal(sim_trace_start(SIM_TRACE_MAX_RECORDS + 1), SIM_EINVAL);
  assert_int_equal(sim_trace_active(), 0);
  assert_int_equal(sim_trace_snapshot_take(0, 0, NULL), SIM_EINVAL);
  /* Nested consumers: recording lasts until the last stop; extra stops are
   * harmless. */
  assert_int_equal(sim_trace_start(0), SIM_OK);
  assert_int_equal(sim_trace_start(2048), SIM_OK);
  assert_int_equal(sim_trace_active(), 1);
  assert_int_equal(sim_trace_reset(), SIM_EINVAL); /* a consumer is active */
  sim_trace_stop();
  assert_int_equal(sim_trace_active(), 1);
  sim_trace_stop();
  assert_int_equal(sim_trace_active(), 0);
  sim_trace_stop();
  assert_int_equal(sim_trace_active(), 0);
}

/* Items submitted in order on one stream: one record each, in order, with
 * the submitter's names and thread; ids ascending. */
static void stream_order(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(2000);
  uint32_t name = sim_trace_intern("model/dense/MatMul");
  uint32_t type = sim_trace_intern("MatMul");
  tu_item* it = (tu_item*)tu_calloc(f, (size_t)n, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  uint64_t t0 = sim_now_ns();
  tu_gate* g = tu_gate_submit(f, f->s[0]);
  for (int i = 0; i < n; i++) {
    tu_item_init(&it[i], i, NULL);
    it[i].work.trace.kind = SIM_TRACE_KERNEL;
    it[i].work.trace.name = name;
    it[i].work.trace.type = type;
    it[i].work.trace.bytes = (uint64_t)i;
    if (i % 500 == 0) it[i].sleep_us = 100;
    assert_int_equal(sim_stream_submit(f->s[0], &it[i].work), SIM_OK);
    if (i == n / 2) tu_gate_open(g);
  }
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  uint64_t t1 = sim_now_ns();
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  assert_int_equal(snap->nstreams, 1);
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, (size_t)n + 1); /* the gate, then the items */
  assert_int_equal(st->dropped, 0);
  assert_int_equal(st->alive, 1);
  assert_int_equal(st->recs[0].kind, SIM_TRACE_OTHER);
  assert_int_equal(st->recs[0].name, 0);
  for (int i = 0; i < n; i++) {
    const sim_trace_rec* r = &st->recs[i + 1];
    if (r->kind != SIM_TRACE_KERNEL || r->name != name || r->type != type ||
        r->bytes != (uint64_t)i || r->status != SIM_OK || r->flags != 0 ||
        r->enq_tid != my_tid())
      fail_msg("record %d: kind %u name %u type %u bytes %" PRIu64
               " status %d flags %u tid %d",
               i, r->kind, r->name, r->type, r->bytes, r->status, r->flags,
               r->enq_tid);
    if (r->id != st->recs[i].id + 1) fail_msg("record %d: id not next", i);
    if (r->enq_ns < t0 || r->end_ns > t1) fail_msg("record %d: outside", i);
    /* The stream filled the item's own trace at submit. */
    if (it[i].work.trace.id != r->id) fail_msg("item %d: id not kept", i);
  }
  assert_string_equal(sim_trace_name(st->recs[1].name), "model/dense/MatMul");
  sim_trace_snapshot_free(snap);
}

/* A full ring overwrites its oldest records and counts them. */
static void overflow_drops_oldest(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int cap = 1024, extra = 300;
  tu_item* it = (tu_item*)tu_calloc(f, cap + extra, sizeof(tu_item));
  assert_int_equal(sim_trace_start(cap), SIM_OK);
  for (int i = 0; i < cap + extra; i++) {
    tu_item_init(&it[i], i, NULL);
    it[i].work.trace.bytes = (uint64_t)i; /* which item a record is */
    assert_int_equal(sim_stream_submit(f->s[0], &it[i].work), SIM_OK);
  }
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, (size_t)cap);
  assert_int_equal(st->dropped, (uint64_t)extra);
  for (int i = 0; i < cap; i++)
    if (st->recs[i].bytes != (uint64_t)(extra + i))
      fail_msg("slot %d holds item %" PRIu64 ", want %d", i, st->recs[i].bytes,
               extra + i);
  sim_trace_snapshot_free(snap);
  /* Recording stopped: the ring keeps its contents but records nothing. */
  tu_item_init(&it[0], 0, NULL);
  assert_int_equal(sim_stream_submit(f->s[0], &it[0].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  snap = take();
  st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, (size_t)cap);
  assert_int_equal(st->dropped, (uint64_t)extra);
  sim_trace_snapshot_free(snap);
  /* The next first start clears what was left. */
  assert_int_equal(sim_trace_start(0), SIM_OK);
  snap = take();
  assert_null(find_stream(snap, 0, 0));
  sim_trace_snapshot_free(snap);
  sim_trace_stop();
}

/* Whether an item is recorded is decided when it is submitted: an item
 * queued before the start is not, one queued before the stop is, even if it
 * runs after the stop. */
static void decided_at_submit(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  tu_gate* g = tu_gate_submit(f, f->s[0]); /* before the start */
  assert_true(tu_gate_wait_entered(g, TU_TIMEOUT_MS));
  tu_item_init(&it[0], 0, NULL);
  assert_int_equal(sim_stream_submit(f->s[0], &it[0].work), SIM_OK);
  assert_int_equal(sim_trace_start(0), SIM_OK);
  tu_item_init(&it[1], 1, NULL);
  it[1].work.trace.bytes = 77;
  assert_int_equal(sim_stream_submit(f->s[0], &it[1].work), SIM_OK);
  sim_trace_stop();
  tu_gate_open(g);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(it[1].run_calls, 1);
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 1);
  assert_int_equal(st->recs[0].bytes, 77);
  sim_trace_snapshot_free(snap);
}

/* Streams are listed by device, then stream id; devices by ordinal. */
static void two_devices(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_device* d1 = NULL;
  sim_stream* s1 = NULL;
  assert_int_equal(tu_device_create(1, TU_MEMORY_MB, &d1), SIM_OK);
  assert_int_equal(sim_stream_create(d1, &s1), SIM_OK);
  sim_stream* s01 = tu_add_stream(f); /* device 0, stream 1 */
  tu_item* it = (tu_item*)tu_calloc(f, 3, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  sim_stream* order[3] = {s1, s01, f->s[0]};
  for (int i = 0; i < 3; i++) {
    tu_item_init(&it[i], i, NULL);
    assert_int_equal(sim_stream_submit(order[i], &it[i].work), SIM_OK);
    assert_int_equal(sim_stream_synchronize(order[i]), SIM_OK);
  }
  void* p = sim_mem_alloc(d1, 10);
  void* q = sim_mem_alloc(f->dev, 10);
  sim_mem_free(d1, p);
  sim_mem_free(f->dev, q);
  sim_trace_stop();
  sim_stream_destroy(s1);
  sim_device_destroy(d1);
  sim_trace_snapshot* snap = take();
  assert_int_equal(snap->nstreams, 3);
  assert_int_equal(snap->streams[0].key, sim_trace_stream_key(0, 0));
  assert_int_equal(snap->streams[1].key, sim_trace_stream_key(0, 1));
  assert_int_equal(snap->streams[2].key, sim_trace_stream_key(1, 0));
  assert_int_equal(snap->streams[2].alive, 0);
  assert_int_equal(snap->ndevices, 2);
  assert_int_equal(snap->devices[0].device, 0);
  assert_int_equal(snap->devices[1].device, 1);
  assert_int_equal(snap->devices[0].count, 2);
  assert_int_equal(snap->devices[1].count, 2);
  sim_trace_snapshot_free(snap);
}

/* ---- several threads, several streams ---------------------------------- */

enum { kThreads = 4, kStreams = 3 };

typedef struct submitter {
  pthread_t th;
  tu_fix* f;
  int index;
  int n;          /* items per stream */
  tu_item* items; /* n * kStreams */
  int32_t tid;
  int failed;
} submitter;

static void* submitter_main(void* arg) {
  submitter* sb = (submitter*)arg;
  sb->tid = my_tid();
  for (int i = 0; i < sb->n; i++) {
    for (int k = 0; k < kStreams; k++) {
      tu_item* it = &sb->items[i * kStreams + k];
      tu_item_init(it, i, NULL);
      /* bytes: thread << 32 | sequence, to find each thread's order. */
      it->work.trace.bytes = ((uint64_t)sb->index << 32) | (uint64_t)i;
      if (sim_stream_submit(sb->f->s[k], &it->work) != SIM_OK) sb->failed = 1;
    }
  }
  return NULL;
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return (x > y) - (x < y);
}

static void many_threads(void** state) {
  tu_fix* f = (tu_fix*)*state;
  for (int k = 0; k < kStreams; k++) tu_add_stream(f);
  const int n = tu_scaled(1000);
  assert_int_equal(sim_trace_start(0), SIM_OK);
  submitter* sb = (submitter*)tu_calloc(f, kThreads, sizeof(submitter));
  for (int t = 0; t < kThreads; t++) {
    sb[t].f = f;
    sb[t].index = t;
    sb[t].n = n;
    sb[t].items = (tu_item*)tu_calloc(f, (size_t)n * kStreams, sizeof(tu_item));
    TU_PT(pthread_create(&sb[t].th, NULL, submitter_main, &sb[t]));
  }
  for (int t = 0; t < kThreads; t++) TU_PT(pthread_join(sb[t].th, NULL));
  for (int k = 0; k < kStreams; k++)
    assert_int_equal(sim_stream_synchronize(f->s[k]), SIM_OK);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  assert_int_equal(snap->nstreams, kStreams);
  for (int k = 0; k < kStreams; k++) {
    assert_int_equal(snap->streams[k].stream, k); /* ordered by stream id */
    const sim_trace_stream* st = checked_stream(snap, 0, k);
    assert_int_equal(st->count, (size_t)n * kThreads);
    uint64_t next[kThreads] = {0};
    for (size_t i = 0; i < st->count; i++) {
      const sim_trace_rec* r = &st->recs[i];
      int t = (int)(r->bytes >> 32);
      assert_true(t >= 0 && t < kThreads);
      if ((r->bytes & 0xffffffffu) != next[t])
        fail_msg("stream %d: thread %d's item %" PRIu64 " ran out of order", k,
                 t, r->bytes & 0xffffffffu);
      next[t]++;
      if (r->enq_tid != sb[t].tid) fail_msg("stream %d: wrong tid", k);
    }
  }
  /* Correlation ids are unique across streams. */
  size_t total = 0;
  for (int k = 0; k < kStreams; k++) total += snap->streams[k].count;
  uint64_t* ids = (uint64_t*)tu_calloc(f, total, sizeof(uint64_t));
  size_t m = 0;
  for (int k = 0; k < kStreams; k++)
    for (size_t i = 0; i < snap->streams[k].count; i++)
      ids[m++] = snap->streams[k].recs[i].id;
  qsort(ids, total, sizeof(uint64_t), cmp_u64);
  for (size_t i = 1; i < total; i++)
    if (ids[i] == ids[i - 1]) fail_msg("id %" PRIu64 " twice", ids[i]);
  for (int t = 0; t < kThreads; t++) assert_false(sb[t].failed);
  sim_trace_snapshot_free(snap);
}

/* ---- device_sim's own items -------------------------------------------- */

static int host_fn(void* arg, int status, char* msg, size_t len) {
  return 0;
}

static const sim_trace_rec* only_kind(const sim_trace_stream* st, uint32_t kind,
                                      size_t nth) {
  for (size_t i = 0; i < st->count; i++)
    if (st->recs[i].kind == kind && nth-- == 0) return &st->recs[i];
  fail_msg("no %s record", sim_trace_kind_name((int)kind));
  return NULL;
}

static void own_items(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  uint8_t* host = (uint8_t*)tu_calloc(f, 1, 4096);
  uint8_t* host2 = (uint8_t*)tu_calloc(f, 1, 4096);
  void* dev = sim_mem_alloc(f->dev, 4096);
  void* dev2 = sim_mem_alloc(f->dev, 4096);
  assert_non_null(dev);
  assert_non_null(dev2);
  sim_timer* tm = NULL;
  assert_int_equal(sim_timer_create(&tm), SIM_OK);
  assert_int_equal(sim_trace_start(0), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, dev, host, 1000), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, host2, dev, 1001), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, dev2, dev, 1002), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, host2, host, 1003), SIM_OK);
  assert_int_equal(sim_memset8_async(s, dev, 7, 1004), SIM_OK);
  assert_int_equal(sim_memset32_async(s, dev, 7, 1008), SIM_OK);
  assert_int_equal(sim_host_callback_async(s, host_fn, NULL), SIM_OK);
  assert_int_equal(sim_timer_start(tm, s), SIM_OK);
  assert_int_equal(sim_timer_stop(tm, s), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  sim_trace_stop();
  sim_timer_destroy(tm);
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 9);
  static const uint32_t kinds[] = {
      SIM_TRACE_MEMCPY_H2D,    SIM_TRACE_MEMCPY_D2H, SIM_TRACE_MEMCPY_D2D,
      SIM_TRACE_MEMCPY_H2H,    SIM_TRACE_MEMSET,     SIM_TRACE_MEMSET,
      SIM_TRACE_HOST_CALLBACK, SIM_TRACE_TIMER,      SIM_TRACE_TIMER};
  static const uint64_t bytes[] = {1000, 1001, 1002, 1003, 1004, 1008, 0, 0, 0};
  for (size_t i = 0; i < TU_ARRAY_SIZE(kinds); i++) {
    if (st->recs[i].kind != kinds[i] || st->recs[i].bytes != bytes[i])
      fail_msg("record %zu: kind %s bytes %" PRIu64 ", want %s %" PRIu64, i,
               sim_trace_kind_name((int)st->recs[i].kind), st->recs[i].bytes,
               sim_trace_kind_name((int)kinds[i]), bytes[i]);
    assert_int_equal(st->recs[i].status, SIM_OK);
  }
  sim_trace_snapshot_free(snap);
  sim_mem_free(f->dev, dev);
  sim_mem_free(f->dev, dev2);
}

/* A wait names the stream it waits for (peer) and lasts while it waits. */
static void waits_carry_peer(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* a = f->s[0];
  sim_stream* b = f->s[1];
  sim_event* e = tu_event_new(f);
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  tu_gate* g = tu_gate_submit(f, a);
  assert_int_equal(sim_event_record(e, a), SIM_OK);
  assert_int_equal(sim_stream_wait_event(b, e), SIM_OK);
  tu_item_init(&it[0], 0, NULL);
  assert_int_equal(sim_stream_submit(b, &it[0].work), SIM_OK);
  assert_true(tu_gate_wait_entered(g, TU_TIMEOUT_MS));
  tu_gate_open(g);
  assert_int_equal(sim_stream_synchronize(b), SIM_OK);
  /* Stream on stream: a record on `other`, a wait on the dependent. A gate
   * holds `other` so the record is still pending when the wait is made: a
   * wait on a record that already ran enqueues nothing (no race decides
   * what this test sees). */
  tu_gate* g2 = tu_gate_submit(f, b);
  assert_true(tu_gate_wait_entered(g2, TU_TIMEOUT_MS));
  assert_int_equal(sim_stream_wait_stream(a, b), SIM_OK);
  tu_item_init(&it[1], 1, NULL);
  assert_int_equal(sim_stream_submit(a, &it[1].work), SIM_OK);
  tu_gate_open(g2);
  assert_int_equal(sim_stream_synchronize(a), SIM_OK);
  assert_int_equal(sim_stream_synchronize(b), SIM_OK);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* sa = checked_stream(snap, 0, 0);
  const sim_trace_stream* sb = checked_stream(snap, 0, 1);
  const sim_trace_rec* rec = only_kind(sa, SIM_TRACE_EVENT_RECORD, 0);
  const sim_trace_rec* wait = only_kind(sb, SIM_TRACE_EVENT_WAIT, 0);
  assert_int_equal(wait->peer, sim_trace_stream_key(0, 0));
  /* The wait ended only once the record (after the gate) had run. */
  assert_true(wait->end_ns >= rec->start_ns);
  const sim_trace_rec* sw = only_kind(sa, SIM_TRACE_STREAM_WAIT, 0);
  assert_int_equal(sw->peer, sim_trace_stream_key(0, 1));
  only_kind(sb, SIM_TRACE_EVENT_RECORD, 0); /* the marker on `other` */
  sim_trace_snapshot_free(snap);
}

static int fail_run(sim_work* w, char* msg, size_t len) {
  snprintf(msg, len, "boom");
  return SIM_EFAILED;
}

/* After a failure, drained items are recorded with SIM_ESTREAM and no
 * duration; always-run items still run. */
static void drained_items(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 3, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  for (int i = 0; i < 3; i++) tu_item_init(&it[i], i, NULL);
  it[0].work.run = fail_run;
  for (int i = 0; i < 3; i++)
    assert_int_equal(sim_stream_submit(f->s[0], &it[i].work), SIM_OK);
  assert_int_equal(sim_host_callback_async(f->s[0], host_fn, NULL), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_EFAILED);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 4);
  assert_int_equal(st->recs[0].status, SIM_EFAILED);
  for (int i = 1; i < 3; i++) {
    assert_int_equal(st->recs[i].status, SIM_ESTREAM);
    assert_true(st->recs[i].start_ns == st->recs[i].end_ns);
  }
  assert_int_equal(st->recs[3].kind, SIM_TRACE_HOST_CALLBACK);
  assert_int_equal(st->recs[3].status, SIM_OK);
  sim_trace_snapshot_free(snap);
}

/* An item run inline is recorded by the submitter, flagged inline. */
static void inline_runs(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream_set_inline(f->s[0], 1);
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  tu_item_init(&it[0], 0, NULL);
  assert_int_equal(sim_stream_run_inline(f->s[0], &it[0].work), 1);
  tu_item_init(&it[1], 1, NULL);
  assert_int_equal(sim_stream_submit(f->s[0], &it[1].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 2);
  assert_int_equal(st->recs[0].flags, SIM_TRACE_INLINE);
  assert_int_equal(st->recs[0].enq_tid, my_tid());
  assert_int_equal(st->recs[1].flags, 0);
  sim_trace_snapshot_free(snap);
}

/* ---- memory ---------------------------------------------------------- */

static void memory_records(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_mem_stats before;
  sim_mem_get_stats(f->dev, &before);
  assert_int_equal(sim_trace_start(0), SIM_OK);
  void* p = sim_mem_alloc(f->dev, 1000);
  assert_non_null(p);
  uint64_t usable = sim_mem_usable_size(f->dev, p);
  void* q = sim_mem_alloc(f->dev, 5000);
  assert_non_null(q);
  uint64_t usable_q = sim_mem_usable_size(f->dev, q);
  sim_mem_free(f->dev, p);
  uint64_t huge = (uint64_t)TU_MEMORY_MB << 21; /* twice the region */
  assert_null(sim_mem_alloc(f->dev, huge));
  sim_mem_free(f->dev, q);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  assert_int_equal(snap->ndevices, 1);
  const sim_trace_device* d = &snap->devices[0];
  assert_int_equal(d->device, 0);
  assert_int_equal(d->count, 5);
  assert_int_equal(d->dropped, 0);
  static const int ops[] = {1, 1, -1, 0, -1};
  uint64_t in_use = before.bytes_in_use;
  const uint64_t delta[] = {usable, usable_q, usable, 0, usable_q};
  for (int i = 0; i < 5; i++) {
    const sim_trace_mem* m = &d->mem[i];
    assert_int_equal(m->op, ops[i]);
    in_use =
        ops[i] > 0 ? in_use + delta[i] : in_use - (ops[i] < 0 ? delta[i] : 0);
    assert_int_equal(m->in_use, in_use);
    assert_int_equal(m->tid, my_tid());
    if (i > 0) assert_true(m->ns >= d->mem[i - 1].ns);
  }
  assert_int_equal(d->mem[0].addr, (uint64_t)(uintptr_t)p);
  assert_int_equal(d->mem[0].bytes, usable);
  assert_int_equal(d->mem[3].bytes, huge); /* failed: the size asked for */
  assert_int_equal(d->mem[3].addr, 0);
  sim_trace_snapshot_free(snap);
}

/* ---- snapshot windows ------------------------------------------------ */

static void snapshot_window(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 3, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  uint64_t mark[4];
  for (int i = 0; i < 3; i++) {
    mark[i] = sim_now_ns();
    tu_item_init(&it[i], i, NULL);
    it[i].work.trace.bytes = (uint64_t)i;
    assert_int_equal(sim_stream_submit(f->s[0], &it[i].work), SIM_OK);
    assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  }
  mark[3] = sim_now_ns();
  sim_trace_stop();
  sim_trace_snapshot* snap = NULL;
  /* [mark1, mark2]: only item 1 started inside. */
  assert_int_equal(sim_trace_snapshot_take(mark[1], mark[2], &snap), SIM_OK);
  assert_int_equal(snap->begin_ns, mark[1]);
  assert_int_equal(snap->end_ns, mark[2]);
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 1);
  assert_int_equal(st->recs[0].bytes, 1);
  sim_trace_snapshot_free(snap);
  /* From mark1 to now: items 1 and 2. */
  assert_int_equal(sim_trace_snapshot_take(mark[1], 0, &snap), SIM_OK);
  assert_true(snap->end_ns >= mark[3]);
  st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 2);
  sim_trace_snapshot_free(snap);
  /* A window after everything: no stream listed (nothing dropped either). */
  assert_int_equal(sim_trace_snapshot_take(mark[3] + 1, 0, &snap), SIM_OK);
  assert_null(find_stream(snap, 0, 0));
  /* Wall clock minus monotonic: within 2 s of what we compute here. */
  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  int64_t off = ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000000000;
  int64_t diff = snap->realtime_offset_ns - off;
  assert_true(diff > -2000000000LL && diff < 2000000000LL);
  sim_trace_snapshot_free(snap);
}

/* ---- rings of destroyed streams ------------------------------------- */

static void destroyed_streams(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = 70; /* more than the 64 dead rings kept */
  tu_item* it = (tu_item*)tu_calloc(f, (size_t)n, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  for (int i = 0; i < n; i++) {
    sim_stream* s = tu_add_stream(f);
    tu_item_init(&it[i], i, NULL);
    assert_int_equal(sim_stream_submit(s, &it[i].work), SIM_OK);
    tu_destroy_stream(f, s); /* drains: the item ran */
  }
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  /* The 64 newest dead streams are still there, not alive; the 6 oldest
   * were freed and their one record each is counted on the device. */
  assert_int_equal(snap->nstreams, 64);
  for (size_t i = 0; i < snap->nstreams; i++) {
    assert_int_equal(snap->streams[i].stream, (int)i + 6);
    assert_int_equal(snap->streams[i].alive, 0);
    assert_int_equal(snap->streams[i].count, 1);
  }
  assert_int_equal(snap->ndevices, 1);
  assert_int_equal(snap->devices[0].dropped, 6);
  sim_trace_snapshot_free(snap);
}

/* A device made again with the same ordinal restarts its stream ids: its
 * streams continue the old rings (one track per key). */
static void same_key_again(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  assert_int_equal(sim_trace_start(0), SIM_OK);
  tu_item_init(&it[0], 0, NULL);
  assert_int_equal(sim_stream_submit(f->s[0], &it[0].work), SIM_OK);
  tu_destroy_stream(f, f->s[0]);
  sim_device_destroy(f->dev);
  f->dev = NULL;
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, &f->dev), SIM_OK);
  sim_stream* s = tu_add_stream(f);
  tu_item_init(&it[1], 1, NULL);
  assert_int_equal(sim_stream_submit(s, &it[1].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  assert_int_equal(snap->nstreams, 1);
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 2);
  assert_int_equal(st->alive, 1);
  sim_trace_snapshot_free(snap);
  /* reset refuses while anything is alive (the teardown then succeeds). */
  assert_int_equal(sim_trace_reset(), SIM_EINVAL);
}

static void reset_forgets(void** state) {
  (void)state;
  assert_int_equal(sim_trace_start(0), SIM_OK);
  sim_device* dev = NULL;
  assert_int_equal(tu_device_create(3, TU_MEMORY_MB, &dev), SIM_OK);
  void* p = sim_mem_alloc(dev, 64);
  sim_mem_free(dev, p);
  uint32_t id = sim_trace_intern("forget me");
  assert_int_equal(sim_trace_reset(), SIM_EINVAL); /* consumer, device */
  sim_trace_stop();
  assert_int_equal(sim_trace_reset(), SIM_EINVAL); /* device alive */
  sim_device_destroy(dev);
  sim_trace_snapshot* snap = take();
  assert_int_equal(snap->ndevices, 1); /* outlives its device */
  assert_int_equal(snap->devices[0].device, 3);
  assert_int_equal(snap->devices[0].count, 2);
  sim_trace_snapshot_free(snap);
  assert_int_equal(sim_trace_reset(), SIM_OK);
  assert_string_equal(sim_trace_name(id), "");
  snap = take();
  assert_int_equal(snap->ndevices, 0);
  assert_int_equal(snap->nstreams, 0);
  sim_trace_snapshot_free(snap);
}

/* A copy between two devices: the caller's kind wins over what the stream's
 * device alone would conclude (dst on device 1 looks like host memory to
 * device 0); a kind that is not a copy is refused. */
static void copy_kind_from_caller(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_device* d1 = NULL;
  assert_int_equal(tu_device_create(1, TU_MEMORY_MB, &d1), SIM_OK);
  void* src = sim_mem_alloc(f->dev, 512);
  void* dst = sim_mem_alloc(d1, 512);
  assert_non_null(src);
  assert_non_null(dst);
  assert_int_equal(
      sim_memcpy_async_kind(f->s[0], dst, src, 512, SIM_TRACE_MEMSET),
      SIM_EINVAL);
  assert_int_equal(sim_trace_start(0), SIM_OK);
  assert_int_equal(sim_memcpy_async(f->s[0], dst, src, 512), SIM_OK);
  assert_int_equal(
      sim_memcpy_async_kind(f->s[0], dst, src, 512, SIM_TRACE_MEMCPY_D2D),
      SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 2);
  assert_int_equal(st->recs[0].kind, SIM_TRACE_MEMCPY_D2H); /* the guess */
  assert_int_equal(st->recs[1].kind, SIM_TRACE_MEMCPY_D2D);
  sim_trace_snapshot_free(snap);
  sim_mem_free(f->dev, src);
  sim_mem_free(d1, dst);
  sim_device_destroy(d1);
}

static void* named_submitter(void* arg) {
  tu_fix* f = (tu_fix*)arg;
  pthread_setname_np(pthread_self(), "tn-submitter");
  tu_item* it = (tu_item*)calloc(1, sizeof(tu_item));
  if (it == NULL) return NULL;
  tu_item_init(it, 0, NULL);
  int rc = sim_stream_submit(f->s[0], &it->work);
  if (rc == SIM_OK) rc = sim_stream_synchronize(f->s[0]);
  free(it);
  return rc == SIM_OK ? arg : NULL;
}

/* A recording thread's name is kept from its first record, so it is known
 * after the thread is gone; an unknown tid has none. */
static void thread_names(void** state) {
  tu_fix* f = (tu_fix*)*state;
  assert_int_equal(sim_trace_start(0), SIM_OK);
  pthread_t th;
  void* ok = NULL;
  TU_PT(pthread_create(&th, NULL, named_submitter, f));
  TU_PT(pthread_join(th, &ok));
  assert_ptr_equal(ok, f);
  sim_trace_stop();
  sim_trace_snapshot* snap = take();
  const sim_trace_stream* st = checked_stream(snap, 0, 0);
  assert_int_equal(st->count, 1);
  const char* name = sim_trace_thread_name(st->recs[0].enq_tid);
  assert_non_null(name);
  assert_string_equal(name, "tn-submitter");
  assert_null(sim_trace_thread_name(-5));
  sim_trace_snapshot_free(snap);
}

#define T0(name) cmocka_unit_test_setup_teardown(name, tu_setup0, teardown)
#define T1(name) cmocka_unit_test_setup_teardown(name, tu_setup1, teardown)
#define T2(name) cmocka_unit_test_setup_teardown(name, tu_setup2, teardown)

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T0(kind_names),
      T0(intern_names),
      T1(off_records_nothing),
      T0(start_limits),
      T1(stream_order),
      T1(overflow_drops_oldest),
      T1(decided_at_submit),
      T1(two_devices),
      T0(many_threads),
      T1(own_items),
      T2(waits_carry_peer),
      T1(drained_items),
      T1(inline_runs),
      T1(memory_records),
      T1(snapshot_window),
      T0(destroyed_streams),
      T1(same_key_again),
      T1(copy_kind_from_caller),
      T1(thread_names),
      cmocka_unit_test_setup_teardown(reset_forgets, setup_none, teardown),
  };
  return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
