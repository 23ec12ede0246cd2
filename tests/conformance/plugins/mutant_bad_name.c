/*
 * mutant_bad_name.c - a platform name TF rejects.
 *
 * Peer: none of peers.md (the RFC sample spells it MY_DEVICE); a natural
 * first attempt that copies a package name. TF's ValidateDeviceType requires
 * [A-Z][A-Z_]* and aborts the process at `import tensorflow` otherwise.
 *
 * Expected grade: required failure "platform.name_valid" (callback
 * SE_InitPlugin); no device test runs.
 */
#include "mini.h"

void mini_mutate(SE_PlatformRegistrationParams* params) {
  params->platform->name = "my-device";
}
