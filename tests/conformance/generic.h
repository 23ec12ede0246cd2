/*
 * generic.h - what generic.c and generic_work.c share: the rules both files
 * check (defined in generic.c, in its table conf_generic_rules) and the
 * precondition of every test that holds work at a gate with a host callback.
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_GENERIC_H_
#define SIMDEV_TESTS_CONFORMANCE_GENERIC_H_

#include "conformance.h"

#define GENERIC_SHARED_RULES(X)                                              \
  X(R_EVENT_PENDING, "event.pending_until_work_done", REQUIRED,              \
    "get_event_status / block_host_for_event / wait_for_event",              \
    "An event is not complete until the work enqueued before record_event "  \
    "has run: get_event_status says SE_EVENT_PENDING, block_host_for_event " \
    "does not return and work behind wait_for_event does not start. TF's "   \
    "EventMgr::PollEvents runs a copy's done callback when the event "       \
    "recorded after it reports complete (PluggableDeviceUtil's copies): "    \
    "early, consumers read host memory before the copy landed and source "   \
    "tensors are freed and reused while the copy still reads them.")         \
  X(R_EVENT_STATUS, "event.status_valid", REQUIRED, "get_event_status",      \
    "get_event_status returns SE_EVENT_PENDING or SE_EVENT_COMPLETE for a "  \
    "healthy event: EventMgr::PollEvents LOG(FATAL)s (aborts the process) "  \
    "on SE_EVENT_ERROR or any other value.")                                 \
  X(R_NO_BLOCK, "stream.enqueue_does_not_block", RECOMMENDED,                \
    "record_event / wait_for_event / create_stream_dependency / memcpy_*",   \
    "Enqueueing work returns without waiting for the work queued ahead of "  \
    "it (copies into host_memory_allocate'd buffers included): TF enqueues " \
    "copies and events from its executor threads and keeps going; a "        \
    "blocking enqueue does not break TF 2.21 but serializes host and "       \
    "device, so kernels and copies no longer overlap.")                      \
  X(R_HOST_MEM, "host_memory.usable", REQUIRED,                              \
    "host_memory_allocate / host_memory_deallocate",                         \
    "host_memory_allocate returns distinct, host-writable memory of the "    \
    "size asked: TF's host allocator for the device "                        \
    "(PluggableDeviceProcessState::GetPluggableDeviceHostAllocator) gives "  \
    "it to host-side tensors that the device copies from and to; NULL is "   \
    "an allocation failure.")
CONF_RULES_DECLARE(GENERIC_SHARED_RULES)

/* For tests that hold work at a gate with a host callback on stream s of
 * device 0: enqueues one callback, waits for s, and returns 1 if it ran.
 * Otherwise the failure is checked (host_callback returned false, the wait
 * failed) or, if the callback simply had not run, the test is marked
 * skipped with the reason: generic.host_callback grades that
 * (host_callback.runs), and a gate that holds nothing would make this
 * test's checks blame the wrong callback. Main thread only. */
int generic_callbacks_run(conf_env* e, SP_Stream s);

/* "SE_EVENT_PENDING", ... for messages. */
const char* generic_event_status_name(SE_EventStatus s);

#endif /* SIMDEV_TESTS_CONFORMANCE_GENERIC_H_ */
