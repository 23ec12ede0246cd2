/*
 * random.h - the stateless random family (prefix skr_): random_philox.c
 * draws the numbers, random.c holds the kernels and their op table.
 *
 * The numbers are TensorFlow CPU's, bit for bit: Philox-4x32-10 with TF's
 * key/counter layout, one generator call per output group, TF's mantissa
 * construction of floats, Box-Muller normals and TF's truncated-normal
 * rejection (random_philox.c says how). Thread contract: skr_seed_key runs on
 * any thread; skr_fill runs on the stream worker and spreads over
 * sim_parallel_for, touching only the output and its own arguments.
 */
#ifndef SIMDEV_KERNELS_RANDOM_H_
#define SIMDEV_KERNELS_RANDOM_H_

#include <stdint.h>

#include "kernels/framework/sk.h"

/* The distributions of TF's stateless ops. */
typedef enum skr_dist {
  SKR_UNIFORM,   /* [0, 1) floats; [lo, hi) integers (SKR_INT) */
  SKR_NORMAL,    /* standard normal, Box-Muller */
  SKR_TRUNCATED, /* standard normal restricted to (-2, 2), by rejection */
  SKR_INT,       /* integers in [lo, lo + range) */
  SKR_FULL_INT,  /* every bit pattern of the integer type */
} skr_dist;

/* A Philox-4x32-10 stream position: the 64-bit key as two words (low
 * first) and the 128-bit counter as four (least significant first). */
typedef struct skr_gen {
  uint32_t key[2];
  uint32_t ctr[4];
} skr_gen;

/* The generator TF derives from a two-element seed (TF's GenerateKey: one
 * Philox block of the seed under a fixed key becomes key and counter). */
void skr_seed_key(uint64_t seed0, uint64_t seed1, skr_gen* g);

/* The generator of TF's 64-bit key / counter words (key[0], counter[0..1]). */
void skr_gen_from_words(const uint64_t* key, const uint64_t* counter,
                        skr_gen* g);

/* One fill: n elements of dtype dt drawn from dist at gen. lo and range
 * are SKR_INT's bounds (range = hi - lo as unsigned, > 0). */
typedef struct skr_fill {
  skr_dist dist;
  TF_DataType dt;
  skr_gen gen;
  void* out;
  int64_t n;
  int64_t lo;
  uint64_t range;
} skr_fill;

/* Fills f->out (stream worker; uses sim_parallel_for). The result does not
 * depend on how the work is split: every output group has its own counter. */
void skr_fill_run(const skr_fill* f);

#endif /* SIMDEV_KERNELS_RANDOM_H_ */
