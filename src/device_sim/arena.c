/*
 * arena.c - device memory: one reserved region per device, carved by a
 * dedicated jemalloc arena.
 *
 * The region is reserved once (mmap, MAP_NORESERVE: pages cost nothing until
 * touched) and bound to the device's NUMA node with hwloc. jemalloc never
 * sees the OS for this arena: its extent hooks hand out the region with a
 * bump pointer and refuse to give memory back (dalloc "opts out"), so freed
 * extents stay in jemalloc's retained set and are recycled, merged and split
 * inside the region. When the bump pointer reaches the end and jemalloc has
 * nothing retained that fits, mallocx returns NULL: that is exhaustion, and
 * nothing else happens.
 *
 * jemalloc's own metadata for the arena is NOT taken from the region
 * (metadata_use_hooks = false), so the region's bytes are all for tensors.
 *
 * Discrete devices (SIM_DEVICE_DISCRETE) map the region twice from one
 * memfd: view A, PROT_NONE, is `base`, what jemalloc carves and
 * sim_mem_alloc hands out; view B, read/write, at base + `alias`, is where
 * simdev's code reaches the bytes (sim_mem_alias, discrete.c). jemalloc
 * never reads or writes the region's bytes (metadata off the region, no junk
 * or zero fill: opt.junk and opt.zero are off by default, and a discrete
 * device is refused when SDJE_MALLOC_CONF turns them on), so it works on
 * A's addresses without faulting. Other
 * devices keep a private anonymous mapping: the mode costs them nothing.
 *
 * Locking: `lock` protects the bump pointer and the stats. jemalloc calls the
 * hooks with its own locks held; the hooks take only `lock`, and no code
 * calls into jemalloc while holding `lock`, so there is no lock-order cycle.
 */
#include <errno.h>
#include <hwloc.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "jemalloc/jemalloc.h"
#include "sim_internal.h"

/* Under valgrind, tell memcheck about sub-allocations inside the region (as
 * mimalloc and jemalloc do for theirs): the region starts inaccessible, each
 * allocation becomes addressable (undefined) and each free inaccessible
 * again, so overruns and use-after-free in device buffers are reported like
 * heap errors. Outside valgrind these are a few no-op instructions. On a
 * discrete device the requests describe view B, where the accesses happen
 * (view A is PROT_NONE, which memcheck marks inaccessible by itself). */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define SIM_VG_NOACCESS(p, n) VALGRIND_MAKE_MEM_NOACCESS(p, n)
#define SIM_VG_MALLOC(p, n) VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 0)
#define SIM_VG_FREE(p) VALGRIND_FREELIKE_BLOCK(p, 0)
#define SIM_VG_SHRINK(p, from, to) VALGRIND_RESIZEINPLACE_BLOCK(p, from, to, 0)
#endif
#endif
#ifndef SIM_VG_MALLOC
#define SIM_VG_NOACCESS(p, n) ((void)0)
#define SIM_VG_MALLOC(p, n) ((void)0)
#define SIM_VG_FREE(p) ((void)0)
#define SIM_VG_SHRINK(p, from, to) ((void)0)
#endif

/* jemalloc 5.3's arena_config_t for the "experimental.arenas_create_ext"
 * mallctl. Not in the public header; declared from jemalloc's
 * include/jemalloc/internal/arena_types.h. The ctl checks the size we pass. */
typedef struct je_arena_config {
  extent_hooks_t* extent_hooks;
  bool metadata_use_hooks;
} je_arena_config;
_Static_assert(sizeof(je_arena_config) == 2 * sizeof(void*),
               "arena_config_t layout (pointer, bool, padding)");

/* Options of simdev's private jemalloc (it serves only device arenas and
 * never replaces the process's malloc), read through the prefixed
 * malloc_conf symbol, which jemalloc declares weak.
 * retain:false - with retain on, every extent the alloc hook returns is a
 * "head" that jemalloc never merges with its neighbour, so after a run of
 * small tensors the region could no longer hold one large tensor even when
 * entirely free. With retain off, hook extents merge freely (they are
 * contiguous pieces of one region), and extents the dalloc hook refuses to
 * release still land in the retained set to be reused. */
const char* sdje_malloc_conf = "retain:false";

struct sim_arena {
  extent_hooks_t hooks; /* first: the hooks get &hooks back */
  unsigned je_index;
  int ordinal;

  uint8_t* base; /* what jemalloc carves: view A on a discrete device */
  uint64_t size;
  int discrete;
  intptr_t alias; /* view B - view A; 0 when not discrete */
  char name[32];  /* the device's, for discrete reports */
  hwloc_topology_t topo;
  int numa_node;
  int numa_bound;

  pthread_mutex_t lock; /* guards brk and stats */
  uint64_t brk;         /* bytes of the region handed to jemalloc */
  sim_mem_stats stats;
  uint64_t host_in_use;
};

static sim_arena* arena_of(extent_hooks_t* h) {
  return sim_container_of(h, sim_arena, hooks);
}

/* ---- extent hooks (called by jemalloc, its locks held) ------------------ */

static void* hook_alloc(extent_hooks_t* h, void* new_addr, size_t size,
                        size_t alignment, bool* zero, bool* commit,
                        unsigned arena_ind) {
  sim_arena* a = arena_of(h);
  void* ret = NULL;
  sim_mutex_lock(&a->lock);
  uint64_t start = (a->brk + alignment - 1) & ~((uint64_t)alignment - 1);
  bool fits = start >= a->brk && size <= a->size && start <= a->size - size;
  if (fits && (new_addr == NULL || new_addr == a->base + start)) {
    ret = a->base + start;
    a->brk = start + size;
    a->stats.bytes_reserved = a->brk;
  }
  sim_mutex_unlock(&a->lock);
  if (ret != NULL) {
    *zero = true; /* never handed out before: fresh anonymous pages */
    *commit = true;
  }
  return ret;
}

/* Opt out: jemalloc keeps the extent (retained) and reuses it. */
static bool hook_dalloc(extent_hooks_t* h, void* addr, size_t size,
                        bool committed, unsigned arena_ind) {
  return true;
}

/* The region is unmapped as a whole when the device goes away. */
static void hook_destroy(extent_hooks_t* h, void* addr, size_t size,
                         bool committed, unsigned arena_ind) {}

static bool hook_commit(extent_hooks_t* h, void* addr, size_t size,
                        size_t offset, size_t length, unsigned arena_ind) {
  return false; /* always committed */
}

/* All extents live in one contiguous region: splitting and merging are pure
 * bookkeeping and always allowed. */
static bool hook_split(extent_hooks_t* h, void* addr, size_t size,
                       size_t size_a, size_t size_b, bool committed,
                       unsigned arena_ind) {
  return false;
}
static bool hook_merge(extent_hooks_t* h, void* addr_a, size_t size_a,
                       void* addr_b, size_t size_b, bool committed,
                       unsigned arena_ind) {
  return false;
}

/* ---- region and NUMA --------------------------------------------------- */

/* The bytes behind a pointer of the region: where valgrind is told about. */
static void* view(const sim_arena* a, void* p) {
  return (char*)p + a->alias;
}

static void bind_numa(sim_arena* a) {
  a->numa_node = -1;
  a->numa_bound = 0;
  if (hwloc_topology_init(&a->topo) != 0) {
    a->topo = NULL;
    return;
  }
  if (hwloc_topology_load(a->topo) != 0) {
    hwloc_topology_destroy(a->topo);
    a->topo = NULL;
    return;
  }
  int n = hwloc_get_nbobjs_by_type(a->topo, HWLOC_OBJ_NUMANODE);
  if (n <= 0) return;
  hwloc_obj_t node =
      hwloc_get_obj_by_type(a->topo, HWLOC_OBJ_NUMANODE, a->ordinal % n);
  if (node == NULL) return;
  a->numa_node = (int)node->os_index;
  /* Binding may be refused (no mbind in a container, single-node kernel
   * without NUMA support). The memory is still usable; we report unbound. */
  a->numa_bound =
      hwloc_set_area_membind(a->topo, view(a, a->base), a->size, node->nodeset,
                             HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) == 0;
}

/* jemalloc's fill options write into what it allocates or frees: on a
 * discrete device that is view A, and the write would fault in jemalloc.
 * Off by default; SDJE_MALLOC_CONF (the prefixed MALLOC_CONF) can turn
 * them on at run time. opt.junk is "false", "true", "alloc" or "free";
 * either ctl is absent (ENOENT) in a build without fill support. */
static int je_fills(void) {
  const char* junk = NULL;
  size_t sz = sizeof(junk);
  if (sdje_mallctl("opt.junk", &junk, &sz, NULL, 0) == 0 && junk != NULL &&
      strcmp(junk, "false") != 0)
    return 1;
  bool zero = false;
  sz = sizeof(zero);
  return sdje_mallctl("opt.zero", &zero, &sz, NULL, 0) == 0 && zero;
}

/* Views A (PROT_NONE) and B (read/write) of one memfd of `bytes` (shmem
 * pages, allocated as they are first touched through B, like the anonymous
 * region's; memfd_create's files are not charged against commit limits).
 * The fd is closed once mapped: the mappings keep the file. Both views are
 * MADV_DONTFORK: a fork()ed child would otherwise share device memory with
 * the parent (a shared mapping) under its own copy of jemalloc's state, and
 * the two would hand out the same bytes; without the views, a child's
 * access faults instead. Failures explain themselves through
 * sim_create_error_set (the plugin shows it). */
static int map_discrete(sim_arena* a, uint64_t bytes) {
  unsigned long long mib = (unsigned long long)(bytes >> 20);
  if (je_fills()) {
    sim_create_error_set(
        "SIMDEV_DISCRETE=1 cannot be used with jemalloc's junk or zero fill "
        "(SDJE_MALLOC_CONF): jemalloc would write into the device's "
        "inaccessible view");
    return SIM_EINVAL;
  }
  /* Growing a file past RLIMIT_FSIZE raises SIGXFSZ (death with a core
   * by default) before ftruncate could fail with EFBIG: check first. */
  struct rlimit fsize;
  if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
      fsize.rlim_cur < bytes) {
    sim_create_error_set(
        "SIMDEV_DISCRETE=1: the device's %llu MiB are a memfd, and the file "
        "size limit (ulimit -f) is %llu KiB: raise `ulimit -f` or lower "
        "SIMDEV_MEMORY_MB",
        mib, (unsigned long long)(fsize.rlim_cur >> 10));
    return SIM_ENOMEM;
  }
  int fd = memfd_create(a->name, MFD_CLOEXEC);
  if (fd < 0) {
    sim_create_error_set("SIMDEV_DISCRETE=1: memfd_create refused: %s",
                         strerror(errno));
    return SIM_ESYS;
  }
  if (ftruncate(fd, (off_t)bytes) != 0) {
    sim_create_error_set(
        "SIMDEV_DISCRETE=1: cannot size the device's memfd to %llu MiB: %s",
        mib, strerror(errno));
    close(fd);
    return SIM_ENOMEM;
  }
  void* b = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_NORESERVE, fd, 0);
  void* v = b == MAP_FAILED ? MAP_FAILED
                            : mmap(NULL, bytes, PROT_NONE,
                                   MAP_SHARED | MAP_NORESERVE, fd, 0);
  int map_errno = errno;
  close(fd);
  if (v == MAP_FAILED) {
    if (b != MAP_FAILED) munmap(b, bytes);
    sim_create_error_set(
        "SIMDEV_DISCRETE=1: cannot map the device's %llu MiB memfd twice: %s",
        mib, strerror(map_errno));
    return SIM_ENOMEM;
  }
  if (madvise(b, bytes, MADV_DONTFORK) != 0 ||
      madvise(v, bytes, MADV_DONTFORK) != 0) {
    sim_create_error_set("SIMDEV_DISCRETE=1: madvise(MADV_DONTFORK): %s",
                         strerror(errno));
    munmap(v, bytes);
    munmap(b, bytes);
    return SIM_ESYS;
  }
  a->base = v;
  a->alias = (intptr_t)((char*)b - (char*)v);
  sim_discrete_report_install();
  int err = sim_discrete_region_add(a->name, v, b, bytes);
  if (err != SIM_OK) {
    munmap(v, bytes);
    munmap(b, bytes);
  }
  return err;
}

static void unmap_region(sim_arena* a) {
  if (a->discrete) {
    sim_discrete_region_remove(a->base);
    SIM_CHECK(munmap(view(a, a->base), a->size) == 0);
  }
  SIM_CHECK(munmap(a->base, a->size) == 0);
}

int sim_arena_create(int ordinal, const char* dev_name, uint64_t bytes,
                     int discrete, sim_arena** out) {
  if (bytes == 0 || out == NULL) return SIM_EINVAL;
  sim_arena* a = calloc(1, sizeof(*a));
  if (a == NULL) return SIM_ENOMEM;
  a->ordinal = ordinal;
  a->size = bytes;
  a->discrete = discrete != 0;
  snprintf(a->name, sizeof(a->name), "%s", dev_name);
  a->stats.bytes_limit = bytes;
  sim_mutex_init(&a->lock);

  int err = SIM_OK;
  if (a->discrete) {
    err = map_discrete(a, bytes);
  } else {
    void* base = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) err = SIM_ENOMEM;
    a->base = base;
  }
  if (err != SIM_OK) {
    sim_mutex_destroy(&a->lock);
    free(a);
    return err;
  }
  bind_numa(a);
  SIM_VG_NOACCESS(view(a, a->base), a->size);

  a->hooks = (extent_hooks_t){
      .alloc = hook_alloc,
      .dalloc = hook_dalloc,
      .destroy = hook_destroy,
      .commit = hook_commit,
      .decommit = NULL, /* opt out: never decommit */
      .purge_lazy = NULL,
      .purge_forced = NULL,
      .split = hook_split,
      .merge = hook_merge,
  };
  je_arena_config cfg = {.extent_hooks = &a->hooks,
                         .metadata_use_hooks = false};
  size_t sz = sizeof(a->je_index);
  int rc = sdje_mallctl("experimental.arenas_create_ext", &a->je_index, &sz,
                        &cfg, sizeof(cfg));
  if (rc != 0) {
    unmap_region(a);
    if (a->topo) hwloc_topology_destroy(a->topo);
    sim_mutex_destroy(&a->lock);
    free(a);
    return SIM_ESYS;
  }
  /* Freed extents skip jemalloc's dirty/muzzy stages (decay 0; purging is
   * refused by the hooks) and go straight to the retained set, where they are
   * coalesced at once: after freeing, the whole region is again available for
   * one large tensor. A failure here would only delay reuse: ignored. */
  char name[64];
  ssize_t zero_ms = 0;
  snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", a->je_index);
  (void)sdje_mallctl(name, NULL, NULL, &zero_ms, sizeof(zero_ms));
  snprintf(name, sizeof(name), "arena.%u.muzzy_decay_ms", a->je_index);
  (void)sdje_mallctl(name, NULL, NULL, &zero_ms, sizeof(zero_ms));
  *out = a;
  return SIM_OK;
}

void sim_arena_destroy(sim_arena* a) {
  if (a == NULL) return;
  char name[64];
  snprintf(name, sizeof(name), "arena.%u.destroy", a->je_index);
  SIM_CHECK(sdje_mallctl(name, NULL, NULL, NULL, 0) == 0);
  unmap_region(a);
  if (a->topo) hwloc_topology_destroy(a->topo);
  sim_mutex_destroy(&a->lock);
  free(a);
}

int sim_arena_numa_node(const sim_arena* a) {
  return a->numa_node;
}
int sim_arena_numa_bound(const sim_arena* a) {
  return a->numa_bound;
}
int sim_arena_discrete(const sim_arena* a) {
  return a->discrete;
}

/* ---- allocation (public API, see sim.h) -------------------------------- */

/* [p, p+size) inside the region (mapped host ranges are not). */
static int in_region(const sim_arena* a, const void* p, uint64_t size) {
  uintptr_t lo = (uintptr_t)a->base, q = (uintptr_t)p;
  return q >= lo && q - lo <= a->size && size <= a->size - (q - lo);
}

void* sim_mem_alloc(sim_device* dev, uint64_t size) {
  if (dev == NULL) return NULL;
  sim_arena* a = dev->arena;
  void* p = NULL;
  /* SIMDEV_FAULTS alloc rules (faults.c): refused the way a full region
   * refuses, before jemalloc is asked, so only num_failed changes. */
  int refused = sim_faults_on() && sim_faults_alloc(dev->name, size);
  if (!refused && size <= a->size) {
    int flags = MALLOCX_ARENA(a->je_index) | MALLOCX_TCACHE_NONE |
                MALLOCX_ALIGN(SIM_MEM_ALIGN);
    p = sdje_mallocx(size == 0 ? 1 : (size_t)size, flags);
  }
  uint64_t usable = p ? sdje_sallocx(p, MALLOCX_TCACHE_NONE) : 0;
  if (p != NULL) {
    SIM_VG_MALLOC(view(a, p), usable);
    /* Only the bytes asked for are addressable to memcheck, as with malloc:
     * an overrun into jemalloc's size-class slack (4000 bytes asked, 4096
     * usable) is reported ("0 bytes after a block of size 4,000"). Memcheck
     * refuses a resize to 0 bytes: a size-0 block keeps its usable size. */
    if (size > 0 && usable > size) SIM_VG_SHRINK(view(a, p), usable, size);
    if (a->discrete) sim_discrete_note_alloc(p, usable);
  }
  /* The recorder's thread id before the lock: a thread's first one may
   * register its name (a lock and a malloc), which stays out of ours. */
  int32_t tid = sim_trace_on() ? sim_trace_tid() : 0;
  sim_mutex_lock(&a->lock);
  if (p == NULL) {
    a->stats.num_failed++;
  } else {
    a->stats.num_allocs++;
    a->stats.bytes_in_use += usable;
    if (a->stats.bytes_in_use > a->stats.peak_bytes_in_use)
      a->stats.peak_bytes_in_use = a->stats.bytes_in_use;
    if (usable > a->stats.largest_alloc) a->stats.largest_alloc = usable;
  }
  /* Under the lock, so a device's records are in the order of in_use. */
  if (tid != 0)
    sim_trace_mem_op(dev, p ? 1 : 0, p, p ? usable : size,
                     a->stats.bytes_in_use, tid);
  sim_mutex_unlock(&a->lock);
  return p;
}

void sim_mem_free(sim_device* dev, void* p) {
  if (dev == NULL || p == NULL) return;
  sim_arena* a = dev->arena;
  /* A pointer from elsewhere would corrupt jemalloc: that is a caller bug
   * we can detect cheaply, so we do. */
  SIM_CHECK(in_region(a, p, 1)); /* never a mapped host range */
  uint64_t usable = sdje_sallocx(p, MALLOCX_TCACHE_NONE);
  if (a->discrete) sim_discrete_note_free(p);
  /* Memcheck hears of the free BEFORE jemalloc can hand the bytes to
   * another thread's sim_mem_alloc: told after, it would mark that new
   * block's bytes inaccessible and report its owner's accesses. */
  SIM_VG_FREE(view(a, p));
  sdje_dallocx(p, MALLOCX_TCACHE_NONE);
  int32_t tid = sim_trace_on() ? sim_trace_tid() : 0; /* as in alloc */
  sim_mutex_lock(&a->lock);
  SIM_CHECK(a->stats.bytes_in_use >= usable);
  a->stats.bytes_in_use -= usable;
  a->stats.num_frees++;
  if (tid != 0)
    sim_trace_mem_op(dev, -1, p, usable, a->stats.bytes_in_use, tid);
  sim_mutex_unlock(&a->lock);
}

uint64_t sim_mem_usable_size(sim_device* dev, const void* p) {
  if (dev == NULL || p == NULL || !in_region(dev->arena, p, 1)) return 0;
  return sdje_sallocx(p, MALLOCX_TCACHE_NONE);
}

void sim_mem_get_stats(sim_device* dev, sim_mem_stats* out) {
  sim_arena* a = dev->arena;
  sim_mutex_lock(&a->lock);
  *out = a->stats;
  sim_mutex_unlock(&a->lock);
}

int sim_mem_contains(const sim_device* dev, const void* p, uint64_t size) {
  if (dev == NULL || p == NULL) return 0;
  return in_region(dev->arena, p, size) || sim_mapped_contains(dev, p, size);
}

/* Host staging memory: plain aligned host memory with a size header so the
 * in-use count is exact. The header is SIM_MEM_ALIGN bytes to keep the
 * payload aligned. */
void* sim_host_alloc(sim_device* dev, uint64_t size) {
  if (dev == NULL || size > UINT64_MAX - SIM_MEM_ALIGN) return NULL;
  void* raw = NULL;
  if (posix_memalign(&raw, SIM_MEM_ALIGN, (size_t)size + SIM_MEM_ALIGN) != 0)
    return NULL;
  *(uint64_t*)raw = size;
  sim_mutex_lock(&dev->arena->lock);
  dev->arena->host_in_use += size;
  sim_mutex_unlock(&dev->arena->lock);
  return (uint8_t*)raw + SIM_MEM_ALIGN;
}

void sim_host_free(sim_device* dev, void* p) {
  if (dev == NULL || p == NULL) return;
  uint8_t* raw = (uint8_t*)p - SIM_MEM_ALIGN;
  uint64_t size = *(uint64_t*)raw;
  sim_mutex_lock(&dev->arena->lock);
  SIM_CHECK(dev->arena->host_in_use >= size);
  dev->arena->host_in_use -= size;
  sim_mutex_unlock(&dev->arena->lock);
  free(raw);
}

uint64_t sim_host_bytes_in_use(sim_device* dev) {
  sim_mutex_lock(&dev->arena->lock);
  uint64_t n = dev->arena->host_in_use;
  sim_mutex_unlock(&dev->arena->lock);
  return n;
}
