/*
 * f16.h - float16 / bfloat16 <-> float32 conversions for the kernels
 * that widen 16-bit floats (batchnorm.c, matmul.c, resize.c), prefix skh_.
 * Conversions to the 16-bit types round to nearest even, as Eigen's half and
 * bfloat16 do; NaN stays NaN. Pure functions, any thread.
 */
#ifndef SIMDEV_KERNELS_F16_H_
#define SIMDEV_KERNELS_F16_H_

#include <stdint.h>
#include <string.h>

#include "kernels/framework/sk.h"

static inline float skh_half_to_float(uint16_t h) {
  _Float16 v;
  memcpy(&v, &h, 2);
  return (float)v;
}

static inline uint16_t skh_float_to_half(float f) {
  _Float16 v = (_Float16)f; /* IEEE conversion: round to nearest even */
  uint16_t h;
  memcpy(&h, &v, 2);
  return h;
}

static inline float skh_bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t skh_float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* Element i of float32 / float64 / float16 / bfloat16 data as a double. */
static inline double skh_load(TF_DataType dt, const void* p, int64_t i) {
  switch (dt) {
    case TF_FLOAT: return ((const float*)p)[i];
    case TF_DOUBLE: return ((const double*)p)[i];
    case TF_HALF: return skh_half_to_float(((const uint16_t*)p)[i]);
    default: return skh_bf16_to_float(((const uint16_t*)p)[i]);
  }
}

/* Stores v as element i (16-bit types: through float32, as TF does). */
static inline void skh_store(TF_DataType dt, void* p, int64_t i, double v) {
  switch (dt) {
    case TF_FLOAT: ((float*)p)[i] = (float)v; break;
    case TF_DOUBLE: ((double*)p)[i] = v; break;
    case TF_HALF: ((uint16_t*)p)[i] = skh_float_to_half((float)v); break;
    default: ((uint16_t*)p)[i] = skh_float_to_bf16((float)v); break;
  }
}

#endif /* SIMDEV_KERNELS_F16_H_ */
