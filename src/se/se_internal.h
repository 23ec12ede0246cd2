/*
 * se_internal.h - the StreamExecutor C API side of simdev (src/se/).
 *
 * TensorFlow owns every SP_ and SE_ struct it hands us and pre-fills its
 * struct_size; we fill fields in place. Opaque handles are ours:
 *   SP_Device.device_handle  -> sim_device*
 *   SP_Stream                -> struct SP_Stream_st { sim_stream* }
 *   SP_Event / SP_Timer      -> wrappers around sim_event / sim_timer
 * Errors travel as sim_err codes inside and become a TF_Status exactly once,
 * in the callback that TF called (se_set_status).
 */
#ifndef SIMDEV_SE_SE_INTERNAL_H_
#define SIMDEV_SE_SE_INTERNAL_H_

#include <stdbool.h>

#include "device_sim/sim.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

/* Device type users write (/device:SIMDEV:0) and platform name. TF requires
 * both to match [A-Z][A-Z_]*. */
#define SE_SIMDEV_TYPE "SIMDEV"
#define SE_SIMDEV_NAME "SIMDEV"

/* True if a struct TF gave us (with its struct_size) is large enough to hold
 * `field`: lets an older TF with a shorter struct work. */
#define SE_HAS_FIELD(ptr, TYPE, field) \
  ((ptr)->struct_size >= TF_OFFSET_OF_END(TYPE, field))

struct SP_Stream_st {
  sim_stream* s;
};
struct SP_Event_st {
  sim_event* e;
};
struct SP_Timer_st {
  sim_timer* t;
};

/* ---- status.c ---------------------------------------------------------- */
/* Sets status from a sim_err (TF_OK for SIM_OK). The message is
 * "<what>: <detail or sim_strerror(err)>". */
void se_set_status(TF_Status* status, int err, const char* what,
                   const char* detail);
/* Formats a message into status with the TF code for err. */
void se_set_statusf(TF_Status* status, int err, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- plugin.c ---------------------------------------------------------- */
/* The SIMDEV_* settings SE_InitPlugin read (TF calls TF_InitKernel after
 * it, so the kernels read them here rather than parse the environment
 * again). */
const sim_config* se_config(void);
/* Why this process gets no SIMDEV device (SIMDEV_DISABLE=1, another
 * TensorFlow release), or NULL. Set by SE_InitPlugin. */
const char* se_disabled_reason(void);
/* The simdev device whose region holds [p, p+size), or NULL. */
sim_device* se_owner_of(const void* p, uint64_t size);
static inline sim_device* se_device(const SP_Device* d) {
  return (sim_device*)d->device_handle;
}

/* ---- executor.c -------------------------------------------------------- */
/* Fills every SP_StreamExecutor entry, in header order. */
void se_fill_stream_executor(SP_StreamExecutor* se);
/* SP_TimerFns.nanoseconds. */
uint64_t se_timer_nanoseconds(SP_Timer timer);

#endif /* SIMDEV_SE_SE_INTERNAL_H_ */
