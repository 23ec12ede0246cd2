/*
 * trace_names.c - the recorder's table of interned strings (sim_trace_intern,
 * sim_trace_name): a record carries a kernel's node name and op type as
 * 32-bit ids, so recording copies no string.
 *
 * An open-addressing hash table (FNV-1a, linear probing) maps a string to its
 * id; `strs` maps an id back (strs[id - 1]). Each string is its own malloc'd
 * copy and never moves, so the pointer sim_trace_name returns stays valid
 * after later interning grows the arrays, until sim_trace_reset frees it.
 *
 * It also keeps the names of recording threads (sim_trace_names_thread,
 * sim_trace_thread_name): tid -> interned name, registered on a thread's
 * first record after a reset (trace.c, sim_trace_tid), at most THREADS_MAX.
 *
 * Locking: `t.lock` guards everything except `gen` (atomic); every function
 * takes it alone, with no other device_sim lock held. Interning is for
 * construction time (a kernel's name, once) and a thread's first record,
 * sim_trace_name for exporters; never per item.
 */
#include <stdatomic.h>
#include <string.h>

#include "sim_internal.h"

#define NAMES_MAX (1u << 20) /* most distinct strings */
#define THREADS_MAX 4096u    /* most threads remembered by name */

static struct {
  pthread_mutex_t lock;
  char** strs;     /* id - 1 -> string */
  uint32_t n, cap; /* used and allocated entries of strs */
  uint32_t* slots; /* hash slots: id, or 0 = empty */
  uint32_t nslots; /* power of two; at most half full */
  /* Thread names (sim_trace_names_thread): tid -> interned name id, in
   * registration order; a tid seen again (reused by the OS) is renamed. */
  struct {
    int32_t tid;
    uint32_t name;
  } * threads;
  uint32_t nthreads, capthreads;
  _Atomic uint32_t gen; /* advanced by each reset; read without the lock */
} t = {.lock = PTHREAD_MUTEX_INITIALIZER, .gen = 1};

static uint32_t hash(const char* s) {
  uint32_t h = 2166136261u;
  for (; *s != '\0'; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

/* Slot of s: the one holding its id, or the empty one where it would go.
 * Called with t.lock held and t.nslots > 0. */
static uint32_t find_slot(const char* s, uint32_t h) {
  uint32_t mask = t.nslots - 1, i = h & mask;
  while (t.slots[i] != 0 && strcmp(t.strs[t.slots[i] - 1], s) != 0)
    i = (i + 1) & mask;
  return i;
}

/* Doubles the slot table (re-inserting every id). 0 if out of memory.
 * Called with t.lock held. */
static int grow_slots(void) {
  uint32_t nslots = t.nslots ? t.nslots * 2 : 1024;
  uint32_t* slots = calloc(nslots, sizeof(*slots));
  if (slots == NULL) return 0;
  free(t.slots);
  t.slots = slots;
  t.nslots = nslots;
  for (uint32_t id = 1; id <= t.n; id++)
    t.slots[find_slot(t.strs[id - 1], hash(t.strs[id - 1]))] = id;
  return 1;
}

uint32_t sim_trace_intern(const char* s) {
  if (s == NULL) return 0;
  uint32_t id = 0;
  uint32_t h = hash(s);
  sim_mutex_lock(&t.lock);
  if (t.nslots == 0 && !grow_slots()) goto out;
  uint32_t at = find_slot(s, h);
  if (t.slots[at] != 0) {
    id = t.slots[at];
    goto out;
  }
  if (t.n >= NAMES_MAX) goto out; /* full: no name */
  if (t.n == t.cap) {
    uint32_t cap = t.cap ? t.cap * 2 : 256;
    char** strs = realloc(t.strs, cap * sizeof(*strs));
    if (strs == NULL) goto out;
    t.strs = strs;
    t.cap = cap;
  }
  char* copy = strdup(s);
  if (copy == NULL) goto out;
  t.strs[t.n++] = copy;
  id = t.n;
  if (2 * (t.n + 1) > t.nslots && !grow_slots()) {
    /* The table stays usable at its old size: insert into it if it has
     * room, else forget the string again. */
    if (t.n + 1 >= t.nslots) {
      free(t.strs[--t.n]);
      id = 0;
      goto out;
    }
  }
  t.slots[find_slot(copy, h)] = id;
out:
  sim_mutex_unlock(&t.lock);
  return id;
}

const char* sim_trace_name(uint32_t id) {
  const char* s = "";
  sim_mutex_lock(&t.lock);
  if (id >= 1 && id <= t.n) s = t.strs[id - 1];
  sim_mutex_unlock(&t.lock);
  return s;
}

uint32_t sim_trace_names_gen(void) {
  return atomic_load_explicit(&t.gen, memory_order_relaxed);
}

void sim_trace_names_thread(int32_t tid, const char* name) {
  if (name == NULL || name[0] == '\0') return;
  uint32_t id = sim_trace_intern(name);
  if (id == 0) return;
  sim_mutex_lock(&t.lock);
  uint32_t i = 0;
  while (i < t.nthreads && t.threads[i].tid != tid) i++;
  if (i == t.nthreads) {
    if (t.nthreads == THREADS_MAX) goto out;
    if (t.nthreads == t.capthreads) {
      uint32_t cap = t.capthreads ? t.capthreads * 2 : 64;
      void* p = realloc(t.threads, cap * sizeof(*t.threads));
      if (p == NULL) goto out;
      t.threads = p;
      t.capthreads = cap;
    }
    t.nthreads++;
  }
  t.threads[i].tid = tid;
  t.threads[i].name = id;
out:
  sim_mutex_unlock(&t.lock);
}

const char* sim_trace_thread_name(int32_t tid) {
  const char* s = NULL;
  sim_mutex_lock(&t.lock);
  for (uint32_t i = 0; i < t.nthreads && s == NULL; i++)
    if (t.threads[i].tid == tid) s = t.strs[t.threads[i].name - 1];
  sim_mutex_unlock(&t.lock);
  return s;
}

void sim_trace_names_reset(void) {
  sim_mutex_lock(&t.lock);
  free(t.threads);
  t.threads = NULL;
  t.nthreads = t.capthreads = 0;
  atomic_fetch_add_explicit(&t.gen, 1, memory_order_relaxed);
  for (uint32_t i = 0; i < t.n; i++) free(t.strs[i]);
  free(t.strs);
  free(t.slots);
  t.strs = NULL;
  t.slots = NULL;
  t.n = t.cap = t.nslots = 0;
  sim_mutex_unlock(&t.lock);
}
