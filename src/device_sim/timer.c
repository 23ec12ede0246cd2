/*
 * timer.c - stream timers: two timestamps taken by the stream's worker when
 * the start and stop items run, so the interval covers exactly the work
 * enqueued between them (as a GPU timer measures device time, not host time).
 *
 * `lock` guards everything; `queued` counts start/stop items not yet run, and
 * destroy waits for it to drop to zero, so items never outlive the timer.
 */
#include "sim_internal.h"

enum { STAMP_NONE = 0, STAMP_QUEUED = 1, STAMP_TAKEN = 2 };

struct sim_timer {
  pthread_mutex_t lock;
  pthread_cond_t cv; /* broadcast when a stamp is taken */
  int queued;
  int start_state, stop_state;
  uint64_t start_ns, stop_ns;
};

typedef struct timer_item {
  sim_work w;
  sim_timer* timer;
  int is_stop;
} timer_item;

int sim_timer_create(sim_timer** out) {
  if (out == NULL) return SIM_EINVAL;
  sim_timer* t = calloc(1, sizeof(*t));
  if (t == NULL) return SIM_ENOMEM;
  sim_mutex_init(&t->lock);
  sim_cond_init(&t->cv);
  *out = t;
  return SIM_OK;
}

void sim_timer_destroy(sim_timer* t) {
  if (t == NULL) return;
  sim_mutex_lock(&t->lock);
  while (t->queued > 0) sim_cond_wait(&t->cv, &t->lock);
  sim_mutex_unlock(&t->lock);
  sim_cond_destroy(&t->cv);
  sim_mutex_destroy(&t->lock);
  free(t);
}

static int run_stamp(sim_work* w, char* msg, size_t len) {
  timer_item* it = (timer_item*)w;
  sim_timer* t = it->timer;
  uint64_t now = sim_now_ns();
  sim_mutex_lock(&t->lock);
  if (it->is_stop) {
    t->stop_ns = now;
    t->stop_state = STAMP_TAKEN;
  } else {
    t->start_ns = now;
    t->start_state = STAMP_TAKEN;
  }
  t->queued--;
  sim_cond_broadcast(&t->cv);
  sim_mutex_unlock(&t->lock);
  return SIM_OK;
}

static int enqueue_stamp(sim_timer* t, sim_stream* s, int is_stop) {
  if (t == NULL || s == NULL) return SIM_EINVAL;
  timer_item* it = sim_work_alloc(sizeof(*it), run_stamp, SIM_WORK_ALWAYS_RUN,
                                  is_stop ? "stop timer" : "start timer");
  if (it == NULL) return SIM_ENOMEM;
  it->w.trace.kind = SIM_TRACE_TIMER;
  it->timer = t;
  it->is_stop = is_stop;
  sim_mutex_lock(&t->lock);
  t->queued++;
  if (is_stop)
    t->stop_state = STAMP_QUEUED;
  else
    t->start_state = STAMP_QUEUED;
  sim_mutex_unlock(&t->lock);
  return sim_stream_submit(s, &it->w);
}

int sim_timer_start(sim_timer* t, sim_stream* s) {
  return enqueue_stamp(t, s, 0);
}
int sim_timer_stop(sim_timer* t, sim_stream* s) {
  return enqueue_stamp(t, s, 1);
}

int sim_timer_elapsed_ns(sim_timer* t, uint64_t* ns) {
  if (t == NULL || ns == NULL) return SIM_EINVAL;
  sim_mutex_lock(&t->lock);
  int err = SIM_OK;
  if (t->start_state == STAMP_NONE || t->stop_state == STAMP_NONE) {
    err = SIM_ENOTREADY;
  } else {
    while (t->start_state != STAMP_TAKEN || t->stop_state != STAMP_TAKEN)
      sim_cond_wait(&t->cv, &t->lock);
    /* Start and stop on different streams can run in either order. */
    *ns = t->stop_ns >= t->start_ns ? t->stop_ns - t->start_ns : 0;
  }
  sim_mutex_unlock(&t->lock);
  return err;
}
