/*
 * slice.c - Slice, StridedSlice and StridedSliceGrad, and the strided copy
 * engine of array.h that pad.c and split.c share.
 *
 * All three are one strided copy: Slice and StridedSlice read a box of the
 * input (StridedSlice with any non-zero strides, negative ones included)
 * into a dense output; StridedSliceGrad zeroes its output and writes dy into
 * the same box of it. begin/end/size/strides/shape live in host memory (as
 * in TF's GPU registrations) and are read on TF's thread.
 *
 * StridedSlice's mask handling follows TF's documented semantics: the
 * sparse spec (one entry per element of begin) becomes a dense one (one
 * entry per input dimension) by expanding the ellipsis - an implicit one at
 * the end if none is given - into full ranges; new_axis entries add a size-1
 * output dimension and consume no input dimension; shrink_axis entries take
 * one element and drop the dimension. Indices are then wrapped once (a
 * negative index counts from the end) and clamped to the valid range, which
 * for negative strides is [-1, dim - 1].
 *
 * Thread contract as in sk.h: compute functions on TF's thread, run and
 * range functions on the stream worker and its pool, touching only args.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/array/array.h"

/* ---- the strided copy engine -------------------------------------------- */

/* Drops size-1 dimensions and merges a dimension into its outer neighbour
 * when both sides are contiguous across them. */
static void strided_simplify(ska_strided* s) {
  int m = 0;
  for (int i = 0; i < s->nd; i++) {
    if (s->d[i] == 1) continue;
    if (m > 0 && s->xst[m - 1] == s->xst[i] * s->d[i] &&
        s->yst[m - 1] == s->yst[i] * s->d[i]) {
      s->d[m - 1] *= s->d[i];
      s->xst[m - 1] = s->xst[i];
      s->yst[m - 1] = s->yst[i];
      continue;
    }
    s->d[m] = s->d[i];
    s->xst[m] = s->xst[i];
    s->yst[m] = s->yst[i];
    m++;
  }
  if (m == 0) {
    s->d[0] = 1;
    s->xst[0] = s->yst[0] = 1;
    m = 1;
  }
  s->nd = m;
}

/* n elements from x (stride xs) to y (stride ys). */
static void copy_row(char* y, int64_t ys, const char* x, int64_t xs, int64_t n,
                     size_t es) {
  if (xs == 1 && ys == 1) {
    memcpy(y, x, (size_t)n * es);
    return;
  }
#define ROW_AS(T)                                                          \
  for (int64_t j = 0; j < n; j++) ((T*)y)[j * ys] = ((const T*)x)[j * xs]; \
  break
  switch (es) {
    case 1: ROW_AS(uint8_t);
    case 2: ROW_AS(uint16_t);
    case 4: ROW_AS(uint32_t);
    case 8: ROW_AS(uint64_t);
    default:
      for (int64_t j = 0; j < n; j++)
        memcpy(y + (size_t)(j * ys) * es, x + (size_t)(j * xs) * es, es);
      break;
  }
#undef ROW_AS
}

/* Rows [b, e) of the box (a row: the innermost dimension). */
static void strided_rows(void* arg, int64_t b, int64_t e) {
  const ska_strided* s = arg;
  int L = s->nd - 1;
  for (int64_t r = b; r < e; r++) {
    int64_t rem = r, xo = s->xoff, yo = s->yoff;
    for (int i = L - 1; i >= 0; i--) {
      int64_t v = rem % s->d[i];
      rem /= s->d[i];
      xo += v * s->xst[i];
      yo += v * s->yst[i];
    }
    copy_row(s->y + yo * (int64_t)s->es, s->yst[L], s->x + xo * (int64_t)s->es,
             s->xst[L], s->d[L], s->es);
  }
}

void ska_strided_copy(ska_strided* s) {
  int64_t n = 1;
  for (int i = 0; i < s->nd; i++) n *= s->d[i];
  if (n == 0) return;
  strided_simplify(s);
  int64_t inner = s->d[s->nd - 1], grain = SKA_GRAIN / inner;
  sim_parallel_for(n / inner, grain > 0 ? grain : 1, strided_rows, s);
}

void ska_fill_elems(char* y, int64_t n, size_t es, const void* v) {
  bool zero = true;
  for (size_t i = 0; i < es; i++) zero &= ((const uint8_t*)v)[i] == 0;
  if (zero) {
    memset(y, 0, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy(y + (size_t)i * es, v, es);
}

/* Row-major element strides of s. */
/* ---- Slice, StridedSlice: copy a box of x ------------------------------- */

typedef struct slice_args {
  ska_strided s;
  bool zero_first; /* StridedSliceGrad: zero y (n elements) first */
  int64_t n;
} slice_args;

static void slice_zero(void* arg, int64_t b, int64_t e) {
  const slice_args* a = arg;
  memset(a->s.y + (size_t)b * a->s.es, 0, (size_t)(e - b) * a->s.es);
}

static void slice_run(sk_launch* l, void* args) {
  (void)l;
  slice_args* a = args;
  if (a->zero_first) sim_parallel_for(a->n, SKA_GRAIN, slice_zero, a);
  ska_strided_copy(&a->s);
}

/* Output `os` = the box (begin, stride, count per dimension of xs) of x. */
static void slice_launch(sk_launch* l, TF_Tensor* x, const sk_shape* xs,
                         const int64_t* begin, const int64_t* stride,
                         const int64_t* count, const sk_shape* os,
                         const char* label) {
  bool identity = os->n == xs->n;
  for (int i = 0; i < xs->nd; i++)
    identity &= begin[i] == 0 && stride[i] == 1 && count[i] == xs->d[i];
  if (identity) { /* TF forwards the input */
    sk_output_alias(l, 0, x, TF_TensorType(x), os);
    return;
  }
  TF_Tensor* y = sk_output(l, 0, os);
  slice_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os->n == 0) return;
  int64_t st[SK_MAX_DIMS], ost[SK_MAX_DIMS];
  sk_shape box = {.nd = xs->nd};
  for (int i = 0; i < xs->nd; i++) box.d[i] = count[i];
  sk_strides(xs, st);
  sk_strides(&box, ost);
  a->s.x = sk_data(x);
  a->s.y = sk_mdata(y);
  a->s.es = TF_DataTypeSize(TF_TensorType(x));
  a->s.nd = xs->nd;
  for (int i = 0; i < xs->nd; i++) {
    a->s.d[i] = count[i];
    a->s.xst[i] = st[i] * stride[i];
    a->s.yst[i] = ost[i];
    a->s.xoff += begin[i] * st[i];
  }
  sk_work(l, slice_run, label);
}

static void slice_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* bt = sk_input(l, 1);
  TF_Tensor* zt = sk_input(l, 2);
  sk_shape xs, bs, zs, os;
  char b1[256], b2[256];
  if (x == NULL || bt == NULL || zt == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, bt, &bs) || !sk_shape_of(l, zt, &zs))
    return;
  if (bs.nd != 1 || zs.nd != 1 || bs.n != xs.nd || zs.n != xs.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected begin and size arguments to be 1-D tensors of size %d, "
            "but got shapes %s and %s instead.",
            xs.nd, sk_shape_str(&bs, b1, sizeof(b1)),
            sk_shape_str(&zs, b2, sizeof(b2)));
    return;
  }
  int64_t begin[SK_MAX_DIMS], size[SK_MAX_DIMS], one[SK_MAX_DIMS];
  os.nd = xs.nd;
  for (int i = 0; i < xs.nd; i++) {
    int64_t b = sk_index_at(bt, i), s = sk_index_at(zt, i), d = xs.d[i];
    if (s == -1) s = d - b;
    if (d == 0) {
      if (b != 0 || s != 0) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "Expected begin[%d] == 0 (got %lld) and size[%d] == 0 (got "
                "%lld) when input.dim_size(%d) == 0",
                i, (long long)b, i, (long long)s, i);
        return;
      }
    } else {
      if (b < 0 || b > d) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "Expected begin[%d] in [0, %lld], but got %lld", i,
                (long long)d, (long long)b);
        return;
      }
      if (s < 0 || s > d - b) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "Expected size[%d] in [0, %lld], but got %lld", i,
                (long long)(d - b), (long long)s);
        return;
      }
    }
    begin[i] = b;
    size[i] = os.d[i] = s;
    one[i] = 1;
  }
  if (!sk_shape_count(l, &os)) return; /* slice_launch reads os.n */
  slice_launch(l, x, &xs, begin, one, size, &os, "Slice");
}

/* ---- StridedSlice: the masks -------------------------------------------- */

typedef struct ss_state {
  int64_t begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask;
} ss_state;

/* The dense plan of a strided slice of an input of shape `in`. */
typedef struct ss_plan {
  int64_t begin[SK_MAX_DIMS], stride[SK_MAX_DIMS], count[SK_MAX_DIMS];
  sk_shape proc;  /* one dimension per input dimension */
  sk_shape final; /* the op's output shape */
} ss_plan;

enum { kShrink = -1, kNewAxis = -2 };

static bool ss_plan_make(sk_launch* l, const ss_state* st, const TF_Tensor* bt,
                         const TF_Tensor* et, const TF_Tensor* tt,
                         const sk_shape* in, ss_plan* p) {
  sk_shape bs, es, ts;
  char b1[256], b2[256], b3[256];
  if (!sk_shape_of(l, bt, &bs) || !sk_shape_of(l, et, &es) ||
      !sk_shape_of(l, tt, &ts))
    return false;
  if (bs.nd != 1 || es.nd != 1 || ts.nd != 1 || bs.n != ts.n || es.n != ts.n ||
      bs.n >= 32) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected begin, end, and strides to be 1D equal size tensors, "
            "but got shapes %s, %s, and %s instead.",
            sk_shape_str(&bs, b1, sizeof(b1)),
            sk_shape_str(&es, b2, sizeof(b2)),
            sk_shape_str(&ts, b3, sizeof(b3)));
    return false;
  }
  int64_t ell = st->ellipsis_mask;
  if (ell & (ell - 1)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Multiple ellipses in slice spec not allowed");
    return false;
  }
  int n = (int)ts.n, new_after = 0;
  bool seen = false;
  for (int i = 0; i < n; i++) {
    if (seen && (st->new_axis_mask >> i & 1)) new_after++;
    if (ell >> i & 1) seen = true;
  }
  if (!seen) ell |= 1ll << n++; /* the implicit ellipsis at the end */
  /* Sparse -> dense. gather[] names, per output dimension in order, the
   * dense dimension it comes from, or kShrink / kNewAxis. */
  int64_t dbeg[SK_MAX_DIMS] = {0}, dend[SK_MAX_DIMS] = {0};
  int64_t dstr[SK_MAX_DIMS] = {0};
  uint32_t bmask = 0, emask = 0, smask = 0;
  int gather[64], ng = 0, full = 0;
  for (int i = 0; i < n; i++) {
    if (ell >> i & 1) {
      int next = in->nd - (n - i) + 1 + new_after;
      if (next > in->nd) next = in->nd;
      for (; full < next; full++) {
        dstr[full] = 1;
        bmask |= 1u << full;
        emask |= 1u << full;
        gather[ng++] = full;
      }
    } else if (st->new_axis_mask >> i & 1) {
      gather[ng++] = kNewAxis;
    } else {
      if (full == in->nd) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "Index out of range using input dim %d; input has only %d "
                "dims",
                full, in->nd);
        return false;
      }
      dbeg[full] = sk_index_at(bt, i);
      dend[full] = sk_index_at(et, i);
      dstr[full] = sk_index_at(tt, i);
      if (st->begin_mask >> i & 1) bmask |= 1u << full;
      if (st->end_mask >> i & 1) emask |= 1u << full;
      if (st->shrink_mask >> i & 1) {
        gather[ng++] = kShrink;
        smask |= 1u << full;
      } else {
        gather[ng++] = full;
      }
      full++;
    }
  }
  /* Wrap, clamp and count per dense dimension. Dimensions the spec does
   * not reach (full < in->nd cannot happen: the ellipsis fills them). */
  p->proc.nd = in->nd;
  for (int i = 0; i < in->nd; i++) {
    int64_t s = dstr[i], d = in->d[i], b = dbeg[i], e = dend[i];
    if (s == 0) {
      sk_fail(l, TF_INVALID_ARGUMENT, "strides[%d] must be non-zero", i);
      return false;
    }
    bool shrink = smask >> i & 1;
    if (shrink && s <= 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "only stride 1 allowed on non-range indexing.");
      return false;
    }
    int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? d : d - 1;
    if (shrink) {
      b = b < 0 ? d + b : b;
      e = b + 1;
      if (b < 0 || b >= d) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "slice index %lld of dimension %d out of bounds.", (long long)b,
                i);
        return false;
      }
    } else {
      if (bmask >> i & 1) {
        b = s > 0 ? lo : hi;
      } else {
        b = b < 0 ? d + b : b;
        b = b < lo ? lo : b > hi ? hi : b;
      }
      if (emask >> i & 1) {
        e = s > 0 ? hi : lo;
      } else {
        e = e < 0 ? d + e : e;
        e = e < lo ? lo : e > hi ? hi : e;
      }
    }
    int64_t len = e - b, c;
    if (len == 0 || ((len < 0) != (s < 0)))
      c = 0;
    else
      c = len / s + (len % s != 0);
    p->begin[i] = b;
    p->stride[i] = s;
    p->count[i] = p->proc.d[i] = c;
  }
  if (!sk_shape_count(l, &p->proc)) return false;
  p->final.nd = 0;
  for (int k = 0; k < ng; k++) {
    if (gather[k] == kShrink) continue;
    if (!sk_rank_ok(l, p->final.nd + 1, "the output of StridedSlice"))
      return false;
    p->final.d[p->final.nd++] =
        gather[k] == kNewAxis ? 1 : p->proc.d[gather[k]];
  }
  return sk_shape_count(l, &p->final);
}

static void strided_slice_compute(sk_launch* l, void* state) {
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* bt = sk_input(l, 1);
  TF_Tensor* et = sk_input(l, 2);
  TF_Tensor* tt = sk_input(l, 3);
  sk_shape xs;
  ss_plan p;
  if (x == NULL || bt == NULL || et == NULL || tt == NULL ||
      !sk_shape_of(l, x, &xs) || !ss_plan_make(l, state, bt, et, tt, &xs, &p))
    return;
  slice_launch(l, x, &xs, p.begin, p.stride, p.count, &p.final, "StridedSlice");
}

static void strided_slice_grad_compute(sk_launch* l, void* state) {
  TF_Tensor* shp = sk_input(l, 0);
  TF_Tensor* bt = sk_input(l, 1);
  TF_Tensor* et = sk_input(l, 2);
  TF_Tensor* tt = sk_input(l, 3);
  TF_Tensor* dy = sk_input(l, 4);
  sk_shape ss, os, dys;
  ss_plan p;
  char b1[256], b2[256];
  if (shp == NULL || bt == NULL || et == NULL || tt == NULL || dy == NULL ||
      !sk_shape_of(l, shp, &ss) || !sk_shape_of(l, dy, &dys))
    return;
  if (ss.nd != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "shape must be 1-D, got shape %s",
            sk_shape_str(&ss, b1, sizeof(b1)));
    return;
  }
  if (!sk_shape_from_tensor(l, shp, NULL, &os) ||
      !ss_plan_make(l, state, bt, et, tt, &os, &p))
    return;
  if (!sk_shape_eq(&dys, &p.final)) {
    sk_fail(l, TF_INVALID_ARGUMENT, "shape of dy was %s instead of %s",
            sk_shape_str(&dys, b1, sizeof(b1)),
            sk_shape_str(&p.final, b2, sizeof(b2)));
    return;
  }
  TF_Tensor* y = sk_output(l, 0, &os);
  slice_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os.n == 0) return;
  int64_t st[SK_MAX_DIMS], pst[SK_MAX_DIMS];
  sk_strides(&os, st);
  sk_strides(&p.proc, pst); /* dy is the processing shape, reshaped */
  a->s.x = sk_data(dy);
  a->s.y = sk_mdata(y);
  a->s.es = TF_DataTypeSize(TF_TensorType(dy));
  a->s.nd = os.nd;
  a->zero_first = true;
  a->n = os.n;
  for (int i = 0; i < os.nd; i++) {
    a->s.d[i] = p.count[i];
    a->s.xst[i] = pst[i];
    a->s.yst[i] = st[i] * p.stride[i];
    a->s.yoff += p.begin[i] * st[i];
  }
  sk_work(l, slice_run, "StridedSliceGrad");
}

static void* slice_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, slice_compute, NULL, NULL);
}

static void* ss_create_with(TF_OpKernelConstruction* c, sk_compute_fn fn) {
  ss_state* s = sk_state_new(c, sizeof(*s));
  if (s == NULL) return NULL;
  if (!sk_attr_int(c, "begin_mask", &s->begin_mask) ||
      !sk_attr_int(c, "end_mask", &s->end_mask) ||
      !sk_attr_int(c, "ellipsis_mask", &s->ellipsis_mask) ||
      !sk_attr_int(c, "new_axis_mask", &s->new_axis_mask) ||
      !sk_attr_int(c, "shrink_axis_mask", &s->shrink_mask)) {
    free(s);
    return NULL;
  }
  return sk_kernel_new(c, fn, s, free);
}

static void* strided_slice_create(TF_OpKernelConstruction* c) {
  return ss_create_with(c, strided_slice_compute);
}
static void* strided_slice_grad_create(TF_OpKernelConstruction* c) {
  return ss_create_with(c, strided_slice_grad_compute);
}

/* ---- registration ---------------------------------------------------------
 */

/* Byte copies: every fixed-size type the family serves. No int32 for
 * Slice: TF 2.21 serves int32 Slice with a host-memory DEVICE_DEFAULT
 * kernel. */
static const TF_DataType kSliceTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF,  TF_BFLOAT16,  TF_INT64, TF_UINT8,
    TF_BOOL,  TF_INT8,   TF_INT16, TF_COMPLEX64, 0};
static const TF_DataType kInt32[] = {TF_INT32, 0};

static const char* const kSliceHost[] = {"begin", "size", NULL};
static const char* const kSSHost[] = {"begin", "end", "strides", NULL};
/* int32 data stays on the host, as in TF's GPU registrations. */
static const char* const kSSHost32[] = {"input",   "begin",  "end",
                                        "strides", "output", NULL};
static const char* const kSSGHost[] = {"shape", "begin", "end", "strides",
                                       NULL};
static const char* const kSSGHost32[] = {"shape", "begin",  "end", "strides",
                                         "dy",    "output", NULL};

static const sk_op kOps[] = {
    {"Slice", slice_create, "T", kSliceTypes, kSliceHost},
    {"StridedSlice", strided_slice_create, "T", kSliceTypes, kSSHost},
    {"StridedSlice", strided_slice_create, "T", kInt32, kSSHost32},
    {"StridedSliceGrad", strided_slice_grad_create, "T", kSliceTypes, kSSGHost},
    {"StridedSliceGrad", strided_slice_grad_create, "T", kInt32, kSSGHost32},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_slice(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
