/*
 * launch.c - the life cycle of a kernel launch (see sk.h for the design):
 * TF's compute_async -> the op's compute function -> one stream work item ->
 * completion: report a failure, release the held tensors, run TF's done.
 *
 * Who runs and completes: with SIMDEV_INLINE=1, a small launch on an idle
 * stream runs on TF's thread at once (sim_stream_run_inline,
 * LAUNCH_INLINE_BYTES; the stream refuses when the setting is off) and
 * TF's thread completes it. Otherwise it is queued; TF's thread watches the
 * queued item for LAUNCH_WATCH_NS and completes it itself if the worker ran
 * it by then; otherwise the worker completes it right after the arithmetic.
 * One compare-and-swap on sk_launch.state decides, so exactly one of them
 * does.
 *
 * Synchronous kernels (sk_op.sync: the variable kernels, sk.h says why)
 * take another path, compute_sync: TF's thread runs the compute function,
 * which queues its device work at once (sk_work_now, sk_copy_now) from
 * inside the TF calls it makes; the failure, if any, is reported before
 * compute returns (TF has no done callback for them), and the launch's own
 * item, queued last, only releases the held tensors once the work ahead of
 * it ran. So the op is done for TF when its work is queued, as a GPU
 * kernel's is; every buffer that work touches stays alive until it ran.
 *
 * TF's done is cheap: in eager mode it wakes the waiting caller; in a graph
 * it propagates outputs and hands ready nodes to TF's inter-op thread pool
 * (the executor passes no inline queue for async kernels). The one thing a
 * worker must never do is wait for its own stream, so a launch made on a
 * worker (TF's inline runner) neither watches nor honours SIMDEV_SYNC's wait,
 * and device_sim refuses synchronize calls from a stream's own worker.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/sk_internal.h"
#include "pbwire/pbwire.h"
#include "se/se.h"

/* done_shim.cc: copy TF's done callback, which dies with compute_async's
 * frame in TF 2.21, and run the copy later. */
void* sk_done_take(void* tf_done);
void sk_done_run(void* taken);

/* How long TF's thread watches a queued item before returning (ns). A
 * small item finishes within it and TF's thread completes it itself, which
 * saves waking TF's thread later; a large one is left to run asynchronously.
 * The analogue of a GPU driver's spin-then-yield wait. */
#define LAUNCH_WATCH_NS 20000

/* A launch whose held tensors (inputs, outputs, scratch) add up to at most
 * this many bytes runs on TF's thread when the stream is idle, instead of
 * being handed to the worker and back: its arithmetic costs about what the
 * hand-off costs (an elementwise op over 256 KiB takes some 10 us, a wake-up
 * of a sleeping thread tens of us; on a loaded machine, a time slice). A
 * bigger one stays asynchronous, so TF's thread can go on with other nodes
 * while it runs. The training step of a small model is a chain of such tiny
 * kernels, each waiting for the one before: the hand-off was most of its
 * time (docs/graph-optimizer.md, "Launch overhead"). */
#define LAUNCH_INLINE_BYTES (256u * 1024u)

/* Set once by sk_launch_init (TF_InitKernel), before any kernel runs, from
 * the settings SE_InitPlugin read. */
static struct {
  int sync_launch;
  int early_completion;
  /* SIMDEV_TEST_OMIT_KERNELS as getenv returned it; used only while
   * TF_InitKernel registers, right after sk_launch_init read it. */
  const char* omit;
} g;

/* ---- held tensors ------------------------------------------------------ */

static bool hold(sk_launch* l, TF_Tensor* t) {
  if (l->nheld == l->capheld) {
    int cap = l->capheld ? 2 * l->capheld : 8;
    TF_Tensor** h = realloc(l->held, (size_t)cap * sizeof(*h));
    if (h == NULL) {
      TF_DeleteTensor(t);
      sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
      return false;
    }
    l->held = h;
    l->capheld = cap;
  }
  l->held[l->nheld++] = t;
  return true;
}

/* Bytes of the tensors the launch holds; TF thread, before queuing. */
static size_t held_bytes(const sk_launch* l) {
  size_t n = 0;
  for (int i = 0; i < l->nheld; i++) n += TF_TensorByteSize(l->held[i]);
  return n;
}

static void release_held(sk_launch* l) {
  for (int i = 0; i < l->nheld; i++) TF_DeleteTensor(l->held[i]);
  l->nheld = 0;
}

/* ---- inputs, outputs, scratch ------------------------------------------ */

sim_stream* sk_stream(sk_launch* l) {
  if (!sk_ok(l)) return NULL;
  SP_Stream sp = TF_GetStream(l->ctx, l->st);
  if (!sk_status_move(l, l->st, "TF_GetStream")) return NULL;
  sim_stream* s = se_stream_sim(sp);
  if (s == NULL)
    sk_fail(l, TF_INTERNAL, "TF_GetStream returned no SIMDEV stream");
  return s;
}

TF_Tensor* sk_input(sk_launch* l, int i) {
  if (!sk_ok(l)) return NULL;
  TF_Status* st = l->st;
  TF_Tensor* t = NULL;
  TF_GetInput(l->ctx, i, &t, st);
  bool ok = sk_status_move(l, st, "reading input");
  if (!ok) return NULL;
  return hold(l, t) ? t : NULL;
}

bool sk_input_shape(sk_launch* l, int i, sk_shape* out) {
  if (!sk_ok(l)) return false;
  TF_Status* st = l->st;
  TF_Tensor* t = NULL;
  TF_GetInput(l->ctx, i, &t, st);
  if (!sk_status_move(l, st, "reading input")) return false;
  bool ok = sk_shape_of(l, t, out);
  TF_DeleteTensor(t); /* back to the executor's one reference */
  return ok;
}

TF_Tensor* sk_output_forward(sk_launch* l, int i, const int* candidates,
                             int ncandidates, const sk_shape* shape) {
  if (!sk_ok(l)) return NULL;
  size_t es = TF_DataTypeSize(TF_ExpectedOutputDataType(l->ctx, i));
  if (!sk_shape_check(l, shape, es)) return NULL;
  TF_Status* st = l->st;
  int forwarded = -1;
  TF_Tensor* t = TF_ForwardInputOrAllocateOutput(
      l->ctx, candidates, ncandidates, i, shape->d, shape->nd, &forwarded, st);
  bool ok = sk_status_move(l, st, "allocating output");
  if (!ok) return NULL;
  return hold(l, t) ? t : NULL;
}

TF_Tensor* sk_output(sk_launch* l, int i, const sk_shape* shape) {
  if (!sk_ok(l)) return NULL;
  TF_DataType dt = TF_ExpectedOutputDataType(l->ctx, i);
  if (!sk_shape_check(l, shape, TF_DataTypeSize(dt))) return NULL;
  size_t bytes = (size_t)shape->n * TF_DataTypeSize(dt); /* checked */
  TF_Status* st = l->st;
  TF_Tensor* t =
      TF_AllocateOutput(l->ctx, i, dt, shape->d, shape->nd, bytes, st);
  bool ok = sk_status_move(l, st, "allocating output");
  if (!ok) return NULL;
  return hold(l, t) ? t : NULL;
}

void* sk_temp(sk_launch* l, size_t bytes) {
  if (!sk_ok(l) || bytes == 0) return NULL;
  if (bytes > (size_t)INT64_MAX) { /* TF's dims are int64 */
    sk_fail(l, TF_RESOURCE_EXHAUSTED,
            "simdev: scratch of %zu bytes: more than 2**63 - 1", bytes);
    return NULL;
  }
  int64_t dims[1] = {(int64_t)bytes};
  TF_AllocatorAttributes attr = {TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 0};
  TF_Status* st = l->st;
  TF_Tensor* t = TF_AllocateTemp(l->ctx, TF_UINT8, dims, 1, &attr, st);
  bool ok = sk_status_move(l, st, "allocating scratch");
  if (!ok) return NULL;
  /* The run functions use it: the alias, as sk_data gives. */
  return hold(l, t) ? sim_mem_alias(TF_TensorData(t)) : NULL;
}

void* sk_temp_n(sk_launch* l, int64_t count, size_t elsize) {
  int64_t bytes;
  if (!sk_ok(l)) return NULL;
  if (count < 0 || elsize > (size_t)INT64_MAX ||
      !sa_mul_ok(count, (int64_t)elsize, &bytes)) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED,
            "simdev: scratch of %lld elements of %zu bytes: more than "
            "2**63 - 1 bytes",
            (long long)count, elsize);
    return NULL;
  }
  return sk_temp(l, (size_t)bytes);
}

void sk_output_alias(sk_launch* l, int i, const TF_Tensor* from,
                     TF_DataType dtype, const sk_shape* shape) {
  if (!sk_ok(l) || !sk_shape_check(l, shape, TF_DataTypeSize(dtype))) return;
  int64_t empty[1] = {0};
  TF_Tensor* to = TF_AllocateTensor(dtype, empty, 1, 0);
  if (to == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    return;
  }
  TF_Status* st = l->st;
  TF_TensorBitcastFrom(from, dtype, to, shape->d, shape->nd, st);
  if (sk_status_move(l, st, "aliasing output")) {
    TF_SetOutput(l->ctx, i, to, st);
    sk_status_move(l, st, "setting output");
  }
  TF_DeleteTensor(to);
}

void* sk_args(sk_launch* l, size_t size) {
  if (!sk_ok(l)) return NULL;
  SIM_CHECK(l->args == NULL); /* one argument block per launch */
  l->args = calloc(1, size ? size : 1);
  if (l->args == NULL)
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
  return l->args;
}

void sk_args_cleanup(sk_launch* l, void (*cleanup)(void* args)) {
  SIM_CHECK(l->args != NULL);
  l->args_cleanup = cleanup;
}

void sk_work(sk_launch* l, sk_run_fn run, const char* label) {
  if (!sk_ok(l)) return;
  l->run = run;
  l->label = label;
}

/* ---- work queued during the compute function (sk.h) ------------------- */

/* The launch's stream for queued-now work, whatever the launch's state:
 * TF changed the variable that work belongs to even if the launch failed
 * since (sk.h). Cached in l->stream, which compute_sync then uses. Only
 * synchronous launches queue now: an asynchronous one's single item goes
 * to the stream after its compute function. */
static sim_stream* now_stream(sk_launch* l) {
  if (!l->sync) {
    sk_fail(l, TF_INTERNAL,
            "simdev: work queued during the compute function of an "
            "asynchronous kernel (only synchronous kernels may: sk.h)");
    return NULL;
  }
  if (l->stream != NULL) return l->stream;
  TF_Status* st = TF_NewStatus();
  SP_Stream sp = TF_GetStream(l->ctx, st);
  sim_stream* s = TF_GetCode(st) == TF_OK ? se_stream_sim(sp) : NULL;
  if (s == NULL)
    sk_fail(l, TF_INTERNAL, "simdev: no SIMDEV stream to queue work on (%s)",
            TF_GetCode(st) == TF_OK ? "TF_GetStream gave another one"
                                    : TF_Message(st));
  TF_DeleteStatus(st);
  l->stream = s;
  return s;
}

bool sk_hold(sk_launch* l, TF_Tensor* t) {
  return t != NULL && hold(l, t); /* hold deletes t if it cannot keep it */
}

/* One step of sk_work_now: its own item, freed when it ran or was drained
 * from a stream that failed (compute_sync fails the op if the stream had
 * failed by the time it returns; a later failure fails the next kernel
 * that waits for the stream). */
typedef struct now_item {
  sim_work work; /* first: the stream sees only this */
  sk_step_fn step;
  max_align_t args[]; /* the caller's args, copied */
} now_item;

static int now_run(sim_work* w, char* msg, size_t msg_len) {
  (void)msg;
  (void)msg_len;
  now_item* it = (now_item*)w;
  it->step(it->args);
  return SIM_OK;
}

static void now_done(sim_work* w, int status) {
  (void)status;
  free(w);
}

bool sk_work_now(sk_launch* l, sk_step_fn step, const void* args, size_t size,
                 const char* label) {
  sim_stream* s = now_stream(l);
  if (s == NULL) return false;
  now_item* it = calloc(1, sizeof(*it) + size);
  if (it == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    return false;
  }
  it->step = step;
  if (size) memcpy(it->args, args, size);
  it->work.run = now_run;
  it->work.done = now_done;
  it->work.label = label;
  it->work.trace.kind = SIM_TRACE_KERNEL; /* the kernel's arithmetic */
  it->work.trace.name = l->trace_name;
  it->work.trace.type = l->trace_type;
  int rc = sim_stream_submit(s, &it->work);
  SIM_CHECK(rc == SIM_OK); /* a complete item on a live stream */
  l->nnow++;
  return true;
}

bool sk_copy_now(sk_launch* l, TF_Tensor* dst, const TF_Tensor* src) {
  size_t n = TF_TensorByteSize(src);
  if (TF_TensorByteSize(dst) != n) {
    sk_fail(l, TF_INTERNAL, "simdev: a copy of %zu bytes into %zu", n,
            TF_TensorByteSize(dst));
    return false;
  }
  if (n == 0) return true;
  sim_stream* s = now_stream(l);
  if (s == NULL) return false;
  /* TF's addresses: the copy item reaches discrete memory by its alias. */
  int rc = sim_memcpy_async_kind(s, TF_TensorData(dst), TF_TensorData(src), n,
                                 SIM_TRACE_MEMCPY_D2D);
  if (rc != SIM_OK) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: cannot queue a copy: %s",
            sim_strerror(rc));
    return false;
  }
  l->nnow++;
  return true;
}

/* ---- completion -------------------------------------------------------- */

static void free_launch(sk_launch* l) {
  if (l->args_cleanup != NULL) l->args_cleanup(l->args);
  TF_DeleteStatus(l->st);
  free(l->held);
  free(l->args);
  free(l);
}

/* Reports the launch's failure to TF, releases its tensors, calls done. Runs
 * on the stream worker, or on TF's thread: for launches never queued, for
 * a queued one that ran within the watch, and for inline runs. */
static void complete(sk_launch* l) {
  if (l->code != TF_OK) {
    TF_SetStatus(l->st, l->code, l->msg);
    TF_OpKernelContext_Failure(l->ctx, l->st);
  }
  release_held(l);
  void* done = l->done;
  free_launch(l);
  sk_done_run(done);
}

static void work_done(sim_work* w, int status) {
  sk_launch* l = (sk_launch*)w;
  if (g.early_completion) { /* TF was told long ago; nobody to report to */
    free_launch(l);
    return;
  }
  if (status != SIM_OK && l->code == TF_OK) {
    char smsg[256];
    sim_stream_status(l->stream, smsg, sizeof(smsg));
    sk_fail(l, TF_INTERNAL, "%s not run: SIMDEV stream failed earlier: %s",
            l->label, smsg);
  }
  int expected = L_QUEUED;
  if (atomic_compare_exchange_strong(&l->state, &expected, L_RAN))
    return; /* the launching thread is watching and completes it */
  complete(l);
}

static int work_run(sim_work* w, char* msg, size_t msg_len) {
  (void)msg;
  (void)msg_len;
  sk_launch* l = (sk_launch*)w;
  l->run(l, l->args);
  return SIM_OK; /* kernel failures are per launch, never sticky */
}

/* ---- the TF entry point ------------------------------------------------ */

/* A spin-wait hint for the watch loop below: tells the core (and its SMT
 * sibling) that this thread is only polling. simdev builds on other CPUs
 * than x86-64 (sim_internal.h), so each ISA gets its own instruction, and
 * one without a known hint spins plainly. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* On TF's thread, right after submitting: if the item runs within
 * LAUNCH_WATCH_NS, complete it here; otherwise hand it over to the worker. */
static void watch_or_hand_over(sk_launch* l) {
  uint64_t deadline = sim_now_ns() + LAUNCH_WATCH_NS;
  do {
    for (int i = 0; i < 64; i++) {
      if (atomic_load_explicit(&l->state, memory_order_acquire) == L_RAN) {
        complete(l);
        return;
      }
      cpu_relax();
    }
  } while (sim_now_ns() < deadline);
  int expected = L_QUEUED;
  if (!atomic_compare_exchange_strong(&l->state, &expected, L_HANDED_OVER))
    complete(l); /* it ran just now: expected == L_RAN */
}

/* No launch could be made (host out of memory): fail the op at once. */
static void fail_without_launch(TF_OpKernelContext* ctx,
                                TF_AsyncOpKernelDoneCallback* done) {
  TF_Status* st = TF_NewStatus();
  TF_SetStatus(st, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
  TF_OpKernelContext_Failure(ctx, st);
  TF_DeleteStatus(st);
  TF_RunAsyncOpKernelDoneCallback(done);
}

static void compute_async(void* kernel, TF_OpKernelContext* ctx,
                          TF_AsyncOpKernelDoneCallback* done) {
  sk_kernel* k = kernel;
  sk_launch* l = calloc(1, sizeof(*l));
  if (l != NULL) l->done = sk_done_take(done);
  if (l == NULL || l->done == NULL) {
    free(l);
    fail_without_launch(ctx, done);
    return;
  }
  l->ctx = ctx;
  l->st = TF_NewStatus();
  l->trace_name = k->trace_name;
  l->trace_type = k->trace_type;

  /* TF allocates the op's outputs on this thread, inside compute: the
   * discrete-mode reports name the op that allocated a buffer. */
  sim_mem_set_site(k->site_type, k->site_name);
  k->compute(l, k->state);
  sim_mem_set_site(NULL, NULL);

  if (!sk_ok(l) || l->run == NULL) { /* failed, or nothing to compute */
    complete(l);
    return;
  }
  l->stream = sk_stream(l);
  if (l->stream == NULL) {
    complete(l);
    return;
  }
  l->work.run = work_run;
  l->work.done = work_done;
  l->work.label = l->label;
  /* What the trace recorder shows (device_sim reads it only when on). */
  l->work.trace.kind = SIM_TRACE_KERNEL;
  l->work.trace.name = k->trace_name;
  l->work.trace.type = k->trace_type;

  if (g.early_completion) {
    /* The naive design: TF sees the outputs as ready and drops its inputs
     * now, while the work is still queued; and the work runs as late as the
     * stream allows, so host code that races it always wins. */
    l->work.flags |= SIM_WORK_LAZY;
    release_held(l);
    sk_done_run(l->done);
    l->done = NULL;
    l->ctx = NULL;
  }
  sim_stream* s = l->stream;
  /* Watch only from a thread other than the worker, never in the debug
   * modes (SIMDEV_SYNC waits for the whole item anyway). */
  bool watch =
      !g.sync_launch && !g.early_completion && !sim_stream_is_current(s);
  atomic_init(&l->state, watch ? L_QUEUED : L_HANDED_OVER);
  /* A small launch on an idle stream runs here and now, in stream order
   * (sim_stream_run_inline); work_done then finds L_QUEUED, moves it to
   * L_RAN, and this thread completes it. */
  if (watch && held_bytes(l) <= LAUNCH_INLINE_BYTES &&
      sim_stream_run_inline(s, &l->work) == 1) {
    SIM_CHECK(atomic_load(&l->state) == L_RAN);
    complete(l);
    return;
  }
  int rc = sim_stream_submit(s, &l->work);
  SIM_CHECK(rc == SIM_OK); /* a complete item on a live stream */
  if (watch) {
    watch_or_hand_over(l);
    return;
  }
  /* l may be gone from here on. */
  if (g.sync_launch && !sim_stream_is_current(s)) sim_stream_synchronize(s);
}

/* A synchronous launch's own item: queued behind the work its compute
 * function queued, it releases the held tensors once that work ran (or was
 * drained: done is called either way) and frees the launch. */
static int release_run(sim_work* w, char* msg, size_t msg_len) {
  (void)w;
  (void)msg;
  (void)msg_len;
  return SIM_OK;
}

static void release_done(sim_work* w, int status) {
  (void)status;
  sk_launch* l = (sk_launch*)w;
  release_held(l);
  free_launch(l);
}

/* TF's compute for a synchronous kernel (launch.c's opening comment). */
static void compute_sync(void* kernel, TF_OpKernelContext* ctx) {
  sk_kernel* k = kernel;
  sk_launch* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    TF_Status* st = TF_NewStatus();
    TF_SetStatus(st, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    TF_OpKernelContext_Failure(ctx, st);
    TF_DeleteStatus(st);
    return;
  }
  l->ctx = ctx;
  l->st = TF_NewStatus();
  l->sync = true;
  l->trace_name = k->trace_name;
  l->trace_type = k->trace_type;
  sim_mem_set_site(k->site_type, k->site_name);
  k->compute(l, k->state);
  sim_mem_set_site(NULL, NULL);
  if (l->run != NULL) /* no later moment to report a run's failure */
    sk_fail(l, TF_INTERNAL, "simdev: sk_work in a synchronous kernel");
  char smsg[256];
  /* A stream that failed earlier drains the work instead of running it:
   * say so now, the last moment the op can fail (a failure after this
   * one fails the next kernel that waits for the stream, as on a GPU). */
  if (l->nnow > 0 && sim_stream_status(l->stream, smsg, sizeof(smsg)) != SIM_OK)
    sk_fail(l, TF_INTERNAL, "%s not run: SIMDEV stream failed earlier: %s",
            k->site_type != NULL ? k->site_type : "simdev kernel", smsg);
  if (l->code != TF_OK) {
    TF_SetStatus(l->st, l->code, l->msg);
    TF_OpKernelContext_Failure(ctx, l->st);
  }
  l->ctx = NULL; /* TF's context ends when this function returns */
  sim_stream* s = l->stream;
  if (l->nnow == 0) {
    release_held(l);
    free_launch(l);
    return;
  }
  l->work.run = release_run;
  l->work.done = release_done;
  l->work.label = k->site_type != NULL ? k->site_type : "simdev kernel";
  int rc = sim_stream_submit(s, &l->work); /* l may be gone from here on */
  SIM_CHECK(rc == SIM_OK);
  if (g.sync_launch && !sim_stream_is_current(s)) sim_stream_synchronize(s);
}

/* ---- kernel construction -------------------------------------------- */

/* Interns len bytes of s (not NUL-terminated) for the trace recorder. */
static uint32_t intern_n(const char* s, size_t len) {
  char buf[512];
  if (s == NULL) return 0;
  if (len >= sizeof(buf)) len = sizeof(buf) - 1; /* a name, cut short */
  memcpy(buf, s, len);
  buf[len] = '\0';
  return sim_trace_intern(buf);
}

/* The node's op type, from its serialized NodeDef (field 2, `op`): the
 * kernel C API has no call for it at construction. 0 if it cannot be read;
 * the trace then shows the node name alone. */
static uint32_t intern_op_type(TF_OpKernelConstruction* c) {
  TF_Status* st = TF_NewStatus();
  TF_Buffer* nd = TF_OpKernelConstruction_GetNodeDef(c, st);
  uint32_t id = 0;
  if (TF_GetCode(st) == TF_OK && nd != NULL) {
    pbw_reader r;
    pbw_field f;
    pbw_init(&r, nd->data, nd->length);
    while (id == 0 && pbw_next(&r, &f) == PBW_FIELD)
      if (f.number == 2 && f.wire == PBW_LEN)
        id = intern_n((const char*)f.data, f.len);
  }
  if (nd != NULL) TF_DeleteBuffer(nd);
  TF_DeleteStatus(st);
  return id;
}

void* sk_kernel_new(TF_OpKernelConstruction* c, sk_compute_fn compute,
                    void* state, void (*free_state)(void*)) {
  sk_kernel* k = malloc(sizeof(*k));
  if (k == NULL) {
    if (free_state) free_state(state);
    sk_construction_fail(c, TF_RESOURCE_EXHAUSTED, "simdev: out of memory");
    return NULL;
  }
  k->compute = compute;
  k->state = state;
  k->free_state = free_state;
  /* Once per kernel, whether tracing is on or not: a profiler may start
   * later, and the launch path must not take the name table's lock. */
  TF_StringView name = TF_OpKernelConstruction_GetName(c);
  k->trace_name = intern_n(name.data, name.len);
  k->trace_type = intern_op_type(c);
  k->site_name = sim_trace_name(k->trace_name);
  k->site_type = sim_trace_name(k->trace_type);
  return k;
}

static void kernel_delete(void* kernel) {
  sk_kernel* k = kernel;
  if (k == NULL) return;
  if (k->free_state) k->free_state(k->state);
  free(k);
}

/* ---- registration ------------------------------------------------------- */

static bool register_one(const sk_op* op, TF_DataType type, TF_DataType type2,
                         char* msg, size_t len) {
  TF_KernelBuilder* b =
      op->sync ? TF_NewKernelBuilder(op->name, SK_DEVICE_TYPE, op->create,
                                     compute_sync, kernel_delete)
               : TF_NewAsyncKernelBuilder(op->name, SK_DEVICE_TYPE, op->create,
                                          compute_async, kernel_delete);
  TF_Status* st = TF_NewStatus();
  if (op->type_attr != NULL)
    TF_KernelBuilder_TypeConstraint(b, op->type_attr, type, st);
  if (op->type_attr2 != NULL && TF_GetCode(st) == TF_OK)
    TF_KernelBuilder_TypeConstraint(b, op->type_attr2, type2, st);
  for (const char* const* h = op->host_memory; h && *h; h++)
    TF_KernelBuilder_HostMemory(b, *h);
  if (TF_GetCode(st) == TF_OK)
    TF_RegisterKernelBuilder(op->name, b, st);
  else
    TF_DeleteKernelBuilder(b);
  bool ok = TF_GetCode(st) == TF_OK;
  if (!ok)
    snprintf(msg, len, "registering %s (%s%s%s): %s", op->name,
             op->type_attr ? sk_dtype_name(type) : "any type",
             op->type_attr2 ? ", " : "",
             op->type_attr2 ? sk_dtype_name(type2) : "", TF_Message(st));
  TF_DeleteStatus(st);
  return ok;
}

/* SIMDEV_TEST_OMIT_KERNELS: a comma-separated list of op names whose SIMDEV
 * kernels are not registered. For tests only: it lets the suite prove that
 * each kernel's tests fail without it (tests/tf/test_kernel_coverage.py), the
 * way removing a registration by hand would, without a throwaway build. */
static bool omitted(const char* op) {
  const char* list = g.omit; /* read once by sk_launch_init */
  if (list == NULL) return false;
  size_t n = strlen(op);
  for (const char* p = list; *p != '\0';) {
    const char* end = strchr(p, ',');
    size_t m = end ? (size_t)(end - p) : strlen(p);
    if (m == n && strncmp(p, op, n) == 0) return true;
    if (end == NULL) break; /* that was the last name */
    p = end + 1;
  }
  return false;
}

bool sk_register_ops(const sk_op* ops, char* msg, size_t len) {
  static const TF_DataType kNone[] = {TF_FLOAT, 0}; /* one pass, unused */
  for (const sk_op* op = ops; op->name != NULL; op++) {
    if (omitted(op->name)) {
      fprintf(stderr, "simdev: %s not registered (SIMDEV_TEST_OMIT_KERNELS)\n",
              op->name);
      continue;
    }
    const TF_DataType* t1 = op->type_attr ? op->types : kNone;
    const TF_DataType* t2 = op->type_attr2 ? op->types2 : kNone;
    for (const TF_DataType* a = t1; *a != 0; a++)
      for (const TF_DataType* b = t2; *b != 0; b++)
        if (!register_one(op, *a, *b, msg, len)) return false;
  }
  return true;
}

/* ---- set-up ----------------------------------------------------------- */

bool sk_launch_init(void) {
  if (se_disabled_reason() != NULL) return false; /* SE_InitPlugin said why */
  const sim_config* cfg = se_config();
  g.sync_launch = cfg->sync_launch;
  g.early_completion = cfg->unsafe_early_completion;
  g.omit = getenv("SIMDEV_TEST_OMIT_KERNELS"); /* registration runs next */
  sa_blas_init();
  return true;
}
