/*
 * resource_ops.c - the resource-variable kernels on SIMDEV, registered only
 * where TF exports kernels_experimental.h's functions (2.16-2.18;
 * variables.h says why): ReadVariableOp, AssignVariableOp,
 * AssignAddVariableOp, AssignSubVariableOp.
 *
 * Why simdev has them at all: without them TF serves these ops on SIMDEV
 * with its DEVICE_DEFAULT kernels, whose AssignAdd/Sub run the CPU's update
 * loop on TF's thread over the variable's device buffer, outside every
 * stream (docs/kernel-api.md, "Why simdev's kernels are asynchronous").
 * Here every byte of device memory is touched on the stream: copies and
 * updates are queued while the variable's mutex is held (sk_work_now,
 * sk_copy_now), so stream order is the order in which ops held the mutex.
 * The kernels are synchronous (sk_op.sync): TF's helpers report errors
 * with OP_REQUIRES, which aborts the process inside an asynchronous kernel.
 * So, as for a GPU kernel, the op is done for TF once its work is queued;
 * the launch holds every buffer that work touches until it ran, and every
 * later user of them (simdev's kernels, TF's copies) is ordered behind it
 * on the stream.
 *
 *   ReadVariableOp     lock; the variable's tensor (copied first if its
 *                      buffer is shared); dtype check; output aliases it
 *   AssignVariableOp   TF_AssignVariable: the variable takes the value's
 *                      buffer (made if the handle names none)
 *   AssignAdd/SubVariableOp  lock; the tensor; shape and dtype checks;
 *                      the update queued in place; unlock
 *
 * Differences from TF's own kernels (docs/kernel-api.md, "Variables"),
 * forced by the C API: a handle that names no variable fails with TF's
 * Internal "Invalid variable reference." (TF_MaybeLock... reports it; TF
 * CPU: FailedPrecondition for a read, NotFound for an update);
 * AssignVariableOp does not compare the variable's dtype with the value's
 * (TF_AssignVariable does not, and no C call can read a variable without
 * failing the op when it does not exist yet, which AssignVariableOp must
 * allow); a read copies a buffer still shared with an earlier read's
 * output (TF_GetInputTensorFromVariable's copy-on-write), where TF's
 * ReadVariableOp aliases it.
 *
 * Numerics: AssignAdd/Sub are one IEEE addition per element (float32,
 * float64), through float32 and rounded to nearest even for half and
 * bfloat16 (Eigen's half and bfloat16 arithmetic), and wrapping for the
 * integers, as TF's DenseUpdate. No int32: TF makes no int32 variable on
 * SIMDEV (kMoveTypes says why).
 *
 * Thread contract: compute functions on TF's thread; update_range on the
 * stream worker and sim_parallel_for's helpers, on disjoint ranges of the
 * step's args; nothing else is shared.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/f16.h"
#include "kernels/variables/variables.h"

/* Elements per parallel range of an update. */
#define UPDATE_GRAIN (1 << 15)

typedef struct var_state {
  TF_DataType dtype; /* the op's dtype attribute */
  bool validate_shape;
  bool sub; /* AssignSubVariableOp */
} var_state;

/* ---- AssignAdd/Sub's update, on the stream ---------------------------- */

typedef struct update_args {
  TF_DataType dt;
  bool sub;
  int64_t n;
  void* z;       /* the result (alias): the variable's buffer, or an output */
  const void* x; /* the first operand (alias); may be z */
  const void* v; /* the second (alias) */
} update_args;

/* Each element is read before it is written, so z may be x. */
#define UPDATE_LOOP(T, OP)                                    \
  do {                                                        \
    T* z = a->z;                                              \
    const T* x = a->x;                                        \
    const T* v = a->v;                                        \
    for (int64_t i = b; i < e; i++) z[i] = (T)(x[i] OP v[i]); \
  } while (0)

/* 16-bit floats: widen, one float operation, round to nearest even. */
#define UPDATE_LOOP16(TO, FROM, OP)                                    \
  do {                                                                 \
    uint16_t* z = a->z;                                                \
    const uint16_t* x = a->x;                                          \
    const uint16_t* v = a->v;                                          \
    for (int64_t i = b; i < e; i++) z[i] = FROM(TO(x[i]) OP TO(v[i])); \
  } while (0)

static void update_range(void* arg, int64_t b, int64_t e) {
  const update_args* a = arg;
  switch (a->dt) {
    case TF_FLOAT:
      if (a->sub)
        UPDATE_LOOP(float, -);
      else
        UPDATE_LOOP(float, +);
      break;
    case TF_DOUBLE:
      if (a->sub)
        UPDATE_LOOP(double, -);
      else
        UPDATE_LOOP(double, +);
      break;
    case TF_HALF:
      if (a->sub)
        UPDATE_LOOP16(skh_half_to_float, skh_float_to_half, -);
      else
        UPDATE_LOOP16(skh_half_to_float, skh_float_to_half, +);
      break;
    case TF_BFLOAT16:
      if (a->sub)
        UPDATE_LOOP16(skh_bf16_to_float, skh_float_to_bf16, -);
      else
        UPDATE_LOOP16(skh_bf16_to_float, skh_float_to_bf16, +);
      break;
    /* Integers wrap, as TF's (two's complement) do: unsigned arithmetic,
     * where overflow is defined (the narrow types through int, cut back). */
    case TF_INT8:
    case TF_UINT8:
      if (a->sub)
        UPDATE_LOOP(uint8_t, -);
      else
        UPDATE_LOOP(uint8_t, +);
      break;
    case TF_INT16:
      if (a->sub)
        UPDATE_LOOP(uint16_t, -);
      else
        UPDATE_LOOP(uint16_t, +);
      break;
    case TF_INT32: /* variant AddN's list elements only (variant_ops.c) */
      if (a->sub)
        UPDATE_LOOP(uint32_t, -);
      else
        UPDATE_LOOP(uint32_t, +);
      break;
    default: /* TF_INT64: skv_update_type's types */
      if (a->sub)
        UPDATE_LOOP(uint64_t, -);
      else
        UPDATE_LOOP(uint64_t, +);
      break;
  }
}

static void update_step(void* args) {
  update_args* a = args;
  sim_parallel_for(a->n, UPDATE_GRAIN, update_range, a);
}

bool skv_update_type(TF_DataType dt) {
  switch (dt) {
    case TF_FLOAT:
    case TF_DOUBLE:
    case TF_HALF:
    case TF_BFLOAT16:
    case TF_INT8:
    case TF_UINT8:
    case TF_INT16:
    case TF_INT32:
    case TF_INT64: return true;
    default: return false;
  }
}

bool skv_update_now(sk_launch* l, TF_DataType dt, bool sub, int64_t n, void* z,
                    const void* x, const void* v, const char* label) {
  if (n == 0) return true;
  update_args a = {.dt = dt, .sub = sub, .n = n, .z = z, .x = x, .v = v};
  return sk_work_now(l, update_step, &a, sizeof(a), label);
}

/* ---- compute functions (TF thread) ------------------------------------- */

static void read_compute(sk_launch* l, void* state) {
  const var_state* st = state;
  static const int kVar[] = {0};
  TF_VariableInputLockHolder* h = skv_lock(l, kVar, 1, false);
  TF_Tensor* t = h != NULL ? skv_tensor(l, 0, false) : NULL;
  if (t != NULL && TF_TensorType(t) != st->dtype) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Trying to read variable with wrong dtype. Expected %s got %s",
            sk_dtype_tf_name(st->dtype), sk_dtype_tf_name(TF_TensorType(t)));
  } else if (t != NULL) {
    /* The output is the variable's buffer, as TF's ReadVariableOp makes
     * it; a later update copies it first while this output lives. */
    TF_SetOutput(sk_context(l), 0, t, sk_status(l));
    sk_status_ok(l, "setting the output");
  }
  skv_unlock(h);
}

static void assign_compute(sk_launch* l, void* state) {
  const var_state* st = state;
  skv_assign(l, st->validate_shape);
}

static void update_compute(sk_launch* l, void* state) {
  const var_state* st = state;
  const char* op = st->sub ? "AssignSubVariableOp" : "AssignAddVariableOp";
  TF_Tensor* v = sk_input(l, 1);
  static const int kVar[] = {0};
  TF_VariableInputLockHolder* h =
      v != NULL ? skv_lock(l, kVar, 1, false) : NULL;
  TF_Tensor* x = h != NULL ? skv_tensor(l, 0, false) : NULL;
  if (x == NULL) {
    skv_unlock(h);
    return;
  }
  /* TF's order: the shapes, then the dtypes. */
  if (!skv_same_shape(x, v)) {
    char a[256], b[256];
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Cannot update variable with shape %s using a Tensor with shape "
            "%s, shapes must be equal.",
            skv_shape_string(x, a, sizeof(a)),
            skv_shape_string(v, b, sizeof(b)));
  } else if (TF_TensorType(x) != TF_TensorType(v)) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "DType of variable handle and value does not match.");
  } else if (TF_TensorElementCount(x) > 0) {
    /* Queued before the unlock: the next holder of the mutex queues its
     * work (a read's consumers) behind this update. */
    skv_update_now(l, TF_TensorType(x), st->sub, TF_TensorElementCount(x),
                   sk_mdata(x), sk_data(x), sk_data(v), op);
  }
  skv_unlock(h);
}

/* ---- construction and registration ------------------------------------ */

static void* var_create(TF_OpKernelConstruction* c, sk_compute_fn compute,
                        bool sub, bool assign) {
  var_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->sub = sub;
  bool ok = sk_attr_type(c, "dtype", &st->dtype);
  /* AssignVariableOp's validate_shape (default false): read only if the
   * node has it, as TF's kernel does (older OpDefs lacked it). */
  TF_Status* s = TF_NewStatus();
  if (ok && assign && TF_OpKernelConstruction_HasAttr(c, "validate_shape", s))
    ok = sk_attr_bool(c, "validate_shape", &st->validate_shape);
  TF_DeleteStatus(s);
  if (!ok) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, compute, st, free);
}

static void* read_create(TF_OpKernelConstruction* c) {
  return var_create(c, read_compute, false, false);
}
static void* assign_create(TF_OpKernelConstruction* c) {
  return var_create(c, assign_compute, false, true);
}
static void* add_create(TF_OpKernelConstruction* c) {
  return var_create(c, update_compute, false, false);
}
static void* sub_create(TF_OpKernelConstruction* c) {
  return var_create(c, update_compute, true, false);
}

/* The dtypes a variable on SIMDEV can have: TF's DEVICE_DEFAULT VarHandleOp
 * (which makes SIMDEV's variables) is registered for TF's GPU types and the
 * integers but int32 (int32 variables live on the host, as with TF's GPU
 * kernels, which leave int32 out too). Reads and assignments move bytes:
 * all of them but uint16/32/64; updates: the numbers of TF's GPU kernels
 * (GPU_NUMBER_TYPES and the integers but int32) without those three. */
static const TF_DataType kMoveTypes[] = {
    TF_FLOAT, TF_DOUBLE, TF_HALF, TF_BFLOAT16,  TF_INT64,      TF_INT8,
    TF_INT16, TF_UINT8,  TF_BOOL, TF_COMPLEX64, TF_COMPLEX128, 0};
static const TF_DataType kUpdateTypes[] = {TF_FLOAT,    TF_DOUBLE, TF_HALF,
                                           TF_BFLOAT16, TF_INT64,  TF_INT8,
                                           TF_INT16,    TF_UINT8,  0};
/* The handle is a host tensor (TF's GPU registrations say so too). */
static const char* const kResource[] = {"resource", NULL};

static const sk_op kOps[] = {
    {"ReadVariableOp", read_create, "dtype", kMoveTypes, kResource, .sync = 1},
    {"AssignVariableOp", assign_create, "dtype", kMoveTypes, kResource,
     .sync = 1},
    {"AssignAddVariableOp", add_create, "dtype", kUpdateTypes, kResource,
     .sync = 1},
    {"AssignSubVariableOp", sub_create, "dtype", kUpdateTypes, kResource,
     .sync = 1},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_resource_ops(char* msg, size_t len) {
  const char* missing = NULL;
  /* Not an error: TF 2.19-2.21 export none of these functions, and TF's
   * DEVICE_DEFAULT kernels serve variables on SIMDEV there. Nothing is
   * printed (the plugin says nothing at load about what a release lacks);
   * docs/kernel-api.md, "Variables", has the reason. */
  if (!skv_resolve(&missing)) return true;
  return sk_register_ops(kOps, msg, len);
}
