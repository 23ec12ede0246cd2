/*
 * simdev_checks.c - checks that need simdev-specific knowledge (--simdev).
 *
 * What simdev promises beyond the header (src/device_sim/sim.h): platform
 * name and device type "SIMDEV"; device memory is a region of
 * SIMDEV_MEMORY_MB MiB (default 2048) reported as the allocator's limit and
 * as device_memory_usage's total; allocations are 64-byte aligned,
 * host-addressable and come back NULL (never a crash) when the region is
 * exhausted; SIMDEV_DEVICE_COUNT devices (default 1) with copies between
 * them; a bad SIMDEV_* value makes SE_InitPlugin fail with a message naming
 * the variable; a failed host callback's message reaches get_stream_status;
 * destroy_stream drains queued work.
 *
 * Environment-dependent cases run in child processes (child.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define D0 (&e->dev[0])
#define MIB (1024u * 1024u)
#define SIMDEV_DEFAULT_MEMORY_MB 2048
#define SIMDEV_ALIGN 64

/* The limit this process's plugin was configured with. */
static uint64_t expected_memory_mb(void) {
  const char* v = getenv("SIMDEV_MEMORY_MB");
  return v != NULL ? strtoull(v, NULL, 10) : SIMDEV_DEFAULT_MEMORY_MB;
}

static int contains(const char* haystack, const char* needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

/* ------------------------------------------------------------ platform */

static void test_platform(conf_env* e) {
  CHECK_STREQ(e->platform.name, "SIMDEV");
  CHECK_STREQ(e->platform.type, "SIMDEV");
  for (int i = 0; i < e->ndev; i++) {
    const SP_Device* d = &e->dev[i];
    CHECK(d->hardware_name != NULL && d->hardware_name[0] != '\0');
    CHECK(d->device_vendor != NULL && d->device_vendor[0] != '\0');
    CHECK(d->device_handle != NULL);
  }
  /* The region is bound to a NUMA node when the machine has one. */
  CHECK(e->dfns.get_numa_node != NULL);
}

/* Limits: the region size is the allocator's limit and the total. */
static void check_limits(conf_env* e, int d, uint64_t mb) {
  SP_AllocatorStats s = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  if (!CHECK(e->se.get_allocator_stats(&e->dev[d], &s))) return;
  CHECK_EQ(s.has_bytes_limit, 1);
  CHECK_EQ_U64(s.bytes_limit, mb * MIB);
  int64_t free_b = -1, total_b = -1;
  if (!CHECK(e->se.device_memory_usage(&e->dev[d], &free_b, &total_b))) return;
  CHECK_EQ_U64(total_b, mb * MIB);
  CHECK_LE(free_b, total_b);
  CHECK_GE(free_b, 0);
}

static void test_limits(conf_env* e) {
  check_limits(e, 0, expected_memory_mb());
}

/* ------------------------------------------------------------ memory */

static void test_alignment(conf_env* e) {
  static const uint64_t sizes[] = {1,   3,    63,   64,      65,
                                   100, 1000, 4097, MIB + 1, 3 * MIB};
  enum { kN = sizeof(sizes) / sizeof(sizes[0]) };
  SP_DeviceMemoryBase m[kN];
  for (int i = 0; i < kN; i++) {
    m[i] = conf_alloc(e, 0, sizes[i]);
    if (!CHECK(m[i].opaque != NULL)) continue;
    CHECKF((uintptr_t)m[i].opaque % SIMDEV_ALIGN == 0, "size %llu at %p",
           (unsigned long long)sizes[i], m[i].opaque);
    CHECK_EQ_U64(m[i].size, sizes[i]);
  }
  /* Device addresses are real addresses: live allocations do not overlap. */
  for (int i = 0; i < kN; i++) {
    for (int j = 0; j < i; j++) {
      if (m[i].opaque == NULL || m[j].opaque == NULL) continue;
      uintptr_t a = (uintptr_t)m[i].opaque, b = (uintptr_t)m[j].opaque;
      CHECK(a + sizes[i] <= b || b + sizes[j] <= a);
    }
  }
  for (int i = 0; i < kN; i++) conf_free(e, 0, &m[i]);
}

/* TF's DEVICE_DEFAULT kernels read and write simdev buffers directly. */
static void test_host_addressable(conf_env* e) {
  enum { kN = 4096 };
  unsigned char src[kN];
  SP_DeviceMemoryBase d = conf_alloc(e, 0, kN);
  REQUIRE(d.opaque != NULL);
  conf_fill(src, kN, 9);
  e->se.sync_memcpy_htod(D0, &d, src, kN, conf_st(e));
  REQUIRE_OK(e->st, "sync_memcpy_htod");
  CHECK(memcmp(d.opaque, src, kN) == 0);
out:
  if (d.opaque != NULL) conf_free(e, 0, &d);
}

static void test_over_limit(conf_env* e) {
  uint64_t limit = expected_memory_mb() * MIB;
  SP_AllocatorStats s0 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  SP_AllocatorStats s1 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  REQUIRE(e->se.get_allocator_stats(D0, &s0));
  static const uint64_t asks[] = {0, 0, 0, UINT64_MAX / 2, UINT64_MAX};
  uint64_t sizes[5];
  memcpy(sizes, asks, sizeof(sizes));
  sizes[0] = limit + MIB;
  sizes[1] = limit + 1;
  sizes[2] = 2 * limit;
  for (int i = 0; i < 5; i++) {
    SP_DeviceMemoryBase m = conf_alloc(e, 0, sizes[i]);
    CHECKF(m.opaque == NULL, "allocate(%llu) above a %llu-byte limit",
           (unsigned long long)sizes[i], (unsigned long long)limit);
    if (m.opaque != NULL) conf_free(e, 0, &m);
  }
  REQUIRE(e->se.get_allocator_stats(D0, &s1));
  CHECK_EQ(s1.bytes_in_use, s0.bytes_in_use);
  CHECK_EQ(s1.num_allocs, s0.num_allocs);
  /* The device still works. */
  SP_DeviceMemoryBase small = conf_alloc(e, 0, 4096);
  CHECK(small.opaque != NULL);
  conf_free(e, 0, &small);
out:
  return;
}

/* ------------------------------------------------------------ streams */

static void test_callback_error_message(conf_env* e) {
  static const char kMsg[] = "simdev-conformance: injected failure 42";
  conf_probe bad, later;
  SP_Event ev = NULL;
  SP_Stream s = conf_stream_new(e, 0);
  SP_Stream other = conf_stream_new(e, 0);
  REQUIRE(s != NULL && other != NULL);
  REQUIRE(conf_enqueue_probe(e, 0, s, &bad, -1, 0, TF_INTERNAL, kMsg));
  /* Work after the failure: host callbacks and events still complete, so
   * nobody waiting on them hangs. */
  REQUIRE(conf_enqueue_probe(e, 0, s, &later, -1, 0, TF_OK, NULL));
  e->se.create_event(D0, &ev, conf_st(e));
  REQUIRE_OK(e->st, "create_event");
  e->se.record_event(D0, s, ev, conf_st(e));
  REQUIRE_OK(e->st, "record_event");
  e->se.block_host_for_event(D0, ev, conf_st(e));
  CHECKF(conf_probe_wait_ran(&later, conf_safety_ms()),
         "a host callback after a failed one never ran");
  SE_EventStatus es = e->se.get_event_status(D0, ev);
  CHECK(es == SE_EVENT_COMPLETE || es == SE_EVENT_ERROR);

  e->se.get_stream_status(D0, s, conf_st(e));
  CHECK(TF_GetCode(e->st) != TF_OK);
  CHECKF(contains(TF_Message(e->st), kMsg), "stream status message: '%s'",
         TF_Message(e->st));
  /* Streams fail independently. */
  e->se.get_stream_status(D0, other, conf_st(e));
  CHECK_OK(e->st, "get_stream_status(other stream)");
out:
  conf_stream_free(e, 0, s);
  conf_stream_free(e, 0, other);
  if (ev != NULL) e->se.destroy_event(D0, ev);
}

/* sim.h: destroying a stream waits for its queued work. */
static void test_destroy_drains(conf_env* e) {
  enum { kN = 64 * 1024 };
  conf_probe p;
  /* Opens gate 0 while destroy_stream waits (or, on a slow machine, before
   * it is called: the checks hold either way); started first so that a
   * blocking enqueue cannot hang the test. */
  pthread_t later = conf_gate_open_later(0, 50);
  unsigned char* src = malloc(kN);
  unsigned char* dst = calloc(1, kN);
  SP_DeviceMemoryBase d = {0};
  SP_Stream s = conf_stream_new(e, 0);
  REQUIRE(s != NULL && src != NULL && dst != NULL);
  d = conf_alloc(e, 0, kN);
  REQUIRE(d.opaque != NULL);
  conf_fill(src, kN, 11);
  e->se.sync_memcpy_htod(D0, &d, src, kN, conf_st(e));
  REQUIRE_OK(e->st, "sync_memcpy_htod");
  REQUIRE(conf_enqueue_probe(e, 0, s, &p, 0, 0, TF_OK, NULL));
  e->se.memcpy_dtoh(D0, s, dst, &d, kN, conf_st(e));
  REQUIRE_OK(e->st, "memcpy_dtoh");
  e->se.destroy_stream(D0, s);
  s = NULL;
  CHECK_EQ(conf_probe_get(&p).ran, 1);
  CHECKF(memcmp(dst, src, kN) == 0,
         "destroy_stream dropped or did not wait for a queued copy");
out:
  conf_gates_open_all();
  conf_join_later(later);
  conf_stream_free(e, 0, s);
  if (d.opaque != NULL) conf_free(e, 0, &d);
  free(src);
  free(dst);
}

/* sim.h: an event may be destroyed while records and waits naming it are
 * still queued (TF's EventMgr frees events on its own schedule). */
static void test_event_lifetime(conf_env* e) {
  conf_probe pa, pb;
  pthread_t safety = conf_gate_open_later(0, conf_safety_ms());
  SP_Event ev = NULL;
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  REQUIRE(a != NULL && b != NULL);
  e->se.create_event(D0, &ev, conf_st(e));
  REQUIRE_OK(e->st, "create_event");
  REQUIRE(conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL));
  e->se.record_event(D0, a, ev, conf_st(e));
  REQUIRE_OK(e->st, "record_event");
  e->se.wait_for_event(D0, b, ev, conf_st(e));
  REQUIRE_OK(e->st, "wait_for_event");
  REQUIRE(conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL));
  e->se.destroy_event(D0, ev); /* record and wait still queued */
  ev = NULL;
  conf_sleep_ms(10);
  CHECK_EQ(conf_probe_get(&pb).ran, 0);
  conf_gate_open(0);
  CHECK_EQ(conf_sync(e, 0, b), TF_OK);
  CHECK_EQ(conf_probe_get(&pb).ran, 1);
  CHECK_LT(conf_probe_get(&pa).order, conf_probe_get(&pb).order);
out:
  conf_gates_open_all();
  conf_join_later(safety);
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
  if (ev != NULL) e->se.destroy_event(D0, ev);
}

/* memset32 with a size that is not a multiple of 4: an error, not a crash
 * and not a silent partial fill. */
static void test_memset32_bad_size(conf_env* e) {
  enum { kN = 64 };
  unsigned char host[kN];
  SP_DeviceMemoryBase d = conf_alloc(e, 0, kN);
  SP_Stream s = conf_stream_new(e, 0);
  REQUIRE(s != NULL && d.opaque != NULL);
  memset(host, 0xAB, kN);
  e->se.sync_memcpy_htod(D0, &d, host, kN, conf_st(e));
  REQUIRE_OK(e->st, "sync_memcpy_htod");
  e->se.memset32(D0, s, &d, 0x01020304u, 6, conf_st(e));
  TF_Code enqueue = TF_GetCode(e->st);
  TF_Code done = conf_sync(e, 0, s);
  e->se.get_stream_status(D0, s, conf_st(e));
  TF_Code later = TF_GetCode(e->st);
  CHECKF(enqueue != TF_OK || done != TF_OK || later != TF_OK,
         "memset32(size 6) was accepted");
out:
  conf_stream_free(e, 0, s);
  if (d.opaque != NULL) conf_free(e, 0, &d);
}

/* ------------------------------------------------------------ children */

static void run_child_cases(conf_env* e) {
  for (const conf_child_case* c = conf_child_cases; c->name != NULL; c++) {
    conf_run_child(e, c->name);
  }
}

const harness_test conf_simdev_tests[] = {
    {"simdev.platform", test_platform},
    {"simdev.limits", test_limits},
    {"simdev.alignment", test_alignment},
    {"simdev.host_addressable", test_host_addressable},
    {"simdev.over_limit", test_over_limit},
    {"simdev.callback_error_message", test_callback_error_message},
    {"simdev.destroy_drains", test_destroy_drains},
    {"simdev.event_lifetime", test_event_lifetime},
    {"simdev.memset32_bad_size", test_memset32_bad_size},
    {"simdev.env", run_child_cases},
    {NULL, NULL},
};

/* Child cases ---------------------------------------------------------- */

/* SE_InitPlugin must fail cleanly (TF aborts the process on an error, so
 * the message is all a user sees) and name the variable. */
static int init_must_fail(conf_env* e, const char* var) {
  SE_PlatformRegistrationParams params;
  SP_Platform platform;
  SP_PlatformFns pfns;
  conf_registration_params(&params, &platform, &pfns);
  e->init(&params, conf_st(e));
  if (!CHECK(TF_GetCode(e->st) != TF_OK)) {
    /* Registered after all: release it as ~CPlatform would. */
    if (params.destroy_platform) params.destroy_platform(&platform);
    if (params.destroy_platform_fns) params.destroy_platform_fns(&pfns);
    return 0;
  }
  CHECKF(contains(TF_Message(e->st), var), "message: '%s'", TF_Message(e->st));
  harness_note("SE_InitPlugin: %s", TF_Message(e->st));
  return 0;
}

static int child_memory_abc(conf_env* e) {
  return init_must_fail(e, "SIMDEV_MEMORY_MB");
}
static int child_memory_zero(conf_env* e) {
  return init_must_fail(e, "SIMDEV_MEMORY_MB");
}
static int child_memory_huge(conf_env* e) {
  return init_must_fail(e, "SIMDEV_MEMORY_MB");
}
static int child_count_zero(conf_env* e) {
  return init_must_fail(e, "SIMDEV_DEVICE_COUNT");
}
static int child_count_huge(conf_env* e) {
  return init_must_fail(e, "SIMDEV_DEVICE_COUNT");
}

/* SIMDEV_MEMORY_MB=16: the limit is reported, and exhaustion is a NULL. */
static int child_small_memory(conf_env* e) {
  enum { kMax = 64 };
  SP_DeviceMemoryBase m[kMax];
  int n = 0;
  if (!conf_setup(e, 1)) goto out;
  check_limits(e, 0, 16);
  for (; n < kMax; n++) {
    m[n] = conf_alloc(e, 0, MIB);
    if (m[n].opaque == NULL) break;
  }
  CHECKF(n < kMax, "64 allocations of 1 MiB from a 16 MiB device");
  CHECK_LE(n, 16);
  CHECK_GE(n, 8); /* most of the region is usable */
  SP_AllocatorStats s = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  CHECK(e->se.get_allocator_stats(D0, &s));
  CHECK_LE(s.bytes_in_use, 16 * (int64_t)MIB);
  for (int i = 0; i < n; i++) conf_free(e, 0, &m[i]);
  /* Freed memory coalesces (arena.c): after a run of small buffers, nearly
   * the whole region is again available as one buffer. */
  {
    enum { kSmall = 200 };
    SP_DeviceMemoryBase sm[kSmall];
    for (int i = 0; i < kSmall; i++) sm[i] = conf_alloc(e, 0, 40 * 1024);
    for (int i = 0; i < kSmall; i += 2) conf_free(e, 0, &sm[i]);
    for (int i = 1; i < kSmall; i += 2) conf_free(e, 0, &sm[i]);
  }
  SP_DeviceMemoryBase big = conf_alloc(e, 0, 12 * MIB);
  CHECKF(big.opaque != NULL, "12 MiB from an empty 16 MiB device");
  if (big.opaque != NULL) conf_free(e, 0, &big);
out:
  conf_teardown(e);
  return 0;
}

/* SIMDEV_DEVICE_COUNT=2: two devices, copies between them. */
static int child_two_devices(conf_env* e) {
  enum { kN = 256 * 1024 + 3 };
  unsigned char* src = malloc(kN);
  unsigned char* dst = calloc(1, kN);
  SP_DeviceMemoryBase a = {0}, b = {0}, c = {0};
  SP_Stream s0 = NULL, s1 = NULL;
  if (!conf_setup(e, 2) || !CHECK(src && dst)) goto out;
  CHECK_EQ(e->device_count, 2);
  REQUIRE_EQ(e->ndev, 2);
  CHECK_EQ(e->dev[0].ordinal, 0);
  CHECK_EQ(e->dev[1].ordinal, 1);
  CHECK(e->dev[0].device_handle != e->dev[1].device_handle);
  if (e->dev[0].hardware_name && e->dev[1].hardware_name) {
    CHECK(strcmp(e->dev[0].hardware_name, e->dev[1].hardware_name) != 0);
  }
  check_limits(e, 1, 64);

  a = conf_alloc(e, 0, kN);
  b = conf_alloc(e, 1, kN);
  c = conf_alloc(e, 0, kN);
  s0 = conf_stream_new(e, 0);
  s1 = conf_stream_new(e, 1);
  REQUIRE(a.opaque && b.opaque && c.opaque && s0 && s1);
  /* Device 1's memory is not device 0's. */
  SP_AllocatorStats st0 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  SP_AllocatorStats st1 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  CHECK(e->se.get_allocator_stats(&e->dev[0], &st0));
  CHECK(e->se.get_allocator_stats(&e->dev[1], &st1));
  CHECK_GE(st0.bytes_in_use, 2 * (int64_t)kN);
  CHECK_GE(st1.bytes_in_use, (int64_t)kN);
  CHECK_LT(st1.bytes_in_use, 2 * (int64_t)kN);

  /* As TF's DeviceToDeviceCopy: the sender's stream, the receiver's buffer.
   * 0 -> 1 on device 0's stream, 1 -> 0 on device 1's stream. */
  conf_fill(src, kN, 13);
  e->se.memcpy_htod(&e->dev[0], s0, &a, src, kN, conf_st(e));
  CHECK_OK(e->st, "memcpy_htod");
  e->se.memcpy_dtod(&e->dev[0], s0, &b, &a, kN, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtod(device 0 -> device 1)");
  CHECK_EQ(conf_sync(e, 0, s0), TF_OK);
  e->se.memcpy_dtod(&e->dev[1], s1, &c, &b, kN, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtod(device 1 -> device 0)");
  e->se.memcpy_dtoh(&e->dev[1], s1, dst, &b, kN, conf_st(e));
  CHECK_OK(e->st, "memcpy_dtoh(device 1)");
  CHECK_EQ(conf_sync(e, 1, s1), TF_OK);
  CHECK(memcmp(dst, src, kN) == 0);
  memset(dst, 0, kN);
  e->se.sync_memcpy_dtoh(&e->dev[0], dst, &c, kN, conf_st(e));
  CHECK_OK(e->st, "sync_memcpy_dtoh");
  CHECK(memcmp(dst, src, kN) == 0);
  /* Ordering across devices: device 1's stream waits for an event recorded
   * on device 0's stream (held at a gate), then reads what device 0 wrote. */
  {
    conf_probe gate;
    SP_Event ev = NULL;
    unsigned char* h = calloc(1, kN);
    pthread_t safety = conf_gate_open_later(0, conf_safety_ms());
    conf_fill(src, kN, 14);
    e->se.create_event(&e->dev[0], &ev, conf_st(e));
    CHECK_OK(e->st, "create_event");
    if (h != NULL && ev != NULL &&
        CHECK(conf_enqueue_probe(e, 0, s0, &gate, 0, 0, TF_OK, NULL))) {
      e->se.memcpy_htod(&e->dev[0], s0, &a, src, kN, conf_st(e));
      e->se.memcpy_dtod(&e->dev[0], s0, &b, &a, kN, conf_st(e));
      e->se.record_event(&e->dev[0], s0, ev, conf_st(e));
      CHECK_OK(e->st, "record_event(device 0)");
      e->se.wait_for_event(&e->dev[1], s1, ev, conf_st(e));
      CHECK_OK(e->st, "wait_for_event(device 1 on device 0's event)");
      e->se.memcpy_dtoh(&e->dev[1], s1, h, &b, kN, conf_st(e));
      conf_sleep_ms(20);
      CHECKF(conf_find_not(h, kN, 0) == -1,
             "device 1 read before device 0's event completed");
      conf_gate_open(0);
      CHECK_EQ(conf_sync(e, 1, s1), TF_OK);
      CHECK(memcmp(h, src, kN) == 0);
    }
    conf_gates_open_all();
    conf_join_later(safety);
    CHECK_EQ(conf_sync(e, 0, s0), TF_OK);
    if (ev != NULL) e->se.destroy_event(&e->dev[0], ev);
    free(h);
  }
  if (e->se.sync_memcpy_dtod != NULL) {
    memset(dst, 0, kN);
    e->se.sync_memcpy_htod(&e->dev[1], &b, dst, kN, conf_st(e));
    e->se.sync_memcpy_dtod(&e->dev[1], &b, &a, kN, conf_st(e));
    CHECK_OK(e->st, "sync_memcpy_dtod(device 0 -> device 1)");
    e->se.sync_memcpy_dtoh(&e->dev[1], dst, &b, kN, conf_st(e));
    CHECK(memcmp(dst, src, kN) == 0);
  }
out:
  conf_stream_free(e, 0, s0);
  conf_stream_free(e, 1, s1);
  if (a.opaque) conf_free(e, 0, &a);
  if (b.opaque) conf_free(e, 1, &b);
  if (c.opaque) conf_free(e, 0, &c);
  free(src);
  free(dst);
  conf_teardown(e);
  return 0;
}

const conf_child_case conf_child_cases[] = {
    {"memory_abc", {"SIMDEV_MEMORY_MB=abc"}, child_memory_abc},
    {"memory_zero", {"SIMDEV_MEMORY_MB=0"}, child_memory_zero},
    {"memory_huge", {"SIMDEV_MEMORY_MB=1048577"}, child_memory_huge},
    {"count_zero", {"SIMDEV_DEVICE_COUNT=0"}, child_count_zero},
    {"count_huge", {"SIMDEV_DEVICE_COUNT=17"}, child_count_huge},
    {"small_memory", {"SIMDEV_MEMORY_MB=16"}, child_small_memory},
    {"two_devices",
     {"SIMDEV_DEVICE_COUNT=2", "SIMDEV_MEMORY_MB=64"},
     child_two_devices},
    {NULL, {NULL}, NULL},
};
