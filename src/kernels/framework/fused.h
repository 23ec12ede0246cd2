/*
 * fused.h - the epilogue of TF's fused ops on SIMDEV (prefix skf_):
 * _FusedConv2D (conv.c), _FusedMatMul (matmul.c) and
 * _FusedDepthwiseConv2dNative (depthwise.c) with fused_ops ["BiasAdd"] or
 * ["BiasAdd", <act>], act one of Relu, Relu6, Elu, LeakyRelu, Tanh, Sigmoid.
 *
 * The epilogue y = act(y + bias[channel]) runs in the same work item as
 * the arithmetic that wrote y, on the part it just wrote: sa_gemm
 * applies it to each row block right after the block's OpenBLAS call
 * (src/arith/gemm.c), the depthwise loop to each output pixel it finishes. No
 * second kernel, launch or pass over the whole output in general; but a row
 * block is 1/cores of C (all of C for a product too small to split), so for
 * _FusedMatMul and a direct (1x1, whole-image) convolution the epilogue
 * re-reads a block that may be larger than the cache. Only the im2col
 * path's chunks (scratch <= 4 MiB) are cache-sized.
 *
 * Numerics: the add is the one of BiasAdd's kernel (a + b in the dtype) and
 * each activation is the scalar function the unfused kernel uses
 * (arith/scalar.h; LeakyRelu with alpha converted to the dtype first, as
 * cwise_leaky.c), so a fused op gives the unfused SIMDEV chain's bits
 * whenever its product/convolution is computed by the same calls (it is:
 * the fused kernels share the unfused kernels' run functions).
 *
 * Files: fused.c (construction: attributes; launch: the bias input) runs on
 * TF's threads and fills an sa_epi; the epilogue itself is
 * src/arith/epi.c's sa_epi_apply, on the stream worker and its pool
 * threads (the XLA handlers' simdev_matmul_bias_act runs it too).
 */
#ifndef SIMDEV_KERNELS_FUSED_H_
#define SIMDEV_KERNELS_FUSED_H_

#include "arith/sa.h"
#include "kernels/framework/sk.h"

/* What a fused node's attributes ask for (read once at construction). */
typedef struct skf_attrs {
  enum sa_act act; /* arith/sa.h */
  float alpha;     /* leakyrelu_alpha */
} skf_attrs;

/* ---- fused.c (construction and compute functions, TF's thread) ---- */

/* Reads and checks fused_ops, num_args and leakyrelu_alpha of a fused op
 * whose TF CPU messages call it "Fused <what>" (Conv2D, MatMul,
 * DepthwiseConv2D). Supported: ["BiasAdd"], ["BiasAdd", act] with num_args
 * 1. Everything else fails construction with TF's code (InvalidArgument for
 * a wrong argument count or no fused op, Unimplemented for a fusion SIMDEV
 * does not implement, naming it). False after reporting to c. */
bool skf_attrs_read(TF_OpKernelConstruction* c, const char* what,
                    skf_attrs* out);

/* Input `input` (the bias) checked against `channels` (the output's channel
 * count; out is the output shape, for the message) and e filled for dtype
 * dt. False after failing the launch. */
bool skf_bias(sk_launch* l, int input, int64_t channels, const sk_shape* out,
              const skf_attrs* at, TF_DataType dt, sa_epi* e);

#endif /* SIMDEV_KERNELS_FUSED_H_ */
