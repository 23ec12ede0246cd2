/*
 * kernels.c - TF_InitKernel: registration of simdev's kernels with the
 * kernel C API.
 *
 * This is the only translation unit that includes tensorflow/c/kernels.h:
 * that header defines a file-scope `const size_t` object which, in C, is an
 * external definition, so a second includer in the same library would give
 * "multiple definition" at link time.
 *
 * The device/stream foundation needs no kernel of its own: TensorFlow serves
 * the ops used to move tensors between host and SIMDEV (_Send/_Recv, Identity,
 * Const) with its DEVICE_DEFAULT kernels and our memcpy callbacks. The
 * compute kernel set (MatMul, Conv2D, Bitcast, ...) is registered here by the
 * kernels work item; until then TF_InitKernel registers nothing, and ops
 * without a simdev kernel are refused on SIMDEV when soft placement is off.
 */
#include "tensorflow/c/kernels.h"

/* Looked up by TensorFlow with dlsym after SE_InitPlugin. */
__attribute__((visibility("default"))) void TF_InitKernel(void);

void TF_InitKernel(void) {}
