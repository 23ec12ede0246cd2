/*
 * test_arena.c - device memory (jemalloc arena over the device region) and
 * host staging memory.
 */
#include <valgrind/memcheck.h>

#include "testutil.h"

#define MiB (1024ull * 1024ull)

static sim_mem_stats stats(sim_device* dev) {
  sim_mem_stats st;
  memset(&st, 0xee, sizeof(st));
  sim_mem_get_stats(dev, &st);
  return st;
}

static int aligned(const void* p) {
  return ((uintptr_t)p % SIM_MEM_ALIGN) == 0;
}

static void fresh_stats(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_mem_stats st = stats(f->dev);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.peak_bytes_in_use, 0);
  assert_int_equal(st.num_allocs, 0);
  assert_int_equal(st.num_frees, 0);
  assert_int_equal(st.largest_alloc, 0);
  assert_int_equal(st.num_failed, 0);
  assert_int_equal(st.bytes_limit, TU_MEMORY_MB * MiB);
  assert_true(st.bytes_reserved <= st.bytes_limit);
  assert_int_equal(sim_host_bytes_in_use(f->dev), 0);
}

static void alignment(void** state) {
  tu_fix* f = (tu_fix*)*state;
  static const uint64_t sizes[] = {
      0,     1,     2,     7,       63,   64,      65,           100,
      127,   128,   255,   1000,    4095, 4096,    4097,         12345,
      16384, 65536, 65537, MiB - 1, MiB,  MiB + 1, 3 * MiB + 17, 8 * MiB};
  void* p[TU_ARRAY_SIZE(sizes)];
  for (size_t i = 0; i < TU_ARRAY_SIZE(sizes); i++) {
    p[i] = sim_mem_alloc(f->dev, sizes[i]);
    if (p[i] == NULL) fail_msg("size %" PRIu64 ": NULL", sizes[i]);
    if (!aligned(p[i]))
      fail_msg("size %" PRIu64 ": %p not %d-aligned", sizes[i], p[i],
               SIM_MEM_ALIGN);
    uint64_t us = sim_mem_usable_size(f->dev, p[i]);
    assert_true(us >= sizes[i]);
    assert_true(us > 0); /* size 0 still gets a real allocation */
    assert_true(sim_mem_contains(f->dev, p[i], sizes[i] ? sizes[i] : 1));
    /* Distinct live allocations never share an address. */
    for (size_t j = 0; j < i; j++) assert_ptr_not_equal(p[i], p[j]);
  }
  for (size_t i = 0; i < TU_ARRAY_SIZE(sizes); i++) sim_mem_free(f->dev, p[i]);
  assert_int_equal(stats(f->dev).bytes_in_use, 0);
}

/* Every counter tracked exactly, sampled after every operation. */
static void stats_exact(void** state) {
  tu_fix* f = (tu_fix*)*state;
  static const uint64_t sizes[] = {1,       100,     4096,  10000, MiB,
                                   3 * MiB, 64,      0,     12345, 200000,
                                   777,     2 * MiB, 50000, 8};
  enum { N = TU_ARRAY_SIZE(sizes) };
  void* p[N];
  uint64_t use[N];
  uint64_t sum = 0, peak = 0, largest = 0, allocs = 0, frees = 0;
  const uint64_t limit = TU_MEMORY_MB * MiB;

  for (int i = 0; i < N; i++) {
    p[i] = sim_mem_alloc(f->dev, sizes[i]);
    assert_non_null(p[i]);
    use[i] = sim_mem_usable_size(f->dev, p[i]);
    assert_true(use[i] >= sizes[i]);
    sum += use[i];
    allocs++;
    if (sum > peak) peak = sum;
    if (use[i] > largest) largest = use[i];
    sim_mem_stats st = stats(f->dev);
    assert_int_equal(st.bytes_in_use, sum);
    assert_int_equal(st.peak_bytes_in_use, peak);
    assert_int_equal(st.num_allocs, allocs);
    assert_int_equal(st.num_frees, frees);
    assert_int_equal(st.largest_alloc, largest);
    assert_int_equal(st.bytes_limit, limit);
    assert_int_equal(st.num_failed, 0);
    assert_true(st.bytes_reserved >= st.bytes_in_use);
    assert_true(st.bytes_reserved <= limit);
  }
  /* Free every other block: in-use drops, peak and largest stay. */
  for (int i = 1; i < N; i += 2) {
    sim_mem_free(f->dev, p[i]);
    p[i] = NULL;
    sum -= use[i];
    frees++;
    sim_mem_stats st = stats(f->dev);
    assert_int_equal(st.bytes_in_use, sum);
    assert_int_equal(st.peak_bytes_in_use, peak);
    assert_int_equal(st.num_frees, frees);
    assert_int_equal(st.num_allocs, allocs);
    assert_int_equal(st.largest_alloc, largest);
  }
  /* Freeing NULL is a no-op: no counter moves. */
  sim_mem_free(f->dev, NULL);
  assert_int_equal(stats(f->dev).num_frees, frees);
  /* Re-allocate below the peak: peak unchanged. */
  void* q = sim_mem_alloc(f->dev, 100);
  assert_non_null(q);
  uint64_t uq = sim_mem_usable_size(f->dev, q);
  sum += uq;
  allocs++;
  assert_true(sum < peak);
  sim_mem_stats st = stats(f->dev);
  assert_int_equal(st.bytes_in_use, sum);
  assert_int_equal(st.peak_bytes_in_use, peak);
  assert_int_equal(st.num_allocs, allocs);
  sim_mem_free(f->dev, q);
  frees++;
  for (int i = 0; i < N; i += 2) {
    sim_mem_free(f->dev, p[i]);
    frees++;
  }
  st = stats(f->dev);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.num_frees, frees);
  assert_int_equal(st.num_allocs, allocs);
  assert_int_equal(st.num_frees, st.num_allocs);
  assert_int_equal(st.peak_bytes_in_use, peak);
  assert_int_equal(st.largest_alloc, largest);
}

/* Allocates `size` blocks until NULL (or cap); returns the count. */
static int fill(sim_device* dev, uint64_t size, void** blocks, int cap) {
  int n = 0;
  while (n < cap) {
    void* p = sim_mem_alloc(dev, size);
    if (p == NULL) break;
    blocks[n++] = p;
  }
  return n;
}

static void exhaust_and_reuse(tu_fix* f, uint64_t size, int cap, int min_n) {
  void** blocks = (void**)tu_calloc(f, (size_t)cap, sizeof(void*));
  int n = fill(f->dev, size, blocks, cap);
  if (n == cap) fail_msg("%d blocks of %" PRIu64 " never ran out", n, size);
  if (n < min_n)
    fail_msg("only %d blocks of %" PRIu64 " fit in %d MiB (want >= %d)", n,
             size, TU_MEMORY_MB, min_n);
  sim_mem_stats st = stats(f->dev);
  assert_int_equal(st.num_failed, 1);
  assert_int_equal(st.num_allocs, (uint64_t)n);
  assert_true(st.bytes_in_use <= st.bytes_limit);
  assert_true(st.bytes_reserved <= st.bytes_limit);
  assert_true(st.bytes_in_use >= (uint64_t)n * size);
  /* Failing again is still clean and counted. */
  assert_null(sim_mem_alloc(f->dev, size));
  assert_int_equal(stats(f->dev).num_failed, 2);
  /* The blocks handed out are real memory. */
  memset(tu_bytes(blocks[0]), 0x11, size);
  memset(tu_bytes(blocks[n - 1]), 0x22, size);
  for (int i = 0; i < n; i++) {
    assert_true(sim_mem_contains(f->dev, blocks[i], size));
    sim_mem_free(f->dev, blocks[i]);
  }
  st = stats(f->dev);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.num_frees, (uint64_t)n);
  /* Freed memory is reused: the same number fits again. */
  int n2 = fill(f->dev, size, blocks, n);
  if (n2 != n)
    fail_msg("after freeing everything only %d of %d blocks fit again", n2, n);
  for (int i = 0; i < n2; i++) sim_mem_free(f->dev, blocks[i]);
  st = stats(f->dev);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.num_failed, 2);
  assert_int_equal(st.num_allocs, st.num_frees);
}

static void exhaustion_large(void** state) {
  /* At least half the region must be usable in 1 MiB blocks. */
  exhaust_and_reuse((tu_fix*)*state, MiB, 4 * TU_MEMORY_MB, TU_MEMORY_MB / 2);
}

static void exhaustion_small(void** state) {
  /* Small size class (slabs). */
  exhaust_and_reuse((tu_fix*)*state, 4000, 1 << 16,
                    (int)(TU_MEMORY_MB * MiB / 4000 / 2));
}

static void too_large(void** state) {
  tu_fix* f = (tu_fix*)*state;
  assert_null(sim_mem_alloc(f->dev, (TU_MEMORY_MB + 1) * MiB));
  assert_null(sim_mem_alloc(f->dev, 2 * TU_MEMORY_MB * MiB));
  assert_null(sim_mem_alloc(f->dev, 1ull << 62));
  assert_null(sim_mem_alloc(f->dev, UINT64_MAX));
  assert_null(sim_mem_alloc(f->dev, UINT64_MAX - SIM_MEM_ALIGN + 1));
  sim_mem_stats st = stats(f->dev);
  assert_int_equal(st.num_failed, 5);
  assert_int_equal(st.num_allocs, 0);
  assert_int_equal(st.bytes_in_use, 0);
  /* The device still works. */
  void* p = sim_mem_alloc(f->dev, MiB);
  assert_non_null(p);
  sim_mem_free(f->dev, p);
}

static void contains(void** state) {
  tu_fix* f = (tu_fix*)*state;
  const uint64_t region = TU_MEMORY_MB * MiB;
  char* p = (char*)sim_mem_alloc(f->dev, 4096);
  assert_non_null(p);
  assert_true(sim_mem_contains(f->dev, p, 4096));
  assert_true(sim_mem_contains(f->dev, p, 1));
  assert_true(sim_mem_contains(f->dev, p + 4095, 1));
  assert_true(sim_mem_contains(f->dev, p + 100, 200));

  int local = 0;
  assert_false(sim_mem_contains(f->dev, &local, sizeof(local)));
  void* h = malloc(64);
  assert_non_null(h);
  assert_false(sim_mem_contains(f->dev, h, 64));
  free(h);
  assert_false(sim_mem_contains(f->dev, NULL, 1));

  /* Straddling the end: the region is only `region` bytes long. */
  assert_false(sim_mem_contains(f->dev, p, region + 1));
  assert_false(sim_mem_contains(f->dev, p, 2 * region));
  /* Size so large that p + size wraps around. */
  assert_false(sim_mem_contains(f->dev, p, UINT64_MAX));
  assert_false(sim_mem_contains(f->dev, p, UINT64_MAX - (uintptr_t)p + 2));
  /* Below the region (region start > p - region), and straddling its
   * start. */
  if ((uintptr_t)p > region + 1) {
    const void* below = (const void*)((uintptr_t)p - region - 1);
    assert_false(sim_mem_contains(f->dev, below, 1));
    assert_false(sim_mem_contains(f->dev, below, region + 2));
  }
  sim_mem_free(f->dev, p);
}

/* Writing the whole of each allocation never touches another one. */
static void no_corruption(void** state) {
  tu_fix* f = (tu_fix*)*state;
  enum { N = 300 };
  unsigned char** p = (unsigned char**)tu_calloc(f, N, sizeof(void*));
  uint64_t* size = (uint64_t*)tu_calloc(f, N, sizeof(uint64_t));
  uint32_t seed = 12345;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      if (p[i] != NULL) continue;
      seed = seed * 1103515245u + 12345u;
      uint64_t s = (seed >> 8) % 20000;
      if (i % 50 == 0) s = 100000 + i * 1000; /* a few large ones */
      p[i] = (unsigned char*)sim_mem_alloc(f->dev, s);
      assert_non_null(p[i]);
      size[i] = s;
      memset(tu_bytes(p[i]), (i * 37 + round + 1) & 0xff, s);
    }
    /* No two live blocks overlap (by usable size). */
    for (int i = 0; i < N; i++) {
      uintptr_t a0 = (uintptr_t)p[i];
      uintptr_t a1 = a0 + sim_mem_usable_size(f->dev, p[i]);
      for (int j = i + 1; j < N; j++) {
        uintptr_t b0 = (uintptr_t)p[j];
        uintptr_t b1 = b0 + sim_mem_usable_size(f->dev, p[j]);
        if (a0 < b1 && b0 < a1) fail_msg("blocks %d and %d overlap", i, j);
      }
    }
    /* Every pattern intact. Blocks keep the byte of the round they were
     * allocated in; check against what was written. */
    for (int i = 0; i < N; i++) {
      if (size[i] == 0) continue;
      const unsigned char* b = tu_bytes(p[i]);
      unsigned char want = b[0];
      for (uint64_t k = 0; k < size[i]; k++) {
        if (b[k] != want) fail_msg("block %d corrupted at %" PRIu64, i, k);
      }
      if (want != (unsigned char)((i * 37 + 1) & 0xff) &&
          want != (unsigned char)((i * 37 + 2) & 0xff) &&
          want != (unsigned char)((i * 37 + 3) & 0xff))
        fail_msg("block %d has a foreign pattern %#x", i, want);
    }
    /* Free a third, refill next round. */
    for (int i = round; i < N; i += 3) {
      sim_mem_free(f->dev, p[i]);
      p[i] = NULL;
    }
  }
  for (int i = 0; i < N; i++) sim_mem_free(f->dev, p[i]);
  assert_int_equal(stats(f->dev).bytes_in_use, 0);
}

static void host_separate(void** state) {
  tu_fix* f = (tu_fix*)*state;
  void* d = sim_mem_alloc(f->dev, 4096);
  assert_non_null(d);
  assert_int_equal(sim_host_bytes_in_use(f->dev), 0);
  sim_mem_stats before = stats(f->dev);

  unsigned char* h1 = (unsigned char*)sim_host_alloc(f->dev, 1000);
  assert_non_null(h1);
  assert_true(aligned(h1));
  assert_false(sim_mem_contains(f->dev, h1, 1));
  memset(h1, 0x5a, 1000);
  assert_true(sim_host_bytes_in_use(f->dev) >= 1000);

  /* Host memory is not bounded by the device region. */
  uint64_t big = 2 * TU_MEMORY_MB * MiB;
  unsigned char* h2 = (unsigned char*)sim_host_alloc(f->dev, big);
  assert_non_null(h2);
  assert_true(aligned(h2));
  assert_false(sim_mem_contains(f->dev, h2, 1));
  h2[0] = 1;
  h2[big - 1] = 2;
  assert_true(sim_host_bytes_in_use(f->dev) >= 1000 + big);

  sim_mem_stats during = stats(f->dev);
  assert_memory_equal(&before, &during, sizeof(before));

  sim_host_free(f->dev, h2);
  assert_true(sim_host_bytes_in_use(f->dev) >= 1000);
  assert_true(sim_host_bytes_in_use(f->dev) < big);
  sim_host_free(f->dev, h1);
  sim_host_free(f->dev, NULL);
  assert_int_equal(sim_host_bytes_in_use(f->dev), 0);

  /* Device allocations do not move the host count. */
  void* d2 = sim_mem_alloc(f->dev, MiB);
  assert_non_null(d2);
  assert_int_equal(sim_host_bytes_in_use(f->dev), 0);
  sim_mem_free(f->dev, d2);
  sim_mem_free(f->dev, d);
  sim_mem_stats after = stats(f->dev);
  assert_int_equal(after.bytes_in_use, 0);
  assert_int_equal(after.num_allocs, 2);
}

static void two_devices_disjoint(void** state) {
  tu_fix* f = (tu_fix*)*state;
  sim_device* d2 = NULL;
  assert_int_equal(tu_device_create(1, TU_MEMORY_MB, &d2), SIM_OK);
  enum { kCap = 4 * TU_MEMORY_MB };
  void** b1 = (void**)tu_calloc(f, kCap, sizeof(void*));
  void** b2 = (void**)tu_calloc(f, kCap, sizeof(void*));
  /* Fill both regions completely; no block of one is in the other. */
  int n1 = fill(f->dev, MiB, b1, kCap);
  int n2 = fill(d2, MiB, b2, kCap);
  assert_true(n1 > 0 && n1 < kCap);
  assert_true(n2 > 0 && n2 < kCap);
  int bad = 0;
  for (int i = 0; i < n1; i++) {
    if (!sim_mem_contains(f->dev, b1[i], MiB)) bad++;
    if (sim_mem_contains(d2, b1[i], 1)) bad++;
  }
  for (int i = 0; i < n2; i++) {
    if (!sim_mem_contains(d2, b2[i], MiB)) bad++;
    if (sim_mem_contains(f->dev, b2[i], 1)) bad++;
  }
  /* Stats are per device. */
  assert_int_equal(stats(f->dev).num_allocs, (uint64_t)n1);
  assert_int_equal(stats(d2).num_allocs, (uint64_t)n2);
  for (int i = 0; i < n1; i++) sim_mem_free(f->dev, b1[i]);
  for (int i = 0; i < n2; i++) sim_mem_free(d2, b2[i]);
  assert_int_equal(stats(f->dev).bytes_in_use, 0);
  assert_int_equal(stats(d2).bytes_in_use, 0);
  sim_device_destroy(d2);
  assert_int_equal(bad, 0);
}

/* Several threads allocate and free concurrently; the last blocks of each
 * thread are freed by the main thread. Threads only count problems. */
enum { kThreads = 4, kKeep = 16 };

typedef struct alloc_worker {
  pthread_t th;
  sim_device* dev;
  int iters;
  int id;
  int problems;
  void* keep[kKeep];
} alloc_worker;

static void* alloc_worker_main(void* arg) {
  alloc_worker* w = (alloc_worker*)arg;
  void* ring[kKeep] = {0};
  for (int i = 0; i < w->iters; i++) {
    uint64_t size = (uint64_t)((i * 7919 + w->id * 131) % 8192) + 1;
    if (i % 97 == 0) size = 300000; /* occasionally a large one */
    unsigned char* p = (unsigned char*)sim_mem_alloc(w->dev, size);
    if (p == NULL || !aligned(p) || !sim_mem_contains(w->dev, p, size) ||
        sim_mem_usable_size(w->dev, p) < size) {
      w->problems++;
      continue;
    }
    unsigned char* b = tu_bytes(p);
    b[0] = (unsigned char)w->id;
    b[size - 1] = (unsigned char)w->id;
    int slot = i % kKeep;
    if (ring[slot] != NULL) {
      unsigned char* old = (unsigned char*)ring[slot];
      if (*(unsigned char*)tu_bytes(old) != (unsigned char)w->id) w->problems++;
      sim_mem_free(w->dev, old);
    }
    ring[slot] = p;
  }
  memcpy(w->keep, ring, sizeof(ring));
  return NULL;
}

static void concurrent_alloc_free(void** state) {
  tu_fix* f = (tu_fix*)*state;
  alloc_worker* w = (alloc_worker*)tu_calloc(f, kThreads, sizeof(*w));
  const int iters = tu_scaled(20000);
  for (int i = 0; i < kThreads; i++) {
    w[i].dev = f->dev;
    w[i].iters = iters;
    w[i].id = i + 1;
    TU_PT(pthread_create(&w[i].th, NULL, alloc_worker_main, &w[i]));
  }
  for (int i = 0; i < kThreads; i++) TU_PT(pthread_join(w[i].th, NULL));
  uint64_t allocs = 0;
  for (int i = 0; i < kThreads; i++) {
    assert_int_equal(w[i].problems, 0);
    for (int k = 0; k < kKeep; k++) {
      if (w[i].keep[k] != NULL) {
        sim_mem_free(f->dev, w[i].keep[k]);
      }
    }
    allocs += (uint64_t)iters;
  }
  sim_mem_stats st = stats(f->dev);
  assert_int_equal(st.num_allocs, allocs);
  assert_int_equal(st.num_frees, allocs);
  assert_int_equal(st.bytes_in_use, 0);
  assert_int_equal(st.num_failed, 0);
}

/* Under memcheck (the unit.arena.memcheck run), device blocks are visible:
 * addressable while allocated, inaccessible before and after. Outside
 * valgrind the test has nothing to observe and says so. */
static void valgrind_sees_device_blocks(void** state) {
  tu_fix* f = (tu_fix*)*state;
  /* Is memcheck the tool? (helgrind ignores memcheck's client requests.) */
  static uint8_t probe[8];
  VALGRIND_DISABLE_ERROR_REPORTING;
  VALGRIND_MAKE_MEM_NOACCESS(probe, sizeof(probe));
  int memcheck = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(probe, 1) != 0;
  VALGRIND_MAKE_MEM_DEFINED(probe, sizeof(probe));
  VALGRIND_ENABLE_ERROR_REPORTING;
  if (!memcheck) skip();
  uint8_t* p = sim_mem_alloc(f->dev, 256);
  assert_non_null(p);
  VALGRIND_DISABLE_ERROR_REPORTING;
  /* Where the bytes are accessed: the alias, on a discrete device. */
  uint8_t* b = tu_bytes(p);
  uintptr_t live = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(b, 256);
  sim_mem_free(f->dev, p);
  uintptr_t freed = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(b, 1);
  VALGRIND_ENABLE_ERROR_REPORTING;
  assert_int_equal(live, 0);
  assert_int_equal(freed, (uintptr_t)b);
}

/* Host ranges mapped into a device (a zero-copy DLPack import) count as its
 * memory for sim_mem_contains, but never for the allocator or its stats. */
static void mapped_host_ranges(void** state) {
  tu_fix* f = (tu_fix*)*state;
  uint8_t* host = malloc(4096);
  assert_non_null(host);
  assert_false(sim_mem_contains(f->dev, host, 16));
  assert_int_equal(sim_mem_register_host(f->dev, host, 4096), SIM_OK);
  assert_true(sim_mem_contains(f->dev, host, 4096));
  assert_true(sim_mem_contains(f->dev, host + 4000, 96));
  assert_false(sim_mem_contains(f->dev, host + 4000, 97)); /* runs past */
  assert_false(sim_mem_contains(f->dev, host - 1, 2));
  assert_int_equal(sim_mem_usable_size(f->dev, host), 0); /* not allocated */
  assert_int_equal(stats(f->dev).bytes_in_use, 0);
  /* Registered twice: stays mapped until both registrations are gone. */
  assert_int_equal(sim_mem_register_host(f->dev, host, 4096), SIM_OK);
  assert_int_equal(sim_mem_unregister_host(f->dev, host, 4096), SIM_OK);
  assert_true(sim_mem_contains(f->dev, host, 4096));
  assert_int_equal(sim_mem_unregister_host(f->dev, host, 4096), SIM_OK);
  assert_false(sim_mem_contains(f->dev, host, 1));
  /* Bad arguments. */
  assert_int_equal(sim_mem_unregister_host(f->dev, host, 4096), SIM_EINVAL);
  assert_int_equal(sim_mem_register_host(f->dev, NULL, 16), SIM_EINVAL);
  assert_int_equal(sim_mem_register_host(f->dev, host, 0), SIM_EINVAL);
  assert_int_equal(sim_mem_register_host(f->dev, (void*)(UINTPTR_MAX - 8), 16),
                   SIM_EINVAL);
  assert_int_equal(sim_mem_register_host(NULL, host, 16), SIM_EINVAL);
  /* Many ranges (the array grows); left mapped at teardown on purpose:
   * sim_device_destroy must free the registry (memcheck). */
  for (int i = 0; i < 40; i++)
    assert_int_equal(sim_mem_register_host(f->dev, host + i, 1), SIM_OK);
  assert_true(sim_mem_contains(f->dev, host + 39, 1));
  assert_false(sim_mem_contains(f->dev, host + 40, 1));
  free(host);
}

#define T(name) cmocka_unit_test_setup_teardown(name, tu_setup0, tu_teardown)

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T(fresh_stats),
      T(alignment),
      T(stats_exact),
      T(exhaustion_large),
      T(exhaustion_small),
      T(too_large),
      T(contains),
      T(no_corruption),
      T(host_separate),
      T(two_devices_disjoint),
      T(concurrent_alloc_free),
      T(valgrind_sees_device_blocks),
      T(mapped_host_ranges),
  };
  return cmocka_run_group_tests_name("arena", tests, NULL, NULL);
}
