/*
 * test_pool.c - sim_parallel_for: every index of [0, n) runs exactly once,
 * ranges are at least `grain` long (except the last), several callers at
 * once all complete, a caller that finds the pool busy runs inline, and
 * nested calls do not deadlock.
 *
 * Range functions run on pool helpers: they only record, under a mutex
 * (ranges) or into disjoint slots (per-index hit counts, which also lets
 * helgrind flag overlapping ranges as races); the main thread asserts after
 * sim_parallel_for returned (the pool's lock orders the helpers' writes
 * before the return).
 */
#include "testutil.h"

/* ---- coverage recorder ------------------------------------------------ */

typedef struct range_rec {
  int64_t b, e;
  pthread_t th;
} range_rec;

typedef struct cover {
  int64_t n;
  uint8_t* hits; /* per index, saturating */
  pthread_mutex_t mu;
  range_rec* ranges;
  int nranges, cap;
  int overflow;  /* more ranges than cap */
  int bad_range; /* outside [0, n) or empty */
} cover;

static void cover_init(cover* c, int64_t n, int cap) {
  memset(c, 0, sizeof(*c));
  c->n = n;
  c->hits = (uint8_t*)calloc(n > 0 ? (size_t)n : 1, 1);
  c->ranges = (range_rec*)calloc((size_t)cap, sizeof(range_rec));
  if (c->hits == NULL || c->ranges == NULL) abort();
  c->cap = cap;
  TU_PT(pthread_mutex_init(&c->mu, NULL));
}

static void cover_fini(cover* c) {
  TU_PT(pthread_mutex_destroy(&c->mu));
  free(c->hits);
  free(c->ranges);
}

static void cover_fn(void* arg, int64_t b, int64_t e) {
  cover* c = (cover*)arg;
  int ok = b >= 0 && e <= c->n && b < e;
  TU_PT(pthread_mutex_lock(&c->mu));
  if (!ok)
    c->bad_range++;
  else if (c->nranges == c->cap)
    c->overflow = 1;
  else
    c->ranges[c->nranges++] = (range_rec){b, e, pthread_self()};
  TU_PT(pthread_mutex_unlock(&c->mu));
  if (!ok) return;
  for (int64_t i = b; i < e; i++)
    if (c->hits[i] < 255) c->hits[i]++;
}

static int range_cmp(const void* a, const void* b) {
  const range_rec *x = (const range_rec*)a, *y = (const range_rec*)b;
  return x->b < y->b ? -1 : x->b > y->b;
}

/* 0 if c saw exactly one hit per index, ranges tiling [0, n), all but the
 * last at least grain long; else writes what is wrong into why. Runs on
 * the main thread only (no asserts inside, so callers can add context). */
static int cover_verify(cover* c, int64_t grain, char* why, size_t len) {
  if (grain < 1) grain = 1;
  if (c->bad_range || c->overflow) {
    snprintf(why, len, "%d bad ranges, overflow %d", c->bad_range, c->overflow);
    return -1;
  }
  if (c->n <= 0) {
    if (c->nranges == 0) return 0;
    snprintf(why, len, "n=%lld but fn ran %d times", (long long)c->n,
             c->nranges);
    return -1;
  }
  for (int64_t i = 0; i < c->n; i++) {
    if (c->hits[i] != 1) {
      snprintf(why, len, "index %lld ran %d times", (long long)i, c->hits[i]);
      return -1;
    }
  }
  qsort(c->ranges, (size_t)c->nranges, sizeof(range_rec), range_cmp);
  int64_t at = 0;
  for (int k = 0; k < c->nranges; k++) {
    range_rec* r = &c->ranges[k];
    if (r->b != at) {
      snprintf(why, len, "range %d starts at %lld, expected %lld", k,
               (long long)r->b, (long long)at);
      return -1;
    }
    if (r->e != c->n && r->e - r->b < grain) {
      snprintf(why, len, "range [%lld, %lld) shorter than grain %lld",
               (long long)r->b, (long long)r->e, (long long)grain);
      return -1;
    }
    at = r->e;
  }
  if (c->n <= grain && c->nranges != 1) {
    snprintf(why, len, "n <= grain split into %d ranges", c->nranges);
    return -1;
  }
  return 0;
}

/* Runs sim_parallel_for(n, grain) and asserts exact coverage. */
static void check_cover(int64_t n, int64_t grain) {
  cover c;
  char why[160];
  cover_init(&c, n, 4096);
  sim_parallel_for(n, grain, cover_fn, &c);
  int rc = cover_verify(&c, grain, why, sizeof(why));
  cover_fini(&c);
  if (rc != 0)
    fail_msg("n=%lld grain=%lld: %s", (long long)n, (long long)grain, why);
}

/* ---- tests --------------------------------------------------------------- */

static void width(void** state) {
  (void)state;
  int w = sim_parallel_width();
  assert_true(w >= 1);
  assert_true(w <= 64);
  assert_int_equal(sim_parallel_width(), w); /* stable */
}

/* n = 0, 1, grain - 1, grain, grain + 1, multiples and large, for small
 * and large grains; also grain <= 0 (treated as 1) and n < 0 (nothing). */
static void covers_exactly_once(void** state) {
  (void)state;
  const int64_t grains[] = {1, 2, 7, 1000, 32768};
  const int64_t large = tu_scaled(1 << 22);
  for (size_t g = 0; g < TU_ARRAY_SIZE(grains); g++) {
    int64_t gr = grains[g];
    const int64_t ns[] = {0,      1,          gr - 1,      gr,   gr + 1,
                          2 * gr, 2 * gr + 1, 17 * gr + 3, large};
    for (size_t i = 0; i < TU_ARRAY_SIZE(ns); i++) check_cover(ns[i], gr);
  }
  /* With helpers, a large range is really split (else the checks above
   * never saw the parallel path). */
  if (sim_parallel_width() > 1) {
    cover c;
    cover_init(&c, 1 << 16, 4096);
    sim_parallel_for(c.n, 1, cover_fn, &c);
    int nranges = c.nranges;
    cover_fini(&c);
    assert_true(nranges > 1);
  }
  check_cover(1000, 0);
  check_cover(1000, -5);
  check_cover(-3, 1);
  check_cover(tu_scaled(100003), 3);
}

/* Many regions back to back: helpers that wake late for one region must
 * not run chunks of the next one twice or skip them. */
static void back_to_back(void** state) {
  (void)state;
  const int rounds = tu_scaled(3000);
  for (int r = 0; r < rounds; r++) check_cover(64 + r % 200, 1 + r % 5);
}

/* ---- concurrent callers ---- */

enum { kCallers = 4 };

typedef struct caller {
  int rounds;
  int64_t n;
  int failures;
  char why[160];
} caller;

static int caller_main(void* arg) {
  caller* k = (caller*)arg;
  for (int r = 0; r < k->rounds; r++) {
    cover c;
    int64_t n = k->n + r;
    cover_init(&c, n, 4096);
    sim_parallel_for(n, 64, cover_fn, &c);
    if (cover_verify(&c, 64, k->why, sizeof(k->why)) != 0) k->failures++;
    cover_fini(&c);
  }
  return 0;
}

/* Several threads call at once: only one region runs at a time, the others
 * run inline; every call completes with exact coverage. */
static void concurrent_callers(void** state) {
  (void)state;
  caller k[kCallers];
  tu_call calls[kCallers];
  for (int i = 0; i < kCallers; i++) {
    memset(&k[i], 0, sizeof(k[i]));
    k[i].rounds = tu_scaled(200);
    k[i].n = 20000 + 1000 * i;
    tu_call_start(&calls[i], caller_main, &k[i]);
  }
  int finished = 0;
  for (int i = 0; i < kCallers; i++)
    finished += tu_call_wait(&calls[i], TU_TIMEOUT_MS);
  if (finished != kCallers) /* joining would hang: report and stop */
    fail_msg("only %d of %d concurrent callers finished", finished, kCallers);
  for (int i = 0; i < kCallers; i++) tu_call_join(&calls[i]);
  for (int i = 0; i < kCallers; i++)
    if (k[i].failures)
      fail_msg("caller %d: %d bad calls, e.g. %s", i, k[i].failures, k[i].why);
}

/* ---- a busy pool makes other callers run inline ---- */

typedef struct blocker {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int entered;
  int open;
  int64_t calls;
} blocker;

static void blocker_fn(void* arg, int64_t b, int64_t e) {
  blocker* k = (blocker*)arg;
  TU_PT(pthread_mutex_lock(&k->mu));
  k->entered = 1;
  k->calls += e - b;
  TU_PT(pthread_cond_broadcast(&k->cv));
  while (!k->open) TU_PT(pthread_cond_wait(&k->cv, &k->mu));
  TU_PT(pthread_mutex_unlock(&k->mu));
}

static int blocker_main(void* arg) {
  sim_parallel_for(1000, 1, blocker_fn, arg);
  return 0;
}

typedef struct inline_call {
  cover c;
  pthread_t th;
} inline_call;

static int inline_main(void* arg) {
  inline_call* ic = (inline_call*)arg;
  ic->th = pthread_self();
  sim_parallel_for(ic->c.n, 1, cover_fn, &ic->c);
  return 0;
}

/* While one region is stuck in its range function, a second caller gets
 * its whole range in one inline call on its own thread, and returns (a
 * caller that waited for the pool instead would only finish after the
 * gate opens). */
static void busy_pool_runs_inline(void** state) {
  (void)state;
  blocker k;
  memset(&k, 0, sizeof(k));
  TU_PT(pthread_mutex_init(&k.mu, NULL));
  tu_cond_init(&k.cv);
  tu_call a, b;
  tu_call_start(&a, blocker_main, &k);
  TU_PT(pthread_mutex_lock(&k.mu));
  int entered = tu_wait_flag(&k.mu, &k.entered, TU_TIMEOUT_MS);
  TU_PT(pthread_mutex_unlock(&k.mu));

  inline_call ic;
  char why[160] = "";
  cover_init(&ic.c, 5000, 64);
  tu_call_start(&b, inline_main, &ic);
  int b_done_early = tu_call_wait(&b, TU_TIMEOUT_MS);
  int a_done_early = tu_call_finished(&a);

  TU_PT(pthread_mutex_lock(&k.mu));
  k.open = 1;
  TU_PT(pthread_cond_broadcast(&k.cv));
  TU_PT(pthread_mutex_unlock(&k.mu));
  int done = tu_call_wait(&a, TU_TIMEOUT_MS) + tu_call_wait(&b, TU_TIMEOUT_MS);
  if (done == 2) {
    tu_call_join(&a);
    tu_call_join(&b);
  }
  int rc = cover_verify(&ic.c, 1, why, sizeof(why));

  assert_int_equal(done, 2);
  assert_true(entered);
  assert_true(b_done_early);
  assert_int_equal(a_done_early, 0);
  if (rc != 0) fail_msg("inline caller: %s", why);
  assert_int_equal(ic.c.nranges, 1); /* inline: one call for everything */
  assert_true(pthread_equal(ic.c.ranges[0].th, ic.th));
  assert_int_equal(k.calls, 1000);
  cover_fini(&ic.c);
  TU_PT(pthread_mutex_destroy(&k.mu));
  TU_PT(pthread_cond_destroy(&k.cv));
}

/* ---- nested calls ---- */

enum { kOuter = 16, kInner = 8 };

/* Three levels: outer index i runs a region over kInner indices j, each of
 * which runs a region over covers[i][j]. Every cover is used by exactly one
 * call, so exact coverage is checkable at the bottom. */
typedef struct nest {
  cover covers[kOuter][kInner];
} nest;

typedef struct nest_mid {
  nest* k;
  int64_t i;
} nest_mid;

static void nest_inner_fn(void* arg, int64_t b, int64_t e) {
  nest_mid* m = (nest_mid*)arg;
  for (int64_t j = b; j < e; j++) {
    cover* c = &m->k->covers[m->i][j];
    sim_parallel_for(c->n, 1, cover_fn, c);
  }
}

static void nest_outer_fn(void* arg, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) {
    nest_mid m = {(nest*)arg, i};
    sim_parallel_for(kInner, 1, nest_inner_fn, &m);
  }
}

static int nest_main(void* arg) {
  sim_parallel_for(kOuter, 1, nest_outer_fn, arg);
  return 0;
}

/* A range function that calls sim_parallel_for (on the caller or on a
 * helper) gets it run inline: no deadlock, exact coverage at the bottom. */
static void nested_calls(void** state) {
  (void)state;
  nest* k = (nest*)calloc(1, sizeof(nest));
  if (k == NULL) abort();
  for (int i = 0; i < kOuter; i++)
    for (int j = 0; j < kInner; j++)
      cover_init(&k->covers[i][j], 100 + 37 * i + 5 * j, 1024);
  tu_call call;
  tu_call_start(&call, nest_main, k);
  if (!tu_call_wait(&call, TU_TIMEOUT_MS))
    fail_msg("nested sim_parallel_for did not finish: deadlock");
  tu_call_join(&call);
  for (int i = 0; i < kOuter; i++) {
    for (int j = 0; j < kInner; j++) {
      char why[160];
      if (cover_verify(&k->covers[i][j], 1, why, sizeof(why)) != 0)
        fail_msg("cover [%d][%d]: %s", i, j, why);
      cover_fini(&k->covers[i][j]);
    }
  }
  free(k);
}

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(width),
      cmocka_unit_test(covers_exactly_once),
      cmocka_unit_test(back_to_back),
      cmocka_unit_test(concurrent_callers),
      cmocka_unit_test(busy_pool_runs_inline),
      cmocka_unit_test(nested_calls),
  };
  return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
