/*
 * mutant_cb_drop_after_error.c - once a host callback returned an error,
 * the callbacks behind it are "enqueued" (host_callback returns true) and
 * never called: the plugin treats them like device work on a stream in
 * error and skips them.
 *
 * Peer: a plugin that drains everything queued on a failed stream, host
 * callbacks included (device_sim marks callbacks SIM_WORK_ALWAYS_RUN so as
 * not to). Whoever enqueued a skipped callback waits for it forever, and
 * TF's callback context (CStream::DoHostCallbackWithStatus) leaks.
 *
 * Expected grade: required failure "faults.callbacks_after_error_run"
 * (callback host_callback), from faults.callback_error.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "mini.h"

typedef TF_Bool (*host_callback_fn)(const SP_Device*, SP_Stream,
                                    SE_StatusCallbackFn, void*);
static host_callback_fn mini_host_callback;
/* A callback failed in this process (each harness test has its own). */
static atomic_int failed;

typedef struct wrapped {
  SE_StatusCallbackFn fn;
  void* arg;
} wrapped;

/* Runs on mini's worker, in stream order: decided when the callback's turn
 * comes, so the drop does not depend on timing. */
static void run_wrapped(void* p, TF_Status* status) {
  wrapped w = *(wrapped*)p;
  free(p);
  if (atomic_load(&failed)) return; /* skipped: the anti-pattern */
  w.fn(w.arg, status);
  if (TF_GetCode(status) != TF_OK) atomic_store(&failed, 1);
}

static TF_Bool drop_after_error(const SP_Device* device, SP_Stream stream,
                                SE_StatusCallbackFn fn, void* arg) {
  wrapped* w = malloc(sizeof(*w));
  if (w == NULL) return 0;
  w->fn = fn;
  w->arg = arg;
  if (mini_host_callback(device, stream, run_wrapped, w)) return 1;
  free(w);
  return 0;
}

static void mutate_se(SP_StreamExecutor* se) {
  mini_host_callback = se->host_callback;
  se->host_callback = drop_after_error;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
