/*
 * legacy_probe.c - test-only targets in XLA's two oldest CPU custom-call
 * conventions, built with cc by tests/jax/test_jax_legacy.py to pin what
 * jaxlib's XLA:CPU does with them (they run, and XLA logs that they are
 * being removed). Neither receives the opaque string or any shape, so the
 * size is fixed here: four floats. simdev's own legacy target
 * (src/xla/legacy.c) uses the version that does get opaque.
 */
#include <stddef.h>

#define N 4

/* API_VERSION_ORIGINAL (custom_call_api_version=1): out = in0 + in1. */
void probe_v1(void* out, const void** in) {
  const float* a = in[0];
  const float* b = in[1];
  float* c = out;
  for (int i = 0; i < N; i++) c[i] = a[i] + b[i];
}

/* API_VERSION_STATUS_RETURNING (custom_call_api_version=2): out = in0 - in1;
 * status (XLA's XlaCustomCallStatus*) is left alone: success. */
void probe_v2(void* out, const void** in, void* status) {
  (void)status;
  const float* a = in[0];
  const float* b = in[1];
  float* c = out;
  for (int i = 0; i < N; i++) c[i] = a[i] - b[i];
}
