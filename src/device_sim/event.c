/*
 * event.c - events: markers in a stream that the host or other streams wait
 * for, built on one mutex and one condition variable per event.
 *
 * Each record gets a generation number (1, 2, ...). `recorded` is the newest
 * generation enqueued, `completed` the newest that has run. A waiter (host or
 * stream) captures `recorded` when it starts waiting and is released once
 * `completed` reaches it: re-recording an event later does not move an
 * earlier waiter's target, as in CUDA. (If a record is re-enqueued on a
 * faster stream, its later generation may complete first and release the
 * earlier waiter too: a wait ends at its target record or a later one.)
 *
 * Lifetime: a reference count under `lock`. The creator holds one; every
 * queued record or wait item holds one until its done callback. So an event
 * may be destroyed while its markers are still queued.
 */
#include <string.h>

#include "sim_internal.h"

struct sim_event {
  pthread_mutex_t lock;
  pthread_cond_t cv; /* broadcast when `completed` advances */
  int refs;
  uint64_t recorded;
  uint64_t completed;
  uint64_t failed; /* newest generation that ran on a stream in error */
};

int sim_event_create(sim_event** out) {
  if (out == NULL) return SIM_EINVAL;
  sim_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return SIM_ENOMEM;
  SIM_CHECK_PT(pthread_mutex_init(&e->lock, NULL));
  sim_cond_init(&e->cv);
  e->refs = 1;
  *out = e;
  return SIM_OK;
}

void sim_event_ref(sim_event* e) {
  sim_lock(&e->lock);
  SIM_CHECK(e->refs > 0);
  e->refs++;
  sim_unlock(&e->lock);
}

void sim_event_unref(sim_event* e) {
  sim_lock(&e->lock);
  SIM_CHECK(e->refs > 0);
  int left = --e->refs;
  sim_unlock(&e->lock);
  if (left > 0) return;
  SIM_CHECK_PT(pthread_cond_destroy(&e->cv));
  SIM_CHECK_PT(pthread_mutex_destroy(&e->lock));
  free(e);
}

void sim_event_destroy(sim_event* e) {
  if (e != NULL) sim_event_unref(e);
}

/* ---- record ------------------------------------------------------------ */

typedef struct event_item {
  sim_work w;
  sim_stream* stream;
  sim_event* event;
  uint64_t gen;
} event_item;

static void event_item_done(sim_work* w, int status) {
  event_item* it = (event_item*)w;
  sim_event_unref(it->event);
  free(it);
}

static event_item* event_item_new(sim_stream* s, sim_event* e,
                                  sim_work_run_fn run, const char* label) {
  event_item* it =
      sim_work_alloc(sizeof(*it), run, SIM_WORK_ALWAYS_RUN, label);
  if (it == NULL) return NULL;
  it->w.done = event_item_done;
  it->stream = s;
  it->event = e;
  sim_event_ref(e);
  return it;
}

static int run_record(sim_work* w, char* msg, size_t len) {
  event_item* it = (event_item*)w;
  sim_event* e = it->event;
  int stream_ok = sim_stream_status(it->stream, NULL, 0) == SIM_OK;
  sim_lock(&e->lock);
  if (it->gen > e->completed) e->completed = it->gen;
  if (!stream_ok && it->gen > e->failed) e->failed = it->gen;
  sim_broadcast(&e->cv);
  sim_unlock(&e->lock);
  return SIM_OK;
}

int sim_event_record(sim_event* e, sim_stream* s) {
  if (e == NULL || s == NULL) return SIM_EINVAL;
  event_item* it = event_item_new(s, e, run_record, "record event");
  if (it == NULL) return SIM_ENOMEM;
  /* Generation and submission must be atomic with respect to other records
   * of this event, or generations could reach a stream out of order. */
  sim_lock(&e->lock);
  it->gen = ++e->recorded;
  sim_unlock(&e->lock);
  return sim_stream_submit(s, &it->w);
}

/* ---- wait -------------------------------------------------------------- */

static int run_wait(sim_work* w, char* msg, size_t len) {
  event_item* it = (event_item*)w;
  sim_event* e = it->event;
  sim_lock(&e->lock);
  while (e->completed < it->gen) sim_wait(&e->cv, &e->lock);
  sim_unlock(&e->lock);
  return SIM_OK;
}

int sim_stream_wait_event(sim_stream* s, sim_event* e) {
  if (e == NULL || s == NULL) return SIM_EINVAL;
  sim_lock(&e->lock);
  uint64_t target = e->recorded;
  sim_unlock(&e->lock);
  if (target == 0) return SIM_OK; /* never recorded: nothing to wait for */
  event_item* it = event_item_new(s, e, run_wait, "wait event");
  if (it == NULL) return SIM_ENOMEM;
  it->gen = target;
  return sim_stream_submit(s, &it->w);
}

sim_event_state sim_event_query(sim_event* e) {
  sim_lock(&e->lock);
  sim_event_state st = SIM_EVENT_COMPLETE;
  if (e->completed < e->recorded)
    st = SIM_EVENT_PENDING;
  else if (e->recorded > 0 && e->failed == e->recorded)
    st = SIM_EVENT_ERROR;
  sim_unlock(&e->lock);
  return st;
}

int sim_event_synchronize(sim_event* e) {
  if (e == NULL) return SIM_EINVAL;
  sim_lock(&e->lock);
  uint64_t target = e->recorded;
  while (e->completed < target) sim_wait(&e->cv, &e->lock);
  int err = (target > 0 && e->failed >= target) ? SIM_ESTREAM : SIM_OK;
  sim_unlock(&e->lock);
  return err;
}
