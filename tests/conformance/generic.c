/*
 * generic.c - checks valid for any PluggableDevice plugin: registration
 * results, devices, memory, streams, events (stream work: generic_work.c).
 *
 * They rely only on the header's contracts and on what TF does with them
 * (ported from TF's stream_executor_test.cc and from the C++ wrappers in
 * stream_executor.cc). Device memory is never dereferenced: data goes in and
 * out through the plugin's copies, and ordering is observed on host memory
 * (a device-to-host copy that ran too early changes a host buffer) or with
 * host callbacks that wait at a gate the main thread opens.
 *
 * Timing: "X has not run yet" is checked while the work X depends on is held
 * at a closed gate, so a correct plugin always passes; a hang is caught by
 * the runner's watchdog or, where the main thread itself would block, by a
 * helper thread that opens the gate after conf_safety_ms(). No check depends
 * on how fast the machine is: waits for work that a correct plugin runs at
 * once give up only after conf_safety_ms(), and where a helper releases
 * work while the main thread blocks, the check holds either way.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define D0 (&e->dev[0])
#define MIB (1024u * 1024u)

/* Settle time before asserting that blocked work has not run. */
#define SETTLE_MS 30

/* ------------------------------------------------------------ harness */

/* The harness's copy of TF's device-type rule, against TF's own examples. */
static void test_type_regex(conf_env* e) {
  (void)e;
  CHECK(conf_valid_device_type("MY_DEVICE"));
  CHECK(conf_valid_device_type("GPU"));
  CHECK(!conf_valid_device_type("INVALID:NAME"));
  CHECK(!conf_valid_device_type("INVALID/"));
  CHECK(!conf_valid_device_type("INVALID;"));
  CHECK(!conf_valid_device_type("Gpu"));
  CHECK(!conf_valid_device_type("GPU2"));
  CHECK(!conf_valid_device_type("_GPU"));
  CHECK(!conf_valid_device_type(""));
}

/* ------------------------------------------------------------ device */

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

/* [domain]:[bus]:[device].[function], e.g. 0000:00:02.1 */
static int valid_pci_bus_id(const char* s) {
  const char* shape = "hhhh:hh:hh.h";
  size_t n = strlen(shape);
  if (strlen(s) != n) return 0;
  for (size_t i = 0; i < n; i++) {
    if (shape[i] == 'h' ? !is_hex(s[i]) : s[i] != shape[i]) return 0;
  }
  return 1;
}

static int printable_string(const char* s) {
  size_t n = strnlen(s, 1024);
  if (n == 0 || n == 1024) return 0;
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)s[i] < 0x20) return 0;
  }
  return 1;
}

static void test_device(conf_env* e) {
  int count = -1;
  e->pfns.get_device_count(&e->platform, &count, conf_st(e));
  CHECK_OK(e->st, "get_device_count");
  CHECK_EQ(count, e->device_count); /* stable across calls */
  CHECK_GE(count, 1);
  for (int i = 0; i < e->ndev; i++) {
    const SP_Device* d = &e->dev[i];
    CHECK_EQ(d->ordinal, i);
    /* Optional, but when set: NUL-terminated, used for printing. */
    if (d->hardware_name != NULL) {
      CHECKF(printable_string(d->hardware_name), "ordinal %d", i);
    }
    if (d->device_vendor != NULL) {
      CHECKF(printable_string(d->device_vendor), "ordinal %d", i);
    }
    if (d->pci_bus_id != NULL) {
      CHECKF(valid_pci_bus_id(d->pci_bus_id), "pci_bus_id '%s'", d->pci_bus_id);
    }
    for (int j = 0; j < i; j++) {
      if (d->device_handle != NULL) {
        CHECK(d->device_handle != e->dev[j].device_handle);
      }
    }
  }
}

static void test_device_fns(conf_env* e) {
  for (int i = 0; i < e->ndev; i++) {
    const SP_Device* d = &e->dev[i];
    /* TF: negative values are "unset"; -1 means "NUMA node unknown". */
    if (e->dfns.get_numa_node != NULL) {
      CHECK_GE(e->dfns.get_numa_node(d), -1);
    }
    if (e->dfns.get_memory_bandwidth != NULL) {
      int64_t bw = e->dfns.get_memory_bandwidth(d);
      if (i == 0) harness_note("memory bandwidth %lld B/s", (long long)bw);
    }
    if (e->dfns.get_gflops != NULL) {
      double g = e->dfns.get_gflops(d);
      CHECK(!isnan(g) && !isinf(g));
      if (i == 0) harness_note("gflops %g", g);
    }
  }
}

/* ------------------------------------------------------------ memory */

static SP_AllocatorStats stats_now(conf_env* e, int d, int* ok);

static void test_allocate(conf_env* e) {
  /* TF's Allocate test: opaque + size come back, deallocate gets them. */
  SP_DeviceMemoryBase m = conf_alloc(e, 0, 2 * sizeof(int));
  CHECK(m.struct_size != 0); /* TF: ValidateSPDeviceMemoryBase */
  CHECK(m.opaque != NULL);
  CHECK_GE_U64(m.size, 2 * sizeof(int));
  if (m.size != 2 * sizeof(int)) {
    harness_note("allocate(8) reported size %llu", (unsigned long long)m.size);
  }
  conf_free(e, 0, &m);

  /* Live allocations are distinct. */
  enum { kN = 32 };
  SP_DeviceMemoryBase ms[kN];
  for (int i = 0; i < kN; i++) {
    ms[i] = conf_alloc(e, 0, (uint64_t)(i * 977 + 1));
    CHECK(ms[i].opaque != NULL);
    for (int j = 0; j < i; j++) {
      if (ms[i].opaque != NULL) CHECK(ms[i].opaque != ms[j].opaque);
    }
  }
  for (int i = 0; i < kN; i++) conf_free(e, 0, &ms[i]);

  /* "Deallocation of a nullptr-representative value is permitted." */
  SP_DeviceMemoryBase null_mem = {.struct_size =
                                      SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  e->se.deallocate(D0, &null_mem);
  CHECK(1);

  /* TF's simple allocator (use_bfc_allocator = 0) deallocates with the
   * size field 0: the memory must still be released. */
  int have_stats;
  SP_AllocatorStats before = stats_now(e, 0, &have_stats);
  SP_DeviceMemoryBase big = conf_alloc(e, 0, 4 * MIB);
  CHECK(big.opaque != NULL);
  big.size = 0;
  conf_free(e, 0, &big);
  SP_AllocatorStats after = stats_now(e, 0, &have_stats);
  if (have_stats) CHECK_EQ(after.bytes_in_use, before.bytes_in_use);

  /* Size 0 (TF's simple allocator can ask for it): no crash. */
  SP_DeviceMemoryBase z = conf_alloc(e, 0, 0);
  conf_free(e, 0, &z);
  CHECK(1);
}

static void test_host_memory(conf_env* e) {
  /* TF uses it for pinned staging buffers: host-accessible by definition. */
  enum { kN = 16 };
  void* p[kN];
  for (int i = 0; i < kN; i++) {
    uint64_t size = 4096u * (uint64_t)(i + 1);
    p[i] = e->se.host_memory_allocate(D0, size);
    CHECK(p[i] != NULL);
    if (p[i] == NULL) continue;
    memset(p[i], i, size);
    CHECK(((unsigned char*)p[i])[size - 1] == (unsigned char)i);
    for (int j = 0; j < i; j++) CHECK(p[i] != p[j]);
  }
  for (int i = 0; i < kN; i++) {
    if (p[i] != NULL) e->se.host_memory_deallocate(D0, p[i]);
  }
  void* big = e->se.host_memory_allocate(D0, 8 * MIB);
  CHECK(big != NULL);
  if (big != NULL) {
    ((char*)big)[0] = 1;
    ((char*)big)[8 * MIB - 1] = 2;
    e->se.host_memory_deallocate(D0, big);
  }
}

static void test_unified_memory(conf_env* e) {
  if (!e->platform.supports_unified_memory) {
    harness_note("supports_unified_memory is 0: skipped");
    return;
  }
  void* p = e->se.unified_memory_allocate(D0, 4096);
  CHECK(p != NULL);
  if (p != NULL) {
    memset(p, 7, 4096);
    e->se.unified_memory_deallocate(D0, p);
  }
}

static SP_AllocatorStats stats_now(conf_env* e, int d, int* ok) {
  /* As CStreamExecutor::GetAllocatorStats. */
  SP_AllocatorStats s = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  *ok = e->se.get_allocator_stats(&e->dev[d], &s) != 0;
  return s;
}

static void check_stats_sane(const SP_AllocatorStats* s) {
  CHECK(s->struct_size != 0); /* TF: ValidateSPAllocatorStats */
  CHECK_GE(s->bytes_in_use, 0);
  CHECK_GE(s->num_allocs, 0);
  CHECK_GE(s->peak_bytes_in_use, s->bytes_in_use);
  CHECK_GE(s->largest_alloc_size, 0);
  if (s->has_bytes_limit) {
    CHECK_GT(s->bytes_limit, 0);
    CHECK_LE(s->bytes_in_use, s->bytes_limit);
  }
}

static void test_allocator_stats(conf_env* e) {
  SP_DeviceMemoryBase m = {0};
  int ok;
  SP_AllocatorStats s0 = stats_now(e, 0, &ok);
  /* TF treats false as "no stats"; memory tooling then shows nothing. */
  REQUIRE(ok);
  check_stats_sane(&s0);

  m = conf_alloc(e, 0, MIB);
  REQUIRE(m.opaque != NULL);
  SP_AllocatorStats s1 = stats_now(e, 0, &ok);
  REQUIRE(ok);
  check_stats_sane(&s1);
  CHECK_GE(s1.bytes_in_use, s0.bytes_in_use + (int64_t)MIB);
  CHECK_GE(s1.num_allocs, s0.num_allocs + 1);
  CHECK_GE(s1.peak_bytes_in_use, s0.bytes_in_use + (int64_t)MIB);
  CHECK_GE(s1.largest_alloc_size, (int64_t)MIB);

  int64_t free1 = -1, total1 = -1;
  REQUIRE(e->se.device_memory_usage(D0, &free1, &total1));
  conf_free(e, 0, &m);

  SP_AllocatorStats s2 = stats_now(e, 0, &ok);
  REQUIRE(ok);
  check_stats_sane(&s2);
  CHECK_LE(s2.bytes_in_use, s1.bytes_in_use - (int64_t)MIB);
  CHECK_GE(s2.peak_bytes_in_use, s1.peak_bytes_in_use);

  /* TF sizes its BFC allocator from this; it must return true. */
  int64_t free2 = -1, total2 = -1;
  REQUIRE(e->se.device_memory_usage(D0, &free2, &total2));
  CHECK_GT(total2, 0);
  CHECK_GE(free2, 0);
  CHECK_LE(free2, total2);
  CHECK_EQ(total1, total2);
  CHECK_LE(free1, free2); /* freeing did not shrink free memory */
  if (s2.has_bytes_limit) CHECK_LE(s2.bytes_limit, total2);
out:
  if (m.opaque != NULL) conf_free(e, 0, &m);
}

/* ------------------------------------------------------------ streams */

static void test_streams(conf_env* e) {
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  REQUIRE(a != NULL && b != NULL);
  CHECK(a != b);
  /* A fresh stream is OK (Stream::RefreshStatus). */
  e->se.get_stream_status(D0, a, conf_st(e));
  CHECK_OK(e->st, "get_stream_status(fresh stream)");
  e->se.get_stream_status(D0, b, conf_st(e));
  CHECK_OK(e->st, "get_stream_status(fresh stream)");
  /* An idle stream is done at once. */
  CHECK_EQ(conf_sync(e, 0, a), TF_OK);
  /* TF creates and destroys streams per device and per session. */
  for (int i = 0; i < 32; i++) {
    SP_Stream s = conf_stream_new(e, 0);
    if (s == NULL) break;
    e->se.destroy_stream(D0, s);
  }
out:
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
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
  REQUIRE(a != NULL && b != NULL);
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  REQUIRE(conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL));
  e->se.create_stream_dependency(D0, b, a, conf_st(e));
  REQUIRE_OK(e->st, "create_stream_dependency");
  REQUIRE(CHECKF(conf_probe_get(&pa).ran == 0,
                 "create_stream_dependency blocked the host until the other "
                 "stream drained"));
  REQUIRE(conf_enqueue_probe(e, 0, a, &pa2, 1, 0, TF_OK, NULL));
  REQUIRE(conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL));

  conf_sleep_ms(SETTLE_MS);
  CHECKF(conf_probe_get(&pb).ran == 0,
         "work on the dependent stream ran before the stream it waits for");
  /* Release a's first item only; b must then finish while a is still held
   * at gate 1 (if it does not, the wait gives up and `out` opens gate 1). */
  conf_gate_open(0);
  CHECKF(conf_probe_wait_ran(&pb, conf_safety_ms()),
         "dependent stream waited for work enqueued after the dependency");
  conf_probe ra = conf_probe_get(&pa), ra2 = conf_probe_get(&pa2),
             rb = conf_probe_get(&pb);
  CHECK_EQ(ra.ran, 1);
  CHECK_LT(ra.order, rb.order);
  CHECK_EQ(ra2.ran, 0);
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
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  REQUIRE(a != NULL && b != NULL);
  e->se.create_event(D0, &ev, conf_st(e));
  REQUIRE_OK(e->st, "create_event");
  REQUIRE(ev != NULL);
  SE_EventStatus fresh = e->se.get_event_status(D0, ev);
  CHECKF(fresh == SE_EVENT_COMPLETE || fresh == SE_EVENT_PENDING,
         "status of a never-recorded event: %d", (int)fresh);

  /* Waiting for a never-recorded event waits for nothing (as in CUDA). */
  e->se.wait_for_event(D0, a, ev, conf_st(e));
  CHECK_OK(e->st, "wait_for_event(never recorded)");
  CHECK_EQ(conf_sync(e, 0, a), TF_OK);

  /* Recorded behind a closed gate: pending until the gate opens. */
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  REQUIRE(conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL));
  e->se.record_event(D0, a, ev, conf_st(e));
  REQUIRE_OK(e->st, "record_event");
  REQUIRE(CHECKF(conf_probe_get(&pa).ran == 0,
                 "record_event blocked the host until the stream drained"));
  CHECK_EQ(e->se.get_event_status(D0, ev), SE_EVENT_PENDING);
  /* Stream::WaitFor(Event*): b's later work waits for the event. */
  e->se.wait_for_event(D0, b, ev, conf_st(e));
  REQUIRE_OK(e->st, "wait_for_event");
  REQUIRE(CHECKF(conf_probe_get(&pa).ran == 0,
                 "wait_for_event blocked the host until the event completed"));
  REQUIRE(conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL));
  conf_sleep_ms(SETTLE_MS);
  CHECK_EQ(e->se.get_event_status(D0, ev), SE_EVENT_PENDING);
  CHECKF(conf_probe_get(&pb).ran == 0,
         "work behind wait_for_event ran before the event completed");

  conf_gate_open(0);
  e->se.block_host_for_event(D0, ev, conf_st(e));
  CHECK_OK(e->st, "block_host_for_event");
  CHECK_EQ(conf_probe_get(&pa).ran, 1);
  CHECK_EQ(e->se.get_event_status(D0, ev), SE_EVENT_COMPLETE);
  CHECK_EQ(conf_sync(e, 0, b), TF_OK);
  CHECK_EQ(conf_probe_get(&pb).ran, 1);
  CHECK_LT(conf_probe_get(&pa).order, conf_probe_get(&pb).order);

  /* TF reuses events: record again on an idle stream. */
  e->se.record_event(D0, b, ev, conf_st(e));
  CHECK_OK(e->st, "record_event (again)");
  e->se.block_host_for_event(D0, ev, conf_st(e));
  CHECK_OK(e->st, "block_host_for_event (again)");
  CHECK_EQ(e->se.get_event_status(D0, ev), SE_EVENT_COMPLETE);

  for (int i = 0; i < 64; i++) {
    SP_Event x = NULL;
    e->se.create_event(D0, &x, conf_st(e));
    if (!CHECK_OK(e->st, "create_event")) break;
    e->se.destroy_event(D0, x);
  }
out:
  conf_gates_open_all();
  if (have_safety) conf_join_later(safety);
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
  if (ev != NULL) e->se.destroy_event(D0, ev);
}

/* ------------------------------------------------------------ list */

const harness_test conf_generic_tests[] = {
    {"harness.type_regex", test_type_regex},
    {"generic.device", test_device},
    {"generic.device_fns", test_device_fns},
    {"generic.allocate", test_allocate},
    {"generic.host_memory", test_host_memory},
    {"generic.unified_memory", test_unified_memory},
    {"generic.allocator_stats", test_allocator_stats},
    {"generic.streams", test_streams},
    {"generic.stream_dependency", test_stream_dependency},
    {"generic.events", test_events},
    {NULL, NULL},
};
