/*
 * event.c - events: markers in a stream that the host or other streams wait
 * for, built on one mutex and one condition variable per event.
 *
 * Every record creates a marker (done / failed flags) and makes it the
 * event's `last`. A waiter (host or stream) takes the marker that is `last`
 * when it starts waiting and is released exactly when that marker's record
 * has run: re-recording the event later, even on a faster stream, does not
 * move an earlier waiter's target, as in CUDA.
 *
 * Lifetime: reference counts, all under the event's `lock`. The creator holds
 * one reference on the event; every queued record or wait item holds one on
 * the event and one on its marker until its done callback. So an event may be
 * destroyed while its markers are still queued; markers share the event's
 * lock and condvar, which therefore outlive them.
 */
#include <string.h>

#include "sim_internal.h"

typedef struct marker {
  int refs;            /* event's `last` + queued items + host waiters */
  int done;            /* the record has run */
  int failed;          /* ... on a stream in error */
  uint32_t stream_key; /* sim_trace_stream_key of the recording stream */
} marker;

struct sim_event {
  pthread_mutex_t lock; /* guards everything below and all markers */
  pthread_cond_t cv;    /* broadcast when a marker is done */
  int refs;
  marker* last; /* newest record, NULL if never recorded */
};

/* Called with e->lock held. */
static void marker_unref(marker* m) {
  SIM_CHECK(m->refs > 0);
  if (--m->refs == 0) free(m);
}

int sim_event_create(sim_event** out) {
  if (out == NULL) return SIM_EINVAL;
  sim_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return SIM_ENOMEM;
  sim_mutex_init(&e->lock);
  sim_cond_init(&e->cv);
  e->refs = 1;
  *out = e;
  return SIM_OK;
}

static void event_ref(sim_event* e) {
  sim_mutex_lock(&e->lock);
  SIM_CHECK(e->refs > 0);
  e->refs++;
  sim_mutex_unlock(&e->lock);
}

static void event_unref(sim_event* e) {
  sim_mutex_lock(&e->lock);
  SIM_CHECK(e->refs > 0);
  int left = --e->refs;
  sim_mutex_unlock(&e->lock);
  if (left > 0) return;
  if (e->last != NULL) {
    SIM_CHECK(e->last->refs == 1); /* no queued item can hold it any more */
    free(e->last);
  }
  sim_cond_destroy(&e->cv);
  sim_mutex_destroy(&e->lock);
  free(e);
}

void sim_event_destroy(sim_event* e) {
  if (e != NULL) event_unref(e);
}

/* ---- record and wait items -------------------------------------------- */

typedef struct event_item {
  sim_work w;
  sim_stream* stream;
  sim_event* event;
  marker* m;
} event_item;

static void event_item_done(sim_work* w, int status) {
  event_item* it = (event_item*)w;
  sim_event* e = it->event;
  sim_mutex_lock(&e->lock);
  marker_unref(it->m);
  sim_mutex_unlock(&e->lock);
  event_unref(e);
  free(it);
}

static event_item* event_item_new(sim_stream* s, sim_event* e,
                                  sim_work_run_fn run, const char* label) {
  event_item* it = sim_work_alloc(sizeof(*it), run, SIM_WORK_ALWAYS_RUN, label);
  if (it == NULL) return NULL;
  it->w.done = event_item_done;
  it->stream = s;
  it->event = e;
  event_ref(e);
  return it;
}

static int run_record(sim_work* w, char* msg, size_t len) {
  event_item* it = (event_item*)w;
  sim_event* e = it->event;
  int stream_ok = sim_stream_status(it->stream, NULL, 0) == SIM_OK;
  sim_mutex_lock(&e->lock);
  it->m->done = 1;
  it->m->failed = !stream_ok;
  sim_cond_broadcast(&e->cv);
  sim_mutex_unlock(&e->lock);
  return SIM_OK;
}

/* sim_event_record without the fault plan (sim_internal.h): the records
 * device_sim makes for itself (sim_stream_wait_stream's, the markers of
 * sim_device_synchronize) are not the caller's event records. */
int sim_event_record_marker(sim_event* e, sim_stream* s) {
  if (e == NULL || s == NULL) return SIM_EINVAL;
  marker* m = calloc(1, sizeof(*m));
  event_item* it = m ? event_item_new(s, e, run_record, "record event") : NULL;
  if (it == NULL) {
    free(m);
    return SIM_ENOMEM;
  }
  it->w.trace.kind = SIM_TRACE_EVENT_RECORD;
  m->stream_key = sim_trace_stream_key(s->dev->ordinal, s->id);
  sim_mutex_lock(&e->lock);
  m->refs = 2; /* e->last and the record item */
  if (e->last != NULL) marker_unref(e->last);
  e->last = m;
  it->m = m;
  sim_mutex_unlock(&e->lock);
  /* On an idle stream the marker is reached at once: mark it here rather
   * than wake the worker for it. */
  if (sim_stream_run_inline(s, &it->w) == 1) return SIM_OK;
  return sim_stream_submit(s, &it->w);
}

int sim_event_record(sim_event* e, sim_stream* s) {
  if (e == NULL || s == NULL) return SIM_EINVAL;
  /* SIMDEV_FAULTS event rules (faults.c): refused at once, as a driver
   * refuses a record; nothing is enqueued and the event stays as it was. */
  if (sim_faults_on() && sim_faults_event() != SIM_OK) return SIM_EFAILED;
  return sim_event_record_marker(e, s);
}

static int run_wait(sim_work* w, char* msg, size_t len) {
  event_item* it = (event_item*)w;
  sim_event* e = it->event;
  sim_mutex_lock(&e->lock);
  while (!it->m->done) sim_cond_wait(&e->cv, &e->lock);
  sim_mutex_unlock(&e->lock);
  return SIM_OK;
}

/* sim_stream_wait_event, recorded as `kind` (an event wait, or the wait of
 * sim_stream_wait_stream) with the recording stream as its peer. */
static int wait_event(sim_stream* s, sim_event* e, uint32_t kind) {
  if (e == NULL || s == NULL) return SIM_EINVAL;
  event_item* it = event_item_new(s, e, run_wait, "wait event");
  if (it == NULL) return SIM_ENOMEM;
  it->w.trace.kind = kind;
  sim_mutex_lock(&e->lock);
  marker* m = e->last;
  if (m == NULL || m->done) {
    /* Never recorded, or already complete: nothing to wait for. */
    sim_mutex_unlock(&e->lock);
    event_unref(e);
    free(it);
    return SIM_OK;
  }
  m->refs++;
  it->m = m;
  it->w.trace.peer = m->stream_key;
  sim_mutex_unlock(&e->lock);
  return sim_stream_submit(s, &it->w);
}

int sim_stream_wait_event(sim_stream* s, sim_event* e) {
  return wait_event(s, e, SIM_TRACE_EVENT_WAIT);
}

/* A stream-on-stream wait is an event recorded on `other` and waited for on
 * `dependent`; it lives here, with the other waits, so that stream.c needs
 * nothing from this file. */
int sim_stream_wait_stream(sim_stream* dependent, sim_stream* other) {
  if (dependent == NULL || other == NULL) return SIM_EINVAL;
  if (dependent == other) return SIM_OK; /* a stream is already in order */
  sim_event* e;
  int err = sim_event_create(&e);
  if (err != SIM_OK) return err;
  err = sim_event_record_marker(e, other);
  if (err == SIM_OK) err = wait_event(dependent, e, SIM_TRACE_STREAM_WAIT);
  sim_event_destroy(e); /* the queued marker and wait hold references */
  return err;
}

sim_event_state sim_event_query(sim_event* e) {
  sim_mutex_lock(&e->lock);
  sim_event_state st = SIM_EVENT_COMPLETE;
  if (e->last != NULL && !e->last->done)
    st = SIM_EVENT_PENDING;
  else if (e->last != NULL && e->last->failed)
    st = SIM_EVENT_ERROR;
  sim_mutex_unlock(&e->lock);
  return st;
}

int sim_event_synchronize(sim_event* e) {
  if (e == NULL) return SIM_EINVAL;
  sim_mutex_lock(&e->lock);
  marker* m = e->last;
  int err = SIM_OK;
  if (m != NULL) {
    m->refs++; /* a re-record may drop it from e->last while we wait */
    while (!m->done) sim_cond_wait(&e->cv, &e->lock);
    err = m->failed ? SIM_ESTREAM : SIM_OK;
    marker_unref(m);
  }
  sim_mutex_unlock(&e->lock);
  return err;
}
