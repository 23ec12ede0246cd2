/*
 * fuzz_dlpack.c - libFuzzer target for DLPack imports: the validator
 * (dlp_check_tensor / _legacy / _versioned) and the import decision
 * SimdevFromDlpack takes through the same function, dlp_plan_import, then
 * the copy it makes (dlp_gather).
 *
 * The input bytes become every field a hostile producer controls: legacy or
 * versioned struct, ndim (also out of range), shape and strides values (or
 * NULL arrays), dtype, device, byte_offset, the data pointer (NULL, or a
 * real buffer at any alignment), the version and read-only flag; and the
 * op's side: the dtype it wants, its copy mode and the alignment (TF's 64,
 * sometimes another, sometimes an invalid one).
 *
 * What must hold (checked against the fuzzer's own recomputation, not the
 * library's):
 *   - nothing crashes or reads outside the arrays it is given (ASan);
 *   - an accepted tensor is self-consistent: rank <= DLP_MAX_DIMS, the
 *     dtype the op wants, kDLCPU, byte_offset 0, elements = product of the
 *     shape, nbytes = elements * element size, data non-NULL when nbytes;
 *   - the plan follows the copy mode: EMPTY exactly when there are no
 *     elements; SHARE only for compact, aligned, writable memory and never
 *     with copy=always; COPY never with copy=never; a refusal when copy is
 *     never and the memory cannot be shared;
 *   - a COPY gathers exactly the elements the strides name: the source
 *     buffer is allocated (and poisoned around) to exactly their byte span,
 *     so ASan catches any read outside it (before the span: to ASan's
 *     8-byte granularity), and the result is compared
 *     element by element with an independent gather.
 * Built with ASan + UBSan (tests/fuzz/CMakeLists.txt).
 */
#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlp.h"

typedef struct reader {
  const uint8_t* p;
  size_t n;
} reader;

static uint64_t take(reader* r, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; i++) {
    v <<= 8;
    if (r->n > 0) {
      v |= *r->p++;
      r->n--;
    }
  }
  return v;
}

/* Dimension values: mostly small, sometimes huge or negative. */
static int64_t take_dim(reader* r) {
  uint8_t sel = (uint8_t)take(r, 1);
  switch (sel % 8) {
    case 0: return (int64_t)take(r, 8);    /* anything, incl. negative */
    case 1: return -(int64_t)(take(r, 1)); /* small negative or 0 */
    case 2: return (int64_t)1 << (take(r, 1) % 63);
    default: return (int64_t)(take(r, 1) % 9);
  }
}

#define ABORT_IF(c)                                               \
  do {                                                            \
    if (c) {                                                      \
      fprintf(stderr, "fuzz_dlpack: invariant broken: %s\n", #c); \
      abort();                                                    \
    }                                                             \
  } while (0)

/* Largest source span and element count the fuzzer actually gathers. */
enum { kMaxSpan = 1 << 20, kMaxElements = 1 << 16 };

/* The byte span [lo, hi) of the elements a strided tensor names, relative
 * to its data pointer; false if it is too large to allocate here. */
static bool span_of(const dlp_view* v, size_t es, int64_t* lo, int64_t* hi) {
  __int128 l = 0, h = 0;
  for (int i = 0; i < v->ndim; i++) {
    __int128 d = (__int128)(v->shape[i] - 1) * v->strides[i] * (int64_t)es;
    if (d < 0)
      l += d;
    else
      h += d;
  }
  h += (int64_t)es;
  if (h - l > kMaxSpan) return false;
  *lo = (int64_t)l;
  *hi = (int64_t)h;
  return true;
}

/* Element i (row-major) of v, located from its index: the oracle the
 * library's odometer in dlp_gather is compared with. */
static const uint8_t* element_at(const dlp_view* v, size_t es, int64_t i) {
  int64_t off = 0;
  for (int d = v->ndim - 1; d >= 0; d--) {
    int64_t k = i % v->shape[d];
    i /= v->shape[d];
    off += k * v->strides[d];
  }
  return (const uint8_t*)v->data + off * (int64_t)es;
}

/* Plans the import of m as the op would; for a copy, runs the gather over
 * a buffer of exactly the tensor's span and checks every element. */
static void plan_and_copy(void* m, bool versioned, DLTensor* t, DLDataType want,
                          dlp_copy_mode copy, size_t alignment,
                          unsigned misalign, bool read_only) {
  /* First find the span (the data pointer does not change validity unless
   * it is NULL), then point data into a buffer of exactly that span. */
  dlp_view probe;
  char msg[160];
  uint8_t* buf = NULL;
  size_t pad = 0, span = 0;
  void* saved = t->data;
  if (t->data != NULL &&
      dlp_check_tensor(t, &probe, msg, sizeof(msg)) == DLP_OK &&
      probe.elements > 0 && probe.elements <= kMaxElements) {
    size_t es = dlp_dtype_size(probe.dtype);
    int64_t lo, hi;
    if (span_of(&probe, es, &lo, &hi)) {
      span = (size_t)(hi - lo);
      /* data % 64 == misalign: pad so that buf + pad - lo lands there. */
      buf = malloc(64 + span);
      ABORT_IF(buf == NULL);
      uintptr_t want_mod = misalign % 64;
      uintptr_t at = (uintptr_t)buf - (uintptr_t)lo;
      pad = (size_t)((want_mod - at % 64 + 64) % 64);
      for (size_t i = 0; i < span; i++) buf[pad + i] = (uint8_t)(i * 131u + 7u);
      ASAN_POISON_MEMORY_REGION(buf, pad);
      ASAN_POISON_MEMORY_REGION(buf + pad + span, 64 - pad);
      t->data = buf + pad - lo;
    }
  }

  dlp_import_plan p;
  memset(msg, 0, sizeof(msg));
  int rc = dlp_plan_import(m, versioned, want, copy, alignment, &p, msg,
                           sizeof(msg));
  bool pow2 = alignment != 0 && (alignment & (alignment - 1)) == 0;
  if (rc != DLP_OK) {
    ABORT_IF(msg[0] == '\0' || memchr(msg, '\0', sizeof(msg)) == NULL);
  } else {
    const dlp_view* v = &p.view;
    size_t es = dlp_dtype_size(v->dtype);
    ABORT_IF(!pow2);
    ABORT_IF(es == 0 || v->ndim < 0 || v->ndim > DLP_MAX_DIMS);
    ABORT_IF(v->ndim != t->ndim);
    ABORT_IF(v->dtype.code != want.code || v->dtype.bits != want.bits ||
             v->dtype.lanes != want.lanes);
    ABORT_IF(t->device.device_type != kDLCPU || t->byte_offset != 0);
    ABORT_IF(v->read_only != read_only);
    int64_t prod = 1;
    for (int i = 0; i < v->ndim; i++) {
      ABORT_IF(v->shape[i] < 0 || v->shape[i] != t->shape[i]);
      prod = v->shape[i] == 0 ? 0 : prod * v->shape[i];
    }
    ABORT_IF(prod != v->elements);
    ABORT_IF(v->nbytes != (uint64_t)v->elements * es);
    ABORT_IF(v->nbytes > 0 && v->data == NULL);
    /* compact: the given strides are the row-major ones wherever a
     * dimension is stepped over (size > 1). */
    bool compact = true;
    int64_t step = 1;
    for (int i = v->ndim - 1; i >= 0 && t->strides && prod > 0; i--) {
      if (v->shape[i] != 1 && t->strides[i] != step) compact = false;
      step *= v->shape[i];
    }
    ABORT_IF(v->compact != compact);
    bool shareable =
        compact && (uintptr_t)v->data % alignment == 0 && !read_only;
    switch (p.action) {
      case DLP_IMPORT_EMPTY:
        ABORT_IF(v->elements != 0 || v->nbytes != 0);
        ABORT_IF(p.unshareable != NULL);
        break;
      case DLP_IMPORT_SHARE:
        ABORT_IF(v->elements == 0 || !shareable || copy == DLP_COPY_ALWAYS);
        ABORT_IF(p.unshareable != NULL);
        /* The shared range is exactly the elements' span. */
        ABORT_IF(buf != NULL && span != v->nbytes);
        break;
      case DLP_IMPORT_COPY:
        ABORT_IF(v->elements == 0 || copy == DLP_COPY_NEVER);
        ABORT_IF(copy != DLP_COPY_ALWAYS && shareable);
        ABORT_IF((p.unshareable == NULL) != shareable);
        break;
      default: ABORT_IF(1);
    }
    if (p.action == DLP_IMPORT_COPY && buf != NULL) {
      uint8_t* dst = malloc((size_t)v->nbytes);
      ABORT_IF(dst == NULL);
      dlp_gather(v, dst);
      for (int64_t i = 0; i < v->elements; i++)
        ABORT_IF(memcmp(dst + i * (int64_t)es, element_at(v, es, i), es) != 0);
      free(dst);
    }
  }
  /* What the op refuses, whatever else is wrong. */
  if (t->ndim > DLP_MAX_DIMS || !pow2) ABORT_IF(rc == DLP_OK);
  if (rc == DLP_OK && copy == DLP_COPY_NEVER) {
    ABORT_IF(p.action == DLP_IMPORT_COPY);
  }
  if (buf != NULL) {
    ASAN_UNPOISON_MEMORY_REGION(buf, 64 + span);
    free(buf);
  }
  t->data = saved;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reader r = {data, size};
  /* The arrays are exactly ndim long (when ndim is sane), so ASan catches a
   * validator that reads past them. */
  int32_t ndim = (int32_t)(int8_t)take(&r, 1); /* -128..127 */
  size_t alloc = ndim > 0 && ndim <= 64 ? (size_t)ndim : 0;
  int64_t* shape = NULL;
  int64_t* strides = NULL;
  uint8_t arrays = (uint8_t)take(&r, 1);
  if (alloc > 0 && (arrays & 1)) shape = malloc(alloc * sizeof(int64_t));
  if (alloc > 0 && (arrays & 2)) strides = malloc(alloc * sizeof(int64_t));
  for (size_t i = 0; i < alloc; i++) {
    if (shape) shape[i] = take_dim(&r);
    if (strides) strides[i] = take_dim(&r);
  }

  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof(m));
  DLTensor* t = &m.dl_tensor;
  t->ndim = ndim;
  t->shape = shape;
  t->strides = strides;
  t->dtype.code = (uint8_t)take(&r, 1) % 8;
  t->dtype.bits = (uint8_t)take(&r, 1);
  t->dtype.lanes = (uint16_t)(take(&r, 1) % 3);
  t->device.device_type = (DLDeviceType)(take(&r, 1) % 16);
  t->device.device_id = (int32_t)(take(&r, 1) % 3);
  t->byte_offset = (take(&r, 1) % 4 == 0) ? take(&r, 8) : 0;
  /* A placeholder data pointer (never read by the validator): NULL, or
   * non-NULL to be replaced by a real buffer when the tensor is copied. */
  uint8_t use_data = (uint8_t)take(&r, 1);
  static uint8_t placeholder[64];
  t->data = (use_data & 1) ? (void*)placeholder : NULL;
  unsigned misalign = use_data >> 1; /* data % 64 for the real buffer */
  m.version.major = (uint32_t)(take(&r, 1) % 3);
  m.version.minor = (uint32_t)take(&r, 1);
  m.flags = take(&r, 1);
  /* The op's side of the request. */
  uint8_t op = (uint8_t)take(&r, 1);
  dlp_copy_mode copy = (dlp_copy_mode)(op % 3);
  bool versioned = (op >> 2) & 1;
  DLDataType want = t->dtype; /* mostly what the tensor holds */
  if ((op >> 3) % 4 == 0) {
    want.code = (uint8_t)take(&r, 1) % 8;
    want.bits = (uint8_t)(8u << (take(&r, 1) % 5));
    want.lanes = 1;
  }
  size_t alignment = (op >> 5) == 0   ? (size_t)take(&r, 1) /* any: 0, 3 */
                     : (op >> 5) == 1 ? (size_t)1 << (take(&r, 1) % 12)
                                      : 64; /* TF_TensorDefaultAlignment */

  dlp_view v;
  char msg[96];
  int rc = dlp_check_versioned(&m, &v, msg, sizeof(msg));
  ABORT_IF(memchr(msg, '\0', sizeof(msg)) == NULL && rc != DLP_OK);
  if (rc == DLP_OK) {
    ABORT_IF(v.ndim != ndim || v.ndim < 0 || v.ndim > DLP_MAX_DIMS);
    ABORT_IF(!v.compact && strides == NULL);
  }
  /* The legacy entry point agrees with the versioned one on the tensor. */
  DLManagedTensor legacy;
  memset(&legacy, 0, sizeof(legacy));
  legacy.dl_tensor = *t;
  int rc_legacy = dlp_check_legacy(&legacy, &v, msg, sizeof(msg));
  if (m.version.major == DLPACK_MAJOR_VERSION) ABORT_IF(rc_legacy != rc);

  /* The op's path, through the struct the request names. */
  if (versioned) {
    bool read_only = (m.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    plan_and_copy(&m, true, t, want, copy, alignment, misalign, read_only);
  } else {
    plan_and_copy(&legacy, false, &legacy.dl_tensor, want, copy, alignment,
                  misalign, false);
  }

  free(shape);
  free(strides);
  return 0;
}
