"""Huge-dims cases of the registration sweep (Spec.huge / Spec.no_huge,
specs_core.py): for each op whose SIMDEV kernel computes a shape from input
values or attributes, sizes whose element count overflows int64 (or sums of
dims past it, or window attributes past int32: TF CPU raises InvalidArgument
for all); for every other op, why it has none. Sizes that are representable
but enormous (2**40 elements) give ResourceExhausted on both devices, but
only after TF's BFC allocator has retried for about 10 s on SIMDEV, too
slow for the sweep: the kernels meet them through sk_output like any other
allocation. SIMDEV must raise TF CPU's class, never
abort: src/arith/dims.h is the check every kernel's shapes pass.

Cases TF CPU itself aborts on are not here (they would kill the sweep); they
are in docs/tf-cpu-divergences.md, and tests/tf/test_kernels_huge.py checks
SIMDEV's InvalidArgument for them. NumPy cannot make an empty array whose
non-zero dims multiply past 2**63 bytes, which rules out most empty inputs
with huge dims here. apply() fills the fields of the specs in SPECS.
"""
import dataclasses

import numpy as np

from specs_core import BROADCAST_EMPTY, HUGE, SAME_SHAPE, Case, i32, i64, vals

P32, P40, I32MAX, I64MAX = 2 ** 32, 2 ** 40, 2 ** 31 - 1, 2 ** 63 - 1


def _c(name, **kw):
    return Case(name, kw)


def _one(*cases):
    return lambda quick: list(cases)


def _random(op, extra):
    return _one(_c("shape [2**32,2**32]", shape=i64([P32, P32]), **extra))


_SEED = {"seed": i64([1, 2])}
_V2 = {"key": np.array([1], np.uint64), "counter": np.array([0, 0], np.uint64),
       "alg": i32(1)}

HUGE_CASES = {
    "UnsortedSegmentSum": _one(
        _c("num_segments 2**62", data=vals((4, 2)), segment_ids=i64([0, 1, 0, 1]),
           num_segments=i64(HUGE))),
    "Fill": _one(_c("dims [2**32,2**32]", dims=i64([P32, P32]), value=np.array(1.0)),
                 _c("dims [2**62,4]", dims=i64([HUGE, 4]), value=np.array(1.0))),
    "BroadcastTo": _one(_c("shape [2**32,2**32]", input=vals((1, 1)), shape=i64([P32, P32]))),
    "Tile": _one(_c("multiples [2**32,2**32]", input=vals((1, 1)), multiples=i64([P32, P32])),
                 _c("multiples [2**62,1] of [2,3]", input=vals((2, 3)),
                    multiples=i64([HUGE, 1]))),
    "Pad": _one(_c("paddings sum past int64", input=vals((2,)), paddings=i64([[HUGE, HUGE]])),
                _c("paddings [2**32,0]x2", input=vals((1, 1)),
                   paddings=i64([[P32, 0], [P32, 0]]))),
    "PadV2": _one(_c("paddings sum past int64", input=vals((2,)), paddings=i64([[HUGE, HUGE]]),
                     constant_values=np.array(0.0)),
                  _c("paddings [2**32,0]x2", input=vals((1, 1)),
                     paddings=i64([[P32, 0], [P32, 0]]), constant_values=np.array(0.0))),
    "MirrorPad": _one(_c("paddings 2**62", input=vals((2,)), paddings=i64([[HUGE, HUGE]]),
                         mode="REFLECT")),
    "MirrorPadGrad": _one(_c("paddings 2**62", input=vals((2,)), paddings=i64([[HUGE, HUGE]]),
                             mode="REFLECT")),
    "Slice": _one(_c("begin and size 2**62", input=vals((4,)), begin=i64([HUGE]),
                     size=i64([HUGE]))),
    "StridedSliceGrad": _one(
        _c("shape [2**32,2**32]", shape=i64([P32, P32]), begin=i64([0, 0]), end=i64([1, 1]),
           strides=i64([1, 1]), dy=vals((1, 1)))),
    "SplitV": _one(_c("size_splits sum past int64", value=vals((4,)),
                      size_splits=i64([HUGE, HUGE, -1]), axis=i32(0), num_split=3)),
    "GatherV2": _one(_c("output [2**59,16] of empty params", params=np.zeros((2 ** 59, 0)),
                        indices=i32([0] * 16), axis=i32(1))),
    "ScatterNd": _one(_c("shape [2**32,2**32]", indices=i64([[0, 0]]), updates=vals((1,)),
                         shape=i64([P32, P32]))),
    "TensorScatterUpdate": _one(_c("tensor [2**40,0], int32 indices",
                                   tensor=np.zeros((P40, 0)),
                                   indices=np.zeros((0, 1), np.int32),
                                   updates=np.zeros((0, 0)))),
    "TensorScatterAdd": _one(_c("tensor [2**40,0], int32 indices", tensor=np.zeros((P40, 0)),
                                indices=np.zeros((0, 1), np.int32),
                                updates=np.zeros((0, 0)))),
    "StatelessRandomUniform": _random("StatelessRandomUniform", _SEED),
    "StatelessRandomNormal": _random("StatelessRandomNormal", _SEED),
    "StatelessTruncatedNormal": _random("StatelessTruncatedNormal", _SEED),
    "StatelessRandomUniformFullInt": _random("StatelessRandomUniformFullInt", _SEED),
    "StatelessRandomUniformInt": _random(
        "StatelessRandomUniformInt", dict(_SEED, minval=np.array(0), maxval=np.array(5))),
    "StatelessRandomUniformV2": _random("StatelessRandomUniformV2", _V2),
    "StatelessRandomNormalV2": _random("StatelessRandomNormalV2", _V2),
    "StatelessTruncatedNormalV2": _random("StatelessTruncatedNormalV2", _V2),
    "StatelessRandomUniformFullIntV2": _random("StatelessRandomUniformFullIntV2", _V2),
    "StatelessRandomUniformIntV2": _random(
        "StatelessRandomUniformIntV2", dict(_V2, minval=np.array(0), maxval=np.array(5))),
    "ResizeBilinear": _one(_c("size 2**31-1 of 4 images", images=vals((4, 1, 1, 1)),
                              size=i32([I32MAX, I32MAX]))),
    "ResizeNearestNeighbor": _one(_c("size 2**31-1 of 4 images", images=vals((4, 1, 1, 1)),
                                     size=i32([I32MAX, I32MAX]))),
    "ResizeNearestNeighborGrad": _one(_c("size 2**31-1 of 4 images", grads=vals((4, 1, 1, 1)),
                                         size=i32([I32MAX, I32MAX]))),
    "ResizeBilinearGrad": _one(_c("original [4,2**31-1,0,1]", grads=vals((4, 1, 1, 1)),
                                  original_image=np.zeros((4, I32MAX, 0, 1)))),
    "Conv2DBackpropFilter": _one(
        _c("filter_sizes [2**31-1,2**31-1,1,4]", input=vals((1, 1, 1, 1)),
           filter_sizes=i32([I32MAX, I32MAX, 1, 4]), out_backprop=vals((1, 1, 1, 4)),
           strides=[1, 1, 1, 1], padding="SAME")),
    "DepthwiseConv2dNativeBackpropFilter": _one(
        _c("filter_sizes [2**31-1,2**31-1,1,4]", input=vals((1, 1, 1, 1)),
           filter_sizes=i32([I32MAX, I32MAX, 1, 4]), out_backprop=vals((1, 1, 1, 4)),
           strides=[1, 1, 1, 1], padding="SAME")),
    "AvgPoolGrad": _one(_c("orig_input_shape [4,2**31-1,2**31-1,1]",
                           orig_input_shape=i32([4, I32MAX, I32MAX, 1]), grad=vals((4, 1, 1, 1)),
                           ksize=[1, I32MAX, I32MAX, 1], strides=[1, I32MAX, I32MAX, 1],
                           padding="VALID")),
    "AvgPool": _one(_c("ksize past int32", value=vals((1, 2, 2, 1)), ksize=[1, I64MAX, 1, 1],
                       strides=[1, I64MAX, 1, 1], padding="SAME")),
    "MatMul": _one(_c("[2**40,0]x[0,2**40]", a=np.zeros((P40, 0)), b=np.zeros((0, P40)))),
    "BatchMatMulV2": _one(_c("[1,2**40,0]x[1,0,2**40]", x=np.zeros((1, P40, 0)),
                             y=np.zeros((1, 0, P40)))),
}

_EMPTY_HUGE = ("only empty inputs with huge dims could overflow its output, and NumPy cannot "
               "make them here (non-zero dims past 2**63 bytes); ")
_DNN = ("TF CPU with oneDNN (TF_ENABLE_ONEDNN_OPTS=1, the default on AVX-512 VNNI/BF16 "
        "machines) aborts on its huge case (docs/tf-cpu-divergences.md), which would kill "
        "the sweep; SIMDEV's refusal: tests/tf/test_kernels_huge.py")
NO_HUGE = {
    "Conv2DBackpropInput": _DNN,
    "DepthwiseConv2dNativeBackpropInput": _DNN,
    "MaxPool": _DNN,
    "Conv2D": _DNN,
    "DepthwiseConv2dNative": _DNN,
    "Einsum": _DNN,
    "OneHot": "depth is an int32: an output past int64 needs 2**32 indices, or empty ones TF "
              "CPU aborts on (docs/tf-cpu-divergences.md); SIMDEV's refusal: "
              "tests/tf/test_kernels_huge.py",
    "ConcatV2": _EMPTY_HUGE + "TF CPU aborts on an overflowing axis sum "
                "(docs/tf-cpu-divergences.md); SIMDEV's refusal: tests/tf/test_kernels_huge.py",
    "Pack": _EMPTY_HUGE + "TF CPU aborts on an overflowing count (docs/tf-cpu-divergences.md); "
            "SIMDEV's refusal: tests/tf/test_kernels_huge.py",
    "Transpose": _EMPTY_HUGE + "SIMDEV's refusal: tests/tf/test_kernels_huge.py",
    "Unpack": SAME_SHAPE, "Split": SAME_SHAPE, "StridedSlice": SAME_SHAPE,
    "Bitcast": SAME_SHAPE, "ArgMax": SAME_SHAPE, "ArgMin": SAME_SHAPE,
    "_FusedMatMul": "its bias must have the output's 2**40 columns: too large to make",
    "_FusedConv2D": "attributes as Conv2D's (same reader, conv.c); its CPU reference is "
                    "another op (cpu_op)",
    "_FusedDepthwiseConv2dNative": "attributes as DepthwiseConv2dNative's (same reader)",
    "MaxPoolGrad": "ksize and strides as MaxPool's (one reader, pooling.c); its output has "
                   "orig_input's shape",
    "SelectV2": BROADCAST_EMPTY,
    "Select": SAME_SHAPE,
    "_SimdevFusedElementwise": "its N-input broadcast refuses a count past int64 "
                               "(test_ewprog's broadcast_overflow); no TF CPU kernel",
    "SimdevFromDlpack": "the shape comes from a DLPack capsule: src/dlpack checks its sizes "
                        "with overflow checks (test_dlpack, fuzz_dlpack)",
    "SimdevToDlpack": SAME_SHAPE,
    "StatelessRandomGetAlg": "fixed-size outputs",
    "StatelessRandomGetKeyCounter": "fixed-size outputs",
    "StatelessRandomGetKeyCounterAlg": "fixed-size outputs",
}
for _op in ("AddN", "BiasAdd", "BiasAddGrad", "Cast", "FusedBatchNorm", "FusedBatchNormV2",
            "FusedBatchNormV3", "FusedBatchNormGrad", "FusedBatchNormGradV2",
            "FusedBatchNormGradV3", "Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
            "SparseSoftmaxCrossEntropyWithLogits", "ZerosLike", "OnesLike"):
    NO_HUGE[_op] = SAME_SHAPE
_REDUCE = ("its output drops or keeps input dims; dropping an empty one can overflow "
           "([2**62,0,4] summed over axis 1), but TF CPU aborts on that "
           "(docs/tf-cpu-divergences.md); SIMDEV's refusal: tests/tf/test_kernels_huge.py")
for _op in ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any"):
    NO_HUGE[_op] = _REDUCE


def apply(specs):
    """specs with huge / no_huge filled in from the tables above; a spec
    keeps what it set itself (unary(), binary(), grad2() set no_huge)."""
    out = {}
    for op, s in specs.items():
        if op in HUGE_CASES and not s.huge:
            s = dataclasses.replace(s, huge=HUGE_CASES[op])
        elif op in NO_HUGE and not s.no_huge and not s.huge:
            s = dataclasses.replace(s, no_huge=NO_HUGE[op])
        out[op] = s
    return out
