/*
 * sx.h - simdev's XLA custom calls (src/xla/, prefix sx_): JAX FFI targets
 * that run simdev's arithmetic (src/arith) on a simdev stream, in
 * libsimdev_xla.so, a library without TensorFlow (a JAX process must not
 * load TF).
 *
 * Each handler is an XLA typed-FFI handler (jaxlib's xla/ffi/api/c_api.h,
 * API 0.3). Register it with
 *   jax.ffi.register_ffi_target("simdev_matmul", jax.ffi.pycapsule(fn),
 *                               platform="cpu")
 * (the target name is the symbol without "_xla"; python/simdev/jax.py does
 * it for all of them). What every handler does:
 *   1. The metadata request (call_frame->extension_start of type
 *      XLA_FFI_Extension_Metadata, made by XLA when the target is
 *      registered): writes the header's API version and returns NULL.
 *   2. Validation on the calling thread (XLA's, or simdev0-s0 when a
 *      simdev call precedes it in the program: see the thread contract):
 *      arity, dtype (float32 or float64, all equal), rank, every dim of
 *      operands and result, every attribute (missing, wrong type, wrong
 *      length, bad value, unexpected name). Any problem returns an
 *      XLA_FFI_Error: INVALID_ARGUMENT for bad input, UNIMPLEMENTED for
 *      what simdev lacks (grouped backprops, sizes past OpenBLAS's int),
 *      with a message that starts with the target name ("simdev_matmul:
 *      operand a must be float32 or float64, got s32"). Nothing on this
 *      path aborts.
 *   3. Zero-size results complete at once, and a result with elements but
 *      an empty contraction is written as zeros on the calling thread
 *      (matmul and the convolutions): neither needs the device, so both
 *      succeed whatever the settings. matmul_bias_act's act(bias) is a
 *      job like any other (4).
 *   4. Otherwise one work item goes onto the stream of simdev device 0,
 *      made now if it does not exist (simdev_xla_init: a bad SIMDEV_*
 *      setting or SIMDEV_DISABLE=1 is FAILED_PRECONDITION, no memory for
 *      the device RESOURCE_EXHAUSTED, a call on the worker during a
 *      shutdown UNAVAILABLE). The handler creates an
 *      XLA_FFI_Future, stores it in call_frame->future and returns NULL;
 *      the item's done callback, on the stream's worker thread
 *      ("simdev0-s0"), sets the future available, or sets its error
 *      (RESOURCE_EXHAUSTED when the device region cannot hold a scratch
 *      buffer, INTERNAL when the stream failed). XLA keeps the buffers
 *      alive until then. With SIMDEV_SYNC=1 the handler waits for the item
 *      instead and returns its error directly (no future).
 *
 * Operands and attributes of each target: docs/xla-custom-calls.md (and
 * the comment above each handler in matmul.c, conv.c, eltwise.c).
 *
 * Thread contract: every function here may be called from any thread, also
 * concurrently, with two exceptions on the stream's worker (where XLA runs
 * the continuations of completed futures, host callbacks included):
 * simdev_xla_shutdown refuses to run there, and a handler there must not
 * wait for the stream (SIMDEV_SYNC=1 makes no futures, so no continuation
 * runs there then). Work items of all callers share one stream and run in
 * the order they were submitted.
 */
#ifndef SIMDEV_XLA_SX_H_
#define SIMDEV_XLA_SX_H_

#include <stddef.h>
#include <stdint.h>
#include <xla/ffi/api/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's ABI: these and nothing else are exported
 * (src/xla/exports.map). */
#define SX_EXPORT __attribute__((visibility("default")))

/* The typed-FFI handlers (JAX targets simdev_<name>). */
SX_EXPORT XLA_FFI_Error* simdev_xla_matmul(XLA_FFI_CallFrame* frame);
SX_EXPORT XLA_FFI_Error* simdev_xla_matmul_bias_act(XLA_FFI_CallFrame* frame);
SX_EXPORT XLA_FFI_Error* simdev_xla_conv2d(XLA_FFI_CallFrame* frame);
SX_EXPORT XLA_FFI_Error* simdev_xla_conv2d_backprop_input(
    XLA_FFI_CallFrame* frame);
SX_EXPORT XLA_FFI_Error* simdev_xla_conv2d_backprop_filter(
    XLA_FFI_CallFrame* frame);
SX_EXPORT XLA_FFI_Error* simdev_xla_relu(XLA_FFI_CallFrame* frame);
SX_EXPORT XLA_FFI_Error* simdev_xla_relu_grad(XLA_FFI_CallFrame* frame);
SX_EXPORT XLA_FFI_Error* simdev_xla_empty(XLA_FFI_CallFrame* frame);

/* The legacy custom-call convention, for comparison (legacy.c, JAX target
 * simdev_legacy_matmul, registered with api_version=0 and called with
 * custom_call_api_version=3, STATUS_RETURNING_UNIFIED): out and in are the
 * buffers, opaque "m=<m>,k=<k>,n=<n>,dtype=f32|f64" (not NUL-terminated),
 * status XLA's XlaCustomCallStatus*, unused (no jaxlib library exports the
 * function that would set it: docs/xla-custom-calls.md). Synchronous, on
 * calling thread; a bad opaque writes one line on stderr and leaves out
 * unwritten. */
SX_EXPORT void simdev_xla_legacy_matmul(void* out, const void** in,
                                        const char* opaque, size_t opaque_len,
                                        void* status);

/* Reads the SIMDEV_* settings (sim_config_from_env: SIMDEV_MEMORY_MB for
 * the device region, SIMDEV_SYNC; SIMDEV_DISABLE=1 refuses; SIMDEV_TRACE
 * and SIMDEV_TRACE_EVENTS record every job and write Chrome trace JSON at
 * exit, as the TF plugin does; the rest are checked but have no effect
 * here) and creates device 0 and its stream. Idempotent: 0 when they exist
 * already. On failure returns a negative sim_err (SIM_EINVAL for a bad or
 * disabling setting, SIM_ENOMEM, SIM_ESYS) and writes a message naming the
 * variable or the cause into msg (len bytes, NUL-terminated; msg may be NULL).
 * Handlers call it themselves on first use; calling it first reports a bad
 * setting before any XLA program runs. */
SX_EXPORT int simdev_xla_init(char* msg, size_t len);

/* Work items the handlers have queued on the stream since the process
 * started (async and SIMDEV_SYNC calls alike; not the calls that failed
 * validation or completed at once), and how many of them completed OK or
 * with an error. Counted before the future is set, so once a result is
 * visible its completion is counted. Any pointer may be NULL. */
SX_EXPORT void simdev_xla_counts(uint64_t* enqueued, uint64_t* completed,
                                 uint64_t* failed);

/* Waits for every queued item (their futures are completed), then destroys
 * the stream and the device. Handlers that arrive meanwhile on other
 * threads wait for it to finish; one called on the stream's worker (by an
 * XLA continuation of a job being drained) fails at once with UNAVAILABLE.
 * The next call creates a new device and stream, reading the settings
 * again. Returns 0 (SIM_OK), or -1 (SIM_EINVAL) doing nothing when called on
 * the stream's worker (from a host callback or a continuation: draining
 * the stream would wait for that very thread). For tests and clean
 * teardown; a process that just exits need not call it. */
SX_EXPORT int simdev_xla_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* SIMDEV_XLA_SX_H_ */
