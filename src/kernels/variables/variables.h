/*
 * variables.h - what the files of src/kernels/variables/ share (prefix
 * skv_; for this folder only): TensorFlow's resource-variable helpers of
 * tensorflow/c/kernels_experimental.h, found at run time, wrapped so that
 * their copy callback queues its copy on the launch's stream while TF holds
 * the variable's mutex.
 *
 * Why found at run time: every release simdev builds against (2.16-2.21)
 * declares these functions, but only 2.16-2.18's libtensorflow_framework.so.2
 * exports them; 2.19-2.21 export none (docs/kernel-api.md, "Variables").
 * Linking one would make the plugin fail to load there (TF opens it with
 * RTLD_NOW), so var_tf.c looks them up (tfcompat/tfc.h) when TF_InitKernel
 * registers the family, and without them the family registers nothing:
 * TF's DEVICE_DEFAULT kernels then serve variables on SIMDEV, as before.
 *
 * TF's locking contract, from its kernels_experimental.cc (v2.18):
 *  - TF_AssignVariable takes the variable's mutex itself (it also creates
 *    the variable if the handle names none); it calls the copy callback,
 *    under that mutex, only for a variable in copy-on-read mode.
 *  - TF_GetInputTensorFromVariable takes no lock: it may copy the
 *    variable's buffer (copy-on-write, when the buffer is shared) and point
 *    the variable at the copy. So skv_tensor is called only between
 *    skv_lock and skv_unlock, which hold the mutex exclusively
 *    (TF_MaybeLockVariableInputMutexesInOrder with do_lock: a shared lock
 *    would let two readers replace the tensor at once).
 *  - TF_AssignUpdateVariable is not used: it abort()s the process when the
 *    handle names no variable (printf + abort). A check before it cannot be
 *    made atomic with it: it takes the (non-reentrant) mutex itself, so the
 *    check must release it first, and a DestroyResourceOp in between would
 *    turn the check's "exists" into the abort. AssignAdd/Sub are skv_lock +
 *    skv_tensor + the kernel's own update, queued before skv_unlock
 *    (resource_ops.c), which is what that function does inside.
 *  - Every tensor TF hands the callback or returns is the caller's to
 *    delete (the 2.18 header says so): the launch holds them until the
 *    stream ran (sk_hold).
 *
 * Thread contract: skv_resolve runs once in TF_InitKernel, before any
 * kernel; the function pointers are read-only after it. The other calls run
 * on TF's thread in a compute function; the callback TF calls during them
 * runs on that same thread (TF calls it synchronously), which is how it
 * finds the launch (a thread-local pointer, set only for the call).
 */
#ifndef SIMDEV_KERNELS_VARIABLES_VARIABLES_H_
#define SIMDEV_KERNELS_VARIABLES_VARIABLES_H_

#include "kernels/framework/sk.h"
/* After sk.h: kernels_experimental.h includes kernels.h, which sk_tf.h has
 * included already with its weak-constant guard. */
#include "tensorflow/c/kernels_experimental.h"

/* Finds TF's variable functions in the process: true when all are there
 * (TF 2.16-2.18); false when one is missing (2.19-2.21), *missing naming
 * it. Once, from TF_InitKernel. */
bool skv_resolve(const char** missing);

/* Locks the variable inputs inputs[0..n) exclusively (TF orders the
 * mutexes, so any set is deadlock-free); sparse as TF's sparse kernels
 * pass it (copy-on-read: TF copies a shared buffer first, queued on the
 * stream). Returns the holder for
 * skv_unlock (never NULL unless the launch failed for want of host
 * memory). A handle naming no variable is not locked and fails the op
 * with TF's Internal "Invalid variable reference." (reported by TF, into
 * the op's context; the launch is marked failed when skv_tensor then finds
 * no variable). */
TF_VariableInputLockHolder* skv_lock(sk_launch* l, const int* inputs, int n,
                                     bool sparse);
void skv_unlock(TF_VariableInputLockHolder* h);

/* The variable's tensor, the one buffer it owns alone from now on
 * (TF copies a shared buffer first: the copy is queued on the stream), held
 * by the launch; sparse as given to skv_lock. Between skv_lock and
 * skv_unlock only. NULL after failing
 * the launch (TF has set the op's error). */
TF_Tensor* skv_tensor(sk_launch* l, int input, bool sparse);

/* The buffer the last skv_tensor on this thread copied the variable's
 * tensor from (TF's copy-on-write of a shared buffer), NULL if it copied
 * nothing. A kernel with several variable inputs compares it with the
 * buffers it already holds: equal means one variable passed twice. */
const void* skv_copied_from(void);

/* TF_AssignVariable(resource = input 0, value = input 1): the variable (made
 * if the handle names none) takes the value's buffer, or a copy of it
 * queued on the stream (copy-on-read mode). False after failing the launch
 * (TF has set the op's error, e.g. validate_shape's). */
bool skv_assign(sk_launch* l, bool validate_shape);

/* z = x + v (x - v with sub) over n elements of dt, queued now on the
 * launch's stream (sk_work_now; nothing for n == 0); z, x, v are the
 * aliases the stream reaches (sk_mdata / sk_data) and z may be x. IEEE
 * float arithmetic (half and bfloat16 through float32, rounded to nearest
 * even), integers wrapping. For AssignAdd/Sub (resource_ops.c) and the
 * elements of a variant AddN (variant_ops.c). False as sk_work_now. */
bool skv_update_type(TF_DataType dt); /* the dtypes skv_update_now adds */
bool skv_update_now(sk_launch* l, TF_DataType dt, bool sub, int64_t n, void* z,
                    const void* x, const void* v, const char* label);

/* A tensor's shape as TF's TensorShape::DebugString prints it: "[2,3]",
 * "[]"; any rank (a variable's rank is not bounded by SK_MAX_DIMS: nothing
 * is computed from it). Returns buf. */
const char* skv_shape_string(const TF_Tensor* t, char* buf, size_t len);
/* TF's TensorShape::IsSameSize: the same rank and dims. */
bool skv_same_shape(const TF_Tensor* a, const TF_Tensor* b);

#endif /* SIMDEV_KERNELS_VARIABLES_VARIABLES_H_ */
