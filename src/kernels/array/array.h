/*
 * array.h - what the files of the misc (data movement) kernel family share:
 * fill_cast.c (metadata-only ops, fills and Cast) defines ska_read_dims;
 * slice.c (Slice, StridedSlice and its gradient) defines the strided copy
 * engine that pad.c (Pad, MirrorPad) and split.c (Split,
 * SplitV, Unpack) also use; shape_ops.c (Transpose, Tile, ...), gather.c
 * and scatter.c use the fill_cast.c helpers. Each file registers its own ops
 * (sk.h). Not part of the sk_ framework.
 */
#ifndef SIMDEV_KERNELS_ARRAY_H_
#define SIMDEV_KERNELS_ARRAY_H_

#include "kernels/framework/sk.h"

#define SKA_GRAIN (1 << 15) /* elements per parallel chunk, roughly */

/* fill_cast.c: a host vector of dimension sizes (Fill's dims, BroadcastTo's
 * shape) into *o: rank <= SK_MAX_DIMS, sizes >= 0, element count within
 * int64; fails the launch with TF's messages otherwise. */
bool ska_read_dims(sk_launch* l, const TF_Tensor* t, sk_shape* o);

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
