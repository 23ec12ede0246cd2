/*
 * fuzz_dlpack.c - libFuzzer target for the validator of incoming DLPack
 * tensors (src/dlpack/dlpack.c: dlp_check_tensor / dlp_check_versioned).
 *
 * The input bytes become every field a hostile producer controls: ndim (also
 * out of range), shape and strides values (or NULL arrays), dtype, device,
 * byte_offset, a data pointer (NULL, or a real buffer of the input's tail),
 * the version and flags. The validator must never crash or read outside
 * the arrays it is given, and whatever it accepts must be self-consistent:
 * nbytes = elements * element size, data non-NULL when nbytes > 0, strides
 * compact where it matters. Built with ASan + UBSan (tests/fuzz/CMakeLists).
 */
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
    case 0: return (int64_t)take(r, 8);      /* anything, incl. negative */
    case 1: return -(int64_t)(take(r, 1));   /* small negative or 0 */
    case 2: return (int64_t)1 << (take(r, 1) % 63);
    default: return (int64_t)(take(r, 1) % 9);
  }
}

#define ABORT_IF(c)                                                    \
  do {                                                                 \
    if (c) {                                                           \
      fprintf(stderr, "fuzz_dlpack: invariant broken: %s\n", #c);     \
      abort();                                                         \
    }                                                                  \
  } while (0)

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
  /* The rest of the input is the tensor's "data" (or none at all). */
  uint8_t use_data = (uint8_t)take(&r, 1);
  t->data = (use_data & 1) ? (void*)r.p : NULL;
  m.version.major = (uint32_t)(take(&r, 1) % 3);
  m.version.minor = (uint32_t)take(&r, 1);
  m.flags = take(&r, 1);

  dlp_view v;
  char msg[96];
  int rc = dlp_check_versioned(&m, &v, msg, sizeof(msg));
  ABORT_IF(memchr(msg, '\0', sizeof(msg)) == NULL && rc != DLP_OK);
  if (rc == DLP_OK) {
    size_t es = dlp_dtype_size(v.dtype);
    ABORT_IF(es == 0);
    ABORT_IF(v.ndim != ndim || v.ndim < 0 || v.ndim > DLP_MAX_DIMS);
    ABORT_IF(v.elements < 0);
    ABORT_IF(v.nbytes != (uint64_t)v.elements * es);
    ABORT_IF(v.nbytes > 0 && v.data == NULL);
    ABORT_IF(t->device.device_type != kDLCPU || t->byte_offset != 0);
    ABORT_IF(v.read_only != ((m.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0));
    int64_t prod = 1;
    for (int i = 0; i < v.ndim; i++) {
      ABORT_IF(v.shape[i] < 0 || v.shape[i] != shape[i]);
      prod = v.shape[i] == 0 ? 0 : prod * v.shape[i];
    }
    ABORT_IF(prod != v.elements);
    /* compact means the strides (when given) are the row-major ones for
     * every dimension that is stepped over. */
    int64_t want = 1;
    for (int i = v.ndim - 1; i >= 0 && v.compact && strides && prod > 0; i--) {
      ABORT_IF(v.shape[i] != 1 && strides[i] != want);
      want *= v.shape[i];
    }
    ABORT_IF(!v.compact && strides == NULL);
  }
  /* The legacy entry point agrees with the versioned one on the tensor. */
  DLManagedTensor legacy;
  memset(&legacy, 0, sizeof(legacy));
  legacy.dl_tensor = *t;
  int rc_legacy = dlp_check_legacy(&legacy, &v, msg, sizeof(msg));
  if (m.version.major == DLPACK_MAJOR_VERSION) ABORT_IF(rc_legacy != rc);

  free(shape);
  free(strides);
  return 0;
}
