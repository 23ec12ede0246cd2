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
 *
 * Grades: the rules below cite what TF 2.21 does with each callback
 * (stream_executor.cc, stream_executor_internal.h, pluggable_device_*.cc).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strnlen under -std=c11 */
#endif
#include "generic.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define GENERIC_RULES(X)                                                       \
  GENERIC_SHARED_RULES(X)                                                      \
  X(R_TYPE_REGEX, "harness.device_type_regex", REQUIRED, "(the harness)",      \
    "The harness's copy of TF's device_utils::ValidateDeviceType "             \
    "([A-Z][A-Z_]*) accepts and rejects TF's own examples: the registration "  \
    "rules platform.name_valid and platform.type_valid rely on it.")           \
  X(R_COUNT_STABLE, "devices.count_stable", REQUIRED, "get_device_count",      \
    "get_device_count returns OK and the same count on every call: TF asks "   \
    "again when it creates each device and its allocator "                     \
    "(CreatePluggableDevice, GetPluggableDeviceAllocator), and "               \
    "tsl::CheckValidTfDeviceId CHECK-fails (aborts) on an ordinal outside "    \
    "a count that shrank.")                                                    \
  X(R_ORDINAL, "device.ordinal", RECOMMENDED, "create_device",                 \
    "SP_Device.ordinal is the ordinal TF asked for "                           \
    "(SE_CreateDeviceParams.ordinal): TF keeps its own ordinal and does not "  \
    "read it back, but the plugin's callbacks only get the SP_Device.")        \
  X(R_DESCRIPTION, "device.description", RECOMMENDED,                          \
    "SP_Device.hardware_name / device_vendor / pci_bus_id",                    \
    "When set, hardware_name and device_vendor are printable NUL-terminated "  \
    "strings and pci_bus_id reads DDDD:BB:DD.F: "                              \
    "CStreamExecutor::CreateDeviceDescription copies them into the "           \
    "DeviceDescription TF logs and shows as physical_device_desc, without "    \
    "validating them.")                                                        \
  X(R_HANDLES, "device.handles_distinct", RECOMMENDED, "create_device",        \
    "Devices that set device_handle have distinct handles: TF passes only "    \
    "the SP_Device back to every callback, so the handle is how the plugin "   \
    "tells its devices apart.")                                                \
  X(R_NUMA, "device_fns.numa_node", RECOMMENDED, "get_numa_node",              \
    "get_numa_node returns a node >= 0, or -1 when unknown, as the header "    \
    "documents; TF 2.21 treats any negative value as unknown "                 \
    "(CreateDeviceDescription).")                                              \
  X(R_GFLOPS, "device_fns.gflops_finite", RECOMMENDED, "get_gflops",           \
    "get_gflops returns a finite number: TF copies it into the "               \
    "DeviceDescription that cost models read.")                                \
  X(R_ALLOC_STRUCT, "allocate.struct_size", RECOMMENDED, "allocate",           \
    "allocate leaves a non-zero struct_size in the SP_DeviceMemoryBase TF "    \
    "passes: CStreamExecutor::Allocate's ValidateSPDeviceMemoryBase logs an "  \
    "error otherwise.")                                                        \
  X(R_DISTINCT, "allocate.distinct", REQUIRED, "allocate",                     \
    "Live allocations have distinct addresses: TF's DeviceMemAllocator "       \
    "hands each one to its own tensor, so a repeated address makes two "       \
    "tensors share memory.")                                                   \
  X(R_DEALLOC_SIZE0, "deallocate.ignores_size", REQUIRED, "deallocate",        \
    "deallocate releases the memory when the SP_DeviceMemoryBase it gets "     \
    "has size 0: TF's DeviceMemAllocator::Free (under both the BFC and the "   \
    "simple allocator) passes DeviceMemoryBase(ptr), whose size is 0, so a "   \
    "plugin that frees by size leaks every allocation.")                       \
  X(R_DEALLOC_NULL, "deallocate.null_ok", RECOMMENDED, "deallocate",           \
    "deallocate of a NULL opaque returns without harm, as the header "         \
    "permits; TF's DeviceMemAllocator::Free skips NULL, so only other "        \
    "callers of StreamExecutor::Deallocate rely on it.")                       \
  X(R_ALLOC_ZERO, "allocate.size_zero", RECOMMENDED, "allocate",               \
    "allocate(0) and the deallocate of its result return without harm: "       \
    "TF's DeviceMemAllocator::Alloc never asks for 0 bytes, other callers "    \
    "of StreamExecutor::Allocate may.")                                        \
  X(R_UNIFIED, "unified_memory.usable", RECOMMENDED,                           \
    "unified_memory_allocate",                                                 \
    "With supports_unified_memory set, unified_memory_allocate returns "       \
    "host-writable memory: ValidateSPStreamExecutor requires the callbacks "   \
    "then, but TF 2.21's PluggableDevice refuses unified memory (\"Unified "   \
    "memory is not supported yet.\"), so only other callers use it.")          \
  X(R_STATS_AVAILABLE, "allocator_stats.available", RECOMMENDED,               \
    "get_allocator_stats",                                                     \
    "get_allocator_stats returns true: CStreamExecutor::GetAllocatorStats "    \
    "turns false into \"no stats\" and TF carries on. TF 2.21's "              \
    "PluggableDevice never asks (the stats users see come from TF's own "      \
    "allocator); tools that ask the stream executor get nothing.")             \
  X(R_STATS_CONSISTENT, "allocator_stats.consistent", RECOMMENDED,             \
    "get_allocator_stats",                                                     \
    "The stats keep struct_size (ValidateSPAllocatorStats drops them "         \
    "otherwise), are not negative, peak >= in use, and a bytes_limit, when "   \
    "set, is positive, holds bytes_in_use and fits device_memory_usage's "     \
    "total.")                                                                  \
  X(R_STATS_TRACK, "allocator_stats.tracks_allocations", RECOMMENDED,          \
    "get_allocator_stats",                                                     \
    "bytes_in_use, num_allocs, peak_bytes_in_use and largest_alloc_size "      \
    "follow allocate and deallocate. TF 2.21 never reads the plugin's "        \
    "stats (no PluggableDevice code calls get_allocator_stats; "               \
    "get_memory_info reports TF's own allocator), so made-up numbers "         \
    "mislead only tools that ask the stream executor directly.")               \
  X(R_MEM_USAGE, "device_memory_usage.returns_true", REQUIRED,                 \
    "device_memory_usage",                                                     \
    "device_memory_usage returns true: SingleVirtualDeviceMemoryLimit "        \
    "(pluggable_device_factory.cc) turns false into \"Failed to query "        \
    "available memory for PluggableDevice\", which fails device creation "     \
    "and with it every session and eager context.")                            \
  X(R_MEM_VALUES, "device_memory_usage.values", RECOMMENDED,                   \
    "device_memory_usage",                                                     \
    "total > 0, 0 <= free <= total, the total stays the same and free does "   \
    "not shrink when memory is released: TF sizes the device's BFC "           \
    "allocator from free (or total times per_process_gpu_memory_fraction) "    \
    "without checking, so invented numbers give the device a wrong memory "    \
    "limit.")                                                                  \
  X(R_STREAMS_DISTINCT, "stream.distinct", REQUIRED, "create_stream",          \
    "Live streams are distinct handles: TF creates a compute stream and "      \
    "separate host-to-device, device-to-host and device-to-device streams "    \
    "per device and orders them only through dependencies and events.")        \
  X(R_DESTROY_RELEASES, "stream.destroy_releases", RECOMMENDED,                \
    "destroy_stream / destroy_event",                                          \
    "Creating and destroying 32 streams and 256 events leaves no threads "     \
    "(/proc/self/task) or file descriptors behind. TF 2.21 keeps a "           \
    "device's streams for the life of the process and pools its events, "      \
    "so a leak costs little there; any caller that creates and destroys "      \
    "them (tests, tools, a long-lived process reinitializing devices) "        \
    "accumulates threads until the process fails.")                            \
  X(R_DEP_ORDER, "stream_dependency.orders", REQUIRED,                         \
    "create_stream_dependency",                                                \
    "create_stream_dependency returns OK, and work enqueued on the "           \
    "dependent stream afterwards starts only after the work enqueued on "      \
    "the other stream before the call finished: TF's copies wait for the "     \
    "compute stream this way (CStream::WaitFor(Stream*) in "                   \
    "PluggableDeviceUtil), so ignoring it copies tensors before the "          \
    "kernels producing them ran.")                                             \
  X(R_DEP_SNAPSHOT, "stream_dependency.only_earlier_work", RECOMMENDED,        \
    "create_stream_dependency",                                                \
    "The dependent stream waits only for work enqueued on the other stream "   \
    "before the call (Stream::WaitFor, as cudaStreamWaitEvent): waiting for "  \
    "later work too serializes TF's copy streams behind its compute "          \
    "stream.")                                                                 \
  X(R_WAIT_UNRECORDED, "event.wait_unrecorded", RECOMMENDED, "wait_for_event", \
    "wait_for_event on an event never recorded returns OK and waits for "      \
    "nothing, as in CUDA; TF 2.21 always records before it waits.")            \
  X(R_EVENT_COMPLETES, "event.completes", REQUIRED, "get_event_status",        \
    "Once the work recorded before an event has run, get_event_status "        \
    "says SE_EVENT_COMPLETE: EventMgr polls it until then, and the copies "    \
    "and tensor frees waiting on it never finish otherwise.")                  \
  X(R_EVENT_REUSE, "event.reusable", REQUIRED, "record_event",                 \
    "An event can be recorded again after it completed and completes "         \
    "again: TF's EventMgr keeps a pool of events and re-records them.")
CONF_RULES_SHARED(conf_generic_rules, GENERIC_RULES)

#define D0 (&e->dev[0])
#define MIB (1024u * 1024u)

/* Settle time before asserting that blocked work has not run. */
#define SETTLE_MS 30

/* ------------------------------------------------------------ shared */

const char* generic_event_status_name(SE_EventStatus s) {
  switch (s) {
    case SE_EVENT_UNKNOWN: return "SE_EVENT_UNKNOWN";
    case SE_EVENT_ERROR: return "SE_EVENT_ERROR";
    case SE_EVENT_PENDING: return "SE_EVENT_PENDING";
    case SE_EVENT_COMPLETE: return "SE_EVENT_COMPLETE";
    default: return "a value outside SE_EventStatus";
  }
}

int generic_callbacks_run(conf_env* e, SP_Stream s) {
  /* Static: a plugin that runs the callback after the wait returned writes
   * here, never into a stack frame that is gone. */
  static conf_probe p;
  if (!EXPECT(R_HOST_CB_TRUE,
              conf_enqueue_probe(e, 0, s, &p, -1, 0, TF_OK, NULL),
              "host_callback returned false for a callback on an idle "
              "stream")) {
    return 0;
  }
  TF_Code c = conf_sync(e, 0, s);
  if (!EXPECT(R_STREAM_SYNC, c == TF_OK,
              "waiting for a stream that held one host callback returned %s",
              conf_code_name(c))) {
    return 0;
  }
  if (conf_probe_get(&p).ran == 0) {
    conf_skip(
        "a host callback had not run when its stream reported done "
        "(host_callback.runs, graded in generic.host_callback); this "
        "test holds work at a gate with host callbacks");
    return 0;
  }
  return 1;
}

/* ------------------------------------------------------------ harness */

/* The harness's copy of TF's device-type rule, against TF's own examples. */
static void test_type_regex(conf_env* e) {
  (void)e;
  static const struct {
    const char* s;
    int valid;
  } cases[] = {{"MY_DEVICE", 1}, {"GPU", 1},      {"INVALID:NAME", 0},
               {"INVALID/", 0},  {"INVALID;", 0}, {"Gpu", 0},
               {"GPU2", 0},      {"_GPU", 0},     {"", 0}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    EXPECT(R_TYPE_REGEX, conf_valid_device_type(cases[i].s) == cases[i].valid,
           "the harness %s \"%s\"; TF %s it",
           cases[i].valid ? "rejects" : "accepts", cases[i].s,
           cases[i].valid ? "accepts" : "rejects");
  }
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
  /* TF starts from 0 (CPlatform::VisibleDeviceCount). */
  int count = 0;
  e->pfns.get_device_count(&e->platform, &count, conf_st(e));
  EXPECT_OK(R_COUNT_STABLE, e->st, "get_device_count (called again)");
  EXPECT(R_COUNT_STABLE, count == e->device_count,
         "get_device_count reported %d devices, and %d when the devices were "
         "created",
         count, e->device_count);
  for (int i = 0; i < e->ndev; i++) {
    const SP_Device* d = &e->dev[i];
    EXPECT(R_ORDINAL, d->ordinal == i,
           "create_device(ordinal %d) left SP_Device.ordinal %d", i,
           d->ordinal);
    /* Optional, but when set: NUL-terminated, used for printing. */
    if (d->hardware_name != NULL) {
      EXPECT(R_DESCRIPTION, printable_string(d->hardware_name),
             "ordinal %d: hardware_name is empty, longer than 1023 bytes or "
             "holds control characters",
             i);
    }
    if (d->device_vendor != NULL) {
      EXPECT(R_DESCRIPTION, printable_string(d->device_vendor),
             "ordinal %d: device_vendor is empty, longer than 1023 bytes or "
             "holds control characters",
             i);
    }
    if (d->pci_bus_id != NULL) {
      EXPECT(R_DESCRIPTION, valid_pci_bus_id(d->pci_bus_id),
             "ordinal %d: pci_bus_id '%.64s' is not of the form "
             "DDDD:BB:DD.F",
             i, d->pci_bus_id);
    }
    for (int j = 0; j < i; j++) {
      if (d->device_handle != NULL) {
        EXPECT(R_HANDLES, d->device_handle != e->dev[j].device_handle,
               "ordinals %d and %d have the same device_handle %p", j, i,
               d->device_handle);
      }
    }
  }
}

static void test_device_fns(conf_env* e) {
  for (int i = 0; i < e->ndev; i++) {
    const SP_Device* d = &e->dev[i];
    if (e->dfns.get_numa_node != NULL) {
      int32_t node = e->dfns.get_numa_node(d);
      EXPECT(R_NUMA, node >= -1, "ordinal %d: get_numa_node returned %d", i,
             (int)node);
    }
    if (e->dfns.get_memory_bandwidth != NULL) {
      int64_t bw = e->dfns.get_memory_bandwidth(d);
      if (i == 0) conf_note("memory bandwidth %lld B/s", (long long)bw);
    }
    if (e->dfns.get_gflops != NULL) {
      double g = e->dfns.get_gflops(d);
      EXPECT(R_GFLOPS, !isnan(g) && !isinf(g),
             "ordinal %d: get_gflops returned %g", i, g);
      if (i == 0) conf_note("gflops %g", g);
    }
  }
}

/* ------------------------------------------------------------ memory */

static SP_AllocatorStats stats_now(conf_env* e, int d, int* ok) {
  /* As CStreamExecutor::GetAllocatorStats. */
  SP_AllocatorStats s = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  *ok = e->se.get_allocator_stats(&e->dev[d], &s) != 0;
  return s;
}

static void test_allocate(conf_env* e) {
  /* TF's Allocate test: opaque + size come back, deallocate gets them. */
  SP_DeviceMemoryBase m = conf_alloc(e, 0, 2 * sizeof(int));
  EXPECT(R_ALLOC_STRUCT, m.struct_size != 0,
         "allocate(8) set SP_DeviceMemoryBase.struct_size to 0");
  EXPECT(R_ALLOCATE, m.opaque != NULL, "allocate(8) returned a NULL opaque");
  EXPECT(R_ALLOCATE, m.size >= 2 * sizeof(int),
         "allocate(8) reported size %llu", (unsigned long long)m.size);
  if (m.size != 2 * sizeof(int)) {
    conf_note("allocate(8) reported size %llu", (unsigned long long)m.size);
  }
  conf_free(e, 0, &m);

  /* Live allocations are distinct. */
  enum { kN = 32 };
  SP_DeviceMemoryBase ms[kN];
  for (int i = 0; i < kN; i++) {
    uint64_t size = (uint64_t)(i * 977 + 1);
    ms[i] = conf_alloc(e, 0, size);
    EXPECT(R_ALLOCATE, ms[i].opaque != NULL,
           "allocate(%llu) returned NULL with %d small allocations live",
           (unsigned long long)size, i);
    for (int j = 0; j < i; j++) {
      if (ms[i].opaque != NULL) {
        EXPECT(R_DISTINCT, ms[i].opaque != ms[j].opaque,
               "allocations %d and %d (both live) returned the same address "
               "%p",
               j, i, ms[i].opaque);
      }
    }
  }
  for (int i = 0; i < kN; i++) conf_free(e, 0, &ms[i]);

  /* TF's DeviceMemAllocator::Free deallocates with the size field 0: the
   * memory must still be released. Visible only through stats that
   * follow allocations. */
  int have_stats, ok;
  SP_AllocatorStats before = stats_now(e, 0, &have_stats);
  SP_DeviceMemoryBase big = conf_alloc(e, 0, 4 * MIB);
  EXPECT(R_ALLOCATE, big.opaque != NULL, "allocate(4 MiB) returned NULL");
  SP_AllocatorStats during = stats_now(e, 0, &ok);
  int tracked = have_stats && ok && big.opaque != NULL &&
                during.bytes_in_use >= before.bytes_in_use + (int64_t)4 * MIB;
  big.size = 0;
  conf_free(e, 0, &big);
  SP_AllocatorStats after = stats_now(e, 0, &ok);
  if (tracked && ok) {
    EXPECT(R_DEALLOC_SIZE0, after.bytes_in_use == before.bytes_in_use,
           "bytes_in_use was %lld before allocate(4 MiB), %lld after it and "
           "%lld after deallocate with size 0",
           (long long)before.bytes_in_use, (long long)during.bytes_in_use,
           (long long)after.bytes_in_use);
  } else {
    conf_note(
        "deallocate with size 0 not checked: the allocator stats do "
        "not follow allocations");
  }

  /* "Deallocation of a nullptr-representative value is permitted." */
  SP_DeviceMemoryBase null_mem = {.struct_size =
                                      SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  e->se.deallocate(D0, &null_mem);
  EXPECT(R_DEALLOC_NULL, 1, "(reached only if deallocate(NULL) returned)");

  /* Size 0: no crash. */
  SP_DeviceMemoryBase z = conf_alloc(e, 0, 0);
  conf_free(e, 0, &z);
  EXPECT(R_ALLOC_ZERO, 1, "(reached only if allocate(0) returned)");
}

static void test_host_memory(conf_env* e) {
  /* TF uses it for pinned staging buffers: host-accessible by definition. */
  enum { kN = 16 };
  void* p[kN];
  for (int i = 0; i < kN; i++) {
    uint64_t size = 4096u * (uint64_t)(i + 1);
    p[i] = e->se.host_memory_allocate(D0, size);
    EXPECT(R_HOST_MEM, p[i] != NULL, "host_memory_allocate(%llu) returned NULL",
           (unsigned long long)size);
    if (p[i] == NULL) continue;
    memset(p[i], i, size);
    EXPECT(R_HOST_MEM, ((unsigned char*)p[i])[size - 1] == (unsigned char)i,
           "host_memory_allocate(%llu): the last byte did not keep the value "
           "written",
           (unsigned long long)size);
    for (int j = 0; j < i; j++) {
      EXPECT(R_HOST_MEM, p[i] != p[j],
             "host allocations %d and %d (both live) share the address %p", j,
             i, p[i]);
    }
  }
  for (int i = 0; i < kN; i++) {
    if (p[i] != NULL) e->se.host_memory_deallocate(D0, p[i]);
  }
  void* big = e->se.host_memory_allocate(D0, 8 * MIB);
  EXPECT(R_HOST_MEM, big != NULL, "host_memory_allocate(8 MiB) returned NULL");
  if (big != NULL) {
    ((char*)big)[0] = 1;
    ((char*)big)[8 * MIB - 1] = 2;
    e->se.host_memory_deallocate(D0, big);
  }
}

static void test_unified_memory(conf_env* e) {
  if (!e->platform.supports_unified_memory) {
    conf_skip("supports_unified_memory is 0");
    return;
  }
  void* p = e->se.unified_memory_allocate(D0, 4096);
  EXPECT(R_UNIFIED, p != NULL, "unified_memory_allocate(4096) returned NULL");
  if (p != NULL) {
    memset(p, 7, 4096);
    e->se.unified_memory_deallocate(D0, p);
  }
}

/* The four counters of s, for messages. */
static void stats_text(const SP_AllocatorStats* s, char* buf, size_t n) {
  snprintf(buf, n,
           "bytes_in_use %lld, peak_bytes_in_use %lld, largest_alloc_size "
           "%lld, num_allocs %lld",
           (long long)s->bytes_in_use, (long long)s->peak_bytes_in_use,
           (long long)s->largest_alloc_size, (long long)s->num_allocs);
}

/* `when` says which call the stats came from ("before allocating"). */
static void check_stats_sane(const SP_AllocatorStats* s, const char* when) {
  EXPECT(R_STATS_CONSISTENT, s->struct_size != 0,
         "get_allocator_stats (%s) set struct_size to 0", when);
  EXPECT(R_STATS_CONSISTENT, s->bytes_in_use >= 0, "bytes_in_use %lld (%s)",
         (long long)s->bytes_in_use, when);
  EXPECT(R_STATS_CONSISTENT, s->num_allocs >= 0, "num_allocs %lld (%s)",
         (long long)s->num_allocs, when);
  EXPECT(R_STATS_CONSISTENT, s->peak_bytes_in_use >= s->bytes_in_use,
         "peak_bytes_in_use %lld below bytes_in_use %lld (%s)",
         (long long)s->peak_bytes_in_use, (long long)s->bytes_in_use, when);
  EXPECT(R_STATS_CONSISTENT, s->largest_alloc_size >= 0,
         "largest_alloc_size %lld (%s)", (long long)s->largest_alloc_size,
         when);
  if (s->has_bytes_limit) {
    EXPECT(R_STATS_CONSISTENT, s->bytes_limit > 0,
           "has_bytes_limit with bytes_limit %lld (%s)",
           (long long)s->bytes_limit, when);
    EXPECT(R_STATS_CONSISTENT, s->bytes_in_use <= s->bytes_limit,
           "bytes_in_use %lld above bytes_limit %lld (%s)",
           (long long)s->bytes_in_use, (long long)s->bytes_limit, when);
  }
}

static void test_allocator_stats(conf_env* e) {
  SP_DeviceMemoryBase m = {0};
  int ok;
  SP_AllocatorStats s0 = stats_now(e, 0, &ok);
  int have = EXPECT(R_STATS_AVAILABLE, ok,
                    "get_allocator_stats returned false (TF reports no stats "
                    "for the device)");
  if (have) check_stats_sane(&s0, "before allocating");

  m = conf_alloc(e, 0, MIB);
  ENSURE(R_ALLOCATE, m.opaque != NULL, "allocate(1 MiB) returned NULL");
  SP_AllocatorStats s1 = {0};
  if (have) {
    s1 = stats_now(e, 0, &ok);
    have = EXPECT(R_STATS_AVAILABLE, ok,
                  "get_allocator_stats returned true, then false after "
                  "allocate(1 MiB)");
  }
  if (have) {
    char was[160], now[160];
    check_stats_sane(&s1, "after allocate(1 MiB)");
    stats_text(&s0, was, sizeof(was));
    stats_text(&s1, now, sizeof(now));
    EXPECT(R_STATS_TRACK, s1.bytes_in_use >= s0.bytes_in_use + (int64_t)MIB,
           "bytes_in_use grew by %lld, not by 1 MiB, when allocate(1 MiB) "
           "succeeded (before: %s; after: %s)",
           (long long)(s1.bytes_in_use - s0.bytes_in_use), was, now);
    EXPECT(R_STATS_TRACK, s1.num_allocs >= s0.num_allocs + 1,
           "num_allocs did not grow when allocate(1 MiB) succeeded (before: "
           "%s; after: %s)",
           was, now);
    EXPECT(R_STATS_TRACK,
           s1.peak_bytes_in_use >= s0.bytes_in_use + (int64_t)MIB,
           "peak_bytes_in_use is below the bytes in use once allocate(1 MiB) "
           "succeeded (before: %s; after: %s)",
           was, now);
    EXPECT(R_STATS_TRACK, s1.largest_alloc_size >= (int64_t)MIB,
           "largest_alloc_size is below 1 MiB after allocate(1 MiB) (after: "
           "%s)",
           now);
  }

  int64_t free1 = -1, total1 = -1;
  int usage1 =
      EXPECT(R_MEM_USAGE, e->se.device_memory_usage(D0, &free1, &total1),
             "device_memory_usage returned false (1 MiB allocated)");
  conf_free(e, 0, &m);

  if (have) {
    SP_AllocatorStats s2 = stats_now(e, 0, &ok);
    have = EXPECT(R_STATS_AVAILABLE, ok,
                  "get_allocator_stats returned true, then false after "
                  "deallocate");
    if (have) {
      check_stats_sane(&s2, "after deallocate");
      char was[160], now[160];
      stats_text(&s1, was, sizeof(was));
      stats_text(&s2, now, sizeof(now));
      EXPECT(R_STATS_TRACK, s2.bytes_in_use <= s1.bytes_in_use - (int64_t)MIB,
             "bytes_in_use fell by %lld, not by 1 MiB, when the 1 MiB "
             "allocation was deallocated (before: %s; after: %s)",
             (long long)(s1.bytes_in_use - s2.bytes_in_use), was, now);
      EXPECT(R_STATS_TRACK, s2.peak_bytes_in_use >= s1.peak_bytes_in_use,
             "peak_bytes_in_use fell when memory was deallocated (before: "
             "%s; after: %s)",
             was, now);
      s1 = s2;
    }
  }

  int64_t free2 = -1, total2 = -1;
  ENSURE(R_MEM_USAGE, e->se.device_memory_usage(D0, &free2, &total2),
         "device_memory_usage returned false");
  EXPECT(R_MEM_VALUES, total2 > 0, "device_memory_usage: total %lld",
         (long long)total2);
  EXPECT(R_MEM_VALUES, free2 >= 0 && free2 <= total2,
         "device_memory_usage: free %lld, total %lld", (long long)free2,
         (long long)total2);
  if (usage1) {
    EXPECT(R_MEM_VALUES, total1 == total2,
           "device_memory_usage: total %lld with 1 MiB allocated, %lld after "
           "it was freed",
           (long long)total1, (long long)total2);
    EXPECT(R_MEM_VALUES, free1 <= free2,
           "device_memory_usage: free %lld with 1 MiB allocated, %lld after "
           "it was freed",
           (long long)free1, (long long)free2);
  }
  if (have && s1.has_bytes_limit) {
    EXPECT(R_STATS_CONSISTENT, s1.bytes_limit <= total2,
           "bytes_limit %lld above device_memory_usage's total %lld",
           (long long)s1.bytes_limit, (long long)total2);
  }
out:
  if (m.opaque != NULL) conf_free(e, 0, &m);
}

/* ------------------------------------------------------------ streams */

static void test_streams(conf_env* e) {
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  if (a == NULL || b == NULL) goto out; /* conf_stream_new checked it */
  EXPECT(R_STREAMS_DISTINCT, a != b,
         "create_stream returned the same handle %p twice", (void*)a);
  /* A fresh stream is OK (Stream::RefreshStatus). */
  e->se.get_stream_status(D0, a, conf_st(e));
  EXPECT_OK(R_STREAM_STATUS_OK, e->st, "get_stream_status(fresh stream)");
  e->se.get_stream_status(D0, b, conf_st(e));
  EXPECT_OK(R_STREAM_STATUS_OK, e->st, "get_stream_status(fresh stream)");
  /* An idle stream is done at once. */
  TF_Code c = conf_sync(e, 0, a);
  EXPECT(R_STREAM_SYNC, c == TF_OK, "waiting for an idle stream returned %s",
         conf_code_name(c));
out:
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
}

/* Entries of a /proc directory (not "." and ".."), or -1. */
static int count_entries(const char* path) {
  DIR* d = opendir(path);
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent* de = readdir(d); de != NULL; de = readdir(d)) {
    if (de->d_name[0] != '.') n++;
  }
  closedir(d);
  return n;
}

/* Destroying streams and events releases their threads and descriptors
 * (TF 2.21 keeps its streams and pools its events; other callers create and
 * destroy them, see the rule). The baseline is taken after one stream and one
 * event lived and died, so a plugin that starts a device-wide pool on first use
 * is not blamed; a plugin that retires threads asynchronously gets up to
 * conf_safety_ms() to do it. */
static void test_leaks(conf_env* e) {
  enum { kStreams = 32, kEvents = 256 };
  SP_Stream w = conf_stream_new(e, 0);
  if (w == NULL) return;
  conf_stream_free(e, 0, w);
  SP_Event wev = NULL;
  e->se.create_event(D0, &wev, conf_st(e));
  if (!EXPECT_OK(R_EVENT_CREATE, e->st, "create_event")) return;
  if (wev != NULL) e->se.destroy_event(D0, wev);

  const int threads0 = count_entries("/proc/self/task");
  const int fds0 = count_entries("/proc/self/fd");
  if (threads0 < 0 || fds0 < 0) {
    conf_skip("/proc/self/task or /proc/self/fd is not readable");
  }
  int streams = 0, events = 0;
  for (; streams < kStreams; streams++) {
    SP_Stream s = conf_stream_new(e, 0);
    if (s == NULL) break;
    conf_stream_free(e, 0, s); /* as ~CStream: wait, then destroy */
  }
  /* One check for the loop: 256 identical passes say nothing more. */
  TF_Code code = TF_OK;
  SP_Event x = NULL;
  for (; events < kEvents; events++) {
    x = NULL;
    e->se.create_event(D0, &x, conf_st(e));
    code = conf_status_code(e->st);
    if (code != TF_OK || x == NULL) break;
    e->se.destroy_event(D0, x);
  }
  EXPECT(R_EVENT_CREATE, events == kEvents,
         "create_event #%d (each earlier one destroyed) returned %s%s%s",
         events + 1, conf_code_name(code), code == TF_OK ? "" : ": ",
         code == TF_OK ? " and left the event NULL" : conf_status_msg(e->st));
  if (threads0 < 0 || fds0 < 0) return;

  const uint64_t t0 = conf_now_ns();
  const uint64_t deadline = t0 + (uint64_t)conf_safety_ms() * 1000000u;
  int threads, fds;
  for (;;) {
    threads = count_entries("/proc/self/task");
    fds = count_entries("/proc/self/fd");
    if ((threads <= threads0 && fds <= fds0) || conf_now_ns() >= deadline) {
      break;
    }
    conf_sleep_ms(10);
  }
  const long waited_ms = (long)((conf_now_ns() - t0) / 1000000u);
  EXPECT(R_DESTROY_RELEASES, threads <= threads0,
         "%d threads after creating and destroying %d streams and %d events, "
         "%d before (waited %ld ms for them to end): destroy_stream or "
         "destroy_event leaves threads running",
         threads, streams, events, threads0, waited_ms);
  EXPECT(R_DESTROY_RELEASES, fds <= fds0,
         "%d file descriptors leaked: %d open after creating and destroying "
         "%d streams and %d events, %d before (waited %ld ms)",
         fds - fds0, fds, streams, events, fds0, waited_ms);
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
  if (a == NULL || b == NULL || !generic_callbacks_run(e, a)) goto out;
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.create_stream_dependency(D0, b, a, conf_st(e));
  ENSURE_OK(R_DEP_ORDER, e->st, "create_stream_dependency");
  ENSURE(R_NO_BLOCK, conf_probe_get(&pa).ran == 0,
         "create_stream_dependency returned only after the work queued on "
         "the other stream had run (the harness released it after %d ms)",
         conf_safety_ms());
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &pa2, 1, 0, TF_OK, NULL),
         "host_callback returned false");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL),
         "host_callback returned false");

  conf_sleep_ms(SETTLE_MS);
  EXPECT(R_DEP_ORDER, conf_probe_get(&pb).ran == 0,
         "a host callback enqueued on the dependent stream after "
         "create_stream_dependency ran while the work enqueued on the other "
         "stream before it was held at a gate");
  /* Release a's first item only; b must then finish while a is still held
   * at gate 1 (if it does not, the wait gives up and `out` opens gate 1). */
  conf_gate_open(0);
  EXPECT(R_DEP_SNAPSHOT, conf_probe_wait_ran(&pb, conf_safety_ms()),
         "the dependent stream's work did not run within %d ms while only "
         "work enqueued on the other stream after create_stream_dependency "
         "was held: it waits for later work too",
         conf_safety_ms());
  conf_probe ra = conf_probe_get(&pa), ra2 = conf_probe_get(&pa2),
             rb = conf_probe_get(&pb);
  EXPECT(R_DEP_ORDER, ra.ran == 1,
         "the dependent stream's work ran while the work it depends on had "
         "run %d times",
         ra.ran);
  if (rb.ran) {
    EXPECT(R_DEP_ORDER, ra.order < rb.order,
           "the dependent stream's work finished (#%d) before the work it "
           "depends on (#%d)",
           rb.order, ra.order);
  }
  EXPECT(R_DEP_SNAPSHOT, ra2.ran == 0,
         "work held at a closed gate ran %d times (the gate was bypassed)",
         ra2.ran);
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
  SE_EventStatus st;
  SP_Stream a = conf_stream_new(e, 0);
  SP_Stream b = conf_stream_new(e, 0);
  if (a == NULL || b == NULL) goto out;
  e->se.create_event(D0, &ev, conf_st(e));
  ENSURE_OK(R_EVENT_CREATE, e->st, "create_event");
  ENSURE(R_EVENT_CREATE, ev != NULL,
         "create_event returned OK and left the event NULL");
  if (!generic_callbacks_run(e, a)) goto out;
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_STATUS, st == SE_EVENT_COMPLETE || st == SE_EVENT_PENDING,
         "get_event_status of a never-recorded event returned %s (%d)",
         generic_event_status_name(st), (int)st);

  /* Waiting for a never-recorded event waits for nothing (as in CUDA). */
  e->se.wait_for_event(D0, a, ev, conf_st(e));
  EXPECT_OK(R_WAIT_UNRECORDED, e->st, "wait_for_event(never recorded)");
  TF_Code c = conf_sync(e, 0, a);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after wait_for_event(never recorded) returned "
         "%s",
         conf_code_name(c));

  /* Recorded behind a closed gate: pending until the gate opens. */
  safety = conf_gate_open_later(0, conf_safety_ms());
  have_safety = 1;
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.record_event(D0, a, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "record_event");
  ENSURE(R_NO_BLOCK, conf_probe_get(&pa).ran == 0,
         "record_event returned only after the work queued ahead of it had "
         "run (the harness released it after %d ms)",
         conf_safety_ms());
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_PENDING, st == SE_EVENT_PENDING,
         "get_event_status returned %s while the work recorded before the "
         "event was held at a gate",
         generic_event_status_name(st));
  /* Stream::WaitFor(Event*): b's later work waits for the event. */
  e->se.wait_for_event(D0, b, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "wait_for_event");
  ENSURE(R_NO_BLOCK, conf_probe_get(&pa).ran == 0,
         "wait_for_event returned only after the event completed (the "
         "harness released its work after %d ms)",
         conf_safety_ms());
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL),
         "host_callback returned false");
  conf_sleep_ms(SETTLE_MS);
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_PENDING, st == SE_EVENT_PENDING,
         "get_event_status returned %s %d ms after record_event while the "
         "work recorded before the event was held at a gate",
         generic_event_status_name(st), SETTLE_MS);
  EXPECT(R_EVENT_PENDING, conf_probe_get(&pb).ran == 0,
         "a host callback enqueued behind wait_for_event ran before the "
         "event could complete: the work recorded before the event was "
         "held at a gate");

  conf_gate_open(0);
  e->se.block_host_for_event(D0, ev, conf_st(e));
  EXPECT_OK(R_STREAM_SYNC, e->st, "block_host_for_event");
  EXPECT(R_EVENT_PENDING, conf_probe_get(&pa).ran == 1,
         "block_host_for_event returned as if the event were complete "
         "before the work recorded ahead of it had run");
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_COMPLETES, st == SE_EVENT_COMPLETE,
         "get_event_status returned %s after block_host_for_event returned",
         generic_event_status_name(st));
  c = conf_sync(e, 0, b);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for the stream that waited for the event returned %s",
         conf_code_name(c));
  conf_probe ra = conf_probe_get(&pa), rb = conf_probe_get(&pb);
  EXPECT(R_STREAM_SYNC, rb.ran == 1,
         "the stream reported done while a host callback queued on it had "
         "run %d times",
         rb.ran);
  if (ra.ran && rb.ran) {
    EXPECT(R_EVENT_PENDING, ra.order < rb.order,
           "the host callback behind wait_for_event finished (#%d) before the "
           "work recorded ahead of the event (#%d): the event completed "
           "early",
           rb.order, ra.order);
  }

  /* TF reuses events: record again on an idle stream. */
  e->se.record_event(D0, b, ev, conf_st(e));
  EXPECT_OK(R_EVENT_RECORD, e->st, "record_event (the same event again)");
  e->se.block_host_for_event(D0, ev, conf_st(e));
  EXPECT_OK(R_STREAM_SYNC, e->st, "block_host_for_event (recorded again)");
  st = e->se.get_event_status(D0, ev);
  EXPECT(R_EVENT_REUSE, st == SE_EVENT_COMPLETE,
         "an event recorded a second time on an idle stream reports %s after "
         "block_host_for_event",
         generic_event_status_name(st));
out:
  conf_gates_open_all();
  if (have_safety) conf_join_later(safety);
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
  if (ev != NULL) e->se.destroy_event(D0, ev);
}

/* ------------------------------------------------------------ list */

const harness_test conf_generic_tests[] = {
    {"harness.type_regex", test_type_regex, CONF_DEVICELESS},
    {"generic.device", test_device, 0},
    {"generic.device_fns", test_device_fns, 0},
    {"generic.allocate", test_allocate, 0},
    {"generic.host_memory", test_host_memory, 0},
    {"generic.unified_memory", test_unified_memory, 0},
    {"generic.allocator_stats", test_allocator_stats, 0},
    {"generic.streams", test_streams, 0},
    {"generic.leaks", test_leaks, 0},
    {"generic.stream_dependency", test_stream_dependency, 0},
    {"generic.events", test_events, 0},
    {NULL, NULL, 0},
};
