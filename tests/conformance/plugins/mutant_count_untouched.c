/*
 * mutant_count_untouched.c - get_device_count returns OK without writing
 * the count.
 *
 * Peer: none of peers.md; a plugin that returns early when it finds no
 * hardware would do it. TF starts the count at 0
 * (CPlatform::VisibleDeviceCount), so this means 0 devices, which is legal;
 * a harness starting at -1 would report nonsense.
 *
 * Expected grade: result "pass", device_count 0 (not -1).
 */
#include "mini.h"

static void count_untouched(const SP_Platform* platform, int* count,
                            TF_Status* status) {}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  params->platform_fns->get_device_count = count_untouched;
}
