/*
 * arith/gather.c - index checks, gathers and the scatter walk (gather.h).
 */
#include "arith/gather.h"

#include <stdio.h>
#include <string.h>

#include "device_sim/sim.h"

/* Elements per parallel range, roughly (array.h's SKA_GRAIN). */
#define GRAIN (1 << 15)

static int64_t grain_rows(int64_t row_elems) {
  int64_t g = GRAIN / (row_elems > 0 ? row_elems : 1);
  return g > 0 ? g : 1;
}

int64_t sa_gather_bad(const sa_gather* g) {
  int64_t total = g->batch * g->k;
  for (int64_t i = 0; i < total; i++) {
    int64_t j = sa_index(g->idx64, g->idx, i);
    if (j < 0 || j >= g->n) return i;
  }
  return -1;
}

int64_t sa_gather_bad_flat(const sa_gather* g) {
  int64_t total = g->batch * g->k, lim = g->batch * g->n;
  for (int64_t i = 0; i < total; i++) {
    /* (i / k) * n < batch * n: no overflow; the sum is checked below by
     * comparing j with bounds that leave room. */
    int64_t j = sa_index(g->idx64, g->idx, i), off = i / g->k * g->n;
    if (j < -off || j >= lim - off) return i;
  }
  return -1;
}

static void gather_rows(void* arg, int64_t b, int64_t e) {
  const sa_gather* g = arg;
  size_t row = (size_t)g->inner * g->es;
  for (int64_t r = b; r < e; r++) { /* r over [batch, outer, k] */
    int64_t kk = r % g->k, o = r / g->k % g->outer, bb = r / g->k / g->outer;
    int64_t j = sa_index(g->idx64, g->idx, bb * g->k + kk);
    memcpy(g->y + (size_t)r * row,
           g->x + (size_t)((bb * g->outer + o) * g->n + j) * row, row);
  }
}

void sa_gather_run(const sa_gather* g) {
  int64_t rows = g->batch * g->outer * g->k;
  if (rows == 0 || g->inner == 0) return;
  sim_parallel_for(rows, grain_rows(g->inner), gather_rows, (void*)g);
}

void sa_nd_init(sa_nd* nd, const void* idx, bool idx64, const int64_t* d,
                int k) {
  nd->idx = idx;
  nd->idx64 = idx64;
  nd->k = k;
  int64_t s = 1;
  for (int j = k - 1; j >= 0; j--) {
    nd->d[j] = d[j];
    nd->st[j] = s;
    s *= d[j];
  }
}

int64_t sa_nd_offset(const sa_nd* nd, int64_t r) {
  int64_t off = 0;
  for (int j = 0; j < nd->k; j++) {
    int64_t v = sa_index(nd->idx64, nd->idx, r * nd->k + j);
    if (v < 0 || v >= nd->d[j]) return -1;
    off += v * nd->st[j];
  }
  return off;
}

int64_t sa_nd_bad(const sa_nd* nd, int64_t rows) {
  for (int64_t r = 0; r < rows; r++)
    if (sa_nd_offset(nd, r) < 0) return r;
  return -1;
}

typedef struct gnd {
  const sa_nd* nd;
  const char* x;
  char* y;
  size_t row; /* bytes per slice */
} gnd;

static void gather_nd_rows(void* arg, int64_t b, int64_t e) {
  const gnd* a = arg;
  for (int64_t r = b; r < e; r++)
    memcpy(a->y + (size_t)r * a->row,
           a->x + (size_t)sa_nd_offset(a->nd, r) * a->row, a->row);
}

void sa_gather_nd_run(const sa_nd* nd, const char* x, char* y, size_t es,
                      int64_t rows, int64_t slice) {
  if (rows == 0 || slice == 0) return;
  gnd a = {nd, x, y, (size_t)slice * es};
  sim_parallel_for(rows, grain_rows(slice), gather_nd_rows, &a);
}

static void scatter_cols(void* arg, int64_t b, int64_t e) {
  const sa_scatter* s = arg;
  for (int64_t r = 0; r < s->rows; r++) {
    int64_t yo = sa_nd_offset(&s->nd, r) * s->slice;
    const char* u =
        s->ubcast ? s->upd : s->upd + (size_t)(r * s->slice + b) * s->es;
    s->combine(s->ctx, s->y + (size_t)(yo + b) * s->es, u, s->ubcast, e - b);
  }
}

void sa_scatter_run(const sa_scatter* s) {
  if (s->rows == 0 || s->slice == 0) return;
  int64_t grain = GRAIN / (s->rows > 0 ? s->rows : 1);
  sim_parallel_for(s->slice, grain > 0 ? grain : 1, scatter_cols, (void*)s);
}

void sa_nd_row_string(const sa_nd* nd, int64_t r, char* buf, size_t len) {
  size_t n = 0;
  buf[0] = '\0';
  for (int j = 0; j < nd->k && n < len; j++)
    n += (size_t)snprintf(
        buf + n, len - n, j ? ", %lld" : "%lld",
        (long long)sa_index(nd->idx64, nd->idx, r * nd->k + j));
}
