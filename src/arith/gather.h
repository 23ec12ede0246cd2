/*
 * arith/gather.h - index-driven data movement without TensorFlow (prefix
 * sa_): the gathers and the scatter walk that simdev's array kernels
 * (array/gather.c: GatherV2; array/scatter.c: ScatterNd, TensorScatter*)
 * and the resource-variable kernels (variables/: ResourceGather(Nd),
 * ResourceScatter*, ResourceScatterNd*) share, so that an index is checked
 * and a slice addressed the same way by all of them.
 *
 * What is here and what is not: where each element goes (index checks,
 * offsets, the order of the rows, the split over the cores); what a
 * scatter does to an element (assign, add, min, ...) is the caller's
 * combine function, because the element types (half, bfloat16, complex)
 * and TF's numerics for them live with the kernels.
 *
 * Thread contract: pure functions of their arguments; the _run functions
 * spread their work over sim_parallel_for (a nested call runs inline) and
 * may be called from any thread, typically a stream worker.
 */
#ifndef SIMDEV_ARITH_GATHER_H_
#define SIMDEV_ARITH_GATHER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most index components a row of N-d indices has (the kernels' rank
 * limit, SK_MAX_DIMS). */
#define SA_ND_MAX 16

/* Element i of int32 (i64 false) or int64 index data. */
static inline int64_t sa_index(bool i64, const void* p, int64_t i) {
  return i64 ? ((const int64_t*)p)[i] : ((const int32_t*)p)[i];
}

/* ---- gathers along one axis (GatherV2, ResourceGather) ------------------
 * x is [batch, outer, n, inner], y is [batch, outer, k, inner], elements of
 * es bytes: y[b, o, j, :] = x[b, o, idx[b * k + j], :]. */
typedef struct sa_gather {
  const char* x;
  char* y;
  const void* idx;
  bool idx64;
  size_t es;
  int64_t batch, outer, n, k, inner;
} sa_gather;

/* The first position i in [0, batch * k) whose index is outside [0, n), or
 * -1 when all are in range. */
int64_t sa_gather_bad(const sa_gather* g);
/* The same with the batch's offset added (idx[i] + (i / k) * n) and the
 * range [0, batch * n): TF's ResourceGather with batch_dims checks the
 * index so, after flattening the batch into the gathered axis (an index
 * past its own batch's rows reads the next batch's, on TF's CPU and GPU;
 * sa_gather_run addresses it the same way when outer is 1). */
int64_t sa_gather_bad_flat(const sa_gather* g);
/* The copy (indices checked before), over the cores by output rows. */
void sa_gather_run(const sa_gather* g);

/* ---- N-d indices (GatherNd, ScatterNd and their resource forms) ---------
 * Rows of k indices, each naming a slice of a tensor whose first k dims
 * are d[0..k): row r's slice number is sum_j idx[r * k + j] * st[j]. */
typedef struct sa_nd {
  const void* idx;
  bool idx64;
  int k; /* 0 <= k <= SA_ND_MAX; 0: every row names the whole tensor */
  int64_t d[SA_ND_MAX];
  int64_t st[SA_ND_MAX]; /* row-major strides of d, in slices */
} sa_nd;

/* Fills nd for indices idx over dims d[0..k). k <= SA_ND_MAX (callers
 * check it), and the product of d[0..k) fits int64 (it is part of a
 * tensor's shape with an element, or the caller checked). */
void sa_nd_init(sa_nd* nd, const void* idx, bool idx64, const int64_t* d,
                int k);
/* Row r's slice number, or -1 if one of its indices is outside [0, d[j]). */
int64_t sa_nd_offset(const sa_nd* nd, int64_t r);
/* The first of rows [0, rows) with an index out of range, or -1. */
int64_t sa_nd_bad(const sa_nd* nd, int64_t rows);
/* Row r's k indices as TF's messages print them, "3, 0, 7" (no brackets),
 * into buf, cut to len (len >= 1). */
void sa_nd_row_string(const sa_nd* nd, int64_t r, char* buf, size_t len);

/* GatherNd (indices checked before): y's row r (slice elements of es bytes)
 * = x's slice sa_nd_offset(r), for rows [0, rows). */
void sa_gather_nd_run(const sa_nd* nd, const char* x, char* y, size_t es,
                      int64_t rows, int64_t slice);

/* ---- scatters -----------------------------------------------------------
 * combine(ctx, y, u, ubcast, n): y[0..n) = y op u for n elements, u being
 * n elements, or one element used for all when ubcast. */
typedef void (*sa_combine_fn)(const void* ctx, char* y, const char* u,
                              bool ubcast, int64_t n);

typedef struct sa_scatter {
  char* y;         /* slices of `slice` elements of es bytes */
  const char* upd; /* rows of `slice` elements; one element if ubcast */
  size_t es;
  bool ubcast; /* a scalar update for every element (ResourceScatter*) */
  sa_nd nd;    /* which slice of y row r goes to */
  int64_t rows, slice;
  sa_combine_fn combine;
  const void* ctx; /* the combine function's, e.g. the op and dtype */
} sa_scatter;

/* Applies rows 0, 1, ..., rows - 1 in this order to their slices (every
 * index checked before: sa_nd_bad), the work split by columns of the
 * slice, so duplicate indices combine in row order and the result never
 * depends on the split: what TF CPU's loops give (one row after the other). */
void sa_scatter_run(const sa_scatter* s);

#endif /* SIMDEV_ARITH_GATHER_H_ */
