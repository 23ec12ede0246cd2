/*
 * conv.h - what the two files of the conv kernel family share: conv.c
 * (attributes, geometry, im2col, Conv2D) and conv_backprop.c
 * (Conv2DBackpropInput, Conv2DBackpropFilter), which uses conv.c's
 * machinery; conv.c needs nothing from it. Each registers its own ops (sk.h).
 * The design (im2col + gemm in bounded chunks) is described at the top of
 * conv.c. Not part of the sk_ framework.
 *
 * Thread contract: skc_create runs at kernel construction; skc_spatial and
 * skc_prepare on TF's thread (compute functions); sk_gemm and skc_im2col on
 * the stream worker, reading only an skc_args.
 */
#ifndef SIMDEV_KERNELS_CONV_H_
#define SIMDEV_KERNELS_CONV_H_

#include "kernels/fused.h"
#include "kernels/sk.h"

enum skc_op { SKC_FWD, SKC_BP_INPUT, SKC_BP_FILTER };
enum skc_pad { SKC_PAD_SAME, SKC_PAD_VALID, SKC_PAD_EXPLICIT };

/* Attributes, checked once at kernel construction. */
typedef struct skc_attrs {
  enum skc_op op;
  int64_t sh, sw, dh, dw;
  enum skc_pad pad;
  int64_t pads[4]; /* EXPLICIT: top, bottom, left, right */
  bool nchw;
  bool fused; /* _FusedConv2D: input 2 is the bias, fx the epilogue */
  skf_attrs fx;
} skc_attrs;

/* Geometry of one launch; every size in elements. */
typedef struct skc_geom {
  int64_t n, h, w, c;    /* input (NHWC) */
  int64_t kh, kw, kc, o; /* filter; kc = input channels per group */
  int64_t oh, ow;        /* output spatial size */
  int64_t sh, sw, dh, dw;
  int64_t pt, pl; /* padding before rows / columns */
  int64_t groups; /* 0 for an input of depth 0 (the output is zeros) */
} skc_geom;

/* The run function's arguments. */
typedef struct skc_args {
  TF_DataType dt;
  size_t es; /* element size */
  skc_geom g;
  /* The forward roles: x input, f filter, y output. Backprops write the
   * gradient in its forward slot: dx in x, dW in f; dy sits in y. */
  void* x;
  void* f;
  void* y;
  void* col;          /* im2col scratch of chunk_rows output rows */
  int64_t chunk_rows; /* output rows (n, oh) per chunk */
  bool direct;        /* col would be x itself: no im2col, one gemm */
  bool zero_only;     /* nothing to multiply: the output is zeros */
  const skf_epi* ep;  /* _FusedConv2D's epilogue (points at epi), or NULL */
  skf_epi epi;
} skc_args;

/* ---- conv.c ---- */

/* A kernel for `op` with its attributes parsed and validated (NULL after
 * reporting a failure to c). */
void* skc_create(TF_OpKernelConstruction* c, enum skc_op op, sk_compute_fn fn);
/* Reads padding and explicit_paddings into at->pad and at->pads (at->nchw
 * must be set), with TF's messages for bad values; shared by conv.c and
 * depthwise.c, which take the same attributes. */
bool skc_padding_attrs(TF_OpKernelConstruction* c, skc_attrs* at);
/* Fills g's output size, strides, dilations and padding from its input and
 * filter sizes (TF's windowed output size rules). */
bool skc_spatial(sk_launch* l, const skc_attrs* at, skc_geom* g);
/* The argument block for g, with direct / zero_only decided and the im2col
 * scratch allocated. NULL after a failure. */
skc_args* skc_prepare(sk_launch* l, const skc_geom* g, TF_DataType dt);
/* col = the patches of output rows [r0, r0 + rows) for channel group grp. */
void skc_im2col(const skc_args* a, int64_t r0, int64_t rows, int64_t grp);

#endif /* SIMDEV_KERNELS_CONV_H_ */
