"""Huge dims where the sweep cannot go: SIMDEV kernels given empty inputs
whose dims make an output of more than 2**63 - 1 elements (or a dim sum past
int64) raise InvalidArgument from the kernel, and the device works after;
valid empty inputs whose dims past the first multiply past int64 give TF's
empty outputs (test_valid_empty).

TF's TensorShape aborts the process on such a shape, and TF CPU's own
kernels do for most of these (docs/tf-cpu-divergences.md), so these run on
SIMDEV only, except Transpose, whose CPU kernel raises the same class (it
is here because NumPy cannot make its input). Also here: the value- and
attribute-driven cases on which TF CPU aborts only with oneDNN on
(Conv2DBackpropInput's input_sizes, MaxPool's ksize, Conv2D's dilations...). The inputs are empty tensors
made by tf.zeros on the CPU (NumPy refuses dims past 2**63 bytes). The
value-driven cases (num_segments, paddings, sizes ...) are the sweep's
(tests/sweep/specs_huge.py); the shape check itself is tests/unit/test_dims.c.
"""
import re

import pytest

from conftest import assert_error_like_cpu, assert_kernel_error

SCRIPT = r'''
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"
R = tf.raw_ops
P62, P32, I32 = 2 ** 62, 2 ** 32, 2 ** 31 - 1

def z(shape, dt=tf.float32):
    with tf.device(CPU):
        return tf.zeros(shape, dt)

def f(shape):
    with tf.device(CPU):
        return tf.ones(shape, tf.float32)

def c(x, dt=tf.int32):
    with tf.device(CPU):
        return tf.constant(x, dt)

def good():
    with tf.device(SIM):
        y = R.AddV2(x=tf.ones([2]), y=tf.ones([2]))
    return "SIMDEV:0" in y.device and list(y.numpy()) == [2.0, 2.0]

# (op [label], SIMDEV-only?, thunk, key): one per line, read by
# error_cases(); a label after the op name tells apart cases of one op.
CASES = [
    ("ConcatV2", True, lambda: R.ConcatV2(values=[z([0, P62]), z([0, P62])], axis=c(1)), "overflows int64"),
    ("Pack", True, lambda: R.Pack(values=[z([P62, 0])] * 3, axis=0), "would have more than 2**63 - 1 elements"),
    ("Transpose", False, lambda: R.Transpose(x=z([0, P62, 4]), perm=c([1, 2, 0])), "would have more than 2**63 - 1 elements"),
    ("AddV2", True, lambda: R.AddV2(x=z([P32, 1, 0]), y=z([1, P32, 0])), "would have more than 2**63 - 1 elements"),
    ("Greater", True, lambda: R.Greater(x=z([P32, 1, 0]), y=z([1, P32, 0])), "would have more than 2**63 - 1 elements"),
    ("SelectV2", True, lambda: R.SelectV2(condition=z([P32, 1, 0], tf.bool), t=z([1, P32, 0]), e=z([1, 1, 0])), "would have more than 2**63 - 1 elements"),
    ("BatchMatMulV2", True, lambda: R.BatchMatMulV2(x=z([P32, 1, 2, 0]), y=z([1, P32, 0, 2])), "would have more than 2**63 - 1 elements"),
    ("Sum", True, lambda: R.Sum(input=z([P62, 0, 4]), axis=c([1])), "would have more than 2**63 - 1 elements"),
    ("Max", True, lambda: R.Max(input=z([0, P62, 4]), axis=c([0])), "would have more than 2**63 - 1 elements"),
    ("OneHot", True, lambda: R.OneHot(indices=z([P32, 4, 0], tf.int32), depth=c(2 ** 31 - 1), on_value=c(1.0, tf.float32), off_value=c(0.0, tf.float32), axis=1), "would have more than 2**63 - 1 elements"),
    ("MirrorPadGrad", True, lambda: R.MirrorPadGrad(input=f([1]), paddings=c([[P62 + 1, P62 + 1]], tf.int64), mode="REFLECT"), "overflows int64"),
    ("Tile", True, lambda: R.Tile(input=z([0, 4]), multiples=c([1, P62], tf.int64)), "overflows int64"),
    # Value- or attribute-driven, but TF CPU with oneDNN aborts on them
    # (tests/sweep/specs_huge.py's _DNN), so not in the sweep.
    ("Conv2DBackpropInput", True, lambda: R.Conv2DBackpropInput(input_sizes=c([1, I32, I32, 4]), filter=f([1, 1, 4, 1]), out_backprop=f([1, 1, 1, 1]), strides=[1, I32, I32, 1], padding="VALID"), "would have more than 2**63 - 1 elements"),
    ("DepthwiseConv2dNativeBackpropInput", True, lambda: R.DepthwiseConv2dNativeBackpropInput(input_sizes=c([1, I32, I32, 4]), filter=f([1, 1, 4, 1]), out_backprop=f([1, 1, 1, 4]), strides=[1, I32, I32, 1], padding="VALID"), "would have more than 2**63 - 1 elements"),
    ("MaxPool", True, lambda: R.MaxPool(input=f([1, 2, 2, 1]), ksize=[1, 2 ** 63 - 1, 1, 1], strides=[1, 2 ** 63 - 1, 1, 1], padding="SAME"), "out of range for an int32"),
    ("Conv2D", True, lambda: R.Conv2D(input=f([1, 4, 4, 1]), filter=f([3, 3, 1, 1]), strides=[1, 1, 1, 1], padding="SAME", dilations=[1, P62, P62, 1]), "out of range for an int32"),
    ("DepthwiseConv2dNative", True, lambda: R.DepthwiseConv2dNative(input=f([1, 4, 4, 1]), filter=f([3, 3, 1, 1]), strides=[1, 1, 1, 1], padding="SAME", dilations=[1, P62, P62, 1]), "out of range for an int32"),
    # Window sizes past int64 (src/arith/conv.c sa_conv_window, pooling.c
    # pool_dim): TF CPU raises InvalidArgument for the Conv2D ones; for the
    # pooling ones its sum wraps and it returns a [0, 0, 1, 1] output
    # (docs/tf-cpu-divergences.md).
    ("Conv2D explicit", False, lambda: R.Conv2D(input=z([1, 4, 4, 1]), filter=z([1, 1, 1, 1]), strides=[1, 1, 1, 1], padding="EXPLICIT", explicit_paddings=[0, 0, P62, P62, 0, 0, 0, 0]), "Computed output size overflows int64"),
    ("Conv2D same", False, lambda: R.Conv2D(input=z([0, 2 ** 63 - 1, 1, 1]), filter=z([1, 1, 1, 1]), strides=[1, 2, 1, 1], padding="SAME"), "Computed output size overflows int64"),
    ("MaxPool same", True, lambda: R.MaxPool(input=z([0, 2 ** 63 - 1, 1, 1]), ksize=[1, 1, 1, 1], strides=[1, 2, 1, 1], padding="SAME"), "pooling output size"),
    ("AvgPool", True, lambda: R.AvgPool(value=z([0, 2 ** 63 - 1, 1, 1]), ksize=[1, 1, 1, 1], strides=[1, 2, 1, 1], padding="VALID"), "pooling output size"),
    ("Einsum", True, lambda: R.Einsum(inputs=[z([2 ** 40, 0]), z([0, 2 ** 40])], equation="ij,jk->ik"), "would have more than 2**63 - 1 elements"),
]

# Valid empty inputs whose dims, skipping the first (0), multiply past
# 2**63 - 1: a kernel must not form those products (it divided by zero in
# FusedBatchNorm, SIGFPE). (name, thunk), one per line, read by
# empty_cases(); the expected outputs are in EMPTY_EXPECTED below. TF CPU
# gives the same shapes (and values, where written there) with
# TF_ENABLE_ONEDNN_OPTS=0 and =1; it leaves FusedBatchNormV3's reserve
# spaces unset, so those are not compared.
EMPTY = [
    ("FusedBatchNormV3 NCHW", lambda: R.FusedBatchNormV3(x=z([0, 1, 3, P62]), scale=f([1]), offset=z([1]), mean=z([0]), variance=z([0]), is_training=True, data_format="NCHW")),
    ("FusedBatchNormV3 NHWC", lambda: R.FusedBatchNormV3(x=z([0, 3, P62, 1]), scale=f([1]), offset=z([1]), mean=z([0]), variance=z([0]), is_training=True, data_format="NHWC")),
    ("FusedBatchNormGradV3 NCHW", lambda: R.FusedBatchNormGradV3(y_backprop=z([0, 1, 3, P62]), x=z([0, 1, 3, P62]), scale=f([1]), reserve_space_1=z([1]), reserve_space_2=f([1]), reserve_space_3=z([0]), is_training=True, data_format="NCHW")),
    ("FusedBatchNormGradV3 NHWC", lambda: R.FusedBatchNormGradV3(y_backprop=z([0, 3, P62, 1]), x=z([0, 3, P62, 1]), scale=f([1]), reserve_space_1=z([1]), reserve_space_2=f([1]), reserve_space_3=z([0]), is_training=True, data_format="NHWC")),
    ("GatherV2", lambda: R.GatherV2(params=z([0, 5, P62, 4]), indices=c([1, 3]), axis=c(1))),
    ("OneHot", lambda: R.OneHot(indices=z([0, P62, 2], tf.int32), depth=c(3), on_value=c(1.0, tf.float32), off_value=c(0.0, tf.float32), axis=1)),
    ("ArgMax", lambda: R.ArgMax(input=z([0, 5, P62, 4]), dimension=c(1))),
    ("UnsortedSegmentSum", lambda: R.UnsortedSegmentSum(data=z([0, 4, 2 ** 61]), segment_ids=z([0], tf.int32), num_segments=c(0))),
    ("Sum", lambda: R.Sum(input=z([0, 5, P62, 4]), axis=c([1]))),
    ("Sum kept 0", lambda: R.Sum(input=z([3, 0, P62, 4]), axis=c([2, 3]))),
    ("BiasAdd NCHW", lambda: R.BiasAdd(value=z([0, 3, P62, 4]), bias=z([3]), data_format="NCHW")),
    ("BiasAddGrad NCHW", lambda: R.BiasAddGrad(out_backprop=z([0, 3, P62, 4]), data_format="NCHW")),
    ("AddV2", lambda: R.AddV2(x=z([0, P62, 4]), y=z([0, 1, 4]))),
]

def outputs(thunk):
    """[shape, on SIMDEV?, values or None] of each output (values only of
    small ones: NumPy cannot hold [0, 2**62], and NaN as a string)."""
    with tf.device(SIM):
        r = thunk()
    out = []
    for t in (r if isinstance(r, (list, tuple)) else [r]):
        small = max(t.shape.as_list(), default=0) < 16
        vals = [repr(float(v)) for v in t.numpy().ravel()] if small else None
        out.append([t.shape.as_list(), "SIMDEV:0" in t.device, vals])
    return out

for name, thunk in EMPTY:
    @check("empty " + name)
    def _(thunk=thunk):
        return {"out": outputs(thunk), "after": after_ok(good)}

def run(thunk, dev):
    try:
        with tf.device(dev):
            r = thunk()
        for t in (r if isinstance(r, (list, tuple)) else [r]):
            t.numpy()
    except Exception as e:
        return [type(e).__name__, str(e)[:2000]]
    return ["", ""]

for op, sim_only, thunk, key in CASES:
    @check("huge " + op)
    def _(thunk=thunk, sim_only=sim_only):
        out = {"sim": run(thunk, SIM)}
        if not sim_only:
            out["cpu"] = run(thunk, CPU)
        out["after"] = after_ok(good)
        return out
'''


@pytest.fixture(scope="module")
def huge(run_tf):
    return run_tf(SCRIPT, timeout=300)


P62 = 2 ** 62
BN_FWD = lambda x: [[x, None], [[1], ["nan"]], [[1], ["nan"]], [[1], None], [[1], None], [[], None]]
BN_GRAD = lambda x: [[x, None], [[1], ["0.0"]], [[1], ["0.0"]], [[0], None], [[0], None]]
# name -> [[shape, values (None: not compared)] per output]
EMPTY_EXPECTED = {
    "FusedBatchNormV3 NCHW": BN_FWD([0, 1, 3, P62]),
    "FusedBatchNormV3 NHWC": BN_FWD([0, 3, P62, 1]),
    "FusedBatchNormGradV3 NCHW": BN_GRAD([0, 1, 3, P62]),
    "FusedBatchNormGradV3 NHWC": BN_GRAD([0, 3, P62, 1]),
    "GatherV2": [[[0, 2, P62, 4], None]],
    "OneHot": [[[0, 3, P62, 2], None]],
    "ArgMax": [[[0, P62, 4], None]],
    "UnsortedSegmentSum": [[[0, 4, 2 ** 61], None]],
    "Sum": [[[0, P62, 4], None]],
    "Sum kept 0": [[[3, 0], []]],
    "BiasAdd NCHW": [[[0, 3, P62, 4], None]],
    "BiasAddGrad NCHW": [[[3], ["0.0"] * 3]],
    "AddV2": [[[0, P62, 4], None]],
}


def empty_cases():
    return re.findall(r'^    \("([\w ]+)", lambda', SCRIPT, re.M)


def test_empty_cases_found():
    assert sorted(empty_cases()) == sorted(EMPTY_EXPECTED)


@pytest.mark.parametrize("name", sorted(EMPTY_EXPECTED))
def test_valid_empty(huge, name):
    """Each output has TF's shape, is on SIMDEV, and where small has the
    values TF CPU gives (the batch statistics of nothing are NaN; sums of
    nothing are 0, exactly)."""
    d = huge.data("empty " + name)
    got, want = d["out"], EMPTY_EXPECTED[name]
    assert len(got) == len(want), (name, got)
    for i, ((shape, on_sim, vals), (wshape, wvals)) in enumerate(zip(got, want)):
        assert shape == wshape and on_sim, (name, i, got)
        if wvals is not None:
            assert vals == wvals, (name, i, got)
    assert d["after"] is True, d["after"]


def error_cases():
    return re.findall(r'^    \("(\w+(?: \w+)?)", (True|False), lambda.*, "([^"]+)"\),$', SCRIPT, re.M)


@pytest.mark.parametrize("op,sim_only,key", error_cases())
def test_refused_by_kernel(huge, op, sim_only, key):
    d = huge.data("huge " + op)
    op = op.split()[0]  # the label's op name, in TF's error marker
    if sim_only == "True":
        assert_kernel_error(d["sim"], op, key, cls="InvalidArgumentError")
        assert d["after"] is True, d["after"]
    else:
        assert d["cpu"][0] == "InvalidArgumentError", d["cpu"]
        assert_error_like_cpu(d, op, key, cpu_key=False)


def test_error_cases_found():
    assert len(error_cases()) == 22


def test_clean_exit(huge):
    huge.assert_clean_exit()
