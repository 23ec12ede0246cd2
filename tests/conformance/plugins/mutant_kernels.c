/*
 * mutant_kernels.c - a TF_InitKernel that breaks each kernel-registration
 * rule once, next to registrations that are correct.
 *
 * Peer: none in particular; these are the mistakes TF's kernel C API lets a
 * plugin make without an error status (TF registers every one of them).
 * mini.c provides SE_InitPlugin unchanged (no mini_mutate).
 *
 * Expected grades (test kernels.registrations, result "fail"), one op per
 * case so that each failure names the case that caused it:
 *   correct, nothing fires: Relu {T: float}; Reshape {T: float} with
 *     "shape" in host memory; Abs {T: float} and Abs {T: double} (disjoint);
 *     Floor {T: float} at priorities 1 and 2 (TF takes the higher).
 *   NoSuchOpForConformance        kernels.op_exists (recommended)
 *   Elu {T: float} on CPU         kernels.device_type (recommended) and
 *                                 kernels.no_duplicates (required): it is
 *                                 TF's own CPU kernel's KernelDef
 *   MatMul {Tx: float}            kernels.constraint_attr_exists (required)
 *   Cast {Truncate: float}        kernels.constraint_attr_exists (required):
 *                                 Truncate is a bool attr
 *   Sqrt {T: string}              kernels.constraint_types_allowed
 *                                 (recommended)
 *   Identity, "bogus" in host memory  kernels.host_memory_arg_exists
 *                                 (required)
 *   Square {T: float} twice       kernels.no_duplicates (required)
 *   Neg {T: float} and Neg        kernels.no_duplicates (required): both
 *     unconstrained               match T=float
 *   Tanh {T: no value}            kernels.constraint_values (required)
 *   Sign {T: float, 1}            kernels.constraint_values (required)
 * The last two cannot be built with TF_KernelBuilder_TypeConstraint; they
 * go through TF_RegisterKernelBuilderWithKernelDef with a serialized
 * KernelDef written out below.
 *
 * The kernels never run (the harness only reads TF's registry); if one
 * did, it fails with Unimplemented rather than pretend to compute.
 *
 * kernels.h defines a const object at file scope, which in C is an external
 * definition: it is included from this file only.
 */
#include <stdio.h>

#include "mini.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_status.h"

#define DEVICE "MINI" /* mini.c's SP_Platform.type */

static void* kernel_create(TF_OpKernelConstruction* ctx) {
  (void)ctx;
  return NULL;
}

static void kernel_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* st = TF_NewStatus();
  TF_SetStatus(st, TF_UNIMPLEMENTED, "test kernel: never run");
  TF_OpKernelContext_Failure(ctx, st);
  TF_DeleteStatus(st);
}

static void kernel_delete(void* kernel) {
  (void)kernel;
}

/* TF_InitKernel has no status to return: a registration TF refuses is
 * printed, and the test fails on the line. */
static void report(const char* op, const char* what, TF_Status* st) {
  if (TF_GetCode(st) != TF_OK) {
    fprintf(stderr, "mutant_kernels: %s for %s failed: %s\n", what, op,
            TF_Message(st));
  }
}

typedef struct kernel {
  const char* op;
  const char* device;
  const char* attr; /* type constraint attr, or NULL */
  TF_DataType type;
  const char* host; /* host-memory argument, or NULL */
  int priority;
} kernel;

static void add(const kernel* k) {
  TF_Status* st = TF_NewStatus();
  TF_KernelBuilder* b = TF_NewKernelBuilder(k->op, k->device, kernel_create,
                                            kernel_compute, kernel_delete);
  if (k->attr != NULL) {
    TF_KernelBuilder_TypeConstraint(b, k->attr, k->type, st);
    report(k->op, "TF_KernelBuilder_TypeConstraint", st);
  }
  if (k->host != NULL) TF_KernelBuilder_HostMemory(b, k->host);
  if (k->priority != 0) TF_KernelBuilder_Priority(b, k->priority);
  TF_RegisterKernelBuilder(k->op, b, st);
  report(k->op, "TF_RegisterKernelBuilder", st);
  TF_DeleteStatus(st);
}

/* `def` is a serialized KernelDef; TF reads it as a C string, so it holds
 * no zero byte. */
static void add_def(const char* op, const char* def) {
  TF_Status* st = TF_NewStatus();
  TF_KernelBuilder* b = TF_NewKernelBuilder(op, DEVICE, kernel_create,
                                            kernel_compute, kernel_delete);
  TF_RegisterKernelBuilderWithKernelDef(def, op, b, st);
  report(op, "TF_RegisterKernelBuilderWithKernelDef", st);
  TF_DeleteStatus(st);
}

static const kernel kernels[] = {
    /* correct */
    {"Relu", DEVICE, "T", TF_FLOAT, NULL, 0},
    {"Reshape", DEVICE, "T", TF_FLOAT, "shape", 0},
    {"Abs", DEVICE, "T", TF_FLOAT, NULL, 0},
    {"Abs", DEVICE, "T", TF_DOUBLE, NULL, 0},
    {"Floor", DEVICE, "T", TF_FLOAT, NULL, 1},
    {"Floor", DEVICE, "T", TF_FLOAT, NULL, 2},
    /* one rule broken each */
    {"NoSuchOpForConformance", DEVICE, NULL, TF_FLOAT, NULL, 0},
    {"Elu", "CPU", "T", TF_FLOAT, NULL, 0},
    {"MatMul", DEVICE, "Tx", TF_FLOAT, NULL, 0},
    {"Cast", DEVICE, "Truncate", TF_FLOAT, NULL, 0},
    {"Sqrt", DEVICE, "T", TF_STRING, NULL, 0},
    {"Identity", DEVICE, "T", TF_FLOAT, "bogus", 0},
    {"Square", DEVICE, "T", TF_FLOAT, NULL, 0},
    {"Square", DEVICE, "T", TF_FLOAT, NULL, 0},
    {"Neg", DEVICE, "T", TF_FLOAT, NULL, 0},
    {"Neg", DEVICE, NULL, TF_FLOAT, NULL, 0},
};

/* kernels.h declares it as `void TF_InitKernel()`, which in C is no
 * prototype; TF's loader finds it by name (dlsym), so it is exported. */
__attribute__((visibility("default"))) void TF_InitKernel(void);

__attribute__((visibility("default"))) void TF_InitKernel(void) {
  for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
    add(&kernels[i]);
  }
  /* KernelDef: op (field 1), device_type (2), constraint (3: name 1,
   * allowed_values 2 = AttrValue whose list (1) holds type (6) and i (3)
   * entries). Tanh: a constraint on T with no allowed_values. */
  add_def("Tanh", "\x0a\x04Tanh\x12\x04" DEVICE "\x1a\x03\x0a\x01T");
  /* Sign: T allows float (DataType 1) and the int 1: two kinds. */
  add_def("Sign", "\x0a\x04Sign\x12\x04" DEVICE
                  "\x1a\x0b\x0a\x01T\x12\x06\x0a\x04\x30\x01\x18\x01");
}
