/*
 * sp.h - simdev's profiler (prefix sp_): what device_sim recorded
 * (sim_trace_*, sim.h) written out for people and tools.
 *
 *   - Chrome trace-event JSON (chrome.c): what Perfetto and chrome://tracing
 *     open. SIMDEV_TRACE=path.json records the whole run and writes it at
 *     exit (tracefile.c).
 *   - TensorFlow's XSpace (xspace.c, tensorflow/tsl/profiler/protobuf/
 *     xplane.proto, written with src/pbwire/): what TF_InitProfiler's
 *     collect_data_xspace hands TensorFlow (plugin.c, the TF boundary).
 *
 * Everything declared here is TensorFlow-free (library simdev_profiler): the
 * device_sim unit tests and the conformance harness use it without TF.
 * Functions return 0 or a negative sim_err, with a message in msg
 * (NUL-terminated) where they take one.
 */
#ifndef SIMDEV_PROFILER_SP_H_
#define SIMDEV_PROFILER_SP_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device_sim/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes snap to f as one Chrome trace-event JSON object: a process per
 * SIMDEV device with a thread (track) per stream, complete ("X") events per
 * record, a process for the host with the submitting threads, flow arrows
 * from each submit to its run, the device's memory in use as a counter
 * track, and the dropped-record counts. SIM_ESYS if writing fails. */
int sp_chrome_json_write(const sim_trace_snapshot* snap, FILE* f, char* msg,
                         size_t msg_len);

/* Serializes snap as an XSpace: one XPlane per device named
 * "/device:CUSTOM:<ordinal>", one XLine per stream, one XEvent per record
 * with its stats; timestamps on TensorFlow's clock (CLOCK_REALTIME, via
 * snap->realtime_offset_ns). *out is malloc'd (caller frees), *len its
 * size. SIM_ENOMEM. */
int sp_xspace_encode(const sim_trace_snapshot* snap, uint8_t** out,
                     size_t* len);

/* SIMDEV_TRACE: checks now that path can be written (creates or truncates
 * it), starts recording (sim_trace_start(ring_records)) and arranges for the
 * whole run to be written to path at exit. "%p" in path becomes the process
 * id ("%%" a "%"). Once per process; SIM_EINVAL for a second call, SIM_ESYS
 * with the OS's reason if path cannot be opened. */
int sp_tracefile_start(const char* path, uint32_t ring_records, char* msg,
                       size_t msg_len);
/* Writes the trace file now, with everything recorded so far (the exit
 * handler calls it too; each call rewrites the file). SIM_EINVAL if no
 * trace file was started. */
int sp_tracefile_flush(char* msg, size_t msg_len);

#ifdef __cplusplus
}
#endif

#endif /* SIMDEV_PROFILER_SP_H_ */
