/*
 * discrete.c - what SIM_DEVICE_DISCRETE adds beyond arena.c's mapping: the
 * process-wide table of discrete regions (sim_mem_alias), the allocation
 * records, and the SIGSEGV/SIGBUS handler that reports a host access to
 * device memory.
 *
 * A discrete region is one memfd mapped twice (arena.c): view A, PROT_NONE,
 * is what sim_mem_alloc hands out; view B, read/write, at A + delta, is where
 * simdev's own code (workers, copies, DLPack) reads and writes. Any access to
 * A faults; the handler finds the region and the allocation, writes a report
 * to stderr without stdio or malloc, restores the previous disposition and
 * returns: the access runs again and the previous handler (e.g. Python's
 * faulthandler) or the default action (death by SIGSEGV) takes over. Under
 * gdb the debugger stops at the access before any of this runs.
 * The handler calls (all of them): write(2); pthread_mutex_trylock/unlock
 * on g_rec_mu, with sched_yield between tries; nanosleep while another
 * thread's report is under way; syscall(SYS_gettid); prctl(PR_GET_NAME);
 * clock_gettime through sim_now_ns (whose SIM_CHECK aborts if it fails);
 * glibc's backtrace (its first call, which loads libgcc's unwinder, is made
 * at install) and backtrace_symbols_fd; sigaction; and for a signal that is
 * not ours, pthread_sigmask and raise or the previous handler (chain()).
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
 *     ever trylocks it (it may interrupt a thread that holds it).
 *   - the site (sim_mem_set_site) is thread-local: no lock.
 */
#include <errno.h>
#include <execinfo.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"

/* ---- regions ------------------------------------------------------------ */

#define DISC_MAX_REGIONS 64 /* devices alive at once, all kinds of callers */
#define DISC_NAME_WORDS 4   /* device name: 32 bytes, read as 4 words */

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
  _Atomic uint64_t name[DISC_NAME_WORDS]; /* device name, NUL-padded */
  int used;                               /* under g_mu */
} disc_region;

/* What a reader saw of one slot, consistently. */
typedef struct disc_view {
  uintptr_t lo;
  uint64_t size;
  intptr_t delta;
  uint64_t name[DISC_NAME_WORDS + 1]; /* + a NUL word */
} disc_view;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static disc_region regions[DISC_MAX_REGIONS];
static _Atomic int g_top;

/* Copies slot i into *v. 0 when the copy is consistent (seq even and
 * unchanged), -1 when the slot was being rewritten: never spins, since the
 * writer may be the thread this runs on (a signal handler interrupting
 * region_add/remove). with_name: also copy the name (reports only). */
static int read_slot(int i, disc_view* v, int with_name) {
  const disc_region* r = &regions[i];
  uint64_t s0 = atomic_load_explicit(&r->seq, memory_order_acquire);
  if (s0 & 1) return -1;
  v->size = atomic_load_explicit(&r->size, memory_order_relaxed);
  v->lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
  v->delta = atomic_load_explicit(&r->delta, memory_order_relaxed);
  if (with_name) {
    for (int k = 0; k < DISC_NAME_WORDS; k++)
      v->name[k] = atomic_load_explicit(&r->name[k], memory_order_relaxed);
    v->name[DISC_NAME_WORDS] = 0;
  }
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&r->seq, memory_order_relaxed) == s0 ? 0 : -1;
}

/* The region holding address a, copied into *v; 0, or -1 if none.
 * Lock-free, signal-safe. A slot caught mid-rewrite is read again a few
 * times, then treated as not matching (it is being added, so nothing in it
 * was handed out yet, or removed, so its memory is going away). */
static int region_of(uintptr_t a, disc_view* v, int with_name) {
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
  disc_view v;
  if (region_of((uintptr_t)p, &v, 0) != 0) return (void*)p;
  return (char*)p + v.delta;
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

#define DISC_OP_LEN 48
#define DISC_NAME_LEN 96
#define DISC_FREED 1024 /* freed allocations remembered for reports */

typedef struct disc_rec {
  uintptr_t base; /* 0: empty slot */
  uint64_t size;
  uint64_t alloc_ns, free_ns;
  int32_t tid;
  char op_type[DISC_OP_LEN];
  char op_name[DISC_NAME_LEN];
} disc_rec;

static pthread_mutex_t g_rec_mu = PTHREAD_MUTEX_INITIALIZER;
static disc_rec* g_live; /* open addressing, linear probing, power of 2 */
static size_t g_cap, g_count;
static disc_rec g_freed[DISC_FREED]; /* ring */
static uint64_t g_nfreed;            /* frees ever recorded */

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
  disc_rec* t = calloc(cap, sizeof(*t));
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
  disc_rec r = {.base = (uintptr_t)p,
                .size = size,
                .alloc_ns = sim_now_ns(),
                .tid = (int32_t)syscall(SYS_gettid)};
  copy_str(r.op_type, sizeof(r.op_type), t_site_type);
  copy_str(r.op_name, sizeof(r.op_name), t_site_name);
  sim_lock(&g_rec_mu);
  if (2 * (g_count + 1) > g_cap && grow() != 0) {
    sim_unlock(&g_rec_mu);
    return;
  }
  size_t j = slot_of(r.base, g_cap);
  while (g_live[j].base != 0 && g_live[j].base != r.base)
    j = (j + 1) & (g_cap - 1);
  if (g_live[j].base == 0) g_count++;
  g_live[j] = r;
  sim_unlock(&g_rec_mu);
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
  sim_lock(&g_rec_mu);
  if (g_cap != 0) {
    size_t j = slot_of((uintptr_t)p, g_cap);
    while (g_live[j].base != 0 && g_live[j].base != (uintptr_t)p)
      j = (j + 1) & (g_cap - 1);
    if (g_live[j].base != 0) {
      disc_rec* f = &g_freed[g_nfreed++ % DISC_FREED];
      *f = g_live[j];
      f->free_ns = now;
      remove_slot(j);
    }
  }
  sim_unlock(&g_rec_mu);
}

/* Drops every record inside [lo, lo+size): the arena is destroyed with
 * allocations still live (jemalloc's arena destroy frees them wholesale),
 * and the addresses may be mapped again by a later device. */
static void forget_range(uintptr_t lo, uint64_t size) {
  sim_lock(&g_rec_mu);
  for (size_t j = 0; j < g_cap;) {
    if (g_live[j].base != 0 && g_live[j].base - lo < size)
      remove_slot(j); /* may move another record into j: look again */
    else
      j++;
  }
  for (size_t i = 0; i < DISC_FREED; i++)
    if (g_freed[i].base - lo < size) g_freed[i].base = 0;
  sim_unlock(&g_rec_mu);
}

/* ---- the report (signal context from here on: no stdio, no malloc) ----- */

typedef struct out_buf {
  char b[1024];
  size_t n;
} out_buf;

static void out_flush(out_buf* o) {
  size_t off = 0;
  while (off < o->n) {
    ssize_t w = write(STDERR_FILENO, o->b + off, o->n - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  o->n = 0;
}

static void out_s(out_buf* o, const char* s) {
  for (; *s; s++) {
    if (o->n == sizeof(o->b)) out_flush(o);
    o->b[o->n++] = *s;
  }
}

static void out_u(out_buf* o, uint64_t v) {
  char t[24];
  int i = 0;
  do t[i++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  char r[24];
  for (int k = 0; k < i; k++) r[k] = t[i - 1 - k];
  r[i] = '\0';
  out_s(o, r);
}

static void out_x(out_buf* o, uint64_t v) {
  char r[24] = "0x";
  int i = 2;
  int shift = 60;
  while (shift > 0 && ((v >> shift) & 0xf) == 0) shift -= 4;
  for (; shift >= 0; shift -= 4)
    r[i++] = "0123456789abcdef"[(v >> shift) & 0xf];
  r[i] = '\0';
  out_s(o, r);
}

static void out_ms_ago(out_buf* o, uint64_t then, uint64_t now) {
  out_u(o, now > then ? (now - then) / 1000000u : 0);
  out_s(o, " ms ago");
}

static void out_rec_origin(out_buf* o, const disc_rec* r) {
  if (r->op_type[0] != '\0') {
    out_s(o, " by op ");
    out_s(o, r->op_type);
    if (r->op_name[0] != '\0') {
      out_s(o, " (node \"");
      out_s(o, r->op_name);
      out_s(o, "\")");
    }
  } else {
    out_s(o, " outside any simdev kernel");
  }
  out_s(o, " on tid ");
  out_u(o, (uint64_t)r->tid);
}

static void report_allocation(out_buf* o, uintptr_t a) {
  int locked = 0;
  for (int i = 0; i < 1000 && !locked; i++) {
    locked = pthread_mutex_trylock(&g_rec_mu) == 0;
    if (!locked) sched_yield();
  }
  out_s(o, "  allocation: ");
  if (!locked) {
    out_s(o, "unknown (the allocation table is busy in another thread)\n");
    return;
  }
  uint64_t now = sim_now_ns();
  const disc_rec* hit = NULL;
  for (size_t j = 0; j < g_cap && hit == NULL; j++)
    if (g_live[j].base != 0 && a - g_live[j].base < g_live[j].size)
      hit = &g_live[j];
  if (hit != NULL) {
    out_s(o, "base ");
    out_x(o, hit->base);
    out_s(o, ", ");
    out_u(o, hit->size);
    out_s(o, " bytes, offset ");
    out_u(o, a - hit->base);
    out_s(o, ", allocated ");
    out_ms_ago(o, hit->alloc_ns, now);
    out_rec_origin(o, hit);
    out_s(o, "\n");
  } else {
    /* The most recent free that covered a, if still remembered. */
    const disc_rec* f = NULL;
    uint64_t n = g_nfreed < DISC_FREED ? g_nfreed : DISC_FREED;
    for (uint64_t k = 0; k < n && f == NULL; k++) {
      const disc_rec* r = &g_freed[(g_nfreed - 1 - k) % DISC_FREED];
      if (r->base != 0 && a - r->base < r->size) f = r;
    }
    out_s(o, "not in a live allocation (");
    if (f != NULL) {
      out_s(o, "freed ");
      out_ms_ago(o, f->free_ns, now);
      out_s(o, ": base ");
      out_x(o, f->base);
      out_s(o, ", ");
      out_u(o, f->size);
      out_s(o, " bytes, offset ");
      out_u(o, a - f->base);
      out_s(o, ", allocated ");
      out_ms_ago(o, f->alloc_ns, now);
      out_rec_origin(o, f);
    } else {
      out_s(o, "never allocated, or freed before the last ");
      out_u(o, DISC_FREED);
      out_s(o, " frees");
    }
    out_s(o, ")\n");
  }
  pthread_mutex_unlock(&g_rec_mu);
}

static struct sigaction g_prev_segv, g_prev_bus;

static void report(int sig, const siginfo_t* si, const disc_view* v) {
  out_buf o = {.n = 0};
  uintptr_t a = (uintptr_t)si->si_addr;
  out_s(&o, "\nsimdev: host access to device memory at ");
  out_x(&o, a);
  out_s(&o, sig == SIGSEGV ? " (SIGSEGV)\n" : " (SIGBUS)\n");
  out_s(&o, "  device: ");
  out_s(&o, (const char*)v->name);
  out_s(&o,
        " is discrete (SIMDEV_DISCRETE=1): its memory is not accessible "
        "to host code, only to simdev's streams\n");
  report_allocation(&o, a);
  char tname[32] = "?";
  (void)prctl(PR_GET_NAME, tname, 0, 0, 0);
  tname[sizeof(tname) - 1] = '\0';
  out_s(&o, "  thread: \"");
  out_s(&o, tname);
  out_s(&o, "\" tid ");
  out_u(&o, (uint64_t)syscall(SYS_gettid));
  out_s(&o,
        "\n  backtrace (the faulting access is in the frame after the "
        "signal frame):\n");
  out_flush(&o);
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  out_s(&o,
        "  hint: run under gdb, which stops at the access itself "
        "(gdb --args python script.py, then run; bt), and see "
        "docs/debugging.md, \"Discrete memory\"\n"
        "simdev: passing the signal on to the previous handler\n");
  out_flush(&o);
}

/* Hands a signal that is not ours to whoever had it before, as the kernel
 * would have delivered it to them (the handler runs with their sa_mask and
 * SA_NODEFER, SA_RESETHAND is honoured). */
static void chain(int sig, siginfo_t* si, void* uc,
                  const struct sigaction* prev) {
  void (*h)(int) = prev->sa_handler; /* shares storage with sa_sigaction */
  if (h == SIG_IGN && si->si_code <= 0) return; /* kill(): ignored, as before */
  if (h == SIG_DFL || h == SIG_IGN) {
    /* Default (or ignored, which the kernel overrides for a real fault):
     * give the signal back to it; the access faults again and the process
     * dies of it, as it would have without simdev. A signal sent with
     * kill() is raised again (default action: death). */
    sigaction(sig, prev, NULL);
    if (si->si_code <= 0) raise(sig);
    return;
  }
  if (prev->sa_flags & SA_RESETHAND) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
  }
  sigset_t mask, old;
  pthread_sigmask(SIG_SETMASK, NULL, &mask);
  for (int s = 1; s < NSIG; s++)
    if (sigismember(&prev->sa_mask, s) == 1) sigaddset(&mask, s);
  if (prev->sa_flags & SA_NODEFER)
    sigdelset(&mask, sig);
  else
    sigaddset(&mask, sig);
  pthread_sigmask(SIG_SETMASK, &mask, &old);
  if (prev->sa_flags & SA_SIGINFO)
    prev->sa_sigaction(sig, si, uc);
  else
    h(sig);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Tid of the thread writing a report, or 0. Taken by compare-and-swap from
 * 0, released only by a compare-and-swap from the holder's own tid. */
static _Atomic int g_reporting;

/* 1 when the previous disposition of a fault in view A will not return:
 * SIG_DFL, or SIG_IGN (which the kernel overrides for a fault). */
static int prev_kills(const struct sigaction* prev) {
  return prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN;
}

static void on_fault(int sig, siginfo_t* si, void* uc) {
  int saved = errno;
  const struct sigaction* prev = sig == SIGSEGV ? &g_prev_segv : &g_prev_bus;
  disc_view v;
  /* si_addr means something only for a fault the kernel raised. */
  if (si->si_code <= 0 || region_of((uintptr_t)si->si_addr, &v, 1) != 0) {
    chain(sig, si, uc, prev);
    errno = saved;
    return;
  }
  /* One report at a time: threads that fault together (TF runs several
   * kernels at once) would interleave their lines. A thread that finds
   * another's report under way waits for it, up to ~2 s, then writes its
   * own anyway. The holder keeps the claim when the previous disposition
   * kills the process (the usual case): a thread that faulted meanwhile
   * then never writes, and the one report is not followed by half of
   * another before the process dies. */
  int me = (int)syscall(SYS_gettid), holder = 0, claimed = 0;
  for (int i = 0; i < 2000; i++) {
    if (atomic_compare_exchange_strong(&g_reporting, &holder, me)) {
      claimed = 1;
      break;
    }
    /* Our own claim: the other signal (SIGBUS in a SIGSEGV report or the
     * reverse; not blocked by ours) came in the middle of our report. The
     * same signal is blocked in its own handler, so a fault of that kind
     * here kills the process at once, without reaching this line. */
    if (holder == me) break;
    holder = 0;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  report(sig, si, &v);
  /* The access runs again on return and meets the previous handler. */
  sigaction(sig, prev, NULL);
  if (claimed && !prev_kills(prev)) {
    holder = me;
    atomic_compare_exchange_strong(&g_reporting, &holder, 0);
  }
  errno = saved;
}

/* fork(): the child has neither view of any discrete region (arena.c maps
 * them MADV_DONTFORK) nor simdev's threads. Its copy of the table would
 * still translate (and report) addresses that its own later mappings may
 * reuse: the child forgets every region. The locks are taken around fork
 * so the child gets them unlocked and consistent. */
static void fork_prepare(void) {
  sim_lock(&g_mu);
  sim_lock(&g_rec_mu);
}
static void fork_parent(void) {
  sim_unlock(&g_rec_mu);
  sim_unlock(&g_mu);
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
  for (size_t i = 0; i < DISC_FREED; i++) g_freed[i].base = 0;
  fork_parent();
}

static void install_handler(void) {
  /* backtrace() loads libgcc's unwinder on first use (dlopen, malloc):
   * do that now, not in the handler. */
  void* f[2];
  (void)backtrace(f, 2);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  SIM_CHECK(sigaction(SIGSEGV, &sa, &g_prev_segv) == 0);
  SIM_CHECK(sigaction(SIGBUS, &sa, &g_prev_bus) == 0);
  SIM_CHECK(pthread_atfork(fork_prepare, fork_parent, fork_child) == 0);
}

static pthread_once_t g_install_once = PTHREAD_ONCE_INIT;

/* ---- region registration (arena.c) --------------------------------------- */

int sim_discrete_region_add(const char* name, void* a, void* b, uint64_t size) {
  pthread_once(&g_install_once, install_handler);
  sim_lock(&g_mu);
  int i = 0;
  while (i < DISC_MAX_REGIONS && regions[i].used) i++;
  if (i == DISC_MAX_REGIONS) {
    sim_unlock(&g_mu);
    sim_create_error_set(
        "SIMDEV_DISCRETE=1: at most %d discrete devices can exist at once "
        "in a process",
        DISC_MAX_REGIONS);
    return SIM_ENOMEM;
  }
  disc_region* r = &regions[i];
  r->used = 1;
  char padded[DISC_NAME_WORDS * 8] = {0};
  copy_str(padded, sizeof(padded), name);
  slot_write_begin(r);
  for (int k = 0; k < DISC_NAME_WORDS; k++) {
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
  sim_unlock(&g_mu);
  return SIM_OK;
}

void sim_discrete_region_remove(void* a) {
  sim_lock(&g_mu);
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
  sim_unlock(&g_mu);
}
