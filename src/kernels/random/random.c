/*
 * random.c - the stateless random kernels Keras draws with (Dropout masks,
 * initializers): StatelessRandomGetKeyCounter, StatelessRandomGetAlg,
 * StatelessRandomGetKeyCounterAlg; StatelessRandomUniformV2,
 * StatelessRandomNormalV2, StatelessTruncatedNormalV2,
 * StatelessRandomUniformIntV2, StatelessRandomUniformFullIntV2 (key,
 * counter, alg); the seeded V1 forms StatelessRandomUniform,
 * StatelessRandomNormal, StatelessTruncatedNormal, StatelessRandomUniformInt,
 * StatelessRandomUniformFullInt. The numbers are TF CPU's (random_philox.c).
 *
 * Memory as in TF's GPU registrations: shape, seed, alg, minval and maxval
 * in host memory (read here, on TF's thread); the key/counter/alg outputs of
 * the Get* ops in host memory (written here: nothing runs on the stream);
 * the V2 ops' key and counter inputs in device memory, read by the run
 * function on the stream worker, after whatever wrote them.
 *
 * Checks in TF CPU's order and words: key/counter/alg, then the shape, then
 * (for a non-empty output) minval/maxval and the algorithm. One divergence:
 * TF 2.21 compares the counter's length with the algorithm's id instead of
 * its counter size, so Philox (id 1) takes a counter of one element and
 * reads past it; simdev asks for the two words Philox uses
 * (docs/tf-cpu-divergences.md).
 *
 * Thread contract: compute functions on TF's thread; run functions on the
 * stream worker (skr_fill_run spreads over sim_parallel_for).
 */
#include "kernels/random/random.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALG_PHILOX = 1, ALG_AUTO_SELECT = 3 };

typedef struct rnd_state {
  skr_dist dist;
  TF_DataType dt;
  bool v2; /* key/counter/alg inputs; else a seed */
} rnd_state;

typedef struct rnd_args {
  skr_fill fill;
  const uint64_t* key; /* V2: device words, read on the worker */
  const uint64_t* counter;
} rnd_args;

/* A seed input: shape [2], int32 or int64 (TF's message for the shape). */
static bool read_seed(sk_launch* l, const TF_Tensor* t, uint64_t seed[2]) {
  sk_shape s;
  char b[SK_MAX_DIMS * 24 + 8];
  if (!sk_shape_of(l, t, &s)) return false;
  if (s.nd != 1 || s.d[0] != 2) {
    sk_fail(l, TF_INVALID_ARGUMENT, "seed must have shape [2], not %s",
            sk_shape_str(&s, b, sizeof(b)));
    return false;
  }
  TF_DataType dt = TF_TensorType(t);
  if (dt != TF_INT32 && dt != TF_INT64) {
    sk_fail(l, TF_INVALID_ARGUMENT, "Invalid seed type: %s", sk_dtype_name(dt));
    return false;
  }
  /* Sign-extended to 64 bits, as TF widens an int32 seed. */
  seed[0] = (uint64_t)sk_index_at(t, 0);
  seed[1] = (uint64_t)sk_index_at(t, 1);
  return true;
}

/* V2's key (input 1), counter (2) and alg (3): TF's checks and words. */
static bool read_key_counter_alg(sk_launch* l, TF_Tensor* key, TF_Tensor* ctr,
                                 TF_Tensor* alg_t, int* alg) {
  sk_shape ks, cs, as;
  char b[SK_MAX_DIMS * 24 + 8];
  if (!sk_shape_of(l, key, &ks) || !sk_shape_of(l, ctr, &cs) ||
      !sk_shape_of(l, alg_t, &as))
    return false;
  if (as.nd != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "input 3 (0-based) must have shape [], "
            "not %s",
            sk_shape_str(&as, b, sizeof(b)));
    return false;
  }
  *alg = *(const int32_t*)sk_data(alg_t);
  if (*alg == ALG_AUTO_SELECT) *alg = ALG_PHILOX;
  if (ks.nd != 1 || ks.d[0] != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "key must have shape [1], not %s. (Note that batched keys are "
            "not supported yet.)",
            sk_shape_str(&ks, b, sizeof(b)));
    return false;
  }
  /* TF's minimum is the algorithm id; Philox reads two words. */
  int64_t min = *alg == ALG_PHILOX ? 2 : *alg;
  if (cs.nd != 1 || cs.d[0] < min) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "counter must be a vector with length at least %lld; got shape: "
            "%s. (Note that batched counters are not supported yet.)",
            (long long)min, sk_shape_str(&cs, b, sizeof(b)));
    return false;
  }
  return true;
}

/* minval / maxval (inputs lo_i, lo_i + 1): scalars with minval < maxval. */
static bool read_bounds(sk_launch* l, int lo_i, int64_t* lo, uint64_t* range) {
  static const char* const kNames[2] = {"minval", "maxval"};
  int64_t v[2];
  for (int i = 0; i < 2; i++) {
    TF_Tensor* t = sk_input(l, lo_i + i);
    sk_shape s;
    char b[SK_MAX_DIMS * 24 + 8];
    if (t == NULL || !sk_shape_of(l, t, &s)) return false;
    if (s.nd != 0) {
      sk_fail(l, TF_INVALID_ARGUMENT, "%s must be 0-D, got shape %s", kNames[i],
              sk_shape_str(&s, b, sizeof(b)));
      return false;
    }
    v[i] = sk_index_at(t, 0);
  }
  if (v[0] >= v[1]) {
    sk_fail(l, TF_INVALID_ARGUMENT, "Need minval < maxval, got %lld >= %lld",
            (long long)v[0], (long long)v[1]);
    return false;
  }
  *lo = v[0];
  *range = (uint64_t)v[1] - (uint64_t)v[0];
  return true;
}

static void rnd_run(sk_launch* l, void* args) {
  (void)l;
  rnd_args* a = args;
  if (a->key != NULL) skr_gen_from_words(a->key, a->counter, &a->fill.gen);
  skr_fill_run(&a->fill);
}

static void rnd_compute(sk_launch* l, void* state) {
  const rnd_state* st = state;
  TF_Tensor* shape_t = sk_input(l, 0);
  if (shape_t == NULL) return;
  TF_Tensor *key = NULL, *ctr = NULL;
  uint64_t seed[2];
  int alg = ALG_PHILOX;
  sk_shape s;
  if (st->v2) {
    key = sk_input(l, 1);
    ctr = sk_input(l, 2);
    TF_Tensor* alg_t = sk_input(l, 3);
    if (key == NULL || ctr == NULL || alg_t == NULL ||
        !read_key_counter_alg(l, key, ctr, alg_t, &alg) ||
        !sk_shape_from_tensor(l, shape_t, "shape", &s))
      return;
  } else {
    TF_Tensor* seed_t = sk_input(l, 1);
    if (seed_t == NULL || !sk_shape_from_tensor(l, shape_t, "shape", &s) ||
        !read_seed(l, seed_t, seed))
      return;
  }
  TF_Tensor* out = sk_output(l, 0, &s);
  if (out == NULL || s.n == 0) return;
  rnd_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  if (st->dist == SKR_INT &&
      !read_bounds(l, st->v2 ? 4 : 2, &a->fill.lo, &a->fill.range))
    return;
  if (alg != ALG_PHILOX) {
    sk_fail(l, TF_INVALID_ARGUMENT, "Unsupported algorithm id: %d", alg);
    return;
  }
  a->fill.dist = st->dist;
  a->fill.dt = st->dt;
  a->fill.out = sk_mdata(out);
  a->fill.n = s.n;
  if (st->v2) {
    a->key = sk_data(key);
    a->counter = sk_data(ctr);
  } else {
    skr_seed_key(seed[0], seed[1], &a->fill.gen);
  }
  sk_work(l, rnd_run, "StatelessRandom");
}

static void* rnd_create(TF_OpKernelConstruction* c, skr_dist dist, bool v2) {
  rnd_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->dist = dist;
  st->v2 = v2;
  if (!sk_attr_type(c, "dtype", &st->dt)) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, rnd_compute, st, free);
}

#define RND_CREATE(fn, dist, v2)                \
  static void* fn(TF_OpKernelConstruction* c) { \
    return rnd_create(c, dist, v2);             \
  }
RND_CREATE(uniform_v2_create, SKR_UNIFORM, true)
RND_CREATE(normal_v2_create, SKR_NORMAL, true)
RND_CREATE(truncated_v2_create, SKR_TRUNCATED, true)
RND_CREATE(int_v2_create, SKR_INT, true)
RND_CREATE(full_int_v2_create, SKR_FULL_INT, true)
RND_CREATE(uniform_create, SKR_UNIFORM, false)
RND_CREATE(normal_create, SKR_NORMAL, false)
RND_CREATE(truncated_create, SKR_TRUNCATED, false)
RND_CREATE(int_create, SKR_INT, false)
RND_CREATE(full_int_create, SKR_FULL_INT, false)
#undef RND_CREATE

/* ---- StatelessRandomGet{KeyCounter,Alg,KeyCounterAlg} (host only) -------- */

enum { GET_KEY_COUNTER = 1, GET_ALG = 2 };

static void get_compute(sk_launch* l, void* state) {
  int what = (int)(intptr_t)state;
  int alg_out = 0;
  if (what & GET_KEY_COUNTER) {
    uint64_t seed[2];
    TF_Tensor* seed_t = sk_input(l, 0);
    if (seed_t == NULL || !read_seed(l, seed_t, seed)) return;
    skr_gen g;
    skr_seed_key(seed[0], seed[1], &g);
    sk_shape k1 = {.nd = 1, .d = {1}, .n = 1}, c2 = {.nd = 1, .d = {2}, .n = 2};
    TF_Tensor* key = sk_output(l, 0, &k1);
    TF_Tensor* ctr = sk_output(l, 1, &c2);
    if (key == NULL || ctr == NULL) return;
    uint64_t* kw = sk_mdata(key);
    uint64_t* cw = sk_mdata(ctr);
    kw[0] = (uint64_t)g.key[1] << 32 | g.key[0];
    cw[0] = (uint64_t)g.ctr[1] << 32 | g.ctr[0];
    cw[1] = (uint64_t)g.ctr[3] << 32 | g.ctr[2];
    alg_out = 2;
  }
  if (what & GET_ALG) {
    sk_shape sc = {.nd = 0, .n = 1};
    TF_Tensor* alg = sk_output(l, alg_out, &sc);
    if (alg != NULL) *(int32_t*)sk_mdata(alg) = ALG_PHILOX;
  }
}

static void* get_kc_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, get_compute, (void*)(intptr_t)GET_KEY_COUNTER, NULL);
}
static void* get_alg_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, get_compute, (void*)(intptr_t)GET_ALG, NULL);
}
static void* get_kca_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, get_compute,
                       (void*)(intptr_t)(GET_KEY_COUNTER | GET_ALG), NULL);
}

/* ---- registration -------------------------------------------------------- */

static const TF_DataType kRealTypes[] = {TF_FLOAT, TF_DOUBLE, TF_HALF,
                                         TF_BFLOAT16, 0};
static const TF_DataType kIntTypes[] = {TF_INT32, TF_INT64, 0};
static const TF_DataType kFullIntTypes[] = {TF_INT32, TF_INT64, TF_UINT32,
                                            TF_UINT64, 0};
static const char* const kV2Host[] = {"shape", "alg", NULL};
static const char* const kV2IntHost[] = {"shape", "alg", "minval", "maxval",
                                         NULL};
static const char* const kV1Host[] = {"shape", "seed", NULL};
static const char* const kV1IntHost[] = {"shape", "seed", "minval", "maxval",
                                         NULL};
static const char* const kKcHost[] = {"seed", "key", "counter", NULL};
static const char* const kAlgHost[] = {"alg", NULL};
static const char* const kKcaHost[] = {"seed", "key", "counter", "alg", NULL};

static const sk_op kOps[] = {
    {"StatelessRandomGetKeyCounter", get_kc_create, NULL, NULL, kKcHost},
    {"StatelessRandomGetAlg", get_alg_create, NULL, NULL, kAlgHost},
    {"StatelessRandomGetKeyCounterAlg", get_kca_create, NULL, NULL, kKcaHost},
    {"StatelessRandomUniformV2", uniform_v2_create, "dtype", kRealTypes,
     kV2Host},
    {"StatelessRandomNormalV2", normal_v2_create, "dtype", kRealTypes, kV2Host},
    {"StatelessTruncatedNormalV2", truncated_v2_create, "dtype", kRealTypes,
     kV2Host},
    {"StatelessRandomUniformIntV2", int_v2_create, "dtype", kIntTypes,
     kV2IntHost},
    {"StatelessRandomUniformFullIntV2", full_int_v2_create, "dtype",
     kFullIntTypes, kV2Host},
    {"StatelessRandomUniform", uniform_create, "dtype", kRealTypes, kV1Host},
    {"StatelessRandomNormal", normal_create, "dtype", kRealTypes, kV1Host},
    {"StatelessTruncatedNormal", truncated_create, "dtype", kRealTypes,
     kV1Host},
    {"StatelessRandomUniformInt", int_create, "dtype", kIntTypes, kV1IntHost},
    {"StatelessRandomUniformFullInt", full_int_create, "dtype", kFullIntTypes,
     kV1Host},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_random(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
