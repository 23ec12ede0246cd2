/*
 * discrete.c - what SIM_DEVICE_DISCRETE adds beyond arena.c's mapping: the
 * process-wide table of discrete regions (sim_mem_alias) and the allocation
 * records. discrete_report.c's SIGSEGV/SIGBUS handler reads both to report
 * a host access to device memory.
 *
 * A discrete region is one memfd mapped twice (arena.c): view A, PROT_NONE,
 * is what sim_mem_alloc hands out; view B, read/write, at A + delta, is where
 * simdev's own code (workers, copies, DLPack) reads and writes. Any access to
 * A faults (discrete_report.c).
 * Nothing checks which thread reaches view B through sim_mem_alias: simdev's
 * kernels take aliases on TF's thread for their workers (sim.h).
 *
 * Locks and atomics:
 *   - regions[]: written under g_mu (add/remove, rare); read without a lock
 *     by sim_mem_alias and the handler, through a per-slot seqlock (`seq`,
 *     below): a slot is reused after a destroy, and a reader must not mix
 *     two devices' fields. g_top (slots ever used) is the fast path: 0 = no
 *     discrete device ever, sim_mem_alias returns p after one relaxed load.
 *   - fork: pthread_atfork takes g_mu then g_rec_mu around fork(); the
 *     child empties the table (it has neither view: MADV_DONTFORK).
 *   - the allocation records (live hash table and freed ring): under g_rec_mu,
 *     taken by sim_mem_alloc/free of discrete devices only; the handler only
 *     ever trylocks it (sim_discrete_recs_trylock: it may interrupt a thread
 *     that holds it).
 *   - the site (sim_mem_set_site) is thread-local: no lock.
 */
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim_internal.h"

/* ---- regions ------------------------------------------------------------ */

#define DISC_MAX_REGIONS 64 /* devices alive at once, all kinds of callers */

/* A slot is reused after its device is destroyed, so a lock-free reader
 * must not mix two devices' fields: `seq` is a seqlock, odd while g_mu's
 * holder rewrites the slot. Readers copy the fields, then check that seq
 * was even and did not change; every field is atomic (relaxed), so the
 * copy is racy only in the way the check catches. */
typedef struct disc_region {
  _Atomic uint64_t seq;
  _Atomic uintptr_t lo;
  _Atomic uint64_t size; /* 0: slot free */
  _Atomic intptr_t delta;
  _Atomic uint64_t name[SIM_DISC_NAME_WORDS]; /* device name, NUL-padded */
  int used;                                   /* under g_mu */
} disc_region;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static disc_region regions[DISC_MAX_REGIONS];
static _Atomic int g_top;

/* Copies slot i into *v. 0 when the copy is consistent (seq even and
 * unchanged), -1 when the slot was being rewritten: never spins, since the
 * writer may be the thread this runs on (a signal handler interrupting
 * region_add/remove). with_name: also copy the name (reports only). */
static int read_slot(int i, sim_disc_view* v, int with_name) {
  const disc_region* r = &regions[i];
  uint64_t s0 = atomic_load_explicit(&r->seq, memory_order_acquire);
  if (s0 & 1) return -1;
  v->size = atomic_load_explicit(&r->size, memory_order_relaxed);
  v->lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
  v->delta = atomic_load_explicit(&r->delta, memory_order_relaxed);
  if (with_name) {
    for (int k = 0; k < SIM_DISC_NAME_WORDS; k++)
      v->name[k] = atomic_load_explicit(&r->name[k], memory_order_relaxed);
    v->name[SIM_DISC_NAME_WORDS] = 0;
  }
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&r->seq, memory_order_relaxed) == s0 ? 0 : -1;
}

/* The region holding address a, copied into *v; 0, or -1 if none.
 * Lock-free, signal-safe. A slot caught mid-rewrite is read again a few
 * times, then treated as not matching (it is being added, so nothing in it
 * was handed out yet, or removed, so its memory is going away). */
static int region_of(uintptr_t a, sim_disc_view* v, int with_name) {
  int top = atomic_load_explicit(&g_top, memory_order_acquire);
  for (int i = 0; i < top; i++) {
    for (int tries = 0; tries < 4; tries++) {
      if (read_slot(i, v, with_name) != 0) continue;
      if (v->size != 0 && a - v->lo < v->size) return 0;
      break;
    }
  }
  return -1;
}

void* sim_mem_alias(const void* p) {
  if (__builtin_expect(atomic_load_explicit(&g_top, memory_order_relaxed) == 0,
                       1))
    return (void*)p;
  sim_disc_view v;
  if (region_of((uintptr_t)p, &v, 0) != 0) return (void*)p;
  return (char*)p + v.delta;
}

int sim_discrete_region_at(uintptr_t a, sim_disc_view* v) {
  return region_of(a, v, 1);
}

/* g_mu held: opens and closes slot r's rewrite (seqlock writer side). */
static void slot_write_begin(disc_region* r) {
  atomic_store_explicit(&r->seq,
                        atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
}
static void slot_write_end(disc_region* r) {
  atomic_store_explicit(&r->seq,
                        atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
                        memory_order_release);
}

/* ---- allocation records -------------------------------------------------- */

static pthread_mutex_t g_rec_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_disc_rec* g_live; /* open addressing, linear probing, power of 2 */
static size_t g_cap, g_count;
static sim_disc_rec g_freed[SIM_DISC_FREED]; /* ring */
static uint64_t g_nfreed;                    /* frees ever recorded */

static __thread const char* t_site_type;
static __thread const char* t_site_name;

void sim_mem_set_site(const char* op_type, const char* op_name) {
  t_site_type = op_type;
  t_site_name = op_name;
}

static size_t slot_of(uintptr_t base, size_t cap) {
  uint64_t h = (uint64_t)base * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 20) & (cap - 1);
}

/* g_rec_mu held. Returns 0, or -1 when the table cannot grow (the record
 * is then missing from reports: nothing else depends on it). */
static int grow(void) {
  size_t cap = g_cap ? g_cap * 2 : 1024;
  sim_disc_rec* t = calloc(cap, sizeof(*t));
  if (t == NULL) return -1;
  for (size_t i = 0; i < g_cap; i++) {
    if (g_live[i].base == 0) continue;
    size_t j = slot_of(g_live[i].base, cap);
    while (t[j].base != 0) j = (j + 1) & (cap - 1);
    t[j] = g_live[i];
  }
  free(g_live);
  g_live = t;
  g_cap = cap;
  return 0;
}

static void copy_str(char* dst, size_t n, const char* src) {
  if (src == NULL) src = "";
  size_t len = strlen(src);
  if (len >= n) len = n - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

void sim_discrete_note_alloc(const void* p, uint64_t size) {
  sim_disc_rec r = {.base = (uintptr_t)p,
                    .size = size,
                    .alloc_ns = sim_now_ns(),
                    .tid = (int32_t)syscall(SYS_gettid)};
  copy_str(r.op_type, sizeof(r.op_type), t_site_type);
  copy_str(r.op_name, sizeof(r.op_name), t_site_name);
  sim_mutex_lock(&g_rec_mu);
  if (2 * (g_count + 1) > g_cap && grow() != 0) {
    sim_mutex_unlock(&g_rec_mu);
    return;
  }
  size_t j = slot_of(r.base, g_cap);
  while (g_live[j].base != 0 && g_live[j].base != r.base)
    j = (j + 1) & (g_cap - 1);
  if (g_live[j].base == 0) g_count++;
  g_live[j] = r;
  sim_mutex_unlock(&g_rec_mu);
}

/* g_rec_mu held: removes slot j (backward-shift deletion keeps every probe
 * chain unbroken, no tombstones). */
static void remove_slot(size_t j) {
  size_t mask = g_cap - 1;
  g_live[j].base = 0;
  g_count--;
  for (size_t k = (j + 1) & mask; g_live[k].base != 0; k = (k + 1) & mask) {
    size_t home = slot_of(g_live[k].base, g_cap);
    /* Move k into the hole j if its home is not in (j, k] cyclically. */
    if (((k - home) & mask) >= ((k - j) & mask)) {
      g_live[j] = g_live[k];
      g_live[k].base = 0;
      j = k;
    }
  }
}

void sim_discrete_note_free(const void* p) {
  uint64_t now = sim_now_ns();
  sim_mutex_lock(&g_rec_mu);
  if (g_cap != 0) {
    size_t j = slot_of((uintptr_t)p, g_cap);
    while (g_live[j].base != 0 && g_live[j].base != (uintptr_t)p)
      j = (j + 1) & (g_cap - 1);
    if (g_live[j].base != 0) {
      sim_disc_rec* f = &g_freed[g_nfreed++ % SIM_DISC_FREED];
      *f = g_live[j];
      f->free_ns = now;
      remove_slot(j);
    }
  }
  sim_mutex_unlock(&g_rec_mu);
}

/* Drops every record inside [lo, lo+size): the arena is destroyed with
 * allocations still live (jemalloc's arena destroy frees them wholesale),
 * and the addresses may be mapped again by a later device. */
static void forget_range(uintptr_t lo, uint64_t size) {
  sim_mutex_lock(&g_rec_mu);
  for (size_t j = 0; j < g_cap;) {
    if (g_live[j].base != 0 && g_live[j].base - lo < size)
      remove_slot(j); /* may move another record into j: look again */
    else
      j++;
  }
  for (size_t i = 0; i < SIM_DISC_FREED; i++)
    if (g_freed[i].base - lo < size) g_freed[i].base = 0;
  sim_mutex_unlock(&g_rec_mu);
}

int sim_discrete_recs_trylock(void) {
  return sim_mutex_trylock(&g_rec_mu);
}
void sim_discrete_recs_unlock(void) {
  sim_mutex_unlock(&g_rec_mu);
}

const sim_disc_rec* sim_discrete_live_at(uintptr_t a) {
  for (size_t j = 0; j < g_cap; j++)
    if (g_live[j].base != 0 && a - g_live[j].base < g_live[j].size)
      return &g_live[j];
  return NULL;
}

const sim_disc_rec* sim_discrete_freed_at(uintptr_t a) {
  uint64_t n = g_nfreed < SIM_DISC_FREED ? g_nfreed : SIM_DISC_FREED;
  for (uint64_t k = 0; k < n; k++) {
    const sim_disc_rec* r = &g_freed[(g_nfreed - 1 - k) % SIM_DISC_FREED];
    if (r->base != 0 && a - r->base < r->size) return r;
  }
  return NULL;
}

/* fork(): the child has neither view of any discrete region (arena.c maps
 * them MADV_DONTFORK) nor simdev's threads. Its copy of the table would
 * still translate (and report) addresses that its own later mappings may
 * reuse: the child forgets every region. The locks are taken around fork
 * so the child gets them unlocked and consistent. */
static void fork_prepare(void) {
  sim_mutex_lock(&g_mu);
  sim_mutex_lock(&g_rec_mu);
}
static void fork_parent(void) {
  sim_mutex_unlock(&g_rec_mu);
  sim_mutex_unlock(&g_mu);
}
static void fork_child(void) {
  for (int i = 0; i < DISC_MAX_REGIONS; i++) {
    if (!regions[i].used) continue;
    slot_write_begin(&regions[i]);
    atomic_store_explicit(&regions[i].size, 0, memory_order_relaxed);
    slot_write_end(&regions[i]);
    regions[i].used = 0;
  }
  for (size_t j = 0; j < g_cap; j++) g_live[j].base = 0;
  g_count = 0;
  for (size_t i = 0; i < SIM_DISC_FREED; i++) g_freed[i].base = 0;
  fork_parent();
}

static void install_atfork(void) {
  SIM_CHECK(pthread_atfork(fork_prepare, fork_parent, fork_child) == 0);
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* ---- region registration (arena.c) --------------------------------------- */

int sim_discrete_region_add(const char* name, void* a, void* b, uint64_t size) {
  SIM_CHECK_PT(pthread_once(&g_atfork_once, install_atfork));
  sim_mutex_lock(&g_mu);
  int i = 0;
  while (i < DISC_MAX_REGIONS && regions[i].used) i++;
  if (i == DISC_MAX_REGIONS) {
    sim_mutex_unlock(&g_mu);
    sim_create_error_set(
        "SIMDEV_DISCRETE=1: at most %d discrete devices can exist at once "
        "in a process",
        DISC_MAX_REGIONS);
    return SIM_ENOMEM;
  }
  disc_region* r = &regions[i];
  r->used = 1;
  char padded[SIM_DISC_NAME_WORDS * 8] = {0};
  copy_str(padded, sizeof(padded), name);
  slot_write_begin(r);
  for (int k = 0; k < SIM_DISC_NAME_WORDS; k++) {
    uint64_t w;
    memcpy(&w, padded + 8 * k, 8);
    atomic_store_explicit(&r->name[k], w, memory_order_relaxed);
  }
  atomic_store_explicit(&r->lo, (uintptr_t)a, memory_order_relaxed);
  atomic_store_explicit(&r->delta, (intptr_t)((char*)b - (char*)a),
                        memory_order_relaxed);
  atomic_store_explicit(&r->size, size, memory_order_relaxed);
  slot_write_end(r);
  if (i + 1 > atomic_load_explicit(&g_top, memory_order_relaxed))
    atomic_store_explicit(&g_top, i + 1, memory_order_release);
  sim_mutex_unlock(&g_mu);
  return SIM_OK;
}

void sim_discrete_region_remove(void* a) {
  sim_mutex_lock(&g_mu);
  for (int i = 0; i < DISC_MAX_REGIONS; i++) {
    if (!regions[i].used ||
        atomic_load_explicit(&regions[i].lo, memory_order_relaxed) !=
            (uintptr_t)a)
      continue;
    uint64_t size =
        atomic_load_explicit(&regions[i].size, memory_order_relaxed);
    slot_write_begin(&regions[i]);
    atomic_store_explicit(&regions[i].size, 0, memory_order_relaxed);
    slot_write_end(&regions[i]);
    regions[i].used = 0;
    forget_range((uintptr_t)a, size);
    break;
  }
  sim_mutex_unlock(&g_mu);
}
