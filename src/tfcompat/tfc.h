/*
 * tfc.h - what differs between the TensorFlow releases simdev builds
 * against (2.16 to 2.21, CMakeLists.txt's SIMDEV_TF_RELEASES), in one place
 * (prefix tfc_). docs/tf-releases.md has the measurements behind each entry
 * and the drift report that finds new ones.
 *
 * Two kinds of difference, two answers:
 *  - Known when simdev is compiled: the release it builds against
 *    (TFC_TF_MINOR, checked against the headers below), so code that
 *    differs reads TFC_TF_MINOR. Struct layouts and *_STRUCT_SIZE values are
 * the same in every listed release (measured), so no surface needs a layout of
 * its own.
 *  - Known only when simdev runs: a function a release's headers declare
 *    but its libraries may not export (kernels_experimental.h's variable
 *    functions are exported by 2.16-2.18 and by no library of 2.19-2.21;
 *    TF_TensorDefaultAlignment is not in 2.16; the Grappler helpers live in
 *    libtensorflow_cc, which TF's Python module may load privately). simdev
 *    never links such a function: tfc_sym finds it in the running process,
 *    and a missing one disables its feature with a message instead of
 *    failing the load with "undefined symbol".
 *
 * Thread contract: any thread; tfc_sym never loads a library and keeps no
 * state.
 */
#ifndef SIMDEV_TFCOMPAT_TFC_H_
#define SIMDEV_TFCOMPAT_TFC_H_

#include <stddef.h>

/* The minor release simdev is compiled against, 16 ... 21: CMake reads it
 * from the wheel's metadata (SIMDEV_TF_MINOR). The headers confirm it
 * where they can: up to 2.19 version.h defines TF_MINOR_VERSION; 2.20
 * moved it to release_version.h, which takes it from TF's own build flags
 * and so says nothing to a plugin (its presence still means >= 2.20;
 * measured on the 2.16.2 ... 2.21.0 wheels). */
#ifndef SIMDEV_TF_MINOR
#error "the build defines SIMDEV_TF_MINOR (CMakeLists.txt)"
#endif
#if SIMDEV_TF_MINOR < 16 || SIMDEV_TF_MINOR > 21
#error "simdev builds against TensorFlow 2.16 to 2.21 (CMakeLists.txt)"
#endif
#if __has_include("tensorflow/core/public/release_version.h")
#if SIMDEV_TF_MINOR < 20
#error "TensorFlow's headers are 2.20 or later, not SIMDEV_TF_MINOR's"
#endif
#else
#include "tensorflow/core/public/version.h"
#if TF_MAJOR_VERSION != 2 || TF_MINOR_VERSION != SIMDEV_TF_MINOR
#error "TensorFlow's headers are not the release SIMDEV_TF_MINOR names"
#endif
#endif
#define TFC_TF_MINOR SIMDEV_TF_MINOR

/* The address of TensorFlow function `name` in the running process, or
 * NULL: looked up among the globally visible symbols, then in TF's
 * libraries if the process already loaded them (libtensorflow_framework,
 * libtensorflow_cc, libtensorflow), never loading one. */
void* tfc_sym(const char* name);

/* tfc_sym into a typed function pointer: TFC_FIND(fp, TF_AssignVariable)
 * sets fp (declared with the header's type, e.g.
 * `__typeof__(&TF_AssignVariable) fp;`) and is true when found. The header
 * declaration only gives the type: no reference to the symbol is emitted,
 * so the plugin still loads where the function is missing. */
#define TFC_FIND(fp, fn) tfc_find_((void**)&(fp), #fn)
int tfc_find_(void** out, const char* name);

/* TF's tensor buffer alignment: TF_TensorDefaultAlignment() from 2.17 on,
 * found at run time (never linked: the plugin must load, and refuse, in
 * 2.16 too) and cached; 2.16's headers declare no such function, and its
 * allocator aligns to
 * Allocator::kAllocatorAlignment, 64 bytes (2.16.2's
 * include/tsl/framework/allocator.h), what later releases' function
 * returns. */
size_t tfc_tensor_alignment(void);

#endif /* SIMDEV_TFCOMPAT_TFC_H_ */
