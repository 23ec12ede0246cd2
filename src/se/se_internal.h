/*
 * se_internal.h - what the files of src/se/ share with each other; the rest
 * of the plugin uses se.h only. Grouped by the file that defines each
 * function.
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
#include "se/se.h"
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

static inline sim_device* se_device(const SP_Device* d) {
  return (sim_device*)d->device_handle;
}

/* ---- status.c ---------------------------------------------------------- */
/* Sets status from a sim_err (TF_OK for SIM_OK). The message is
 * "<what>: <detail or sim_strerror(err)>". */
void se_set_status(TF_Status* status, int err, const char* what,
                   const char* detail);
/* Formats a message into status with the TF code for err. */
void se_set_statusf(TF_Status* status, int err, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- devices.c --------------------------------------------------------- */
/* The live devices, for cross-device copies (TF hands a dtod copy only one
 * SP_Device). plugin.c adds a device once it is created and removes it
 * before destroying it. */
void se_devices_add(int ordinal, sim_device* dev);
void se_devices_remove(sim_device* dev);
/* The simdev device whose memory holds [p, p+size), or NULL. */
sim_device* se_owner_of(const void* p, uint64_t size);

/* ---- executor.c -------------------------------------------------------- */
/* Fills every SP_StreamExecutor entry, in header order. */
void se_fill_stream_executor(SP_StreamExecutor* se);
/* SP_TimerFns.nanoseconds. */
uint64_t se_timer_nanoseconds(SP_Timer timer);

/* plugin.c defines se_config and se_disabled_reason, executor.c
 * se_stream_sim (declared in se.h). */

#endif /* SIMDEV_SE_SE_INTERNAL_H_ */
