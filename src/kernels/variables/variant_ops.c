/*
 * variant_ops.c - AddN and ZerosLike of variants (T=variant: the
 * TensorLists of a while loop's gradient, TensorArrays) on SIMDEV, through
 * kernels_experimental.h's TF_AddNVariant and TF_ZerosLikeVariant, found at
 * run time (tfcompat/tfc.h) like the variable functions (variables.h says
 * why): registered only where TF exports both (2.16-2.18), nothing on
 * 2.19-2.21.
 *
 * Why: TF's DEVICE_DEFAULT TensorList kernels serve lists on SIMDEV, but
 * AddN and ZerosLike for variants exist only on the CPU, so the placer put
 * them there even with soft placement off (a node of a loop's gradient has
 * no requested device), and the CPU kernel added the lists' elements, which
 * live in SIMDEV's memory, with host code outside every stream.
 *
 * How TF calls us (kernels_experimental.cc, v2.18): TF unwraps the variants
 * itself (TensorList, OptionalVariant; nested variants recursively; an
 * uninitialized element, DT_INVALID, it passes through without a call) and
 * for each pair of element tensors allocates the result with the
 * device's allocator and calls binary_add(ctx, a, b, out), or
 * zeros_like(ctx, in, out), synchronously on the op's thread; every tensor
 * it hands over is ours to delete. The callback queues the element's add or
 * zero-fill on the stream at once (sk_work_now) and the launch holds the
 * tensors until it ran, as var_tf.c's copy callback does; the kernels are
 * synchronous (sk_op.sync): TF_ZerosLikeVariant fails with OP_REQUIRES,
 * which aborts inside an asynchronous kernel. The variant tensors
 * themselves hold C++ objects in host memory (TF builds the outputs with
 * its CPU allocator); the registrations declare no host-memory arguments
 * (kOps says why).
 *
 * Element memory: the elements of a list on SIMDEV are SIMDEV memory, int32
 * ones too (measured on 2.18.1 for lists from TensorListFromTensor,
 * TensorListSetItem and PushBack, an item from tf.shape included: TF's
 * DEVICE_DEFAULT list kernels take their items in device memory), and TF
 * allocates each result with SIMDEV's allocator. The stream must never
 * touch host memory that TF's host code may use as soon as the op returns,
 * so each callback checks every tensor it is given (sim_mem_contains) and
 * fails with Unimplemented, naming the dtype, if one is host memory;
 * tests/tf/test_kernels_variant.py relies on that check as its evidence
 * that the elements it adds were device memory.
 *
 * Element dtypes: AddN adds what skv_update_now adds (float, double, half,
 * bfloat16, int8, uint8, int16, int32, int64); ZerosLike zero-fills any
 * fixed-size dtype (all-zero bytes are zero for every such TF type). The
 * others (string, resource, complex for AddN, ...) fail with Unimplemented
 * naming the dtype.
 *
 * Thread contract: resolve once in TF_InitKernel; compute functions and
 * callbacks on TF's thread (t_launch is this thread's launch for the
 * duration of one TF call); the zero step on the stream worker, on its
 * args only.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/variables/variables.h"
#include "tfcompat/tfc.h"

/* Set once by resolve (TF_InitKernel), read-only afterwards. */
static struct {
  __typeof__(&TF_AddNVariant) addn;
  __typeof__(&TF_ZerosLikeVariant) zeros;
} g;

static __thread sk_launch* t_launch;

/* Fails the op from inside a callback: on the launch (compute_sync reports
 * it) and on TF's context at once, so that TF stops at this element. */
static void cb_fail(sk_launch* l, TF_OpKernelContext* ctx, TF_Code code,
                    const char* msg) {
  if (l != NULL) sk_fail(l, code, "%s", msg);
  TF_Status* st = TF_NewStatus();
  TF_SetStatus(st, code, msg);
  TF_OpKernelContext_Failure(ctx, st);
  TF_DeleteStatus(st);
}

/* The callback's launch, or NULL after failing ctx and deleting the
 * tensors (a call that is not from our own TF call). */
static sk_launch* cb_launch(TF_OpKernelContext* ctx, TF_Tensor** ts, int n) {
  sk_launch* l = t_launch;
  if (l != NULL && sk_context(l) == ctx) return l;
  cb_fail(NULL, ctx, TF_INTERNAL,
          "simdev: a variant callback outside any simdev variant call");
  for (int i = 0; i < n; i++) TF_DeleteTensor(ts[i]);
  return NULL;
}

/* Whether t's bytes are SIMDEV memory (an empty tensor counts as such:
 * nothing touches it). */
static bool on_device(sim_device* dev, const TF_Tensor* t) {
  size_t n = TF_TensorByteSize(t);
  return n == 0 || sim_mem_contains(dev, TF_TensorData(t), n);
}

/* Holds ts[0..n) and checks that the stream may touch them all: false
 * after failing the op (the tensors are held or deleted either way). */
static bool cb_take(sk_launch* l, TF_OpKernelContext* ctx, TF_Tensor** ts,
                    int n, const char* op) {
  bool held = true;
  for (int i = 0; i < n; i++) held = sk_hold(l, ts[i]) && held;
  if (!held) {
    cb_fail(l, ctx, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    return false;
  }
  sim_stream* s = sk_stream(l);
  if (s == NULL) {
    cb_fail(l, ctx, TF_INTERNAL, "simdev: no SIMDEV stream");
    return false;
  }
  for (int i = 0; i < n; i++) {
    if (on_device(sim_stream_device(s), ts[i])) continue;
    char msg[256];
    snprintf(msg, sizeof(msg),
             "simdev: %s of a variant (TensorList) whose %s elements are in "
             "host memory is not supported on SIMDEV: SIMDEV adds and zeroes "
             "list elements on its stream, which must not write host memory "
             "that TensorFlow reads at once",
             op, sk_dtype_tf_name(TF_TensorType(ts[i])));
    cb_fail(l, ctx, TF_UNIMPLEMENTED, msg);
    return false;
  }
  return true;
}

/* ---- AddN ---------------------------------------------------------------- */

/* TF's binary_add (TF thread, inside TF_AddNVariant): out = a + b, one
 * element pair of the lists, queued now. */
static void add_cb(TF_OpKernelContext* ctx, TF_Tensor* a, TF_Tensor* b,
                   TF_Tensor* out) {
  TF_Tensor* ts[] = {a, b, out};
  sk_launch* l = cb_launch(ctx, ts, 3);
  if (l == NULL) return;
  const TF_DataType dt = TF_TensorType(a);
  char msg[600], sa[256], sb[256];
  if (TF_TensorType(b) != dt || TF_TensorType(out) != dt) {
    snprintf(msg, sizeof(msg),
             "simdev: AddN of variants: elements of dtypes %s and %s",
             sk_dtype_tf_name(dt), sk_dtype_tf_name(TF_TensorType(b)));
    cb_fail(l, ctx, TF_INVALID_ARGUMENT, msg);
  } else if (!skv_update_type(dt)) {
    snprintf(msg, sizeof(msg),
             "simdev: AddN of variants (TensorLists) with %s elements is not "
             "supported on SIMDEV",
             sk_dtype_tf_name(dt));
    cb_fail(l, ctx, TF_UNIMPLEMENTED, msg);
  } else if (TF_TensorElementCount(a) != TF_TensorElementCount(b) ||
             TF_TensorElementCount(out) != TF_TensorElementCount(a) ||
             TF_NumDims(a) != TF_NumDims(b)) {
    snprintf(msg, sizeof(msg),
             "simdev: AddN of variants: elements of incompatible shapes %s "
             "and %s",
             skv_shape_string(a, sa, sizeof(sa)),
             skv_shape_string(b, sb, sizeof(sb)));
    cb_fail(l, ctx, TF_INVALID_ARGUMENT, msg);
  } else {
    for (int i = 0; i < TF_NumDims(a); i++) {
      if (TF_Dim(a, i) == TF_Dim(b, i)) continue;
      snprintf(msg, sizeof(msg),
               "simdev: AddN of variants: elements of incompatible shapes %s "
               "and %s",
               skv_shape_string(a, sa, sizeof(sa)),
               skv_shape_string(b, sb, sizeof(sb)));
      cb_fail(l, ctx, TF_INVALID_ARGUMENT, msg);
      break;
    }
  }
  if (!sk_ok(l)) {
    for (int i = 0; i < 3; i++) TF_DeleteTensor(ts[i]);
    return;
  }
  if (cb_take(l, ctx, ts, 3, "AddN"))
    skv_update_now(l, dt, false, TF_TensorElementCount(a), sk_mdata(out),
                   sk_data(a), sk_data(b), "AddN(variant)");
}

static void addn_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Status* st = TF_NewStatus();
  t_launch = l;
  g.addn(sk_context(l), add_cb, st); /* sets st from the op's status */
  t_launch = NULL;
  if (TF_GetCode(st) != TF_OK && sk_ok(l))
    sk_fail(l, TF_GetCode(st), "%s", TF_Message(st));
  TF_DeleteStatus(st);
}

/* ---- ZerosLike ----------------------------------------------------------- */

typedef struct zero_args {
  void* z;
  size_t n;
} zero_args;

static void zero_step(void* args) {
  const zero_args* a = args;
  memset(a->z, 0, a->n);
}

/* Fixed-size dtypes, whose zero is all-zero bytes. */
static bool zero_type(TF_DataType dt) {
  switch (dt) {
    case TF_STRING:
    case TF_RESOURCE:
    case TF_VARIANT: return false;
    default: return TF_DataTypeSize(dt) > 0;
  }
}

/* TF's zeros_like (TF thread, inside TF_ZerosLikeVariant): out = 0, shaped
 * like in, queued now; in is not read. */
static void zeros_cb(TF_OpKernelContext* ctx, TF_Tensor* in, TF_Tensor* out) {
  TF_Tensor* ts[] = {in, out};
  sk_launch* l = cb_launch(ctx, ts, 2);
  if (l == NULL) return;
  const TF_DataType dt = TF_TensorType(out);
  if (!zero_type(dt)) {
    char msg[300];
    snprintf(msg, sizeof(msg),
             "simdev: ZerosLike of variants (TensorLists) with %s elements "
             "is not supported on SIMDEV",
             sk_dtype_tf_name(dt));
    cb_fail(l, ctx, TF_UNIMPLEMENTED, msg);
    TF_DeleteTensor(in);
    TF_DeleteTensor(out);
    return;
  }
  /* Only out is written; in needs no check, but is held (ours to delete). */
  if (!sk_hold(l, in)) {
    cb_fail(l, ctx, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    TF_DeleteTensor(out);
    return;
  }
  if (!cb_take(l, ctx, ts + 1, 1, "ZerosLike")) return;
  zero_args a = {.z = sk_mdata(out), .n = TF_TensorByteSize(out)};
  if (a.n > 0) sk_work_now(l, zero_step, &a, sizeof(a), "ZerosLike(variant)");
}

static void zeros_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Status* st = TF_NewStatus();
  /* TF_ZerosLikeVariant reports a non-scalar input with OP_REQUIRES and
   * leaves st alone: preset, it counts as done only if TF set it OK. */
  TF_SetStatus(st, TF_UNKNOWN, "TensorFlow reported the error to the op");
  t_launch = l;
  g.zeros(sk_context(l), zeros_cb, st);
  t_launch = NULL;
  if (TF_GetCode(st) != TF_OK && sk_ok(l))
    sk_fail(l, TF_GetCode(st), "%s", TF_Message(st));
  TF_DeleteStatus(st);
}

/* ---- construction and registration ------------------------------------- */

static void* addn_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, addn_compute, NULL, NULL);
}
static void* zeros_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, zeros_compute, NULL, NULL);
}

static const TF_DataType kVariant[] = {TF_VARIANT, 0};

/* No host-memory arguments, as TF's DEVICE_DEFAULT TensorList kernels that
 * make and read the lists on SIMDEV declare none for their handles: a
 * variant argument in host memory next to a producer's device-memory one
 * makes TF copy the list across, each element to host memory (measured on
 * 2.18.1: AddN's elements then arrived in host memory), which the
 * callbacks refuse. The variant tensors are host objects either way. */
static const sk_op kOps[] = {
    {"AddN", addn_create, "T", kVariant, NULL, .sync = 1},
    {"ZerosLike", zeros_create, "T", kVariant, NULL, .sync = 1},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_variant_ops(char* msg, size_t len) {
  /* Not an error: TF 2.19-2.21 export neither function; the CPU's kernels
   * then serve variant AddN/ZerosLike (docs/kernel-api.md, "Variables"). */
  if (!TFC_FIND(g.addn, TF_AddNVariant) ||
      !TFC_FIND(g.zeros, TF_ZerosLikeVariant))
    return true;
  return sk_register_ops(kOps, msg, len);
}
