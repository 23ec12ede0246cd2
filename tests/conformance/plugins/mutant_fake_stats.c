/*
 * mutant_fake_stats.c - allocator stats with made-up numbers.
 *
 * Peer: the RFC sample plugin (bytes_in_use = 123) and Intel ITEX's
 * fallback, which copies it (notes/peers.md). TF accepts the numbers. TF
 * 2.21's PluggableDevice code never reads them (get_memory_info reports TF's
 * own allocator, tf-facts-12.md section 3); other StreamExecutor users (XLA's
 * device allocator, PJRT clients) would report nonsense.
 *
 * Expected grade: "allocator_stats.tracks_allocations" (callback
 * get_allocator_stats), graded recommended.
 */
#include "mini.h"

static TF_Bool fake_stats(const SP_Device* device, SP_AllocatorStats* stats) {
  stats->num_allocs = 1;
  stats->bytes_in_use = 123;
  stats->peak_bytes_in_use = 123;
  stats->largest_alloc_size = 123;
  return 1;
}

static void mutate_se(SP_StreamExecutor* se) {
  se->get_allocator_stats = fake_stats;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
