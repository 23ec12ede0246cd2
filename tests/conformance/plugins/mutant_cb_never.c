/*
 * mutant_cb_never.c - host_callback returns true but drops the callback.
 *
 * Peer: none of peers.md exactly; it is the RFC sample's stub (and
 * DirectML's) changed to return true, the edit an author makes to get past
 * TF's error: "enqueued", then nothing. Whoever waits for the callback
 * (Stream::DoHostCallback) waits forever.
 *
 * Expected grade: required failure "host_callback.runs" (callback
 * host_callback); the harness must report it, not hang.
 */
#include "mini.h"

static TF_Bool cb_never(const SP_Device* device, SP_Stream stream,
                        SE_StatusCallbackFn fn, void* arg) {
  return 1;
}

static void mutate_se(SP_StreamExecutor* se) {
  se->host_callback = cb_never;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
