/*
 * array.h - what the files of the array (data movement) kernel family share:
 * their parallel grain, and the strided copy engine slice.c (Slice,
 * StridedSlice and its gradient) defines and pad.c (Pad, MirrorPad) and
 * split.c (Split, SplitV, Unpack) also use. A requested shape (Fill's dims,
 * BroadcastTo's shape, ...) is read with the framework's
 * sk_shape_from_tensor. Each file registers its own ops (sk.h). Not part of
 * the sk_ framework.
 */
#ifndef SIMDEV_KERNELS_ARRAY_H_
#define SIMDEV_KERNELS_ARRAY_H_

#include "kernels/framework/sk.h"

#define SKA_GRAIN (1 << 15) /* elements per parallel chunk, roughly */

/* slice.c: the strided copy engine. y[yoff + sum_k i_k * yst[k]] =
 * x[xoff + sum_k i_k * xst[k]] for every index i of the box d (element
 * units; strides may be negative or 0). Elements of 1, 2, 4, 8 or 16 bytes
 * are moved as raw bytes, so one engine serves every dtype. */
typedef struct ska_strided {
  const char* x;
  char* y;
  size_t es;
  int nd; /* 0 is a single element */
  int64_t d[SK_MAX_DIMS];
  int64_t xst[SK_MAX_DIMS], yst[SK_MAX_DIMS];
  int64_t xoff, yoff;
} ska_strided;

/* Worker side (a run function): the copy, spread over the cores. Merges
 * size-1 and contiguous dimensions of *s first (so it modifies *s). Writes
 * of different indices never overlap when yst describes distinct elements,
 * so the result does not depend on how the work is split. */
void ska_strided_copy(ska_strided* s);
/* Worker side: fills n elements of es bytes at y with the element at v. */
void ska_fill_elems(char* y, int64_t n, size_t es, const void* v);

#endif /* SIMDEV_KERNELS_ARRAY_H_ */
