/*
 * mutant_status_unset.c - get_stream_status always OK, even after a host
 * callback failed on the stream.
 *
 * Peer: the RFC sample plugin (its stream callbacks are empty no-ops).
 * Stream::RefreshStatus reads it to mark a stream bad for good (no caller was
 * found in TF 2.21's PluggableDevice code, tf-facts-12.md section 7); OK here
 * hides a failed callback from every caller that asks.
 *
 * Expected grade: recommended failure "stream_status.reports_callback_error"
 * (callback get_stream_status): TF 2.21 never reads a callback's status
 * back (stream.h: its effect is platform-dependent), so the run passes.
 */
#include "mini.h"

static void status_unset(const SP_Device* device, SP_Stream stream,
                         TF_Status* status) {}

static void mutate_se(SP_StreamExecutor* se) {
  se->get_stream_status = status_unset;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
