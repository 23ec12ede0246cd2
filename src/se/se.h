/*
 * se.h - what the rest of the plugin may use of src/se/ (prefix se_), the
 * StreamExecutor side of simdev. The kernels (src/kernels/) need two things
 * from it: the settings SE_InitPlugin read, and the device_sim stream behind
 * a stream TF hands them (TF_GetStream). Everything else in src/se/ is
 * internal to it (se_internal.h).
 */
#ifndef SIMDEV_SE_SE_H_
#define SIMDEV_SE_SE_H_

#include "device_sim/sim.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

/* The SIMDEV_* settings SE_InitPlugin read (TF calls TF_InitKernel after it,
 * so the kernels read them here rather than parse the environment again).
 * Written once by SE_InitPlugin, read-only afterwards: any thread. */
const sim_config* se_config(void);

/* Why this process gets no SIMDEV device (SIMDEV_DISABLE=1, another
 * TensorFlow release), or NULL: then TF_InitKernel registers no kernel.
 * Set once by SE_InitPlugin, read-only afterwards: any thread. */
const char* se_disabled_reason(void);

/* The device_sim stream of an SP_Stream that simdev created (what
 * TF_GetStream returns in a SIMDEV kernel); NULL for NULL. Any thread. */
sim_stream* se_stream_sim(SP_Stream stream);

#endif /* SIMDEV_SE_SE_H_ */
