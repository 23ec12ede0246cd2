/*
 * dlp.h - DLPack for simdev (src/dlpack/, prefix dlp_): managed tensors over
 * simdev buffers for export, and the validation of incoming ones and the
 * decision how to import them (share or copy). No TensorFlow here; the ops
 * that move TF tensors in and out build on this
 * (src/kernels/interop/dlpack_ops.c), and so does the fuzz target
 * (tests/fuzz/fuzz_dlpack.c).
 *
 * DLPack's ABI comes from the installed header (TensorFlow's wheel ships
 * dlpack.h 1.1: DLManagedTensor and DLManagedTensorVersioned).
 *
 * simdev memory is host-addressable, so tensors are exchanged as kDLCPU,
 * with byte_offset 0 and strides always filled (DLPack 1.2 requires them
 * when ndim > 0). On a discrete device (SIMDEV_DISCRETE=1) the caller
 * passes the buffer's host-accessible alias (sim_mem_alias), never the
 * address TF holds (src/kernels/interop/dlpack_ops.c).
 *
 * Thread contract: every function is reentrant. A deleter built here may be
 * called from any thread, exactly once (the consumer's duty).
 */
#ifndef SIMDEV_DLPACK_DLP_H_
#define SIMDEV_DLPACK_DLP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

/* dlpack.h 1.1 declares the versioned struct without a typedef; C11 allows
 * repeating a typedef, so this also builds against headers that have one. */
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;

#ifdef __cplusplus
extern "C" {
#endif

/* Highest rank simdev exchanges, on import and on export. It is the limit
 * of simdev's kernels (SK_MAX_DIMS in src/kernels/framework/sk.h; dlpack_ops.c
 * fails to compile if the two differ): a tensor of higher rank could not go
 * through any simdev kernel, and the ops keep shapes in arrays of this size.
 * Anything above it is refused (DLP_EUNSUPPORTED), never truncated. */
#define DLP_MAX_DIMS 16

typedef enum dlp_err {
  DLP_OK = 0,
  DLP_EINVAL = -1,       /* not a valid DLPack tensor (NULL shape, -1 dims) */
  DLP_EUNSUPPORTED = -2, /* valid, but simdev cannot take it zero-copy:
                            dtype, device, byte_offset, strides */
  DLP_EVERSION = -3,     /* a versioned tensor of another major version */
  DLP_ENOMEM = -4,
} dlp_err;

/* What an importer needs from a validated tensor. A zero-copy import needs
 * `compact` (and TF also wants the data aligned and, since TF may write into
 * its tensors, not read_only); anything else can only be copied, with
 * dlp_gather. */
typedef struct dlp_view {
  void* data; /* first element; NULL only when nbytes == 0 */
  DLDataType dtype;
  int ndim;
  int64_t shape[DLP_MAX_DIMS];
  int64_t strides[DLP_MAX_DIMS]; /* in elements: the compact ones when
                                    `compact`, else the producer's, with 0
                                    for dimensions of size 1 */
  int64_t elements;
  uint64_t nbytes; /* of the compact tensor: elements * element size */
  bool compact;    /* row-major without gaps (the strides of size-1 dims and
                      of empty tensors do not matter) */
  bool read_only;  /* DLPACK_FLAG_BITMASK_READ_ONLY (versioned only) */
  bool aligned64;  /* data % 64 == 0 (TF copies unaligned buffers) */
} dlp_view;

/* Bytes per element of a dtype simdev exchanges (lanes 1): float 16/32/64,
 * bfloat 16, int and uint 8/16/32/64, bool 8, complex 64/128; 0 otherwise. */
size_t dlp_dtype_size(DLDataType dtype);
/* The name of such a dtype ("float32", "bfloat16", "uint8", "bool",
 * "complex64", ...), or NULL for any other. */
const char* dlp_dtype_name(DLDataType dtype);

/* Validates t for an import and fills *out. Strided tensors (transposed,
 * sliced, broadcast with stride 0, negative strides) are valid, with
 * out->compact false; their byte span is checked not to overflow. On error
 * returns a dlp_err and writes why into msg (always NUL-terminated); *out is
 * then unspecified. Never dereferences data. */
int dlp_check_tensor(const DLTensor* t, dlp_view* out, char* msg, size_t len);
/* The same for a managed tensor; the versioned form also checks the major
 * version and reads the read-only flag. */
int dlp_check_legacy(const DLManagedTensor* t, dlp_view* out, char* msg,
                     size_t len);
int dlp_check_versioned(const DLManagedTensorVersioned* t, dlp_view* out,
                        char* msg, size_t len);

/* ---- import decision ----------------------------------------------------
 *
 * Everything SimdevFromDlpack decides before it touches TensorFlow, in one
 * function, so that the op and the fuzz target (tests/fuzz) run the same
 * code: validate the managed tensor, check it holds the dtype the op
 * produces, then choose between sharing the producer's memory and copying
 * it, following the array API's `copy` argument. */
typedef enum dlp_copy_mode {
  DLP_COPY_NEVER,     /* share or fail */
  DLP_COPY_IF_NEEDED, /* share when possible, else copy */
  DLP_COPY_ALWAYS,    /* copy even when sharing is possible */
} dlp_copy_mode;

typedef enum dlp_action {
  DLP_IMPORT_EMPTY, /* no elements: no memory to share or copy; the
                       producer's tensor can be deleted at once */
  DLP_IMPORT_SHARE, /* wrap view.data .. view.data + view.nbytes as is */
  DLP_IMPORT_COPY,  /* dlp_gather(&view, dst) into a fresh buffer of
                       view.nbytes bytes (compact row-major) */
} dlp_action;

typedef struct dlp_import_plan {
  dlp_view view; /* the validated tensor; view.nbytes is the byte count
                    of the shared range or of the copy's buffer */
  dlp_action action;
  const char* unshareable; /* why the memory cannot be shared (a static
                              string), NULL if it can or there is none */
} dlp_import_plan;

/* Plans the import of `managed` (a DLManagedTensorVersioned when
 * `versioned`, else a DLManagedTensor) as a tensor of dtype `want`.
 * Sharing needs elements in compact row-major order, data aligned to
 * `alignment` bytes (a power of two: TensorFlow's 64) and a writable
 * tensor (TF tensors are writable). Returns DLP_OK and fills *out, or the
 * dlp_err of dlp_check_* (then msg says why) or DLP_EINVAL when the dtype is
 * not `want`, when copy is DLP_COPY_NEVER and the memory cannot be shared, or
 * when alignment is not a power of two. Reads only the tensor's metadata
 * (never its data) and changes nothing: on error the caller still owns
 * `managed`. Reentrant. */
int dlp_plan_import(const void* managed, bool versioned, DLDataType want,
                    dlp_copy_mode copy, size_t alignment, dlp_import_plan* out,
                    char* msg, size_t len);

/* Copies the elements of a validated view, in row-major order, to the
 * compact buffer dst of v->nbytes bytes (which must not overlap the
 * source). Reads exactly the elements the strides name. */
void dlp_gather(const dlp_view* v, void* dst);

/* Export: a managed tensor over `data` (kDLCPU, compact row-major strides
 * always filled, byte_offset 0). When the consumer calls the deleter,
 * release(owner) runs (e.g. to drop the TF tensor that keeps data alive),
 * then the managed tensor is freed. release may be NULL. */
typedef void (*dlp_release_fn)(void* owner);
int dlp_export_legacy(void* data, DLDataType dtype, int ndim,
                      const int64_t* shape, void* owner, dlp_release_fn release,
                      DLManagedTensor** out);
int dlp_export_versioned(void* data, DLDataType dtype, int ndim,
                         const int64_t* shape, bool read_only, void* owner,
                         dlp_release_fn release,
                         DLManagedTensorVersioned** out);

#ifdef __cplusplus
}
#endif

#endif /* SIMDEV_DLPACK_DLP_H_ */
