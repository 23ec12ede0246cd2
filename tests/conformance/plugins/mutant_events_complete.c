/*
 * mutant_events_complete.c - events that are always complete.
 *
 * Peer: the RFC sample plugin (record_event and wait_for_event empty,
 * get_event_status SE_EVENT_COMPLETE) and DirectML's no-op events. TF's
 * EventMgr then runs copy completions at once: consumers read host buffers
 * before the device-to-host copy landed and source tensors are freed while
 * still read. Silent corruption, not errors.
 *
 * Expected grade: required failure "event.pending_until_work_done"
 * (callback get_event_status).
 */
#include "mini.h"

static SE_EventStatus always_complete(const SP_Device* device, SP_Event ev) {
  return SE_EVENT_COMPLETE;
}

static void record_noop(const SP_Device* device, SP_Stream stream, SP_Event ev,
                        TF_Status* status) {}

static void wait_noop(const SP_Device* const device, SP_Stream stream,
                      SP_Event ev, TF_Status* const status) {}

static void block_noop(const SP_Device* device, SP_Event ev,
                       TF_Status* status) {}

static void mutate_se(SP_StreamExecutor* se) {
  se->get_event_status = always_complete;
  se->record_event = record_noop;
  se->wait_for_event = wait_noop;
  se->block_host_for_event = block_noop;
}

void mini_mutate(SE_PlatformRegistrationParams* params) {
  mini_mutate_se = mutate_se;
}
