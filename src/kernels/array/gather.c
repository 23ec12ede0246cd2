/*
 * gather.c - index-driven data movement: GatherV2, OneHot, ArgMax/ArgMin
 * and UnsortedSegmentSum (the densified gradient of an embedding lookup).
 *
 * GatherV2 and OneHot move raw elements (one kernel per element size, every
 * dtype). Their indices live in device memory, so an out-of-range GatherV2
 * index is found on the stream worker: the whole index tensor is scanned
 * first, and the lowest bad position fails the op with TF CPU's message
 * (TF's GPU kernel zero-fills instead; simdev follows the CPU). OneHot gives
 * off_value for out-of-range indices, as TF does.
 *
 * ArgMax/ArgMin scan each reduced row in order with a strict comparison
 * from the type's lowest (highest) finite value, so ties give the lowest
 * index, NaN never wins, and a row with no candidate gives 0 - what TF
 * CPU's Eigen reducer returns. UnsortedSegmentSum adds rows in input order
 * into their segment (negative ids are dropped, as TF does; an id >=
 * num_segments fails with TF CPU's message); work is split by columns, so
 * the order of additions never depends on the split.
 *
 * Axis/depth/num_segments live in host memory. Thread contract as in sk.h.
 */
#include "arith/gather.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/array/array.h"

/* ---- GatherV2
 * ----------------------------------------------------------------- */

typedef struct gather_args {
  sa_gather g;
  sk_shape ishape; /* indices, for the error message */
} gather_args;

static void gather_run(sk_launch* l, void* args) {
  gather_args* a = args;
  int64_t i = sa_gather_bad(&a->g);
  if (i >= 0) {
    char b[SK_MAX_DIMS * 24];
    sk_index_string(&a->ishape, i, b, sizeof(b));
    sk_fail(l, TF_INVALID_ARGUMENT, "indices%s = %lld is not in [0, %lld)", b,
            (long long)sa_index(a->g.idx64, a->g.idx, i), (long long)a->g.n);
    return;
  }
  sa_gather_run(&a->g);
}

typedef struct gather_state {
  int64_t batch_dims;
} gather_state;

static void gather_compute(sk_launch* l, void* state) {
  const gather_state* gs = state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* it = sk_input(l, 1);
  TF_Tensor* at = sk_input(l, 2);
  sk_shape xs, is, os;
  char b1[256];
  if (x == NULL || it == NULL || at == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, it, &is))
    return;
  if (TF_NumDims(at) != 0) {
    sk_shape as;
    if (sk_shape_of(l, at, &as))
      sk_fail(l, TF_INVALID_ARGUMENT, "axis must be scalar, but received %s",
              sk_shape_str(&as, b1, sizeof(b1)));
    return;
  }
  int64_t bd = gs->batch_dims, axis = sk_index_at(at, 0);
  if (axis < -xs.nd || axis >= xs.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected axis in the range [%d, %d), but got %lld", -xs.nd, xs.nd,
            (long long)axis);
    return;
  }
  if (axis < 0) axis += xs.nd;
  if (bd != 0) {
    if (bd < -is.nd || bd > is.nd) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Expected batch_dims in the range [%d, %d], but got %lld", -is.nd,
              is.nd, (long long)bd);
      return;
    }
    if (bd < 0) bd += is.nd;
    if (bd >= xs.nd) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "batch_dims (%lld) must be less than rank(params) (%d).",
              (long long)bd, xs.nd);
      return;
    }
    if (axis < bd) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "batch_dims (%lld) must be less than or equal to axis (%lld).",
              (long long)bd, (long long)axis);
      return;
    }
    for (int i = 0; i < bd; i++)
      if (xs.d[i] != is.d[i]) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "params.shape[%d]: %lld should be equal to indices.shape[%d]: "
                "%lld",
                i, (long long)xs.d[i], i, (long long)is.d[i]);
        return;
      }
  }
  os.nd = 0;
  if (!sk_rank_ok(l, xs.nd - 1 + is.nd - bd, "the output of GatherV2")) return;
  for (int i = 0; i < axis; i++) os.d[os.nd++] = xs.d[i];
  for (int i = (int)bd; i < is.nd; i++) os.d[os.nd++] = is.d[i];
  for (int i = (int)axis + 1; i < xs.nd; i++) os.d[os.nd++] = xs.d[i];
  if (!sk_shape_count(l, &os)) return;
  TF_Tensor* y = sk_output(l, 0, &os);
  gather_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l)) return;
  sa_gather* g = &a->g;
  g->n = xs.d[axis];
  /* An empty output has nothing to copy; it still has indices to check
   * when there are some and params' axis is empty (every one is then out
   * of range). The products below are formed only from dims whose product
   * is known to fit: the output's when it has an element, indices' (the
   * batch dims are also theirs) when they have one. An empty shape's need
   * not ([0, 5, 2**62, 4] is valid: arith/dims.h). */
  if (os.n == 0 && (is.n == 0 || g->n > 0)) return;
  g->batch = g->outer = g->k = g->inner = 1;
  for (int i = 0; i < bd; i++) g->batch *= is.d[i];
  for (int i = (int)bd; i < is.nd; i++) g->k *= is.d[i];
  if (os.n == 0) {
    g->outer = g->inner = 0; /* gather_run fails on the first index */
  } else {
    for (int i = (int)bd; i < axis; i++) g->outer *= xs.d[i];
    for (int i = (int)axis + 1; i < xs.nd; i++) g->inner *= xs.d[i];
  }
  g->x = sk_data(x);
  g->y = sk_mdata(y);
  g->idx = sk_data(it);
  g->idx64 = TF_TensorType(it) == TF_INT64;
  g->es = TF_DataTypeSize(TF_TensorType(x));
  a->ishape = is;
  sk_work(l, gather_run, "GatherV2");
}

static void* gather_create(TF_OpKernelConstruction* c) {
  gather_state* gs = sk_state_new(c, sizeof(*gs));
  if (gs == NULL) return NULL;
  if (!sk_attr_int(c, "batch_dims", &gs->batch_dims)) {
    free(gs);
    return NULL;
  }
  return sk_kernel_new(c, gather_compute, gs, free);
}

/* ---- OneHot -----------------------------------------------------------------
 */

typedef struct onehot_args {
  const void* idx;
  TF_DataType it;
  const char* on;
  const char* off;
  char* y;
  size_t es;
  int64_t prefix, depth, suffix; /* y: [prefix, depth, suffix] */
} onehot_args;

static int64_t onehot_index(const onehot_args* a, int64_t i) {
  if (a->it == TF_UINT8) return ((const uint8_t*)a->idx)[i];
  return sk_index(a->it, a->idx, i);
}

static void onehot_rows(void* arg, int64_t b, int64_t e) {
  const onehot_args* a = arg;
  for (int64_t r = b; r < e; r++) { /* r over [prefix, depth] */
    int64_t p = r / a->depth, d = r % a->depth;
    char* y = a->y + (size_t)(r * a->suffix) * a->es;
    for (int64_t s = 0; s < a->suffix; s++)
      memcpy(y + (size_t)s * a->es,
             onehot_index(a, p * a->suffix + s) == d ? a->on : a->off, a->es);
  }
}

static void onehot_run(sk_launch* l, void* args) {
  (void)l;
  onehot_args* a = args;
  int64_t grain = SKA_GRAIN / (a->suffix > 0 ? a->suffix : 1);
  sim_parallel_for(a->prefix * a->depth, grain > 0 ? grain : 1, onehot_rows, a);
}

typedef struct onehot_state {
  int64_t axis;
} onehot_state;

static void onehot_compute(sk_launch* l, void* state) {
  const onehot_state* hs = state;
  TF_Tensor* it = sk_input(l, 0);
  TF_Tensor* dt = sk_input(l, 1);
  TF_Tensor* on = sk_input(l, 2);
  TF_Tensor* off = sk_input(l, 3);
  sk_shape is, ds, ons, offs, os;
  char b[256];
  if (it == NULL || dt == NULL || on == NULL || off == NULL ||
      !sk_shape_of(l, it, &is) || !sk_shape_of(l, dt, &ds) ||
      !sk_shape_of(l, on, &ons) || !sk_shape_of(l, off, &offs))
    return;
  int out_rank = is.nd + 1;
  if (hs->axis != -1 && (hs->axis < 0 || hs->axis >= out_rank)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected axis to be -1 or between [0, %d).  But received: %lld",
            out_rank, (long long)hs->axis);
    return;
  }
  if (ds.nd != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT, "depth must be a scalar, but got: %s",
            sk_shape_str(&ds, b, sizeof(b)));
    return;
  }
  if (ons.nd != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT, "on_value must be a scalar, but got: %s",
            sk_shape_str(&ons, b, sizeof(b)));
    return;
  }
  if (offs.nd != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT, "off_value must be a scalar, but got: %s",
            sk_shape_str(&offs, b, sizeof(b)));
    return;
  }
  int64_t depth = sk_index_at(dt, 0);
  if (depth < 0) {
    sk_fail(l, TF_INVALID_ARGUMENT, "depth must be non-negative, got: %lld",
            (long long)depth);
    return;
  }
  if (!sk_rank_ok(l, out_rank, "the output of OneHot")) return;
  int axis = hs->axis == -1 ? is.nd : (int)hs->axis;
  os.nd = out_rank;
  for (int i = 0, j = 0; i < out_rank; i++)
    os.d[i] = i == axis ? depth : is.d[j++];
  if (!sk_shape_count(l, &os)) return;
  TF_Tensor* y = sk_output(l, 0, &os);
  onehot_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os.n == 0) return;
  /* The output has an element, so products of its dims fit int64 (those of
   * an empty one need not: [0, 3, 2**62, 2]). */
  int64_t prefix = 1, suffix = 1;
  for (int i = 0; i < out_rank; i++)
    if (i < axis)
      prefix *= os.d[i];
    else if (i > axis)
      suffix *= os.d[i];
  a->idx = sk_data(it);
  a->it = TF_TensorType(it);
  a->on = sk_data(on);
  a->off = sk_data(off);
  a->y = sk_mdata(y);
  a->es = TF_DataTypeSize(TF_TensorType(y));
  a->prefix = prefix;
  a->depth = depth;
  a->suffix = suffix;
  sk_work(l, onehot_run, "OneHot");
}

static void* onehot_create(TF_OpKernelConstruction* c) {
  onehot_state* hs = sk_state_new(c, sizeof(*hs));
  if (hs == NULL) return NULL;
  if (!sk_attr_int(c, "axis", &hs->axis)) {
    free(hs);
    return NULL;
  }
  return sk_kernel_new(c, onehot_compute, hs, free);
}

/* ---- ArgMax, ArgMin
 * ---------------------------------------------------------- */

static inline float half_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, m = h & 0x3ff;
  int e = (h >> 10) & 0x1f;
  uint32_t u;
  if (e == 0x1f) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e == 0) {
    float f = ldexpf((float)m, -24); /* denormal or zero */
    return sign ? -f : f;
  } else {
    u = sign | (uint32_t)(e + 112) << 23 | m << 13;
  }
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

static inline double load_as_double(TF_DataType t, const void* p, int64_t i) {
  switch (t) {
    case TF_FLOAT: return ((const float*)p)[i];
    case TF_DOUBLE: return ((const double*)p)[i];
    case TF_HALF: return half_f32(((const uint16_t*)p)[i]);
    case TF_BFLOAT16: {
      uint32_t u = (uint32_t)((const uint16_t*)p)[i] << 16;
      float f;
      memcpy(&f, &u, sizeof(f));
      return f;
    }
    default: return 0; /* integers: compared as int64 */
  }
}

typedef struct arg_args {
  const void* x;
  void* y;
  TF_DataType t, ot;
  bool min;
  int64_t outer, n, inner;
} arg_args;

static void arg_elems(void* arg, int64_t b, int64_t e) {
  const arg_args* a = arg;
  bool isint = a->t == TF_INT64;
  double lim = a->t == TF_DOUBLE     ? DBL_MAX
               : a->t == TF_HALF     ? 65504.0
               : a->t == TF_BFLOAT16 ? 3.3895313892515355e38 /* its max */
                                     : FLT_MAX;
  for (int64_t o = b; o < e; o++) { /* o over [outer, inner] */
    int64_t base = o / a->inner * a->n * a->inner + o % a->inner, best = 0;
    if (isint) {
      const int64_t* x = a->x;
      int64_t v = a->min ? INT64_MAX : INT64_MIN;
      for (int64_t j = 0; j < a->n; j++) {
        int64_t c = x[base + j * a->inner];
        if (a->min ? c < v : c > v) v = c, best = j;
      }
    } else {
      double v = a->min ? lim : -lim;
      for (int64_t j = 0; j < a->n; j++) {
        double c = load_as_double(a->t, a->x, base + j * a->inner);
        if (a->min ? c < v : c > v) v = c, best = j;
      }
    }
    if (a->ot == TF_INT32)
      ((int32_t*)a->y)[o] = (int32_t)best;
    else
      ((int64_t*)a->y)[o] = best;
  }
}

static void arg_run(sk_launch* l, void* args) {
  (void)l;
  arg_args* a = args;
  int64_t grain = SKA_GRAIN / (a->n > 0 ? a->n : 1);
  sim_parallel_for(a->outer * a->inner, grain > 0 ? grain : 1, arg_elems, a);
}

static void arg_compute(sk_launch* l, bool min) {
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* dt = sk_input(l, 1);
  sk_shape xs, ds, os;
  char b[256];
  if (x == NULL || dt == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, dt, &ds))
    return;
  if (ds.nd != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "dim must be a scalar, but received tensor of shape: %s",
            sk_shape_str(&ds, b, sizeof(b)));
    return;
  }
  int64_t dim = sk_index_at(dt, 0);
  if (dim < -xs.nd || dim >= xs.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected dimension in the range [%d, %d), but got %lld", -xs.nd,
            xs.nd, (long long)dim);
    return;
  }
  int axis = (int)(dim < 0 ? dim + xs.nd : dim);
  if (xs.d[axis] == 0) {
    sk_fail(l, TF_INVALID_ARGUMENT, "Reduction axis %lld is empty in shape %s",
            (long long)dim, sk_shape_str(&xs, b, sizeof(b)));
    return;
  }
  os.nd = 0;
  for (int i = 0; i < xs.nd; i++)
    if (i != axis) os.d[os.nd++] = xs.d[i];
  if (!sk_shape_count(l, &os)) return;
  TF_Tensor* y = sk_output(l, 0, &os);
  arg_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os.n == 0) return;
  /* x has an element (its axis is not empty, the output has one), so these
   * products fit int64; an empty x's need not ([0, 5, 2**62, 4]). */
  int64_t outer = 1, inner = 1, n = xs.d[axis];
  for (int i = 0; i < xs.nd; i++)
    if (i < axis)
      outer *= xs.d[i];
    else if (i > axis)
      inner *= xs.d[i];
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->t = TF_TensorType(x);
  a->ot = TF_TensorType(y);
  a->min = min;
  a->outer = outer;
  a->n = n;
  a->inner = inner;
  sk_work(l, arg_run, min ? "ArgMin" : "ArgMax");
}

static int argmin_marker;
static void argmaxmin_compute(sk_launch* l, void* state) {
  arg_compute(l, state == &argmin_marker);
}
static void* argmax_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, argmaxmin_compute, NULL, NULL);
}
static void* argmin_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, argmaxmin_compute, &argmin_marker, NULL);
}

/* ---- UnsortedSegmentSum
 * ------------------------------------------------------- */

typedef struct segsum_args {
  const void* x;
  void* y;
  const void* ids;
  TF_DataType t, idt;
  int64_t rows, inner, segs;
} segsum_args;

static void segsum_cols(void* arg, int64_t b, int64_t e) {
  const segsum_args* a = arg;
  for (int64_t r = 0; r < a->rows; r++) {
    int64_t s = sk_index(a->idt, a->ids, r);
    if (s < 0) continue; /* dropped, as TF does */
    int64_t xo = r * a->inner, yo = s * a->inner;
    if (a->t == TF_FLOAT) {
      const float* x = a->x;
      float* y = a->y;
      for (int64_t c = b; c < e; c++) y[yo + c] += x[xo + c];
    } else if (a->t == TF_DOUBLE) {
      const double* x = a->x;
      double* y = a->y;
      for (int64_t c = b; c < e; c++) y[yo + c] += x[xo + c];
    } else {
      const int64_t* x = a->x;
      uint64_t* y = a->y; /* wraps like TF's two's complement adds */
      for (int64_t c = b; c < e; c++) y[yo + c] += (uint64_t)x[xo + c];
    }
  }
}

static void segsum_run(sk_launch* l, void* args) {
  segsum_args* a = args;
  size_t es = TF_DataTypeSize(a->t);
  for (int64_t r = 0; r < a->rows; r++) {
    int64_t s = sk_index(a->idt, a->ids, r);
    if (s >= a->segs) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "segment_ids[%lld] = %lld is out of range [0, %lld)",
              (long long)r, (long long)s, (long long)a->segs);
      return;
    }
  }
  memset(a->y, 0, (size_t)(a->segs * a->inner) * es);
  int64_t grain = SKA_GRAIN / (a->rows > 0 ? a->rows : 1);
  sim_parallel_for(a->inner, grain > 0 ? grain : 1, segsum_cols, a);
}

static void segsum_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* ids = sk_input(l, 1);
  TF_Tensor* nt = sk_input(l, 2);
  sk_shape xs, is, ns, os;
  char b1[256], b2[256];
  if (x == NULL || ids == NULL || nt == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, ids, &is) || !sk_shape_of(l, nt, &ns))
    return;
  if (ns.nd != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "num_segments should be a scalar, not shape %s",
            sk_shape_str(&ns, b1, sizeof(b1)));
    return;
  }
  bool starts = is.nd <= xs.nd;
  for (int i = 0; starts && i < is.nd; i++) starts = is.d[i] == xs.d[i];
  if (!starts) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "data.shape = %s does not start with segment_ids.shape = %s",
            sk_shape_str(&xs, b1, sizeof(b1)),
            sk_shape_str(&is, b2, sizeof(b2)));
    return;
  }
  int64_t segs = sk_index_at(nt, 0);
  if (segs < 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Input num_segments == %lld must not be negative.",
            (long long)segs);
    return;
  }
  if (!sk_rank_ok(l, 1 + xs.nd - is.nd, "the output of UnsortedSegmentSum"))
    return;
  os.nd = 1 + xs.nd - is.nd;
  os.d[0] = segs;
  for (int i = is.nd; i < xs.nd; i++) os.d[1 + i - is.nd] = xs.d[i];
  if (!sk_shape_count(l, &os)) return;
  TF_Tensor* y = sk_output(l, 0, &os);
  segsum_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l)) return;
  a->rows = is.n;
  if (os.n == 0 && a->rows == 0) return;
  /* The row size, multiplied from the first dim: with an element in the
   * output its dims divide os.n; with one in segment_ids each partial
   * product is at most x's (which fit: x exists) or 0 after a 0. Either
   * way it fits; with neither (returned above) it need not: data
   * [0, 4, 2**61], num_segments 0. */
  int64_t inner = 1;
  for (int i = is.nd; i < xs.nd; i++) inner *= xs.d[i];
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->ids = sk_data(ids);
  a->t = TF_TensorType(x);
  a->idt = TF_TensorType(ids);
  a->inner = inner;
  a->segs = segs;
  sk_work(l, segsum_run, "UnsortedSegmentSum");
}

static void* segsum_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, segsum_compute, NULL, NULL);
}

/* ---- registration ---------------------------------------------------------
 */

static const TF_DataType kMoveTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF,  TF_BFLOAT16,  TF_INT64, TF_UINT8,
    TF_BOOL,  TF_INT8,   TF_INT16, TF_COMPLEX64, 0};
static const TF_DataType kIndexTypes[] = {TF_INT32, TF_INT64, 0};
static const TF_DataType kOneHotIndex[] = {TF_UINT8, TF_INT32, TF_INT64, 0};
static const TF_DataType kArgTypes[] = {TF_FLOAT,    TF_DOUBLE, TF_HALF,
                                        TF_BFLOAT16, TF_INT64,  0};
static const TF_DataType kSumTypes[] = {TF_FLOAT, TF_DOUBLE, TF_INT64, 0};

static const char* const kGatherHost[] = {"axis", NULL};
static const char* const kOneHotHost[] = {"depth", NULL};
static const char* const kArgHost[] = {"dimension", NULL};
static const char* const kSegHost[] = {"num_segments", NULL};

static const sk_op kOps[] = {
    {"GatherV2", gather_create, "Tparams", kMoveTypes, kGatherHost, "Tindices",
     kIndexTypes},
    {"OneHot", onehot_create, "T", kMoveTypes, kOneHotHost, "TI", kOneHotIndex},
    {"ArgMax", argmax_create, "T", kArgTypes, kArgHost, "output_type",
     kIndexTypes},
    {"ArgMin", argmin_create, "T", kArgTypes, kArgHost, "output_type",
     kIndexTypes},
    {"UnsortedSegmentSum", segsum_create, "T", kSumTypes, kSegHost, "Tindices",
     kIndexTypes},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_gather(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
