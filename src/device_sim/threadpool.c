/*
 * threadpool.c - sim_parallel_for: the helper threads kernels use to spread
 * large elementwise and reduction work over every core.
 *
 * One process-wide pool (the device is simulated on the host's cores, so all
 * devices share them): one helper per CPU beyond the first, created on first
 * use and joined by a destructor at exit. A parallel region hands out chunks
 * of the range under `lock`; chunks are few (about four per thread), so the
 * lock is cheap and the pool stays simple enough for helgrind to verify.
 *
 * Only one region runs at a time (`region` is try-locked): a second caller,
 * e.g. another stream's worker, runs its range inline instead of waiting,
 * so a region never waits on anything but its own chunks.
 *
 * Lock contract: `lock` protects every field of struct pool except the
 * thread handles (written once under pthread_once) and `region`.
 */
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"

#define POOL_MAX_HELPERS 63

static struct pool {
  pthread_once_t once;
  pthread_mutex_t region; /* held by the one caller running a region */
  pthread_mutex_t lock;
  pthread_cond_t cv_job;  /* helpers: a new region, or stopping */
  pthread_cond_t cv_idle; /* caller: the last helper left the region */
  int nhelpers;
  pthread_t threads[POOL_MAX_HELPERS];

  uint64_t generation; /* bumped per region; helpers join each one once */
  int open;            /* the current region still accepts helpers */
  int active;          /* helpers inside the current region */
  int stopping;
  sim_range_fn fn;
  void* arg;
  int64_t n, chunk, next;
} pool = {
    .once = PTHREAD_ONCE_INIT,
    .region = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

/* Runs chunks of the current region until none is left. Called with lock
 * held; returns with it held. */
static void run_chunks(void) {
  while (pool.next < pool.n) {
    int64_t b = pool.next;
    int64_t e = b + pool.chunk < pool.n ? b + pool.chunk : pool.n;
    pool.next = e;
    sim_range_fn fn = pool.fn;
    void* arg = pool.arg;
    sim_mutex_unlock(&pool.lock);
    fn(arg, b, e);
    sim_mutex_lock(&pool.lock);
  }
}

static void* helper_main(void* arg) {
  char name[16];
  snprintf(name, sizeof(name), "simdev-pool%d", (int)(intptr_t)arg);
  pthread_setname_np(pthread_self(), name);
  sim_thread_fp_mode();

  uint64_t seen = 0;
  sim_mutex_lock(&pool.lock);
  for (;;) {
    while (!pool.stopping && pool.generation == seen)
      sim_cond_wait(&pool.cv_job, &pool.lock);
    if (pool.stopping) break;
    seen = pool.generation;
    if (!pool.open) continue; /* woke too late: the caller finished alone */
    pool.active++;
    run_chunks();
    if (--pool.active == 0) sim_cond_broadcast(&pool.cv_idle);
  }
  sim_mutex_unlock(&pool.lock);
  return NULL;
}

static void pool_start(void) {
  sim_cond_init(&pool.cv_job);
  sim_cond_init(&pool.cv_idle);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int want = cpus > 1 ? (int)(cpus - 1) : 0;
  if (want > POOL_MAX_HELPERS) want = POOL_MAX_HELPERS;
  for (int i = 0; i < want; i++) {
    /* A helper that cannot be created only narrows the pool. */
    if (pthread_create(&pool.threads[i], NULL, helper_main,
                       (void*)(intptr_t)(i + 1)) != 0)
      break;
    pool.nhelpers++;
  }
}

/* Joins the helpers at exit (or dlclose), so valgrind and TF's teardown see
 * no thread left behind. */
__attribute__((destructor)) static void pool_stop(void) {
  sim_mutex_lock(&pool.lock);
  int n = pool.nhelpers;
  pool.stopping = 1;
  if (n > 0) sim_cond_broadcast(&pool.cv_job); /* initialised iff started */
  sim_mutex_unlock(&pool.lock);
  for (int i = 0; i < n; i++) SIM_CHECK_PT(pthread_join(pool.threads[i], NULL));
}

int sim_parallel_width(void) {
  SIM_CHECK_PT(pthread_once(&pool.once, pool_start));
  sim_mutex_lock(&pool.lock);
  int w = pool.nhelpers + 1;
  sim_mutex_unlock(&pool.lock);
  return w;
}

void sim_parallel_for(int64_t n, int64_t grain, sim_range_fn fn, void* arg) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int width = sim_parallel_width();
  if (width == 1 || n <= grain || !sim_mutex_trylock(&pool.region)) {
    fn(arg, 0, n);
    return;
  }
  int64_t chunk = (n + 4 * width - 1) / (4 * width);
  if (chunk < grain) chunk = grain;

  sim_mutex_lock(&pool.lock);
  pool.fn = fn;
  pool.arg = arg;
  pool.n = n;
  pool.chunk = chunk;
  pool.next = 0;
  pool.open = 1;
  pool.generation++;
  sim_cond_broadcast(&pool.cv_job);
  run_chunks();
  pool.open = 0; /* late helpers skip this region */
  while (pool.active > 0) sim_cond_wait(&pool.cv_idle, &pool.lock);
  pool.fn = NULL;
  pool.arg = NULL;
  sim_mutex_unlock(&pool.lock);
  sim_mutex_unlock(&pool.region);
}
