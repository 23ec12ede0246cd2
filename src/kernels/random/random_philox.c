/*
 * random_philox.c - the numbers of TF's stateless random ops: the
 * Philox-4x32-10 generator and the distributions over it, written from the
 * published algorithm (Salmon et al., SC 2011) and the facts of TF's CPU
 * kernels that decide every bit:
 *
 *   - One generator call (a "block") turns the 128-bit counter into four
 *     32-bit words with ten rounds; the key is raised by the Weyl constants
 *     between rounds; the counter then steps by one.
 *   - Output groups. Each distribution makes a fixed group of elements per
 *     block (float/half/bfloat16/int32: 4, one word each; double/int64: 2,
 *     two words each, the first word holding the high bits of a double's
 *     mantissa and the low bits of an int64). Group g uses the block at
 *     counter + g, so groups are independent and the work splits by groups
 *     with the same result for any split. A partial last group is cut.
 *   - Floats in [0, 1): the word's low 23 (float) / 52 (double: 20 + 32)
 *     bits become the mantissa of a number in [1, 2), minus 1. half keeps
 *     10 bits, bfloat16 7, both exact.
 *   - Normals: Box-Muller on pairs, u1 clamped below at 1e-7; float works in
 *     float except the angle (2 pi * u computed in double, then rounded to
 *     float), double in double; half/bfloat16 round the float result to
 *     nearest even. glibc's logf/sincosf/log/sincos, as TF's build calls.
 *   - Truncated normals draw words one at a time (a "single sample"
 *     adapter over the blocks), Box-Muller pairs, keep values with |x| < 2
 *     until the group is full. Group g starts at counter + g * 256 * G / 4
 *     (G = group size) whatever the earlier groups used.
 *   - Integers in [lo, hi): lo + word % (hi - lo), the difference taken
 *     unsigned (TF's method, with its slight modulo bias).
 *
 * Thread contract: skr_fill_run runs on a stream worker and its ranges on
 * sim_parallel_for's helpers; they write disjoint groups of the output.
 */
/* sincos and sincosf need _GNU_SOURCE, which the build defines. */
#include <math.h>
#include <string.h>

#include "kernels/random/random.h"

#define PHILOX_W32A 0x9E3779B9u
#define PHILOX_W32B 0xBB67AE85u
#define PHILOX_M4A 0xD2511F53u
#define PHILOX_M4B 0xCD9E8D57u

/* Groups of fixed-sample distributions per sim_parallel_for range, and of
 * truncated normals (each costs at least a few blocks). */
#define GRAIN_FIXED 512
#define GRAIN_TRUNC 64
/* Blocks TF reserves per truncated-normal element. */
#define TRUNC_RESERVED 256

/* Ten rounds from counter c under key k. */
static void philox_block(const uint32_t key[2], const uint32_t c[4],
                         uint32_t out[4]) {
  uint32_t x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)PHILOX_M4A * x0, p1 = (uint64_t)PHILOX_M4B * x2;
    uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
    uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
    x1 = (uint32_t)p1;
    x3 = (uint32_t)p0;
    x0 = y0;
    x2 = y2;
    k0 += PHILOX_W32A;
    k1 += PHILOX_W32B;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

/* c += n, over the 128-bit counter. */
static void ctr_add(uint32_t c[4], uint64_t n) {
  uint64_t lo = ((uint64_t)c[1] << 32 | c[0]), s = lo + n;
  c[0] = (uint32_t)s;
  c[1] = (uint32_t)(s >> 32);
  if (s < lo && ++c[2] == 0) ++c[3];
}

void skr_seed_key(uint64_t seed0, uint64_t seed1, skr_gen* g) {
  static const uint32_t kMixKey[2] = {0x3ec8f720u, 0x02461e29u};
  uint32_t c[4] = {(uint32_t)seed0, (uint32_t)(seed0 >> 32), (uint32_t)seed1,
                   (uint32_t)(seed1 >> 32)};
  uint32_t m[4];
  philox_block(kMixKey, c, m);
  g->key[0] = m[0];
  g->key[1] = m[1];
  g->ctr[0] = g->ctr[1] = 0;
  g->ctr[2] = m[2];
  g->ctr[3] = m[3];
}

void skr_gen_from_words(const uint64_t* key, const uint64_t* counter,
                        skr_gen* g) {
  g->key[0] = (uint32_t)key[0];
  g->key[1] = (uint32_t)(key[0] >> 32);
  g->ctr[0] = (uint32_t)counter[0];
  g->ctr[1] = (uint32_t)(counter[0] >> 32);
  g->ctr[2] = (uint32_t)counter[1];
  g->ctr[3] = (uint32_t)(counter[1] >> 32);
}

/* ---- conversions --------------------------------------------------------- */

static inline float unit_float(uint32_t w) {
  uint32_t b = 0x3f800000u | (w & 0x7fffffu);
  float f;
  memcpy(&f, &b, sizeof(f));
  return f - 1.0f;
}

static inline double unit_double(uint32_t hi, uint32_t lo) {
  uint64_t b = (uint64_t)1023 << 52 | (uint64_t)(hi & 0xfffffu) << 32 | lo;
  double d;
  memcpy(&d, &b, sizeof(d));
  return d - 1.0;
}

static inline uint16_t to_half(float f) {
  _Float16 h = (_Float16)f; /* IEEE round to nearest even */
  uint16_t b;
  memcpy(&b, &h, sizeof(b));
  return b;
}

/* Nearest even; never NaN here (every value drawn is finite). */
static inline uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static void box_muller_f(uint32_t a, uint32_t b, float* f0, float* f1) {
  float u1 = unit_float(a);
  if (u1 < 1.0e-7f) u1 = 1.0e-7f;
  float v1 = (float)(2.0 * M_PI * (double)unit_float(b));
  float u2 = sqrtf(-2.0f * logf(u1));
  sincosf(v1, f0, f1);
  *f0 *= u2;
  *f1 *= u2;
}

static void box_muller_d(const uint32_t w[4], double* d0, double* d1) {
  double u1 = unit_double(w[0], w[1]);
  if (u1 < 1.0e-7) u1 = 1.0e-7;
  double v1 = 2.0 * M_PI * unit_double(w[2], w[3]);
  double u2 = sqrt(-2.0 * log(u1));
  sincos(v1, d0, d1);
  *d0 *= u2;
  *d1 *= u2;
}

/* ---- groups -------------------------------------------------------------- */

/* Elements per group (per block for the fixed-sample distributions). */
static int group_size(const skr_fill* f) {
  return (f->dt == TF_DOUBLE || f->dt == TF_INT64 || f->dt == TF_UINT64) ? 2
                                                                         : 4;
}

/* Stores element i (< group size) of a group of floats or doubles. */
static void store_real(const skr_fill* f, int64_t i, double v) {
  switch (f->dt) {
    case TF_FLOAT: ((float*)f->out)[i] = (float)v; break;
    case TF_DOUBLE: ((double*)f->out)[i] = v; break;
    case TF_HALF: ((uint16_t*)f->out)[i] = to_half((float)v); break;
    default: ((uint16_t*)f->out)[i] = to_bf16((float)v); break;
  }
}

/* One fixed-sample group from block w into the elements [base, base+cnt). */
static void fixed_group(const skr_fill* f, const uint32_t w[4], int64_t base,
                        int cnt) {
  float fv[4];
  double dv[2];
  switch (f->dist) {
    case SKR_UNIFORM:
      if (f->dt == TF_DOUBLE) {
        dv[0] = unit_double(w[0], w[1]);
        dv[1] = unit_double(w[2], w[3]);
      } else {
        /* half and bfloat16 keep 10 / 7 mantissa bits: exact in float. */
        for (int j = 0; j < 4; j++)
          fv[j] = f->dt == TF_HALF       ? (float)(w[j] & 0x3ffu) / 1024.0f
                  : f->dt == TF_BFLOAT16 ? (float)(w[j] & 0x7fu) / 128.0f
                                         : unit_float(w[j]);
      }
      break;
    case SKR_NORMAL:
      if (f->dt == TF_DOUBLE) {
        box_muller_d(w, &dv[0], &dv[1]);
      } else {
        box_muller_f(w[0], w[1], &fv[0], &fv[1]);
        box_muller_f(w[2], w[3], &fv[2], &fv[3]);
      }
      break;
    case SKR_INT:
      for (int j = 0; j < cnt; j++) {
        if (f->dt == TF_INT32)
          ((int32_t*)f->out)[base + j] =
              (int32_t)((uint32_t)f->lo + w[j] % (uint32_t)f->range);
        else
          ((int64_t*)f->out)[base + j] =
              (int64_t)((uint64_t)f->lo +
                        ((uint64_t)w[2 * j + 1] << 32 | w[2 * j]) % f->range);
      }
      return;
    case SKR_FULL_INT:
      for (int j = 0; j < cnt; j++) {
        if (f->dt == TF_INT32 || f->dt == TF_UINT32)
          ((uint32_t*)f->out)[base + j] = w[j];
        else
          ((uint64_t*)f->out)[base + j] =
              (uint64_t)w[2 * j + 1] << 32 | w[2 * j];
      }
      return;
    default: return; /* SKR_TRUNCATED: trunc_group */
  }
  for (int j = 0; j < cnt; j++)
    store_real(f, base + j, f->dt == TF_DOUBLE ? dv[j] : fv[j]);
}

/* TF's single-sample adapter: the words of consecutive blocks, in order. */
typedef struct word_stream {
  const uint32_t* key;
  uint32_t ctr[4];
  uint32_t w[4];
  int used;
} word_stream;

static uint32_t next_word(word_stream* s) {
  if (s->used == 4) {
    philox_block(s->key, s->ctr, s->w);
    ctr_add(s->ctr, 1);
    s->used = 0;
  }
  return s->w[s->used++];
}

/* Truncated-normal group g into [base, base + cnt). */
static void trunc_group(const skr_fill* f, int64_t g, int64_t base, int cnt) {
  int gs = group_size(f);
  word_stream s = {.key = f->gen.key, .used = 4};
  memcpy(s.ctr, f->gen.ctr, sizeof(s.ctr));
  ctr_add(s.ctr, (uint64_t)g * (uint64_t)(gs * TRUNC_RESERVED / 4));
  int k = 0;
  while (k < cnt) {
    double v[2];
    if (f->dt == TF_DOUBLE) {
      uint32_t w[4];
      for (int j = 0; j < 4; j++) w[j] = next_word(&s);
      box_muller_d(w, &v[0], &v[1]);
    } else {
      uint32_t a = next_word(&s), b = next_word(&s);
      float x0, x1;
      box_muller_f(a, b, &x0, &x1);
      /* The test is on the float value, before any rounding to half. */
      v[0] = fabsf(x0) < 2.0f ? x0 : NAN;
      v[1] = fabsf(x1) < 2.0f ? x1 : NAN;
    }
    for (int j = 0; j < 2 && k < cnt; j++)
      if (fabs(v[j]) < 2.0) store_real(f, base + k++, v[j]);
  }
}

static void fill_range(void* arg, int64_t gb, int64_t ge) {
  const skr_fill* f = arg;
  int gs = group_size(f);
  uint32_t ctr[4], w[4];
  memcpy(ctr, f->gen.ctr, sizeof(ctr));
  ctr_add(ctr, (uint64_t)gb);
  for (int64_t g = gb; g < ge; g++) {
    int64_t base = g * gs;
    int cnt = f->n - base < gs ? (int)(f->n - base) : gs;
    if (f->dist == SKR_TRUNCATED) {
      trunc_group(f, g, base, cnt);
      continue;
    }
    philox_block(f->gen.key, ctr, w);
    ctr_add(ctr, 1);
    fixed_group(f, w, base, cnt);
  }
}

void skr_fill_run(const skr_fill* f) {
  int gs = group_size(f);
  int64_t groups = (f->n + gs - 1) / gs;
  sim_parallel_for(groups, f->dist == SKR_TRUNCATED ? GRAIN_TRUNC : GRAIN_FIXED,
                   fill_range, (void*)f);
}
