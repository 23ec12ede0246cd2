/*
 * mutant_zero_devices.c - get_device_count reports 0.
 *
 * Peer: every vendor plugin on a machine without its hardware (DirectML
 * without a DirectX adapter, Intel ITEX without a GPU). TF allows it and
 * creates no device. Legal.
 *
 * Expected grade: result "pass", device tests skipped with the reason
 * (0 devices); with --require-devices 1, required failure
 * "devices.count_at_least" and result "fail".
 */
#include "mini.h"

static void count_zero(const SP_Platform* platform, int* count,
                       TF_Status* status) {
  *count = 0;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  params->platform_fns->get_device_count = count_zero;
}
