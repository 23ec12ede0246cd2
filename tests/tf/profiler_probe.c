/*
 * profiler_probe.c - a test-only profiler plugin that shows how TensorFlow
 * drives TF_InitProfiler's callbacks (tests/tf/test_profiler_tf.py builds
 * it with cc into a temporary directory and loads it with
 * tf.load_pluggable_device_library). It exports TF_InitProfiler only: no
 * device, no kernels. Never installed.
 *
 * Every call is reported on stderr as one line
 *   PROBE <what> tid=<Linux tid> [details]
 * so the test can see which callback TF calls, how often, on which thread
 * and with which arguments.
 *
 * PROBE_MODE (environment, read at each collect) decides what
 * collect_data_xspace hands back:
 *   ok        a valid XSpace: one plane "/device:CUSTOM:77" with one line
 *   garbage   the size of that XSpace, filled with bytes that are no XSpace
 *   padded    the valid XSpace announced 8 bytes too long (zeros at the end)
 *   truncated the valid XSpace's first 30 bytes: the plane's name is whole,
 *             its line is cut off
 *   error     size 0 and an INTERNAL status
 *   start_error  start fails (INTERNAL); collect as for ok
 *   init_error   TF_InitProfiler fails (INTERNAL)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h"
#include "tensorflow/c/tf_status.h"

static long tid(void) {
  return (long)syscall(SYS_gettid);
}

/* XSpace { planes (1) { id (1): 77, name (2): "/device:CUSTOM:77",
 *   lines (3) { id (1): 1, name (2): "probe-s0" } } }, encoded by hand. */
static const unsigned char kSpace[] = {
    0x0a, 0x23, /* planes, 35 bytes */
    0x08, 0x4d, /* id 77 */
    0x12, 0x11, '/', 'd', 'e', 'v', 'i', 'c', 'e', ':',
    'C',  'U',  'S', 'T', 'O', 'M', ':', '7', '7', /* name, 17 bytes */
    0x1a, 0x0c,                                    /* lines, 12 bytes */
    0x08, 0x01,                                    /* id 1 */
    0x12, 0x08, 'p', 'r', 'o', 'b', 'e', '-', 's', '0'};

static const char* mode(void) {
  const char* m = getenv("PROBE_MODE");
  return m ? m : "ok";
}

static void probe_start(const TP_Profiler* p, TF_Status* status) {
  fprintf(stderr, "PROBE start tid=%ld\n", tid());
  if (strcmp(mode(), "start_error") == 0) {
    TF_SetStatus(status, TF_INTERNAL, "probe: start failed on purpose");
    return;
  }
  TF_SetStatus(status, TF_OK, "");
}

static void probe_stop(const TP_Profiler* p, TF_Status* status) {
  fprintf(stderr, "PROBE stop tid=%ld\n", tid());
  TF_SetStatus(status, TF_OK, "");
}

static void probe_collect(const TP_Profiler* p, uint8_t* buffer,
                          size_t* size_in_bytes, TF_Status* status) {
  const char* m = mode();
  size_t len = sizeof(kSpace);
  if (strcmp(m, "padded") == 0) len += 8;
  if (strcmp(m, "truncated") == 0) len = 30;
  fprintf(stderr, "PROBE collect tid=%ld buffer=%s size_in=%zu mode=%s\n",
          tid(), buffer ? "set" : "null", buffer ? *size_in_bytes : 0, m);
  if (strcmp(m, "error") == 0) {
    *size_in_bytes = 0;
    TF_SetStatus(status, TF_INTERNAL, "probe: collect failed on purpose");
    return;
  }
  *size_in_bytes = len;
  if (buffer != NULL) {
    if (strcmp(m, "garbage") == 0) {
      memset(buffer, 0xff, len);
    } else {
      memset(buffer, 0, len);
      memcpy(buffer, kSpace, len < sizeof(kSpace) ? len : sizeof(kSpace));
      if (strcmp(m, "padded") == 0) *size_in_bytes = sizeof(kSpace);
    }
  }
  TF_SetStatus(status, TF_OK, "");
}

static void probe_destroy_profiler(TP_Profiler* p) {
  fprintf(stderr, "PROBE destroy_profiler tid=%ld\n", tid());
}

static void probe_destroy_profiler_fns(TP_ProfilerFns* fns) {
  fprintf(stderr, "PROBE destroy_profiler_fns tid=%ld\n", tid());
}

__attribute__((visibility("default"))) void TF_InitProfiler(
    TF_ProfilerRegistrationParams* params, TF_Status* status) {
  fprintf(stderr, "PROBE init tid=%ld struct_size=%zu version=%d.%d.%d\n",
          tid(), params->struct_size, (int)params->major_version,
          (int)params->minor_version, (int)params->patch_version);
  if (strcmp(mode(), "init_error") == 0) {
    TF_SetStatus(status, TF_INTERNAL,
                 "probe: TF_InitProfiler failed on purpose");
    return;
  }
  params->destroy_profiler = probe_destroy_profiler;
  params->destroy_profiler_fns = probe_destroy_profiler_fns;
  params->profiler->struct_size = TP_PROFILER_STRUCT_SIZE;
  params->profiler->device_type = "PROBE";
  params->profiler_fns->struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
  params->profiler_fns->start = probe_start;
  params->profiler_fns->stop = probe_stop;
  params->profiler_fns->collect_data_xspace = probe_collect;
  TF_SetStatus(status, TF_OK, "");
}
