/*
 * util.c - TF-style calls into the plugin and host-callback probes.
 *
 * Every helper calls the plugin the way TF's C++ wrappers do (see the comments
 * naming the TF class), so a check built from them tests what TF would see.
 * Probes are host callbacks that run on the plugin's threads; they record
 * under one mutex, and only the main thread CHECKs.
 *
 * No timed condition-variable waits: a helper that must give up after a
 * while (a gate opened "later", a wait with a deadline) polls its flag
 * under the mutex and sleeps between looks. pthread_cond_timedwait's
 * timeout path in glibc 2.36 passes on a signal it may have consumed by
 * calling pthread_cond_signal without the mutex, which helgrind reports
 * ("associated lock is not held by calling thread") whenever a timeout
 * races a broadcast: conformance.helgrind failed on 1 run in 4 that way.
 * Polling costs a few lock round trips and nothing else.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime, nanosleep under -std=c11 */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conformance.h"

CONF_RULES_SHARED(conf_common_rules, CONF_COMMON_RULES)

/* ------------------------------------------------------------ status */

TF_Status* conf_st(conf_env* e) {
  conf_status_set(e->st, TF_OK, "");
  return e->st;
}

const char* conf_code_name(TF_Code code) {
  static const char* const names[] = {
      "OK",        "CANCELLED",          "UNKNOWN",          "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",   "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",      "DATA_LOSS",
      "UNAUTHENTICATED"};
  if ((unsigned)code < sizeof(names) / sizeof(names[0])) return names[code];
  return "(not a TF_Code)";
}

int conf_check_ok(const conf_rule* rule, const TF_Status* s, const char* file,
                  int line, const char* what) {
  TF_Code code = conf_status_code(s);
  return conf_check(rule, code == TF_OK, file, line, "%s returned %s: %s",
                    what, conf_code_name(code), conf_status_msg(s));
}

/* ------------------------------------------------------------ memory */

SP_DeviceMemoryBase conf_alloc(conf_env* e, int d, uint64_t size) {
  SP_DeviceMemoryBase mem = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  e->se.allocate(&e->dev[d], size, /*memory_space=*/0, &mem);
  return mem;
}

void conf_free(conf_env* e, int d, SP_DeviceMemoryBase* m) {
  /* DeviceMemoryBaseToC: a fresh struct with opaque, size and payload. */
  SP_DeviceMemoryBase c = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  c.opaque = m->opaque;
  c.size = m->size;
  c.payload = m->payload;
  e->se.deallocate(&e->dev[d], &c);
  memset(m, 0, sizeof(*m));
}

SP_DeviceMemoryBase conf_slice(const SP_DeviceMemoryBase* m, uint64_t offset,
                               uint64_t size) {
  SP_DeviceMemoryBase s = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  s.opaque = (char*)m->opaque + offset;
  s.size = size;
  s.payload = m->payload;
  return s;
}

/* ------------------------------------------------------------ streams */

SP_Stream conf_stream_new(conf_env* e, int d) {
  SP_Stream s = NULL;
  TF_Status* st = conf_st(e);
  e->se.create_stream(&e->dev[d], &s, st);
  if (!EXPECT_OK(R_STREAM_CREATE, st, "create_stream")) return NULL;
  EXPECT(R_STREAM_CREATE, s != NULL,
         "create_stream returned OK and left the stream NULL");
  return s;
}

void conf_stream_free(conf_env* e, int d, SP_Stream s) {
  if (s == NULL) return;
  conf_sync(e, d, s); /* ~CStream ignores the result */
  e->se.destroy_stream(&e->dev[d], s);
}

TF_Code conf_sync_by_event(conf_env* e, int d, SP_Stream s) {
  SP_Event ev = NULL;
  TF_Status* st = conf_st(e);
  e->se.create_event(&e->dev[d], &ev, st);
  if (conf_status_code(st) != TF_OK) return conf_status_code(st);
  e->se.record_event(&e->dev[d], s, ev, conf_st(e));
  if (conf_status_code(e->st) != TF_OK) {
    TF_Code c = conf_status_code(e->st);
    e->se.destroy_event(&e->dev[d], ev);
    return c;
  }
  e->se.block_host_for_event(&e->dev[d], ev, conf_st(e));
  TF_Code c = conf_status_code(e->st);
  e->se.destroy_event(&e->dev[d], ev);
  return c;
}

TF_Code conf_sync(conf_env* e, int d, SP_Stream s) {
  if (e->se.block_host_until_done != NULL) {
    TF_Status* st = conf_st(e);
    e->se.block_host_until_done(&e->dev[d], s, st);
    return conf_status_code(st);
  }
  return conf_sync_by_event(e, d, s);
}

/* ------------------------------------------------------------ probes */

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t probe_cv = PTHREAD_COND_INITIALIZER;
static int probe_seq;
static int gate_open[CONF_GATES];

void conf_probes_reset(void) {
  pthread_mutex_lock(&probe_mu);
  probe_seq = 0;
  memset(gate_open, 0, sizeof(gate_open));
  pthread_mutex_unlock(&probe_mu);
}

void conf_gate_open(int gate) {
  pthread_mutex_lock(&probe_mu);
  gate_open[gate] = 1;
  pthread_cond_broadcast(&probe_cv);
  pthread_mutex_unlock(&probe_mu);
}

void conf_gates_open_all(void) {
  for (int i = 0; i < CONF_GATES; i++) conf_gate_open(i);
}

/* Polls *flag (read under probe_mu) until it is non-zero or timeout_ms
 * passed on CLOCK_MONOTONIC; returns its last value. Sleeps 1 ms between
 * looks, never holding the mutex while asleep. */
static int poll_flag(const int* flag, int timeout_ms) {
  const uint64_t deadline = conf_now_ns() + (uint64_t)timeout_ms * 1000000u;
  for (;;) {
    pthread_mutex_lock(&probe_mu);
    int value = *flag;
    pthread_mutex_unlock(&probe_mu);
    if (value || conf_now_ns() >= deadline) return value;
    conf_sleep_ms(1);
  }
}

typedef struct later_arg {
  int gate;
  int ms;
} later_arg;

static void* open_later_main(void* arg) {
  later_arg a = *(later_arg*)arg;
  free(arg);
  if (!poll_flag(&gate_open[a.gate], a.ms)) conf_gate_open(a.gate);
  return NULL;
}

pthread_t conf_gate_open_later(int gate, int ms) {
  pthread_t t;
  later_arg* a = malloc(sizeof(*a));
  if (a == NULL) abort();
  a->gate = gate;
  a->ms = ms;
  if (pthread_create(&t, NULL, open_later_main, a) != 0) abort();
  return t;
}

void conf_join_later(pthread_t t) {
  pthread_join(t, NULL);
}

static void probe_main(void* arg, TF_Status* status) {
  conf_probe* p = arg;
  pthread_mutex_lock(&probe_mu);
  p->entered = 1;
  p->status_nonnull = status != NULL;
  p->code_at_entry = status != NULL ? conf_status_code(status) : TF_UNKNOWN;
  pthread_cond_broadcast(&probe_cv);
  if (p->gate >= 0) {
    while (!gate_open[p->gate]) pthread_cond_wait(&probe_cv, &probe_mu);
  }
  pthread_mutex_unlock(&probe_mu);
  if (p->sleep_ms > 0) conf_sleep_ms(p->sleep_ms);
  /* As TF's HostCallbackTrampoline: always write the result. */
  if (status != NULL) {
    conf_status_set(status, p->code, p->code == TF_OK ? "" : p->msg);
  }
  pthread_mutex_lock(&probe_mu);
  p->ran++;
  p->order = ++probe_seq;
  pthread_cond_broadcast(&probe_cv);
  pthread_mutex_unlock(&probe_mu);
}

int conf_enqueue_probe(conf_env* e, int d, SP_Stream s, conf_probe* p, int gate,
                       int sleep_ms, TF_Code code, const char* msg) {
  pthread_mutex_lock(&probe_mu);
  memset(p, 0, sizeof(*p));
  p->gate = gate;
  p->sleep_ms = sleep_ms;
  p->code = code;
  p->msg = msg;
  p->code_at_entry = TF_UNKNOWN;
  pthread_mutex_unlock(&probe_mu);
  return e->se.host_callback(&e->dev[d], s, probe_main, p) != 0;
}

void conf_probe_mark_ran(conf_probe* p) {
  pthread_mutex_lock(&probe_mu);
  p->entered = 1;
  p->ran++;
  p->order = ++probe_seq;
  pthread_cond_broadcast(&probe_cv);
  pthread_mutex_unlock(&probe_mu);
}

conf_probe conf_probe_get(const conf_probe* p) {
  pthread_mutex_lock(&probe_mu);
  conf_probe copy = *p;
  pthread_mutex_unlock(&probe_mu);
  return copy;
}

int conf_probe_wait_entered(const conf_probe* p, int timeout_ms) {
  return poll_flag(&p->entered, timeout_ms);
}

int conf_probe_wait_ran(const conf_probe* p, int timeout_ms) {
  return poll_flag(&p->ran, timeout_ms);
}

/* ------------------------------------------------------------ misc */

static int timeout_s = 60;

void conf_set_timeout_s(int seconds) {
  timeout_s = seconds > 0 ? seconds : 60;
}

int conf_safety_ms(void) {
  return timeout_s * 500; /* 30 s for the default 60 s timeout */
}

void conf_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

uint64_t conf_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void conf_fill(void* buf, size_t n, unsigned seed) {
  unsigned char* b = buf;
  uint32_t x = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    b[i] = (unsigned char)(x >> 24);
  }
}

long conf_find_not(const void* buf, size_t n, unsigned char value) {
  const unsigned char* b = buf;
  for (size_t i = 0; i < n; i++) {
    if (b[i] != value) return (long)i;
  }
  return -1;
}
