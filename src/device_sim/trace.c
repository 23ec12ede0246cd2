/*
 * trace.c - the recorder behind sim_trace_* (sim.h, "tracing"): per-stream
 * rings of sim_trace_rec, per-device rings of sim_trace_mem, the consumer
 * count and snapshots (interned names: trace_names.c).
 *
 * The off path. stream.c and arena.c test sim_trace_on() (a relaxed load of
 * `sim_trace_flag`) once per item or allocation; only when it is set do they
 * call in here. An item traced at submit carries SIM_WORK_TRACED_ in its
 * flags, and stream.c folds that bit into the test it already makes for a
 * failed stream, so running an item costs no extra branch when tracing is
 * off (see stream.c, run_item).
 *
 * Rings. Every stream and device gets a ring header when it is created
 * (sim_trace_stream_born / sim_trace_device_born), so the recording thread
 * finds its ring without a lookup; the buffer behind it is allocated on the
 * first record and grows by doubling up to the capacity (SIMDEV_TRACE_EVENTS),
 * so a stream that never records while tracing is on costs one small header.
 * A full ring overwrites its oldest record and counts it in `dropped`; a
 * failed growth does the same (recording never waits for room or fails).
 * A ring outlives its stream or device; a new stream or device with the same
 * key (a device created again with the same ordinal restarts its stream ids)
 * takes the old ring over, so a key names one track in every snapshot. At
 * most SIM_TRACE_DEAD_RINGS rings of destroyed streams are kept: beyond that
 * the oldest is freed and the records it held are added to its device's
 * `dropped` (sim_trace_device), so totals stay true.
 *
 * Locks. g.lock (static) guards the ring list, every header's identity,
 * alive, death and evicted fields, and g's counters (consumers, capacity,
 * ndead, deaths, hg_done). Each ring's own `lock` guards its buffer and
 * counters; it is taken by the one thread recording into it (a stream runs
 * one item at a time; a device's memory records are made under its arena
 * lock), by snapshots, and by clearing and eviction (under g.lock). Order:
 * arena lock -> g.lock -> ring lock; nothing is called with a ring lock held
 * but malloc. The names table (trace_names.c, t.lock) is taken with no
 * other lock held: sim_trace_tid, which may register a thread's name, is
 * called before any.
 *
 * Helgrind: the flag and the correlation counter are C11 atomics read and
 * written without a lock by design (a consumer may start while streams run);
 * helgrind does not model atomics, so both are declared benign to it once.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"

/* Rings of destroyed streams kept for later snapshots (see above). */
#define SIM_TRACE_DEAD_RINGS 64
/* First buffer of a ring, in records; it doubles up to the capacity. */
#define SIM_TRACE_FIRST_RECORDS 256u

_Atomic int sim_trace_flag;

struct sim_trace_ring {
  /* Guarded by g.lock. */
  sim_trace_ring* next; /* g.rings */
  int is_mem;           /* device memory ring, else a stream's */
  int device, stream;   /* stream = -1 for a memory ring */
  int alive;            /* live objects using it (two devices may share an
                           ordinal) */
  uint64_t death;       /* order of destruction, for eviction */
  uint64_t evicted;     /* mem rings: records of freed stream rings */
  /* Guarded by lock. */
  pthread_mutex_t lock;
  size_t elem;  /* sizeof(sim_trace_rec) or sizeof(sim_trace_mem) */
  uint8_t* buf; /* cap elements; oldest at head */
  uint32_t cap, max, head, count;
  uint64_t dropped;
};

static struct {
  pthread_mutex_t lock;
  sim_trace_ring* rings;
  int consumers;
  uint32_t capacity; /* for rings created from now on */
  int ndead;
  uint64_t deaths;
  int hg_done; /* the atomics were declared to helgrind */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .capacity = SIM_TRACE_DEFAULT_RECORDS};

static _Atomic uint64_t g_next_id;

static __thread int32_t tls_tid;
/* The names table's generation when this thread last registered its name
 * (sim_trace_names_thread): a reset empties the table, so a thread that
 * records again registers again. */
static __thread uint32_t tls_named_gen;

/* The calling thread's Linux id. On a thread's first record after a reset,
 * its name (pthread_getname_np) goes into the names table, so a profile
 * written after the thread ended (TF's executor threads are gone by exit)
 * still shows "tf_Compute" rather than a number. */
int32_t sim_trace_tid(void) {
  if (tls_tid == 0) tls_tid = (int32_t)syscall(SYS_gettid);
  uint32_t gen = sim_trace_names_gen();
  if (tls_named_gen != gen) {
    char name[16];
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0)
      name[0] = '\0';
    sim_trace_names_thread(tls_tid, name);
    tls_named_gen = gen;
  }
  return tls_tid;
}

const char* sim_trace_kind_name(int kind) {
  static const char* const names[SIM_TRACE_KIND_COUNT] = {
      "other",      "kernel",      "memcpy_h2d",    "memcpy_d2h",
      "memcpy_d2d", "memcpy_h2h",  "memset",        "event_record",
      "event_wait", "stream_wait", "host_callback", "timer"};
  if (kind < 0 || kind >= SIM_TRACE_KIND_COUNT) return "unknown";
  return names[kind];
}

/* ---- ring headers -------------------------------------------------------- */

/* Called with g.lock held. */
static sim_trace_ring* ring_find(int is_mem, int device, int stream) {
  for (sim_trace_ring* r = g.rings; r != NULL; r = r->next)
    if (r->is_mem == is_mem && r->device == device && r->stream == stream)
      return r;
  return NULL;
}

/* Called with g.lock held. NULL if out of memory. */
static sim_trace_ring* ring_new(int is_mem, int device, int stream) {
  sim_trace_ring* r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  sim_mutex_init(&r->lock);
  r->is_mem = is_mem;
  r->device = device;
  r->stream = stream;
  r->elem = is_mem ? sizeof(sim_trace_mem) : sizeof(sim_trace_rec);
  r->max = g.capacity;
  r->next = g.rings;
  g.rings = r;
  return r;
}

static void ring_free(sim_trace_ring* r) {
  sim_mutex_destroy(&r->lock);
  free(r->buf);
  free(r);
}

/* Finds (revives) or creates the ring of (is_mem, device, stream) for an
 * object being created. Called with g.lock held. */
static sim_trace_ring* ring_attach(int is_mem, int device, int stream) {
  sim_trace_ring* r = ring_find(is_mem, device, stream);
  if (r == NULL) r = ring_new(is_mem, device, stream);
  if (r == NULL) return NULL;
  if (!is_mem && r->death != 0) g.ndead--;
  r->alive++;
  r->death = 0;
  return r;
}

/* Frees the longest-dead stream ring, its records counted as dropped on its
 * device's memory ring. Called with g.lock held when g.ndead is too high. */
static void evict_oldest_dead(void) {
  sim_trace_ring **victim = NULL, **pp;
  for (pp = &g.rings; *pp != NULL; pp = &(*pp)->next) {
    sim_trace_ring* r = *pp;
    if (!r->is_mem && !r->alive && r->death != 0 &&
        (victim == NULL || r->death < (*victim)->death))
      victim = pp;
  }
  SIM_CHECK(victim != NULL);
  sim_trace_ring* r = *victim;
  *victim = r->next;
  g.ndead--;
  sim_mutex_lock(&r->lock);
  uint64_t lost = r->count + r->dropped;
  sim_mutex_unlock(&r->lock);
  sim_trace_ring* dev = ring_find(1, r->device, -1);
  if (dev == NULL) dev = ring_new(1, r->device, -1);
  if (dev != NULL) dev->evicted += lost; /* else: out of memory, uncounted */
  ring_free(r);
}

int sim_trace_stream_born(sim_stream* s) {
  sim_mutex_lock(&g.lock);
  s->trace_ring = ring_attach(0, s->dev->ordinal, s->id);
  sim_mutex_unlock(&g.lock);
  return s->trace_ring != NULL ? SIM_OK : SIM_ENOMEM;
}

void sim_trace_stream_gone(sim_stream* s) {
  sim_mutex_lock(&g.lock);
  sim_trace_ring* r = s->trace_ring;
  SIM_CHECK(r->alive > 0);
  if (--r->alive == 0) {
    r->death = ++g.deaths;
    if (++g.ndead > SIM_TRACE_DEAD_RINGS) evict_oldest_dead();
  }
  sim_mutex_unlock(&g.lock);
  s->trace_ring = NULL;
}

int sim_trace_device_born(sim_device* dev) {
  sim_mutex_lock(&g.lock);
  dev->trace_mem = ring_attach(1, dev->ordinal, -1);
  sim_mutex_unlock(&g.lock);
  return dev->trace_mem != NULL ? SIM_OK : SIM_ENOMEM;
}

void sim_trace_device_gone(sim_device* dev) {
  sim_mutex_lock(&g.lock);
  SIM_CHECK(dev->trace_mem->alive > 0);
  dev->trace_mem->alive--;
  sim_mutex_unlock(&g.lock);
  dev->trace_mem = NULL;
}

/* ---- recording ------------------------------------------------------------
 */

/* A slot for one more record, overwriting (and counting) the oldest when the
 * ring is full and cannot grow. NULL only when no buffer could ever be
 * allocated (the record is counted as dropped). Called with r->lock held. */
static void* ring_slot(sim_trace_ring* r) {
  if (r->count == r->cap && r->cap < r->max) {
    uint32_t cap = r->cap ? r->cap * 2 : SIM_TRACE_FIRST_RECORDS;
    if (cap > r->max) cap = r->max;
    uint8_t* buf = malloc((size_t)cap * r->elem);
    if (buf != NULL) { /* copy oldest-first so head is 0 again */
      size_t first = (size_t)(r->cap - r->head) * r->elem;
      if (r->count > 0) {
        memcpy(buf, r->buf + (size_t)r->head * r->elem, first);
        memcpy(buf + first, r->buf, (size_t)r->head * r->elem);
      }
      free(r->buf);
      r->buf = buf;
      r->cap = cap;
      r->head = 0;
    } else {
      r->max = r->cap; /* no retry of a big malloc on every record */
    }
  }
  if (r->cap == 0) {
    r->dropped++;
    return NULL;
  }
  uint32_t at;
  if (r->count == r->cap) { /* overwrite the oldest */
    at = r->head;
    r->head = (r->head + 1) % r->cap;
    r->dropped++;
  } else {
    at = (r->head + r->count) % r->cap;
    r->count++;
  }
  return r->buf + (size_t)at * r->elem;
}

void sim_trace_fill(sim_work* w) {
  w->trace.id =
      atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed) + 1;
  w->trace.enq_ns = sim_now_ns();
  w->trace.enq_tid = sim_trace_tid();
  w->flags |= SIM_WORK_TRACED_;
}

void sim_trace_item(sim_trace_ring* r, const sim_work_trace* t,
                    uint64_t start_ns, uint64_t end_ns, int status,
                    uint32_t flags) {
  sim_mutex_lock(&r->lock);
  sim_trace_rec* rec = ring_slot(r);
  if (rec != NULL)
    *rec = (sim_trace_rec){.id = t->id,
                           .enq_ns = t->enq_ns,
                           .start_ns = start_ns,
                           .end_ns = end_ns,
                           .bytes = t->bytes,
                           .kind = t->kind,
                           .name = t->name,
                           .type = t->type,
                           .peer = t->peer,
                           .enq_tid = t->enq_tid,
                           .status = status,
                           .flags = flags};
  sim_mutex_unlock(&r->lock);
}

void sim_trace_mem_op(sim_device* dev, int op, const void* addr, uint64_t bytes,
                      uint64_t in_use, int32_t tid) {
  sim_trace_ring* r = dev->trace_mem;
  sim_mutex_lock(&r->lock);
  /* Under the ring's lock: two live devices with one ordinal share a ring
   * (each under its own arena lock), and its records stay in time order. */
  uint64_t ns = sim_now_ns();
  sim_trace_mem* m = ring_slot(r);
  if (m != NULL)
    *m = (sim_trace_mem){.ns = ns,
                         .addr = (uint64_t)(uintptr_t)addr,
                         .bytes = bytes,
                         .in_use = in_use,
                         .tid = tid,
                         .op = op};
  sim_mutex_unlock(&r->lock);
}

/* ---- consumers ------------------------------------------------------------
 */

/* Empties every ring (freeing dead stream rings) and gives them capacity
 * `cap`. Called with g.lock held, no consumer active. */
static void clear_rings(uint32_t cap) {
  sim_trace_ring** pp = &g.rings;
  while (*pp != NULL) {
    sim_trace_ring* r = *pp;
    if (!r->alive && !r->is_mem) {
      *pp = r->next;
      ring_free(r);
      continue;
    }
    sim_mutex_lock(&r->lock);
    free(r->buf);
    r->buf = NULL;
    r->cap = r->head = r->count = 0;
    r->dropped = 0;
    r->max = cap;
    sim_mutex_unlock(&r->lock);
    r->evicted = 0;
    pp = &r->next;
  }
  g.ndead = 0;
}

int sim_trace_start(uint32_t ring_records) {
  if (ring_records > SIM_TRACE_MAX_RECORDS) return SIM_EINVAL;
  uint32_t cap = ring_records ? ring_records : SIM_TRACE_DEFAULT_RECORDS;
  sim_mutex_lock(&g.lock);
  if (!g.hg_done) {
    SIM_HG_BENIGN(&sim_trace_flag, sizeof(sim_trace_flag));
    SIM_HG_BENIGN(&g_next_id, sizeof(g_next_id));
    g.hg_done = 1;
  }
  if (g.consumers == 0) clear_rings(cap);
  g.capacity = cap;
  g.consumers++;
  atomic_store_explicit(&sim_trace_flag, 1, memory_order_relaxed);
  sim_mutex_unlock(&g.lock);
  return SIM_OK;
}

void sim_trace_stop(void) {
  sim_mutex_lock(&g.lock);
  if (g.consumers > 0 && --g.consumers == 0)
    atomic_store_explicit(&sim_trace_flag, 0, memory_order_relaxed);
  sim_mutex_unlock(&g.lock);
}

int sim_trace_active(void) {
  sim_mutex_lock(&g.lock);
  int on = g.consumers > 0;
  sim_mutex_unlock(&g.lock);
  return on;
}

/* ---- snapshots ------------------------------------------------------------
 */

static int cmp_stream(const void* a, const void* b) {
  const sim_trace_stream *x = a, *y = b;
  if (x->device != y->device) return x->device < y->device ? -1 : 1;
  return (x->stream > y->stream) - (x->stream < y->stream);
}

static int cmp_device(const void* a, const void* b) {
  const sim_trace_device *x = a, *y = b;
  return (x->device > y->device) - (x->device < y->device);
}

/* Copies r's records inside [lo, hi] into a new array. Called with g.lock
 * held. */
static int copy_window(sim_trace_ring* r, uint64_t lo, uint64_t hi, void** out,
                       size_t* count, uint64_t* dropped) {
  sim_mutex_lock(&r->lock);
  size_t n = 0;
  for (uint32_t i = 0; i < r->count; i++) {
    const uint8_t* p = r->buf + (size_t)((r->head + i) % r->cap) * r->elem;
    uint64_t t = r->is_mem ? ((const sim_trace_mem*)p)->ns
                           : ((const sim_trace_rec*)p)->start_ns;
    n += t >= lo && t <= hi;
  }
  uint8_t* dst = n ? malloc(n * r->elem) : NULL;
  if (n > 0 && dst == NULL) {
    sim_mutex_unlock(&r->lock);
    return SIM_ENOMEM;
  }
  size_t k = 0;
  for (uint32_t i = 0; i < r->count && k < n; i++) {
    const uint8_t* p = r->buf + (size_t)((r->head + i) % r->cap) * r->elem;
    uint64_t t = r->is_mem ? ((const sim_trace_mem*)p)->ns
                           : ((const sim_trace_rec*)p)->start_ns;
    if (t >= lo && t <= hi) memcpy(dst + (k++) * r->elem, p, r->elem);
  }
  *dropped = r->dropped;
  sim_mutex_unlock(&r->lock);
  *out = dst;
  *count = n;
  return SIM_OK;
}

void sim_trace_snapshot_free(sim_trace_snapshot* snap) {
  if (snap == NULL) return;
  for (size_t i = 0; i < snap->nstreams; i++) free(snap->streams[i].recs);
  for (size_t i = 0; i < snap->ndevices; i++) free(snap->devices[i].mem);
  free(snap->streams);
  free(snap->devices);
  free(snap);
}

static int64_t realtime_offset(void) {
  struct timespec rt, mono;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  return ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000000000 +
         ((int64_t)rt.tv_nsec - (int64_t)mono.tv_nsec);
}

int sim_trace_snapshot_take(uint64_t begin_ns, uint64_t end_ns,
                            sim_trace_snapshot** out) {
  if (out == NULL) return SIM_EINVAL;
  *out = NULL;
  sim_trace_snapshot* snap = calloc(1, sizeof(*snap));
  if (snap == NULL) return SIM_ENOMEM;
  snap->begin_ns = begin_ns;
  snap->end_ns = end_ns ? end_ns : sim_now_ns();
  snap->realtime_offset_ns = realtime_offset();
  int err = SIM_OK;
  sim_mutex_lock(&g.lock);
  size_t ns = 0, nd = 0;
  for (sim_trace_ring* r = g.rings; r != NULL; r = r->next)
    r->is_mem ? nd++ : ns++;
  snap->streams = calloc(ns ? ns : 1, sizeof(*snap->streams));
  snap->devices = calloc(nd ? nd : 1, sizeof(*snap->devices));
  if (snap->streams == NULL || snap->devices == NULL) err = SIM_ENOMEM;
  for (sim_trace_ring* r = g.rings; r != NULL && err == SIM_OK; r = r->next) {
    void* recs = NULL;
    size_t count = 0;
    uint64_t dropped = 0;
    err = copy_window(r, begin_ns, snap->end_ns, &recs, &count, &dropped);
    if (err != SIM_OK) break;
    if (r->is_mem) dropped += r->evicted;
    if (count == 0 && dropped == 0) continue; /* nothing to show */
    if (r->is_mem) {
      snap->devices[snap->ndevices++] = (sim_trace_device){
          .device = r->device, .dropped = dropped, .count = count, .mem = recs};
    } else {
      snap->streams[snap->nstreams++] =
          (sim_trace_stream){.device = r->device,
                             .stream = r->stream,
                             .key = sim_trace_stream_key(r->device, r->stream),
                             .alive = r->alive > 0,
                             .dropped = dropped,
                             .count = count,
                             .recs = recs};
    }
  }
  sim_mutex_unlock(&g.lock);
  if (err != SIM_OK) {
    sim_trace_snapshot_free(snap);
    return err;
  }
  qsort(snap->streams, snap->nstreams, sizeof(*snap->streams), cmp_stream);
  qsort(snap->devices, snap->ndevices, sizeof(*snap->devices), cmp_device);
  *out = snap;
  return SIM_OK;
}

/* ---- reset ----------------------------------------------------------------
 */

int sim_trace_reset(void) {
  sim_mutex_lock(&g.lock);
  int busy = g.consumers > 0;
  for (sim_trace_ring* r = g.rings; r != NULL && !busy; r = r->next)
    busy = r->alive;
  if (busy) {
    sim_mutex_unlock(&g.lock);
    return SIM_EINVAL;
  }
  while (g.rings != NULL) {
    sim_trace_ring* r = g.rings;
    g.rings = r->next;
    ring_free(r);
  }
  g.ndead = 0;
  g.deaths = 0;
  g.capacity = SIM_TRACE_DEFAULT_RECORDS;
  sim_mutex_unlock(&g.lock);
  sim_trace_names_reset();
  return SIM_OK;
}
