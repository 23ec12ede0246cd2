/*
 * sk_tf.h - the one way a kernel file includes TensorFlow's kernel C API.
 *
 * tensorflow/c/kernels.h defines `const size_t TF_InputRange_Args_STRUCT_SIZE
 * = ...;` at file scope. In C++ that has internal linkage; in C it is an
 * external definition, so a second includer in the same library fails to link
 * with "multiple definition". Every includer therefore declares it weak (the
 * linker keeps one copy). simdev never reads it.
 */
#ifndef SIMDEV_KERNELS_SK_TF_H_
#define SIMDEV_KERNELS_SK_TF_H_

#define TF_InputRange_Args_STRUCT_SIZE \
  __attribute__((weak)) TF_InputRange_Args_STRUCT_SIZE
#include "tensorflow/c/kernels.h"
#undef TF_InputRange_Args_STRUCT_SIZE

#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

#endif /* SIMDEV_KERNELS_SK_TF_H_ */
