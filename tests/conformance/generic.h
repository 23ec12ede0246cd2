/*
 * generic.h - what the generic checks share (generic.c, generic_streams.c,
 * generic_work.c, generic_callbacks.c, generic_order.c): the rules several
 * of them check (GENERIC_SHARED_RULES, defined in generic.c in its table
 * conf_generic_rules; GENERIC_WORK_SHARED_RULES, defined in generic_work.c
 * in conf_generic_work_rules), the precondition of every test that holds
 * work at a gate with a host callback, and helpers for messages and copies.
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

#define GENERIC_WORK_SHARED_RULES(X)                                   \
  X(R_COPY_DATA, "memcpy.copies_data", REQUIRED,                       \
    "memcpy_htod / memcpy_dtod / memcpy_dtoh",                         \
    "Asynchronous copies deliver every source byte, at odd sizes and " \
    "between sub-buffers at byte offsets: TF's tensor copies "         \
    "(PluggableDeviceUtil, CStream::Memcpy) and its slices (a "        \
    "DeviceMemoryBase pointing into a larger buffer) depend on it.")
CONF_RULES_DECLARE(GENERIC_WORK_SHARED_RULES)

/* Device 0 of the conf_env* e in scope. */
#define D0 (&e->dev[0])
#define MIB (1024u * 1024u)

/* Settle time before asserting that blocked work has not run. */
#define SETTLE_MS 30

/* ---- Defined in generic.c. */

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

/* ---- Defined in generic_work.c. */

/* Index of the first byte where a and b differ, or -1. */
long generic_first_diff(const void* a, const void* b, size_t n);

/* Writes n bytes of src to device memory d with memcpy_htod on s, then waits
 * for s. For set-up; returns 1 if both succeeded. */
int generic_put(conf_env* e, SP_Stream s, SP_DeviceMemoryBase* d,
                const void* src, size_t n);

#endif /* SIMDEV_TESTS_CONFORMANCE_GENERIC_H_ */
