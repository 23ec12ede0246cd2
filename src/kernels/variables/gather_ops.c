/*
 * gather_ops.c - ResourceGather and ResourceGatherNd on SIMDEV (TF
 * 2.16-2.18, where TF exports kernels_experimental.h's functions:
 * variables.h): rows of a variable picked by indices, the arithmetic of
 * arith/gather.h (GatherV2's and GatherNd's cores).
 *
 * Locks: TF's kernels switch the variable to copy-on-read mode
 * (EnsureSparseVariableAccess: a buffer shared with an earlier read is
 * copied first) and hold its mutex shared for the gather. Here skv_lock's
 * sparse flag does the first (the copy queued on the stream) and the
 * mutex is held exclusively (TF's C API locks only so, variables.h) while
 * the gather is queued, so later writers queue behind it.
 *
 * indices live in host memory (TF's GPU kernels keep them on the device):
 * a synchronous kernel cannot fail once its work is queued, so every
 * index is checked here, on TF's thread, before anything is queued, and a
 * bad one fails the op with TF CPU's message. TF's GPU gather writes
 * zeros for an out-of-range index instead of failing; simdev follows the
 * CPU, as GatherV2 does (array/gather.c).
 *
 * ResourceGather with batch_dims follows TF's kernel (both devices):
 * the batch is flattened into the gathered axis and each index offset by
 * its batch, so the check is against that flat range and an index past
 * its own batch's rows reads the next batch's; the message shows the
 * offset index and params.shape[0], as TF CPU's does.
 *
 * Thread contract: compute functions on TF's thread; the steps on the
 * stream worker (and sim_parallel_for's helpers), touching only their
 * args.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith/gather.h"
#include "kernels/variables/variables.h"

typedef struct gather_state {
  TF_DataType dtype;
  int64_t batch_dims;
} gather_state;

/* The variable (input 0), locked and fetched in copy-on-read mode, its
 * dtype the op's: NULL after failing the launch (*h then still to be
 * unlocked). TF CPU's kernels CHECK-fail (abort) on a dtype that is not
 * the variable's; simdev refuses it with ReadVariableOp's message. */
static TF_Tensor* sparse_var(sk_launch* l, TF_DataType dtype,
                             TF_VariableInputLockHolder** h) {
  static const int kVar[] = {0};
  *h = skv_lock(l, kVar, 1, true);
  TF_Tensor* x = *h != NULL ? skv_tensor(l, 0, true) : NULL;
  if (x != NULL && TF_TensorType(x) != dtype) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Trying to read variable with wrong dtype. Expected %s got %s",
            sk_dtype_tf_name(dtype), sk_dtype_tf_name(TF_TensorType(x)));
    return NULL;
  }
  return x;
}

static void gather_step(void* args) {
  sa_gather_run(args);
}

/* ---- ResourceGather ---------------------------------------------------- */

/* Checks and queues; false after failing the launch. */
static void gather_plan(sk_launch* l, const gather_state* st, TF_Tensor* x,
                        TF_Tensor* it) {
  sk_shape xs, is, os;
  char b1[256];
  if (!sk_shape_of(l, x, &xs) || !sk_shape_of(l, it, &is)) return;
  int64_t bd = st->batch_dims;
  /* TF CPU's checks and words, in its order. */
  if (xs.nd < 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "params must be at least 1 dimensional");
    return;
  }
  if (xs.nd < bd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "params must have at least %lld (batch_dims) dimensions but it "
            "has shape %s",
            (long long)bd, sk_shape_str(&xs, b1, sizeof(b1)));
    return;
  }
  bool i32 = TF_TensorType(it) == TF_INT32;
  if (i32 && xs.d[0] > INT32_MAX) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "params.shape[0] too large for int32 indexing: %lld > %d",
            (long long)xs.d[0], INT32_MAX);
    return;
  }
  /* simdev's own (TF's kernel reads past its shapes there): GatherV2's
   * checks and messages for what TF CPU's kernel does not check. */
  if (bd < 0 || bd > is.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Expected batch_dims in the range [0, %d], but got %lld", is.nd,
            (long long)bd);
    return;
  }
  if (bd >= xs.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "batch_dims (%lld) must be less than rank(params) (%d).",
            (long long)bd, xs.nd);
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
  if (!sk_rank_ok(l, xs.nd - 1 + is.nd - bd, "the output of ResourceGather"))
    return;
  os.nd = 0;
  for (int i = 0; i < bd; i++) os.d[os.nd++] = xs.d[i];
  for (int i = (int)bd; i < is.nd; i++) os.d[os.nd++] = is.d[i];
  for (int i = (int)bd + 1; i < xs.nd; i++) os.d[os.nd++] = xs.d[i];
  if (!sk_shape_count(l, &os)) return;
  TF_Tensor* y = sk_output(l, 0, &os);
  if (!sk_ok(l) || is.n == 0) return; /* TF: nothing to gather or check */
  sa_gather g = {.x = sk_data(x),
                 .y = y != NULL ? sk_mdata(y) : NULL,
                 .idx = sk_data(it),
                 .idx64 = !i32,
                 .es = TF_DataTypeSize(TF_TensorType(x)),
                 .batch = 1,
                 .outer = 1,
                 .n = xs.d[bd],
                 .k = 1,
                 .inner = 1};
  /* Prefixes of a valid shape's dims multiply without overflow (dims.h);
   * the rows past the axis only when params has an element. */
  for (int i = 0; i < bd; i++) g.batch *= is.d[i];
  for (int i = (int)bd; i < is.nd; i++) g.k *= is.d[i];
  if (xs.n == 0)
    g.inner = 0;
  else
    for (int i = (int)bd + 1; i < xs.nd; i++) g.inner *= xs.d[i];
  int64_t bad = sa_gather_bad_flat(&g);
  if (bad >= 0) {
    char p[SK_MAX_DIMS * 24];
    sk_index_string(&is, bad, p, sizeof(p));
    sk_fail(l, TF_INVALID_ARGUMENT, "indices%s = %lld is not in [0, %lld)", p,
            (long long)(sa_index(g.idx64, g.idx, bad) + bad / g.k * g.n),
            (long long)xs.d[0]);
    return;
  }
  if (os.n > 0) sk_work_now(l, gather_step, &g, sizeof(g), "ResourceGather");
}

static void gather_compute(sk_launch* l, void* state) {
  const gather_state* st = state;
  TF_Tensor* it = sk_input(l, 1);
  TF_VariableInputLockHolder* h = NULL;
  TF_Tensor* x = it != NULL ? sparse_var(l, st->dtype, &h) : NULL;
  /* Queued under the mutex: a later update of the variable queues behind
   * this gather. */
  if (x != NULL) gather_plan(l, st, x, it);
  skv_unlock(h);
}

/* ---- ResourceGatherNd -------------------------------------------------- */

typedef struct gather_nd_args {
  sa_nd nd;
  const char* x;
  char* y;
  size_t es;
  int64_t rows, slice;
} gather_nd_args;

static void gather_nd_step(void* args) {
  gather_nd_args* a = args;
  sa_gather_nd_run(&a->nd, a->x, a->y, a->es, a->rows, a->slice);
}

static void gather_nd_plan(sk_launch* l, TF_Tensor* x, TF_Tensor* it) {
  sk_shape xs, is, os;
  char b1[256], b2[256];
  if (!sk_shape_of(l, x, &xs) || !sk_shape_of(l, it, &is)) return;
  /* TF CPU's checks and words (DoGatherNd), in its order. */
  if (xs.nd < 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "params must be at least a vector");
    return;
  }
  if (is.nd < 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "indices must be at least a vector");
    return;
  }
  int64_t k = is.d[is.nd - 1];
  if (k > xs.nd) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "index innermost dimension length must be <= params rank; saw: "
            "%lld vs. %d",
            (long long)k, xs.nd);
    return;
  }
  os.nd = 0;
  for (int i = 0; i < is.nd - 1; i++) os.d[os.nd++] = is.d[i];
  for (int i = (int)k; i < xs.nd; i++) os.d[os.nd++] = xs.d[i];
  if (!sk_rank_ok(l, os.nd, "the output of ResourceGatherNd")) return;
  int64_t rows = 1;
  for (int i = 0; i < is.nd - 1; i++) rows *= is.d[i]; /* a prefix: fits */
  if (rows > 0 && xs.n == 0 && k > 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Requested more than 0 entries, but params is empty.  Params "
            "shape: %s",
            sk_shape_str(&xs, b1, sizeof(b1)));
    return;
  }
  if (!sk_shape_count(l, &os)) return;
  TF_Tensor* y = sk_output(l, 0, &os);
  if (!sk_ok(l) || rows == 0) return;
  gather_nd_args a = {.x = sk_data(x),
                      .y = y != NULL ? sk_mdata(y) : NULL,
                      .es = TF_DataTypeSize(TF_TensorType(x)),
                      .rows = rows,
                      .slice = 1};
  if (xs.n == 0)
    a.slice = 0;
  else
    for (int i = (int)k; i < xs.nd; i++) a.slice *= xs.d[i];
  sa_nd_init(&a.nd, sk_data(it), TF_TensorType(it) == TF_INT64, xs.d, (int)k);
  int64_t bad = sa_nd_bad(&a.nd, rows);
  if (bad >= 0) {
    sk_shape ps = is; /* indices.shape[:-1], for the position */
    ps.nd--;
    char p[SK_MAX_DIMS * 24], v[SK_MAX_DIMS * 24 + 4];
    sk_index_string(&ps, bad, p, sizeof(p));
    sa_nd_row_string(&a.nd, bad, v, sizeof(v));
    TF_StringView name = TF_GetOpKernelName(sk_context(l));
    sk_fail(l, TF_INVALID_ARGUMENT,
            "indices%s = [%s] does not index into param shape %s, node name: "
            "%.*s",
            p, v, sk_shape_str(&xs, b2, sizeof(b2)), (int)name.len, name.data);
    return;
  }
  if (os.n > 0)
    sk_work_now(l, gather_nd_step, &a, sizeof(a), "ResourceGatherNd");
}

static void gather_nd_compute(sk_launch* l, void* state) {
  const gather_state* st = state;
  TF_Tensor* it = sk_input(l, 1);
  TF_VariableInputLockHolder* h = NULL;
  TF_Tensor* x = it != NULL ? sparse_var(l, st->dtype, &h) : NULL;
  if (x != NULL) gather_nd_plan(l, x, it);
  skv_unlock(h);
}

/* ---- construction and registration ------------------------------------ */

static void* gather_new(TF_OpKernelConstruction* c, sk_compute_fn fn,
                        bool batch_dims) {
  gather_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  bool ok = sk_attr_type(c, "dtype", &st->dtype);
  if (ok && batch_dims) ok = sk_attr_int(c, "batch_dims", &st->batch_dims);
  if (!ok) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, fn, st, free);
}

static void* gather_create(TF_OpKernelConstruction* c) {
  return gather_new(c, gather_compute, true);
}
static void* gather_nd_create(TF_OpKernelConstruction* c) {
  return gather_new(c, gather_nd_compute, false);
}

/* TF's GPU registrations, less int32 (no int32 variable on SIMDEV:
 * resource_ops.c's kMoveTypes) and variant: ResourceGather for int64 and
 * TF_CALL_GPU_ALL_TYPES (the GPU numbers, complex, bool), ResourceGatherNd
 * for TF_CALL_GPU_NUMBER_TYPES. */
static const TF_DataType kGatherTypes[] = {
    TF_FLOAT,      TF_DOUBLE, TF_HALF, TF_BFLOAT16, TF_INT64, TF_COMPLEX64,
    TF_COMPLEX128, TF_BOOL,   0};
static const TF_DataType kGatherNdTypes[] = {TF_FLOAT, TF_DOUBLE, TF_HALF,
                                             TF_BFLOAT16, 0};
static const TF_DataType kIndexTypes[] = {TF_INT32, TF_INT64, 0};
/* The handle, and the indices (checked on TF's thread: the file's top). */
static const char* const kHost[] = {"resource", "indices", NULL};

static const sk_op kOps[] = {
    {"ResourceGather", gather_create, "dtype", kGatherTypes, kHost, "Tindices",
     kIndexTypes, .sync = 1},
    {"ResourceGatherNd", gather_nd_create, "dtype", kGatherNdTypes, kHost,
     "Tindices", kIndexTypes, .sync = 1},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_gather_ops(char* msg, size_t len) {
  const char* missing = NULL;
  if (!skv_resolve(&missing)) return true; /* resource_ops.c says why */
  return sk_register_ops(kOps, msg, len);
}
