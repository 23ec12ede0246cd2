/*
 * mutant_event_pending_after_error.c - an event recorded on a stream in
 * error stays SE_EVENT_PENDING for good: record_event returns OK, but the
 * plugin skips the event's marker like the device work queued behind a
 * failure.
 *
 * Peer: a plugin whose failed stream stops executing everything queued on
 * it, event markers included (a CUDA-like context that is dead after a
 * fault, with events emulated by markers the stream never reaches). TF's
 * EventMgr polls the event until it is not pending: the tensors and done
 * callbacks behind it wait forever.
 *
 * Deterministic: whether the stream is in error is decided on mini's
 * worker, in stream order, just before the marker (a host callback enqueued
 * by record_event ahead of it), not when record_event is called.
 *
 * Expected grade: required failure "faults.events_resolve" (callback
 * get_event_status), from faults.callback_error (the harness's own host
 * callback fails; the events recorded behind it stay pending).
 */
#include <pthread.h>
#include <stdlib.h>

#include "mini.h"
#include "tensorflow/c/tf_status.h"

typedef TF_Bool (*host_callback_fn)(const SP_Device*, SP_Stream,
                                    SE_StatusCallbackFn, void*);
typedef void (*stream_status_fn)(const SP_Device*, SP_Stream, TF_Status*);
typedef void (*record_fn)(const SP_Device*, SP_Stream, SP_Event, TF_Status*);
typedef void (*create_event_fn)(const SP_Device*, SP_Event*, TF_Status*);
typedef void (*destroy_event_fn)(const SP_Device*, SP_Event);
typedef SE_EventStatus (*event_status_fn)(const SP_Device*, SP_Event);

static host_callback_fn mini_host_callback;
static stream_status_fn mini_get_stream_status;
static record_fn mini_record_event;
static create_event_fn mini_create_event;
static destroy_event_fn mini_destroy_event;
static event_status_fn mini_get_event_status;

/* Live events, each with the number it was created with (an address may be
 * reused by a later event: a check still queued for a destroyed event must
 * not poison its successor). Guarded by mu. A test artifact: events beyond
 * kLive are simply never poisoned. */
enum { kLive = 256 };
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  SP_Event ev;
  unsigned long serial;
  int poisoned;
} live[kLive];
static unsigned long next_serial;

static int find(SP_Event ev) { /* mu held */
  for (int i = 0; i < kLive; i++)
    if (live[i].ev == ev) return i;
  return -1;
}

typedef struct check {
  const SP_Device* device;
  SP_Stream stream;
  SP_Event ev;
  unsigned long serial;
} check;

/* On mini's worker, right before the event's marker: a stream in error
 * "skips" the marker. */
static void check_stream(void* arg, TF_Status* unused) {
  check c = *(check*)arg;
  free(arg);
  TF_Status* st = TF_NewStatus();
  mini_get_stream_status(c.device, c.stream, st);
  int failed = TF_GetCode(st) != TF_OK;
  TF_DeleteStatus(st);
  pthread_mutex_lock(&mu);
  int i = find(c.ev);
  if (i >= 0 && live[i].serial == c.serial) live[i].poisoned |= failed;
  pthread_mutex_unlock(&mu);
}

static void create_event(const SP_Device* device, SP_Event* event,
                         TF_Status* status) {
  mini_create_event(device, event, status);
  if (TF_GetCode(status) != TF_OK || *event == NULL) return;
  pthread_mutex_lock(&mu);
  int i = find(NULL);
  if (i >= 0) {
    live[i].ev = *event;
    live[i].serial = ++next_serial;
    live[i].poisoned = 0;
  }
  pthread_mutex_unlock(&mu);
}

static void destroy_event(const SP_Device* device, SP_Event ev) {
  pthread_mutex_lock(&mu);
  int i = find(ev);
  if (i >= 0) live[i].ev = NULL;
  pthread_mutex_unlock(&mu);
  mini_destroy_event(device, ev);
}

static void record_event(const SP_Device* device, SP_Stream stream, SP_Event ev,
                         TF_Status* status) {
  pthread_mutex_lock(&mu);
  int i = find(ev);
  unsigned long serial = i >= 0 ? live[i].serial : 0;
  pthread_mutex_unlock(&mu);
  check* c = malloc(sizeof(*c));
  if (i >= 0 && c != NULL) {
    *c = (check){device, stream, ev, serial};
    if (!mini_host_callback(device, stream, check_stream, c)) free(c);
  } else {
    free(c);
  }
  mini_record_event(device, stream, ev, status);
}

static SE_EventStatus get_event_status(const SP_Device* device, SP_Event ev) {
  pthread_mutex_lock(&mu);
  int i = find(ev);
  int poisoned = i >= 0 && live[i].poisoned;
  pthread_mutex_unlock(&mu);
  return poisoned ? SE_EVENT_PENDING : mini_get_event_status(device, ev);
}

static void mutate_se(SP_StreamExecutor* se) {
  mini_host_callback = se->host_callback;
  mini_get_stream_status = se->get_stream_status;
  mini_record_event = se->record_event;
  mini_create_event = se->create_event;
  mini_destroy_event = se->destroy_event;
  mini_get_event_status = se->get_event_status;
  se->record_event = record_event;
  se->create_event = create_event;
  se->destroy_event = destroy_event;
  se->get_event_status = get_event_status;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
