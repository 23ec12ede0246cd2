/*
 * plugin.c - TF_InitProfiler: simdev's pluggable profiler, the profiler
 * module's only contact with TensorFlow (pluggable_profiler.h). Everything
 * else of src/profiler/ is TF-free; errors are sim_err codes there and
 * become a TF_Status once, here (set_status).
 *
 * How TF 2.21 drives it (docs/profiling.md has the long form):
 * - TF_InitProfiler runs once, when TF loads the plugin (`import
 *   tensorflow`), on the importing thread, after SE_InitPlugin. An error
 *   status, a NULL device_type, callback or destroy function, or a wrong
 *   struct_size aborts the process (a CHECK in TF's plugin loader). TF
 *   calls both destroy functions twice right away, on copies of the
 *   structs, and keeps using the profiler (see destroy_profiler below).
 * - Each tf.profiler session (tf.profiler.experimental.start/stop,
 *   ...Profile, the Keras TensorBoard callback, a remote capture) with
 *   device_tracer_level >= 1 gets a profiler from TF's factory, which calls
 *   start in the session's constructor (on the thread that starts the
 *   session), then stop and collect_data_xspace when the session collects
 *   (on the thread that stops it). TF runs one session per process at a
 *   time (its profiler lock). A failed start means no stop and no collect;
 *   TF logs each failure at ERROR and carries on: the session succeeds
 *   without the plugin's planes.
 * - collect_data_xspace is called twice: buffer NULL for the size, then a
 *   buffer of exactly that size. A size of 0 ends it (no second call). TF
 *   parses the whole buffer as an XSpace and ignores whether that worked:
 *   bytes that are no XSpace lose the planes without a word, a truncated
 *   one gives partial planes.
 *
 * What a session shows: every record device_sim made between start and
 * stop (sim_trace_snapshot_take over that window of CLOCK_MONOTONIC),
 * encoded by sp_xspace_encode: a plane per SIMDEV device. Recording is
 * started and stopped with sim_trace_start/stop, which nest: SIMDEV_TRACE
 * (tracefile.c) may be recording the whole run at the same time.
 *
 * Thread contract: TF may call start, stop and collect from any thread
 * (the Python thread, a profiler-server thread); g_lock guards the session
 * state below, and each callback holds it while it reads or changes it. The
 * destroy callbacks touch no shared state.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/sp.h"
#include "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h"
#include "tensorflow/c/tf_status.h"

/* The device type; TF 2.21 only validates it (nothing matches profilers to
 * devices by it), but it names the plugin's profiler: SE_InitPlugin's. */
#define SP_DEVICE_TYPE "SIMDEV"

typedef enum sp_state {
  SP_IDLE = 0,    /* no session, or its data was handed over */
  SP_RUNNING = 1, /* start succeeded; recording */
  SP_STOPPED = 2, /* stop took the snapshot; collect hands it over */
} sp_state;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* Guarded by g_lock: */
static sp_state g_state;
static uint64_t g_begin_ns;        /* sim_now_ns() at start */
static sim_trace_snapshot* g_snap; /* SP_STOPPED, until encoded */
static uint8_t* g_xspace;          /* SP_STOPPED, once encoded */
static size_t g_xspace_len;
/* SIMDEV_TRACE_EVENTS, set by SE_InitPlugin before TF can start a session
 * (sp_profiler_set_ring_records); 0: device_sim's default. */
static _Atomic uint32_t g_ring_records;

void sp_profiler_set_ring_records(uint32_t records) {
  atomic_store(&g_ring_records, records);
}

static void set_status(TF_Status* status, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_status(TF_Status* status, TF_Code code, const char* fmt, ...) {
  char msg[512];
  int n = snprintf(msg, sizeof(msg), "simdev profiler: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
  va_end(ap);
  TF_SetStatus(status, code, msg);
}

static TF_Code code_of(int err) {
  switch (err) {
    case SIM_EINVAL: return TF_INVALID_ARGUMENT;
    case SIM_ENOMEM: return TF_RESOURCE_EXHAUSTED;
    default: return TF_INTERNAL;
  }
}

/* Drops what a stopped session holds and goes back to SP_IDLE. g_lock. */
static void release_locked(void) {
  sim_trace_snapshot_free(g_snap);
  g_snap = NULL;
  free(g_xspace);
  g_xspace = NULL;
  g_xspace_len = 0;
  g_state = SP_IDLE;
}

static void profiler_start(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
  sim_mutex_lock(&g_lock);
  if (g_state == SP_RUNNING) {
    sim_mutex_unlock(&g_lock);
    set_status(status, TF_FAILED_PRECONDITION,
               "start: a session is already running (stop and collect it "
               "first; TensorFlow runs one profiler session at a time)");
    return;
  }
  /* A stopped session nobody collected is superseded by the new one. */
  release_locked();
  int rc = sim_trace_start(atomic_load(&g_ring_records));
  if (rc != SIM_OK) {
    sim_mutex_unlock(&g_lock);
    set_status(status, code_of(rc), "start: cannot start recording (%s)",
               sim_strerror(rc));
    return;
  }
  /* After sim_trace_start: the window holds only what this session could
   * record (rings SIMDEV_TRACE keeps may hold older records). */
  g_begin_ns = sim_now_ns();
  g_state = SP_RUNNING;
  sim_mutex_unlock(&g_lock);
  TF_SetStatus(status, TF_OK, "");
}

static void profiler_stop(const TP_Profiler* profiler, TF_Status* status) {
  (void)profiler;
  sim_mutex_lock(&g_lock);
  if (g_state != SP_RUNNING) {
    sim_mutex_unlock(&g_lock);
    set_status(status, TF_FAILED_PRECONDITION,
               "stop: no session is running (start was not called, or it "
               "failed)");
    return;
  }
  /* Items still queued or running now are not in the window: their records
   * are written when they end, and stop does not wait for the device (TF
   * stops its tracers one after another; a wait here would stretch their
   * windows). A session shows what ran while it was open. */
  uint64_t end_ns = sim_now_ns();
  sim_trace_snapshot* snap = NULL;
  int rc = sim_trace_snapshot_take(g_begin_ns, end_ns, &snap);
  sim_trace_stop(); /* whatever happened: every start has its stop */
  if (rc != SIM_OK) {
    g_state = SP_IDLE;
    sim_mutex_unlock(&g_lock);
    set_status(status, code_of(rc), "stop: cannot copy the records (%s)",
               sim_strerror(rc));
    return;
  }
  g_snap = snap;
  g_state = SP_STOPPED;
  sim_mutex_unlock(&g_lock);
  TF_SetStatus(status, TF_OK, "");
}

/* Serializes the stopped session's snapshot once (g_xspace) and frees the
 * snapshot. SIM_OK or SIM_ENOMEM. g_lock, SP_STOPPED. */
static int encode_locked(void) {
  if (g_snap == NULL) return SIM_OK; /* encoded already */
  uint8_t* out = NULL;
  size_t len = 0;
  int rc = sp_xspace_encode(g_snap, &out, &len);
  if (rc != SIM_OK) return rc;
  sim_trace_snapshot_free(g_snap);
  g_snap = NULL;
  g_xspace = out;
  g_xspace_len = len;
  return SIM_OK;
}

static void profiler_collect_data_xspace(const TP_Profiler* profiler,
                                         uint8_t* buffer, size_t* size_in_bytes,
                                         TF_Status* status) {
  (void)profiler;
  if (size_in_bytes == NULL) {
    set_status(status, TF_INVALID_ARGUMENT,
               "collect_data_xspace: size_in_bytes is NULL");
    return;
  }
  size_t given = *size_in_bytes;
  /* TF reads the size even when we fail: never leave it unset. */
  *size_in_bytes = 0;
  sim_mutex_lock(&g_lock);
  if (g_state != SP_STOPPED) {
    const char* why = g_state == SP_RUNNING
                          ? "the session is still running (stop it first)"
                          : "no stopped session to collect (start and stop "
                            "one first; each session's data is handed over "
                            "once)";
    sim_mutex_unlock(&g_lock);
    set_status(status, TF_FAILED_PRECONDITION, "collect_data_xspace: %s", why);
    return;
  }
  int rc = encode_locked();
  if (rc != SIM_OK) {
    release_locked();
    sim_mutex_unlock(&g_lock);
    set_status(status, code_of(rc),
               "collect_data_xspace: cannot encode the XSpace (%s)",
               sim_strerror(rc));
    return;
  }
  size_t len = g_xspace_len;
  if (buffer == NULL) {
    *size_in_bytes = len;
    /* An empty XSpace serializes to 0 bytes, and on 0 TF makes no second
     * call: the session ends here. */
    if (len == 0) release_locked();
    sim_mutex_unlock(&g_lock);
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  if (given < len) {
    /* Kept: a retry with a buffer of the right size still gets it. */
    sim_mutex_unlock(&g_lock);
    *size_in_bytes = len;
    set_status(status, TF_INVALID_ARGUMENT,
               "collect_data_xspace: a buffer of %zu bytes for an XSpace of "
               "%zu bytes (call with buffer NULL first for the size)",
               given, len);
    return;
  }
  memcpy(buffer, g_xspace, len);
  *size_in_bytes = len;
  release_locked();
  sim_mutex_unlock(&g_lock);
  TF_SetStatus(status, TF_OK, "");
}

/* TF 2.21 calls the destroy functions on copies of the structs, several
 * times at import already (its factory holds them by value and is copied),
 * while the profiler stays registered. So they must not free anything the
 * callbacks use, and simdev allocates nothing for these structs
 * (device_type is a string literal): there is nothing to clean up, which
 * is what these say by clearing the plugin's fields of the copy they get. */
static void destroy_profiler(TP_Profiler* profiler) {
  if (profiler == NULL) return;
  profiler->ext = NULL;
  profiler->device_type = NULL;
}

static void destroy_profiler_fns(TP_ProfilerFns* fns) {
  if (fns == NULL) return;
  fns->ext = NULL;
}

/* Fills the structs TF hands in, field by field: assigning a whole struct
 * over *params (as the header's example does) would wipe the profiler and
 * profiler_fns pointers TF set. */
__attribute__((visibility("default"))) void TF_InitProfiler(
    TF_ProfilerRegistrationParams* params, TF_Status* status) {
  if (params == NULL || params->profiler == NULL ||
      params->profiler_fns == NULL) {
    set_status(status, TF_INVALID_ARGUMENT,
               "TF_InitProfiler: params, params->profiler or "
               "params->profiler_fns is NULL");
    return;
  }
  if (params->struct_size < TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE) {
    set_status(status, TF_FAILED_PRECONDITION,
               "TF_InitProfiler: TF_ProfilerRegistrationParams of %zu bytes, "
               "simdev was built for %zu (another TensorFlow release?)",
               params->struct_size,
               (size_t)TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE);
    return;
  }
  params->struct_size = TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->destroy_profiler = destroy_profiler;
  params->destroy_profiler_fns = destroy_profiler_fns;

  TP_Profiler* p = params->profiler;
  p->struct_size = TP_PROFILER_STRUCT_SIZE;
  p->ext = NULL;
  p->device_type = SP_DEVICE_TYPE;

  TP_ProfilerFns* fns = params->profiler_fns;
  fns->struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
  fns->ext = NULL;
  fns->start = profiler_start;
  fns->stop = profiler_stop;
  fns->collect_data_xspace = profiler_collect_data_xspace;
  TF_SetStatus(status, TF_OK, "");
}
