/*
 * shape_ops.c - kernels that reorder or replicate data without arithmetic:
 * Transpose, Tile, BroadcastTo, Pack, ConcatV2.
 *
 * Two copy engines serve them, both working on raw elements of 1, 2, 4 or 8
 * bytes, so one kernel serves every registered dtype:
 *   gather  out[i] = in[sum_k idx_k(i) * stride_k]: Transpose (permuted
 *           strides), BroadcastTo (stride 0 on broadcast dimensions) and
 *           Tile (the input broadcast as [m0,d0,m1,d1,...] with stride 0 on
 *           each m). Size-1 and contiguous dimensions are merged first; a
 *           transpose whose innermost output dimension is strided in the
 *           input is copied in tiles so both sides stay in cache.
 *   concat  out viewed as [rows, W]: input i fills columns [c_i, c_i + w_i)
 *           (ConcatV2; Pack is a concat of [outer, inner] slices).
 * Results are the input bytes, so they never depend on how
 * sim_parallel_for splits the work.
 *
 * Arguments TF keeps in host memory (perm, multiples, shape, axis) are read
 * on TF's thread in the compute function. Thread contract as in sk.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/array/array.h"

#define GMAX (2 * SK_MAX_DIMS) /* Tile doubles the rank */
#define TILE 32                /* transpose tile edge, in elements */
#define JCHUNK 1024            /* innermost columns per transpose work item */

/* ---- the gather engine --------------------------------------------------- */

typedef struct gather_args {
  const char* x;
  char* y;
  size_t es;
  int nd;            /* after merging; >= 1 */
  int64_t d[GMAX];   /* output dimensions */
  int64_t st[GMAX];  /* input stride (elements) per output dimension */
  int64_t ost[GMAX]; /* output strides (row-major over d) */
  int k;             /* tiled transpose: the dimension with input stride 1 */
  int64_t tiles;     /* TILE bands along d[k] */
  int64_t jtiles;    /* JCHUNK bands along the innermost dimension */
} gather_args;

/* Drops size-1 dimensions and merges neighbours that are contiguous in the
 * input (including two broadcast ones). Leaves at least one dimension. */
static void gather_simplify(gather_args* g) {
  int m = 0;
  for (int i = 0; i < g->nd; i++) {
    if (g->d[i] == 1) continue;
    if (m > 0 && g->st[m - 1] == g->st[i] * g->d[i]) {
      g->d[m - 1] *= g->d[i];
      g->st[m - 1] = g->st[i];
      continue;
    }
    g->d[m] = g->d[i];
    g->st[m] = g->st[i];
    m++;
  }
  if (m == 0) {
    g->d[0] = 1;
    g->st[0] = 1;
    m = 1;
  }
  g->nd = m;
  int64_t s = 1;
  for (int i = m - 1; i >= 0; i--) {
    g->ost[i] = s;
    s *= g->d[i];
  }
}

/* Copies n elements of size es, input stride s (0 broadcasts one element). */
static void copy_strided(char* y, const char* x, int64_t n, int64_t s,
                         size_t es) {
  if (s == 1) {
    memcpy(y, x, (size_t)n * es);
    return;
  }
#define COPY_AS(T)                                                   \
  for (int64_t j = 0; j < n; j++) ((T*)y)[j] = ((const T*)x)[j * s]; \
  break
  switch (es) {
    case 1: COPY_AS(uint8_t);
    case 2: COPY_AS(uint16_t);
    case 4: COPY_AS(uint32_t);
    default: COPY_AS(uint64_t);
  }
#undef COPY_AS
}

/* Output elements [b, e): the output is walked row by row over its
 * innermost dimension, an odometer tracking the input offset of each row. */
static void gather_elems(void* arg, int64_t b, int64_t e) {
  const gather_args* g = arg;
  int L = g->nd - 1;
  int64_t inner = g->d[L], sl = g->st[L], idx[GMAX], off = 0;
  int64_t rem = b / inner, col = b % inner;
  for (int i = L - 1; i >= 0; i--) {
    idx[i] = rem % g->d[i];
    rem /= g->d[i];
    off += idx[i] * g->st[i];
  }
  for (int64_t p = b; p < e;) {
    int64_t cnt = inner - col < e - p ? inner - col : e - p;
    copy_strided(g->y + (size_t)p * g->es,
                 g->x + (size_t)(off + col * sl) * g->es, cnt, sl, g->es);
    p += cnt;
    col = 0;
    for (int i = L - 1; i >= 0; i--) {
      off += g->st[i];
      if (++idx[i] < g->d[i]) break;
      off -= g->st[i] * g->d[i];
      idx[i] = 0;
    }
  }
}

/* One tile: i in [i0, i1) along dimension k (input stride 1), j over the
 * innermost dimension L (output stride 1, input stride sl). */
#define TILE_AS(T)                                       \
  for (int64_t j0 = jb; j0 < nl; j0 += TILE) {           \
    int64_t j1 = j0 + TILE < nl ? j0 + TILE : nl;        \
    for (int64_t i = i0; i < i1; i++)                    \
      for (int64_t j = j0; j < j1; j++)                  \
        ((T*)y)[i * ok + j] = ((const T*)x)[i + j * sl]; \
  }                                                      \
  break

/* Work item t: a TILE-row band [i0, i1) along k times a JCHUNK-column band
 * [jb, nl) along L, for one index of the other ("batch") dimensions. */
static void gather_tiles(void* arg, int64_t b, int64_t e) {
  const gather_args* g = arg;
  int L = g->nd - 1, k = g->k;
  int64_t sl = g->st[L], ok = g->ost[k];
  for (int64_t t = b; t < e; t++) {
    int64_t jt = t % g->jtiles, rest = t / g->jtiles;
    int64_t batch = rest / g->tiles, i0 = (rest % g->tiles) * TILE;
    int64_t i1 = i0 + TILE < g->d[k] ? i0 + TILE : g->d[k];
    int64_t jb = jt * JCHUNK;
    int64_t nl = jb + JCHUNK < g->d[L] ? jb + JCHUNK : g->d[L];
    int64_t in_off = 0, out_off = 0;
    for (int i = L - 1; i >= 0; i--) {
      if (i == k) continue;
      int64_t v = batch % g->d[i];
      batch /= g->d[i];
      in_off += v * g->st[i];
      out_off += v * g->ost[i];
    }
    const char* x = g->x + (size_t)in_off * g->es;
    char* y = g->y + (size_t)out_off * g->es;
    switch (g->es) {
      case 1: TILE_AS(uint8_t);
      case 2: TILE_AS(uint16_t);
      case 4: TILE_AS(uint32_t);
      default: TILE_AS(uint64_t);
    }
  }
}
#undef TILE_AS

static void gather_run(sk_launch* l, void* args) {
  (void)l;
  gather_args* g = args;
  int64_t n = 1;
  for (int i = 0; i < g->nd; i++) n *= g->d[i];
  if (g->k < 0) {
    sim_parallel_for(n, SKA_GRAIN, gather_elems, g);
    return;
  }
  int64_t cols = g->d[g->nd - 1] < JCHUNK ? g->d[g->nd - 1] : JCHUNK;
  int64_t grain = SKA_GRAIN / (TILE * cols);
  sim_parallel_for(n / g->d[g->k] / g->d[g->nd - 1] * g->tiles * g->jtiles,
                   grain > 0 ? grain : 1, gather_tiles, g);
}

/* Queues out = gather(x) for g's unsimplified d/st/nd (the output shape is
 * `os`). An identity gather aliases the input instead. */
static void gather_launch(sk_launch* l, TF_Tensor* x, const sk_shape* xs,
                          const sk_shape* os, gather_args* g,
                          const char* label) {
  /* os was counted (sk_shape_count): its dims, which g's are, multiply
   * within int64 only if that succeeded. */
  if (!sk_ok(l)) return;
  gather_simplify(g);
  if (g->nd == 1 && g->st[0] == 1 && os->n == xs->n) {
    sk_output_alias(l, 0, x, TF_TensorType(x), os);
    return;
  }
  TF_Tensor* y = sk_output(l, 0, os);
  gather_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os->n == 0) return;
  *a = *g;
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->es = TF_DataTypeSize(TF_TensorType(x));
  a->k = -1;
  int L = a->nd - 1;
  if (a->st[L] > 1) /* strided innermost: tile if some dimension is not */
    for (int i = 0; i < L; i++)
      if (a->st[i] == 1) a->k = i;
  if (a->k >= 0) {
    a->tiles = (a->d[a->k] + TILE - 1) / TILE;
    a->jtiles = (a->d[L] + JCHUNK - 1) / JCHUNK;
  }
  sk_work(l, gather_run, label);
}

/* Row-major element strides of s. */
/* ---- Transpose ----------------------------------------------------------- */

/* perm (wrapped into [0, nd)) must be a permutation; TF's messages. */
static bool check_perm(sk_launch* l, const TF_Tensor* pt, int nd,
                       int64_t* perm) {
  char b[256];
  sk_shape ps;
  if (!sk_shape_of(l, pt, &ps)) return false;
  if (ps.nd != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "perm must be rank 1, got shape %s",
            sk_shape_str(&ps, b, sizeof(b)));
    return false;
  }
  if (ps.n != nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "transpose expects a vector of size %d. But input(1) is a vector "
            "of size %lld",
            nd, (long long)ps.n);
    return false;
  }
  bool seen[SK_MAX_DIMS] = {false};
  for (int i = 0; i < nd; i++) {
    int64_t v = sk_index_at(pt, i);
    perm[i] = v < 0 ? v + nd : v;
    if (perm[i] < 0 || perm[i] >= nd) {
      sk_fail(l, TF_INVALID_ARGUMENT, "%lld is out of range [0 .. %d)",
              (long long)perm[i], nd);
      return false;
    }
    seen[perm[i]] = true;
  }
  for (int i = 0; i < nd; i++) {
    if (seen[i]) continue;
    size_t n = 0;
    for (int j = 0; j < nd && n < sizeof(b); j++)
      n += (size_t)snprintf(b + n, sizeof(b) - n, j ? ",%lld" : "%lld",
                            (long long)perm[j]);
    sk_fail(l, TF_INVALID_ARGUMENT, "%d is missing from {%s}.", i, b);
    return false;
  }
  return true;
}

static void transpose_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* pt = sk_input(l, 1);
  sk_shape s, o;
  int64_t perm[SK_MAX_DIMS], st[SK_MAX_DIMS];
  if (x == NULL || pt == NULL || !sk_shape_of(l, x, &s) ||
      !check_perm(l, pt, s.nd, perm))
    return;
  gather_args g = {0};
  sk_strides(&s, st);
  o.nd = g.nd = s.nd;
  for (int i = 0; i < s.nd; i++) {
    o.d[i] = g.d[i] = s.d[perm[i]];
    g.st[i] = st[perm[i]];
  }
  /* Not s.n unchecked: [0,2**62,4] is valid, its transpose [2**62,4,0] is
   * not (TF's running product, arith/dims.h). */
  if (!sk_shape_count(l, &o)) return;
  gather_launch(l, x, &s, &o, &g, "Transpose");
}

/* ---- Tile ---------------------------------------------------------------- */

static void tile_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* mt = sk_input(l, 1);
  sk_shape s, ms, o;
  int64_t st[SK_MAX_DIMS];
  char b[256];
  if (x == NULL || mt == NULL || !sk_shape_of(l, x, &s) ||
      !sk_shape_of(l, mt, &ms))
    return;
  if (ms.nd != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected multiples to be 1-D, but got shape %s",
            sk_shape_str(&ms, b, sizeof(b)));
    return;
  }
  if (ms.n != s.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected multiples argument to be a vector of length %d but got "
            "length %lld",
            s.nd, (long long)ms.n);
    return;
  }
  /* The output, row-major, is the input broadcast to [m0,d0,m1,d1,...]. */
  gather_args g = {0};
  sk_strides(&s, st);
  o.nd = s.nd;
  g.nd = 2 * s.nd;
  for (int i = 0; i < s.nd; i++) {
    int64_t m = sk_index_at(mt, i);
    if (m < 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Expected multiples[%d] >= 0, but got %lld", i, (long long)m);
      return;
    }
    /* Checked even for an empty input: TF CPU's unchecked product wraps
     * ([0,4] tiled by [1,2**62] gives it shape [0,0]). */
    if (!sk_size_mul(l, s.d[i], m, &o.d[i], "Tile output dimension")) return;
    g.d[2 * i] = m;
    g.st[2 * i] = 0;
    g.d[2 * i + 1] = s.d[i];
    g.st[2 * i + 1] = st[i];
  }
  if (!sk_shape_count(l, &o)) return;
  gather_launch(l, x, &s, &o, &g, "Tile");
}

/* ---- BroadcastTo ----------------------------------------------------------
 */

static void broadcast_to_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* shp = sk_input(l, 1);
  sk_shape s, o;
  char b[256], b2[256];
  if (x == NULL || shp == NULL || !sk_shape_of(l, x, &s) ||
      !sk_shape_from_tensor(l, shp, "shape", &o))
    return;
  if (s.nd > o.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Rank of input (%d) must be no greater than rank of output shape "
            "(%d).",
            s.nd, o.nd);
    return;
  }
  /* TF first broadcasts both ways (Incompatible shapes), then requires the
   * result to be the requested shape. */
  int lead = o.nd - s.nd;
  bool incompatible = false, shrinks = false;
  for (int i = 0; i < s.nd; i++) {
    int64_t a = s.d[i], c = o.d[lead + i];
    if (a != c && a != 1 && c != 1) incompatible = true;
    if (a != c && c == 1) shrinks = true;
  }
  if (incompatible || shrinks) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            incompatible ? "Incompatible shapes: %s vs. %s"
                         : "Unable to broadcast tensor of shape %s to tensor "
                           "of shape %s",
            sk_shape_str(&s, b, sizeof(b)), sk_shape_str(&o, b2, sizeof(b2)));
    return;
  }
  gather_args g = {0};
  int64_t st[SK_MAX_DIMS];
  sk_strides(&s, st);
  g.nd = o.nd;
  for (int i = 0; i < o.nd; i++) {
    g.d[i] = o.d[i];
    int j = i - lead;
    g.st[i] = (j < 0 || s.d[j] != o.d[i]) ? 0 : st[j];
  }
  gather_launch(l, x, &s, &o, &g, "BroadcastTo");
}

/* ---- the concat engine: Pack, ConcatV2 ----------------------------------- */

typedef struct concat_args {
  size_t es;
  char* y;
  int64_t w_total; /* output row width W, elements */
  int64_t n;       /* output elements */
  int count;
  const char** x; /* per input: data, row width, first column */
  int64_t* w;
  int64_t* c;
} concat_args;

static void concat_range(void* arg, int64_t b, int64_t e) {
  const concat_args* a = arg;
  for (int64_t p = b; p < e;) {
    int64_t r = p / a->w_total, col = p % a->w_total;
    int lo = 0, hi = a->count - 1; /* last input with c <= col */
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (a->c[mid] <= col)
        lo = mid;
      else
        hi = mid - 1;
    }
    int64_t cnt = a->c[lo] + a->w[lo] - col;
    if (cnt > e - p) cnt = e - p;
    memcpy(a->y + (size_t)p * a->es,
           a->x[lo] + (size_t)(r * a->w[lo] + col - a->c[lo]) * a->es,
           (size_t)cnt * a->es);
    p += cnt;
  }
}

static void concat_run(sk_launch* l, void* args) {
  (void)l;
  concat_args* a = args;
  sim_parallel_for(a->n, SKA_GRAIN, concat_range, a);
}

/* Queues the copy of inputs [0, count) into output 0 (shape o), input i
 * supplying rows of w[i] elements. */
static void concat_launch(sk_launch* l, TF_Tensor** in, int count,
                          const int64_t* w, const sk_shape* o,
                          const char* label) {
  TF_Tensor* y = sk_output(l, 0, o);
  size_t extra = (size_t)count * (sizeof(char*) + 2 * sizeof(int64_t));
  concat_args* a = sk_args(l, sizeof(*a) + extra);
  if (!sk_ok(l) || o->n == 0) return;
  a->w = (int64_t*)(a + 1);
  a->c = a->w + count;
  a->x = (const char**)(a->c + count);
  a->es = TF_DataTypeSize(TF_TensorType(y));
  a->y = sk_mdata(y);
  a->n = o->n;
  a->count = count;
  for (int i = 0; i < count; i++) {
    a->x[i] = sk_data(in[i]);
    a->w[i] = w[i];
    a->c[i] = a->w_total;
    a->w_total += w[i];
  }
  sk_work(l, concat_run, label);
}

typedef struct pack_state {
  int64_t axis;
} pack_state;

static void pack_compute(sk_launch* l, void* state) {
  const pack_state* ps = state;
  int count = TF_NumInputs(sk_context(l));
  TF_Tensor** in = calloc((size_t)count, sizeof(*in));
  int64_t* w = calloc((size_t)count, sizeof(*w));
  sk_shape s0, s, o;
  char b[256], b2[256];
  if (in == NULL || w == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    goto out;
  }
  for (int i = 0; i < count; i++)
    if ((in[i] = sk_input(l, i)) == NULL) goto out;
  if (!sk_shape_of(l, in[0], &s0)) goto out;
  int rank = s0.nd + 1;
  int64_t axis = ps->axis < 0 ? ps->axis + rank : ps->axis;
  if (axis < 0 || axis >= rank) {
    sk_fail(l, TF_INVALID_ARGUMENT, "axis = %lld not in [%d, %d)",
            (long long)ps->axis, -rank, rank);
    goto out;
  }
  if (!sk_rank_ok(l, rank, "the output of Pack")) goto out;
  for (int i = 1; i < count; i++) {
    if (!sk_shape_of(l, in[i], &s)) goto out;
    if (!sk_shape_eq(&s, &s0)) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Shapes of all inputs must match: values[0].shape = %s != "
              "values[%d].shape = %s",
              sk_shape_str(&s0, b, sizeof(b)), i,
              sk_shape_str(&s, b2, sizeof(b2)));
      goto out;
    }
  }
  o.nd = rank;
  for (int i = 0, j = 0; i < rank; i++) o.d[i] = i == axis ? count : s0.d[j++];
  if (!sk_shape_count(l, &o)) goto out;
  if (count == 1) { /* TF aliases a single input */
    sk_output_alias(l, 0, in[0], TF_TensorType(in[0]), &o);
    goto out;
  }
  int64_t inner = s0.n == 0 ? 0 : 1; /* empty: see concat_shapes */
  for (int i = (int)axis; i < s0.nd && inner != 0; i++) inner *= s0.d[i];
  for (int i = 0; i < count; i++) w[i] = inner;
  concat_launch(l, in, count, w, &o, "Pack");
out:
  free(in);
  free(w);
}

static void* pack_create(TF_OpKernelConstruction* c) {
  pack_state* ps = sk_state_new(c, sizeof(*ps));
  if (ps == NULL) return NULL;
  if (!sk_attr_int(c, "axis", &ps->axis)) {
    free(ps);
    return NULL;
  }
  return sk_kernel_new(c, pack_compute, ps, free);
}

/* Checks ConcatV2's inputs against values[0] and fills the output shape and
 * the per-input row widths. */
static bool concat_shapes(sk_launch* l, TF_Tensor** in, int count,
                          int64_t concat_dim, int64_t* w, sk_shape* o) {
  sk_shape s0, s;
  char b[256], b2[256];
  if (!sk_shape_of(l, in[0], &s0)) return false;
  int nd = s0.nd;
  int64_t axis = concat_dim < 0 ? concat_dim + nd : concat_dim;
  if ((axis < 0 || axis >= nd) && concat_dim != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "ConcatOp : Expected concatenating dimensions in the range [%d, "
            "%d), but got %lld",
            -nd, nd, (long long)concat_dim);
    return false;
  }
  *o = s0;
  o->d[axis] = 0;
  for (int i = 0; i < count; i++) {
    if (!sk_shape_of(l, in[i], &s)) return false;
    if (s.nd == 0 || nd == 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "ConcatOp : Can't concatenate scalars (use tf.stack instead)");
      return false;
    }
    if (s.nd != nd) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "ConcatOp : Ranks of all input tensors should match: shape[0] "
              "= %s vs. shape[%d] = %s",
              sk_shape_str(&s0, b, sizeof(b)), i,
              sk_shape_str(&s, b2, sizeof(b2)));
      return false;
    }
    for (int j = 0; j < nd; j++) {
      if (j == axis || s.d[j] == s0.d[j]) continue;
      sk_fail(l, TF_INVALID_ARGUMENT,
              "ConcatOp : Dimension %d in both shapes must be equal: "
              "shape[0] = %s vs. shape[%d] = %s",
              j, sk_shape_str(&s0, b, sizeof(b)), i,
              sk_shape_str(&s, b2, sizeof(b2)));
      return false;
    }
    if (!sk_size_add(l, o->d[axis], s.d[axis], &o->d[axis],
                     "ConcatOp output dimension"))
      return false;
    /* An empty input adds no rows (nor does it add columns to a non-empty
     * output), and its dims' product may not fit int64. */
    w[i] = s.n == 0 ? 0 : 1;
    for (int j = (int)axis; j < nd && w[i] != 0; j++) w[i] *= s.d[j];
  }
  return sk_shape_count(l, o);
}

static void concat_compute(sk_launch* l, void* state) {
  (void)state;
  int count = TF_NumInputs(sk_context(l)) - 1; /* the last is axis */
  TF_Tensor** in = calloc((size_t)count + 1, sizeof(*in));
  int64_t* w = calloc((size_t)count, sizeof(*w));
  char b[256];
  sk_shape o;
  if (in == NULL || w == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    goto out;
  }
  for (int i = 0; i <= count; i++)
    if ((in[i] = sk_input(l, i)) == NULL) goto out;
  const TF_Tensor* at = in[count];
  sk_shape as;
  if (!sk_shape_of(l, at, &as)) goto out;
  if (as.nd > 1 || as.n != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "axis tensor should be a scalar integer, but got shape %s",
            sk_shape_str(&as, b, sizeof(b)));
    goto out;
  }
  if (concat_shapes(l, in, count, sk_index_at(at, 0), w, &o))
    concat_launch(l, in, count, w, &o, "ConcatV2");
out:
  free(in);
  free(w);
}

static void* concat_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, concat_compute, NULL, NULL);
}

static void* transpose_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, transpose_compute, NULL, NULL);
}
static void* tile_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, tile_compute, NULL, NULL);
}
static void* broadcast_to_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, broadcast_to_compute, NULL, NULL);
}

/* ---- registration ---------------------------------------------------------
 */

/* No int32 here: TF serves int32 ConcatV2 with a host-memory
 * DEVICE_DEFAULT kernel; the other ops get host-memory int32 kernels
 * below. */
static const TF_DataType kMoveTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF,  TF_BFLOAT16,  TF_INT64, TF_UINT8,
    TF_BOOL,  TF_INT8,   TF_INT16, TF_COMPLEX64, 0};

static const char* const kPermHost[] = {"perm", NULL};
static const char* const kMultiplesHost[] = {"multiples", NULL};
static const char* const kShapeHost[] = {"shape", NULL};
static const char* const kAxisHost[] = {"axis", NULL};

/* int32 (shape arithmetic) with every argument in host memory, as TF's
 * GPU build registers it; TF 2.21 has no DEVICE_DEFAULT kernel for these. */
static const TF_DataType kInt32[] = {TF_INT32, 0};
static const char* const kPermHost32[] = {"x", "perm", "y", NULL};
static const char* const kMultiplesHost32[] = {"input", "multiples", "output",
                                               NULL};
static const char* const kShapeHost32[] = {"input", "shape", "output", NULL};
static const char* const kPackHost32[] = {"values", "output", NULL};

static const sk_op kOps[] = {
    {"Transpose", transpose_create, "T", kMoveTypes, kPermHost},
    {"Transpose", transpose_create, "T", kInt32, kPermHost32},
    {"Tile", tile_create, "T", kMoveTypes, kMultiplesHost},
    {"Tile", tile_create, "T", kInt32, kMultiplesHost32},
    {"BroadcastTo", broadcast_to_create, "T", kMoveTypes, kShapeHost},
    {"BroadcastTo", broadcast_to_create, "T", kInt32, kShapeHost32},
    {"Pack", pack_create, "T", kMoveTypes, NULL},
    {"Pack", pack_create, "T", kInt32, kPackHost32},
    {"ConcatV2", concat_create, "T", kMoveTypes, kAxisHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_shape_ops(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
