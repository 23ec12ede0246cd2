/*
 * test_device.c - device creation, identity, synchronize-all, teardown with
 * live streams.
 */
#include "testutil.h"

static void create_destroy(void** state) {
  sim_device* dev = NULL;
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, &dev), SIM_OK);
  assert_non_null(dev);
  sim_device_destroy(dev);
  /* Again: nothing global was left behind. */
  dev = NULL;
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, &dev), SIM_OK);
  assert_non_null(dev);
  sim_device_destroy(dev);
}

static void ordinal(void** state) {
  sim_device* a = NULL;
  sim_device* b = NULL;
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, &a), SIM_OK);
  assert_int_equal(tu_device_create(3, TU_MEMORY_MB, &b), SIM_OK);
  assert_int_equal(sim_device_ordinal(a), 0);
  assert_int_equal(sim_device_ordinal(b), 3);
  sim_device_destroy(b);
  sim_device_destroy(a);
}

static void name_stable(void** state) {
  sim_device* a = NULL;
  sim_device* b = NULL;
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, &a), SIM_OK);
  assert_int_equal(tu_device_create(1, TU_MEMORY_MB, &b), SIM_OK);
  const char* na = sim_device_name(a);
  assert_non_null(na);
  assert_true(strlen(na) > 0);
  char copy[128];
  snprintf(copy, sizeof(copy), "%s", na);

  /* Use the device a bit; the name must not change. */
  void* p = sim_mem_alloc(a, 4096);
  assert_non_null(p);
  sim_stream* s = NULL;
  assert_int_equal(sim_stream_create(a, &s), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  sim_stream_destroy(s);
  sim_mem_free(a, p);
  assert_string_equal(sim_device_name(a), copy);

  /* Two devices, two names. */
  assert_non_null(sim_device_name(b));
  assert_string_not_equal(sim_device_name(a), sim_device_name(b));
  sim_device_destroy(b);
  sim_device_destroy(a);
}

static void numa_node(void** state) {
  sim_device* dev = NULL;
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, &dev), SIM_OK);
  int node = sim_device_numa_node(dev);
  int bound = sim_device_numa_bound(dev);
  assert_true(node >= -1);
  assert_true(bound == 0 || bound == 1);
  if (bound) assert_true(node >= 0); /* bound to a real node */
  /* Stable. */
  assert_int_equal(sim_device_numa_node(dev), node);
  assert_int_equal(sim_device_numa_bound(dev), bound);
  sim_device_destroy(dev);
}

static void bad_args(void** state) {
  sim_device* dev = NULL;
  assert_int_equal(tu_device_create(0, 0, &dev), SIM_EINVAL);
  assert_null(dev);
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, NULL), SIM_EINVAL);
  assert_int_equal(tu_device_create(-1, TU_MEMORY_MB, &dev), SIM_EINVAL);
  assert_null(dev);
  /* Past the documented maximum: refused one way or another. */
  assert_true(tu_device_create(0, (uint64_t)SIM_MAX_MEMORY_MB + 1, &dev) < 0);
  assert_null(dev);
}

/* sim_device_synchronize waits for the work of every stream. Each stream
 * holds a gate followed by a marker; a helper opens the gates after a delay.
 * When synchronize returns, every marker must have run. */
static void synchronize_all(void** state) {
  tu_fix* f = (tu_fix*)*state;
  enum { kStreams = 3 };
  tu_item* marks = (tu_item*)tu_calloc(f, kStreams, sizeof(tu_item));
  tu_opener* op = (tu_opener*)tu_calloc(f, 1, sizeof(tu_opener));
  for (int i = 0; i < kStreams; i++) {
    op->gates[op->n++] = tu_gate_submit(f, f->s[i]);
    tu_item_init(&marks[i], i, NULL);
    assert_int_equal(sim_stream_submit(f->s[i], &marks[i].work), SIM_OK);
  }
  tu_opener_start(op, 20);
  int rc = sim_device_synchronize(f->dev);
  int done[kStreams];
  for (int i = 0; i < kStreams; i++) done[i] = marks[i].done_calls;
  /* Join before asserting: the opener points into fixture memory. */
  assert_int_equal(tu_call_join(&op->call), 0);
  assert_int_equal(rc, SIM_OK);
  for (int i = 0; i < kStreams; i++) {
    if (done[i] != 1)
      fail_msg("stream %d: synchronize returned before its work ran", i);
    assert_int_equal(marks[i].run_calls, 1);
    assert_int_equal(marks[i].done_status, SIM_OK);
  }
}

/* No streams: returns at once. */
static void synchronize_no_streams(void** state) {
  tu_fix* f = (tu_fix*)*state;
  assert_int_equal(sim_device_synchronize(f->dev), SIM_OK);
}

/* Three streams, the middle one fails. With `gated`, the failing item sits
 * behind a gate opened only once device synchronize is already waiting, so
 * the error happens during the wait rather than before it. */
static void check_sync_reports_error(tu_fix* f, int gated) {
  tu_item* it = (tu_item*)tu_calloc(f, 3, sizeof(tu_item));
  tu_opener* op = (tu_opener*)tu_calloc(f, 1, sizeof(tu_opener));
  tu_item_init(&it[0], 0, NULL);
  tu_item_init(&it[1], 1, NULL);
  it[1].ret = SIM_EFAILED;
  it[1].fail_msg = "device sync failure";
  tu_item_init(&it[2], 2, NULL);
  if (gated) op->gates[op->n++] = tu_gate_submit(f, f->s[1]);
  assert_int_equal(sim_stream_submit(f->s[0], &it[0].work), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[1], &it[1].work), SIM_OK);
  assert_int_equal(sim_stream_submit(f->s[2], &it[2].work), SIM_OK);
  if (gated)
    tu_opener_start(op, 30);
  else
    assert_int_equal(sim_stream_synchronize(f->s[1]), SIM_EFAILED);
  int rc = sim_device_synchronize(f->dev);
  if (gated) tu_call_join(&op->call);
  /* The sticky status of the failed stream, not the status of some internal
   * marker that ran on it. */
  if (rc != SIM_EFAILED)
    fail_msg("sim_device_synchronize returned %d (%s), want SIM_EFAILED (%d)",
             rc, sim_strerror(rc), SIM_EFAILED);
  assert_int_equal(it[0].done_calls, 1);
  assert_int_equal(it[1].done_calls, 1);
  assert_int_equal(it[2].done_calls, 1);
  /* The healthy streams stay healthy. */
  assert_int_equal(sim_stream_status(f->s[0], NULL, 0), SIM_OK);
  assert_int_equal(sim_stream_status(f->s[2], NULL, 0), SIM_OK);
  /* And a second call reports the same. */
  assert_int_equal(sim_device_synchronize(f->dev), SIM_EFAILED);
}

static void synchronize_reports_error(void** state) {
  check_sync_reports_error((tu_fix*)*state, 0);
}

static void synchronize_reports_error_during_wait(void** state) {
  check_sync_reports_error((tu_fix*)*state, 1);
}

/* sim_device_destroy with streams that still have queued work (including
 * slow items and a gate opened late) drains them: every done exactly once. */
static void destroy_drains_streams(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(2000);
  enum { kStreams = 3 };
  tu_item* items =
      (tu_item*)tu_calloc(f, (size_t)n * kStreams, sizeof(tu_item));
  tu_opener* op = (tu_opener*)tu_calloc(f, 1, sizeof(tu_opener));
  op->gates[op->n++] = tu_gate_submit(f, f->s[0]);
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < kStreams; k++) {
      tu_item* it = &items[k * n + i];
      tu_item_init(it, i, NULL);
      if (i % 500 == 7) it->sleep_us = 1000;
      assert_int_equal(sim_stream_submit(f->s[k], &it->work), SIM_OK);
    }
  }
  tu_opener_start(op, 10);
  sim_device_destroy(f->dev);
  /* The device took its streams with it. */
  f->dev = NULL;
  f->ns = 0;
  assert_int_equal(tu_call_join(&op->call), 0);
  for (int i = 0; i < n * kStreams; i++) {
    if (items[i].done_calls != 1)
      fail_msg("item %d: done called %d times", i, items[i].done_calls);
    /* Healthy streams: destroy runs the queued work, it does not drop it. */
    if (items[i].run_before_done != 1 || items[i].done_status != SIM_OK)
      fail_msg("item %d: run %d times before done, done status %d", i,
               items[i].run_before_done, items[i].done_status);
  }
  assert_int_equal(op->gates[0]->done_calls, 1);
}

/* Streams created and destroyed in a loop: the device's stream list stays
 * consistent and device synchronize still works. */
static void stream_churn(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const int n = tu_scaled(200);
  sim_stream* keep = tu_add_stream(f);
  for (int i = 0; i < n; i++) {
    sim_stream* s = NULL;
    assert_int_equal(sim_stream_create(f->dev, &s), SIM_OK);
    assert_ptr_equal(sim_stream_device(s), f->dev);
    if (i % 2) assert_int_equal(sim_device_synchronize(f->dev), SIM_OK);
    sim_stream_destroy(s);
  }
  assert_ptr_equal(sim_stream_device(keep), f->dev);
  assert_int_equal(sim_device_synchronize(f->dev), SIM_OK);
}

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(create_destroy),
      cmocka_unit_test(ordinal),
      cmocka_unit_test(name_stable),
      cmocka_unit_test(numa_node),
      cmocka_unit_test(bad_args),
      cmocka_unit_test_setup_teardown(synchronize_all, tu_setup3, tu_teardown),
      cmocka_unit_test_setup_teardown(synchronize_no_streams, tu_setup0,
                                      tu_teardown),
      cmocka_unit_test_setup_teardown(synchronize_reports_error, tu_setup3,
                                      tu_teardown),
      cmocka_unit_test_setup_teardown(synchronize_reports_error_during_wait,
                                      tu_setup3, tu_teardown),
      cmocka_unit_test_setup_teardown(destroy_drains_streams, tu_setup3,
                                      tu_teardown),
      cmocka_unit_test_setup_teardown(stream_churn, tu_setup0, tu_teardown),
  };
  return cmocka_run_group_tests_name("device", tests, NULL, NULL);
}
