/*
 * runtime.c - the device and stream behind the XLA handlers, and the life of
 * a job: queued by a handler on the thread XLA calls it from, run on the
 * stream's worker, completed there by setting the handler's XLA_FFI_Future (or
 * waking the handler, with SIMDEV_SYNC=1).
 *
 * One device (ordinal 0) and one stream serve every caller: XLA:CPU may call
 * handlers from several threads at once (independent parts of a program,
 * several programs); their jobs run one after the other on the worker
 * "simdev0-s0", each spreading its arithmetic over device_sim's pool, like
 * TF's kernels on the same device's compute stream.
 *
 * Errors on the worker never make the stream's status sticky: a job's run
 * returns SIM_OK to the stream and keeps its own code, so a failed call
 * (scratch that does not fit) does not fail the calls after it. The done
 * callback turns that code into the future's error.
 *
 * Completing a future runs XLA's continuation (the rest of the program,
 * host callbacks included) on the worker thread: XLA's async values run
 * their waiters on the thread that makes them available (seen with jaxlib
 * 0.10.2: a jax.pure_callback after a simdev call runs on "simdev0-s0").
 * The stream's next job waits until that returns. A handler called there
 * queues its job and returns (there are futures, so SIMDEV_SYNC is off), or
 * fails with UNAVAILABLE instead of waiting when a shutdown is draining the
 * stream. What must not happen there: a host callback that blocks on
 * another simdev call (the worker would wait for itself).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/sp.h"
#include "sx_internal.h"

/* Locks: g.mu is never held while waiting for a stream (synchronize,
 * destroy): the worker may want it, when an XLA continuation running there
 * calls a handler. Creating the device and stream under it is fine (that
 * waits for no worker). counts.mu is a leaf, taken by handlers and by the
 * worker's done. */
static struct {
  pthread_mutex_t mu; /* guards the fields below */
  /* users dropped to 0, or a shutdown ended. A static initializer (the
   * realtime clock, unlike sim_cond_init's monotonic one): only untimed
   * waits use it. */
  pthread_cond_t cv;
  sim_device* dev; /* NULL until the first init, and after shutdown */
  sim_stream* stream;
  int sync;    /* SIMDEV_SYNC of the settings read at init */
  int tracing; /* SIMDEV_TRACE's file was started (once per process) */
  /* Trace name ids of the targets seen (sim_trace_intern takes a lock and
   * is meant for once per name), keyed by the handlers' literal. Never
   * invalidated: only device_sim's own tests call sim_trace_reset. */
  struct {
    const char* target;
    uint32_t id;
  } names[16];
  int nnames;
  /* Handlers between acquire and release: they use dev and stream without
   * the lock, so shutdown waits for them to leave. */
  int users;
  int stopping;         /* a shutdown is destroying dev and stream */
  sim_stream* draining; /* the stream shutdown is draining (alive) */
} g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static struct {
  pthread_mutex_t mu; /* guards the counts; taken by handlers and workers */
  uint64_t enqueued, completed, failed;
} counts = {PTHREAD_MUTEX_INITIALIZER};

/* ---- device and stream --------------------------------------------------- */

/* Creates dev and stream if there are none. g.mu held. Returns a sim_err;
 * *disabled is set for SIMDEV_DISABLE=1. */
static int init_locked(char* msg, size_t len, bool* disabled) {
  *disabled = false;
  if (g.dev != NULL) return SIM_OK;
  sim_config cfg;
  int rc = sim_config_from_env(&cfg, msg, len);
  if (rc != SIM_OK) return rc;
  if (cfg.disabled) {
    *disabled = true;
    snprintf(msg, len,
             "SIMDEV_DISABLE=1: simdev offers no device, so its XLA targets "
             "cannot run (unset SIMDEV_DISABLE to use them)");
    return SIM_EINVAL;
  }
  /* SIMDEV_TRACE, as in the TF plugin (src/profiler/tracefile.c): record
   * from before the device exists, write Chrome trace JSON at exit. The
   * file is checked now, so a bad path fails here, naming the variable.
   * Once per process: a re-init after a shutdown keeps the first file. */
  if (cfg.trace_path[0] != '\0' && !g.tracing) {
    char why[400];
    rc =
        sp_tracefile_start(cfg.trace_path, cfg.trace_records, why, sizeof(why));
    if (rc != SIM_OK) {
      snprintf(msg, len, "SIMDEV_TRACE: %s", why);
      return SIM_EINVAL;
    }
    g.tracing = 1;
  }
  sim_device* dev;
  rc = sim_faults_set(cfg.faults, msg, len);
  if (rc != SIM_OK) return rc;
  rc = sim_device_create_ex(0, cfg.memory_mb,
                            cfg.discrete ? SIM_DEVICE_DISCRETE : 0, &dev);
  if (rc != SIM_OK) {
    snprintf(msg, len,
             "cannot create simdev device 0 with SIMDEV_MEMORY_MB=%llu: %s",
             (unsigned long long)cfg.memory_mb, sim_strerror(rc));
    return rc;
  }
  sim_stream* s;
  rc = sim_stream_create(dev, &s);
  if (rc != SIM_OK) {
    snprintf(msg, len, "cannot create a stream on simdev device 0: %s",
             sim_strerror(rc));
    sim_device_destroy(dev);
    return rc;
  }
  sa_blas_init();
  g.dev = dev;
  g.stream = s;
  g.sync = cfg.sync_launch;
  return SIM_OK;
}

/* Waits (g.mu held) until no shutdown is running. False, without waiting,
 * when the caller is the worker of the stream being drained: that
 * shutdown waits for this very thread (an XLA continuation running on it),
 * so waiting would never end. */
static bool wait_not_stopping(void) {
  while (g.stopping) {
    if (g.draining != NULL && sim_stream_is_current(g.draining)) return false;
    sim_cond_wait(&g.cv, &g.mu);
  }
  return true;
}

static const char draining_msg[] =
    "called on the stream's worker while simdev_xla_shutdown drains that "
    "stream; not run";

int simdev_xla_init(char* msg, size_t len) {
  char buf[512];
  bool disabled;
  int rc = SIM_EINVAL;
  sim_mutex_lock(&g.mu);
  if (wait_not_stopping())
    rc = init_locked(buf, sizeof(buf), &disabled);
  else
    snprintf(buf, sizeof(buf), "%s", draining_msg);
  sim_mutex_unlock(&g.mu);
  if (msg != NULL && len > 0) snprintf(msg, len, "%s", rc ? buf : "");
  return rc;
}

/* The trace name id of target (0 when the table is full). g.mu held. */
static uint32_t trace_name_locked(const char* target) {
  for (int i = 0; i < g.nnames; i++)
    if (g.names[i].target == target) return g.names[i].id;
  if (g.nnames == (int)(sizeof(g.names) / sizeof(g.names[0]))) return 0;
  uint32_t id = sim_trace_intern(target);
  g.names[g.nnames].target = target;
  g.names[g.nnames++].id = id;
  return id;
}

/* Makes sure dev and stream exist and keeps them alive until release.
 * *trace_name: target's trace name id (0 if the table is full). */
static XLA_FFI_Error_Code acquire(const char* target, sim_device** dev,
                                  sim_stream** s, int* sync,
                                  uint32_t* trace_name, char* msg, size_t len) {
  bool disabled;
  sim_mutex_lock(&g.mu);
  if (!wait_not_stopping()) {
    sim_mutex_unlock(&g.mu);
    snprintf(msg, len, "%s", draining_msg);
    return XLA_FFI_Error_Code_UNAVAILABLE;
  }
  int rc = init_locked(msg, len, &disabled);
  if (rc == SIM_OK) {
    g.users++;
    *dev = g.dev;
    *s = g.stream;
    *sync = g.sync;
    *trace_name = trace_name_locked(target);
  }
  sim_mutex_unlock(&g.mu);
  if (rc == SIM_OK) return XLA_FFI_Error_Code_OK;
  /* The call's arguments are fine; the process's settings are not. */
  if (disabled || rc == SIM_EINVAL)
    return XLA_FFI_Error_Code_FAILED_PRECONDITION;
  if (rc == SIM_ENOMEM) return XLA_FFI_Error_Code_RESOURCE_EXHAUSTED;
  return XLA_FFI_Error_Code_INTERNAL;
}

static void release(void) {
  sim_mutex_lock(&g.mu);
  if (--g.users == 0) sim_cond_broadcast(&g.cv);
  sim_mutex_unlock(&g.mu);
}

int simdev_xla_shutdown(void) {
  sim_mutex_lock(&g.mu);
  /* On the worker (an XLA continuation or host callback running there),
   * draining the stream would wait for this very thread. */
  if ((g.stream != NULL && sim_stream_is_current(g.stream)) ||
      (g.draining != NULL && sim_stream_is_current(g.draining))) {
    sim_mutex_unlock(&g.mu);
    return SIM_EINVAL;
  }
  while (g.stopping) sim_cond_wait(&g.cv, &g.mu);
  g.stopping = 1;
  /* draining is set now, before waiting for the users: a handler called
   * meanwhile on the worker (by a continuation of a job the users queued)
   * must be refused at once, not wait for a shutdown that will wait for
   * the worker. Broadcast: such a handler may be waiting already. */
  g.draining = g.stream;
  sim_cond_broadcast(&g.cv);
  while (g.users > 0) sim_cond_wait(&g.cv, &g.mu);
  sim_device* dev = g.dev;
  sim_stream* s = g.stream;
  g.dev = NULL;
  g.stream = NULL;
  sim_mutex_unlock(&g.mu);
  /* Without g.mu: the queued jobs run and their done callbacks complete
   * their futures, running XLA's continuations on the worker; handlers
   * those call fail at once (wait_not_stopping), so nothing is queued
   * after this and s stays alive while they look at it. */
  /* Its status may be an error (an item failed by SIMDEV_FAULTS): the
   * jobs drained behind it got theirs already; the wait is what counts. */
  if (s != NULL) (void)sim_stream_synchronize(s);
  sim_mutex_lock(&g.mu);
  g.draining = NULL;
  sim_mutex_unlock(&g.mu);
  /* s is idle now: destroying it joins its worker. */
  if (s != NULL) sim_stream_destroy(s);
  if (dev != NULL) sim_device_destroy(dev);
  sim_mutex_lock(&g.mu);
  g.stopping = 0;
  sim_cond_broadcast(&g.cv);
  sim_mutex_unlock(&g.mu);
  return SIM_OK;
}

void simdev_xla_counts(uint64_t* enqueued, uint64_t* completed,
                       uint64_t* failed) {
  sim_mutex_lock(&counts.mu);
  if (enqueued) *enqueued = counts.enqueued;
  if (completed) *completed = counts.completed;
  if (failed) *failed = counts.failed;
  sim_mutex_unlock(&counts.mu);
}

/* ---- jobs ---------------------------------------------------------------- */

/* A SIMDEV_SYNC handler waiting for its job (on the handler's stack). */
struct sx_wait {
  pthread_mutex_t mu; /* guards done */
  pthread_cond_t cv;
  bool done;
};

void* sx_job_new(size_t size, sx_run_fn run) {
  sx_job* j = calloc(1, size);
  if (j != NULL) j->run = run;
  return j;
}

/* Worker: the arithmetic. Its failure stays in the job (see the top). */
static int job_run(sim_work* w, char* msg, size_t len) {
  sx_job* j = (sx_job*)w;
  j->code = j->run(j, j->dev, j->msg, sizeof(j->msg));
  return SIM_OK;
}

/* Worker: completes the call. status is not SIM_OK only when the stream
 * did not run the job: it was in error already (not from our jobs, whose
 * failures are in j->code), or SIMDEV_FAULTS failed it. */
static void job_done(sim_work* w, int status) {
  sx_job* j = (sx_job*)w;
  if (status != SIM_OK) {
    /* The stream's first failure says why (e.g. a SIMDEV_FAULTS rule). */
    char why[256];
    sim_stream_status(j->stream, why, sizeof(why));
    j->code = XLA_FFI_Error_Code_INTERNAL;
    snprintf(j->msg, sizeof(j->msg), "%s%s",
             status == SIM_ESTREAM ? "not run: the simdev stream failed "
                                     "earlier: "
                                   : "",
             why[0] != '\0' ? why : sim_strerror(status));
  }
  sim_mutex_lock(&counts.mu);
  if (j->code == XLA_FFI_Error_Code_OK)
    counts.completed++;
  else
    counts.failed++;
  sim_mutex_unlock(&counts.mu);

  if (j->wait != NULL) { /* the handler reads code and msg, then frees j */
    struct sx_wait* wt = j->wait;
    sim_mutex_lock(&wt->mu);
    wt->done = true;
    sim_cond_signal(&wt->cv);
    sim_mutex_unlock(&wt->mu);
    return;
  }
  XLA_FFI_Error* err = NULL;
  if (j->code != XLA_FFI_Error_Code_OK) {
    char m[640];
    snprintf(m, sizeof(m), "%s: %s", j->target, j->msg);
    XLA_FFI_Future_SetError_Args a = {
        .struct_size = XLA_FFI_Future_SetError_Args_STRUCT_SIZE,
        .future = j->future,
        .error = sx_error_msg(j->api, j->code, m), /* XLA takes it */
    };
    err = j->api->XLA_FFI_Future_SetError(&a);
  } else {
    XLA_FFI_Future_SetAvailable_Args a = {
        .struct_size = XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE,
        .future = j->future,
    };
    err = j->api->XLA_FFI_Future_SetAvailable(&a);
  }
  /* XLA refusing to complete a future it made is a broken contract: its
   * program would wait forever, so stop here with file and line. */
  SIM_CHECK(err == NULL);
  free(j);
}

XLA_FFI_Error* sx_launch(const sx_call* c, sx_job* j) {
  char msg[512];
  sim_device* dev;
  sim_stream* s;
  int sync;
  uint32_t trace_name;
  XLA_FFI_Error_Code code =
      acquire(c->target, &dev, &s, &sync, &trace_name, msg, sizeof(msg));
  if (code != XLA_FFI_Error_Code_OK) {
    free(j);
    return sx_error(c, code, "%s", msg);
  }
  j->work.run = job_run;
  j->work.done = job_done;
  j->work.label = c->target;
  /* A kernel item named after the target, its op type the same (the TF
   * plugin's are node name and op type): the trace recorder shows it and
   * SIMDEV_FAULTS' launch rules (op=simdev_matmul) match it. */
  j->work.trace.kind = SIM_TRACE_KERNEL;
  j->work.trace.name = trace_name;
  j->work.trace.type = trace_name;
  j->target = c->target;
  j->api = c->api;
  j->dev = dev;
  j->stream = s;

  if (sync) {
    struct sx_wait wt = {.done = false};
    sim_mutex_init(&wt.mu);
    sim_cond_init(&wt.cv);
    j->wait = &wt;
    sim_mutex_lock(&counts.mu);
    counts.enqueued++;
    sim_mutex_unlock(&counts.mu);
    SIM_CHECK(sim_stream_submit(s, &j->work) == SIM_OK);
    release();
    sim_mutex_lock(&wt.mu);
    while (!wt.done) sim_cond_wait(&wt.cv, &wt.mu);
    sim_mutex_unlock(&wt.mu);
    sim_cond_destroy(&wt.cv);
    sim_mutex_destroy(&wt.mu);
    XLA_FFI_Error* e = NULL;
    if (j->code != XLA_FFI_Error_Code_OK)
      e = sx_error(c, j->code, "%s", j->msg);
    free(j);
    return e;
  }

  /* The future exists before the job is queued: the worker may complete
   * it before sim_stream_submit returns. */
  XLA_FFI_Future_Create_Args fa = {
      .struct_size = XLA_FFI_Future_Create_Args_STRUCT_SIZE,
  };
  XLA_FFI_Error* e = c->api->XLA_FFI_Future_Create(&fa);
  if (e != NULL || fa.future == NULL) {
    release();
    free(j);
    if (e != NULL) return e;
    return sx_error(c, XLA_FFI_Error_Code_INTERNAL,
                    "XLA_FFI_Future_Create returned no future");
  }
  j->future = fa.future;
  c->frame->future = fa.future;
  sim_mutex_lock(&counts.mu);
  counts.enqueued++;
  sim_mutex_unlock(&counts.mu);
  /* Fails only for an incomplete item, which this is not. */
  SIM_CHECK(sim_stream_submit(s, &j->work) == SIM_OK);
  release();
  return NULL;
}
