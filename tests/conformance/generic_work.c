/*
 * generic_work.c - generic checks of copies in all three directions (async
 * and sync) and of mem_zero/memset/memset32; and the copy helpers and rule
 * generic.h declares for the other generic files. Valid for any plugin (see
 * generic.c for the ground rules: gates, the safety net, no check that depends
 * on timing).
 *
 * Set-up copies go through memcpy_htod/memcpy_dtoh on a stream, the path TF
 * uses, not through sync_memcpy_* (which TF 2.21 validates but does not
 * call): a plugin whose synchronous copies are broken still gets its
 * ordering checked.
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "generic.h"

#define GENERIC_WORK_RULES(X)                                                  \
  GENERIC_WORK_SHARED_RULES(X)                                                 \
  X(R_COPY_ZERO, "memcpy.size_zero", RECOMMENDED, "memcpy_htod / memcpy_dtoh", \
    "A zero-byte copy returns OK and does nothing: PluggableDeviceUtil "       \
    "skips the copy for empty tensors, other callers of CStream::Memcpy "      \
    "may not.")                                                                \
  X(R_SYNC_COPY, "sync_memcpy.copies", RECOMMENDED,                            \
    "sync_memcpy_htod / sync_memcpy_dtoh / sync_memcpy_dtod",                  \
    "Synchronous copies return OK with the data in place: "                    \
    "ValidateSPStreamExecutor requires sync_memcpy_htod and "                  \
    "sync_memcpy_dtoh and CStreamExecutor::SynchronousMemcpy forwards to "     \
    "them, but TF 2.21's PluggableDevice runtime does not call them "          \
    "(sync_memcpy_dtod never: there is no synchronous device-to-device "       \
    "copy in StreamExecutor).")                                                \
  X(R_MEMSET_DATA, "memset.writes_bytes", RECOMMENDED,                         \
    "mem_zero / memset / memset32",                                            \
    "mem_zero, memset and memset32 write their value into exactly `size` "     \
    "bytes of the (sub-)buffer and nothing else: ValidateSPStreamExecutor "    \
    "requires all three and CStream::MemZero/Memset32 forward to them, but "   \
    "TF 2.21's PluggableDevice runtime does not call them.")
CONF_RULES_SHARED(conf_generic_work_rules, GENERIC_WORK_RULES)

/* Odd on purpose: no plugin gets away with copying whole words only. */
#define COPY_N (MIB + 13)

long generic_first_diff(const void* a, const void* b, size_t n) {
  const unsigned char* x = a;
  const unsigned char* y = b;
  for (size_t i = 0; i < n; i++) {
    if (x[i] != y[i]) return (long)i;
  }
  return -1;
}

/* Waits for every stream of device 0 without events: block_host_until_done
 * when the plugin has it, else synchronize_all_activity (both wait for the
 * work itself, so they tell an event that completed early from a copy
 * that went wrong). */
static TF_Code wait_without_events(conf_env* e, SP_Stream s) {
  TF_Status* st = conf_st(e);
  if (e->se.block_host_until_done != NULL) {
    e->se.block_host_until_done(D0, s, st);
  } else {
    e->se.synchronize_all_activity(D0, st);
  }
  return conf_status_code(st);
}

int generic_put(conf_env* e, SP_Stream s, SP_DeviceMemoryBase* d,
                const void* src, size_t n) {
  e->se.memcpy_htod(D0, s, d, src, n, conf_st(e));
  if (!EXPECT_OK(R_COPY_OK, e->st, "memcpy_htod")) return 0;
  TF_Code c = conf_sync(e, 0, s);
  return EXPECT(R_STREAM_SYNC, c == TF_OK,
                "waiting for a stream after memcpy_htod returned %s",
                conf_code_name(c));
}

/* ------------------------------------------------------------ copies */

static void test_memcpy_async(conf_env* e) {
  SP_DeviceMemoryBase d1 = {0}, d2 = {0};
  SP_Stream s = conf_stream_new(e, 0);
  /* TF copies from pinned staging memory and from ordinary tensors. */
  unsigned char* src = e->se.host_memory_allocate(D0, COPY_N);
  unsigned char* dst = malloc(COPY_N);
  if (s == NULL || dst == NULL) goto out;
  ENSURE(R_HOST_MEM, src != NULL, "host_memory_allocate(%u) returned NULL",
         (unsigned)COPY_N);
  d1 = conf_alloc(e, 0, COPY_N);
  d2 = conf_alloc(e, 0, COPY_N);
  ENSURE(R_ALLOCATE, d1.opaque != NULL && d2.opaque != NULL,
         "allocate(%u) returned NULL", (unsigned)COPY_N);

  conf_fill(src, COPY_N, 1);
  memset(dst, 0, COPY_N);
  e->se.memcpy_htod(D0, s, &d1, src, COPY_N, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_htod");
  e->se.memcpy_dtod(D0, s, &d2, &d1, COPY_N, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtod");
  e->se.memcpy_dtoh(D0, s, dst, &d2, COPY_N, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  TF_Code c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after three copies returned %s",
         conf_code_name(c));
  long at = generic_first_diff(dst, src, COPY_N);
  EXPECT(R_COPY_DATA, at < 0,
         "host -> device -> device -> host copy of %u bytes: byte %ld "
         "differs",
         (unsigned)COPY_N, at);

  /* Sub-buffers: TF adds byte offsets to opaque (DeviceMemoryBase slices).
   * Completion through TF's event fallback this time. */
  const size_t n = COPY_N - 100;
  conf_fill(src, COPY_N, 2);
  memset(dst, 0, COPY_N);
  SP_DeviceMemoryBase s1 = conf_slice(&d1, 100, n);
  SP_DeviceMemoryBase s2 = conf_slice(&d2, 3, n);
  e->se.memcpy_htod(D0, s, &s1, src + 7, n, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_htod (sub-buffer)");
  e->se.memcpy_dtod(D0, s, &s2, &s1, n, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtod (sub-buffers)");
  e->se.memcpy_dtoh(D0, s, dst, &s2, n, conf_st(e));
  EXPECT_OK(R_COPY_OK, e->st, "memcpy_dtoh (sub-buffer)");
  c = conf_sync_by_event(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "create_event + record_event + block_host_for_event after three "
         "copies returned %s",
         conf_code_name(c));
  at = generic_first_diff(dst, src + 7, n);
  if (at >= 0 && wait_without_events(e, s) == TF_OK &&
      generic_first_diff(dst, src + 7, n) < 0) {
    /* The data was right, only late: the event completed too early. */
    EXPECT(R_EVENT_PENDING, 0,
           "block_host_for_event returned as if the event were complete "
           "before the copies recorded ahead of it had run (byte %ld "
           "arrived only later)",
           at);
  } else {
    EXPECT(R_COPY_DATA, at < 0,
           "copy of %zu bytes through sub-buffers (device offsets 100 and "
           "3): byte %ld differs",
           n, at);
  }

  /* Zero-byte copies happen (empty tensors) and must be harmless. */
  e->se.memcpy_htod(D0, s, &d1, src, 0, conf_st(e));
  EXPECT_OK(R_COPY_ZERO, e->st, "memcpy_htod(size 0)");
  e->se.memcpy_dtoh(D0, s, dst, &d1, 0, conf_st(e));
  EXPECT_OK(R_COPY_ZERO, e->st, "memcpy_dtoh(size 0)");
  c = conf_sync(e, 0, s);
  EXPECT(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after zero-byte copies returned %s",
         conf_code_name(c));
out:
  conf_stream_free(e, 0, s);
  if (d1.opaque != NULL) conf_free(e, 0, &d1);
  if (d2.opaque != NULL) conf_free(e, 0, &d2);
  if (src != NULL) e->se.host_memory_deallocate(D0, src);
  free(dst);
}

static void test_memcpy_sync(conf_env* e) {
  SP_DeviceMemoryBase d1 = {0}, d2 = {0};
  unsigned char* src = malloc(COPY_N);
  unsigned char* dst = malloc(COPY_N);
  if (src == NULL || dst == NULL) goto out;
  d1 = conf_alloc(e, 0, COPY_N);
  d2 = conf_alloc(e, 0, COPY_N);
  ENSURE(R_ALLOCATE, d1.opaque != NULL && d2.opaque != NULL,
         "allocate(%u) returned NULL", (unsigned)COPY_N);
  conf_fill(src, COPY_N, 3);
  memset(dst, 0, COPY_N);

  /* StreamExecutor::SynchronousMemcpy: done when the call returns. */
  e->se.sync_memcpy_htod(D0, &d1, src, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_htod");
  e->se.sync_memcpy_dtoh(D0, dst, &d1, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_dtoh");
  long at = generic_first_diff(dst, src, COPY_N);
  EXPECT(R_SYNC_COPY, at < 0,
         "sync_memcpy_htod then sync_memcpy_dtoh of %u bytes: byte %ld "
         "differs",
         (unsigned)COPY_N, at);
  if (e->se.sync_memcpy_dtod == NULL) {
    conf_note("sync_memcpy_dtod not set (optional; TF 2.21 does not call it)");
    goto out;
  }
  memset(dst, 0, COPY_N);
  e->se.sync_memcpy_dtod(D0, &d2, &d1, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_dtod");
  e->se.sync_memcpy_dtoh(D0, dst, &d2, COPY_N, conf_st(e));
  EXPECT_OK(R_SYNC_COPY, e->st, "sync_memcpy_dtoh");
  at = generic_first_diff(dst, src, COPY_N);
  EXPECT(R_SYNC_COPY, at < 0,
         "sync_memcpy_dtod then sync_memcpy_dtoh of %u bytes: byte %ld "
         "differs",
         (unsigned)COPY_N, at);
out:
  if (d1.opaque != NULL) conf_free(e, 0, &d1);
  if (d2.opaque != NULL) conf_free(e, 0, &d2);
  free(src);
  free(dst);
}

/* One range of the memset test's buffer: [from, from + n) holds `value`. */
static void expect_range(const unsigned char* host, size_t from, size_t n,
                         unsigned char value, const char* what) {
  long at = conf_find_not(host + from, n, value);
  EXPECT(R_MEMSET_DATA, at < 0, "%s: byte %zu is 0x%02x, expected 0x%02x", what,
         from + (size_t)(at < 0 ? 0 : at), at < 0 ? 0 : host[from + at], value);
}

/* mem_zero, memset and memset32 on sub-buffers; sizes are in bytes. */
static void test_memset(conf_env* e) {
  enum { kN = 4096 };
  unsigned char host[kN];
  SP_DeviceMemoryBase d = {0};
  SP_Stream s = conf_stream_new(e, 0);
  if (s == NULL) goto out;
  d = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, d.opaque != NULL, "allocate(%d) returned NULL", kN);
  memset(host, 0xAB, kN);
  if (!generic_put(e, s, &d, host, kN)) goto out;

  SP_DeviceMemoryBase z = conf_slice(&d, 8, 100);
  e->se.mem_zero(D0, s, &z, 100, conf_st(e));
  EXPECT_OK(R_MEMSET_OK, e->st, "mem_zero");
  SP_DeviceMemoryBase m8 = conf_slice(&d, 200, 77);
  e->se.memset(D0, s, &m8, 0x5C, 77, conf_st(e));
  EXPECT_OK(R_MEMSET_DATA, e->st, "memset");
  SP_DeviceMemoryBase m32 = conf_slice(&d, 400, 64);
  e->se.memset32(D0, s, &m32, 0xDEADBEEFu, 64, conf_st(e));
  EXPECT_OK(R_MEMSET_OK, e->st, "memset32");

  /* Wait before reading back, so that a read-back copy that ignores its
   * stream (memcpy.stream_order, graded in generic.ordering) still sees
   * the result here. */
  TF_Code c = conf_sync(e, 0, s);
  ENSURE(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after mem_zero, memset and memset32 returned "
         "%s",
         conf_code_name(c));
  memset(host, 0, kN);
  e->se.memcpy_dtoh(D0, s, host, &d, kN, conf_st(e));
  ENSURE_OK(R_COPY_OK, e->st, "memcpy_dtoh");
  c = conf_sync(e, 0, s);
  ENSURE(R_STREAM_SYNC, c == TF_OK,
         "waiting for a stream after memcpy_dtoh returned %s",
         conf_code_name(c));
  expect_range(host, 0, 8, 0xAB, "bytes before mem_zero's range");
  expect_range(host, 8, 100, 0x00, "mem_zero(100 bytes at offset 8)");
  expect_range(host, 108, 92, 0xAB, "bytes after mem_zero's range");
  expect_range(host, 200, 77, 0x5C, "memset(0x5C, 77 bytes at offset 200)");
  expect_range(host, 277, 123, 0xAB, "bytes after memset's range");
  int bad_word = -1;
  for (int i = 0; i < 16 && bad_word < 0; i++) {
    uint32_t w;
    memcpy(&w, host + 400 + 4 * i, 4);
    if (w != 0xDEADBEEFu) bad_word = i;
  }
  EXPECT(R_MEMSET_DATA, bad_word < 0,
         "memset32(0xDEADBEEF, 64 bytes at offset 400): word %d does not "
         "hold the pattern",
         bad_word);
  /* 64 bytes, not 64 words. */
  expect_range(host, 464, kN - 464, 0xAB,
               "bytes after memset32's 64 bytes (size is in bytes, not "
               "words)");
out:
  conf_stream_free(e, 0, s);
  if (d.opaque != NULL) conf_free(e, 0, &d);
}

/* ------------------------------------------------------------ list */

const harness_test conf_generic_work_tests[] = {
    {"generic.memcpy_async", test_memcpy_async, 0},
    {"generic.memcpy_sync", test_memcpy_sync, 0},
    {"generic.memset", test_memset, 0},
    {NULL, NULL, 0},
};
