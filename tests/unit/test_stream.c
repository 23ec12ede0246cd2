/*
 * test_stream.c - streams: FIFO order, concurrent submitters, convenience
 * copies, sticky errors, host callbacks, teardown with queued work, items
 * run inline on an idle stream.
 */
#include <stdatomic.h>
#include <valgrind/valgrind.h>

#include "testutil.h"

static void basics(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  assert_ptr_equal(sim_stream_device(s), f->dev);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  char msg[64];
  memset(msg, 'X', sizeof(msg));
  assert_int_equal(sim_stream_status(s, msg, sizeof(msg)), SIM_OK);
  assert_string_equal(msg, "");
  assert_int_equal(sim_stream_status(s, NULL, 0), SIM_OK);
  assert_int_equal(sim_stream_is_current(s), 0);
}

static void submit_invalid(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  assert_int_equal(sim_stream_submit(f->s[0], NULL), SIM_EINVAL);
  tu_item_init(it, 0, NULL);
  it->work.run = NULL; /* incomplete */
  assert_int_equal(sim_stream_submit(f->s[0], &it->work), SIM_EINVAL);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(it->done_calls, 0); /* refused, never queued */
  /* A refused submit does not poison the stream. */
  assert_int_equal(sim_stream_status(f->s[0], NULL, 0), SIM_OK);
}

/* Checks that log holds exactly 0..n-1 in order. */
static void check_sequence(const tu_log* log, int n) {
  assert_false(log->overflow);
  if (log->n != (size_t)n) fail_msg("log has %zu entries, want %d", log->n, n);
  for (int i = 0; i < n; i++) {
    if (log->v[i] != i)
      fail_msg("position %d holds item %d: FIFO order broken", i, log->v[i]);
  }
}

/* Many items append their sequence number; the order is strict FIFO, both
 * for items queued up behind a gate and for items submitted while the
 * worker is busy. */
static void queue_order(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(20000);
  tu_item* items = (tu_item*)tu_calloc(f, (size_t)n, sizeof(tu_item));
  tu_log* log = tu_log_new(f, (size_t)n);
  tu_gate* g = tu_gate_submit(f, f->s[0]);
  for (int i = 0; i < n; i++) {
    tu_item_init(&items[i], i, log);
    if (i % 1000 == 999) items[i].sleep_us = 200;
    assert_int_equal(sim_stream_submit(f->s[0], &items[i].work), SIM_OK);
    if (i == n / 2) tu_gate_open(g); /* the rest races with the worker */
  }
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  check_sequence(log, n);
  for (int i = 0; i < n; i++) {
    if (items[i].run_calls != 1 || items[i].done_calls != 1 ||
        items[i].done_status != SIM_OK || items[i].run_before_done != 1)
      fail_msg("item %d: run %d, done %d (status %d)", i, items[i].run_calls,
               items[i].done_calls, items[i].done_status);
  }
  assert_int_equal(g->done_calls, 1);
}

/* Several threads submit to one stream: each sees its own items run in its
 * submission order, and every item runs once. */
enum { kSubmitters = 4 };

typedef struct submitter {
  pthread_t th;
  sim_stream* s;
  tu_item* items;
  int n;
  int failures;
} submitter;

static void* submitter_main(void* arg) {
  submitter* sb = (submitter*)arg;
  for (int i = 0; i < sb->n; i++) {
    if (sim_stream_submit(sb->s, &sb->items[i].work) != SIM_OK) sb->failures++;
  }
  return NULL;
}

static void multi_submitters(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(5000);
  tu_log* log = tu_log_new(f, (size_t)n * kSubmitters);
  submitter* sb = (submitter*)tu_calloc(f, kSubmitters, sizeof(submitter));
  for (int t = 0; t < kSubmitters; t++) {
    sb[t].s = f->s[0];
    sb[t].n = n;
    sb[t].items = (tu_item*)tu_calloc(f, (size_t)n, sizeof(tu_item));
    for (int i = 0; i < n; i++) tu_item_init(&sb[t].items[i], t * n + i, log);
  }
  for (int t = 0; t < kSubmitters; t++)
    TU_PT(pthread_create(&sb[t].th, NULL, submitter_main, &sb[t]));
  for (int t = 0; t < kSubmitters; t++) TU_PT(pthread_join(sb[t].th, NULL));
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);

  assert_false(log->overflow);
  assert_int_equal(log->n, (size_t)n * kSubmitters);
  int next[kSubmitters] = {0};
  for (size_t k = 0; k < log->n; k++) {
    int t = log->v[k] / n, i = log->v[k] % n;
    if (i != next[t])
      fail_msg("submitter %d: item %d ran where %d was expected", t, i,
               next[t]);
    next[t]++;
  }
  for (int t = 0; t < kSubmitters; t++) {
    assert_int_equal(sb[t].failures, 0);
    assert_int_equal(next[t], n);
    for (int i = 0; i < n; i++) assert_int_equal(sb[t].items[i].done_calls, 1);
  }
}

static void memcpy_memset(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  enum { N = 65536 };
  unsigned char* a = (unsigned char*)sim_mem_alloc(f->dev, N);
  unsigned char* b = (unsigned char*)sim_mem_alloc(f->dev, N);
  unsigned char* h = (unsigned char*)sim_host_alloc(f->dev, N);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(h);
  memset(h, 0, N);

  /* memset8 -> memcpy device to device -> memset32 -> memcpy device to host:
   * in stream order, each sees the previous one's result. */
  assert_int_equal(sim_memset8_async(s, a, 0xa5, N), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, b, a, N), SIM_OK);
  assert_int_equal(sim_memset32_async(s, a, 0xdeadbeefu, 4096), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, h, a, 8192), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  const unsigned char* bv = tu_bytes(b); /* host view of device memory */
  for (int i = 0; i < N; i++) {
    if (bv[i] != 0xa5) fail_msg("b[%d] = %#x, want 0xa5", i, bv[i]);
  }
  for (int i = 0; i < 4096 / 4; i++) {
    uint32_t v;
    memcpy(&v, h + 4 * i, 4);
    if (v != 0xdeadbeefu) fail_msg("word %d = %#x", i, v);
  }
  for (int i = 4096; i < 8192; i++) assert_int_equal(h[i], 0xa5);
  for (int i = 8192; i < N; i++) assert_int_equal(h[i], 0);

  /* Host to device and back. */
  for (int i = 0; i < N; i++) h[i] = (unsigned char)(i * 7);
  assert_int_equal(sim_memcpy_async(s, a, h, N), SIM_OK);
  assert_int_equal(sim_memset8_async(s, h, 0, N), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, h, a, N), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  for (int i = 0; i < N; i++) assert_int_equal(h[i], (unsigned char)(i * 7));

  sim_host_free(f->dev, h);
  sim_mem_free(f->dev, b);
  sim_mem_free(f->dev, a);
}

/* Exact boundaries: bytes just outside [dst, dst+n) are never written. */
static void memset_bounds(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  unsigned char* a = (unsigned char*)sim_mem_alloc(f->dev, 1024);
  assert_non_null(a);
  unsigned char* av = tu_bytes(a); /* host view of device memory */
  static const uint64_t lens8[] = {1, 3, 63, 64, 65, 255};
  for (size_t k = 0; k < TU_ARRAY_SIZE(lens8); k++) {
    memset(av, 0x00, 1024);
    assert_int_equal(sim_memset8_async(s, a + 17, 0xff, lens8[k]), SIM_OK);
    assert_int_equal(sim_stream_synchronize(s), SIM_OK);
    for (uint64_t i = 0; i < 1024; i++) {
      int inside = i >= 17 && i < 17 + lens8[k];
      if (av[i] != (inside ? 0xff : 0x00))
        fail_msg("memset8 n=%" PRIu64 ": byte %" PRIu64 " = %#x", lens8[k], i,
                 av[i]);
    }
  }
  static const uint64_t lens32[] = {4, 8, 60, 64, 68, 1000};
  for (size_t k = 0; k < TU_ARRAY_SIZE(lens32); k++) {
    memset(av, 0x00, 1024);
    assert_int_equal(sim_memset32_async(s, a + 4, 0x01020304u, lens32[k]),
                     SIM_OK);
    assert_int_equal(sim_stream_synchronize(s), SIM_OK);
    for (uint64_t i = 0; i < 4; i++) assert_int_equal(av[i], 0);
    for (uint64_t w = 0; w < lens32[k] / 4; w++) {
      uint32_t v;
      memcpy(&v, av + 4 + 4 * w, 4);
      if (v != 0x01020304u)
        fail_msg("memset32 n=%" PRIu64 ": word %" PRIu64 " = %#x", lens32[k], w,
                 v);
    }
    for (uint64_t i = 4 + lens32[k]; i < 1024; i++) assert_int_equal(av[i], 0);
  }
  sim_mem_free(f->dev, a);
}

static void memset32_invalid(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  unsigned char* a = (unsigned char*)sim_mem_alloc(f->dev, 4096);
  assert_non_null(a);
  unsigned char* av = tu_bytes(a); /* host view of device memory */
  memset(av, 0x33, 4096);
  assert_int_equal(sim_memset32_async(s, a, 0xffffffffu, 6), SIM_EINVAL);
  assert_int_equal(sim_memset32_async(s, a, 0xffffffffu, 1), SIM_EINVAL);
  assert_int_equal(sim_memset32_async(s, a, 0xffffffffu, 4097), SIM_EINVAL);
  /* Zero-length operations are valid no-ops. */
  assert_int_equal(sim_memset32_async(s, a, 0xffffffffu, 0), SIM_OK);
  assert_int_equal(sim_memset8_async(s, a, 0xff, 0), SIM_OK);
  assert_int_equal(sim_memcpy_async(s, a, a + 64, 0), SIM_OK);
  /* NULL buffers with a length are bad input. */
  assert_int_equal(sim_memcpy_async(s, NULL, a, 16), SIM_EINVAL);
  assert_int_equal(sim_memcpy_async(s, a, NULL, 16), SIM_EINVAL);
  assert_int_equal(sim_memset8_async(s, NULL, 0, 16), SIM_EINVAL);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  for (int i = 0; i < 4096; i++) assert_int_equal(av[i], 0x33);
  /* Refused calls did not poison the stream. */
  assert_int_equal(sim_stream_status(s, NULL, 0), SIM_OK);
  sim_mem_free(f->dev, a);
}

/* Copies have memmove semantics for overlapping ranges. */
static void memcpy_overlap(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  unsigned char* a = (unsigned char*)sim_mem_alloc(f->dev, 512);
  unsigned char want[512];
  assert_non_null(a);
  unsigned char* av = tu_bytes(a); /* host view of device memory */
  for (int i = 0; i < 512; i++) want[i] = av[i] = (unsigned char)i;
  assert_int_equal(sim_memcpy_async(s, a + 1, a, 300), SIM_OK);
  memmove(want + 1, want, 300);
  assert_int_equal(sim_memcpy_async(s, a + 100, a + 164, 200), SIM_OK);
  memmove(want + 100, want + 164, 200);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_memory_equal(av, want, 512);
  sim_mem_free(f->dev, a);
}

/* A failing item makes the stream sticky: later plain items are drained
 * (done(SIM_ESTREAM), no run), ALWAYS_RUN items still run. */
static void sticky_error(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  enum { N = 8 };
  tu_item* it = (tu_item*)tu_calloc(f, N, sizeof(tu_item));
  tu_log* log = tu_log_new(f, N);
  for (int i = 0; i < N; i++) tu_item_init(&it[i], i, log);
  it[1].ret = SIM_EFAILED;
  it[1].fail_msg = "kernel exploded: code 42";
  it[3].work.flags = SIM_WORK_ALWAYS_RUN;
  it[5].work.flags = SIM_WORK_ALWAYS_RUN;
  tu_gate* g = tu_gate_submit(f, s);
  for (int i = 0; i < 6; i++)
    assert_int_equal(sim_stream_submit(s, &it[i].work), SIM_OK);
  tu_gate_open(g);
  assert_int_equal(sim_stream_synchronize(s), SIM_EFAILED);

  char msg[128];
  assert_int_equal(sim_stream_status(s, msg, sizeof(msg)), SIM_EFAILED);
  assert_string_equal(msg, "kernel exploded: code 42");

  assert_int_equal(it[0].run_calls, 1);
  assert_int_equal(it[0].done_status, SIM_OK);
  assert_int_equal(it[1].run_calls, 1);
  assert_int_equal(it[1].done_status, SIM_EFAILED);
  for (int i = 2; i < 6; i++) {
    int always = (it[i].work.flags & SIM_WORK_ALWAYS_RUN) != 0;
    assert_int_equal(it[i].done_calls, 1);
    if (always) {
      assert_int_equal(it[i].run_calls, 1);
      assert_int_equal(it[i].done_status, SIM_OK);
    } else {
      if (it[i].run_calls != 0) fail_msg("item %d ran on a failed stream", i);
      assert_int_equal(it[i].done_status, SIM_ESTREAM);
    }
  }
  /* Submitting to a failed stream is allowed; the item is drained. */
  assert_int_equal(sim_stream_submit(s, &it[6].work), SIM_OK);
  it[7].work.flags = SIM_WORK_ALWAYS_RUN;
  assert_int_equal(sim_stream_submit(s, &it[7].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_EFAILED);
  assert_int_equal(it[6].run_calls, 0);
  assert_int_equal(it[6].done_calls, 1);
  assert_int_equal(it[6].done_status, SIM_ESTREAM);
  assert_int_equal(it[7].run_calls, 1);
  assert_int_equal(it[7].done_calls, 1);
  /* Only the items that ran are in the log, in order. */
  static const int ran[] = {0, 1, 3, 5, 7};
  assert_int_equal(log->n, TU_ARRAY_SIZE(ran));
  for (size_t i = 0; i < TU_ARRAY_SIZE(ran); i++)
    assert_int_equal(log->v[i], ran[i]);
}

/* The first failure stays: a later ALWAYS_RUN failure does not replace it;
 * the status message is truncated safely. */
static void sticky_first_error_wins(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  tu_item_init(&it[0], 0, NULL);
  it[0].ret = SIM_EFAILED;
  it[0].fail_msg = "first failure, with a long message";
  tu_item_init(&it[1], 1, NULL);
  it[1].ret = SIM_EINVAL;
  it[1].fail_msg = "second failure";
  it[1].work.flags = SIM_WORK_ALWAYS_RUN;
  assert_int_equal(sim_stream_submit(s, &it[0].work), SIM_OK);
  assert_int_equal(sim_stream_submit(s, &it[1].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_EFAILED);
  assert_int_equal(it[1].run_calls, 1);
  assert_int_equal(it[1].done_status, SIM_EINVAL);
  char msg[128];
  assert_int_equal(sim_stream_status(s, msg, sizeof(msg)), SIM_EFAILED);
  assert_string_equal(msg, "first failure, with a long message");
  char small[12];
  memset(small, 'Z', sizeof(small));
  assert_int_equal(sim_stream_status(s, small, 6), SIM_EFAILED);
  assert_string_equal(small, "first");
  for (size_t i = 6; i < sizeof(small); i++) assert_int_equal(small[i], 'Z');
}

/* Host callbacks: in stream order, told the stream status, and a non-zero
 * return makes the stream fail with the callback's message. */
typedef struct cb_rec {
  tu_log* log;
  int id;
  int ret;
  const char* msg;
  int calls;
  int seen_status;
} cb_rec;

static int record_cb(void* arg, int stream_status, char* msg, size_t msg_len) {
  cb_rec* r = (cb_rec*)arg;
  r->calls++;
  r->seen_status = stream_status;
  tu_log_append(r->log, r->id);
  if (r->ret != 0 && msg != NULL && msg_len > 0)
    snprintf(msg, msg_len, "%s", r->msg);
  return r->ret;
}

static void host_callbacks(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  enum { N = 8 };
  tu_log* log = tu_log_new(f, N);
  tu_item* it = (tu_item*)tu_calloc(f, N, sizeof(tu_item));
  cb_rec* cb = (cb_rec*)tu_calloc(f, N, sizeof(cb_rec));
  /* Even ids are items, odd ids callbacks; callback 3 fails. */
  for (int i = 0; i < N; i++) {
    if (i % 2 == 0) {
      tu_item_init(&it[i], i, log);
      assert_int_equal(sim_stream_submit(s, &it[i].work), SIM_OK);
    } else {
      cb[i].log = log;
      cb[i].id = i;
      cb[i].seen_status = 12345;
      if (i == 3) {
        cb[i].ret = 1;
        cb[i].msg = "callback 3 said no";
      }
      assert_int_equal(sim_host_callback_async(s, record_cb, &cb[i]), SIM_OK);
    }
  }
  assert_int_equal(sim_stream_synchronize(s), SIM_EFAILED);
  char msg[128];
  assert_int_equal(sim_stream_status(s, msg, sizeof(msg)), SIM_EFAILED);
  assert_string_equal(msg, "callback 3 said no");
  static const int ran[] = {0, 1, 2, 3, 5, 7};
  assert_int_equal(log->n, TU_ARRAY_SIZE(ran));
  for (size_t i = 0; i < TU_ARRAY_SIZE(ran); i++)
    assert_int_equal(log->v[i], ran[i]);
  assert_int_equal(cb[1].calls, 1);
  assert_int_equal(cb[1].seen_status, SIM_OK);
  assert_int_equal(cb[3].calls, 1);
  assert_int_equal(cb[3].seen_status, SIM_OK);
  /* Callbacks after the failure still run and see the error. */
  assert_int_equal(cb[5].calls, 1);
  assert_int_equal(cb[5].seen_status, SIM_EFAILED);
  assert_int_equal(cb[7].calls, 1);
  assert_int_equal(cb[7].seen_status, SIM_EFAILED);
  /* Items after the failure were drained. */
  assert_int_equal(it[4].run_calls, 0);
  assert_int_equal(it[4].done_status, SIM_ESTREAM);
  assert_int_equal(it[6].done_status, SIM_ESTREAM);
  assert_int_equal(sim_host_callback_async(s, NULL, NULL), SIM_EINVAL);
}

/* Destroying a stream with thousands of items queued (some slow) runs them
 * all: every done exactly once, no hang. */
static void destroy_with_queued_work(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(5000);
  tu_item* it = (tu_item*)tu_calloc(f, (size_t)n, sizeof(tu_item));
  tu_log* log = tu_log_new(f, (size_t)n);
  sim_stream* s = NULL;
  assert_int_equal(sim_stream_create(f->dev, &s), SIM_OK);
  for (int i = 0; i < n; i++) {
    tu_item_init(&it[i], i, log);
    if (i % 250 == 0) it[i].sleep_us = 2000;
    if (sim_stream_submit(s, &it[i].work) != SIM_OK) abort();
  }
  sim_stream_destroy(s);
  check_sequence(log, n);
  for (int i = 0; i < n; i++) {
    if (it[i].done_calls != 1 || it[i].run_before_done != 1 ||
        it[i].done_status != SIM_OK)
      fail_msg("item %d: done %d times, run %d before done, status %d", i,
               it[i].done_calls, it[i].run_before_done, it[i].done_status);
  }
}

/* Same on a stream that fails early: the rest is drained, each done once. */
static void destroy_with_queued_work_failed(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(5000);
  tu_item* it = (tu_item*)tu_calloc(f, (size_t)n, sizeof(tu_item));
  sim_stream* s = NULL;
  assert_int_equal(sim_stream_create(f->dev, &s), SIM_OK);
  for (int i = 0; i < n; i++) {
    tu_item_init(&it[i], i, NULL);
    if (i == 3) it[i].ret = SIM_EFAILED;
    if (i % 10 == 0) it[i].work.flags = SIM_WORK_ALWAYS_RUN;
    if (i % 500 == 0) it[i].sleep_us = 1000;
    if (sim_stream_submit(s, &it[i].work) != SIM_OK) abort();
  }
  sim_stream_destroy(s);
  for (int i = 0; i < n; i++) {
    int want_run = i <= 3 || i % 10 == 0;
    int want_status = i == 3 ? SIM_EFAILED : want_run ? SIM_OK : SIM_ESTREAM;
    if (it[i].done_calls != 1 || it[i].run_calls != want_run ||
        it[i].done_status != want_status)
      fail_msg("item %d: done %d times, run %d times, status %d (want %d)", i,
               it[i].done_calls, it[i].run_calls, it[i].done_status,
               want_status);
  }
}

/* done may free the item: the stream must not touch it afterwards
 * (memcheck catches a use after free). */
typedef struct owned_item {
  sim_work work;
  int* counter; /* only this stream's worker writes it */
} owned_item;

static int owned_run(sim_work* w, char* msg, size_t msg_len) {
  return 0;
}

static void owned_done(sim_work* w, int status) {
  owned_item* o = tu_container_of(w, owned_item, work);
  if (status == SIM_OK) (*o->counter)++;
  free(o);
}

static void done_frees_item(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(5000);
  int* counter = (int*)tu_calloc(f, 1, sizeof(int));
  sim_stream* s = NULL;
  assert_int_equal(sim_stream_create(f->dev, &s), SIM_OK);
  for (int i = 0; i < n; i++) {
    owned_item* o = (owned_item*)calloc(1, sizeof(*o));
    if (o == NULL) abort();
    o->work.run = owned_run;
    o->work.done = owned_done;
    o->work.label = "owned";
    o->counter = counter;
    if (sim_stream_submit(s, &o->work) != SIM_OK) abort();
    if (i == n / 2) {
      /* Half-way, synchronize: done(free) runs while the queue is live. */
      if (sim_stream_synchronize(s) != SIM_OK) abort();
    }
  }
  sim_stream_destroy(s);
  assert_int_equal(*counter, n);
}

/* A run function may submit more work, even to its own stream: no
 * deadlock, and the new item runs after everything already queued. */
typedef struct resubmit {
  sim_work work;
  sim_stream* s;
  tu_item* child;
  int rc;
} resubmit;

static int resubmit_run(sim_work* w, char* msg, size_t msg_len) {
  resubmit* r = tu_container_of(w, resubmit, work);
  r->rc = sim_stream_submit(r->s, &r->child->work);
  return 0;
}

static void submit_from_run(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  tu_log* log = tu_log_new(f, 4);
  tu_item* it = (tu_item*)tu_calloc(f, 3, sizeof(tu_item));
  resubmit* r = (resubmit*)tu_calloc(f, 1, sizeof(*r));
  for (int i = 0; i < 3; i++) tu_item_init(&it[i], i, log);
  r->work.run = resubmit_run;
  r->work.label = "resubmit";
  r->s = s;
  r->child = &it[2];
  r->rc = 12345;
  /* Queue everything behind a gate, so item 1 is queued before r runs. */
  tu_gate* g = tu_gate_submit(f, s);
  assert_int_equal(sim_stream_submit(s, &it[0].work), SIM_OK);
  assert_int_equal(sim_stream_submit(s, &r->work), SIM_OK);
  assert_int_equal(sim_stream_submit(s, &it[1].work), SIM_OK);
  tu_gate_open(g);
  tu_call* call = (tu_call*)tu_calloc(f, 1, sizeof(*call));
  tu_call_start(call, tu_stream_sync_fn, s);
  int finished = tu_call_wait(call, TU_TIMEOUT_MS);
  if (!finished) fail_msg("submitting from a run function deadlocked");
  assert_int_equal(tu_call_join(call), SIM_OK);
  assert_int_equal(r->rc, SIM_OK);
  /* The child was submitted during the first synchronize; make sure it ran. */
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_int_equal(log->n, 3);
  assert_int_equal(log->v[0], 0);
  assert_int_equal(log->v[1], 1);
  assert_int_equal(log->v[2], 2);
  assert_int_equal(it[2].done_calls, 1);
}

/* done == NULL is allowed. */
static void null_done(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(it, 0, NULL);
  it->work.done = NULL;
  assert_int_equal(sim_stream_submit(f->s[0], &it->work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(it->run_calls, 1);
}

static void is_current(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  tu_item_init(&it[0], 0, NULL);
  it[0].self = f->s[0];
  it[0].other = f->s[1];
  tu_item_init(&it[1], 1, NULL);
  it[1].self = f->s[1];
  it[1].other = f->s[0];
  it[0].cur_self = it[1].cur_self = -1;
  it[0].cur_other = it[1].cur_other = -1;
  assert_int_equal(sim_stream_submit(f->s[0], &it[0].work), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[1], &it[1].work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[1]), SIM_OK);
  assert_int_equal(it[0].cur_self, 1);
  assert_int_equal(it[0].cur_other, 0);
  assert_int_equal(it[1].cur_self, 1);
  assert_int_equal(it[1].cur_other, 0);
  assert_int_equal(sim_stream_is_current(f->s[0]), 0);
  assert_int_equal(sim_stream_is_current(f->s[1]), 0);
}

/* synchronize blocks while earlier work is pending, from several threads at
 * once, and returns when it is done. */
static void synchronize_blocks(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  enum { kCallers = 3 };
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_call* calls = (tu_call*)tu_calloc(f, kCallers, sizeof(tu_call));
  tu_gate* g = tu_gate_submit(f, s);
  tu_item_init(it, 0, NULL);
  assert_int_equal(sim_stream_submit(s, &it->work), SIM_OK);
  for (int i = 0; i < kCallers; i++)
    tu_call_start(&calls[i], tu_stream_sync_fn, s);
  tu_sleep_ms(50);
  int early = 0;
  for (int i = 0; i < kCallers; i++) early += tu_call_finished(&calls[i]);
  tu_gate_open(g);
  int finished = 0;
  for (int i = 0; i < kCallers; i++)
    finished += tu_call_wait(&calls[i], TU_TIMEOUT_MS);
  int rc[kCallers];
  for (int i = 0; i < kCallers; i++) rc[i] = tu_call_join(&calls[i]);
  assert_int_equal(early, 0);
  assert_int_equal(finished, kCallers);
  for (int i = 0; i < kCallers; i++) assert_int_equal(rc[i], SIM_OK);
  assert_int_equal(it->done_calls, 1);
}

/* A SIM_WORK_LAZY item waits at the head until an eager item is queued
 * behind it or a synchronize starts; then everything runs in FIFO order. */
static void lazy_items(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  tu_log* log = tu_log_new(f, 4);
  tu_item* it = (tu_item*)tu_calloc(f, 4, sizeof(tu_item));
  for (int i = 0; i < 4; i++) tu_item_init(&it[i], i, log);
  it[0].work.flags = it[1].work.flags = it[3].work.flags = SIM_WORK_LAZY;
  assert_int_equal(sim_stream_submit(s, &it[0].work), SIM_OK);
  assert_int_equal(sim_stream_submit(s, &it[1].work), SIM_OK);
  /* Nothing may run yet. (The sleep only gives a broken worker the time to
   * show itself; a correct one never runs them, whatever the timing.) */
  tu_sleep_ms(20);
  assert_int_equal(it[0].run_calls + it[1].run_calls, 0);
  /* An eager item releases everything before it. */
  assert_int_equal(sim_stream_submit(s, &it[2].work), SIM_OK);
  assert_int_equal(sim_stream_submit(s, &it[3].work), SIM_OK);
  /* ...and a synchronize releases the lazy tail. */
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  check_sequence(log, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(it[i].run_calls, 1);
}

/* Device threads flush denormals like TF's CPU threads: on the worker and in
 * every range of a sim_parallel_for it runs (whichever thread takes the
 * range), a product that underflows is 0 (FTZ) and a denormal input reads
 * as 0 (DAZ). */
typedef struct fp_rec {
  _Atomic int ranges, flushed; /* ranges run, ranges that saw FTZ+DAZ */
  int ftz, daz;                /* on the worker itself */
} fp_rec;

/* FTZ: two normal floats (FLT_MIN is 1.18e-38) whose product is a denormal.
 * DAZ: a denormal input whose product would be normal (3e-29). Each holds
 * only with its own bit set. */
static int fp_ftz(void) {
  volatile float a = 2e-38f, half = 0.5f;
  return a * half == 0.0f;
}
static int fp_daz(void) {
  volatile float denormal = 3e-39f, big = 1e10f;
  return denormal * big == 0.0f;
}
static int fp_flushes(void) {
  return fp_ftz() && fp_daz();
}

static void fp_range(void* arg, int64_t b, int64_t e) {
  fp_rec* r = arg;
  atomic_fetch_add(&r->ranges, 1);
  if (fp_flushes()) atomic_fetch_add(&r->flushed, 1);
}

static int fp_cb(void* arg, int status, char* msg, size_t msg_len) {
  fp_rec* r = arg;
  r->ftz = fp_ftz();
  r->daz = fp_daz();
  sim_parallel_for(1 << 12, 1, fp_range, r);
  return 0;
}

static void denormals_flushed(void** state) {
  tu_fix* f = (tu_fix*)*state;
  fp_rec* r = (fp_rec*)tu_calloc(f, 1, sizeof(fp_rec));
  assert_int_equal(sim_host_callback_async(f->s[0], fp_cb, r), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_true(atomic_load(&r->ranges) >= 1);
  /* Valgrind's CPU ignores FTZ/DAZ (it warns "unsupported action: Setting
   * %mxcsr.fz"), so under memcheck/helgrind this test checks only that the
   * callback and its ranges ran. */
  if (RUNNING_ON_VALGRIND) return;
  assert_true(r->ftz);
  assert_true(r->daz);
  assert_int_equal(atomic_load(&r->flushed), atomic_load(&r->ranges));
  /* The test's own thread keeps IEEE behaviour: the mode is per thread. */
  assert_false(fp_ftz());
  assert_false(fp_daz());
}

/* ---- sim_stream_run_inline --------------------------------------------- */

/* On an idle stream the item runs on the caller's thread, with the stream
 * current and the device FP mode, and is done before the call returns. */
static int inline_fp_run(sim_work* w, char* msg, size_t msg_len) {
  tu_item* it = tu_container_of(w, tu_item, work);
  it->run_calls++;
  it->cur_self = sim_stream_is_current(it->self);
  it->saw_open = fp_flushes(); /* reused: the FP mode seen by run */
  return SIM_OK;
}

/* Inline runs are off unless the stream's owner turns them on
 * (SIMDEV_INLINE): then an idle stream still gets the item on its worker. */
static void run_inline_off_by_default(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(it, 0, NULL);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_int_equal(sim_stream_run_inline(s, &it->work), 0);
  assert_int_equal(it->run_calls, 0); /* not run here */
  assert_int_equal(sim_stream_submit(s, &it->work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_int_equal(it->run_calls, 1);
  assert_int_equal(it->done_calls, 1);
}

static void run_inline_idle(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  sim_stream_set_inline(s, 1);
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(it, 0, NULL);
  it->work.run = inline_fp_run;
  it->self = s;
  it->cur_self = -1;
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_int_equal(sim_stream_run_inline(s, &it->work), 1);
  assert_int_equal(it->run_calls, 1); /* already, on this thread */
  assert_int_equal(it->done_calls, 1);
  assert_int_equal(it->done_status, SIM_OK);
  assert_int_equal(it->cur_self, 1);
  assert_int_equal(sim_stream_is_current(s), 0); /* restored */
  if (!RUNNING_ON_VALGRIND) {                    /* valgrind ignores FTZ/DAZ */
    assert_true(it->saw_open);
    assert_false(fp_ftz()); /* the caller's own mode is back */
  }
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_int_equal(sim_stream_run_inline(s, NULL), SIM_EINVAL);
}

/* Queued or running work keeps the item off the caller's thread: 0, item
 * untouched; submitted instead it runs after the earlier work. */
static void run_inline_busy(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  sim_stream_set_inline(s, 1);
  tu_log* log = tu_log_new(f, 3);
  tu_item* it = (tu_item*)tu_calloc(f, 3, sizeof(tu_item));
  for (int i = 0; i < 3; i++) tu_item_init(&it[i], i, log);
  tu_gate* g = tu_gate_submit(f, s);
  assert_true(
      tu_gate_wait_entered(g, TU_TIMEOUT_MS)); /* running, queue empty */
  assert_int_equal(sim_stream_run_inline(s, &it[0].work), 0);
  assert_int_equal(it[0].run_calls + it[0].done_calls, 0);
  assert_int_equal(sim_stream_submit(s, &it[0].work), SIM_OK);
  assert_int_equal(sim_stream_run_inline(s, &it[1].work), 0); /* queued */
  assert_int_equal(sim_stream_submit(s, &it[1].work), SIM_OK);
  tu_gate_open(g);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_int_equal(sim_stream_run_inline(s, &it[2].work), 1);
  check_sequence(log, 3);
  /* A lazy item never runs early. */
  tu_item* lazy = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(lazy, 9, NULL);
  lazy->work.flags = SIM_WORK_LAZY;
  assert_int_equal(sim_stream_run_inline(s, &lazy->work), 0);
  assert_int_equal(lazy->run_calls, 0);
}

/* Work submitted (here by the inline item itself) while an item runs
 * inline waits for it: the worker does not start it alongside. */
typedef struct inline_parent {
  tu_item item;
  tu_item child;
} inline_parent;

static int inline_parent_run(sim_work* w, char* msg, size_t msg_len) {
  inline_parent* p = tu_container_of(w, inline_parent, item.work);
  if (sim_stream_submit(p->item.self, &p->child.work) != SIM_OK)
    return SIM_EFAILED;
  /* Gives a broken worker the time to run the child now; a correct one
   * never does, whatever the timing. */
  tu_sleep_ms(20);
  tu_log_append(p->item.log, p->item.id);
  p->item.run_calls++;
  return SIM_OK;
}

static void run_inline_order(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  sim_stream_set_inline(s, 1);
  tu_log* log = tu_log_new(f, 2);
  inline_parent* p = (inline_parent*)tu_calloc(f, 1, sizeof(*p));
  tu_item_init(&p->item, 0, log);
  tu_item_init(&p->child, 1, log);
  p->item.work.run = inline_parent_run;
  p->item.self = s;
  assert_int_equal(sim_stream_run_inline(s, &p->item.work), 1);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  check_sequence(log, 2);
  assert_int_equal(p->child.run_calls, 1);
}

/* On a stream in error an inline item is drained like a queued one (done
 * with SIM_ESTREAM, run skipped); a failing inline item makes the error
 * sticky. */
static void run_inline_sticky(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* s = f->s[0];
  sim_stream_set_inline(s, 1);
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  tu_item_init(&it[0], 0, NULL);
  it[0].ret = SIM_EFAILED;
  it[0].fail_msg = "inline boom";
  tu_item_init(&it[1], 1, NULL);
  assert_int_equal(sim_stream_run_inline(s, &it[0].work), 1);
  assert_int_equal(it[0].done_status, SIM_EFAILED);
  char msg[64];
  assert_int_equal(sim_stream_status(s, msg, sizeof(msg)), SIM_EFAILED);
  assert_string_equal(msg, "inline boom");
  assert_int_equal(sim_stream_run_inline(s, &it[1].work), 1);
  assert_int_equal(it[1].run_calls, 0);
  assert_int_equal(it[1].done_status, SIM_ESTREAM);
  assert_int_equal(sim_stream_synchronize(s), SIM_EFAILED);
}

#define T1(name) cmocka_unit_test_setup_teardown(name, tu_setup1, tu_teardown)
#define T2(name) cmocka_unit_test_setup_teardown(name, tu_setup2, tu_teardown)

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T1(basics),
      T1(submit_invalid),
      T1(queue_order),
      T1(multi_submitters),
      T1(memcpy_memset),
      T1(memset_bounds),
      T1(memset32_invalid),
      T1(memcpy_overlap),
      T1(sticky_error),
      T1(sticky_first_error_wins),
      T1(host_callbacks),
      T1(destroy_with_queued_work),
      T1(destroy_with_queued_work_failed),
      T1(done_frees_item),
      T1(submit_from_run),
      T1(null_done),
      T2(is_current),
      T1(synchronize_blocks),
      T1(denormals_flushed),
      T1(lazy_items),
      T1(run_inline_off_by_default),
      T1(run_inline_idle),
      T1(run_inline_busy),
      T1(run_inline_order),
      T1(run_inline_sticky),
  };
  return cmocka_run_group_tests_name("stream", tests, NULL, NULL);
}
