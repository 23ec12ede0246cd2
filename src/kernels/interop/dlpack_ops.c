/*
 * dlpack_ops.c - the two ops that move SIMDEV tensors in and out of DLPack
 * without a copy (the design of the DLPack-for-TF RFC: the managed tensor's
 * address travels as an int64 scalar in host memory). The Python side
 * (python/simdev/dlpack.py) wraps that address in a capsule.
 *
 *   SimdevToDlpack(tensor: T, versioned) -> address: int64
 *     A DLManagedTensor(Versioned) over the tensor's buffer. It holds its
 *     own reference to the TF buffer (a TF_Tensor) until the consumer calls
 *     the deleter, so deleting the TF tensor does not free the memory. The
 *     managed tensor is built on the stream worker, after everything queued
 *     before it on the tensor's stream: the consumer never sees a buffer a
 *     queued kernel is still writing.
 *     On a discrete device (SIMDEV_DISCRETE=1) the managed tensor's data is
 *     the buffer's alias (sim_mem_alias), still as kDLCPU: the host-mapped
 *     view of device memory that a real discrete device would have to offer
 *     a zero-copy CPU consumer (mapped memory, as CUDA's host-mapped
 *     allocations). NumPy, JAX's CPU backend and a re-import here keep
 *     working without a copy; the address TF holds (view A) never leaves
 *     simdev. docs/debugging.md, "Discrete memory".
 *
 *   SimdevFromDlpack(address: int64, dtype, versioned, copy) -> tensor
 *     Validates the managed tensor (src/dlpack) and, when it is compact,
 *     aligned and writable, wraps its memory in a TF tensor whose
 *     deallocator calls the producer's deleter exactly once; the range is
 *     mapped into the device meanwhile (sim_mem_register_host) so TF's
 *     copies accept it. Otherwise, if `copy` allows, the stream gathers it
 *     into a fresh SIMDEV buffer and then calls the deleter; else the op
 *     fails with InvalidArgument and the producer keeps the tensor.
 *
 * Ownership of an imported managed tensor passes to the op only when the op
 * succeeds; on failure the caller still owns it (the Python capsule then
 * deletes it).
 *
 * Thread contract: compute functions on TF's thread, run functions on the
 * stream worker (launch.c). Deleters may run on any thread: the
 * deallocator of a zero-copy import runs wherever TF drops the last
 * reference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack/dlp.h"
#include "kernels/framework/sk.h"
#include "se/se.h"
#include "tfcompat/tfc.h"

/* TF 2.21's ops.h declares these as bare structs and then uses them without
 * `struct`, which only compiles as C++; in C the typedefs must come first. */
typedef struct TF_DimensionHandle TF_DimensionHandle;
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_ShapeHandle TF_ShapeHandle;
typedef struct TF_ShapeInferenceContext TF_ShapeInferenceContext;
#include "tensorflow/c/ops.h"

/* One rank limit for the kernels and DLPack (dlp.h says why). */
_Static_assert(DLP_MAX_DIMS == SK_MAX_DIMS,
               "src/dlpack's rank limit must be the kernels' limit");

/* The dtypes both TF and DLPack have, as an op-definition type list. Not
 * int32: TF keeps the int32 tensors of every non-CPU device in host memory
 * and copies them to and from the CPU on its own, so an int32 "SIMDEV"
 * tensor has no SIMDEV buffer to share. */
#define DLPACK_TYPES                                                    \
  "{half, bfloat16, float, double, int8, int16, int64, uint8, uint16, " \
  "uint32, uint64, bool, complex64, complex128}"

static const TF_DataType kTypes[] = {
    TF_HALF,   TF_BFLOAT16, TF_FLOAT,     TF_DOUBLE,     TF_INT8,
    TF_INT16,  TF_INT64,    TF_UINT8,     TF_UINT16,     TF_UINT32,
    TF_UINT64, TF_BOOL,     TF_COMPLEX64, TF_COMPLEX128, 0};

static bool to_dl_dtype(TF_DataType t, DLDataType* out) {
  uint8_t code;
  switch (t) {
    case TF_HALF:
    case TF_FLOAT:
    case TF_DOUBLE: code = kDLFloat; break;
    case TF_BFLOAT16: code = kDLBfloat; break;
    case TF_INT8:
    case TF_INT16:
    case TF_INT32:
    case TF_INT64: code = kDLInt; break;
    case TF_UINT8:
    case TF_UINT16:
    case TF_UINT32:
    case TF_UINT64: code = kDLUInt; break;
    case TF_BOOL: code = kDLBool; break;
    case TF_COMPLEX64:
    case TF_COMPLEX128: code = kDLComplex; break;
    default: return false;
  }
  out->code = code;
  out->bits = (uint8_t)(8 * TF_DataTypeSize(t));
  out->lanes = 1;
  return true;
}

/* ---- export ------------------------------------------------------------- */

typedef struct export_state {
  bool versioned;
} export_state;

typedef struct export_args {
  TF_Tensor* keep; /* our own reference to the buffer; NULL once exported */
  int64_t* address;
  DLDataType dtype;
  bool versioned;
  int ndim;
  int64_t shape[DLP_MAX_DIMS];
} export_args;

static void release_tensor(void* owner) {
  TF_DeleteTensor(owner);
}

static void export_run(sk_launch* l, void* p) {
  export_args* a = p;
  /* On a discrete device: the host-mapped view (see the top comment). */
  void* data = sim_mem_alias(TF_TensorData(a->keep));
  int rc;
  if (a->versioned) {
    DLManagedTensorVersioned* m = NULL;
    rc = dlp_export_versioned(data, a->dtype, a->ndim, a->shape, false, a->keep,
                              release_tensor, &m);
    *a->address = (int64_t)(intptr_t)m;
  } else {
    DLManagedTensor* m = NULL;
    rc = dlp_export_legacy(data, a->dtype, a->ndim, a->shape, a->keep,
                           release_tensor, &m);
    *a->address = (int64_t)(intptr_t)m;
  }
  if (rc != DLP_OK) { /* compute checked rank and dtype: only memory */
    sk_fail(l, rc == DLP_ENOMEM ? TF_RESOURCE_EXHAUSTED : TF_INTERNAL,
            "SimdevToDlpack: cannot build the managed tensor (dlp_err %d)", rc);
    return;
  }
  a->keep = NULL; /* the managed tensor owns it now */
}

/* Drops the buffer reference if the export never happened. */
static void export_cleanup(void* p) {
  export_args* a = p;
  if (a->keep != NULL) TF_DeleteTensor(a->keep);
}

/* SIMDEV_UNSAFE_EARLY_COMPLETION reports ops done and drops their tensors
 * before they ran: a managed tensor would point at freed memory. */
static bool refuse_early_completion(sk_launch* l, const char* op) {
  if (!se_config()->unsafe_early_completion) return false;
  sk_fail(l, TF_FAILED_PRECONDITION,
          "%s is unavailable with SIMDEV_UNSAFE_EARLY_COMPLETION=1 (a debug "
          "mode that reports ops done before they ran)",
          op);
  return true;
}

static void export_compute(sk_launch* l, void* state) {
  const export_state* s = state;
  if (refuse_early_completion(l, "SimdevToDlpack")) return;
  TF_Tensor* in = sk_input(l, 0);
  if (in == NULL) return;
  /* sk_shape_of refuses a rank above the limit, with the message every
   * kernel gives: such a tensor cannot come out of a simdev kernel, but TF's
   * own DEVICE_DEFAULT kernels (ExpandDims) can make one on SIMDEV. */
  sk_shape shape;
  if (!sk_shape_of(l, in, &shape)) return;
  DLDataType dt;
  if (!to_dl_dtype(TF_TensorType(in), &dt)) {
    sk_fail(l, TF_INVALID_ARGUMENT, "SimdevToDlpack: DLPack has no %s",
            sk_dtype_name(TF_TensorType(in)));
    return;
  }
  sk_shape scalar = {.nd = 0, .n = 1};
  TF_Tensor* out = sk_output(l, 0, &scalar);
  export_args* a = sk_args(l, sizeof(*a));
  if (out == NULL || a == NULL) return;
  /* A second reference to the same buffer: the held input is released when
   * the launch completes, this one when the consumer deletes. */
  TF_GetInput(sk_context(l), 0, &a->keep, sk_status(l));
  if (!sk_status_ok(l, "SimdevToDlpack: reading input")) return;
  sk_args_cleanup(l, export_cleanup);
  a->address = sk_mdata(out);
  a->dtype = dt;
  a->versioned = s->versioned;
  a->ndim = shape.nd;
  memcpy(a->shape, shape.d, sizeof(int64_t) * (size_t)shape.nd);
  sk_work(l, export_run, "SimdevToDlpack");
}

static void* export_create(TF_OpKernelConstruction* c) {
  export_state* s = sk_state_new(c, sizeof(*s));
  if (s == NULL) return NULL;
  if (!sk_attr_bool(c, "versioned", &s->versioned)) {
    free(s);
    return NULL;
  }
  return sk_kernel_new(c, export_compute, s, free);
}

/* ---- import ------------------------------------------------------------- */

typedef struct import_state {
  TF_DataType dtype;
  bool versioned;
  dlp_copy_mode copy;
} import_state;

/* An imported managed tensor: calls the producer's deleter once. */
typedef struct import_ref {
  void* managed;
  bool versioned;
  sim_device* mapped_on; /* device the range is mapped into, or NULL */
  void* data;
  uint64_t nbytes;
  bool owned; /* false: the caller still owns the managed tensor */
} import_ref;

static void import_release(import_ref* r) {
  if (r->mapped_on != NULL)
    SIM_CHECK(sim_mem_unregister_host(r->mapped_on, r->data, r->nbytes) ==
              SIM_OK);
  if (!r->owned) {
    free(r);
    return;
  }
  if (r->versioned) {
    DLManagedTensorVersioned* m = r->managed;
    if (m->deleter != NULL) m->deleter(m);
  } else {
    DLManagedTensor* m = r->managed;
    if (m->deleter != NULL) m->deleter(m);
  }
  free(r);
}

/* TF_NewTensor's deallocator: TF frees the zero-copy tensor. */
static void import_dealloc(void* data, size_t len, void* arg) {
  (void)data;
  (void)len;
  import_release(arg);
}

typedef struct gather_args {
  dlp_view view;
  void* dst;
  import_ref* ref; /* released after the copy */
} gather_args;

static void gather_run(sk_launch* l, void* p) {
  (void)l;
  gather_args* a = p;
  dlp_gather(&a->view, a->dst);
  a->ref->owned = true; /* the op succeeds: the tensor was ours to delete */
  import_release(a->ref);
  a->ref = NULL;
}

/* The copy never ran (the stream had failed): the op fails, and the caller
 * keeps the managed tensor. */
static void gather_cleanup(void* p) {
  gather_args* a = p;
  if (a->ref != NULL) import_release(a->ref);
}

static void import_compute(sk_launch* l, void* state) {
  const import_state* s = state;
  if (refuse_early_completion(l, "SimdevFromDlpack")) return;
  TF_Tensor* addr_t = sk_input(l, 0);
  if (addr_t == NULL) return;
  if (TF_NumDims(addr_t) != 0) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "SimdevFromDlpack: address must be an int64 scalar");
    return;
  }
  void* managed = (void*)(intptr_t) * (const int64_t*)sk_data(addr_t);
  if (managed == NULL) {
    sk_fail(l, TF_INVALID_ARGUMENT, "SimdevFromDlpack: address is NULL");
    return;
  }
  /* Validation and the share-or-copy decision: the code the fuzz target
   * drives (dlp_plan_import). */
  DLDataType want;
  SIM_CHECK(to_dl_dtype(s->dtype, &want)); /* the op's type list */
  dlp_import_plan plan;
  char msg[256];
  if (dlp_plan_import(managed, s->versioned, want, s->copy,
                      tfc_tensor_alignment(), &plan, msg,
                      sizeof(msg)) != DLP_OK) {
    sk_fail(l, TF_INVALID_ARGUMENT, "SimdevFromDlpack: %s", msg);
    return;
  }
  const dlp_view v = plan.view;
  import_ref* ref = calloc(1, sizeof(*ref));
  if (ref == NULL) {
    sk_fail(l, TF_RESOURCE_EXHAUSTED, "simdev: out of host memory");
    return;
  }
  ref->managed = managed;
  ref->versioned = s->versioned;
  SIM_CHECK(v.ndim >= 0 && v.ndim <= SK_MAX_DIMS); /* dlp_check_tensor's */
  sk_shape shape = {.nd = v.ndim, .n = v.elements};
  memcpy(shape.d, v.shape, sizeof(int64_t) * (size_t)v.ndim);

  if (plan.action == DLP_IMPORT_EMPTY) { /* done with the tensor now */
    if (sk_output(l, 0, &shape) != NULL) {
      ref->owned = true;
      import_release(ref);
    } else {
      free(ref); /* the op fails: the caller keeps the managed tensor */
    }
    return;
  }
  if (plan.action == DLP_IMPORT_COPY) {
    /* A fresh SIMDEV buffer, filled on the stream. */
    TF_Tensor* out = sk_output(l, 0, &shape);
    gather_args* a = out ? sk_args(l, sizeof(*a)) : NULL;
    if (a == NULL) {
      free(ref); /* not ours: the caller keeps the managed tensor */
      return;
    }
    a->view = v;
    a->dst = sk_mdata(out);
    a->ref = ref;
    sk_args_cleanup(l, gather_cleanup);
    sk_work(l, gather_run, "SimdevFromDlpack copy");
    return;
  }

  /* Zero-copy: map the range into the device, wrap it. */
  sim_stream* stream = sk_stream(l);
  if (stream == NULL) {
    free(ref);
    return;
  }
  sim_device* dev = sim_stream_device(stream);
  if (sim_mem_register_host(dev, v.data, v.nbytes) != SIM_OK) {
    free(ref);
    sk_fail(l, TF_RESOURCE_EXHAUSTED,
            "SimdevFromDlpack: cannot map the buffer into %s",
            sim_device_name(dev));
    return;
  }
  ref->mapped_on = dev;
  ref->data = v.data;
  ref->nbytes = v.nbytes;
  TF_Tensor* t = TF_NewTensor(s->dtype, shape.d, shape.nd, v.data,
                              (size_t)v.nbytes, import_dealloc, ref);
  if (t == NULL) { /* TF did not take the buffer: undo the mapping only */
    SIM_CHECK(sim_mem_unregister_host(dev, v.data, v.nbytes) == SIM_OK);
    free(ref);
    sk_fail(l, TF_INTERNAL, "SimdevFromDlpack: TF_NewTensor failed");
    return;
  }
  /* From here on TF owns the managed tensor through t, unless setting the
   * output fails: then the deallocator must not delete it. */
  ref->owned = true;
  TF_Status* st = sk_status(l);
  TF_SetOutput(sk_context(l), 0, t, st);
  if (TF_GetCode(st) != TF_OK) ref->owned = false;
  TF_DeleteTensor(t);
  sk_status_ok(l, "SimdevFromDlpack: setting output");
}

static void* import_create(TF_OpKernelConstruction* c) {
  import_state* s = sk_state_new(c, sizeof(*s));
  char copy[16];
  if (s == NULL) return NULL;
  if (!sk_attr_type(c, "dtype", &s->dtype) ||
      !sk_attr_bool(c, "versioned", &s->versioned) ||
      !sk_attr_string(c, "copy", copy, sizeof(copy))) {
    free(s);
    return NULL;
  }
  /* The op definition limits copy to these three. */
  s->copy = strcmp(copy, "never") == 0    ? DLP_COPY_NEVER
            : strcmp(copy, "always") == 0 ? DLP_COPY_ALWAYS
                                          : DLP_COPY_IF_NEEDED;
  return sk_kernel_new(c, import_compute, s, free);
}

/* ---- op definitions and registration ------------------------------------ */

static void scalar_shape(TF_ShapeInferenceContext* ctx, TF_Status* st) {
  TF_ShapeHandle* h = TF_ShapeInferenceContextScalar(ctx);
  TF_ShapeInferenceContextSetOutput(ctx, 0, h, st);
  TF_DeleteShapeHandle(h);
}

static void unknown_shape(TF_ShapeInferenceContext* ctx, TF_Status* st) {
  TF_ShapeInferenceContextSetUnknownShape(ctx, st);
}

static bool define_op(const char* name, const char* const* specs,
                      void (*shape_fn)(TF_ShapeInferenceContext*, TF_Status*),
                      char* msg, size_t len) {
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(name);
  for (const char* const* sp = specs; *sp != NULL; sp++) {
    const char* spec = *sp + 2; /* "i:", "o:" or "a:" prefix */
    switch ((*sp)[0]) {
      case 'i': TF_OpDefinitionBuilderAddInput(b, spec); break;
      case 'o': TF_OpDefinitionBuilderAddOutput(b, spec); break;
      default: TF_OpDefinitionBuilderAddAttr(b, spec); break;
    }
  }
  /* Each run makes or consumes a managed tensor: never fold, dedupe or
   * prune it as if it were a pure function. */
  TF_OpDefinitionBuilderSetIsStateful(b, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(b, shape_fn);
  TF_Status* st = TF_NewStatus();
  TF_RegisterOpDefinition(b, st); /* takes b */
  bool ok = TF_GetCode(st) == TF_OK;
  if (!ok) snprintf(msg, len, "defining op %s: %s", name, TF_Message(st));
  TF_DeleteStatus(st);
  return ok;
}

bool sk_register_dlpack_ops(char* msg, size_t len) {
  static const char* const kTo[] = {"i:tensor: T", "o:address: int64",
                                    "a:T: " DLPACK_TYPES,
                                    "a:versioned: bool = false", NULL};
  static const char* const kFrom[] = {
      "i:address: int64",
      "o:tensor: dtype",
      "a:dtype: " DLPACK_TYPES,
      "a:versioned: bool = false",
      "a:copy: {'never', 'if_needed', 'always'} = 'never'",
      NULL};
  if (!define_op("SimdevToDlpack", kTo, scalar_shape, msg, len) ||
      !define_op("SimdevFromDlpack", kFrom, unknown_shape, msg, len))
    return false;
  static const char* const kAddress[] = {"address", NULL};
  static const sk_op ops[] = {
      {"SimdevToDlpack", export_create, "T", kTypes, kAddress},
      {"SimdevFromDlpack", import_create, "dtype", kTypes, kAddress},
      {NULL},
  };
  return sk_register_ops(ops, msg, len);
}
