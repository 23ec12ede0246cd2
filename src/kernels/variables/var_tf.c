/*
 * var_tf.c - the TF boundary of the variable kernels (variables.h says
 * why and states TF's locking contract): kernels_experimental.h's functions
 * found at run time, the copy callback TF calls while it holds a
 * variable's mutex, and the calls that hand it to TF.
 *
 * How a TF call reports failure: these functions report most failures
 * into the op's context (OP_REQUIRES) and return without touching their
 * TF_Status, or set it OK at the end regardless (TF_MaybeLock...). So each
 * status is preset to a failure first and counts as success only if TF set
 * it OK (and gave a tensor where one is due); on failure the launch is
 * marked failed too, and TF keeps the error it set first, which is what the
 * user sees.
 *
 * Thread contract: variables.h. t_launch is this thread's launch for the
 * duration of one TF call (TF calls the callback synchronously, on the
 * calling thread); the callback queues the copy at once, so it enters the
 * stream while TF still holds the variable's mutex.
 */
#include <stdio.h>

#include "kernels/variables/variables.h"
#include "tfcompat/tfc.h"

/* Set once by skv_resolve (TF_InitKernel), read-only afterwards. */
static struct {
  __typeof__(&TF_AssignVariable) assign;
  __typeof__(&TF_MaybeLockVariableInputMutexesInOrder) lock;
  __typeof__(&TF_ReleaseVariableInputLockHolder) release;
  __typeof__(&TF_GetInputTensorFromVariable) get;
} g;

bool skv_resolve(const char** missing) {
  *missing = NULL;
  if (!TFC_FIND(g.assign, TF_AssignVariable))
    *missing = "TF_AssignVariable";
  else if (!TFC_FIND(g.lock, TF_MaybeLockVariableInputMutexesInOrder))
    *missing = "TF_MaybeLockVariableInputMutexesInOrder";
  else if (!TFC_FIND(g.release, TF_ReleaseVariableInputLockHolder))
    *missing = "TF_ReleaseVariableInputLockHolder";
  else if (!TFC_FIND(g.get, TF_GetInputTensorFromVariable))
    *missing = "TF_GetInputTensorFromVariable";
  return *missing == NULL;
}

static __thread sk_launch* t_launch;
/* The source buffer of the last copy copy_cb queued on this thread (reset
 * by skv_tensor): skv_copied_from's answer. */
static __thread const void* t_copied_from;

/* TF's copy callback (TF thread, inside TF's call, under the variable's
 * mutex): dest = source, queued now. Both tensors are ours to delete: the
 * launch holds them until the copy ran. */
static void copy_cb(TF_OpKernelContext* ctx, TF_Tensor* source,
                    TF_Tensor* dest) {
  sk_launch* l = t_launch;
  if (l == NULL || sk_context(l) != ctx) { /* not from our call: no launch */
    TF_Status* st = TF_NewStatus();
    TF_SetStatus(st, TF_INTERNAL,
                 "simdev: a variable copy outside any simdev variable call");
    TF_OpKernelContext_Failure(ctx, st);
    TF_DeleteStatus(st);
    TF_DeleteTensor(source);
    TF_DeleteTensor(dest);
    return;
  }
  t_copied_from = TF_TensorData(source);
  bool held = sk_hold(l, source);
  held = sk_hold(l, dest) && held;
  if (held) sk_copy_now(l, dest, source);
}

/* A status TF must set OK for the call to count as done. */
static TF_Status* preset(void) {
  TF_Status* st = TF_NewStatus();
  TF_SetStatus(st, TF_UNKNOWN, "TensorFlow reported the error to the op");
  return st;
}

/* Marks the launch failed by a call whose error TF has set on the op. */
static void failed(sk_launch* l, const char* call, TF_Status* st) {
  TF_Code code = TF_GetCode(st);
  sk_fail(l, code == TF_OK ? TF_INTERNAL : code, "%s: %s", call,
          code == TF_OK ? "no tensor" : TF_Message(st));
}

TF_VariableInputLockHolder* skv_lock(sk_launch* l, const int* inputs, int n,
                                     bool sparse) {
  TF_VariableInputLockHolder* h = NULL;
  TF_Status* st = preset();
  t_launch = l;
  /* TF takes the mutexes in its own (address) order, so two ops locking
   * the same variables cannot deadlock. With sparse, TF first switches
   * each variable to copy-on-read mode, copying a shared buffer: that copy
   * goes through copy_cb and is queued here. The int* is not const in
   * TF's signature; TF only reads it. */
  g.lock(sk_context(l), true, sparse, (int*)inputs, n, copy_cb, &h, st);
  t_launch = NULL;
  if (h == NULL) failed(l, "TF_MaybeLockVariableInputMutexesInOrder", st);
  TF_DeleteStatus(st);
  return h;
}

void skv_unlock(TF_VariableInputLockHolder* h) {
  if (h != NULL) g.release(h);
}

TF_Tensor* skv_tensor(sk_launch* l, int input, bool sparse) {
  TF_Tensor* t = NULL;
  TF_Status* st = preset();
  t_launch = l;
  t_copied_from = NULL;
  /* (ctx, input, lock_held, isVariantType, sparse, copy, out, status) */
  g.get(sk_context(l), input, true, false, sparse, copy_cb, &t, st);
  t_launch = NULL;
  if (TF_GetCode(st) != TF_OK || t == NULL) {
    if (t != NULL) TF_DeleteTensor(t);
    failed(l, "TF_GetInputTensorFromVariable", st);
    t = NULL;
  } else if (!sk_hold(l, t)) {
    t = NULL; /* deleted; the launch failed */
  }
  TF_DeleteStatus(st);
  return t;
}

const void* skv_copied_from(void) {
  return t_copied_from;
}

bool skv_assign(sk_launch* l, bool validate_shape) {
  TF_Status* st = preset();
  t_launch = l;
  g.assign(sk_context(l), 0, 1, validate_shape, copy_cb, st);
  t_launch = NULL;
  bool ok = TF_GetCode(st) == TF_OK;
  if (!ok) failed(l, "TF_AssignVariable", st);
  TF_DeleteStatus(st);
  return ok;
}

const char* skv_shape_string(const TF_Tensor* t, char* buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < TF_NumDims(t) && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "",
                          (long long)TF_Dim(t, i));
  if (n < len) snprintf(buf + n, len - n, "]");
  return buf;
}

bool skv_same_shape(const TF_Tensor* a, const TF_Tensor* b) {
  if (TF_NumDims(a) != TF_NumDims(b)) return false;
  for (int i = 0; i < TF_NumDims(a); i++)
    if (TF_Dim(a, i) != TF_Dim(b, i)) return false;
  return true;
}
