/*
 * dims.c - checked shape arithmetic (arith/dims.h): what a shape must satisfy
 * before TF sees it. No TensorFlow, no state, any thread.
 */
#include "arith/dims.h"

#include <stdio.h>

#include "device_sim/sim.h"

const char* sa_dims_str(const int64_t* d, int nd, char* buf, size_t len) {
  size_t k = 0;
  int w = snprintf(buf, len, "[");
  k = w > 0 ? (size_t)w : 0;
  for (int i = 0; i < nd && k < len; i++) {
    w = snprintf(buf + k, len - k, i ? ",%lld" : "%lld", (long long)d[i]);
    k += w > 0 ? (size_t)w : 0;
  }
  if (k < len) snprintf(buf + k, len - k, "]");
  return buf;
}

void sa_dims_strides(const int64_t* d, int nd, int64_t* st) {
  bool empty = false;
  for (int i = 0; i < nd; i++) empty |= d[i] == 0;
  int64_t v = empty ? 0 : 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = v;
    v *= d[i]; /* non-empty: a partial product of a valid count */
  }
}

int sa_dims_check(const int64_t* d, int nd, size_t elsize, int64_t* n,
                  char* msg, size_t len) {
  char b[16 * 24 + 8];
  int64_t count = 1;
  bool overflow = false;
  for (int i = 0; i < nd; i++) {
    if (d[i] < 0) {
      if (len > 0)
        snprintf(msg, len, "Dimension %d of shape %s is %lld: must be >= 0", i,
                 sa_dims_str(d, nd, b, sizeof(b)), (long long)d[i]);
      return SIM_EINVAL;
    }
    /* TF's order: once a partial product overflowed, a later 0 does not
     * make the shape valid again (TensorShape has already refused it). */
    if (!overflow && !sa_mul_ok(count, d[i], &count)) overflow = true;
  }
  if (overflow) {
    if (len > 0)
      snprintf(msg, len, "Shape %s would have more than 2**63 - 1 elements",
               sa_dims_str(d, nd, b, sizeof(b)));
    return SIM_EINVAL;
  }
  int64_t bytes;
  if (elsize > 0 && (elsize > (size_t)INT64_MAX ||
                     !sa_mul_ok(count, (int64_t)elsize, &bytes))) {
    if (len > 0)
      snprintf(msg, len,
               "a tensor of shape %s with %zu-byte elements would need more "
               "than 2**63 - 1 bytes",
               sa_dims_str(d, nd, b, sizeof(b)), elsize);
    return SIM_ENOMEM;
  }
  *n = count;
  return SIM_OK;
}
