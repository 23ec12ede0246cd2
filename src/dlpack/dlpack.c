/*
 * dlpack.c - validation of incoming DLPack tensors and managed tensors for
 * export (see dlp.h).
 *
 * Validation reads only the tensor's metadata, never its data, and treats
 * every field as hostile: it is the code the fuzz target drives
 * (tests/fuzz/fuzz_dlpack.c). Sizes are computed with overflow checks.
 *
 * An exported tensor is one allocation: the managed struct, then its shape
 * and strides arrays, then the owner's release callback.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlp.h"

static int fail(int err, char* msg, size_t len, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(int err, char* msg, size_t len, const char* fmt, ...) {
  if (msg != NULL && len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
  }
  return err;
}

size_t dlp_dtype_size(DLDataType t) {
  if (t.lanes != 1) return 0;
  switch (t.code) {
    case kDLFloat:
      return t.bits == 16 || t.bits == 32 || t.bits == 64 ? t.bits / 8u : 0;
    case kDLBfloat: return t.bits == 16 ? 2 : 0;
    case kDLInt:
    case kDLUInt:
      return t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64
                 ? t.bits / 8u
                 : 0;
    case kDLBool: return t.bits == 8 ? 1 : 0;
    case kDLComplex: return t.bits == 64 || t.bits == 128 ? t.bits / 8u : 0;
    default: return 0;
  }
}

const char* dlp_dtype_name(DLDataType t) {
  if (dlp_dtype_size(t) == 0) return NULL;
  switch (t.code) {
    case kDLFloat:
      return t.bits == 16 ? "float16" : t.bits == 32 ? "float32" : "float64";
    case kDLBfloat: return "bfloat16";
    case kDLInt:
      return t.bits == 8    ? "int8"
             : t.bits == 16 ? "int16"
             : t.bits == 32 ? "int32"
                            : "int64";
    case kDLUInt:
      return t.bits == 8    ? "uint8"
             : t.bits == 16 ? "uint16"
             : t.bits == 32 ? "uint32"
                            : "uint64";
    case kDLBool: return "bool";
    default: return t.bits == 64 ? "complex64" : "complex128";
  }
}

/* Strides describe the compact row-major layout when every dimension of
 * size > 1 has the stride of the dimensions after it; a dimension of size 1
 * is never stepped over, and a tensor with no elements has no layout. */
static bool is_compact(const DLTensor* t, int64_t elements) {
  if (t->strides == NULL || elements == 0) return true;
  int64_t want = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != want) return false;
    want *= t->shape[i];
  }
  return true;
}

/* The byte distance between the lowest and the highest element a strided
 * tensor names must fit in int64 (so that pointer arithmetic on it is
 * defined). Called with elements > 0, so every dim is >= 1. */
static bool span_fits(const DLTensor* t, size_t esize) {
  int64_t span = 0; /* sum of |stride| * (dim - 1), in elements */
  const int64_t max = INT64_MAX / (int64_t)esize;
  for (int i = 0; i < t->ndim; i++) {
    int64_t d = t->shape[i] - 1, st = t->strides[i];
    if (d == 0) continue;
    if (st == INT64_MIN) return false;
    int64_t a = st < 0 ? -st : st;
    if (a != 0 && d > max / a) return false;
    if (span > max - a * d) return false;
    span += a * d;
  }
  return true;
}

int dlp_check_tensor(const DLTensor* t, dlp_view* out, char* msg, size_t len) {
  if (t == NULL || out == NULL)
    return fail(DLP_EINVAL, msg, len, "DLPack tensor is NULL");
  if (t->ndim < 0)
    return fail(DLP_EINVAL, msg, len, "DLPack tensor has ndim %d",
                (int)t->ndim);
  if (t->ndim > DLP_MAX_DIMS)
    return fail(DLP_EUNSUPPORTED, msg, len,
                "DLPack tensor of rank %d: simdev supports rank <= %d (the "
                "limit of its kernels)",
                (int)t->ndim, DLP_MAX_DIMS);
  if (t->ndim > 0 && t->shape == NULL)
    return fail(DLP_EINVAL, msg, len, "DLPack tensor of rank %d has no shape",
                (int)t->ndim);
  size_t esize = dlp_dtype_size(t->dtype);
  if (esize == 0)
    return fail(DLP_EUNSUPPORTED, msg, len,
                "DLPack dtype (code %u, bits %u, lanes %u) is not supported",
                t->dtype.code, t->dtype.bits, t->dtype.lanes);
  if (t->device.device_type != kDLCPU)
    return fail(DLP_EUNSUPPORTED, msg, len,
                "DLPack device type %d is not host memory (kDLCPU = %d)",
                (int)t->device.device_type, (int)kDLCPU);
  if (t->byte_offset != 0)
    return fail(DLP_EUNSUPPORTED, msg, len,
                "DLPack byte_offset %llu: only 0 is accepted",
                (unsigned long long)t->byte_offset);

  int64_t elements = 1;
  bool zero = false;
  for (int i = 0; i < t->ndim; i++) {
    int64_t d = t->shape[i];
    if (d < 0)
      return fail(DLP_EINVAL, msg, len, "DLPack shape[%d] is %lld", i,
                  (long long)d);
    if (d == 0) zero = true;
    /* The product must stay representable in bytes, zero dims or not. */
    if (d > 0 && elements > (INT64_MAX / (int64_t)esize) / d)
      return fail(DLP_EINVAL, msg, len,
                  "DLPack shape overflows: dims up to %d exceed 2^63 bytes", i);
    if (d > 0) elements *= d;
  }
  if (zero) elements = 0;
  bool compact = is_compact(t, elements);
  if (!compact && !span_fits(t, esize))
    return fail(DLP_EINVAL, msg, len,
                "DLPack strides overflow: the tensor spans more than 2^63 "
                "bytes");
  if (t->data == NULL && elements > 0)
    return fail(DLP_EINVAL, msg, len, "DLPack data is NULL for %lld elements",
                (long long)elements);

  memset(out, 0, sizeof(*out));
  out->data = t->data;
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  int64_t want = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    out->shape[i] = t->shape[i];
    /* A dimension of size 1 is never stepped over, so its stride may be
     * anything a producer wrote (even one whose byte size overflows):
     * the view gets 0, and code stepping over it needs no care. */
    out->strides[i] = compact ? want : t->shape[i] == 1 ? 0 : t->strides[i];
    want *= t->shape[i] > 0 ? t->shape[i] : 1;
  }
  out->elements = elements;
  out->nbytes = (uint64_t)elements * esize;
  out->compact = compact;
  out->aligned64 = ((uintptr_t)t->data % 64) == 0;
  return DLP_OK;
}

/* Copies one row (the innermost dimension) element by element; the
 * element sizes simdev exchanges are 1..16 bytes. */
static void gather_row(char* dst, const char* src, int64_t n, int64_t step,
                       size_t esize) {
  for (int64_t i = 0; i < n; i++)
    memcpy(dst + i * (int64_t)esize, src + i * step, esize);
}

void dlp_gather(const dlp_view* v, void* dst) {
  if (v->elements == 0) return;
  size_t esize = dlp_dtype_size(v->dtype);
  if (v->compact) {
    memcpy(dst, v->data, v->nbytes);
    return;
  }
  const int64_t es = (int64_t)esize;
  int nd = v->ndim;
  int64_t inner = nd > 0 ? v->shape[nd - 1] : 1;
  int64_t step = nd > 0 ? v->strides[nd - 1] * es : 0;
  int64_t idx[DLP_MAX_DIMS] = {0};
  char* out = dst;
  for (int64_t row = 0, rows = v->elements / inner; row < rows; row++) {
    int64_t off = 0; /* byte offset of this row's first element */
    for (int i = 0; i < nd - 1; i++) off += idx[i] * v->strides[i] * es;
    gather_row(out, (const char*)v->data + off, inner, step, esize);
    out += inner * es;
    for (int i = nd - 2; i >= 0; i--) { /* odometer over the outer dims */
      if (++idx[i] < v->shape[i]) break;
      idx[i] = 0;
    }
  }
}

int dlp_check_legacy(const DLManagedTensor* t, dlp_view* out, char* msg,
                     size_t len) {
  if (t == NULL) return fail(DLP_EINVAL, msg, len, "DLManagedTensor is NULL");
  return dlp_check_tensor(&t->dl_tensor, out, msg, len);
}

int dlp_check_versioned(const DLManagedTensorVersioned* t, dlp_view* out,
                        char* msg, size_t len) {
  if (t == NULL)
    return fail(DLP_EINVAL, msg, len, "DLManagedTensorVersioned is NULL");
  if (t->version.major != DLPACK_MAJOR_VERSION)
    return fail(DLP_EVERSION, msg, len,
                "DLPack major version %u: simdev speaks %u",
                (unsigned)t->version.major, (unsigned)DLPACK_MAJOR_VERSION);
  int rc = dlp_check_tensor(&t->dl_tensor, out, msg, len);
  if (rc == DLP_OK)
    out->read_only = (t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return rc;
}

/* ---- import decision ---------------------------------------------------- */

/* Why v's memory cannot become a TF tensor as is, or NULL if it can. */
static const char* unshareable(const dlp_view* v, size_t alignment) {
  if (v->elements == 0) return NULL; /* no memory to share */
  if (!v->compact) return "its strides are not compact row-major";
  if ((uintptr_t)v->data % alignment != 0)
    return "its data is not aligned as TensorFlow requires";
  if (v->read_only) return "it is read-only and TF tensors are writable";
  return NULL;
}

int dlp_plan_import(const void* managed, bool versioned, DLDataType want,
                    dlp_copy_mode copy, size_t alignment, dlp_import_plan* out,
                    char* msg, size_t len) {
  if (out == NULL)
    return fail(DLP_EINVAL, msg, len, "bad import request (no plan to fill)");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return fail(DLP_EINVAL, msg, len,
                "bad import request (alignment %zu must be a power of two)",
                alignment);
  memset(out, 0, sizeof(*out));
  int rc = versioned ? dlp_check_versioned(managed, &out->view, msg, len)
                     : dlp_check_legacy(managed, &out->view, msg, len);
  if (rc != DLP_OK) return rc;
  const dlp_view* v = &out->view;
  if (v->dtype.code != want.code || v->dtype.bits != want.bits ||
      v->dtype.lanes != want.lanes) {
    const char* want_name = dlp_dtype_name(want);
    return fail(DLP_EINVAL, msg, len, "the DLPack tensor holds %s, not %s",
                dlp_dtype_name(v->dtype),
                want_name != NULL ? want_name : "a dtype simdev exchanges");
  }
  out->unshareable = unshareable(v, alignment);
  if (v->elements == 0) {
    out->action = DLP_IMPORT_EMPTY;
  } else if (out->unshareable == NULL && copy != DLP_COPY_ALWAYS) {
    out->action = DLP_IMPORT_SHARE;
  } else if (copy != DLP_COPY_NEVER) {
    out->action = DLP_IMPORT_COPY;
  } else {
    return fail(DLP_EINVAL, msg, len,
                "cannot import without a copy: %s (allow a copy with "
                "copy=None or copy=True)",
                out->unshareable);
  }
  return DLP_OK;
}

/* ---- export ------------------------------------------------------------ */

/* The block behind an exported tensor; `managed` is one of the two structs
 * and is what the consumer's deleter receives. */
typedef struct export_ctx {
  void* owner;
  dlp_release_fn release;
  int64_t dims[2 * DLP_MAX_DIMS]; /* shape, then strides */
} export_ctx;

static int fill_tensor(DLTensor* t, export_ctx* ctx, void* data,
                       DLDataType dtype, int ndim, const int64_t* shape) {
  if (ndim < 0 || ndim > DLP_MAX_DIMS || (ndim > 0 && shape == NULL) ||
      dlp_dtype_size(dtype) == 0)
    return DLP_EINVAL;
  int64_t* sh = ctx->dims;
  int64_t* st = ctx->dims + DLP_MAX_DIMS;
  int64_t stride = 1;
  const int64_t max_elems = INT64_MAX / (int64_t)dlp_dtype_size(dtype);
  for (int i = ndim - 1; i >= 0; i--) {
    if (shape[i] < 0) return DLP_EINVAL;
    int64_t d = shape[i] > 0 ? shape[i] : 1;
    if (stride > max_elems / d) return DLP_EINVAL; /* bytes overflow int64 */
    sh[i] = shape[i];
    st[i] = stride;
    stride *= d;
  }
  t->data = data;
  t->device.device_type = kDLCPU;
  t->device.device_id = 0;
  t->ndim = ndim;
  t->dtype = dtype;
  t->shape = ndim > 0 ? sh : NULL;
  t->strides = ndim > 0 ? st : NULL;
  t->byte_offset = 0;
  return DLP_OK;
}

typedef struct legacy_block {
  DLManagedTensor m;
  export_ctx ctx;
} legacy_block;

typedef struct versioned_block {
  DLManagedTensorVersioned m;
  export_ctx ctx;
} versioned_block;

/* Runs the owner's release and frees the block (ctx lives inside it). */
static void release_block(void* block, export_ctx* ctx) {
  if (ctx->release) ctx->release(ctx->owner);
  free(block);
}

static void delete_legacy(DLManagedTensor* m) {
  legacy_block* b = (legacy_block*)m; /* m is the first member */
  release_block(b, &b->ctx);
}

static void delete_versioned(DLManagedTensorVersioned* m) {
  versioned_block* b = (versioned_block*)m;
  release_block(b, &b->ctx);
}

/* Allocates a zeroed block of `size` bytes whose DLTensor is at offset 0 of
 * its managed struct and whose export_ctx is at ctx_offset, and fills both.
 * NULL (with *rc set) on failure. */
static void* new_block(size_t size, size_t tensor_offset, size_t ctx_offset,
                       void* data, DLDataType dtype, int ndim,
                       const int64_t* shape, void* owner,
                       dlp_release_fn release, int* rc) {
  char* b = calloc(1, size);
  if (b == NULL) {
    *rc = DLP_ENOMEM;
    return NULL;
  }
  export_ctx* ctx = (export_ctx*)(b + ctx_offset);
  *rc = fill_tensor((DLTensor*)(b + tensor_offset), ctx, data, dtype, ndim,
                    shape);
  if (*rc != DLP_OK) {
    free(b);
    return NULL;
  }
  ctx->owner = owner;
  ctx->release = release;
  return b;
}

int dlp_export_legacy(void* data, DLDataType dtype, int ndim,
                      const int64_t* shape, void* owner, dlp_release_fn release,
                      DLManagedTensor** out) {
  if (out == NULL) return DLP_EINVAL;
  int rc;
  legacy_block* b =
      new_block(sizeof(legacy_block), offsetof(legacy_block, m.dl_tensor),
                offsetof(legacy_block, ctx), data, dtype, ndim, shape, owner,
                release, &rc);
  if (b == NULL) return rc;
  b->m.manager_ctx = &b->ctx;
  b->m.deleter = delete_legacy;
  *out = &b->m;
  return DLP_OK;
}

int dlp_export_versioned(void* data, DLDataType dtype, int ndim,
                         const int64_t* shape, bool read_only, void* owner,
                         dlp_release_fn release,
                         DLManagedTensorVersioned** out) {
  if (out == NULL) return DLP_EINVAL;
  int rc;
  versioned_block* b =
      new_block(sizeof(versioned_block), offsetof(versioned_block, m.dl_tensor),
                offsetof(versioned_block, ctx), data, dtype, ndim, shape, owner,
                release, &rc);
  if (b == NULL) return rc;
  b->m.version.major = DLPACK_MAJOR_VERSION;
  b->m.version.minor = DLPACK_MINOR_VERSION;
  b->m.manager_ctx = &b->ctx;
  b->m.deleter = delete_versioned;
  b->m.flags = read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  *out = &b->m;
  return DLP_OK;
}
