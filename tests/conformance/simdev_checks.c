/*
 * simdev_checks.c - checks that need simdev-specific knowledge (--simdev).
 *
 * What simdev promises beyond the header (src/device_sim/sim.h): platform
 * name and device type "SIMDEV"; device memory is a region of
 * SIMDEV_MEMORY_MB MiB (default 2048) reported as the allocator's limit and
 * as device_memory_usage's total; allocations are 64-byte aligned,
 * host-addressable (except with SIMDEV_DISCRETE=1, where a host access
 * dies of SIGSEGV after simdev's report) and come back NULL (never a
 * crash) when the region is
 * exhausted; SIMDEV_DEVICE_COUNT devices (default 1) with copies between
 * them; a bad SIMDEV_* value makes SE_InitPlugin fail with a message naming
 * the variable; a failed host callback's message reaches get_stream_status;
 * destroy_stream drains queued work; SIMDEV_FAULTS's plan fires in
 * faults.plugin_errors's sequence (generic_faults.c), naming its rule.
 *
 * Environment-dependent cases run in child processes (child.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* plain -std=c11 builds */
#endif
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance.h"

/* Every rule here is simdev's promise (sim.h, README), not TF's: grade
 * simdev, run with --simdev only. */
#define SIMDEV_RULES(X)                                                       \
  X(R_NAMES, "simdev.platform", SIMDEV, "SP_Platform / SP_Device",            \
    "Platform and device type are \"SIMDEV\"; every device has a hardware "   \
    "name, a vendor and a handle; get_numa_node is set (the region is bound " \
    "to a NUMA node when the machine has one).")                              \
  X(R_LIMITS, "simdev.memory_limit", SIMDEV,                                  \
    "get_allocator_stats / device_memory_usage",                              \
    "The device's region of SIMDEV_MEMORY_MB MiB (default 2048) is the "      \
    "allocator's bytes_limit and device_memory_usage's total; free memory "   \
    "lies between 0 and the total.")                                          \
  X(R_ALIGN, "simdev.alignment", SIMDEV, "allocate",                          \
    "Allocations are 64-byte aligned, report the size asked for, and live "   \
    "allocations never overlap.")                                             \
  X(R_HOST_ADDR, "simdev.host_addressable", SIMDEV, "allocate",               \
    "Device memory is host-addressable: TF's DEVICE_DEFAULT kernels read "    \
    "and write simdev buffers directly. With SIMDEV_DISCRETE=1 it is not: "   \
    "a host read dies of SIGSEGV (here in a fork()ed child, which has no "    \
    "device memory, so without simdev's report), and the bytes are "          \
    "still there for the copies.")                                            \
  X(R_OVER_LIMIT, "simdev.over_limit", SIMDEV, "allocate",                    \
    "An allocation above the limit returns NULL (TF turns it into "           \
    "ResourceExhausted), changes no statistics, and the device still works.") \
  X(R_CB_MESSAGE, "simdev.callback_error_message", SIMDEV,                    \
    "get_stream_status",                                                      \
    "A failed host callback's message reaches get_stream_status; work "       \
    "queued after the failure still completes (nobody waiting hangs), and "   \
    "other streams stay OK.")                                                 \
  X(R_DRAINS, "simdev.destroy_drains", SIMDEV, "destroy_stream",              \
    "destroy_stream waits for the stream's queued work (sim.h).")             \
  X(R_EVENT_LIFE, "simdev.event_lifetime", SIMDEV, "destroy_event",           \
    "An event may be destroyed while records and waits naming it are still "  \
    "queued; the waits still order the work (TF's EventMgr frees events on "  \
    "its own schedule).")                                                     \
  X(R_MEMSET32, "simdev.memset32_size", SIMDEV, "memset32",                   \
    "memset32 with a size that is not a multiple of 4 is an error, not a "    \
    "crash and not a silent partial fill.")                                   \
  X(R_ENV, "simdev.bad_setting_rejected", SIMDEV, "SE_InitPlugin",            \
    "A bad SIMDEV_* value makes SE_InitPlugin fail with a message naming "    \
    "the variable (TF then aborts with that message: it is all a user "       \
    "sees).")                                                                 \
  X(R_SMALL, "simdev.small_memory", SIMDEV, "allocate",                       \
    "With SIMDEV_MEMORY_MB=16 the limit is reported, exhaustion is a NULL, "  \
    "most of the region is usable and freed memory coalesces.")               \
  X(R_TWO, "simdev.two_devices", SIMDEV, "memcpy_dtod / wait_for_event",      \
    "SIMDEV_DEVICE_COUNT=2 gives two devices with their own memory; copies "  \
    "go both ways between them and an event of one orders the other's "       \
    "stream.")                                                                \
  X(R_CASE, "simdev.env_case_finishes", SIMDEV, "(a child process)",          \
    "Each environment case's process starts, runs its checks and exits "      \
    "with status 0.")                                                         \
  X(R_F_SIMDEV_FIRES, "faults.simdev_plan_fires", SIMDEV, "SIMDEV_FAULTS",    \
    "With SIMDEV_FAULTS naming alloc, memcpy_h2d, memcpy_d2h or event, the "  \
    "sequence of faults.plugin_errors (8 allocations, 8 copies each way, 8 "  \
    "event records) meets at least one failure of each kind named; where "    \
    "the call has a status (a copy's stream, an event record) its message "   \
    "names SIMDEV_FAULTS and the rule.")
CONF_RULES(conf_simdev_rules, SIMDEV_RULES)

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

static const char* or_null(const char* s) {
  return s != NULL ? s : "(NULL)";
}

/* ------------------------------------------------------------ platform */

static void test_platform(conf_env* e) {
  EXPECT(R_NAMES, e->platform.name && strcmp(e->platform.name, "SIMDEV") == 0,
         "platform name '%s'", or_null(e->platform.name));
  EXPECT(R_NAMES, e->platform.type && strcmp(e->platform.type, "SIMDEV") == 0,
         "device type '%s'", or_null(e->platform.type));
  for (int i = 0; i < e->ndev; i++) {
    const SP_Device* d = &e->dev[i];
    EXPECT(R_NAMES, d->hardware_name != NULL && d->hardware_name[0] != '\0',
           "device %d: hardware_name '%s'", i, or_null(d->hardware_name));
    EXPECT(R_NAMES, d->device_vendor != NULL && d->device_vendor[0] != '\0',
           "device %d: device_vendor '%s'", i, or_null(d->device_vendor));
    EXPECT(R_NAMES, d->device_handle != NULL, "device %d: device_handle NULL",
           i);
  }
  EXPECT(R_NAMES, e->dfns.get_numa_node != NULL, "get_numa_node is NULL");
}

/* Limits: the region size is the allocator's limit and the total. */
static void check_limits(conf_env* e, int d, uint64_t mb) {
  SP_AllocatorStats s = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  if (!EXPECT(R_LIMITS, e->se.get_allocator_stats(&e->dev[d], &s),
              "device %d: get_allocator_stats returned false", d)) {
    return;
  }
  EXPECT_CMP(R_LIMITS, s.has_bytes_limit, ==, 1, "has_bytes_limit");
  EXPECT_CMP(R_LIMITS, s.bytes_limit, ==, mb * MIB, "bytes_limit");
  int64_t free_b = -1, total_b = -1;
  if (!EXPECT(R_LIMITS,
              e->se.device_memory_usage(&e->dev[d], &free_b, &total_b),
              "device %d: device_memory_usage returned false", d)) {
    return;
  }
  EXPECT_CMP(R_LIMITS, total_b, ==, mb * MIB, "device_memory_usage total");
  EXPECT_CMP(R_LIMITS, free_b, <=, total_b, "device_memory_usage free");
  EXPECT_CMP(R_LIMITS, free_b, >=, 0, "device_memory_usage free");
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
    if (!EXPECT(R_ALLOCATE, m[i].opaque != NULL, "allocate(%llu) gave NULL",
                (unsigned long long)sizes[i])) {
      continue;
    }
    EXPECT(R_ALIGN, (uintptr_t)m[i].opaque % SIMDEV_ALIGN == 0,
           "allocate(%llu) at %p", (unsigned long long)sizes[i], m[i].opaque);
    EXPECT_CMP(R_ALIGN, m[i].size, ==, sizes[i], "reported size");
  }
  /* Device addresses are real addresses: live allocations do not overlap. */
  for (int i = 0; i < kN; i++) {
    for (int j = 0; j < i; j++) {
      if (m[i].opaque == NULL || m[j].opaque == NULL) continue;
      uintptr_t a = (uintptr_t)m[i].opaque, b = (uintptr_t)m[j].opaque;
      EXPECT(R_ALIGN, a + sizes[i] <= b || b + sizes[j] <= a,
             "allocations of %llu and %llu bytes overlap (%p, %p)",
             (unsigned long long)sizes[i], (unsigned long long)sizes[j],
             m[i].opaque, m[j].opaque);
    }
  }
  for (int i = 0; i < kN; i++) conf_free(e, 0, &m[i]);
}

/* TF's DEVICE_DEFAULT kernels read and write simdev buffers directly. */
/* SIMDEV_DISCRETE=1: a forked copy of this process reads the device
 * pointer with host code and must die of SIGSEGV (its stderr is read here
 * through a pipe; its stdout, where this harness's crash handler writes,
 * goes to /dev/null). The read happens in the child only, so this test
 * process carries on; the child does nothing but the read. A fork()ed
 * child has no discrete device memory at all (device_sim maps it
 * MADV_DONTFORK and the child forgets the regions), so simdev writes no
 * report there: the report itself is unit.discrete's to test. The bytes
 * are still the device's: a copy back returns them. */
static void check_discrete_read(conf_env* e, SP_DeviceMemoryBase* d,
                                const unsigned char* src, size_t n) {
  unsigned char* back = NULL;
  int fds[2];
  ENSURE(R_HOST_ADDR, pipe(fds) == 0, "pipe() failed");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    int nul = open("/dev/null", O_WRONLY);
    if (nul >= 0) dup2(nul, STDOUT_FILENO);
    volatile unsigned char c = *(volatile unsigned char*)d->opaque;
    (void)c;
    _exit(0);
  }
  close(fds[1]);
  char text[8192];
  size_t got = 0;
  ssize_t r;
  while (pid > 0 && got < sizeof(text) - 1 &&
         (r = read(fds[0], text + got, sizeof(text) - 1 - got)) > 0)
    got += (size_t)r;
  text[got] = '\0';
  close(fds[0]);
  int status = 0;
  ENSURE(R_HOST_ADDR, pid > 0 && waitpid(pid, &status, 0) == pid,
         "fork/waitpid failed");
  EXPECT(R_HOST_ADDR, WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
         "with SIMDEV_DISCRETE=1 a host read of device memory did not die of "
         "SIGSEGV (status %#x)",
         status);
  EXPECT(R_HOST_ADDR,
         strstr(text, "simdev: host access to device memory") == NULL,
         "a fork()ed child, which has no device memory, reported an access "
         "to it: %.300s",
         text);
  back = malloc(n);
  ENSURE(R_HOST_ADDR, back != NULL, "out of host memory");
  e->se.sync_memcpy_dtoh(D0, back, d, n, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "sync_memcpy_dtoh");
  EXPECT(R_HOST_ADDR, memcmp(back, src, n) == 0,
         "a copy back returned other bytes than were copied in");
out:
  free(back);
}

static void test_host_addressable(conf_env* e) {
  enum { kN = 4096 };
  unsigned char src[kN];
  SP_DeviceMemoryBase d = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, d.opaque != NULL, "allocate(%d) gave NULL", kN);
  conf_fill(src, kN, 9);
  e->se.sync_memcpy_htod(D0, &d, src, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "sync_memcpy_htod");
  const char* discrete = getenv("SIMDEV_DISCRETE");
  if (discrete != NULL && strcmp(discrete, "1") == 0) {
    check_discrete_read(e, &d, src, kN);
    goto out;
  }
  EXPECT(R_HOST_ADDR, memcmp(d.opaque, src, kN) == 0,
         "the bytes at the device pointer differ from what was copied in");
out:
  if (d.opaque != NULL) conf_free(e, 0, &d);
}

static void test_over_limit(conf_env* e) {
  uint64_t limit = expected_memory_mb() * MIB;
  SP_AllocatorStats s0 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  SP_AllocatorStats s1 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  ENSURE(R_LIMITS, e->se.get_allocator_stats(D0, &s0),
         "get_allocator_stats returned false");
  const uint64_t sizes[] = {limit + MIB, limit + 1, 2 * limit, UINT64_MAX / 2,
                            UINT64_MAX};
  for (int i = 0; i < 5; i++) {
    SP_DeviceMemoryBase m = conf_alloc(e, 0, sizes[i]);
    EXPECT(R_OVER_LIMIT, m.opaque == NULL,
           "allocate(%llu) above a %llu-byte limit returned memory",
           (unsigned long long)sizes[i], (unsigned long long)limit);
    if (m.opaque != NULL) conf_free(e, 0, &m);
  }
  ENSURE(R_LIMITS, e->se.get_allocator_stats(D0, &s1),
         "get_allocator_stats returned false");
  EXPECT_CMP(R_OVER_LIMIT, s1.bytes_in_use, ==, s0.bytes_in_use,
             "bytes_in_use after failed allocations");
  EXPECT_CMP(R_OVER_LIMIT, s1.num_allocs, ==, s0.num_allocs,
             "num_allocs after failed allocations");
  /* The device still works. */
  SP_DeviceMemoryBase small = conf_alloc(e, 0, 4096);
  EXPECT(R_OVER_LIMIT, small.opaque != NULL,
         "allocate(4096) after the failed ones gave NULL");
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
  ENSURE(R_STREAM_CREATE, s != NULL && other != NULL, "no streams");
  ENSURE(R_HOST_CB_TRUE,
         conf_enqueue_probe(e, 0, s, &bad, -1, 0, TF_INTERNAL, kMsg),
         "host_callback returned false");
  /* Work after the failure: host callbacks and events still complete, so
   * nobody waiting on them hangs. */
  ENSURE(R_HOST_CB_TRUE,
         conf_enqueue_probe(e, 0, s, &later, -1, 0, TF_OK, NULL),
         "host_callback after a failed callback returned false");
  e->se.create_event(D0, &ev, conf_st(e));
  ENSURE_OK(R_EVENT_CREATE, e->st, "create_event");
  e->se.record_event(D0, s, ev, conf_st(e));
  ENSURE_OK(R_CB_MESSAGE, e->st, "record_event on a failed stream");
  e->se.block_host_for_event(D0, ev, conf_st(e));
  EXPECT(R_CB_MESSAGE, conf_probe_wait_ran(&later, conf_safety_ms()),
         "a host callback after a failed one never ran");
  SE_EventStatus es = e->se.get_event_status(D0, ev);
  EXPECT(R_CB_MESSAGE, es == SE_EVENT_COMPLETE || es == SE_EVENT_ERROR,
         "event recorded after the failure: status %d", (int)es);

  e->se.get_stream_status(D0, s, conf_st(e));
  EXPECT(R_CB_MESSAGE, conf_status_code(e->st) != TF_OK,
         "get_stream_status is OK after a failed callback");
  EXPECT(R_CB_MESSAGE, contains(conf_status_msg(e->st), kMsg),
         "stream status message '%s' lacks the callback's",
         conf_status_msg(e->st));
  /* Streams fail independently. */
  e->se.get_stream_status(D0, other, conf_st(e));
  EXPECT_OK(R_CB_MESSAGE, e->st, "get_stream_status(other stream)");
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
  ENSURE(R_STREAM_CREATE, s != NULL && src != NULL && dst != NULL,
         "no stream (or no host memory)");
  d = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, d.opaque != NULL, "allocate(%d) gave NULL", kN);
  conf_fill(src, kN, 11);
  e->se.sync_memcpy_htod(D0, &d, src, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "sync_memcpy_htod");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, s, &p, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.memcpy_dtoh(D0, s, dst, &d, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  e->se.destroy_stream(D0, s);
  s = NULL;
  EXPECT_CMP(R_DRAINS, conf_probe_get(&p).ran, ==, 1,
             "runs of a callback queued before destroy_stream");
  EXPECT(R_DRAINS, memcmp(dst, src, kN) == 0,
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
  ENSURE(R_STREAM_CREATE, a != NULL && b != NULL, "no streams");
  e->se.create_event(D0, &ev, conf_st(e));
  ENSURE_OK(R_EVENT_CREATE, e->st, "create_event");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, a, &pa, 0, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.record_event(D0, a, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "record_event");
  e->se.wait_for_event(D0, b, ev, conf_st(e));
  ENSURE_OK(R_EVENT_RECORD, e->st, "wait_for_event");
  ENSURE(R_HOST_CB_TRUE, conf_enqueue_probe(e, 0, b, &pb, -1, 0, TF_OK, NULL),
         "host_callback returned false");
  e->se.destroy_event(D0, ev); /* record and wait still queued */
  ev = NULL;
  conf_sleep_ms(10);
  /* The wait on b is behind a's gate, still closed: pb cannot have run. */
  EXPECT_CMP(R_EVENT_LIFE, conf_probe_get(&pb).ran, ==, 0,
             "runs of work behind a wait on a destroyed event, before the "
             "event's work ran");
  conf_gate_open(0);
  EXPECT_CMP(R_STREAM_SYNC, conf_sync(e, 0, b), ==, TF_OK, "sync of stream b");
  EXPECT_CMP(R_EVENT_LIFE, conf_probe_get(&pb).ran, ==, 1,
             "runs of work behind the wait");
  EXPECT_CMP(R_EVENT_LIFE, conf_probe_get(&pa).order, <,
             conf_probe_get(&pb).order,
             "completion order of the recorded work (a) and the waiting "
             "work (b)");
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
  ENSURE(R_ALLOCATE, s != NULL && d.opaque != NULL,
         "no stream or allocate(%d) gave NULL", kN);
  memset(host, 0xAB, kN);
  e->se.sync_memcpy_htod(D0, &d, host, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "sync_memcpy_htod");
  e->se.memset32(D0, s, &d, 0x01020304u, 6, conf_st(e));
  TF_Code enqueue = conf_status_code(e->st);
  TF_Code done = conf_sync(e, 0, s);
  e->se.get_stream_status(D0, s, conf_st(e));
  TF_Code later = conf_status_code(e->st);
  EXPECT(R_MEMSET32, enqueue != TF_OK || done != TF_OK || later != TF_OK,
         "memset32(size 6) was accepted: enqueue, sync and stream status "
         "all OK");
out:
  conf_stream_free(e, 0, s);
  if (d.opaque != NULL) conf_free(e, 0, &d);
}

/* ------------------------------------------------------------ faults */

/* Whether plan (SIMDEV_FAULTS) has a rule of `kind` ("alloc" matches
 * "alloc:nth=3" only) and, if msg is not NULL, whether msg names
 * SIMDEV_FAULTS and one of those rules as written. */
static int plan_rule(const char* plan, const char* kind, const char* msg) {
  if (msg != NULL && !contains(msg, "SIMDEV_FAULTS")) return 0;
  size_t klen = strlen(kind);
  for (const char* s = plan; *s != '\0';) {
    const char* comma = strchr(s, ',');
    size_t n = comma ? (size_t)(comma - s) : strlen(s);
    char rule[128];
    snprintf(rule, sizeof(rule), "%.*s", (int)(n < 127 ? n : 127), s);
    if (n > klen && strncmp(s, kind, klen) == 0 && s[klen] == ':' &&
        (msg == NULL || contains(msg, rule)))
      return 1;
    s = comma ? comma + 1 : s + n;
  }
  return 0;
}

/* faults.plugin_errors's sequence (generic_faults.c holds its failures to
 * TF's contracts) under the SIMDEV_FAULTS of the run's environment, and
 * what simdev promises on top: each kind the plan names fails, saying so
 * with the rule. ctest conformance.faults.simdev* set the plans. */
static void test_faults_plan_fires(conf_env* e) {
  const char* plan = getenv("SIMDEV_FAULTS");
  if (plan == NULL || plan[0] == '\0') {
    conf_skip(
        "SIMDEV_FAULTS is not set: no plan to fire (ctest "
        "conformance.faults.simdev sets one)");
    return;
  }
  /* The plan counts from the process's start: only in a process of its
   * own is this test's sequence the one it sees. */
  if (e->opt->no_fork) {
    conf_skip("--no-fork: SIMDEV_FAULTS's counts started before this test");
    return;
  }
  conf_faults_seen s;
  conf_faults_sequence(e, &s);
  if (plan_rule(plan, "alloc", NULL))
    EXPECT(R_F_SIMDEV_FIRES, s.alloc_failed > 0,
           "SIMDEV_FAULTS=%s, and none of 8 allocations failed", plan);
  if (plan_rule(plan, "event", NULL))
    EXPECT(R_F_SIMDEV_FIRES,
           s.record_failed > 0 && plan_rule(plan, "event", s.record_msg),
           "SIMDEV_FAULTS=%s, and %d record_event failed (first message: "
           "\"%s\")",
           plan, s.record_failed, s.record_msg);
  static const char* const copy_kind[2] = {"memcpy_h2d", "memcpy_d2h"};
  for (int k = 0; k < 2; k++) {
    if (!plan_rule(plan, copy_kind[k], NULL)) continue;
    EXPECT(R_F_SIMDEV_FIRES,
           s.status[k] != TF_OK && plan_rule(plan, copy_kind[k], s.msg[k]),
           "SIMDEV_FAULTS=%s, and the stream of the %s copies says %s: "
           "\"%s\"",
           plan, k == 0 ? "host-to-device" : "device-to-host",
           conf_code_name(s.status[k]), s.msg[k]);
  }
}

/* ------------------------------------------------------------ children */

static void run_child_cases(conf_env* e) {
  for (const conf_child_case* c = conf_child_cases; c->name != NULL; c++) {
    conf_run_child(e, c->name);
  }
}

const harness_test conf_simdev_tests[] = {
    {"simdev.platform", test_platform, 0},
    {"simdev.limits", test_limits, 0},
    {"simdev.alignment", test_alignment, 0},
    {"simdev.host_addressable", test_host_addressable, 0},
    {"simdev.over_limit", test_over_limit, 0},
    {"simdev.callback_error_message", test_callback_error_message, 0},
    {"simdev.destroy_drains", test_destroy_drains, 0},
    {"simdev.event_lifetime", test_event_lifetime, 0},
    {"simdev.memset32_bad_size", test_memset32_bad_size, 0},
    {"simdev.env", run_child_cases, 0},
    /* Named so that --filter faults.plugin_errors selects it too. */
    {"faults.plugin_errors.simdev", test_faults_plan_fires, 0},
    {NULL, NULL, 0},
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
  if (!EXPECT(R_ENV, conf_status_code(e->st) != TF_OK,
              "SE_InitPlugin returned OK with a bad %s", var)) {
    /* Registered after all: release it as ~CPlatform would. */
    if (params.destroy_platform) params.destroy_platform(&platform);
    if (params.destroy_platform_fns) params.destroy_platform_fns(&pfns);
    return 0;
  }
  EXPECT(R_ENV, contains(conf_status_msg(e->st), var),
         "the message does not name %s: '%s'", var, conf_status_msg(e->st));
  conf_note("SE_InitPlugin: %s", conf_status_msg(e->st));
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
  if (!conf_setup(e, 1) ||
      !EXPECT(R_SMALL, e->ndev == 1, "%d devices", e->ndev)) {
    goto out;
  }
  check_limits(e, 0, 16);
  for (; n < kMax; n++) {
    m[n] = conf_alloc(e, 0, MIB);
    if (m[n].opaque == NULL) break;
  }
  EXPECT(R_SMALL, n < kMax,
         "64 allocations of 1 MiB from a 16 MiB device all succeeded");
  EXPECT_CMP(R_SMALL, n, <=, 16, "1 MiB allocations from 16 MiB");
  EXPECT_CMP(R_SMALL, n, >=, 8, "1 MiB allocations from 16 MiB");
  SP_AllocatorStats s = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  EXPECT(R_SMALL, e->se.get_allocator_stats(D0, &s),
         "get_allocator_stats returned false");
  EXPECT_CMP(R_SMALL, s.bytes_in_use, <=, 16 * (int64_t)MIB,
             "bytes_in_use when full");
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
  EXPECT(R_SMALL, big.opaque != NULL,
         "12 MiB from an empty 16 MiB device gave NULL (no coalescing?)");
  if (big.opaque != NULL) conf_free(e, 0, &big);
out:
  conf_teardown(e);
  return 0;
}

/* Ordering across devices: device 1's stream waits for an event recorded
 * on device 0's stream (held at a gate), then reads what device 0 wrote. */
static void cross_device_order(conf_env* e, SP_Stream s0, SP_Stream s1,
                               SP_DeviceMemoryBase* a, SP_DeviceMemoryBase* b,
                               unsigned char* src, size_t n) {
  conf_probe gate;
  SP_Event ev = NULL;
  unsigned char* h = calloc(1, n);
  pthread_t safety = conf_gate_open_later(0, conf_safety_ms());
  conf_fill(src, n, 14);
  e->se.create_event(&e->dev[0], &ev, conf_st(e));
  EXPECT_OK(R_EVENT_CREATE, e->st, "create_event");
  if (h != NULL && ev != NULL &&
      EXPECT(R_HOST_CB_TRUE,
             conf_enqueue_probe(e, 0, s0, &gate, 0, 0, TF_OK, NULL),
             "host_callback returned false")) {
    e->se.memcpy_htod(&e->dev[0], s0, a, src, n, conf_st(e));
    e->se.memcpy_dtod(&e->dev[0], s0, b, a, n, conf_st(e));
    e->se.record_event(&e->dev[0], s0, ev, conf_st(e));
    EXPECT_OK(R_EVENT_RECORD, e->st, "record_event(device 0)");
    e->se.wait_for_event(&e->dev[1], s1, ev, conf_st(e));
    EXPECT_OK(R_EVENT_RECORD, e->st,
              "wait_for_event(device 1 on device 0's event)");
    e->se.memcpy_dtoh(&e->dev[1], s1, h, b, n, conf_st(e));
    conf_sleep_ms(20);
    /* Device 0's stream is held at gate 0: nothing can have been copied. */
    EXPECT(R_TWO, conf_find_not(h, n, 0) == -1,
           "device 1 read before device 0's event completed");
    conf_gate_open(0);
    EXPECT_CMP(R_STREAM_SYNC, conf_sync(e, 1, s1), ==, TF_OK,
               "sync of device 1's stream");
    EXPECT(R_TWO, memcmp(h, src, n) == 0,
           "device 1 read other bytes than device 0 wrote");
  }
  conf_gates_open_all();
  conf_join_later(safety);
  EXPECT_CMP(R_STREAM_SYNC, conf_sync(e, 0, s0), ==, TF_OK,
             "sync of device 0's stream");
  if (ev != NULL) e->se.destroy_event(&e->dev[0], ev);
  free(h);
}

/* SIMDEV_DEVICE_COUNT=2: two devices, copies between them. */
static int child_two_devices(conf_env* e) {
  enum { kN = 256 * 1024 + 3 };
  unsigned char* src = malloc(kN);
  unsigned char* dst = calloc(1, kN);
  SP_DeviceMemoryBase a = {0}, b = {0}, c = {0};
  SP_Stream s0 = NULL, s1 = NULL;
  if (!conf_setup(e, 2)) goto out;
  ENSURE(R_TWO, src && dst, "out of host memory");
  EXPECT_CMP(R_TWO, e->device_count, ==, 2, "get_device_count");
  ENSURE_CMP(R_TWO, e->ndev, ==, 2, "devices created");
  EXPECT_CMP(R_TWO, e->dev[0].ordinal, ==, 0, "ordinal of device 0");
  EXPECT_CMP(R_TWO, e->dev[1].ordinal, ==, 1, "ordinal of device 1");
  EXPECT(R_TWO, e->dev[0].device_handle != e->dev[1].device_handle,
         "both devices have the handle %p", e->dev[0].device_handle);
  if (e->dev[0].hardware_name && e->dev[1].hardware_name) {
    EXPECT(R_TWO, strcmp(e->dev[0].hardware_name, e->dev[1].hardware_name) != 0,
           "both devices are named '%s'", e->dev[0].hardware_name);
  }
  check_limits(e, 1, 64);

  a = conf_alloc(e, 0, kN);
  b = conf_alloc(e, 1, kN);
  c = conf_alloc(e, 0, kN);
  s0 = conf_stream_new(e, 0);
  s1 = conf_stream_new(e, 1);
  ENSURE(R_ALLOCATE, a.opaque && b.opaque && c.opaque && s0 && s1,
         "allocate(%d) on either device or create_stream failed", kN);
  /* Device 1's memory is not device 0's. */
  SP_AllocatorStats st0 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  SP_AllocatorStats st1 = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  EXPECT(R_TWO, e->se.get_allocator_stats(&e->dev[0], &st0),
         "get_allocator_stats(device 0) returned false");
  EXPECT(R_TWO, e->se.get_allocator_stats(&e->dev[1], &st1),
         "get_allocator_stats(device 1) returned false");
  EXPECT_CMP(R_TWO, st0.bytes_in_use, >=, 2 * (int64_t)kN,
             "device 0 bytes_in_use with two buffers");
  EXPECT_CMP(R_TWO, st1.bytes_in_use, >=, (int64_t)kN,
             "device 1 bytes_in_use with one buffer");
  EXPECT_CMP(R_TWO, st1.bytes_in_use, <, 2 * (int64_t)kN,
             "device 1 bytes_in_use with one buffer");

  /* As TF's DeviceToDeviceCopy: the sender's stream, the receiver's buffer.
   * 0 -> 1 on device 0's stream, 1 -> 0 on device 1's stream. */
  conf_fill(src, kN, 13);
  e->se.memcpy_htod(&e->dev[0], s0, &a, src, kN, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_htod");
  e->se.memcpy_dtod(&e->dev[0], s0, &b, &a, kN, conf_st(e));
  EXPECT_OK(R_TWO, e->st, "memcpy_dtod(device 0 -> device 1)");
  EXPECT_CMP(R_STREAM_SYNC, conf_sync(e, 0, s0), ==, TF_OK,
             "sync of device 0's stream");
  e->se.memcpy_dtod(&e->dev[1], s1, &c, &b, kN, conf_st(e));
  EXPECT_OK(R_TWO, e->st, "memcpy_dtod(device 1 -> device 0)");
  e->se.memcpy_dtoh(&e->dev[1], s1, dst, &b, kN, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtoh(device 1)");
  EXPECT_CMP(R_STREAM_SYNC, conf_sync(e, 1, s1), ==, TF_OK,
             "sync of device 1's stream");
  EXPECT(R_TWO, memcmp(dst, src, kN) == 0,
         "device 0 -> device 1 copy: the bytes differ");
  memset(dst, 0, kN);
  e->se.sync_memcpy_dtoh(&e->dev[0], dst, &c, kN, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "sync_memcpy_dtoh");
  EXPECT(R_TWO, memcmp(dst, src, kN) == 0,
         "device 1 -> device 0 copy: the bytes differ");
  cross_device_order(e, s0, s1, &a, &b, src, kN);
  if (e->se.sync_memcpy_dtod != NULL) {
    memset(dst, 0, kN);
    e->se.sync_memcpy_htod(&e->dev[1], &b, dst, kN, conf_st(e));
    e->se.sync_memcpy_dtod(&e->dev[1], &b, &a, kN, conf_st(e));
    EXPECT_OK(R_TWO, e->st, "sync_memcpy_dtod(device 0 -> device 1)");
    e->se.sync_memcpy_dtoh(&e->dev[1], dst, &b, kN, conf_st(e));
    EXPECT(R_TWO, memcmp(dst, src, kN) == 0,
           "sync_memcpy_dtod: the bytes differ");
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
