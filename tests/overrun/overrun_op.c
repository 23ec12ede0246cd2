/*
 * overrun_op.c - a deliberately broken custom op, for tests only (never
 * shipped): tests/tf/test_valgrind.py proves that `python -m simdev.valgrind`
 * still reports a real device-memory bug once simdev's suppressions hide the
 * noise.
 *
 * SimdevTestOverrun(x: float) -> y: float, y of x's shape, every element 1.
 * Its SIMDEV kernel allocates y on the device through TF's kernel framework
 * (TF_AllocateOutput: TF's allocator for SIMDEV, i.e. simdev's
 * sim_mem_alloc when SIMDEV_BFC=0) and then writes ONE element past y's end,
 * from the host, on TF's thread (simdev's default, non-discrete memory is
 * host-addressable). Memcheck knows y's bounds from device_sim's client
 * requests and reports the write with this kernel's compute function in the
 * stack.
 *
 * Registered at load time (tf.load_op_library dlopens the library and
 * collects the ops registered meanwhile), through TF's C API only. The
 * kernel reads nothing of x but its shape, so it needs no synchronization
 * with simdev's streams: y is written before the kernel returns, i.e. before
 * TF hands y to any later op.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensorflow/c/kernels.h"

/* ops.h declares these structs without typedefs (it compiles as C++ only);
 * C11 allows the typedefs here, before it. */
typedef struct TF_DimensionHandle TF_DimensionHandle;
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_ShapeHandle TF_ShapeHandle;
typedef struct TF_ShapeInferenceContext TF_ShapeInferenceContext;
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#define MAX_DIMS 8

static void* overrun_create(TF_OpKernelConstruction* ctx) {
  static int token;
  return &token; /* nothing to keep per kernel */
}

static void overrun_delete(void* kernel) {}

/* Named after the op so that memcheck's stack names it. Not static: the
 * symbol stays in the dynamic table even if the library is stripped. */
void SimdevTestOverrun_Compute(void* kernel, TF_OpKernelContext* ctx);
void SimdevTestOverrun_Compute(void* kernel, TF_OpKernelContext* ctx) {
  TF_Status* st = TF_NewStatus();
  TF_Tensor* x = NULL;
  TF_GetInput(ctx, 0, &x, st);
  if (TF_GetCode(st) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, st);
    TF_DeleteStatus(st);
    return;
  }
  int nd = TF_NumDims(x);
  if (nd > MAX_DIMS) {
    TF_SetStatus(st, TF_INVALID_ARGUMENT, "SimdevTestOverrun: rank > 8");
    TF_OpKernelContext_Failure(ctx, st);
    TF_DeleteTensor(x);
    TF_DeleteStatus(st);
    return;
  }
  int64_t dims[MAX_DIMS];
  int64_t n = 1;
  for (int i = 0; i < nd; i++) {
    dims[i] = TF_Dim(x, i);
    n *= dims[i];
  }
  TF_DeleteTensor(x);
  TF_Tensor* y = TF_AllocateOutput(ctx, 0, TF_FLOAT, dims, nd,
                                   (size_t)n * sizeof(float), st);
  if (TF_GetCode(st) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, st);
    TF_DeleteStatus(st);
    return;
  }
  float* p = (float*)TF_TensorData(y);
  volatile float* vp = p; /* keep the bad store as written */
  for (int64_t i = 0; i < n; i++) vp[i] = 1.0f;
  vp[n] = 1.0f; /* THE BUG: one element past the end of y */
  TF_DeleteTensor(y);
  TF_DeleteStatus(st);
}

static void same_shape(TF_ShapeInferenceContext* ctx, TF_Status* st) {
  TF_ShapeHandle* s = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, s, st);
  if (TF_GetCode(st) == TF_OK) TF_ShapeInferenceContextSetOutput(ctx, 0, s, st);
  TF_DeleteShapeHandle(s);
}

/* A failure here is a broken test setup: say so and stop the process (no
 * user code ever loads this library). */
static void must(TF_Status* st, const char* what) {
  if (TF_GetCode(st) == TF_OK) return;
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, what, TF_Message(st));
  abort();
}

__attribute__((constructor)) static void register_overrun(void) {
  TF_Status* st = TF_NewStatus();
  TF_OpDefinitionBuilder* op = TF_NewOpDefinitionBuilder("SimdevTestOverrun");
  TF_OpDefinitionBuilderAddInput(op, "x: float");
  TF_OpDefinitionBuilderAddOutput(op, "y: float");
  TF_OpDefinitionBuilderSetShapeInferenceFunction(op, same_shape);
  TF_RegisterOpDefinition(op, st); /* takes ownership of op */
  must(st, "TF_RegisterOpDefinition(SimdevTestOverrun)");
  TF_KernelBuilder* k =
      TF_NewKernelBuilder("SimdevTestOverrun", "SIMDEV", overrun_create,
                          SimdevTestOverrun_Compute, overrun_delete);
  TF_RegisterKernelBuilder("SimdevTestOverrun", k, st);
  must(st, "TF_RegisterKernelBuilder(SimdevTestOverrun, SIMDEV)");
  TF_DeleteStatus(st);
}
