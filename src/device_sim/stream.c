/*
 * stream.c - a stream is an in-order work queue served by one worker thread.
 *
 * The queue is intrusive (sim_work.next): submitting links the caller's item
 * and signals the worker; nothing is allocated. The worker pops one item,
 * releases the lock, runs it, calls its done callback, then counts it as
 * completed and wakes synchronizers. Items therefore run strictly in FIFO
 * order, one at a time, and an item may submit more work (even to its own
 * stream) without deadlocking.
 *
 * A submitter may instead run an item itself when the stream is idle
 * (sim_stream_run_inline): `busy` keeps the worker off the queue meanwhile,
 * so the order is the same as if the worker had run it.
 *
 * Errors are sticky: the first failing item records its code and message;
 * from then on items are drained (done(SIM_ESTREAM), run skipped) unless they
 * are SIM_WORK_ALWAYS_RUN (event markers, waits, host callbacks, timers), so
 * whoever waits on them is still released. Nothing ever hangs on an errored
 * stream.
 *
 * A SIMDEV_FAULTS plan (faults.c) may fail an item in the run path: a copy,
 * kernel or stream:fail_at item is then not run and fails like any item
 * whose run failed; a host callback runs first, then fails.
 *
 * Teardown sets `stopping`; the worker finishes what is queued, then exits
 * and is joined.
 */
#include <sched.h>
#include <string.h>

#include "sim_internal.h"

/* How many times an idle worker re-checks its queue (yielding the CPU in
 * between) before it sleeps on the condvar. */
#define SIM_STREAM_POLLS 64

/* Copies (and memsets) up to this size run on the caller's thread when the
 * stream is idle (sim_stream_run_inline): 64 KiB take a few microseconds,
 * about what the hand-off to the worker costs. */
#define SIM_INLINE_COPY_BYTES (64u * 1024u)

/* The stream whose worker is the calling thread, if any. */
static __thread sim_stream* tls_current_stream;

/* The device's list of streams (device.c walks it for synchronize-all and
 * teardown): a stream links itself in at creation and out at destruction,
 * under dev->streams_lock. Returns the new stream's id. */
static int link_into_device(sim_device* dev, sim_stream* s) {
  sim_mutex_lock(&dev->streams_lock);
  int id = dev->next_stream_id++;
  s->dev_next = dev->streams;
  dev->streams = s;
  sim_mutex_unlock(&dev->streams_lock);
  return id;
}

static void unlink_from_device(sim_device* dev, sim_stream* s) {
  sim_mutex_lock(&dev->streams_lock);
  sim_stream** pp = &dev->streams;
  while (*pp != NULL && *pp != s) pp = &(*pp)->dev_next;
  SIM_CHECK(*pp == s);
  *pp = s->dev_next;
  sim_mutex_unlock(&dev->streams_lock);
}

static void set_sticky(sim_stream* s, int err, const char* msg,
                       const char* label) {
  if (s->status != SIM_OK) return;
  s->status = err;
  if (msg != NULL && msg[0] != '\0')
    snprintf(s->msg, sizeof(s->msg), "%s", msg);
  else
    snprintf(s->msg, sizeof(s->msg), "%s: %s", label ? label : "work item",
             sim_strerror(err));
  sim_stream_failed(s, err, s->msg); /* gdb: break sim_stream_failed */
}

/* Whether the worker may take the head item. Called with s->lock held. Not
 * while an item runs inline (sim_stream_run_inline). A lazy head waits for
 * an eager item behind it, a synchronize or the stop. */
static int head_runnable(const sim_stream* s) {
  return s->head != NULL && !s->busy &&
         (!(s->head->flags & SIM_WORK_LAZY) || s->eager_queued > 0 ||
          s->sync_waiters > 0 || s->stopping);
}

/* Whether the worker has something to do: an item, or the stop (once no
 * item runs inline). Called with s->lock held. */
static int worker_may_go(const sim_stream* s) {
  return head_runnable(s) || (s->stopping && !s->busy);
}

/* Runs w, or skips it (SIM_ESTREAM) when `drain`; records a failure as
 * sticky. Returns what run returned. done is the caller's to call. With
 * `faults` (a SIMDEV_FAULTS plan is installed) the plan may fail the item
 * instead of running it (a copy or kernel that fails on a device produces
 * no result), or fail a host callback after it ran (TF's work in it is
 * never lost); either way the failure is the item's, sticky as any other. */
static inline __attribute__((always_inline)) int run_only(sim_stream* s,
                                                          sim_work* w,
                                                          int drain,
                                                          int faults) {
  char msg[256];
  int rc;
  msg[0] = '\0';
  if (drain) {
    rc = SIM_ESTREAM;
  } else if (faults &&
             (rc = sim_faults_item(s, w, 0, msg, sizeof(msg))) != SIM_OK) {
    /* injected: not run */
  } else {
    rc = w->run(w, msg, sizeof(msg));
    /* Only an item that succeeded can be failed (and counted) by the
     * plan: a callback that failed by itself keeps its own message. */
    if (faults && rc == SIM_OK &&
        sim_faults_item(s, w, 1, msg, sizeof(msg)) != SIM_OK)
      rc = SIM_EFAILED;
  }
  if (rc != SIM_OK && rc != SIM_ESTREAM) {
    sim_mutex_lock(&s->lock);
    set_sticky(s, rc, msg, w->label);
    sim_mutex_unlock(&s->lock);
  }
  return rc;
}

/* run_item's rare cases: the stream failed earlier (drain unless
 * SIM_WORK_ALWAYS_RUN), items submitted while tracing was on, and any item
 * while a fault plan is installed (SIMDEV_FAULTS). A traced
 * item's record is written after run and before done: its end is when run
 * returned (what done does, e.g. TF's bookkeeping for a kernel, is not the
 * item's time), and whoever done wakes finds the record there. `how` is
 * the record's sim_trace_rec_flags. */
static __attribute__((noinline)) void run_item_rare(sim_stream* s, sim_work* w,
                                                    int status, uint32_t how) {
  int drain = status != SIM_OK && !(w->flags & SIM_WORK_ALWAYS_RUN);
  int faults = sim_faults_on();
  if (!(w->flags & SIM_WORK_TRACED_)) {
    int rc = run_only(s, w, drain, faults);
    if (w->done != NULL) w->done(w, rc); /* may free w */
    return;
  }
  w->flags &= ~SIM_WORK_TRACED_; /* an item may be submitted again */
  /* An inline item was stamped at submit an instant ago, on this thread:
   * that is its start too (one clock read less; reads cost ~70 ns on VMs). */
  uint64_t start = (how & SIM_TRACE_INLINE) ? w->trace.enq_ns : sim_now_ns();
  int rc = run_only(s, w, drain, faults);
  uint64_t end = sim_now_ns();
  sim_trace_item(s->trace_ring, &w->trace, drain ? end : start, end, rc, how);
  if (w->done != NULL) w->done(w, rc); /* may free w */
}

/* Runs w (or drains it when the stream failed earlier), records a failure
 * as sticky, calls its done. Called without s->lock, by the one thread that
 * set s->busy. The common case (stream OK, item not traced, no fault plan)
 * is one test of the OR of the three conditions, the same single branch as
 * before tracing existed; everything else is in run_item_rare. */
static void run_item(sim_stream* s, sim_work* w, int status, uint32_t how) {
  if (__builtin_expect(((uint32_t)status | (w->flags & SIM_WORK_TRACED_) |
                        (uint32_t)sim_faults_on()) != 0,
                       0)) {
    run_item_rare(s, w, status, how);
    return;
  }
  int rc = run_only(s, w, 0, 0);
  if (w->done != NULL) w->done(w, rc); /* may free w */
}

static void* worker_main(void* arg) {
  sim_stream* s = arg;
  tls_current_stream = s;
  char name[16];
  snprintf(name, sizeof(name), "simdev%d-s%d", s->dev->ordinal, s->id);
  pthread_setname_np(pthread_self(), name);
  sim_thread_fp_mode();

  sim_mutex_lock(&s->lock);
  for (;;) {
    /* Poll briefly before sleeping: kernels arrive back to back (TF issues
     * the next op as soon as the last one completes), and waking a sleeping
     * worker on an idle core costs tens of microseconds. Each poll yields
     * the core, so a busy machine loses little. */
    for (int spin = 0; spin < SIM_STREAM_POLLS && !worker_may_go(s); spin++) {
      sim_mutex_unlock(&s->lock);
      sched_yield();
      sim_mutex_lock(&s->lock);
    }
    while (!worker_may_go(s)) sim_cond_wait(&s->cv_work, &s->lock);
    sim_work* w = s->head;
    if (w == NULL) break; /* stopping and drained */
    s->head = w->next;
    if (s->head == NULL) s->tail = NULL;
    if (!(w->flags & SIM_WORK_LAZY)) s->eager_queued--;
    int status = s->status;
    s->busy = 1;
    sim_mutex_unlock(&s->lock);

    run_item(s, w, status, 0);

    sim_mutex_lock(&s->lock);
    s->busy = 0;
    s->completed++;
    if (s->sync_waiters > 0) sim_cond_broadcast(&s->cv_done);
  }
  sim_mutex_unlock(&s->lock);
  return NULL;
}

int sim_stream_create(sim_device* dev, sim_stream** out) {
  if (dev == NULL || out == NULL) return SIM_EINVAL;
  sim_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return SIM_ENOMEM;
  s->dev = dev;
  s->inline_ok = dev->inline_ok;
  sim_mutex_init(&s->lock);
  sim_cond_init(&s->cv_work);
  sim_cond_init(&s->cv_done);
  s->id = link_into_device(dev, s);
  int err = sim_trace_stream_born(s);
  if (err == SIM_OK && pthread_create(&s->thread, NULL, worker_main, s) != 0) {
    sim_trace_stream_gone(s);
    err = SIM_ESYS;
  }
  if (err != SIM_OK) {
    unlink_from_device(dev, s);
    sim_cond_destroy(&s->cv_done);
    sim_cond_destroy(&s->cv_work);
    sim_mutex_destroy(&s->lock);
    free(s);
    return err;
  }
  *out = s;
  return SIM_OK;
}

void sim_stream_destroy(sim_stream* s) {
  if (s == NULL) return;
  SIM_CHECK(!sim_stream_is_current(s)); /* would join itself */
  sim_mutex_lock(&s->lock);
  s->stopping = 1;
  sim_cond_signal(&s->cv_work);
  sim_mutex_unlock(&s->lock);
  SIM_CHECK_PT(pthread_join(s->thread, NULL));
  SIM_CHECK(s->head == NULL && s->completed == s->submitted);
  sim_trace_stream_gone(s);
  unlink_from_device(s->dev, s);
  sim_cond_destroy(&s->cv_done);
  sim_cond_destroy(&s->cv_work);
  sim_mutex_destroy(&s->lock);
  free(s);
}

sim_device* sim_stream_device(const sim_stream* s) {
  return s->dev;
}

int sim_stream_is_current(const sim_stream* s) {
  return s != NULL && tls_current_stream == s;
}

int sim_stream_submit(sim_stream* s, sim_work* w) {
  if (s == NULL || w == NULL || w->run == NULL) return SIM_EINVAL;
  w->next = NULL;
  /* The off path's one test per item (an inline run makes it instead). */
  if (sim_trace_on()) sim_trace_fill(w);
  sim_mutex_lock(&s->lock);
  if (s->tail != NULL)
    s->tail->next = w;
  else
    s->head = w;
  s->tail = w;
  s->submitted++;
  if (!(w->flags & SIM_WORK_LAZY)) s->eager_queued++;
  sim_cond_signal(&s->cv_work);
  sim_mutex_unlock(&s->lock);
  return SIM_OK;
}

void sim_device_set_inline(sim_device* dev, int on) {
  if (dev != NULL) dev->inline_ok = on != 0;
}

void sim_stream_set_inline(sim_stream* s, int on) {
  if (s != NULL) s->inline_ok = on != 0;
}

int sim_stream_run_inline(sim_stream* s, sim_work* w) {
  if (s == NULL || w == NULL || w->run == NULL) return SIM_EINVAL;
  if (!s->inline_ok) return 0;
  /* A lazy item must run as late as possible; on a stream's worker (this
   * stream's or another's) the queue is the simple, proven path. */
  if ((w->flags & SIM_WORK_LAZY) || tls_current_stream != NULL) return 0;
  sim_mutex_lock(&s->lock);
  int idle = s->head == NULL && !s->busy && !s->stopping;
  int status = s->status;
  if (idle) {
    s->busy = 1;
    s->submitted++;
  }
  sim_mutex_unlock(&s->lock);
  if (!idle) return 0;
  if (sim_trace_on()) sim_trace_fill(w); /* the off path's one test */

  /* Run as the worker would: the stream is current (a synchronize of it
   * from the item is refused instead of deadlocking), device FP mode. */
  tls_current_stream = s;
  unsigned fp = sim_fp_mode_push();
  w->next = NULL;
  run_item(s, w, status, SIM_TRACE_INLINE);
  sim_fp_mode_pop(fp);
  tls_current_stream = NULL;

  sim_mutex_lock(&s->lock);
  s->busy = 0;
  s->completed++;
  if (s->sync_waiters > 0) sim_cond_broadcast(&s->cv_done);
  /* Items submitted while this one ran (or a stop) wait for the worker. */
  if (s->head != NULL || s->stopping) sim_cond_signal(&s->cv_work);
  sim_mutex_unlock(&s->lock);
  return 1;
}

int sim_stream_synchronize(sim_stream* s) {
  if (s == NULL) return SIM_EINVAL;
  if (sim_stream_is_current(s)) return SIM_EINVAL; /* would wait for itself */
  sim_mutex_lock(&s->lock);
  uint64_t target = s->submitted;
  s->sync_waiters++;
  /* A lazy head may go now; only then is the worker worth waking. */
  if (s->head != NULL && (s->head->flags & SIM_WORK_LAZY))
    sim_cond_signal(&s->cv_work);
  while (s->completed < target) sim_cond_wait(&s->cv_done, &s->lock);
  s->sync_waiters--;
  int status = s->status;
  sim_mutex_unlock(&s->lock);
  return status;
}

int sim_stream_status(sim_stream* s, char* msg, size_t msg_len) {
  if (s == NULL) return SIM_EINVAL;
  sim_mutex_lock(&s->lock);
  int status = s->status;
  if (msg != NULL && msg_len > 0) snprintf(msg, msg_len, "%s", s->msg);
  sim_mutex_unlock(&s->lock);
  return status;
}

/* ---- convenience items ------------------------------------------------- */

static void free_done(sim_work* w, int status) {
  free(w);
}

void* sim_work_alloc(size_t size, sim_work_run_fn run, uint32_t flags,
                     const char* label) {
  SIM_CHECK(size >= sizeof(sim_work));
  sim_work* w = calloc(1, size);
  if (w == NULL) return NULL;
  w->run = run;
  w->done = free_done;
  w->flags = flags;
  w->label = label;
  return w;
}

typedef struct copy_item {
  sim_work w;
  void* dst;
  const void* src;
  uint64_t n;
  uint32_t value;
} copy_item;

static int run_memcpy(sim_work* w, char* msg, size_t len) {
  copy_item* c = (copy_item*)w;
  memmove(c->dst, c->src, c->n); /* d2d ranges may overlap */
  return SIM_OK;
}

static int run_memset8(sim_work* w, char* msg, size_t len) {
  copy_item* c = (copy_item*)w;
  memset(c->dst, (int)c->value, c->n);
  return SIM_OK;
}

static int run_memset32(sim_work* w, char* msg, size_t len) {
  copy_item* c = (copy_item*)w;
  uint32_t* p = c->dst;
  for (uint64_t i = 0; i < c->n / 4; i++) p[i] = c->value;
  return SIM_OK;
}

static int submit_copy(sim_stream* s, sim_work_run_fn run, uint32_t kind,
                       const char* label, void* dst, const void* src,
                       uint64_t n, uint32_t v) {
  copy_item* c = sim_work_alloc(sizeof(*c), run, 0, label);
  if (c == NULL) return SIM_ENOMEM;
  c->w.trace.kind = kind;
  c->w.trace.bytes = n;
  c->dst = dst;
  c->src = src;
  c->n = n;
  c->value = v;
  /* A small copy on an idle stream costs less than waking the worker. */
  if (n <= SIM_INLINE_COPY_BYTES && sim_stream_run_inline(s, &c->w) == 1)
    return SIM_OK;
  return sim_stream_submit(s, &c->w);
}

int sim_memcpy_async_kind(sim_stream* s, void* dst, const void* src, uint64_t n,
                          int kind) {
  if (s == NULL || (n > 0 && (dst == NULL || src == NULL))) return SIM_EINVAL;
  if (kind < SIM_TRACE_MEMCPY_H2D || kind > SIM_TRACE_MEMCPY_H2H)
    return SIM_EINVAL;
  /* Discrete device memory is reached through its alias (identity else). */
  dst = sim_mem_alias(dst);
  src = sim_mem_alias(src);
  return submit_copy(s, run_memcpy, (uint32_t)kind, "memcpy", dst, src, n, 0);
}

/* The direction as s's device sees it (its region and the host ranges
 * mapped into it); worked out only when tracing is on, so the off path
 * never pays for sim_mem_contains. */
int sim_memcpy_async(sim_stream* s, void* dst, const void* src, uint64_t n) {
  int kind = SIM_TRACE_MEMCPY_H2H;
  if (sim_trace_on() && s != NULL) {
    uint64_t len = n ? n : 1;
    int to_dev = sim_mem_contains(s->dev, dst, len);
    if (sim_mem_contains(s->dev, src, len))
      kind = to_dev ? SIM_TRACE_MEMCPY_D2D : SIM_TRACE_MEMCPY_D2H;
    else if (to_dev)
      kind = SIM_TRACE_MEMCPY_H2D;
  }
  return sim_memcpy_async_kind(s, dst, src, n, kind);
}

int sim_memset8_async(sim_stream* s, void* dst, uint8_t value, uint64_t n) {
  if (s == NULL || (n > 0 && dst == NULL)) return SIM_EINVAL;
  dst = sim_mem_alias(dst);
  return submit_copy(s, run_memset8, SIM_TRACE_MEMSET, "memset", dst, NULL, n,
                     value);
}

int sim_memset32_async(sim_stream* s, void* dst, uint32_t value, uint64_t n) {
  if (s == NULL || n % 4 != 0 || (uintptr_t)dst % 4 != 0 ||
      (n > 0 && dst == NULL))
    return SIM_EINVAL;
  dst = sim_mem_alias(dst);
  return submit_copy(s, run_memset32, SIM_TRACE_MEMSET, "memset32", dst, NULL,
                     n, value);
}

typedef struct callback_item {
  sim_work w;
  sim_stream* stream;
  sim_host_fn fn;
  void* arg;
} callback_item;

static int run_callback(sim_work* w, char* msg, size_t len) {
  callback_item* c = (callback_item*)w;
  int status = sim_stream_status(c->stream, NULL, 0);
  int rc = c->fn(c->arg, status, msg, len);
  if (rc == 0) return SIM_OK;
  if (msg[0] == '\0') snprintf(msg, len, "host callback failed (%d)", rc);
  return SIM_EFAILED;
}

int sim_host_callback_async(sim_stream* s, sim_host_fn fn, void* arg) {
  if (s == NULL || fn == NULL) return SIM_EINVAL;
  callback_item* c = sim_work_alloc(sizeof(*c), run_callback,
                                    SIM_WORK_ALWAYS_RUN, "host callback");
  if (c == NULL) return SIM_ENOMEM;
  c->w.trace.kind = SIM_TRACE_HOST_CALLBACK;
  c->stream = s;
  c->fn = fn;
  c->arg = arg;
  return sim_stream_submit(s, &c->w);
}
