/*
 * misc.h - what the two files of the misc kernel family share: misc.c
 * (metadata-only ops, fills and Cast) defines these helpers, shape_ops.c
 * (ops that reorder or replicate data) uses them; misc.c needs nothing from
 * shape_ops.c. Each registers its own ops (sk.h). Not part of the sk_
 * framework.
 */
#ifndef SIMDEV_KERNELS_MISC_H_
#define SIMDEV_KERNELS_MISC_H_

#include "kernels/sk.h"

#define SKM_GRAIN (1 << 15) /* elements per parallel chunk, roughly */

/* misc.c: sets s->n from s->d. */
void skm_shape_count(sk_shape* s);
/* misc.c: a host vector of dimension sizes (Fill's dims, BroadcastTo's
 * shape) into *o: rank <= SK_MAX_DIMS, sizes >= 0, element count within
 * int64; fails the launch with TF's messages otherwise. */
bool skm_read_dims(sk_launch* l, const TF_Tensor* t, sk_shape* o);

#endif /* SIMDEV_KERNELS_MISC_H_ */
