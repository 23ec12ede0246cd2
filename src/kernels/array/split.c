/*
 * split.c - Split, SplitV and Unpack: one input cut along one dimension
 * into several outputs (RNN and LSTM layers use them every step).
 *
 * The input is viewed as [outer, W] with W = (size along the dimension) *
 * inner; output i is the column band [c_i, c_i + w_i) of it, copied with
 * slice.c's strided copy engine (byte copies, every dtype). A single output
 * covering the whole input aliases it, as TF forwards it. split_dim and
 * size_splits live in host memory. Thread contract as in sk.h.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/array/array.h"

typedef struct split_args {
  int count;
  ska_strided* s; /* per output */
} split_args;

static void split_run(sk_launch* l, void* args) {
  (void)l;
  split_args* a = args;
  for (int i = 0; i < a->count; i++) ska_strided_copy(&a->s[i]);
}

/* Cuts x (shape xs) along `axis` into `count` outputs of sizes[i] along it;
 * `drop` removes the dimension from the outputs (Unpack). */
static void split_launch(sk_launch* l, TF_Tensor* x, const sk_shape* xs,
                         int axis, int count, const int64_t* sizes, bool drop,
                         const char* label) {
  /* Only non-empty outputs use them, and then they fit int64; an empty x's
   * dims need not multiply within int64 ([0, 2**62, 4]). */
  int64_t outer = xs->n == 0 ? 0 : 1, inner = outer;
  for (int i = 0; i < axis && outer != 0; i++) outer *= xs->d[i];
  for (int i = axis + 1; i < xs->nd && inner != 0; i++) inner *= xs->d[i];
  int64_t W = xs->d[axis] * inner;
  size_t es = TF_DataTypeSize(TF_TensorType(x));
  split_args* a = sk_args(l, sizeof(*a) + (size_t)count * sizeof(ska_strided));
  if (a == NULL) return;
  a->s = (ska_strided*)(a + 1);
  int64_t c = 0;
  for (int k = 0; k < count; k++) {
    sk_shape os = *xs;
    if (drop) {
      for (int i = axis; i < xs->nd - 1; i++) os.d[i] = xs->d[i + 1];
      os.nd--;
    } else {
      os.d[axis] = sizes[k];
    }
    if (!sk_shape_count(l, &os)) return;
    if (count == 1 && os.n == xs->n) {
      sk_output_alias(l, k, x, TF_TensorType(x), &os);
      return;
    }
    TF_Tensor* y = sk_output(l, k, &os);
    if (!sk_ok(l)) return;
    int64_t w = sizes[k] * inner;
    ska_strided* s = &a->s[a->count];
    if (os.n > 0) {
      s->x = sk_data(x);
      s->y = sk_mdata(y);
      s->es = es;
      s->nd = 2;
      s->d[0] = outer;
      s->d[1] = w;
      s->xst[0] = W;
      s->xst[1] = 1;
      s->yst[0] = w;
      s->yst[1] = 1;
      s->xoff = c;
      a->count++;
    }
    c += w;
  }
  if (a->count > 0) sk_work(l, split_run, label);
}

/* split_dim (a host scalar) wrapped into [0, rank); TF's message. */
static bool split_axis(sk_launch* l, const TF_Tensor* t, int rank, int* axis) {
  /* The count first: an empty split_dim (unknown shape in a graph) has no
   * element to read. */
  bool one = TF_TensorElementCount(t) == 1;
  int64_t d = one ? sk_index_at(t, 0) : 0;
  if (!one || d < -rank || d >= rank) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "-input rank(-%d) <= split_dim < input rank (%d), but got %lld",
            rank, rank, (long long)d);
    return false;
  }
  *axis = (int)(d < 0 ? d + rank : d);
  return true;
}

static void split_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* dt = sk_input(l, 0);
  TF_Tensor* x = sk_input(l, 1);
  sk_shape xs;
  int axis, count = TF_NumOutputs(sk_context(l));
  if (dt == NULL || x == NULL || !sk_shape_of(l, x, &xs) ||
      !split_axis(l, dt, xs.nd, &axis))
    return;
  if (xs.d[axis] % count != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Number of ways to split should evenly divide the split dimension, "
            "but got split_dim %d (size = %lld) and num_split %d",
            axis, (long long)xs.d[axis], count);
    return;
  }
  int64_t* sizes = malloc((size_t)count * sizeof(*sizes));
  if (sizes == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    return;
  }
  for (int i = 0; i < count; i++) sizes[i] = xs.d[axis] / count;
  split_launch(l, x, &xs, axis, count, sizes, false, "Split");
  free(sizes);
}

static void split_v_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* st = sk_input(l, 1);
  TF_Tensor* dt = sk_input(l, 2);
  sk_shape xs;
  int axis, count = TF_NumOutputs(sk_context(l));
  if (x == NULL || st == NULL || dt == NULL || !sk_shape_of(l, x, &xs) ||
      !split_axis(l, dt, xs.nd, &axis))
    return;
  if (TF_NumDims(st) != 1 || TF_TensorElementCount(st) != count) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Length of size_splits should be equal to the value of num_split: "
            "%lld != %d",
            (long long)TF_TensorElementCount(st), count);
    return;
  }
  int64_t* sizes = malloc((size_t)count * sizeof(*sizes));
  if (sizes == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    return;
  }
  int neg = -1;
  int64_t sum = 0;
  for (int i = 0; i < count; i++) {
    sizes[i] = sk_index_at(st, i);
    if (sizes[i] == -1) {
      if (neg >= 0) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "There can only be one -1 in the input.");
        goto out;
      }
      neg = i;
    } else if (sizes[i] < 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Split size at index %d must be >= 0. Got: %lld", i,
              (long long)sizes[i]);
      goto out;
    } else if (!sk_size_add(l, sum, sizes[i], &sum, "SplitV size_splits")) {
      goto out; /* TF CPU: InvalidArgument too (its sum wraps) */
    }
  }
  int64_t d = xs.d[axis];
  if ((neg < 0 && sum != d) || (neg >= 0 && sum > d)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Determined shape must either match input shape along split_dim "
            "exactly if fully specified, or be less than the size of the "
            "input along split_dim if not fully specified.  Got: %lld",
            (long long)sum);
    goto out;
  }
  if (neg >= 0) sizes[neg] = d - sum;
  split_launch(l, x, &xs, axis, count, sizes, false, "SplitV");
out:
  free(sizes);
}

typedef struct unpack_state {
  int64_t axis;
} unpack_state;

static void unpack_compute(sk_launch* l, void* state) {
  const unpack_state* us = state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape xs;
  char b[256];
  int count = TF_NumOutputs(sk_context(l));
  if (x == NULL || !sk_shape_of(l, x, &xs)) return;
  int64_t axis = us->axis < 0 ? us->axis + xs.nd : us->axis;
  if (axis < 0 || axis >= xs.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT, "axis = %lld not in [%d, %d)",
            (long long)us->axis, -xs.nd, xs.nd);
    return;
  }
  if (xs.d[axis] != count) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Input shape axis %lld must equal %d, got shape %s",
            (long long)axis, count, sk_shape_str(&xs, b, sizeof(b)));
    return;
  }
  if (count == 0) return;
  int64_t* sizes = malloc((size_t)count * sizeof(*sizes));
  if (sizes == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    return;
  }
  for (int i = 0; i < count; i++) sizes[i] = 1;
  split_launch(l, x, &xs, (int)axis, count, sizes, true, "Unpack");
  free(sizes);
}

static void* split_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, split_compute, NULL, NULL);
}
static void* split_v_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, split_v_compute, NULL, NULL);
}
static void* unpack_create(TF_OpKernelConstruction* c) {
  unpack_state* us = sk_state_new(c, sizeof(*us));
  if (us == NULL) return NULL;
  if (!sk_attr_int(c, "axis", &us->axis)) {
    free(us);
    return NULL;
  }
  return sk_kernel_new(c, unpack_compute, us, free);
}

/* ---- registration ---------------------------------------------------------
 */

static const TF_DataType kSplitTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF,  TF_BFLOAT16,  TF_INT64, TF_UINT8,
    TF_BOOL,  TF_INT8,   TF_INT16, TF_COMPLEX64, 0};
/* Unpack: no int64 (and no int32): TF 2.21 serves both with host-memory
 * DEVICE_DEFAULT kernels. */
static const TF_DataType kUnpackTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF,  TF_BFLOAT16,  TF_UINT8,
    TF_BOOL,  TF_INT8,   TF_INT16, TF_COMPLEX64, 0};
static const char* const kSplitHost[] = {"split_dim", NULL};
static const char* const kSplitVHost[] = {"size_splits", "split_dim", NULL};

static const sk_op kOps[] = {
    {"Split", split_create, "T", kSplitTypes, kSplitHost},
    {"SplitV", split_v_create, "T", kSplitTypes, kSplitVHost},
    {"Unpack", unpack_create, "T", kUnpackTypes, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_split(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
