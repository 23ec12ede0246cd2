/*
 * mutant_copy_dropped.c - a host-to-device copy that failed is dropped
 * silently: memcpy_htod returns OK, nothing is copied, and no status of the
 * stream ever says so.
 *
 * Peer: a plugin that ignores the result of its driver's asynchronous copy
 * (or of the DMA engine's completion) and so never latches the error on the
 * stream. TF's CStream::Memcpy sees OK, and the op that needed the tensor
 * reads whatever the device memory held before, silently.
 *
 * The failure is the mutant's own, deterministic: the 2nd memcpy_htod call
 * of the process fails (each harness test has its own process). Run with
 * --filter faults.plugin_errors, the test that looks at a plugin's own
 * failures; elsewhere the dropped copy would fail the data checks too.
 *
 * Expected grade: required failure "faults.failed_copy_reported" (callback
 * memcpy_htod), from faults.plugin_errors: the buffer comes back as the
 * device's zeros and neither the copy nor its stream reported an error.
 */
#include <stdatomic.h>

#include "mini.h"

typedef void (*htod_fn)(const SP_Device*, SP_Stream, SP_DeviceMemoryBase*,
                        const void*, uint64_t, TF_Status*);
static htod_fn mini_memcpy_htod;
static atomic_long calls;

static void memcpy_htod_dropping(const SP_Device* device, SP_Stream stream,
                                 SP_DeviceMemoryBase* dst, const void* src,
                                 uint64_t size, TF_Status* status) {
  if (atomic_fetch_add(&calls, 1) + 1 == 2) return; /* "failed": dropped */
  mini_memcpy_htod(device, stream, dst, src, size, status);
}

static void mutate_se(SP_StreamExecutor* se) {
  mini_memcpy_htod = se->memcpy_htod;
  se->memcpy_htod = memcpy_htod_dropping;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
