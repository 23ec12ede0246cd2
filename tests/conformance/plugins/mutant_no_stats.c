/*
 * mutant_no_stats.c - get_allocator_stats returns false.
 *
 * Peer: the DirectML plugin. TF treats false as "no stats" and carries on.
 * Legal, so not a failure of the run.
 *
 * Expected grade: recommended failure "allocator_stats.available" (callback
 * get_allocator_stats); result "pass".
 */
#include "mini.h"

static TF_Bool no_stats(const SP_Device* device, SP_AllocatorStats* stats) {
  return 0;
}

static void mutate_se(SP_StreamExecutor* se) {
  se->get_allocator_stats = no_stats;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
