/*
 * pad.c - Pad, PadV2, MirrorPad and MirrorPadGrad.
 *
 * Pad/PadV2 fill the output with the constant (zero for Pad) and copy the
 * input into its interior with slice.c's strided copy engine: byte copies,
 * so one kernel serves every registered dtype. MirrorPad maps each output
 * index to an input index per dimension (REFLECT leaves the edge out,
 * SYMMETRIC repeats it), row by row. MirrorPadGrad sums, for each element
 * of its (smaller) output, the incoming gradient at each padded position
 * that MirrorPad copied it to: at most 3 per dimension (itself, one mirror
 * on each side, since a padding never exceeds the dimension), summed in
 * double in a fixed order, so the result does not depend on the split.
 *
 * paddings (and constant_values) live in host memory, as in TF's GPU
 * registrations, and are read on TF's thread. Thread contract as in sk.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/array/array.h"

/* What read_paddings checks beyond non-negative paddings (TF's messages
 * differ per op). */
enum { kPad, kReflect, kSymmetric, kGrad };

/* Reads paddings ([rank, 2]) for an input of shape in; TF's messages.
 * kind: kPad (any non-negative), kReflect (< dim), kSymmetric (<= dim),
 * kGrad (MirrorPadGrad: the caller checks against the output). */
static bool read_paddings(sk_launch* l, const TF_Tensor* pt, const sk_shape* in,
                          int kind, int64_t* before, int64_t* after) {
  sk_shape ps;
  char b1[256], b2[256];
  if (!sk_shape_of(l, pt, &ps)) return false;
  if (ps.nd != 2 || ps.d[1] != 2) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "paddings must be a matrix with 2 columns: %s",
            sk_shape_str(&ps, b1, sizeof(b1)));
    return false;
  }
  if (ps.d[0] != in->nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "The first dimension of paddings must be the rank of inputs%s, %s",
            sk_shape_str(&ps, b1, sizeof(b1)),
            sk_shape_str(in, b2, sizeof(b2)));
    return false;
  }
  for (int i = 0; i < in->nd; i++) {
    int64_t b = sk_index_at(pt, 2 * i), a = sk_index_at(pt, 2 * i + 1);
    if (b < 0 || a < 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              kind == kPad    ? "Paddings must be non-negative: %lld %lld"
              : kind == kGrad ? "Paddings must be non-negative: %lld, %lld"
                              : "paddings must be non-negative: %lld %lld",
              (long long)b, (long long)a);
      return false;
    }
    if (kind == kReflect && (b >= in->d[i] || a >= in->d[i])) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "paddings must be less than the dimension size: %lld, %lld not "
              "less than %lld",
              (long long)b, (long long)a, (long long)in->d[i]);
      return false;
    }
    if (kind == kSymmetric && (b > in->d[i] || a > in->d[i])) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "paddings must be no greater than the dimension size: %lld, "
              "%lld greater than %lld",
              (long long)b, (long long)a, (long long)in->d[i]);
      return false;
    }
    before[i] = b;
    after[i] = a;
  }
  return true;
}

/* ---- Pad, PadV2 ------------------------------------------------------------
 */

typedef struct pad_args {
  ska_strided s;
  char value[16];
  int64_t n; /* output elements */
} pad_args;

static void pad_fill(void* arg, int64_t b, int64_t e) {
  const pad_args* a = arg;
  ska_fill_elems(a->s.y + (size_t)b * a->s.es, e - b, a->s.es, a->value);
}

static void pad_run(sk_launch* l, void* args) {
  (void)l;
  pad_args* a = args;
  sim_parallel_for(a->n, SKA_GRAIN, pad_fill, a);
  ska_strided_copy(&a->s);
}

static void pad_compute(sk_launch* l, void* state) {
  bool v2 = state != NULL;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* pt = sk_input(l, 1);
  TF_Tensor* cv = v2 ? sk_input(l, 2) : NULL;
  sk_shape xs, os, cs;
  int64_t before[SK_MAX_DIMS], after[SK_MAX_DIMS];
  char b1[256];
  if (x == NULL || pt == NULL || (v2 && cv == NULL) || !sk_shape_of(l, x, &xs))
    return;
  if (v2) {
    if (!sk_shape_of(l, cv, &cs)) return;
    if (cs.nd != 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "constant_values must be a scalar. Found: %s",
              sk_shape_str(&cs, b1, sizeof(b1)));
      return;
    }
  }
  if (!read_paddings(l, pt, &xs, kPad, before, after)) return;
  os.nd = xs.nd;
  for (int i = 0; i < xs.nd; i++)
    if (!sk_size_add(l, xs.d[i], before[i], &os.d[i], "Pad output dimension") ||
        !sk_size_add(l, os.d[i], after[i], &os.d[i], "Pad output dimension"))
      return;
  if (!sk_shape_count(l, &os)) return;
  bool nopad = true;
  for (int i = 0; i < xs.nd; i++) nopad &= before[i] == 0 && after[i] == 0;
  if (nopad) { /* TF forwards the input */
    sk_output_alias(l, 0, x, TF_TensorType(x), &xs);
    return;
  }
  TF_Tensor* y = sk_output(l, 0, &os);
  pad_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os.n == 0) return;
  size_t es = TF_DataTypeSize(TF_TensorType(x));
  if (v2) memcpy(a->value, sk_data(cv), es);
  int64_t xst[SK_MAX_DIMS], ost[SK_MAX_DIMS];
  sk_strides(&xs, xst);
  sk_strides(&os, ost);
  a->s.x = sk_data(x);
  a->s.y = sk_mdata(y);
  a->s.es = es;
  a->s.nd = xs.nd;
  a->n = os.n;
  for (int i = 0; i < xs.nd; i++) {
    a->s.d[i] = xs.d[i];
    a->s.xst[i] = xst[i];
    a->s.yst[i] = ost[i];
    a->s.yoff += before[i] * ost[i];
  }
  sk_work(l, pad_run, v2 ? "PadV2" : "Pad");
}

static int pad_v2_marker;
static void* pad_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, pad_compute, NULL, NULL);
}
static void* pad_v2_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, pad_compute, &pad_v2_marker, NULL);
}

/* ---- MirrorPad, MirrorPadGrad ----------------------------------------------
 */

typedef struct mirror_state {
  int off; /* 1: REFLECT (edge not repeated), 0: SYMMETRIC */
} mirror_state;

/* The input index MirrorPad copies to padded index j - before. */
static inline int64_t mirror(int64_t j, int64_t d, int off) {
  if (j < 0) return -j - 1 + off;
  if (j >= d) return 2 * d - 1 - off - j;
  return j;
}

typedef struct mirror_args {
  const char* x;
  char* y;
  size_t es;
  int nd, off;
  int64_t xd[SK_MAX_DIMS], yd[SK_MAX_DIMS], before[SK_MAX_DIMS];
  int64_t xst[SK_MAX_DIMS];
  TF_DataType dt; /* MirrorPadGrad */
} mirror_args;

/* Output rows [b, e) of MirrorPad. */
static void mirror_rows(void* arg, int64_t b, int64_t e) {
  const mirror_args* a = arg;
  int L = a->nd - 1;
  int64_t w = a->yd[L], bl = a->before[L], dl = a->xd[L];
  for (int64_t r = b; r < e; r++) {
    int64_t rem = r, xo = 0;
    for (int i = L - 1; i >= 0; i--) {
      int64_t v = rem % a->yd[i];
      rem /= a->yd[i];
      xo += mirror(v - a->before[i], a->xd[i], a->off) * a->xst[i];
    }
    char* y = a->y + (size_t)(r * w) * a->es;
    const char* x = a->x + (size_t)xo * a->es;
    for (int64_t j = 0; j < w; j++)
      memcpy(y + (size_t)j * a->es,
             x + (size_t)mirror(j - bl, dl, a->off) * a->es, a->es);
  }
}

static void mirror_run(sk_launch* l, void* args) {
  (void)l;
  mirror_args* a = args;
  int64_t rows = 1;
  for (int i = 0; i < a->nd - 1; i++) rows *= a->yd[i];
  int64_t w = a->yd[a->nd - 1], grain = SKA_GRAIN / (w > 0 ? w : 1);
  sim_parallel_for(rows, grain > 0 ? grain : 1, mirror_rows, a);
}

/* The padded indices (of a dimension padded by `before`, input size d,
 * padded size pd) that MirrorPad fills from input index j; returns how many
 * (1 to 3), in increasing order. */
static int preimages(int64_t j, int64_t d, int64_t before, int64_t pd, int off,
                     int64_t* p) {
  int n = 0;
  int64_t left = before - j - 1 + off;          /* padded index, left mirror */
  int64_t right = before + 2 * d - 1 - off - j; /* right mirror */
  if (left >= 0 && left < before) p[n++] = left;
  p[n++] = j + before;
  if (right >= before + d && right < pd) p[n++] = right;
  return n;
}

/* Output elements [b, e) of MirrorPadGrad: here x is the padded gradient
 * (shape yd... is the op's input, xd the output), summed over preimages. */
static void mirror_grad_elems(void* arg, int64_t b, int64_t e) {
  const mirror_args* a = arg;
  for (int64_t o = b; o < e; o++) {
    int64_t pre[SK_MAX_DIMS][3], idx[SK_MAX_DIMS];
    int cnt[SK_MAX_DIMS], pos[SK_MAX_DIMS];
    int64_t rem = o;
    for (int i = a->nd - 1; i >= 0; i--) {
      idx[i] = rem % a->xd[i];
      rem /= a->xd[i];
      cnt[i] =
          preimages(idx[i], a->xd[i], a->before[i], a->yd[i], a->off, pre[i]);
      pos[i] = 0;
    }
    double sum = 0;
    for (;;) {
      int64_t off = 0;
      for (int i = 0; i < a->nd; i++) off += pre[i][pos[i]] * a->xst[i];
      sum += a->dt == TF_FLOAT ? (double)((const float*)a->x)[off]
                               : ((const double*)a->x)[off];
      int i = a->nd - 1;
      for (; i >= 0; i--) {
        if (++pos[i] < cnt[i]) break;
        pos[i] = 0;
      }
      if (i < 0) break;
    }
    if (a->dt == TF_FLOAT)
      ((float*)a->y)[o] = (float)sum;
    else
      ((double*)a->y)[o] = sum;
  }
}

static void mirror_grad_run(sk_launch* l, void* args) {
  (void)l;
  mirror_args* a = args;
  int64_t n = 1;
  for (int i = 0; i < a->nd; i++) n *= a->xd[i];
  if (a->nd == 0) { /* a scalar: nothing is padded */
    memcpy(a->y, a->x, a->es);
    return;
  }
  sim_parallel_for(n, SKA_GRAIN / 8, mirror_grad_elems, a);
}

static void mirror_compute(sk_launch* l, void* state, bool grad) {
  const mirror_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* pt = sk_input(l, 1);
  sk_shape xs, os;
  int64_t before[SK_MAX_DIMS], after[SK_MAX_DIMS];
  if (x == NULL || pt == NULL || !sk_shape_of(l, x, &xs)) return;
  if (!read_paddings(l, pt, &xs,
                     grad      ? kGrad
                     : st->off ? kReflect
                               : kSymmetric,
                     before, after))
    return;
  os.nd = xs.nd;
  for (int i = 0; i < xs.nd; i++) {
    if (!grad) {
      if (!sk_size_add(l, xs.d[i], before[i], &os.d[i], "MirrorPad output") ||
          !sk_size_add(l, os.d[i], after[i], &os.d[i], "MirrorPad output"))
        return;
      continue;
    }
    /* MirrorPadGrad: the forward op's limits, on its output (the unpadded
     * shape), with TF CPU's messages. read_paddings made b, a >= 0; their
     * sum is checked (b = a = 2**62 + 1 wrapped to a negative total that
     * passed the test below and made o = INT64_MAX), so any dim that gets
     * past them has 0 <= total < xs.d[i], hence 0 < o <= xs.d[i]. */
    int64_t b = before[i], a = after[i], total;
    if (!sk_size_add(l, b, a, &total, "MirrorPadGrad total paddings")) return;
    int64_t o = xs.d[i] - total;
    if (total >= xs.d[i]) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Total paddings must be less than the input dimension size: "
              "%lld was not less than %lld",
              (long long)total, (long long)xs.d[i]);
      return;
    }
    if (st->off && (b >= o || a >= o)) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "paddings must be less than the output dimension size: %lld, "
              "%lld not less than %lld",
              (long long)b, (long long)a, (long long)o);
      return;
    }
    if (!st->off && (b > o || a > o)) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "paddings must be no greater than the output dimension size: "
              "%lld, %lld greater than %lld",
              (long long)b, (long long)a, (long long)o);
      return;
    }
    os.d[i] = o;
  }
  if (!sk_shape_count(l, &os)) return;
  TF_Tensor* y = sk_output(l, 0, &os);
  mirror_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || os.n == 0) return;
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->dt = TF_TensorType(x);
  a->es = TF_DataTypeSize(a->dt);
  a->nd = xs.nd;
  a->off = st->off;
  /* xd: the unpadded shape, yd: the padded one, xst: strides of whichever
   * of the two is the op's input. */
  const sk_shape* padded = grad ? &xs : &os;
  const sk_shape* plain = grad ? &os : &xs;
  sk_strides(grad ? padded : plain, a->xst);
  for (int i = 0; i < xs.nd; i++) {
    a->xd[i] = plain->d[i];
    a->yd[i] = padded->d[i];
    a->before[i] = before[i];
  }
  /* MirrorPad of a scalar never gets here (mirror_pad_compute). */
  sk_work(l, grad ? mirror_grad_run : mirror_run,
          grad ? "MirrorPadGrad" : "MirrorPad");
}

static void mirror_pad_compute(sk_launch* l, void* state) {
  TF_Tensor* x = sk_input(l, 0);
  if (x != NULL && TF_NumDims(x) == 0) { /* a scalar: nothing to pad */
    sk_shape s;
    TF_Tensor* pt = sk_input(l, 1);
    int64_t b[1], a[1];
    if (pt != NULL && sk_shape_of(l, x, &s) &&
        read_paddings(l, pt, &s, kPad, b, a))
      sk_output_alias(l, 0, x, TF_TensorType(x), &s);
    return;
  }
  mirror_compute(l, state, false);
}
static void mirror_pad_grad_compute(sk_launch* l, void* state) {
  mirror_compute(l, state, true);
}

static void* mirror_create_with(TF_OpKernelConstruction* c, sk_compute_fn fn) {
  char mode[32];
  if (!sk_attr_string(c, "mode", mode, sizeof(mode))) return NULL;
  int off;
  if (strcmp(mode, "REFLECT") == 0) {
    off = 1;
  } else if (strcmp(mode, "SYMMETRIC") == 0) {
    off = 0;
  } else {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "mode must be either REFLECT "
                         "or SYMMETRIC, not %s",
                         mode);
    return NULL;
  }
  mirror_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->off = off;
  return sk_kernel_new(c, fn, st, free);
}
static void* mirror_pad_create(TF_OpKernelConstruction* c) {
  return mirror_create_with(c, mirror_pad_compute);
}
static void* mirror_pad_grad_create(TF_OpKernelConstruction* c) {
  return mirror_create_with(c, mirror_pad_grad_compute);
}

/* ---- registration ---------------------------------------------------------
 */

static const TF_DataType kPadTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF,  TF_BFLOAT16,  TF_INT64, TF_UINT8,
    TF_BOOL,  TF_INT8,   TF_INT16, TF_COMPLEX64, 0};
static const TF_DataType kInt32[] = {TF_INT32, 0};
/* MirrorPadGrad adds: float32 and float64 only (left out: half, bfloat16). */
static const TF_DataType kGradTypes[] = {TF_FLOAT, TF_DOUBLE, 0};

static const char* const kPadHost[] = {"paddings", NULL};
static const char* const kPadHost32[] = {"input", "paddings", "output", NULL};
static const char* const kPadV2Host[] = {"paddings", "constant_values", NULL};
static const char* const kPadV2Host32[] = {"input", "paddings",
                                           "constant_values", "output", NULL};

static const sk_op kOps[] = {
    {"Pad", pad_create, "T", kPadTypes, kPadHost},
    {"Pad", pad_create, "T", kInt32, kPadHost32},
    {"PadV2", pad_v2_create, "T", kPadTypes, kPadV2Host},
    {"PadV2", pad_v2_create, "T", kInt32, kPadV2Host32},
    {"MirrorPad", mirror_pad_create, "T", kPadTypes, kPadHost},
    {"MirrorPadGrad", mirror_pad_grad_create, "T", kGradTypes, kPadHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_pad(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
