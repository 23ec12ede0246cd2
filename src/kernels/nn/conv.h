/*
 * conv.h - what the convolution files of the nn family share: conv.c
 * (attributes, geometry, Conv2D, _FusedConv2D), conv_backprop.c
 * (Conv2DBackpropInput, Conv2DBackpropFilter), which uses conv.c's
 * machinery, and depthwise.c (the depthwise convolutions), which uses the
 * attributes, geometry and backprop checks of both; conv.c needs nothing
 * from the others. Each registers its own ops (sk.h). The design (im2col +
 * gemm in bounded chunks) is described at the top of src/arith/conv.c. Not
 * part of the sk_ framework.
 *
 * Thread contract: skc_create runs at kernel construction; skc_spatial and
 * skc_prepare on TF's thread (compute functions); sa_conv_fwd / _bp_input /
 * _bp_filter on the stream worker, reading only the sa_conv.
 */
#ifndef SIMDEV_KERNELS_CONV_H_
#define SIMDEV_KERNELS_CONV_H_

#include "arith/sa.h"
#include "kernels/framework/fused.h"
#include "kernels/framework/sk.h"

enum skc_op { SKC_FWD, SKC_BP_INPUT, SKC_BP_FILTER };

/* Attributes, checked once at kernel construction. */
typedef struct skc_attrs {
  enum skc_op op;
  int64_t sh, sw, dh, dw;
  enum sa_pad pad;
  int64_t pads[4]; /* EXPLICIT: top, bottom, left, right */
  bool nchw;
  bool fused; /* _FusedConv2D: input 2 is the bias, fx the epilogue */
  skf_attrs fx;
} skc_attrs;

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
bool skc_spatial(sk_launch* l, const skc_attrs* at, sa_conv_geom* g);
/* The run function's arguments for g (sa_conv_plan), in launch memory,
 * with the im2col scratch allocated as a temporary of the launch. NULL
 * after a failure (a convolution too large for BLAS: InvalidArgument). */
sa_conv* skc_prepare(sk_launch* l, const sa_conv_geom* g, TF_DataType dt);

/* ---- conv_backprop.c ---- */

/* The first check TF's CPU backprops (Conv2DCustomBackprop*,
 * DepthwiseConv2DBackprop*) make of their operands, shared by
 * conv_backprop.c and depthwise.c: input, filter and out_backprop (one of
 * them read from the sizes input) all of rank 4; else InvalidArgument
 * "<who>: <operand> must be 4-dimensional" (who: the CPU kernel's name). */
bool skc_bp_ranks(sk_launch* l, const char* who, const sk_shape* x,
                  const sk_shape* f, const sk_shape* dy);

#endif /* SIMDEV_KERNELS_CONV_H_ */
