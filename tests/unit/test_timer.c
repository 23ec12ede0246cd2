/*
 * test_timer.c - stream timers (start/stop timestamps taken on the worker).
 *
 * Timing assertions hold on any machine, however loaded or slow (valgrind):
 * a lower bound from a sleep inside the interval, and an upper bound from
 * the host's own clock around it (the timer's stamps are taken on the
 * worker with the same CLOCK_MONOTONIC, between the host's two readings).
 */
#include "testutil.h"

#define MS 1000000ull

/* Fails unless ns <= the host time since t0 (an interval measured inside
 * it cannot be longer). */
#define ASSERT_WITHIN_HOST(ns, t0)                                      \
  do {                                                                  \
    uint64_t host_ = tu_now_ns() - (t0);                                \
    if ((ns) > host_)                                                   \
      fail_msg("elapsed %" PRIu64 " ns > the %" PRIu64 " ns around it", \
               (uint64_t)(ns), host_);                                  \
  } while (0)

static tu_item* sleeper(tu_fix* f, unsigned us) {
  tu_item* it = (tu_item*)tu_calloc(f, 1, sizeof(tu_item));
  tu_item_init(it, 0, NULL);
  it->sleep_us = us;
  return it;
}

static void create_invalid(void** state) {
  tu_fix* f = (tu_fix*)*state;
  assert_int_equal(sim_timer_create(NULL), SIM_EINVAL);
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  assert_non_null(t);
  assert_int_equal(sim_timer_start(t, NULL), SIM_EINVAL);
  assert_int_equal(sim_timer_stop(NULL, f->s[0]), SIM_EINVAL);
  assert_int_equal(sim_timer_elapsed_ns(t, NULL), SIM_EINVAL);
  sim_timer_destroy(t);
}

static void elapsed_sleep(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &sleeper(f, 5000)->work), SIM_OK);
  assert_int_equal(sim_timer_stop(t, f->s[0]), SIM_OK);
  uint64_t ns = 0;
  assert_int_equal(sim_timer_elapsed_ns(t, &ns), SIM_OK);
  ASSERT_WITHIN_HOST(ns, t0);
  sim_timer_destroy(t);
  if (ns < 5 * MS) fail_msg("elapsed %" PRIu64 " ns < 5 ms", ns);
}

static void not_ready(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  uint64_t ns = 777;
  assert_int_equal(sim_timer_elapsed_ns(t, &ns), SIM_ENOTREADY);
  /* Started but never stopped: still not ready (and no hang). */
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
  assert_int_equal(sim_timer_elapsed_ns(t, &ns), SIM_ENOTREADY);
  sim_timer_destroy(t);
}

/* elapsed blocks until the queued stop ran; the interval covers a gate that
 * a helper holds closed for >= 30 ms. */
static void elapsed_blocks_until_stop(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  tu_opener* op = (tu_opener*)tu_calloc(f, 1, sizeof(tu_opener));
  uint64_t t0 = tu_now_ns();
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  op->gates[op->n++] = tu_gate_submit(f, f->s[0]);
  assert_int_equal(sim_timer_stop(t, f->s[0]), SIM_OK);
  /* Start the clock only once the worker took the start stamp and sits in
   * the gate, so the lower bound holds however late the worker ran. */
  assert_true(tu_gate_wait_entered(op->gates[0], TU_TIMEOUT_MS));
  tu_opener_start(op, 30);
  uint64_t ns = 0;
  int rc = sim_timer_elapsed_ns(t, &ns);
  tu_call_join(&op->call);
  sim_timer_destroy(t);
  assert_int_equal(rc, SIM_OK);
  ASSERT_WITHIN_HOST(ns, t0);
  /* The helper slept 30 ms between the gate's entry and its opening. */
  if (ns < 30 * MS) fail_msg("elapsed %" PRIu64 " ns < 30 ms", ns);
}

/* A timer can be reused: the second interval replaces the first. */
static void restart(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  uint64_t ns1 = 0, ns2 = 0;
  uint64_t t0 = tu_now_ns();
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_timer_stop(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_timer_elapsed_ns(t, &ns1), SIM_OK);
  ASSERT_WITHIN_HOST(ns1, t0);
  t0 = tu_now_ns();
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &sleeper(f, 20000)->work),
                   SIM_OK);
  assert_int_equal(sim_timer_stop(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_timer_elapsed_ns(t, &ns2), SIM_OK);
  ASSERT_WITHIN_HOST(ns2, t0);
  sim_timer_destroy(t);
  if (ns2 < 20 * MS) fail_msg("second interval %" PRIu64 " ns < 20 ms", ns2);
}

/* Timer items are ALWAYS_RUN: on a failed stream they still run, so the
 * host does not hang in elapsed. */
static void on_failed_stream(void** state) {
  tu_fix* f = (tu_fix*)*state;
  tu_item* bad = sleeper(f, 0);
  bad->ret = SIM_EFAILED;
  assert_int_equal(sim_stream_submit(f->s[0], &bad->work), SIM_OK);
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_timer_stop(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_EFAILED);
  uint64_t ns = UINT64_MAX;
  int rc = sim_timer_elapsed_ns(t, &ns);
  sim_timer_destroy(t);
  /* The contract does not say whether elapsed reports the stream error;
   * either way it must not say "never enqueued". */
  assert_int_not_equal(rc, SIM_ENOTREADY);
  if (rc == SIM_OK) ASSERT_WITHIN_HOST(ns, t0);
}

/* Destroying a timer with its start/stop still queued waits for them. */
static void destroy_with_queued(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  tu_opener* op = (tu_opener*)tu_calloc(f, 1, sizeof(tu_opener));
  op->gates[op->n++] = tu_gate_submit(f, f->s[0]);
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_timer_stop(t, f->s[0]), SIM_OK);
  tu_opener_start(op, 20);
  sim_timer_destroy(t);
  int opened = tu_gate_is_open(op->gates[0]);
  tu_call_join(&op->call);
  assert_true(opened);
  assert_int_equal(sim_stream_synchronize(f->s[0]), SIM_OK);
}

/* Start on one stream, stop on another that waits for the first. */
static void cross_stream(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_timer* t = NULL;
  assert_int_equal(sim_timer_create(&t), SIM_OK);
  uint64_t t0 = tu_now_ns();
  assert_int_equal(sim_timer_start(t, f->s[0]), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[0], &sleeper(f, 10000)->work),
                   SIM_OK);
  assert_int_equal(sim_stream_wait_stream(f->s[1], f->s[0]), SIM_OK);
  assert_int_equal(sim_timer_stop(t, f->s[1]), SIM_OK);
  uint64_t ns = 0;
  assert_int_equal(sim_timer_elapsed_ns(t, &ns), SIM_OK);
  ASSERT_WITHIN_HOST(ns, t0);
  sim_timer_destroy(t);
  if (ns < 10 * MS) fail_msg("elapsed %" PRIu64 " ns < 10 ms", ns);
}

#define T1(name) cmocka_unit_test_setup_teardown(name, tu_setup1, tu_teardown)
#define T2(name) cmocka_unit_test_setup_teardown(name, tu_setup2, tu_teardown)

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T1(create_invalid),
      T1(elapsed_sleep),
      T1(not_ready),
      T1(elapsed_blocks_until_stop),
      T1(restart),
      T1(on_failed_stream),
      T1(destroy_with_queued),
      T2(cross_stream),
  };
  return cmocka_run_group_tests_name("timer", tests, NULL, NULL);
}
