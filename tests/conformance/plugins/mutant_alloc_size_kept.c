/*
 * mutant_alloc_size_kept.c - an allocation that fails returns opaque NULL
 * but leaves size at the size asked for.
 *
 * Peer: a plugin that fills SP_DeviceMemoryBase.size before it knows
 * whether the device had the memory (`mem->size = size; mem->opaque =
 * driver_alloc(size);`). TF copies both fields into its DeviceMemoryBase
 * (DeviceMemoryBaseFromC): the failed allocation claims bytes it does not
 * have.
 *
 * The failure is the mutant's own, deterministic: the 3rd allocate call of
 * the process finds the device "full" (each harness test has its own
 * process). Run with --filter faults.plugin_errors, the test that looks at
 * a plugin's own failures; elsewhere a NULL would fail tests that need the
 * memory.
 *
 * Expected grade: required failure "faults.failed_allocate_is_null"
 * (callback allocate), from faults.plugin_errors.
 */
#include <stdatomic.h>

#include "mini.h"

typedef void (*allocate_fn)(const SP_Device*, uint64_t, int64_t,
                            SP_DeviceMemoryBase*);
static allocate_fn mini_allocate;
static atomic_long calls;

static void allocate_size_first(const SP_Device* device, uint64_t size,
                                int64_t memory_space,
                                SP_DeviceMemoryBase* mem) {
  mem->size = size; /* the anti-pattern: before knowing */
  if (atomic_fetch_add(&calls, 1) + 1 == 3) {
    mem->opaque = NULL; /* "out of memory" */
    return;
  }
  mini_allocate(device, size, memory_space, mem);
}

static void mutate_se(SP_StreamExecutor* se) {
  mini_allocate = se->allocate;
  se->allocate = allocate_size_first;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
