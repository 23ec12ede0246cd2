/*
 * sk.h - simdev's kernel framework (src/kernels/), prefix sk_.
 *
 * Every simdev kernel is a TF *async* op kernel with the same life cycle,
 * owned by launch.c:
 *
 *   TF thread    compute_async -> op's compute(l, state):
 *                  sk_input / validate / sk_fail / sk_output / sk_args,
 *                  sk_work(l, run, label)
 *                -> submit one work item to the stream TF_GetStream returns
 *                   (or complete at once: failure, or nothing to compute;
 *                   or, with SIMDEV_INLINE=1, for a small launch on an idle
 *                   stream, run it here at once, in stream order:
 *                   sim_stream_run_inline)
 *   stream worker  run(l, args): the arithmetic, in stream order
 *   completion     report a run failure, release the held tensors, call
 *                  TF's done callback. TF's thread watches the item for
 *                  20 us after queuing it: if it has run by then, TF's
 *                  thread completes it (a tiny op then costs no wake-up);
 *                  otherwise it returns and the worker completes it.
 *
 * Why async kernels. TensorFlow 2.21 serves variables on SIMDEV with its
 * DEVICE_DEFAULT kernels (AssignVariableOp, AssignAddVariableOp,
 * AssignSubVariableOp), which read and write device buffers with host code,
 * outside every stream; the C API that would let a plugin register its own
 * (kernels_experimental.h) is not in any 2.21 binary (2.16-2.18 have it:
 * there kernels/variables/ registers simdev's own, synchronous kernels). So TF
 * must not see an output before the stream has written it, and no buffer a
 * queued item still uses may go back to TF's allocator. Calling `done` only
 * after the item ran gives both: TF's executor schedules consumers after
 * `done`, and the held TF_Tensors keep inputs, outputs and temporaries alive
 * until then. TF's thread still returns right after queuing, and the work runs
 * on the stream's worker in order. (TF 2.21's C async-kernel API hands us a
 * done pointer that dies when compute_async returns; done_shim.cc copies it.)
 *
 * SIMDEV_SYNC=1 makes compute_async wait until the item ran.
 * SIMDEV_UNSAFE_EARLY_COMPLETION=1 calls `done` right after queuing and
 * drops the tensors (the naive design), and queues the item SIM_WORK_LAZY so
 * it runs as late as the stream allows and loses every race with TF's host
 * code; only the hazard tests use it.
 *
 * Thread contract: the compute function (sk_input..sk_work) runs on the
 * calling TF thread; the run function runs in stream order, on the stream
 * worker or (small launches on an idle stream) on that TF thread after the
 * compute function returned, and may only touch its args, sk_fail and
 * sim_parallel_for. A synchronous kernel (sk_op.sync, below) has no run
 * function: the steps it queues (sk_work_now) run on the worker while its
 * compute function may still be running, and after the op returned to TF.
 */
#ifndef SIMDEV_KERNELS_SK_H_
#define SIMDEV_KERNELS_SK_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arith/dims.h"
#include "arith/sa.h"
#include "device_sim/sim.h"
#include "kernels/framework/sk_tf.h"

#define SK_DEVICE_TYPE "SIMDEV"
/* Highest rank simdev kernels accept; larger ranks get InvalidArgument from
 * sk_rank_ok, on TF's thread, before any dims are copied into a fixed array
 * (sk_shape and the kernels' own plans are sized by it). */
#define SK_MAX_DIMS 16

typedef struct sk_launch sk_launch;

/* ---- shapes ------------------------------------------------------------ */
typedef struct sk_shape {
  int nd;
  int64_t d[SK_MAX_DIMS];
  int64_t n; /* element count (product of d) */
} sk_shape;

/* The shape of t (fails the launch if its rank exceeds SK_MAX_DIMS). */
bool sk_shape_of(sk_launch* l, const TF_Tensor* t, sk_shape* out);
/* The one rank check: false after failing the launch with InvalidArgument
 * "simdev kernels support tensors of rank <= 16, got rank N (what)" if rank
 * exceeds SK_MAX_DIMS. sk_shape_of uses it for every input; kernels call it
 * for ranks they make (Bitcast, Pack, a requested shape). what may be NULL. */
bool sk_rank_ok(sk_launch* l, int64_t rank, const char* what);
/* A requested shape: the dims held by t, a host int32 or int64 tensor
 * (Fill's dims, BroadcastTo's and the random ops' shape, ...), as TF's
 * TensorShapeUtils::MakeShape builds it: rank <= SK_MAX_DIMS, every dim
 * >= 0 ("Dimension -1 must be >= 0"), the element count checked
 * (sk_shape_count). With what == NULL it reads every element of t whatever
 * its rank, so the caller must have checked that rank first, with its op's
 * own message (ScatterNd: "Shape must be a vector"); otherwise t must be a
 * vector, named `what` in TF's message ("shape must be a vector of
 * {int32,int64}, got shape [2,2]"). False after failing the launch. */
bool sk_shape_from_tensor(sk_launch* l, const TF_Tensor* t, const char* what,
                          sk_shape* o);
/* "[2,3,4]" into buf; returns buf. */
const char* sk_shape_str(const sk_shape* s, char* buf, size_t len);
bool sk_shape_eq(const sk_shape* a, const sk_shape* b);
/* Element p of shape s as TF prints a position (its SliceDebugString): "[1,0]"
 * ("[]" for rank 0); into buf, cut to len. */
void sk_index_string(const sk_shape* s, int64_t p, char* buf, size_t len);

/* Shapes a kernel computes. TF aborts the process on a shape with a
 * negative dim or more than 2**63 - 1 elements (arith/dims.h says why and
 * states TF's rule), so no kernel hands TF one: sk_output,
 * sk_output_forward and sk_output_alias check the shape they are given
 * (sa_dims_check) before any TF call, and sk_temp its byte count; a bad one
 * fails the launch with TF CPU's class (InvalidArgument; ResourceExhausted
 * for a byte size past INT64_MAX, as TF's allocator does). They also require
 * shape->n to be the element count of shape->d (Internal otherwise: a kernel
 * bug). Kernels use these for dims and counts they compute on the way: */
/* Row-major element strides of s (sa_dims_strides: 0 for an empty s). */
static inline void sk_strides(const sk_shape* s, int64_t* st) {
  sa_dims_strides(s->d, s->nd, st);
}
/* Sets s->n from s->d, checked: false after failing the launch as above. */
bool sk_shape_count(sk_launch* l, sk_shape* s);
/* *out = a + b, a * b: false after failing the launch with InvalidArgument
 * ("<what>: a + b overflows int64") when the result does not fit int64.
 * For dims a kernel sums (ConcatV2's axis, Pad's paddings, SplitV's sizes)
 * or multiplies (Tile's multiples, counts of a plan); what names it. */
bool sk_size_add(sk_launch* l, int64_t a, int64_t b, int64_t* out,
                 const char* what);
bool sk_size_mul(sk_launch* l, int64_t a, int64_t b, int64_t* out,
                 const char* what);

/* ---- kernels and their registration ------------------------------------ */
typedef void (*sk_compute_fn)(sk_launch* l, void* state);

/* What TF keeps per kernel instance (per node): the compute function, the
 * op's attribute state, and the node's name and op type interned for the
 * trace recorder (sim_trace_intern, once at construction; 0 if unknown). */
typedef struct sk_kernel {
  sk_compute_fn compute;
  void* state;
  void (*free_state)(void*);
  uint32_t trace_name, trace_type;
  /* The same as strings (sim_trace_name, once: it takes a lock), for
   * sim_mem_set_site around each compute. */
  const char *site_name, *site_type;
} sk_kernel;

/* For create functions: a kernel running `compute` with `state` (owned; freed
 * with free_state, which may be NULL). Returns NULL after reporting
 * ResourceExhausted to c if out of memory. */
void* sk_kernel_new(TF_OpKernelConstruction* c, sk_compute_fn compute,
                    void* state, void (*free_state)(void*));

/* Zeroed state of `size` bytes for a create function (free it with free,
 * e.g. as sk_kernel_new's free_state). NULL after reporting
 * ResourceExhausted to c if out of memory. */
void* sk_state_new(TF_OpKernelConstruction* c, size_t size);

/* Attribute readers (attr.c): each reports a missing or ill-typed attribute
 * to c (TF's message) and returns false. A type / bool / int / float: */
bool sk_attr_type(TF_OpKernelConstruction* c, const char* name,
                  TF_DataType* out);
bool sk_attr_bool(TF_OpKernelConstruction* c, const char* name, bool* out);
/* An `int` attribute (TF stores every int attribute as int64). */
bool sk_attr_int(TF_OpKernelConstruction* c, const char* name, int64_t* out);
bool sk_attr_float(TF_OpKernelConstruction* c, const char* name, float* out);
/* The sizes TF reports for an attribute (GetAttrSize): *list_size the
 * entries of a list (-1 for a single value), *total_size the bytes of a
 * string or of all strings of a string list (TF's header has the other
 * types); either pointer may be NULL. For a kernel that bounds a list or a
 * string with its own message before reading it (fused_ops, TArgs, a
 * program). */
bool sk_attr_size(TF_OpKernelConstruction* c, const char* name,
                  int32_t* list_size, int32_t* total_size);
/* Copies a string attribute into buf (NUL-terminated). */
bool sk_attr_string(TF_OpKernelConstruction* c, const char* name, char* buf,
                    size_t len);
/* A list of n types (n from sk_attr_size, which the caller bounds), and a
 * list of n strings: vals[i] points into storage (of storage_size bytes,
 * at least sk_attr_size's total), lens[i] its length, no NUL (TF's
 * GetAttrStringList). */
bool sk_attr_types(TF_OpKernelConstruction* c, const char* name,
                   TF_DataType* out, int n);
bool sk_attr_strings(TF_OpKernelConstruction* c, const char* name, char** vals,
                     size_t* lens, int n, char* storage, size_t storage_size);
/* Reads an int list of at most max entries; *count receives its length. */
bool sk_attr_ints(TF_OpKernelConstruction* c, const char* name, int64_t* out,
                  int max, int* count);
/* sk_attr_ints for an attribute TF's CPU kernel reads as int32s (window
 * sizes, strides, dilations): a value outside int32 fails construction with
 * InvalidArgument, as TF's does, so window arithmetic on them stays far
 * from int64's limits. */
bool sk_attr_int32s(TF_OpKernelConstruction* c, const char* name, int64_t* out,
                    int max, int* count);
void sk_construction_fail(TF_OpKernelConstruction* c, TF_Code code,
                          const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One registration: op `name` on SIMDEV, once per type in `types` (ended by
 * 0) for attribute `type_attr` (times each of `types2` for `type_attr2`), or
 * once without a type constraint when type_attr is NULL. A constraint keeps
 * TF's placer honest: a type simdev cannot run is placed elsewhere under soft
 * placement instead of failing on SIMDEV. `host_memory` lists arguments kept in
 * host memory (NULL-terminated; may be NULL). */
typedef struct sk_op {
  const char* name;
  void* (*create)(TF_OpKernelConstruction* c);
  const char* type_attr;
  const TF_DataType* types;
  const char* const* host_memory;
  /* Optional second constraint (e.g. Cast's DstT): one registration per
   * pair of types. NULL: none. */
  const char* type_attr2;
  const TF_DataType* types2;
  /* A synchronous kernel (TF_NewKernelBuilder) instead of the usual
   * asynchronous one: for ops whose compute calls TF functions that fail
   * with OP_REQUIRES, which CHECK-fails (aborts the process) inside an
   * AsyncOpKernel ("Use OP_REQUIRES_ASYNC in AsyncOpKernel
   * implementations", measured on TF 2.18.1 with TF_AssignVariable). Its
   * compute function queues its work with sk_work_now / sk_copy_now
   * (below), never sk_work. */
  bool sync;
} sk_op;

/* Registers every op of a NULL-name-terminated table. Returns false and
 * writes the first error to msg. */
bool sk_register_ops(const sk_op* ops, char* msg, size_t len);

/* Registration of each file's op table: bool sk_register_<file>(msg, len)
 * for every line of families.def, all called by TF_InitKernel (init.c), so
 * that the files of a family never call each other just to register. */
#define SK_FAMILY(folder, file) bool sk_register_##file(char* msg, size_t len);
#include "kernels/framework/families.def"
#undef SK_FAMILY

/* ---- launches (TF thread) ---------------------------------------------- */
/* Whether the launch is still good; every sk_ call below is a no-op on a
 * failed launch, so a compute function may check once at the end. */
bool sk_ok(const sk_launch* l);
/* Fails the launch with a TF error code (InvalidArgument for bad shapes,
 * as TF's CPU kernels do). The first failure wins. Called from the compute
 * function (TF thread) or from the run function (stream worker: a
 * data-dependent error such as an out-of-range label; only this op fails,
 * the stream stays usable). Never from both at once: the run function
 * starts after the compute function returned, and whoever completes the
 * launch reads the failure after the run function returned (launch.c). */
void sk_fail(sk_launch* l, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
TF_OpKernelContext* sk_context(sk_launch* l);
/* The launch's status, for a direct TF call; sk_status_ok moves a failure
 * in it to the launch ("what: message") and returns false. */
TF_Status* sk_status(sk_launch* l);
bool sk_status_ok(sk_launch* l, const char* what);

/* The device_sim stream TF gives this launch (TF_GetStream: the device's
 * compute stream), for a compute function that needs the device itself
 * (sim_stream_device). NULL after failing the launch if there is none. The
 * one way kernels reach a stream: launch.c queues the work item on it. */
sim_stream* sk_stream(sk_launch* l);

/* Input i, held until the launch completes. NULL on failure. */
TF_Tensor* sk_input(sk_launch* l, int i);
/* Allocates output i with the dtype TF expects, held until completion. */
TF_Tensor* sk_output(sk_launch* l, int i, const sk_shape* shape);
/* The shape of input i, without holding the input: for a compute function
 * that forwards an input buffer to an output (TF forwards a buffer only
 * while the executor holds its one reference; sk_input would add one). */
bool sk_input_shape(sk_launch* l, int i, sk_shape* out);
/* Output i of `shape`, reusing the buffer of one of the `candidates` inputs
 * when TF allows it (same dtype and size, no other reference), else newly
 * allocated; held until completion. Call it before sk_input of the
 * candidates. Required where TF runs a kernel with its output tied to an
 * input: the collective all-reduce's Add (collective_util.cc) and the
 * scoped allocator refuse an allocated output ("Explicit allocate_output
 * call where input forwarding required"). The run function must then
 * tolerate z == x (elementwise loops do: each element is read before it
 * is written). */
TF_Tensor* sk_output_forward(sk_launch* l, int i, const int* candidates,
                             int ncandidates, const sk_shape* shape);
/* Device scratch of `bytes` bytes (64-byte aligned), held until completion,
 * at the address run functions use (sim_mem_alias, like sk_data). NULL on
 * failure or when bytes == 0. */
void* sk_temp(sk_launch* l, size_t bytes);
/* sk_temp of count elements of elsize bytes, the product checked (count <
 * 0 or a byte count past INT64_MAX fails the launch: ResourceExhausted). */
void* sk_temp_n(sk_launch* l, int64_t count, size_t elsize);
/* Output i aliases tensor `from` with another dtype/shape (no data moves:
 * Bitcast, and ops whose output equals an input: a Slice of everything, a
 * Pad by nothing, ...). The byte sizes must match. */
void sk_output_alias(sk_launch* l, int i, const TF_Tensor* from,
                     TF_DataType dtype, const sk_shape* shape);
/* Zeroed argument block for the run function, freed at completion. */
void* sk_args(sk_launch* l, size_t size);
/* cleanup(args) runs when the launch is freed, whether or not the run
 * function ran: for arguments that own something the run function takes
 * over (it clears them when it does). */
void sk_args_cleanup(sk_launch* l, void (*cleanup)(void* args));

/* The work for the stream: run(l, args) on the worker. A launch that never
 * calls sk_work (e.g. empty outputs) completes without touching the stream. */
typedef void (*sk_run_fn)(sk_launch* l, void* args);
void sk_work(sk_launch* l, sk_run_fn run, const char* label);

/* ---- synchronous kernels: work queued at once (variables/) -------------
 * A synchronous kernel's compute function (sk_op.sync) queues its device
 * work while it runs, from inside the TF calls it makes, and TF takes the
 * op as done when it returns, as for a GPU kernel; the launch holds every
 * tensor the work uses until the stream ran it (an item of the framework,
 * queued behind it, releases them). Why at once: kernels_experimental.h's
 * variable helpers call the kernel's copy callback while they hold the
 * variable's mutex, then point the variable at the copy's destination and
 * release the mutex. The copy must be queued before that, so that stream
 * order follows the order in which kernels held the mutex: the next holder
 * (a read) may alias the destination and queue its consumers at once.
 * These calls work on a failed launch too (TF changed the variable whatever
 * the launch's state) and return false only when nothing could be queued
 * (no stream, host out of memory: the launch is failed then). In an
 * asynchronous kernel sk_copy_now and sk_work_now fail the launch
 * (Internal); sk_hold works in any launch.
 *
 * sk_hold: the launch takes t (a tensor TF handed the kernel, as the
 * variable callbacks' tensors are) and deletes it when the queued work ran;
 * on a failed launch too. False if t could not be held (then it is deleted
 * and the launch failed). sk_copy_now: dst's bytes = src's, in stream order
 * (sizes must match; nothing is queued for 0 bytes). sk_work_now:
 * step(args) on the stream worker, args being `size` bytes copied now;
 * step may run while the compute function still runs, so it touches only
 * its args and sim_parallel_for, and cannot fail (the op has returned by
 * the time it runs). */
bool sk_hold(sk_launch* l, TF_Tensor* t);
bool sk_copy_now(sk_launch* l, TF_Tensor* dst, const TF_Tensor* src);
typedef void (*sk_step_fn)(void* args);
bool sk_work_now(sk_launch* l, sk_step_fn step, const void* args, size_t size,
                 const char* label);

/* ---- launch.c internals used by init.c ------------------------------ */
/* Takes SIMDEV_SYNC / SIMDEV_UNSAFE_EARLY_COMPLETION from the settings
 * SE_InitPlugin read, and makes OpenBLAS single-threaded (sa_blas_init).
 * Returns false, doing nothing, when SE_InitPlugin decided this process gets no
 * SIMDEV device (SIMDEV_DISABLE=1, another TensorFlow release): then no kernel
 * is registered either. */
bool sk_launch_init(void);

/* ---- the arithmetic (src/arith) --------------------------------------------
 */
/* GEMM, convolution and the fused epilogue live in src/arith (arith/sa.h),
 * shared with the XLA handlers. Its float32 / float64 codes are TF's, so a
 * TF_DataType the kernel has checked converts by value. */
_Static_assert(SA_F32 == (int)TF_FLOAT && SA_F64 == (int)TF_DOUBLE,
               "arith/sa.h's sa_dtype must equal TF_FLOAT / TF_DOUBLE");
static inline sa_dtype sk_sa_dtype(TF_DataType dt) {
  return (sa_dtype)dt;
}

/* ---- helpers ------------------------------------------------------------ */
/* A tensor's bytes as simdev's code reaches them: device memory of a
 * discrete device (SIMDEV_DISCRETE=1) through its alias (sim_mem_alias),
 * anything else as TF gave it. Any thread. */
static inline const void* sk_data(const TF_Tensor* t) {
  return sim_mem_alias(TF_TensorData(t));
}
static inline void* sk_mdata(TF_Tensor* t) {
  return sim_mem_alias(TF_TensorData(t));
}

/* Element i of int32 or int64 index data (shapes, permutations, axes,
 * labels): the one place that reads either width. dt must be TF_INT32 or
 * TF_INT64 (callers check it, or the op's type list does); callers check
 * the range of i. Any thread. */
static inline int64_t sk_index(TF_DataType dt, const void* p, int64_t i) {
  return dt == TF_INT32 ? ((const int32_t*)p)[i] : ((const int64_t*)p)[i];
}
/* The same for an index tensor TF keeps in host memory (TF thread). */
static inline int64_t sk_index_at(const TF_Tensor* t, int64_t i) {
  return sk_index(TF_TensorType(t), sk_data(t), i);
}
const char* sk_dtype_name(TF_DataType t);
/* The same as TF's DataTypeString spells it in messages ("float",
 * "double", "half", ...): for error texts that quote TF's. */
const char* sk_dtype_tf_name(TF_DataType t);

#endif /* SIMDEV_KERNELS_SK_H_ */
