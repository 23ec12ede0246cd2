/*
 * test_event.c - events: states, host synchronize, cross-stream waits,
 * re-recording, destruction while referenced, sim_stream_wait_stream.
 */
#include "testutil.h"

/* A probe reads, under g->mu, whether `target` has run yet and whether g is
 * open; it marks itself as run under the same lock, so the main thread can
 * watch it without a race. */
typedef struct probe {
  sim_work work;
  tu_gate* g;
  tu_item* target; /* may be NULL; must have target->observe == g */
  int ran;
  int saw_open;
  int saw_target;
  int done_calls;
} probe;

static int probe_run(sim_work* w, char* msg, size_t msg_len) {
  probe* p = tu_container_of(w, probe, work);
  TU_PT(pthread_mutex_lock(&p->g->mu));
  p->ran = 1;
  p->saw_open = p->g->open;
  p->saw_target = p->target ? p->target->ran_observed : -1;
  TU_PT(pthread_cond_broadcast(&p->g->cv));
  TU_PT(pthread_mutex_unlock(&p->g->mu));
  return 0;
}

static void probe_done(sim_work* w, int status) {
  probe* p = tu_container_of(w, probe, work);
  p->done_calls++;
}

static probe* probe_new(tu_fix* f, tu_gate* g, tu_item* target) {
  probe* p = (probe*)tu_calloc(f, 1, sizeof(*p));
  p->work.run = probe_run;
  p->work.done = probe_done;
  p->work.label = "probe";
  p->g = g;
  p->target = target;
  return p;
}

static int probe_ran(probe* p) {
  TU_PT(pthread_mutex_lock(&p->g->mu));
  int r = p->ran;
  TU_PT(pthread_mutex_unlock(&p->g->mu));
  return r;
}

static int probe_wait_ran(probe* p, int timeout_ms) {
  TU_PT(pthread_mutex_lock(&p->g->mu));
  int r = tu_wait_flag(&p->g->mu, &p->ran, timeout_ms);
  TU_PT(pthread_mutex_unlock(&p->g->mu));
  return r;
}

/* ------------------------------------------------------------------------ */

static void create_invalid(void** state) {
  tu_fix* f = (tu_fix*)*state;
  assert_int_equal(sim_event_create(NULL), SIM_EINVAL);
  sim_event* e = NULL;
  assert_int_equal(sim_event_create(&e), SIM_OK);
  assert_non_null(e);
  assert_int_equal(sim_event_record(NULL, f->s[0]), SIM_EINVAL);
  assert_int_equal(sim_event_record(e, NULL), SIM_EINVAL);
  assert_int_equal(sim_stream_wait_event(f->s[0], NULL), SIM_EINVAL);
  assert_int_equal(sim_stream_wait_event(NULL, e), SIM_EINVAL);
  assert_int_equal(sim_event_query(e), SIM_EVENT_COMPLETE);
  sim_event_destroy(e);
}

static void never_recorded(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_event* e = tu_event_new(f);
  assert_int_equal(sim_event_query(e), SIM_EVENT_COMPLETE);
  assert_int_equal(sim_event_synchronize(e), SIM_OK);
  /* Waiting on it is a no-op. */
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(it, 0, NULL);
  assert_int_equal(sim_stream_wait_event(f->s[0], e), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &it->work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(it->run_calls, 1);
  assert_int_equal(sim_event_query(e), SIM_EVENT_COMPLETE);
}

static void record_pending_then_complete(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_event* e = tu_event_new(f);
  tu_gate* g = tu_gate_submit(f, f->s[0]);
  assert_int_equal(sim_event_record(e, f->s[0]), SIM_OK);
  int st1 = sim_event_query(e);
  assert_true(tu_gate_wait_entered(g, TU_TIMEOUT_MS));
  int st2 = sim_event_query(e);
  tu_gate_open(g);
  int rc = sim_event_synchronize(e);
  int st3 = sim_event_query(e);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(st1, SIM_EVENT_PENDING);
  assert_int_equal(st2, SIM_EVENT_PENDING);
  assert_int_equal(rc, SIM_OK);
  assert_int_equal(st3, SIM_EVENT_COMPLETE);
}

/* sim_event_synchronize blocks the host until the record ran (and so
 * everything before it on the stream). */
static void synchronize_blocks(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_event* e = tu_event_new(f);
  tu_item* mark = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_opener* op = (tu_opener*)tu_calloc(f, 1, sizeof(tu_opener));
  op->gates[op->n++] = tu_gate_submit(f, f->s[0]);
  tu_item_init(mark, 0, NULL);
  mark->sleep_us = 2000;
  assert_int_equal(sim_stream_submit(f->s[0], &mark->work), SIM_OK);
  assert_int_equal(sim_event_record(e, f->s[0]), SIM_OK);
  tu_opener_start(op, 30);
  int rc = sim_event_synchronize(e);
  int mark_done = mark->done_calls;
  int st = sim_event_query(e);
  assert_int_equal(tu_call_join(&op->call), 0);
  assert_int_equal(rc, SIM_OK);
  if (mark_done != 1) fail_msg("event synchronize returned before the record");
  assert_int_equal(st, SIM_EVENT_COMPLETE);
}

/* Cross-stream wait: B waits on an event recorded on A behind a closed gate.
 * The host is not blocked by record/wait/submit; B's work before the wait
 * runs at once; B's work after the wait does not run before the gate opens.
 */
typedef struct xwait_ctx {
  sim_event* e;
  sim_stream* a;
  sim_stream* b;
  sim_work* after;
  int rc_record, rc_wait, rc_submit;
} xwait_ctx;

static int xwait_submit_fn(void* arg) {
  xwait_ctx* c = (xwait_ctx*)arg;
  c->rc_record = sim_event_record(c->e, c->a);
  c->rc_wait = sim_stream_wait_event(c->b, c->e);
  c->rc_submit = sim_stream_submit(c->b, c->after);
  return 0;
}

static void cross_stream_wait(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* a = f->s[0];
  sim_stream* b = f->s[1];
  xwait_ctx* c = (xwait_ctx*)tu_calloc(f, 1, sizeof(*c));
  tu_call* call = (tu_call*)tu_calloc(f, 1, sizeof(*call));
  c->e = tu_event_new(f);
  tu_gate* g = tu_gate_submit(f, a);
  probe* before = probe_new(f, g, NULL);
  probe* after = probe_new(f, g, NULL);
  assert_int_equal(sim_stream_submit(b, &before->work), SIM_OK);
  c->a = a;
  c->b = b;
  c->after = &after->work;
  tu_call_start(call, xwait_submit_fn, c);
  int host_returned = tu_call_wait(call, TU_TIMEOUT_MS);
  /* B's earlier work is not held back by the later wait. */
  int before_ran = probe_wait_ran(before, TU_TIMEOUT_MS);
  tu_sleep_ms(30);
  int after_ran_early = probe_ran(after);
  tu_gate_open(g);
  tu_call_join(call);
  assert_true(host_returned);
  assert_int_equal(c->rc_record, SIM_OK);
  assert_int_equal(c->rc_wait, SIM_OK);
  assert_int_equal(c->rc_submit, SIM_OK);
  assert_true(before_ran);
  assert_int_equal(before->saw_open, 0);
  assert_false(after_ran_early);
  assert_int_equal(sim_stream_synchronize(b), SIM_OK);
  assert_int_equal(after->done_calls, 1);
  assert_int_equal(after->saw_open, 1);
  assert_int_equal(sim_event_synchronize(c->e), SIM_OK);
}

/* A record on a stream in error: the event goes to ERROR and synchronize
 * reports SIM_ESTREAM; nobody waiting on it hangs; re-recording on a healthy
 * stream brings it back to COMPLETE. */
static void record_on_errored_stream(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_event* e = tu_event_new(f);
  tu_item* it = (tu_item*)tu_calloc(f, 2, sizeof(tu_item));
  tu_item_init(&it[0], 0, NULL);
  it[0].ret = SIM_EFAILED;
  it[0].fail_msg = "broken";
  assert_int_equal(sim_stream_submit(f->s[0], &it[0].work), SIM_OK);
  assert_int_equal(sim_event_record(e, f->s[0]), SIM_OK);
  assert_int_equal(sim_event_synchronize(e), SIM_ESTREAM);
  assert_int_equal(sim_event_query(e), SIM_EVENT_ERROR);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_EFAILED);

  /* Another stream waiting on the errored event does not hang. */
  tu_item_init(&it[1], 1, NULL);
  assert_int_equal(sim_stream_wait_event(f->s[1], e), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[1], &it[1].work), SIM_OK);
  tu_call* call = (tu_call*)tu_calloc(f, 1, sizeof(*call));
  tu_call_start(call, tu_stream_sync_fn, f->s[1]);
  int finished = tu_call_wait(call, TU_TIMEOUT_MS);
  if (!finished) fail_msg("stream waiting on an errored event hangs");
  tu_call_join(call);
  assert_int_equal(it[1].done_calls, 1);

  /* Recorded on a stream that is already failed (record is ALWAYS_RUN). */
  assert_int_equal(sim_event_record(e, f->s[0]), SIM_OK);
  assert_int_equal(sim_event_synchronize(e), SIM_ESTREAM);
  assert_int_equal(sim_event_query(e), SIM_EVENT_ERROR);

  /* Re-recorded on a healthy stream. */
  assert_int_equal(sim_event_record(e, f->s[1]), SIM_OK);
  assert_int_equal(sim_event_synchronize(e), SIM_OK);
  assert_int_equal(sim_event_query(e), SIM_EVENT_COMPLETE);
}

/* Re-recording moves the event to the new marker. */
static void re_record_moves(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* a = f->s[0];
  sim_stream* b = f->s[1];
  sim_event* e = tu_event_new(f);
  tu_call* call = (tu_call*)tu_calloc(f, 1, sizeof(*call));

  /* Pending on a blocked A, then moved to an idle B: completes without A. */
  tu_gate* g = tu_gate_submit(f, a);
  assert_int_equal(sim_event_record(e, a), SIM_OK);
  int st_a = sim_event_query(e);
  assert_int_equal(sim_event_record(e, b), SIM_OK);
  tu_call_start(call, tu_event_sync_fn, e);
  int finished = tu_call_wait(call, TU_TIMEOUT_MS);
  int st_b = sim_event_query(e);
  tu_gate_open(g);
  int rc = tu_call_join(call);
  assert_int_equal(st_a, SIM_EVENT_PENDING);
  if (!finished) fail_msg("event synchronize waited for the old record");
  assert_int_equal(rc, SIM_OK);
  assert_int_equal(st_b, SIM_EVENT_COMPLETE);
  /* The old record running later does not change anything. */
  assert_int_equal(sim_stream_synchronize(a), SIM_OK);
  assert_int_equal(sim_event_query(e), SIM_EVENT_COMPLETE);

  /* Complete on B, then re-recorded behind a gate on A: pending again, not
   * completed by the old record. */
  tu_gate* g2 = tu_gate_submit(f, a);
  assert_int_equal(sim_event_record(e, a), SIM_OK);
  assert_int_equal(sim_event_query(e), SIM_EVENT_PENDING);
  assert_true(tu_gate_wait_entered(g2, TU_TIMEOUT_MS));
  assert_int_equal(sim_event_query(e), SIM_EVENT_PENDING);
  tu_gate_open(g2);
  assert_int_equal(sim_event_synchronize(e), SIM_OK);
  assert_int_equal(sim_event_query(e), SIM_EVENT_COMPLETE);
}

/* A wait takes the event's last record as of the wait call: moving the
 * event afterwards does not release the waiter. */
static void wait_captures_record(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* a = f->s[0];
  sim_stream* b = f->s[1];
  sim_stream* c = f->s[2];
  sim_event* e = tu_event_new(f);
  tu_gate* g = tu_gate_submit(f, a);
  probe* after = probe_new(f, g, NULL);
  assert_int_equal(sim_event_record(e, a), SIM_OK);
  assert_int_equal(sim_stream_wait_event(b, e), SIM_OK);
  assert_int_equal(sim_event_record(e, c), SIM_OK); /* moves e to idle C */
  assert_int_equal(sim_stream_submit(b, &after->work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(c), SIM_OK);
  tu_sleep_ms(30);
  int early = probe_ran(after);
  tu_gate_open(g);
  assert_false(early);
  assert_int_equal(sim_stream_synchronize(b), SIM_OK);
  assert_int_equal(after->saw_open, 1);
}

/* Destroying an event while its record and a wait on it are still queued:
 * they keep it alive; the dependency still holds (memcheck checks the
 * memory side). */
static void destroy_while_queued(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* a = f->s[0];
  sim_stream* b = f->s[1];
  sim_event* e = NULL;
  assert_int_equal(sim_event_create(&e), SIM_OK);
  tu_gate* g = tu_gate_submit(f, a);
  probe* after = probe_new(f, g, NULL);
  assert_int_equal(sim_event_record(e, a), SIM_OK);
  assert_int_equal(sim_stream_wait_event(b, e), SIM_OK);
  assert_int_equal(sim_stream_submit(b, &after->work), SIM_OK);
  sim_event_destroy(e);
  tu_sleep_ms(20);
  int early = probe_ran(after);
  tu_gate_open(g);
  assert_false(early);
  assert_int_equal(sim_stream_synchronize(a), SIM_OK);
  assert_int_equal(sim_stream_synchronize(b), SIM_OK);
  assert_int_equal(after->saw_open, 1);

  /* Churn: many events destroyed right after record + wait. */
  const int n = tu_scaled(2000);
  for (int i = 0; i < n; i++) {
    sim_event* x = NULL;
    assert_int_equal(sim_event_create(&x), SIM_OK);
    assert_int_equal(sim_event_record(x, i % 2 ? a : b), SIM_OK);
    assert_int_equal(sim_stream_wait_event(i % 2 ? b : a, x), SIM_OK);
    if (i % 3 == 0) assert_int_equal(sim_event_record(x, b), SIM_OK);
    sim_event_destroy(x);
  }
  assert_int_equal(sim_device_synchronize(f->dev), SIM_OK);
}

/* sim_stream_wait_stream: B's later work waits for what A had queued at the
 * call, not for what A gets afterwards; the host does not block. */
typedef struct ws_ctx {
  sim_stream* dependent;
  sim_stream* other;
} ws_ctx;

static int wait_stream_fn(void* arg) {
  ws_ctx* c = (ws_ctx*)arg;
  return sim_stream_wait_stream(c->dependent, c->other);
}

static void wait_stream(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_stream* a = f->s[0];
  sim_stream* b = f->s[1];
  tu_gate* g = tu_gate_submit(f, a);
  tu_item* a1 = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(a1, 1, NULL);
  a1->observe = g;
  assert_int_equal(sim_stream_submit(a, &a1->work), SIM_OK);

  ws_ctx* c = (ws_ctx*)tu_calloc(f, 1, sizeof(*c));
  c->dependent = b;
  c->other = a;
  tu_call* call = (tu_call*)tu_calloc(f, 2, sizeof(tu_call));
  tu_call_start(&call[0], wait_stream_fn, c);
  int host_returned = tu_call_wait(&call[0], TU_TIMEOUT_MS);
  if (!host_returned) tu_gate_open(g);
  int rc_ws = tu_call_join(&call[0]);
  assert_true(host_returned);
  assert_int_equal(rc_ws, SIM_OK);

  /* Work A gets after the call: B must not wait for it. */
  tu_gate* g2 = tu_gate_submit(f, a);
  probe* y = probe_new(f, g, a1);
  assert_int_equal(sim_stream_submit(b, &y->work), SIM_OK);
  tu_sleep_ms(30);
  int early = probe_ran(y);
  tu_gate_open(g);
  tu_call_start(&call[1], tu_stream_sync_fn, b);
  int b_finished = tu_call_wait(&call[1], TU_TIMEOUT_MS);
  tu_gate_open(g2);
  int rc_b = tu_call_join(&call[1]);
  assert_false(early);
  if (!b_finished) fail_msg("B waited for work A got after wait_stream");
  assert_int_equal(rc_b, SIM_OK);
  assert_int_equal(y->saw_open, 1);
  assert_int_equal(y->saw_target, 1); /* A's earlier item ran before Y */
  assert_int_equal(sim_stream_synchronize(a), SIM_OK);
}

/* Waiting on an idle stream, or on itself, does not block anything. */
static void wait_stream_idle(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(it, 0, NULL);
  assert_int_equal(sim_stream_wait_stream(f->s[1], f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[1], &it->work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[1]), SIM_OK);
  assert_int_equal(it->run_calls, 1);
  assert_int_equal(sim_stream_wait_stream(NULL, f->s[0]), SIM_EINVAL);
  assert_int_equal(sim_stream_wait_stream(f->s[0], NULL), SIM_EINVAL);
}

#define T2(name) cmocka_unit_test_setup_teardown(name, tu_setup2, tu_teardown)
#define T3(name) cmocka_unit_test_setup_teardown(name, tu_setup3, tu_teardown)

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T2(create_invalid),
      T2(never_recorded),
      T2(record_pending_then_complete),
      T2(synchronize_blocks),
      T2(cross_stream_wait),
      T2(record_on_errored_stream),
      T2(re_record_moves),
      T3(wait_captures_record),
      T2(destroy_while_queued),
      T2(wait_stream),
      T2(wait_stream_idle),
  };
  return cmocka_run_group_tests_name("event", tests, NULL, NULL);
}
