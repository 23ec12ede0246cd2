/*
 * sim_internal.h - what the files of device_sim share with each other;
 * nothing outside device_sim includes it. Grouped by the file that defines
 * each function.
 *
 * Who calls whom (no circle): device -> stream, event, arena, mapped;
 * event -> stream; timer -> stream; arena -> mapped; device, stream and
 * arena -> trace -> trace_names; stream, event and arena -> faults ->
 * trace_names; arena -> discrete_report -> discrete; arena -> discrete; and
 * any of them -> common.c, which calls none of them.
 */
#ifndef SIMDEV_DEVICE_SIM_SIM_INTERNAL_H_
#define SIMDEV_DEVICE_SIM_SIM_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

/* helgrind does not model C11 atomics. SIM_HG_BENIGN declares a flag read
 * relaxed on a hot path benign to it; SIM_HG_BEFORE/AFTER tell it of a
 * release store / acquire load pair that publishes an object. Outside
 * valgrind these are a few no-op instructions. */
#if defined(__has_include)
#if __has_include(<valgrind/helgrind.h>)
#include <valgrind/helgrind.h>
#define SIM_HG_BENIGN(p, n) VALGRIND_HG_DISABLE_CHECKING(p, n)
#define SIM_HG_BEFORE(p) ANNOTATE_HAPPENS_BEFORE(p)
#define SIM_HG_AFTER(p) ANNOTATE_HAPPENS_AFTER(p)
#endif
#endif
#ifndef SIM_HG_BENIGN
#define SIM_HG_BENIGN(p, n) ((void)0)
#define SIM_HG_BEFORE(p) ((void)0)
#define SIM_HG_AFTER(p) ((void)0)
#endif

#define sim_container_of(ptr, type, member) \
  ((type*)((char*)(ptr)-offsetof(type, member)))

/* ---- common.c (also sim.h's sim_strerror, sim_invariant_failed,
 * sim_pthread_failed, sim_cond_init, sim_now_ns) ---- */
/* The calling thread's sim_device_create_error() message (thread-local):
 * _set (printf format) is called by device.c (to clear it) and by the layers
 * below sim_device_create_ex on a failure that has more to say than its
 * error code; _text returns it. Here, not in device.c, so that arena.c and
 * discrete.c can set it without a call circle. */
void sim_create_error_set(const char* fmt, ...)
    __attribute__((format(printf, 1, 2)));
const char* sim_create_error_text(void);
/* Called once per stream, when its sticky status is first set (stream.c's
 * set_sticky, on the thread that ran the failing item, with s->lock held),
 * with the code and the message the stream keeps. It does nothing: it is
 * the one place `break sim_stream_failed` stops at every stream's first
 * failure (docs/debugging.md, "gdb"). A kernel's own failure (sk_fail) is
 * per launch, never a stream failure, and does not come here. */
void sim_stream_failed(const sim_stream* s, int err, const char* msg);

/* Floating-point mode of every device thread (stream workers and pool
 * helpers), set once when the thread starts: denormals flushed to zero,
 * results (FTZ) and inputs (DAZ) alike, as TensorFlow runs its CPU kernels
 * (its thread pools set the same bits). Without it, a float that underflows
 * is a denormal on SIMDEV and 0 on TF's CPU. Other ISAs keep the default
 * IEEE mode: simdev builds on them but only x86-64 is tested. */
void sim_thread_fp_mode(void);
/* The same mode for a while on a thread that is not a device thread (an
 * item run inline on its submitter's thread, stream.c): push returns the
 * caller's mode, pop restores it. */
unsigned sim_fp_mode_push(void);
void sim_fp_mode_pop(unsigned saved);

/* ---- trace.c: the recorder (sim.h, "tracing") ------------------------ */
typedef struct sim_trace_ring sim_trace_ring;

/* Non-zero while a consumer records. Read without a lock (relaxed): the one
 * test the off path makes per item (submit) and per allocation. */
extern __attribute__((visibility("hidden"))) _Atomic int sim_trace_flag;
static inline int sim_trace_on(void) {
  return __builtin_expect(
      atomic_load_explicit(&sim_trace_flag, memory_order_relaxed), 0);
}

/* Set in sim_work.flags by sim_trace_fill, cleared when the item's record is
 * written (stream.c): "this item was submitted while tracing was on". */
#define SIM_WORK_TRACED_ (1u << 31)

/* At submit, tracing on: correlation id, enqueue time and thread, and
 * SIM_WORK_TRACED_. */
void sim_trace_fill(sim_work* w);
/* Appends one item's record to r. Called by the thread that ran the item. */
void sim_trace_item(sim_trace_ring* r, const sim_work_trace* t,
                    uint64_t start_ns, uint64_t end_ns, int status,
                    uint32_t flags);
/* Appends a memory record to dev's ring (op: 1 alloc, -1 free, 0 failed)
 * made by thread tid (sim_trace_tid, taken before the arena lock). Called
 * with dev's arena lock held, which orders a device's records; takes only
 * the ring's lock under it. */
void sim_trace_mem_op(sim_device* dev, int op, const void* addr, uint64_t bytes,
                      uint64_t in_use, int32_t tid);
/* The calling thread's Linux id (never 0); on its first call after a reset
 * it also registers the thread's name (trace_names.c: a lock, a malloc), so
 * call it with no device_sim lock held. */
int32_t sim_trace_tid(void);
/* Every stream and device has a ring header from creation to destruction
 * (born: SIM_ENOMEM if none could be made; gone: the ring stays for
 * snapshots). */
int sim_trace_stream_born(sim_stream* s);
void sim_trace_stream_gone(sim_stream* s);
int sim_trace_device_born(sim_device* dev);
void sim_trace_device_gone(sim_device* dev);

/* ---- trace_names.c: interned strings (sim_trace_intern/name) ---------- */
/* Frees every interned string (sim_trace_reset). */
void sim_trace_names_reset(void);
/* Remembers tid's thread name (empty: nothing to remember; a full table or
 * no memory: forgotten, the exporters fall back to /proc or the number). */
void sim_trace_names_thread(int32_t tid, const char* name);
/* Generation of the table, >= 1; sim_trace_names_reset advances it. */
uint32_t sim_trace_names_gen(void);

/* ---- arena.c: the device region and its jemalloc arena ---------------- */
typedef struct sim_arena sim_arena;
/* discrete: the SIM_DEVICE_DISCRETE mapping (two views of one memfd,
 * registered with discrete.c) instead of private anonymous memory; name is
 * the device's, for reports. */
int sim_arena_create(int ordinal, const char* name, uint64_t bytes,
                     int discrete, sim_arena** out);
int sim_arena_discrete(const sim_arena* a);
void sim_arena_destroy(sim_arena* a);
int sim_arena_numa_node(const sim_arena* a);
int sim_arena_numa_bound(const sim_arena* a);

/* ---- discrete.c: SIM_DEVICE_DISCRETE's regions and records ------------ */
#define SIM_DISC_NAME_WORDS 4 /* device name: 32 bytes, read as 4 words */
#define SIM_DISC_OP_LEN 48
#define SIM_DISC_NAME_LEN 96
#define SIM_DISC_FREED 1024 /* freed allocations remembered for reports */

/* What a reader saw of one region slot, consistently. */
typedef struct sim_disc_view {
  uintptr_t lo;
  uint64_t size;
  intptr_t delta;
  uint64_t name[SIM_DISC_NAME_WORDS + 1]; /* device name, + a NUL word */
} sim_disc_view;

/* One allocation record (live, or freed: free_ns set). */
typedef struct sim_disc_rec {
  uintptr_t base; /* 0: empty slot */
  uint64_t size;
  uint64_t alloc_ns, free_ns;
  int32_t tid;
  char op_type[SIM_DISC_OP_LEN];
  char op_name[SIM_DISC_NAME_LEN];
} sim_disc_rec;

/* Registers a discrete region: a (PROT_NONE, the addresses handed out) and
 * its alias b, size bytes each; registers the fork handlers the first time
 * (the caller installs the fault handler: sim_discrete_report_install).
 * SIM_ENOMEM when too many regions are alive. */
int sim_discrete_region_add(const char* name, void* a, void* b, uint64_t size);
/* Unregisters the region at a and forgets its allocation records. Called
 * before a is unmapped. */
void sim_discrete_region_remove(void* a);
/* Records an allocation [p, p+size) (an A address) with the calling
 * thread's site (sim_mem_set_site) and the time; _free moves it to the
 * freed ring. Discrete devices only (a lock each). */
void sim_discrete_note_alloc(const void* p, uint64_t size);
void sim_discrete_note_free(const void* p);
/* For the fault handler (signal-safe, no lock taken, never blocks): the
 * region holding address a, with its name, copied into *v; 0, or -1 if
 * none. */
int sim_discrete_region_at(uintptr_t a, sim_disc_view* v);
/* The records' lock (g_rec_mu), tried once (pthread_mutex_trylock: the
 * handler may interrupt its holder): 1 if taken; _unlock releases it. */
int sim_discrete_recs_trylock(void);
void sim_discrete_recs_unlock(void);
/* Records' lock held (trylock above): the live record covering a, or the
 * most recent remembered free that covered it; NULL if none. The pointer
 * is valid until the lock is released. */
const sim_disc_rec* sim_discrete_live_at(uintptr_t a);
const sim_disc_rec* sim_discrete_freed_at(uintptr_t a);

/* ---- discrete_report.c: the host-access report (SIGSEGV/SIGBUS) -------- */
/* Installs the fault handler, once per process (later calls return at
 * once); arena.c calls it before registering each discrete region. */
void sim_discrete_report_install(void);

/* ---- device.c ---------------------------------------------------------- */
struct sim_device {
  int ordinal;
  int inline_ok; /* sim_device_set_inline: new streams' default */
  char name[32];
  sim_arena* arena;

  /* Streams alive on this device, for synchronize-all and teardown.
   * Protected by streams_lock; a stream links itself in at creation and out
   * at destruction (stream.c). */
  pthread_mutex_t streams_lock;
  sim_stream* streams;
  int next_stream_id;

  /* Host ranges mapped into the device (mapped.c), changed under
   * mapped_lock; nmapped is also read without it, for the "none mapped"
   * fast path. */
  pthread_mutex_t mapped_lock;
  struct sim_mapped_range* mapped;
  _Atomic int nmapped;
  int capmapped;

  /* Memory records (trace.c); set at creation, written under the arena's
   * lock. */
  sim_trace_ring* trace_mem;
};

/* ---- mapped.c ---------------------------------------------------------- */
typedef struct sim_mapped_range {
  uintptr_t base;
  uint64_t size;
} sim_mapped_range;
void sim_mapped_init(sim_device* dev);
void sim_mapped_destroy(sim_device* dev);
/* 1 if [p, p+size) lies inside one mapped range of dev. */
int sim_mapped_contains(const sim_device* dev, const void* p, uint64_t size);

/* ---- event.c ----------------------------------------------------------- */
/* sim_event_record, never refused by a SIMDEV_FAULTS event rule: for the
 * records device_sim makes for itself (sim_device_synchronize's markers). */
int sim_event_record_marker(sim_event* e, sim_stream* s);

/* ---- stream.c ---------------------------------------------------------- */
struct sim_stream {
  sim_device* dev;
  sim_stream* dev_next; /* device's list; guarded by dev->streams_lock */
  int id;
  pthread_t thread;

  /* `lock` guards everything below. The worker never holds it while running
   * an item, so items may submit to any stream, including their own. */
  pthread_mutex_t lock;
  pthread_cond_t cv_work; /* worker: queue non-empty or stopping */
  pthread_cond_t cv_done; /* synchronizers: `completed` advanced */
  sim_work* head;
  sim_work* tail;
  uint64_t submitted; /* items ever submitted */
  uint64_t completed; /* items whose done has returned */
  int sync_waiters;   /* threads in sim_stream_synchronize */
  /* An item is running (on the worker, or inline on its submitter's thread:
   * sim_stream_run_inline); the worker takes the next item only when it is
   * 0, so items run one at a time in FIFO order whoever runs them. */
  int busy;
  int inline_ok;         /* sim_stream_set_inline; read-only once shared */
  uint64_t eager_queued; /* queued items without SIM_WORK_LAZY */
  int stopping;
  int status;    /* sticky: SIM_OK or the first failure */
  char msg[256]; /* message of the first failure */

  /* The stream's trace ring (trace.c), set at creation; written by whoever
   * runs an item (worker or inline submitter, one at a time), under the
   * ring's own lock, never under `lock`. */
  sim_trace_ring* trace_ring;

  /* stream:fail_at (faults.c): items counted under plan generation
   * fault_gen. Touched only by the thread running the stream's item (one
   * at a time: `busy`), so no lock. */
  uint64_t fault_gen;
  uint64_t fault_items;
};

/* Allocates (zeroed) a work item of `size` bytes, a struct that starts with
 * sim_work, for the convenience items (memcpy, event markers...). Its done
 * callback frees it unless the caller replaces it. NULL if out of memory. */
void* sim_work_alloc(size_t size, sim_work_run_fn run, uint32_t flags,
                     const char* label);

/* ---- faults.c: the fault plan (sim.h, "fault injection") -------------- */
/* The plan in force, NULL while none is. The sites test it first (one
 * relaxed load) and call the functions below only when it is set; those
 * load it again (acquire) and judge the operation by that one plan. */
struct sim_fault_plan;
extern __attribute__((
    visibility("hidden"))) _Atomic(struct sim_fault_plan*) sim_faults_plan;
static inline int sim_faults_on(void) {
  return __builtin_expect(
      atomic_load_explicit(&sim_faults_plan, memory_order_relaxed) != NULL, 0);
}
/* An allocation of `size` bytes on device dev_name: 1 if the plan refuses
 * it (counted, reported), else 0. Any thread, no lock held. */
int sim_faults_alloc(const char* dev_name, uint64_t size);
/* An event record: SIM_EFAILED if the plan refuses it, else SIM_OK. */
int sim_faults_event(void);
/* A stream item, called by the thread about to run it (after_run 0: may
 * fail it instead of running it: memcpy, launch, stream kinds) or that ran
 * it successfully (after_run 1: callback kind). SIM_EFAILED with msg if the
 * plan fails it, else SIM_OK. No device_sim lock held. */
int sim_faults_item(sim_stream* s, sim_work* w, int after_run, char* msg,
                    size_t msg_len);

#endif /* SIMDEV_DEVICE_SIM_SIM_INTERNAL_H_ */
