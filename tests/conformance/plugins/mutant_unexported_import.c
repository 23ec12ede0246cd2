/*
 * mutant_unexported_import.c - calls a TF function TF's headers declare and
 * its libraries do not export.
 *
 * Peer: a plugin with its own variable kernels (AssignVariableOp through
 * kernels_experimental.h's TF_AssignVariable), built for TF 2.16-2.18,
 * whose libtensorflow_framework.so.2 exports it; no library of TF 2.19-2.21
 * does (tensorflow#126374 reports the loss at 2.20). It builds: a shared
 * library may leave symbols undefined (CMake links this one without
 * --no-undefined). TF's dlopen(RTLD_NOW) then fails with "undefined symbol:
 * TF_AssignVariable" and `import tensorflow` raises NotFoundError.
 *
 * Expected grade (against TF 2.19-2.21): required failure
 * "registration.imports" (callback dlopen) naming TF_AssignVariable and
 * kernels_experimental.h; dlopen fails, so nothing else runs (no platform,
 * device count null). Against 2.16-2.18 it would pass.
 *
 * kernels.h (included by kernels_experimental.h) defines a const object at
 * file scope: it is included from this file only.
 */
#include "mini.h"
#include "tensorflow/c/kernels_experimental.h"

static void copy_tensor(TF_OpKernelContext* ctx, TF_Tensor* source,
                        TF_Tensor* dest) {
  (void)ctx;
  (void)source;
  (void)dest;
}

/* An AssignVariableOp compute function as such a plugin writes it. Never
 * registered or run: the plugin cannot even be loaded. */
static void assign_compute(void* kernel, TF_OpKernelContext* ctx) {
  (void)kernel;
  TF_Status* status = TF_NewStatus();
  TF_AssignVariable(ctx, 0, 1, /*validate_shape=*/false, copy_tensor, status);
  if (TF_GetCode(status) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, status);
  }
  TF_DeleteStatus(status);
}

/* Keeps assign_compute (and its call) in the library, as a kernel
 * registration would. */
void (*volatile mutant_assign_compute)(void*, TF_OpKernelContext*);

void mini_mutate(SE_PlatformRegistrationParams* params) {
  (void)params;
  mutant_assign_compute = assign_compute;
}
