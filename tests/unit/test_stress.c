/*
 * test_stress.c - many streams, many items, cross-stream events, host
 * callbacks, from one or several submitting threads.
 *
 * SIMDEV_TEST_SCALE divides the item counts (valgrind runs use 50).
 */
#include "testutil.h"

enum { kStreams = 8, kItemsPerStream = 20000 };

/* Written only by the stream's own worker; read after synchronize. */
typedef struct lane {
  int last_seq;
  int runs;
  int order_errors;
  int cb_calls;
  int cb_bad_status;
  int cb_order_errors;
} lane;

typedef struct sitem {
  sim_work work;
  lane* lane;
  int seq;
  int run_calls;
  int done_calls;
  int done_status;
} sitem;

static int sitem_run(sim_work* w, char* msg, size_t msg_len) {
  sitem* it = tu_container_of(w, sitem, work);
  it->run_calls++;
  if (it->seq != it->lane->last_seq + 1) it->lane->order_errors++;
  it->lane->last_seq = it->seq;
  it->lane->runs++;
  return 0;
}

static void sitem_done(sim_work* w, int status) {
  sitem* it = tu_container_of(w, sitem, work);
  it->done_calls++;
  it->done_status = status;
}

typedef struct cb_arg {
  lane* lane;
  int after_seq; /* the callback follows this item */
} cb_arg;

static int lane_cb(void* arg, int stream_status, char* msg, size_t msg_len) {
  cb_arg* a = (cb_arg*)arg;
  a->lane->cb_calls++;
  if (stream_status != SIM_OK) a->lane->cb_bad_status++;
  if (a->lane->last_seq != a->after_seq) a->lane->cb_order_errors++;
  return 0;
}

typedef struct stress {
  int n;     /* items per stream */
  int every; /* items between cross-stream events */
  int cb_every;
  lane lanes[kStreams];
  sitem* items[kStreams];
  cb_arg* cbs[kStreams];
  int ncbs[kStreams];
  sim_event* ev[kStreams];
  int problems[kStreams]; /* failed API calls, per submitting thread */
} stress;

static stress* stress_new(tu_fix* f) {
  stress* st = (stress*)tu_calloc(f, 1, sizeof(*st));
  st->n = tu_scaled(kItemsPerStream);
  st->every = st->n / 40 > 0 ? st->n / 40 : 1;
  st->cb_every = st->n / 4 > 0 ? st->n / 4 : 1;
  for (int i = 0; i < kStreams; i++) {
    st->lanes[i].last_seq = -1;
    st->items[i] = (sitem*)tu_calloc(f, (size_t)st->n, sizeof(sitem));
    st->cbs[i] = (cb_arg*)tu_calloc(f, (size_t)(st->n / st->cb_every + 2),
                                    sizeof(cb_arg));
    for (int k = 0; k < st->n; k++) {
      sitem* it = &st->items[i][k];
      it->work.run = sitem_run;
      it->work.done = sitem_done;
      it->work.label = "stress";
      it->lane = &st->lanes[i];
      it->seq = k;
      it->done_status = 12345;
    }
  }
  return st;
}

/* Submits stream i's chunk [from, to), callbacks included, then records ev
 * on stream i and makes stream i+1 wait for it. Odd chunks use a fresh
 * event destroyed at once (the queued record and wait keep it alive).
 * Returns the number of failed calls. */
static int submit_chunk(tu_fix* f, stress* st, int i, int from, int to,
                        int chunk) {
  int bad = 0;
  sim_stream* s = f->s[i];
  sim_stream* next = f->s[(i + 1) % kStreams];
  for (int k = from; k < to; k++) {
    if (sim_stream_submit(s, &st->items[i][k].work) != SIM_OK) bad++;
    if (k % st->cb_every == st->cb_every - 1) {
      cb_arg* a = &st->cbs[i][st->ncbs[i]++];
      a->lane = &st->lanes[i];
      a->after_seq = k;
      if (sim_host_callback_async(s, lane_cb, a) != SIM_OK) bad++;
    }
  }
  if (chunk % 2 == 0) {
    if (sim_event_record(st->ev[i], s) != SIM_OK) bad++;
    if (sim_stream_wait_event(next, st->ev[i]) != SIM_OK) bad++;
  } else {
    sim_event* e = NULL;
    if (sim_event_create(&e) != SIM_OK) return bad + 1;
    if (sim_event_record(e, s) != SIM_OK) bad++;
    if (sim_stream_wait_event(next, e) != SIM_OK) bad++;
    sim_event_destroy(e);
  }
  return bad;
}

static void check_results(stress* st) {
  for (int i = 0; i < kStreams; i++) {
    lane* l = &st->lanes[i];
    if (st->problems[i] != 0)
      fail_msg("stream %d: %d API calls failed", i, st->problems[i]);
    if (l->runs != st->n || l->order_errors != 0 || l->last_seq != st->n - 1)
      fail_msg("stream %d: %d runs (want %d), %d order errors", i, l->runs,
               st->n, l->order_errors);
    if (l->cb_calls != st->ncbs[i] || l->cb_bad_status || l->cb_order_errors)
      fail_msg(
          "stream %d: %d callbacks (want %d), %d bad status, %d "
          "out of order",
          i, l->cb_calls, st->ncbs[i], l->cb_bad_status, l->cb_order_errors);
    for (int k = 0; k < st->n; k++) {
      sitem* it = &st->items[i][k];
      if (it->run_calls != 1 || it->done_calls != 1 ||
          it->done_status != SIM_OK)
        fail_msg("stream %d item %d: run %d, done %d, status %d", i, k,
                 it->run_calls, it->done_calls, it->done_status);
    }
  }
}

static int setup8(void** state) { return tu_setup_streams(state, kStreams); }

/* One submitter, ring of cross-stream dependencies. */
static void ring_single_submitter(void** state) {
  tu_fix* f = (tu_fix*)*state;
  stress* st = stress_new(f);
  for (int i = 0; i < kStreams; i++)
    assert_int_equal(sim_event_create(&st->ev[i]), SIM_OK);
  int chunk = 0;
  for (int from = 0; from < st->n; from += st->every, chunk++) {
    int to = from + st->every < st->n ? from + st->every : st->n;
    for (int i = 0; i < kStreams; i++)
      st->problems[i] += submit_chunk(f, st, i, from, to, chunk);
  }
  int rc = sim_device_synchronize(f->dev);
  int ev_state[kStreams];
  for (int i = 0; i < kStreams; i++) {
    ev_state[i] = sim_event_query(st->ev[i]);
    sim_event_destroy(st->ev[i]);
  }
  assert_int_equal(rc, SIM_OK);
  for (int i = 0; i < kStreams; i++)
    assert_int_equal(ev_state[i], SIM_EVENT_COMPLETE);
  check_results(st);
}

/* One submitting thread per stream; the main thread queries the events
 * meanwhile. */
typedef struct sub_thread {
  pthread_t th;
  tu_fix* f;
  stress* st;
  int i;
} sub_thread;

static void* sub_thread_main(void* arg) {
  sub_thread* t = (sub_thread*)arg;
  stress* st = t->st;
  int chunk = 0;
  for (int from = 0; from < st->n; from += st->every, chunk++) {
    int to = from + st->every < st->n ? from + st->every : st->n;
    st->problems[t->i] += submit_chunk(t->f, st, t->i, from, to, chunk);
  }
  /* And wait for this stream alone. */
  if (sim_stream_synchronize(t->f->s[t->i]) != SIM_OK) st->problems[t->i]++;
  return NULL;
}

static void ring_threaded_submitters(void** state) {
  tu_fix* f = (tu_fix*)*state;
  stress* st = stress_new(f);
  sub_thread* th = (sub_thread*)tu_calloc(f, kStreams, sizeof(sub_thread));
  for (int i = 0; i < kStreams; i++)
    assert_int_equal(sim_event_create(&st->ev[i]), SIM_OK);
  for (int i = 0; i < kStreams; i++) {
    th[i].f = f;
    th[i].st = st;
    th[i].i = i;
    TU_PT(pthread_create(&th[i].th, NULL, sub_thread_main, &th[i]));
  }
  int bad_state = 0;
  const int queries = tu_scaled(20000);
  for (int q = 0; q < queries; q++) {
    int s = sim_event_query(st->ev[q % kStreams]);
    if (s != SIM_EVENT_COMPLETE && s != SIM_EVENT_PENDING) bad_state++;
  }
  for (int i = 0; i < kStreams; i++) TU_PT(pthread_join(th[i].th, NULL));
  int rc = sim_device_synchronize(f->dev);
  for (int i = 0; i < kStreams; i++) sim_event_destroy(st->ev[i]);
  assert_int_equal(rc, SIM_OK);
  assert_int_equal(bad_state, 0);
  check_results(st);
}

/* A chain of copies through all streams, ordered by events: stream i copies
 * buffer i to buffer i+1 after stream i-1 filled buffer i. Repeated with a
 * different byte each round. */
static void copy_chain(void** state) {
  tu_fix* f = (tu_fix*)*state;
  enum { kBytes = 1 << 16 };
  const int rounds = tu_scaled(200);
  unsigned char* buf[kStreams + 1];
  sim_event* ev[kStreams];
  for (int i = 0; i <= kStreams; i++) {
    buf[i] = (unsigned char*)sim_mem_alloc(f->dev, kBytes);
    assert_non_null(buf[i]);
  }
  for (int i = 0; i < kStreams; i++)
    assert_int_equal(sim_event_create(&ev[i]), SIM_OK);
  int bad = 0;
  for (int r = 0; r < rounds; r++) {
    /* Stream 0 must not overwrite buf[0] before stream 1 copied the last
     * round out of it, and so on: wait for the downstream stream too. */
    if (r > 0 && sim_stream_wait_event(f->s[0], ev[1]) != SIM_OK) bad++;
    if (sim_memset8_async(f->s[0], buf[0], (uint8_t)(r + 1), kBytes) != SIM_OK)
      bad++;
    for (int i = 0; i < kStreams; i++) {
      if (i > 0 && sim_stream_wait_event(f->s[i], ev[i - 1]) != SIM_OK) bad++;
      if (i + 1 < kStreams && r > 0 &&
          sim_stream_wait_event(f->s[i], ev[i + 1]) != SIM_OK)
        bad++;
      if (sim_memcpy_async(f->s[i], buf[i + 1], buf[i], kBytes) != SIM_OK)
        bad++;
      if (sim_event_record(ev[i], f->s[i]) != SIM_OK) bad++;
    }
  }
  assert_int_equal(sim_event_synchronize(ev[kStreams - 1]), SIM_OK);
  assert_int_equal(sim_device_synchronize(f->dev), SIM_OK);
  assert_int_equal(bad, 0);
  for (int i = 0; i <= kStreams; i++) {
    const unsigned char* b = tu_bytes(buf[i]); /* host view */
    for (int k = 0; k < kBytes; k++) {
      if (b[k] != (unsigned char)rounds)
        fail_msg("buffer %d byte %d = %d, want %d", i, k, b[k],
                 (unsigned char)rounds);
    }
  }
  for (int i = 0; i < kStreams; i++) sim_event_destroy(ev[i]);
  for (int i = 0; i <= kStreams; i++) sim_mem_free(f->dev, buf[i]);
}

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(ring_single_submitter, setup8,
                                      tu_teardown),
      cmocka_unit_test_setup_teardown(ring_threaded_submitters, setup8,
                                      tu_teardown),
      cmocka_unit_test_setup_teardown(copy_chain, setup8, tu_teardown),
  };
  return cmocka_run_group_tests_name("stress", tests, NULL, NULL);
}
