/*
 * mutant_memcpy_sync.c - asynchronous copies done at once on the calling
 * thread, ignoring the stream and the work queued on it.
 *
 * Peer: the RFC sample plugin (every memcpy_* a plain memcpy). TF enqueues a
 * device-to-host copy on its D2H stream behind a dependency on the compute
 * stream, so the copy reads the buffer before the kernel wrote it. All three
 * directions are synchronous here, as in the sample: with only dtoh and htod
 * synchronous, a queued dtod between them would also corrupt the data of a
 * plain copy test, a second symptom of the same mistake.
 *
 * Expected grade: required failure "memcpy.stream_order" (callback
 * memcpy_dtoh).
 */
#include <string.h>

#include "mini.h"

static void dtoh_now(const SP_Device* device, SP_Stream stream, void* dst,
                     const SP_DeviceMemoryBase* src, uint64_t size,
                     TF_Status* status) {
  if (size > 0) memcpy(dst, src->opaque, size);
}

static void htod_now(const SP_Device* device, SP_Stream stream,
                     SP_DeviceMemoryBase* dst, const void* src, uint64_t size,
                     TF_Status* status) {
  if (size > 0) memcpy(dst->opaque, src, size);
}

static void dtod_now(const SP_Device* device, SP_Stream stream,
                     SP_DeviceMemoryBase* dst, const SP_DeviceMemoryBase* src,
                     uint64_t size, TF_Status* status) {
  if (size > 0) memcpy(dst->opaque, src->opaque, size);
}

static void mutate_se(SP_StreamExecutor* se) {
  se->memcpy_dtoh = dtoh_now;
  se->memcpy_htod = htod_now;
  se->memcpy_dtod = dtod_now;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
