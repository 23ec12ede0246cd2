/*
 * sim.h - the simulated device: memory arenas, streams, events, timers.
 *
 * device_sim knows nothing about TensorFlow. It models an accelerator the way
 * a driver API does (think of the CUDA driver API, minus the GPU): a device
 * owns a memory region; streams are in-order work queues, each served by one
 * worker thread; events mark points in a stream that other streams or the host
 * can wait for.
 *
 * Conventions
 *   - Functions return 0 (SIM_OK) or a negative sim_err. Bad caller input is
 *     SIM_EINVAL; a pthread call failing on a valid object is a broken
 *     invariant and aborts with file and line (SIM_CHECK, below).
 *   - Every object is created and destroyed by the caller; destroy functions
 *     accept objects that still have work queued and wait for it (streams
 *     drain, events are reference counted by the work that names them).
 *   - All functions are thread-safe unless a comment says otherwise.
 *   - Nothing here allocates per byte of payload: work items are intrusive
 *     (sim_work), memcpy/memset helpers allocate one small item each.
 */
#ifndef SIMDEV_DEVICE_SIM_SIM_H_
#define SIMDEV_DEVICE_SIM_SIM_H_

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sim_err {
  SIM_OK = 0,
  SIM_EINVAL = -1,    /* bad argument: NULL, size, pointer outside a region */
  SIM_ENOMEM = -2,    /* device region or host memory exhausted */
  SIM_ESTREAM = -3,   /* stream is in a sticky error state */
  SIM_EFAILED = -4,   /* a work item (kernel, callback) reported failure */
  SIM_ENOTREADY = -5, /* result not available yet (timer not stopped) */
  SIM_ESYS = -6,      /* the OS refused (mmap, thread creation, hwloc) */
} sim_err;

/* Static string for an error code; never NULL. */
const char* sim_strerror(int err);

/* CLOCK_MONOTONIC now, in nanoseconds: the clock stream timers read. */
uint64_t sim_now_ns(void);

/* ---------------------------------------------------------------- config */

#define SIM_MAX_DEVICES 16
#define SIM_MAX_MEMORY_MB (1024 * 1024) /* 1 TiB of address space */

typedef struct sim_config {
  int device_count;   /* SIMDEV_DEVICE_COUNT, 1..SIM_MAX_DEVICES, default 1 */
  uint64_t memory_mb; /* SIMDEV_MEMORY_MB, 1..SIM_MAX_MEMORY_MB, default 2048 */
  /* SIMDEV_SYNC, 0 or 1, default 0: every kernel launch has run before its
   * compute function returns (the analogue of CUDA_LAUNCH_BLOCKING). */
  int sync_launch;
  /* SIMDEV_UNSAFE_EARLY_COMPLETION, 0 or 1, default 0: report kernels
   * complete as soon as they are queued. Wrong on purpose (the "naive"
   * design); it exists so tests can show the hazards they catch. */
  int unsafe_early_completion;
  /* SIMDEV_INLINE, 0 or 1, default 0: small work on an idle stream (kernel
   * launches holding at most 256 KiB of tensors, copies and memsets up to
   * 64 KiB, event records) runs at once on the thread that enqueues it
   * (sim_stream_run_inline), in stream order, instead of being handed to
   * the stream's worker. Faster for models made of tiny kernels; off by
   * default because a device runs its work on its own threads, and that is
   * what simdev is for (async bugs show; thread names in gdb are the
   * streams'). Streams take it from sim_stream_set_inline. */
  int inline_small;
  /* SIMDEV_DISABLE, 0 or 1, default 0: the plugin registers its platform
   * but offers no device (TensorFlow carries on with its CPU). Read first:
   * when it is 1 the other variables are not read, so a broken setting can
   * be switched off with it. */
  int disabled;
  /* SIMDEV_TRACE, a file path, default unset (""): record everything from
   * start-up and write it as Chrome trace-event JSON at exit
   * (src/profiler/). The plugin checks at start-up that it can write it. */
  char trace_path[4096];
  /* SIMDEV_TRACE_EVENTS, 1024..SIM_TRACE_MAX_RECORDS, default
   * SIM_TRACE_DEFAULT_RECORDS: records kept per stream ring. */
  uint32_t trace_records;
  /* SIMDEV_DISCRETE, 0 or 1, default 0: devices are created with
   * SIM_DEVICE_DISCRETE (below): host code that touches device memory
   * faults, with a report. */
  int discrete;
  /* SIMDEV_BFC, 0 or 1, default 1: TensorFlow's BFC allocator sits on the
   * plugin's allocate (few large allocations). 0: every tensor is one
   * sim_mem_alloc, so valgrind, discrete-mode reports and alloc faults see
   * each tensor (slower; for debugging). Read by src/se only.
   * Unset while SIMDEV_FAULTS has an alloc rule: 0, and bfc_off_for_faults
   * is 1 (the plugin says so on stderr): under BFC the rule would count
   * BFC's few chunk allocations, not tensors, and fire rarely or never. */
  int bfc;
  int bfc_off_for_faults;
  /* SIMDEV_FAULTS, default unset (""): the fault plan (sim_faults_set,
   * below). sim_config_from_env checks its grammar; the caller installs it
   * with sim_faults_set. */
  char faults[1024];
} sim_config;

/* Reads SIMDEV_* variables into *cfg (defaults for unset ones). On a bad
 * value returns SIM_EINVAL and writes a message naming the variable, the value
 * and the accepted range into msg (always NUL-terminated). */
int sim_config_from_env(sim_config* cfg, char* msg, size_t msg_len);

/* A broken internal invariant (a pthread call failing on a valid object, a
 * corrupted queue): report file and line, then abort. Never used for bad
 * caller input, which gets an error code. Shared with the plugin's layers. */
#define SIM_CHECK(cond)                                           \
  do {                                                            \
    if (!(cond)) sim_invariant_failed(__FILE__, __LINE__, #cond); \
  } while (0)
void sim_invariant_failed(const char* file, int line, const char* what)
    __attribute__((noreturn));

/* ------------------------------------------------- checked pthread calls */
/* Every pthread call on a mutex or condition variable, in device_sim and in
 * the plugin's layers alike, goes through these. On a valid, initialised
 * object such a call cannot fail, so a non-zero result (EINVAL: destroyed or
 * never initialised; on an error-checking mutex, EDEADLK: relocked by its
 * holder, EPERM: unlocked by another thread) is a broken invariant:
 * SIM_CHECK's report, with the caller's file and line, the call and its
 * error, then abort. They are macros so that the
 * report names the caller, not this header; they call pthread directly, so
 * helgrind and ThreadSanitizer, which intercept the pthread functions, see
 * every lock, unlock and wait as before. */
#define SIM_CHECK_PT(call) sim_pt_check_((call), __FILE__, __LINE__, #call)
#define sim_mutex_init(m) SIM_CHECK_PT(pthread_mutex_init((m), NULL))
#define sim_mutex_destroy(m) SIM_CHECK_PT(pthread_mutex_destroy(m))
#define sim_mutex_lock(m) SIM_CHECK_PT(pthread_mutex_lock(m))
#define sim_mutex_unlock(m) SIM_CHECK_PT(pthread_mutex_unlock(m))
/* 1 if the lock was taken, 0 if it is held (EBUSY), by another thread or,
 * for a default (non-recursive) mutex, by the caller itself. */
#define sim_mutex_trylock(m)                                \
  sim_pt_try_(pthread_mutex_trylock(m), __FILE__, __LINE__, \
              "pthread_mutex_trylock(" #m ")")
#define sim_cond_destroy(c) SIM_CHECK_PT(pthread_cond_destroy(c))
#define sim_cond_wait(c, m) SIM_CHECK_PT(pthread_cond_wait((c), (m)))
#define sim_cond_signal(c) SIM_CHECK_PT(pthread_cond_signal(c))
#define sim_cond_broadcast(c) SIM_CHECK_PT(pthread_cond_broadcast(c))
/* Initialises a condvar on CLOCK_MONOTONIC (a function: four checked calls),
 * so that a timed wait on it (there is none today) ignores wall-clock
 * jumps. */
void sim_cond_init(pthread_cond_t* c);

/* The report and abort behind SIM_CHECK_PT: `what` returned error rc. */
void sim_pthread_failed(const char* file, int line, const char* what, int rc)
    __attribute__((noreturn));
static inline void sim_pt_check_(int rc, const char* file, int line,
                                 const char* what) {
  if (__builtin_expect(rc != 0, 0)) sim_pthread_failed(file, line, what, rc);
}
static inline int sim_pt_try_(int rc, const char* file, int line,
                              const char* what) {
  if (rc == EBUSY) return 0;
  sim_pt_check_(rc, file, line, what);
  return 1;
}

/* ---------------------------------------------------------------- device */

typedef struct sim_device sim_device;

/* Creates device `ordinal`: reserves a region of memory_mb MiB, binds it to a
 * NUMA node (ordinal modulo the node count) when the OS allows it, and builds
 * a jemalloc arena over it. Fails with SIM_ENOMEM if the region cannot be
 * reserved, SIM_ESYS if hwloc or jemalloc refuse. */
int sim_device_create(int ordinal, uint64_t memory_mb, sim_device** out);

enum sim_device_flags {
  /* Discrete memory (SIMDEV_DISCRETE=1), the way a PCIe accelerator's is:
   * the addresses sim_mem_alloc hands out are not accessible to host code
   * (a read or write faults at once and device_sim prints a report to
   * stderr: the address, the allocation it falls in with its size, age and
   * the op that allocated it, the thread and a backtrace; then the SIGSEGV
   * goes to the handler installed before the first discrete device, or
   * kills the process as it would have). simdev's own code reaches the
   * bytes through sim_mem_alias (below): the copies, kernels, memsets and
   * DLPack. The region is one memfd mapped twice (arena.c); the report's
   * handler is discrete.c's, installed once per process, when the first
   * discrete device is created.
   * What is trapped is host code that dereferences the addresses handed
   * out; sim_mem_alias works on any thread, so simdev's own code (a kernel
   * that read a device input on TF's thread through its alias) is not held
   * to the worker threads. A fork()ed child has neither view (MADV_DONTFORK)
   * and no discrete device: its accesses to those addresses fault, without
   * a report. */
  SIM_DEVICE_DISCRETE = 1u << 0,
};
/* sim_device_create with flags (sim_device_flags); 0 = sim_device_create. */
int sim_device_create_ex(int ordinal, uint64_t memory_mb, unsigned flags,
                         sim_device** out);
/* Why the calling thread's last sim_device_create(_ex) failed, when there
 * is more to say than its error code (a SIM_DEVICE_DISCRETE device refused
 * because of `ulimit -f`, the table of discrete devices full, memfd_create
 * refused, jemalloc set to fill memory); "" otherwise. Thread-local, valid
 * until the thread's next sim_device_create(_ex). */
const char* sim_device_create_error(void);
/* 1 if dev was created with SIM_DEVICE_DISCRETE. */
int sim_device_discrete(const sim_device* dev);

/* Drains and destroys every stream still alive on the device, then releases
 * the arena and the region. Device pointers become invalid. */
void sim_device_destroy(sim_device* dev);

int sim_device_ordinal(const sim_device* dev);
/* NUMA node (OS index) of the region, or -1 if the machine reports none. */
int sim_device_numa_node(const sim_device* dev);
/* 1 if the region was actually bound with hwloc, 0 if binding was refused
 * (e.g. a single-node machine whose kernel lacks mbind): memory is still
 * valid, just not pinned to a node. */
int sim_device_numa_bound(const sim_device* dev);
/* "simdev-<n>" style hardware name, stable for the device's lifetime. */
const char* sim_device_name(const sim_device* dev);

/* Blocks until every stream of the device has run all the work enqueued
 * before this call. Returns the first sticky error among them, else SIM_OK. */
int sim_device_synchronize(sim_device* dev);

/* ---------------------------------------------------------------- memory */

#define SIM_MEM_ALIGN 64

typedef struct sim_mem_stats {
  uint64_t bytes_in_use;      /* sum of usable sizes of live allocations */
  uint64_t peak_bytes_in_use; /* high-water mark of bytes_in_use */
  uint64_t num_allocs;        /* successful allocations since creation */
  uint64_t num_frees;
  uint64_t largest_alloc;  /* largest single usable size handed out */
  uint64_t bytes_limit;    /* size of the region */
  uint64_t bytes_reserved; /* region bytes handed to jemalloc so far */
  uint64_t num_failed;     /* allocations refused for lack of space */
} sim_mem_stats;

/* Allocates `size` bytes (SIM_MEM_ALIGN aligned) from the device region.
 * size 0 gets a valid minimal allocation. Returns NULL when the region is
 * exhausted; nothing else happens then (no abort, no fallback to malloc). */
void* sim_mem_alloc(sim_device* dev, uint64_t size);
/* Frees p (NULL is a no-op). p must come from sim_mem_alloc on dev. */
void sim_mem_free(sim_device* dev, void* p);
/* Usable size of a live allocation (>= requested). */
uint64_t sim_mem_usable_size(sim_device* dev, const void* p);
void sim_mem_get_stats(sim_device* dev, sim_mem_stats* out);
/* 1 if [p, p+size) lies inside dev's region or inside one host range
 * mapped into dev. */
int sim_mem_contains(const sim_device* dev, const void* p, uint64_t size);

/* The address at which simdev's own code (kernels, copies, DLPack) reads
 * and writes device pointer p: p itself, except for a pointer inside the
 * region of a SIM_DEVICE_DISCRETE device, which gets its alias (the same
 * bytes, mapped a second time at a fixed offset). A lock-free lookup in
 * a small table, any thread (one relaxed load when no discrete device was
 * ever created); p may be any pointer (host memory comes back as it is).
 * Never hand the result to code outside simdev, except as what a DLPack
 * export shares (the host-mapped view of the buffer). Nothing checks which
 * thread calls it: keeping device bytes to simdev's workers is up to the
 * callers (kernels take aliases on TF's thread, for their worker). */
void* sim_mem_alias(const void* p);

/* What sim_mem_alloc records about an allocation for discrete-mode reports:
 * the op being run on the calling thread when it allocated. The kernel
 * layer sets it around TF's compute call (TF allocates a kernel's outputs
 * on that thread); NULL clears. The strings are copied (truncated) at
 * allocation; they must live until the matching clear. Thread-local, cheap:
 * callable whether or not any device is discrete. */
void sim_mem_set_site(const char* op_type, const char* op_name);

/* Maps the host range [p, p+size) into dev, like cuMemHostRegister: device
 * memory for sim_mem_contains until unregistered (a zero-copy DLPack import
 * lives in it). The memory stays the caller's; nothing is counted in the
 * device's stats. A range may be registered several times; each
 * registration needs its own unregister with the same p and size.
 * SIM_EINVAL for NULL/empty/wrapping ranges (or an unregister of a range
 * not registered), SIM_ENOMEM. Thread-safe. */
int sim_mem_register_host(sim_device* dev, void* p, uint64_t size);
int sim_mem_unregister_host(sim_device* dev, void* p, uint64_t size);

/* Host ("pinned") staging memory: separate from the device region, counted
 * separately. Aligned to SIM_MEM_ALIGN. */
void* sim_host_alloc(sim_device* dev, uint64_t size);
void sim_host_free(sim_device* dev, void* p);
uint64_t sim_host_bytes_in_use(sim_device* dev);

/* ---------------------------------------------------------------- streams */

typedef struct sim_stream sim_stream;
typedef struct sim_work sim_work;

/* A unit of work on a stream. Intrusive: embed it in your own struct and get
 * back to that struct in the callbacks (put it first and cast, as simdev's
 * own items do, or subtract its offsetof); the stream never allocates for
 * it.
 *
 * run:  called on the stream's worker thread, in FIFO order. Returns 0 or a
 *       negative sim_err; on failure it may write a message into msg (msg_len
 *       bytes, NUL-terminated). A failure makes the stream's status sticky.
 * done: called exactly once, on the worker, after run (status = its result)
 *       or instead of run (status = SIM_ESTREAM) when the stream already failed
 *       and the item is not SIM_WORK_ALWAYS_RUN. done may free the item.
 *       May be NULL.
 * The caller must not touch the item between submit and done.
 * Numerics: workers and sim_parallel_for's helpers run with denormals
 * flushed to zero (x86 MXCSR FTZ and DAZ), as TensorFlow's CPU threads do. */
typedef int (*sim_work_run_fn)(sim_work* w, char* msg, size_t msg_len);
typedef void (*sim_work_done_fn)(sim_work* w, int status);

enum sim_work_flags {
  /* Run even when the stream is in error: events, waits, host callbacks and
   * timers must still complete so nobody waiting on them hangs. */
  SIM_WORK_ALWAYS_RUN = 1u << 0,
  /* Run as late as the stream allows: the item waits at the head of the
   * queue until an item without this flag is queued behind it, a
   * synchronize starts, or the stream stops. Only for the kernels' naive
   * mode (SIMDEV_UNSAFE_EARLY_COMPLETION), which must lose every race with
   * host code deterministically instead of most of the time. */
  SIM_WORK_LAZY = 1u << 1,
  /* Bit 31 is device_sim's own (the trace recorder marks a traced item
   * with it while it is queued); leave it clear. */
};

/* What the recorder (sim_trace_*, below) needs to know about an item. The
 * submitter sets kind, name, type and bytes (all 0 = SIM_TRACE_OTHER with
 * no name: fine for items nobody profiles); device_sim's own items (copies,
 * memsets, events, waits, callbacks, timers) set theirs. The stream fills
 * the rest at submit when tracing is on; nobody reads it when it is off. */
typedef struct sim_work_trace {
  uint32_t kind;  /* sim_trace_kind; 0 = SIM_TRACE_OTHER */
  uint32_t name;  /* sim_trace_intern id: a kernel's node name; 0 = none */
  uint32_t type;  /* sim_trace_intern id: a kernel's op type; 0 = none */
  uint32_t peer;  /* waits: sim_trace_stream_key of the stream waited for */
  uint64_t bytes; /* copies and memsets: payload bytes */
  /* Filled by sim_stream_submit / sim_stream_run_inline when tracing is on: */
  uint64_t id;     /* correlation id, process-wide, from 1; 0 = not traced */
  uint64_t enq_ns; /* sim_now_ns() at submit */
  int32_t enq_tid; /* Linux thread id of the submitter */
} sim_work_trace;

struct sim_work {
  sim_work* next; /* queue link; owned by the stream while queued */
  sim_work_run_fn run;
  sim_work_done_fn done;
  uint32_t flags;
  const char* label; /* for error messages and debugging; static string */
  sim_work_trace trace;
};

/* Creates a stream and starts its worker thread (named "simdev<d>-s<n>"). */
int sim_stream_create(sim_device* dev, sim_stream** out);
/* Waits for every queued item to run (or be drained), joins the worker and
 * frees the stream. Must not be called from the stream's own worker. */
void sim_stream_destroy(sim_stream* s);
sim_device* sim_stream_device(const sim_stream* s);

/* Enqueues w. Returns SIM_EINVAL for a NULL/incomplete item; never blocks on
 * queued work. Submitting to a stream in error is allowed: the item is drained
 * (done(SIM_ESTREAM)) unless it is SIM_WORK_ALWAYS_RUN. */
int sim_stream_submit(sim_stream* s, sim_work* w);

/* Runs w now, on the calling thread, if the stream is idle (nothing queued,
 * nothing running, not stopping): the same order, sticky-error handling,
 * FP mode and done callback as if it had been submitted and the worker had
 * run it at once; items submitted meanwhile (from any thread) wait until it
 * is done. Returns 1 if it ran w (done has been called), 0 if the stream was
 * busy, w is SIM_WORK_LAZY, the caller is a stream worker or an item
 * running inline, or inline runs are off for s (sim_stream_set_inline;
 * then submit it); SIM_EINVAL for a NULL/incomplete item. Why: a tiny
 * kernel costs less
 * than the hand-off to the worker and back; a GPU driver's idle queue
 * starts a launch at once too. The caller must not hold a lock that w's run
 * or done takes. */
int sim_stream_run_inline(sim_stream* s, sim_work* w);
/* Whether sim_stream_run_inline may run items of s (on: 1). Off for a new
 * stream: run_inline then returns 0 and the caller submits. Set it before
 * the stream is shared. */
void sim_stream_set_inline(sim_stream* s, int on);
/* The default for streams created on dev from now on (SIMDEV_INLINE,
 * sim_config.inline_small); set it before creating streams. */
void sim_device_set_inline(sim_device* dev, int on);

/* Blocks the caller until everything enqueued before the call has finished.
 * Returns the stream's sticky status. Must not be called from its worker. */
int sim_stream_synchronize(sim_stream* s);

/* Sticky status: SIM_OK, or the first failure. If msg is non-NULL the first
 * failure's message is copied there ("" when OK). */
int sim_stream_status(sim_stream* s, char* msg, size_t msg_len);

/* 1 if the calling thread is s's worker (used to refuse self-deadlocks). */
int sim_stream_is_current(const sim_stream* s);

/* Convenience items; each allocates one small work item (SIM_ENOMEM if that
 * fails). Copies run with memcpy/memmove semantics on the worker, or, up to
 * 64 KiB on an idle stream, at once on the caller's thread
 * (sim_stream_run_inline). The caller keeps src/dst alive until the item ran
 * (synchronize or an event). */
int sim_memcpy_async(sim_stream* s, void* dst, const void* src, uint64_t n);
/* The same, with the direction the recorder shows (SIM_TRACE_MEMCPY_H2D ..
 * SIM_TRACE_MEMCPY_H2H, else SIM_EINVAL) given by the caller, who knows it:
 * sim_memcpy_async works it out from s's device alone, so a copy between
 * two devices would look like a host copy. */
int sim_memcpy_async_kind(sim_stream* s, void* dst, const void* src, uint64_t n,
                          int kind);
int sim_memset8_async(sim_stream* s, void* dst, uint8_t value, uint64_t n);
/* n is in bytes and must be a multiple of 4 (SIM_EINVAL otherwise); dst must
 * be 4-byte aligned. */
int sim_memset32_async(sim_stream* s, void* dst, uint32_t value, uint64_t n);

/* Host callback: fn(arg) runs on the worker in stream order, also when the
 * stream is in error (then stream_status tells it which). A non-zero return
 * makes the stream's status sticky (SIM_EFAILED) with msg from the callback. */
typedef int (*sim_host_fn)(void* arg, int stream_status, char* msg,
                           size_t msg_len);
int sim_host_callback_async(sim_stream* s, sim_host_fn fn, void* arg);

/* The dependent stream will not run work enqueued after this call until
 * `other` has run everything enqueued on it before this call. The host does
 * not block. */
int sim_stream_wait_stream(sim_stream* dependent, sim_stream* other);

/* ---------------------------------------------------------------- events */

typedef struct sim_event sim_event;

typedef enum sim_event_state {
  SIM_EVENT_COMPLETE = 0, /* never recorded, or the last record has run */
  SIM_EVENT_PENDING = 1,  /* the last record has not run yet */
  SIM_EVENT_ERROR = 2,    /* the last record ran on a stream in error */
} sim_event_state;

int sim_event_create(sim_event** out);
/* Safe while records or waits naming the event are still queued: they hold
 * references; the memory goes when the last one ran. */
void sim_event_destroy(sim_event* e);
/* Enqueues a marker on s; the event becomes PENDING now and COMPLETE (or
 * ERROR) when the marker runs (at once, on the caller's thread, when s is
 * idle: sim_stream_run_inline). Re-recording an event moves it to the new
 * marker, as in CUDA. */
int sim_event_record(sim_event* e, sim_stream* s);
/* Work enqueued on s after this call waits for the event's last record (as of
 * this call) to run. The host does not block. */
int sim_stream_wait_event(sim_stream* s, sim_event* e);
sim_event_state sim_event_query(sim_event* e);
/* Blocks the host until the last record (as of this call) ran. Returns
 * SIM_OK, or SIM_ESTREAM if it ran on a stream in error. */
int sim_event_synchronize(sim_event* e);

/* ---------------------------------------------------------------- timers */

typedef struct sim_timer sim_timer;

int sim_timer_create(sim_timer** out);
void sim_timer_destroy(sim_timer* t); /* waits for queued start/stop items */
/* Enqueue a timestamp (CLOCK_MONOTONIC, taken on the worker) on s. */
int sim_timer_start(sim_timer* t, sim_stream* s);
int sim_timer_stop(sim_timer* t, sim_stream* s);
/* Nanoseconds between the start and stop items. Blocks until the stop item
 * has run if it is queued; SIM_ENOTREADY if start/stop were never enqueued. */
int sim_timer_elapsed_ns(sim_timer* t, uint64_t* ns);

/* ---------------------------------------------------------------- tracing */

/* A recorder of what the devices do, for profilers: src/profiler/ turns a
 * snapshot into Chrome trace-event JSON (SIMDEV_TRACE) and into TensorFlow's
 * XSpace (TF_InitProfiler). Off by default; off, it costs each work item one
 * predictable branch (a relaxed load of one flag, at submit or inline run;
 * the worker's run path tests a bit of the item's flags together with the
 * stream's error state, in the one branch it always had), and each device
 * allocation or free the same.
 *
 * On, every item a stream runs, or drains because the stream failed, becomes
 * one sim_trace_rec in that stream's ring, written by the thread that ran it
 * (the worker, or the submitter for an inline run); every device allocation
 * and free becomes one sim_trace_mem in its device's ring. A full ring
 * overwrites its oldest record and counts it in `dropped`: recording never
 * waits for room and never grows past its capacity (it does wait, briefly,
 * while a snapshot copies that ring). `dropped` counts since the ring was
 * last cleared (the first start with no consumer active), not per
 * snapshot window: a TF profiler session inside a SIMDEV_TRACE run sees the
 * run's drops. Rings outlive their stream or
 * device (a profile is read after the work ran) until the next
 * sim_trace_start that finds no consumer active, or sim_trace_reset; a new
 * stream or device with the same key (a device created again restarts its
 * stream ids) continues the old ring. The rings of the 64 most recently
 * destroyed streams are kept; an older one is freed and the records it held
 * are counted in its device's `dropped`.
 *
 * Which items are recorded: those submitted (or run inline) while recording
 * is on; such an item is recorded when it runs even if recording stopped
 * meanwhile. A record is written after the item's run returned and before
 * its done is called: whoever done wakes (a synchronize, TF's executor)
 * finds the record there. Waiters an item wakes from inside its run (an
 * event record's, a host callback's) may see it complete an instant before
 * its record exists. An event wait or stream wait whose record has
 * already run enqueues nothing and leaves no record (the record on the
 * other stream is still there).
 *
 * Times are CLOCK_MONOTONIC nanoseconds (sim_now_ns). All functions are
 * thread-safe. */

typedef enum sim_trace_kind {
  SIM_TRACE_OTHER = 0,      /* submitted without trace info */
  SIM_TRACE_KERNEL = 1,     /* name = node name, type = op type */
  SIM_TRACE_MEMCPY_H2D = 2, /* copies: sim_memcpy_async_kind's kind, or */
  SIM_TRACE_MEMCPY_D2H = 3, /* sim_memcpy_async's guess from its device */
  SIM_TRACE_MEMCPY_D2D = 4,
  SIM_TRACE_MEMCPY_H2H = 5,
  SIM_TRACE_MEMSET = 6,
  SIM_TRACE_EVENT_RECORD = 7,
  SIM_TRACE_EVENT_WAIT = 8,  /* peer = the stream the event was recorded on;
                                start..end is the time the stream waited */
  SIM_TRACE_STREAM_WAIT = 9, /* sim_stream_wait_stream: peer = `other` */
  SIM_TRACE_HOST_CALLBACK = 10,
  SIM_TRACE_TIMER = 11,
  SIM_TRACE_KIND_COUNT
} sim_trace_kind;

/* Static name of a kind ("kernel", "memcpy_h2d", ...); never NULL. */
const char* sim_trace_kind_name(int kind);

/* Default and limit of each ring, a stream's or a device's memory ring
 * (SIMDEV_TRACE_EVENTS). A record is 72 bytes: the default is 4.5 MiB per
 * ring at most, the limit 72 MiB (rings grow by doubling as they fill). */
#define SIM_TRACE_DEFAULT_RECORDS 65536u
#define SIM_TRACE_MAX_RECORDS (1u << 20)

enum sim_trace_rec_flags {
  SIM_TRACE_INLINE = 1u << 0, /* ran on the submitter's thread */
};

typedef struct sim_trace_rec {
  uint64_t id;       /* sim_work_trace.id */
  uint64_t enq_ns;   /* submitted */
  uint64_t start_ns; /* run began (drained: = end_ns; inline: = enq_ns) */
  uint64_t end_ns;   /* run returned (done is called after) */
  uint64_t bytes;
  uint32_t kind, name, type, peer; /* as in sim_work_trace */
  int32_t enq_tid;
  int32_t status; /* what run returned; SIM_ESTREAM if drained */
  uint32_t flags; /* sim_trace_rec_flags */
} sim_trace_rec;

typedef struct sim_trace_mem {
  uint64_t ns;
  uint64_t addr;
  uint64_t bytes;  /* usable size allocated or freed; requested if failed */
  uint64_t in_use; /* the device's bytes_in_use after this */
  int32_t tid;
  int32_t op; /* 1 alloc, -1 free, 0 failed alloc */
} sim_trace_mem;

/* One stream's records in a snapshot, oldest first (ascending start_ns). */
typedef struct sim_trace_stream {
  int device;       /* ordinal */
  int stream;       /* id on the device: the worker is "simdev<d>-s<n>" */
  uint32_t key;     /* sim_trace_stream_key(device, stream) */
  int alive;        /* 0: the stream was destroyed since */
  uint64_t dropped; /* records overwritten since recording started */
  size_t count;
  sim_trace_rec* recs;
} sim_trace_stream;

typedef struct sim_trace_device {
  int device;
  /* Memory records overwritten, plus the records of destroyed streams'
   * rings freed to bound memory (see above): add the device's streams'
   * `dropped` for all records lost on the device. */
  uint64_t dropped;
  size_t count;
  sim_trace_mem* mem; /* ascending ns */
} sim_trace_device;

typedef struct sim_trace_snapshot {
  uint64_t begin_ns, end_ns; /* the window (end_ns 0 asked: the take time) */
  /* CLOCK_REALTIME minus CLOCK_MONOTONIC, in ns, read when the snapshot was
   * taken: TensorFlow's profiler stamps its events with the wall clock. */
  int64_t realtime_offset_ns;
  size_t nstreams; /* ordered by device, then stream id */
  sim_trace_stream* streams;
  size_t ndevices; /* ordered by ordinal */
  sim_trace_device* devices;
} sim_trace_snapshot;

/* (device << 16 | stream) + 1: never 0, so 0 can mean "none". Stream ids
 * only grow, so past 65536 streams created on one device two keys meet
 * (TensorFlow creates a handful per device, once). */
static inline uint32_t sim_trace_stream_key(int device, int stream) {
  return (((uint32_t)device << 16) | ((uint32_t)stream & 0xffffu)) + 1u;
}

/* A consumer starts recording; recording goes on until every start has its
 * stop (extra stops are ignored). ring_records is the capacity of each ring,
 * streams' and devices' alike (0: the default; must be <=
 * SIM_TRACE_MAX_RECORDS, else SIM_EINVAL). The first start while no consumer
 * is active empties every ring (freeing those of destroyed streams) and gives
 * them this capacity; a nested start's capacity applies only to rings created
 * from then on. A ring's buffer is allocated as records arrive, doubling up
 * to its capacity, so start never fails for memory; when a buffer cannot
 * grow, the ring overwrites its oldest records early (counted in dropped). */
int sim_trace_start(uint32_t ring_records);
void sim_trace_stop(void);
/* 1 while at least one consumer records. */
int sim_trace_active(void);

/* Copies every record with start_ns (mem: ns) in [begin_ns, end_ns] (end_ns
 * 0: up to now; the snapshot's end_ns says when that was), whether
 * recording is on or not. A stream or device is listed if it has records in
 * the window or dropped any (a stream that never recorded is not). *out is
 * freed with sim_trace_snapshot_free. SIM_ENOMEM, SIM_EINVAL (out NULL). */
int sim_trace_snapshot_take(uint64_t begin_ns, uint64_t end_ns,
                            sim_trace_snapshot** out);
void sim_trace_snapshot_free(sim_trace_snapshot* snap);

/* Interns s (copied) and returns its id, >= 1; equal strings get one id.
 * 0 for NULL or when the table is full or out of memory (the record then
 * just has no name). Meant for construction time (a kernel's name, once),
 * not per item: it takes a lock. */
uint32_t sim_trace_intern(const char* s);
/* The string of id; "" for 0 or an unknown id. Valid until sim_trace_reset. */
const char* sim_trace_name(uint32_t id);
/* The name a recorded thread had (pthread_getname_np) when it first
 * submitted or allocated while tracing was on, or NULL if unknown. Taken
 * then because exporters run later, often after the thread is gone.
 * Valid until sim_trace_reset. */
const char* sim_trace_thread_name(int32_t tid);

/* Frees every ring and interned string. Only with no consumer active and
 * no stream or device alive (tests, end of a harness run); SIM_EINVAL
 * otherwise. */
int sim_trace_reset(void);

/* ------------------------------------------------------ fault injection */

/* A process-wide fault plan (SIMDEV_FAULTS) makes chosen operations fail the
 * way a real device error would, never with a crash:
 *
 *   alloc            sim_mem_alloc returns NULL (counted in num_failed; no
 *                    other stat changes)
 *   memcpy_h2d/_d2h/_d2d  a copy item (its trace kind, as given to
 *                    sim_memcpy_async_kind) is not run: the stream's status
 *                    becomes sticky (SIM_EFAILED), its done gets SIM_EFAILED
 *   launch           a kernel item (trace kind SIM_TRACE_KERNEL; op= matches
 *                    sim_trace_name of its trace type) is not run: the same
 *   stream           fail_at=N: on every stream, the Nth item it runs that
 *                    is not SIM_WORK_ALWAYS_RUN (kernels, copies, memsets,
 *                    plain items; events, waits, callbacks and timers always
 *                    run) is not run: the same
 *   event            sim_event_record returns SIM_EFAILED at once, enqueues
 *                    nothing and leaves the event as it was
 *   callback         a host callback item runs (the callback sees it all),
 *                    then fails as if the callback had: sticky SIM_EFAILED
 *
 * Triggers: nth=N (the Nth matching operation since the plan was installed
 * fails, once), every=N (operations N, 2N, ...), p=P (each with
 * probability P, decided by a hash of seed, rule and operation number, so
 * a seed reproduces the same failures given the same sequence of
 * operations), alloc's after_bytes=SIZE (every allocation from the one that
 * takes the bytes requested since installation above SIZE). Matching
 * operations are counted process-wide across devices and streams, except
 * fail_at's, per stream; an operation counts for every rule it matches.
 * Items drained from a failed stream are not operations.
 *
 * The grammar (docs/debugging.md, "Fault injection") is a comma list of
 * `kind:key=value[:key=value...]` rules plus an optional `seed=N`; a
 * message names the offending rule. Injected failures carry a message that
 * starts "injected by SIMDEV_FAULTS (<rule>)", also printed on stderr. */
typedef enum sim_fault_kind {
  SIM_FAULT_ALLOC = 0,
  SIM_FAULT_MEMCPY_H2D,
  SIM_FAULT_MEMCPY_D2H,
  SIM_FAULT_MEMCPY_D2D,
  SIM_FAULT_LAUNCH,
  SIM_FAULT_STREAM,
  SIM_FAULT_EVENT,
  SIM_FAULT_CALLBACK,
  SIM_FAULT_KIND_COUNT
} sim_fault_kind;

/* Checks spec's grammar without installing it: SIM_OK, or SIM_EINVAL with a
 * message naming SIMDEV_FAULTS, the rule and what is wrong. NULL or "" is a
 * valid empty plan. Any thread. */
int sim_faults_check(const char* spec, char* msg, size_t msg_len);
/* 1 if spec is a valid plan with at least one rule of `kind`, else 0 (also
 * for an invalid spec: check it with sim_faults_check). Any thread. */
int sim_faults_has(const char* spec, sim_fault_kind kind);
/* Installs spec as the process's plan (a new plan, its counters at zero);
 * NULL or "" removes it. SIM_EINVAL as above (the old plan stays). Any
 * thread, any time: each operation is judged wholly by the old plan or the
 * new one. sim_faults_injected restarts from 0 here, so it is exact only if
 * the plan was set while no device work was in flight (start-up, tests). */
int sim_faults_set(const char* spec, char* msg, size_t msg_len);
/* Faults of `kind` injected since the last sim_faults_set. Any thread. */
uint64_t sim_faults_injected(sim_fault_kind kind);
/* Why the calling thread's last sim_event_record was refused by the plan
 * ("injected by SIMDEV_FAULTS (<rule>): event record refused"), for a
 * caller that got only SIM_EFAILED: copied into msg; returns 1 if that
 * record was refused by the plan, 0 (msg "") if not. Every injected fault
 * is also printed on stderr. */
int sim_faults_last(char* msg, size_t msg_len);

/* ---------------------------------------------------------- parallel for */

/* Calls fn(arg, begin, end) on disjoint ranges that together cover [0, n),
 * using the calling thread plus the process-wide helper threads
 * ("simdev-pool<i>", one per extra CPU, started on first use). Ranges are at
 * least `grain` long (except the last). Returns when every range is done.
 *
 * The split depends on the number of CPUs and on timing, so fn must not care
 * how the range is cut: kernels that reduce split their work into fixed
 * blocks themselves and use this only to spread the blocks. Only one parallel
 * region runs at a time; a caller that finds the helpers busy (another
 * stream, or a nested call) runs its whole range inline. fn must not block
 * on stream work. */
typedef void (*sim_range_fn)(void* arg, int64_t begin, int64_t end);
void sim_parallel_for(int64_t n, int64_t grain, sim_range_fn fn, void* arg);

/* Number of threads sim_parallel_for may use (helpers + caller), >= 1. */
int sim_parallel_width(void);

#ifdef __cplusplus
}
#endif

#endif /* SIMDEV_DEVICE_SIM_SIM_H_ */
