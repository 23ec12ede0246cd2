/*
 * sp_internal.h - what the profiler's writers share (names.c): the name of
 * a record's event, a stream's label, the snapshot's time origin, and UTF-8
 * repair. Private to src/profiler/; other modules include sp.h.
 *
 * Thread contract: pure functions over their arguments (sim_trace_name is
 * thread-safe), callable from any thread.
 */
#ifndef SIMDEV_PROFILER_SP_INTERNAL_H_
#define SIMDEV_PROFILER_SP_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>

#include "profiler/sp.h"

/* The event name both outputs give a record: a kernel's node name (its op
 * type if it has no name, "Kernel" if neither was interned); for the other
 * kinds a fixed name ("MemcpyH2D", "Memset", "EventWait", ...); items
 * submitted without trace info (SIM_TRACE_OTHER) their interned name if they
 * have one, else "Other". Never NULL; may be invalid UTF-8 (a TF node name
 * is bytes): writers repair it (sp_utf8_next). */
const char* sp_event_name(const sim_trace_rec* r);

/* "simdev<d>-s<n>": the stream's worker thread name, the track's name in
 * both outputs. */
void sp_stream_label(int device, int stream, char* buf, size_t len);
/* The same for a sim_trace_stream_key (a wait's peer); key 0 gives "". */
void sp_stream_key_label(uint32_t key, char* buf, size_t len);

/* The earliest time in snap (any record's enq_ns or start_ns, any memory
 * record's ns); snap->begin_ns if it holds no record. */
uint64_t sp_snapshot_t0(const sim_trace_snapshot* snap);

/* Highest device ordinal with a stream or a memory ring in snap, or -1. */
int sp_snapshot_max_device(const sim_trace_snapshot* snap);
/* 1 if device d has a stream or a memory ring in snap: it gets a plane (a
 * process in the JSON). */
int sp_snapshot_has_device(const sim_trace_snapshot* snap, int d);
/* 1 if r's event shows its byte count: copies and memsets always (0 bytes
 * included), anything else with a non-zero count. */
int sp_rec_has_bytes(const sim_trace_rec* r);

/* The length (1..4) of the well-formed UTF-8 sequence at s[0..n), storing
 * its code point in *cp, or 0 if s starts with a byte that does not begin
 * one (a stray continuation byte, an overlong form, a surrogate, a value
 * above U+10FFFF, a truncated sequence). Writers put U+FFFD for that byte
 * and go on with the next: JSON and protobuf strings must be UTF-8. */
size_t sp_utf8_next(const unsigned char* s, size_t n, uint32_t* cp);

/* s with every ill-formed byte replaced by U+FFFD: s itself when it is
 * well-formed (nothing allocated, *owned = NULL), else a malloc'd copy, also
 * stored in *owned for the caller to free. NULL if that allocation fails. */
const char* sp_utf8_repair(const char* s, char** owned);

#endif /* SIMDEV_PROFILER_SP_INTERNAL_H_ */
