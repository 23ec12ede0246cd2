/*
 * mutant_cb_false.c - host_callback returns false and never calls back.
 *
 * Peer: the RFC sample plugin (MY_DEVICE) and the DirectML plugin, whose
 * host_callback is a stub returning 0. TF's Stream::DoHostCallback turns
 * false into InternalError "Failed to host callback." (and leaks the
 * callback's context); whoever enqueued the callback never hears back.
 * TF 2.21's own PluggableDevice code was not found calling host_callback
 * (/work/briefs/tf-facts-12.md section 6): its grade is the harness's call.
 *
 * Expected grade: required failure "host_callback.returns_true" (callback
 * host_callback); other required failures only in rules about host
 * callbacks (checks that need a callback to run).
 */
#include "mini.h"

static TF_Bool cb_false(const SP_Device* device, SP_Stream stream,
                        SE_StatusCallbackFn fn, void* arg) {
  return 0;
}

static void mutate_se(SP_StreamExecutor* se) {
  se->host_callback = cb_false;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
