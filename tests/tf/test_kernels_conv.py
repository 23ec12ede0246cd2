"""Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter on SIMDEV against a
NumPy reference and TF's CPU kernels.

The reference sums, in float64, one matrix product per filter tap over the
zero-padded input (groups, strides, dilations and explicit paddings
included); the backprops are its exact adjoints. The bound is gamma(K) times
the same computation on absolute values, K the number of terms of each sum
(kh*kw*in_depth forward, kh*kw*out_depth for the input gradient,
batch*out_h*out_w for the filter gradient), plus the reference's own
float64 rounding (conftest): any summation order, any im2col chunking, any
OpenBLAS kernel passes, a wrong tap or a lost term does not.

One subprocess, with TF_ENABLE_ONEDNN_OPTS=0 so that TF CPU runs TF's own
(Eigen) kernels: oneDNN's CPU kernels accept inputs TF's kernels refuse
(e.g. bad explicit_paddings), abort the process on others (a rank-3 Conv2D
input), and give a zero-batch Conv2D the wrong output shape.

Cases: SAME / VALID / EXPLICIT padding, strides (beyond the filter, beyond
the input, leaving a ragged edge), dilations (also wider than the input),
1x1 images and filters, filters larger than the input, odd sizes,
zero-size batch, width, depth and output, grouped convolutions (forward
only, as on CPU), a case that needs several im2col chunks with chunk
borders inside an image, a large layer, float32 and float64. TF's CPU
backprops refuse dilations > 1, which SIMDEV supports; there TF CPU runs the
equivalent undilated convolution (zeros stuffed between the filter taps).
Gradients through tf.GradientTape are checked against the same reference.
Bad inputs and attributes must raise the kernel's own error (TF CPU's class
and wording), and SIMDEV must keep working.
"""
import pytest

from conftest import (assert_divergences_documented, assert_error_like_cpu,
                      assert_vs_ref)

# name -> (input shape, filter shape, strides (h, w), padding, dilations
#          (h, w), explicit paddings (top, bottom, left, right) or None)
CASES = {
    "3x3 same": ((2, 7, 9, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1), None),
    "odd valid stride2": ((2, 7, 9, 3), (3, 2, 3, 4), (2, 2), "VALID", (1, 1), None),
    "stride 2 same": ((2, 8, 9, 5), (3, 3, 5, 6), (2, 2), "SAME", (1, 1), None),
    "stride beyond filter": ((2, 11, 13, 4), (2, 2, 4, 3), (3, 3), "VALID", (1, 1), None),
    "dilation 2 same": ((2, 9, 9, 3), (3, 3, 3, 4), (1, 1), "SAME", (2, 2), None),
    "dilation 2 valid": ((1, 11, 10, 2), (3, 2, 2, 3), (1, 1), "VALID", (2, 3), None),
    "stride and dilation": ((1, 8, 8, 4), (2, 2, 4, 5), (2, 1), "SAME", (1, 2), None),
    "1x1 filter": ((3, 5, 5, 6), (1, 1, 6, 7), (1, 1), "VALID", (1, 1), None),
    "1x1 filter stride 2": ((3, 6, 7, 6), (1, 1, 6, 7), (2, 2), "SAME", (1, 1), None),
    "whole-image filter": ((3, 5, 5, 6), (5, 5, 6, 7), (1, 1), "VALID", (1, 1), None),
    "1x1 image": ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1), "SAME", (1, 1), None),
    "1x1 image 3x3 filter": ((2, 1, 1, 3), (3, 3, 3, 2), (1, 1), "SAME", (1, 1), None),
    "explicit": ((2, 10, 11, 3), (4, 3, 3, 2), (3, 2), "EXPLICIT", (1, 1), (1, 2, 0, 3)),
    "explicit dilated": ((2, 10, 11, 3), (3, 3, 3, 2), (2, 2), "EXPLICIT", (2, 1), (1, 2, 0, 3)),
    "explicit zero pads": ((2, 6, 6, 2), (3, 3, 2, 2), (1, 1), "EXPLICIT", (1, 1), (0, 0, 0, 0)),
    "zero batch": ((0, 5, 5, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1), None),
    "empty output": ((1, 5, 5, 3), (6, 6, 3, 4), (1, 1), "VALID", (1, 1), None),
    "zero out depth": ((1, 5, 5, 3), (3, 3, 3, 0), (1, 1), "SAME", (1, 1), None),
    "chunked stride 2": ((4, 150, 150, 16), (5, 5, 16, 8), (2, 2), "SAME", (1, 1), None),
    "grouped": ((2, 6, 6, 4), (3, 3, 2, 6), (1, 1), "SAME", (1, 1), None),
    "grouped 3 strided": ((1, 7, 7, 6), (3, 3, 2, 9), (2, 2), "VALID", (1, 1), None),
    "input depth 0": ((1, 5, 5, 0), (3, 3, 3, 4), (1, 1), "SAME", (1, 1), None),
    "zero width": ((1, 5, 0, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1), None),
    "stride beyond input": ((1, 3, 3, 2), (2, 2, 2, 3), (4, 4), "SAME", (1, 1), None),
    "ragged stride 3": ((2, 10, 8, 3), (3, 2, 3, 5), (3, 3), "VALID", (1, 1), None),
    "filter wider than input": ((2, 3, 2, 2), (5, 4, 2, 3), (1, 1), "SAME", (1, 1), None),
    "dilation wider than input": ((1, 4, 4, 2), (3, 3, 2, 2), (1, 1), "SAME", (3, 3), None),
    "explicit beyond filter": ((1, 2, 2, 1), (2, 2, 1, 1), (3, 3), "EXPLICIT", (1, 1), (3, 3, 3, 3)),
}
LARGE = ((8, 56, 56, 64), (3, 3, 64, 64), (1, 1), "SAME", (1, 1), None)
DTYPES = ["float32", "float64"]
OPS = ["Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"]

# Cases where TF's CPU kernel disagrees with the reference on some machine
# or setting; see docs/tf-cpu-divergences.md.
TF_CPU_DIVERGENCES = {
    # an out_backprop with no pixels leaves the filter gradient uninitialised
    "Conv2DBackpropFilter float32 empty output",
    "Conv2DBackpropFilter float64 empty output",
    "Conv2DBackpropFilter float32 zero width",
    "Conv2DBackpropFilter float64 zero width",
}
GRAD_CASES = ["3x3 same", "odd valid stride2", "explicit", "1x1 filter"]


def run_names():
    """Every (op, dtype, case) check the subprocess reports."""
    out = []
    for name, c in CASES.items():
        grouped = c[1][2] != c[0][3]
        for dt in DTYPES:
            for op in OPS:
                if op == "Conv2D" or not grouped:
                    out.append(f"{op} {dt} {name}")
    return out


# name -> (op, input/sizes, filter/sizes, out_backprop shape or None, attrs)
ERRORS = {
    "fwd NCHW": ("fwd", (1, 3, 5, 5), (3, 3, 3, 4), None, {"data_format": "NCHW"}),
    "fwd rank3 input": ("fwd", (5, 5, 3), (3, 3, 3, 4), None, {}),
    "fwd rank3 filter": ("fwd", (1, 5, 5, 3), (3, 3, 3), None, {}),
    "fwd depth mismatch": ("fwd", (1, 5, 5, 3), (3, 3, 2, 4), None, {}),
    "fwd groups vs out depth": ("fwd", (1, 5, 5, 4), (3, 3, 2, 3), None, {}),
    "fwd filter depth 0": ("fwd", (1, 5, 5, 0), (3, 3, 0, 4), None, {}),
    "fwd zero-size filter": ("fwd", (1, 5, 5, 3), (0, 3, 3, 4), None, {}),
    "fwd batch stride": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None, {"strides": [2, 1, 1, 1]}),
    "fwd stride 0": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None, {"strides": [1, 0, 1, 1]}),
    "fwd 3 strides": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None, {"strides": [1, 1, 1]}),
    "fwd depth dilation": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None, {"dilations": [1, 1, 1, 2]}),
    "fwd dilation 0": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None, {"dilations": [1, 0, 1, 1]}),
    "fwd valid filter too big": ("fwd", (1, 5, 5, 3), (7, 7, 3, 4), None, {"padding": "VALID"}),
    "fwd explicit 6 values": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None,
                              {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 1, 1, 1]}),
    "fwd explicit negative": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None,
                              {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, -1, 1, 1, 0, 0]}),
    "fwd explicit batch pad": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None,
                               {"padding": "EXPLICIT", "explicit_paddings": [1, 0, 1, 1, 1, 1, 0, 0]}),
    "fwd explicit with SAME": ("fwd", (1, 5, 5, 3), (3, 3, 3, 4), None,
                               {"explicit_paddings": [0, 0, 1, 1, 1, 1, 0, 0]}),
    "bpi NCHW": ("bpi", [1, 3, 5, 5], (3, 3, 3, 4), (1, 4, 5, 5), {"data_format": "NCHW"}),
    "bpi 3 sizes": ("bpi", [1, 5, 5], (3, 3, 3, 4), (1, 5, 5, 4), {}),
    "bpi negative size": ("bpi", [1, -5, 5, 3], (3, 3, 3, 4), (1, 5, 5, 4), {}),
    "bpi wrong out_backprop": ("bpi", [1, 5, 5, 3], (3, 3, 3, 4), (1, 4, 5, 4), {}),
    "bpi batch mismatch": ("bpi", [2, 5, 5, 3], (3, 3, 3, 4), (1, 5, 5, 4), {}),
    "bpi out depth mismatch": ("bpi", [1, 5, 5, 3], (3, 3, 3, 4), (1, 5, 5, 5), {}),
    "bpi depth mismatch": ("bpi", [1, 5, 5, 2], (3, 3, 3, 4), (1, 5, 5, 4), {}),
    "bpi grouped": ("bpi", [1, 5, 5, 6], (3, 3, 3, 4), (1, 5, 5, 4), {}),
    "bpi rank3 out_backprop": ("bpi", [1, 5, 5, 3], (3, 3, 3, 4), (5, 5, 4), {}),
    "bpi batch stride": ("bpi", [1, 5, 5, 3], (3, 3, 3, 4), (1, 5, 5, 4), {"strides": [2, 1, 1, 1]}),
    "bpf NCHW": ("bpf", (1, 3, 5, 5), [3, 3, 3, 4], (1, 4, 5, 5), {"data_format": "NCHW"}),
    "bpf 3 sizes": ("bpf", (1, 5, 5, 3), [3, 3, 3], (1, 5, 5, 4), {}),
    "bpf wrong out_backprop": ("bpf", (1, 5, 5, 3), [3, 3, 3, 4], (1, 5, 4, 4), {}),
    "bpf out depth mismatch": ("bpf", (1, 5, 5, 3), [3, 3, 3, 4], (1, 5, 5, 5), {}),
    "bpf rank3 input": ("bpf", (5, 5, 3), [3, 3, 3, 4], (1, 5, 5, 4), {}),
    "bpf grouped": ("bpf", (1, 5, 5, 6), [3, 3, 3, 4], (1, 5, 5, 4), {}),
    "bpf explicit negative": ("bpf", (1, 5, 5, 3), [3, 3, 3, 4], (1, 5, 5, 4),
                              {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, -1, 1, 1, 0, 0]}),
}

# error name -> (key text of the kernel's message, key is also TF CPU's
# wording). The op is the error's prefix (fwd, bpi, bpf).
ERROR_KEYS = {
    "fwd NCHW": ("The Conv2D op currently only supports the NHWC tensor format", True),
    "fwd rank3 input": ("convolution input must be 4-dimensional: [5,5,3]", True),
    "fwd rank3 filter": ("convolution filter must be 4-dimensional: [3,3,3]", True),
    "fwd depth mismatch": ("input depth must be evenly divisible by filter depth: 3 vs 2", True),
    "fwd groups vs out depth": ("output depth must be evenly divisible by number of groups: 3 vs 2", True),
    "fwd filter depth 0": ("filter depth must be stricly positive, got 0", True),
    "fwd zero-size filter": ("filter must not have zero elements", True),
    "fwd batch stride": ("does not yet support strides in the batch and depth dimensions", True),
    "fwd stride 0": ("Row and column strides should be larger than 0", True),
    "fwd 3 strides": ("Sliding window strides field must specify 4 dimensions", True),
    "fwd depth dilation": ("does not yet support dilations in the batch and depth dimensions", True),
    "fwd dilation 0": ("Dilated rates should be larger than 0", True),
    "fwd valid filter too big": ("Computed output size would be negative: -1 [input_size: 5, "
                                 "effective_filter_size: 7, stride: 1]", True),
    "fwd explicit 6 values": ("explicit_paddings attribute must contain 8 values, but got: 6", True),
    "fwd explicit negative": ("All elements of explicit_paddings must be nonnegative", True),
    "fwd explicit batch pad": ("Nonzero explicit padding in the batch or depth dimensions "
                               "is not supported", True),
    "fwd explicit with SAME": ("explicit_paddings attribute must be empty if the padding "
                               "attribute is not EXPLICIT", True),
    "bpi NCHW": ("Conv2DCustomBackpropInputOp only supports NHWC", True),
    "bpi 3 sizes": ("Conv2DBackpropInput requires input_sizes to contain 4 values or 2 "
                    "values, but got: 3", True),
    "bpi negative size": ("Dimension -5 must be >= 0", True),
    "bpi wrong out_backprop": ("Conv2DCustomBackpropInput: Size of out_backprop doesn't match "
                               "computed: actual = 4, computed = 5", True),
    "bpi batch mismatch": ("Conv2DCustomBackpropInput: input and out_backprop must have the "
                           "same batch size", True),
    "bpi out depth mismatch": ("Conv2DCustomBackpropInput: filter and out_backprop must have "
                               "the same out_depth", True),
    "bpi depth mismatch": ("Conv2DCustomBackpropInput: input depth must be evenly divisible "
                           "by filter depth", True),
    # TF CPU: "Gradients for grouped convolutions are not supported on CPU..."
    "bpi grouped": ("gradients of grouped convolutions are not supported", False),
    # TF CPU says "input_sizes must be 4-dimensional, got: 3" (sic)
    "bpi rank3 out_backprop": ("Conv2DCustomBackpropInput: out_backprop must be 4-dimensional",
                               False),
    "bpi batch stride": ("does not yet support strides in the batch and depth dimensions", True),
    "bpf NCHW": ("Conv2DCustomBackpropFilterOp only supports NHWC", True),
    "bpf 3 sizes": ("Conv2DCustomBackpropFilter: filter must be 4-dimensional", True),
    "bpf wrong out_backprop": ("Conv2DCustomBackpropFilter: Size of out_backprop doesn't match "
                               "computed: actual = 4, computed = 5", True),
    "bpf out depth mismatch": ("Conv2DCustomBackpropFilter: filter and out_backprop must have "
                               "the same out_depth", True),
    "bpf rank3 input": ("Conv2DCustomBackpropFilter: input must be 4-dimensional", True),
    # TF CPU: "filter_size does not have enough elements, requested 216, got 108"
    "bpf grouped": ("gradients of grouped convolutions are not supported", False),
    "bpf explicit negative": ("All elements of explicit_paddings must be nonnegative", True),
}
OP_NAMES = {"fwd": "Conv2D", "bpi": "Conv2DBackpropInput", "bpf": "Conv2DBackpropFilter"}

SCRIPT = (f"CASES = {CASES!r}\nLARGE = {LARGE!r}\nDTYPES = {DTYPES!r}\n"
          f"GRAD_CASES = {GRAD_CASES!r}\nERRORS = {ERRORS!r}\n") + r"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_nn_ops
from convref import (Geometry, attrs, bpf_ref, bpi_ref, error_args, fwd_ref,
                     stuffed)

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(11)
SIMDEV, CPU = "/device:SIMDEV:0", "/device:CPU:0"

def fwd(x, w, **kw):
    return gen_nn_ops.conv2d(x, w, **kw)

def bpi(sizes, w, dy, **kw):
    return gen_nn_ops.conv2d_backprop_input(sizes, w, dy, **kw)

def bpf(x, sizes, dy, **kw):
    return gen_nn_ops.conv2d_backprop_filter(x, sizes, dy, **kw)

# ---- the NumPy reference (convref.py) and its bound ---------------------------
def reference(op, G, x, w, dy, dt):
    # (reference, bound): bound = gamma(K) * (the same on |x|, |w|, |dy|)
    kh, kw_, ci, co = G.fs
    if op == "Conv2D":
        return fwd_ref(G, x, w), sum_bound(fwd_ref(G, np.abs(x), np.abs(w)), kh * kw_ * ci, dt)
    if op == "Conv2DBackpropInput":
        return bpi_ref(G, w, dy), sum_bound(bpi_ref(G, np.abs(w), np.abs(dy)), kh * kw_ * co, dt)
    n = dy.shape[0] * dy.shape[1] * dy.shape[2]
    return bpf_ref(G, x, dy), sum_bound(bpf_ref(G, np.abs(x), np.abs(dy)), n, dt)

def run_case(name, c, dt, ops):
    xs, fs, stride, pad, dil, explicit = c
    kw = attrs(stride, pad, dil, explicit)
    G = Geometry(xs, fs, stride, pad, dil, explicit)
    x = rng.standard_normal(xs).astype(dt)
    w = (rng.standard_normal(fs) / np.sqrt(max(1, fs[0] * fs[1] * fs[2]))).astype(dt)
    dy = rng.standard_normal(G.ys).astype(dt)
    plain = dict(kw, dilations=[1, 1, 1, 1])
    ws = stuffed(w, dil)
    def run(op):
        ref, b = reference(op, G, x, w, dy, dt)
        if op == "Conv2D":
            return versus_ref(fwd, x, w, ref=ref, bound=b, **kw)
        cpu_fn = None
        if op == "Conv2DBackpropInput":
            if dil != (1, 1):  # TF CPU: the same gradient with the stuffed filter
                cpu_fn = lambda s_, w_, dy_, **k: bpi(s_, tf.constant(ws), dy_, **plain)
            return versus_ref(bpi, np.array(xs, np.int32), w, dy, ref=ref, bound=b,
                              dtype=dt, cpu_fn=cpu_fn, **kw)
        if dil != (1, 1):
            cpu_fn = lambda x_, s_, dy_, **k: bpf(
                x_, list(ws.shape), dy_, **plain)[::dil[0], ::dil[1]]
        return versus_ref(bpf, x, np.array(fs, np.int32), dy, ref=ref, bound=b,
                          cpu_fn=cpu_fn, **kw)
    for op in ops:
        check(f"{op} {dt} {name}")(lambda: run(op))

ALL = ["Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"]
for name, c in CASES.items():
    grouped = c[1][2] != c[0][3]
    for dt in DTYPES:
        run_case(name, c, dt, ["Conv2D"] if grouped else ALL)
run_case("large", LARGE, "float32", ALL)

@check("input_sizes with 2 values")
def _():
    xs, fs = (2, 7, 9, 3), (3, 3, 3, 4)
    G = Geometry(xs, fs, (2, 2), "SAME", (1, 1), None)
    w = rng.standard_normal(fs).astype(np.float32)
    dy = rng.standard_normal(G.ys).astype(np.float32)
    ref, b = reference("Conv2DBackpropInput", G, None, w, dy, "float32")
    return versus_ref(bpi, np.array([7, 9], np.int32), w, dy, ref=ref, bound=b,
                      dtype="float32", strides=[1, 2, 2, 1], padding="SAME")

@check("deterministic")
def _():
    xs, fs = LARGE[0], LARGE[1]
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(fs).astype(np.float32)
    dy = rng.standard_normal(xs[:3] + (fs[3],)).astype(np.float32)
    kw = attrs((1, 1), "SAME", (1, 1), None)
    def on_simdev(fn, *args):
        with tf.device(SIMDEV):
            return fn(*[tf.constant(a) for a in args], **kw).numpy()
    def once():
        return [on_simdev(fwd, x, w), on_simdev(bpi, np.array(xs, np.int32), w, dy),
                on_simdev(bpf, x, np.array(fs, np.int32), dy)]
    r1, r2 = once(), once()
    return {"equal": [raw_equal(p, q)["equal"] for p, q in zip(r1, r2)]}

def tape_grads(x, w, dy, **kw):
    with tf.GradientTape() as t:
        t.watch([x, w])
        y = tf.nn.conv2d(x, w, **kw)
    return tuple(t.gradient(y, [x, w], output_gradients=dy))

for name in GRAD_CASES:
    xs, fs, stride, pad, dil, explicit = CASES[name]
    for dt in DTYPES:
        G = Geometry(xs, fs, stride, pad, dil, explicit)
        x = rng.standard_normal(xs).astype(dt)
        w = rng.standard_normal(fs).astype(dt)
        dy = rng.standard_normal(G.ys).astype(dt)
        rx, bx = reference("Conv2DBackpropInput", G, x, w, dy, dt)
        rw, bw = reference("Conv2DBackpropFilter", G, x, w, dy, dt)
        padding = pad if explicit is None else [[0, 0], list(explicit[:2]),
                                                list(explicit[2:]), [0, 0]]
        check(f"tape {name} {dt}")(lambda: versus_ref(
            tape_grads, x, w, dy, ref=(rx, rw), bound=(bx, bw),
            strides=[1, *stride, 1], padding=padding, dilations=[1, *dil, 1]))

@check("keras Conv2DTranspose")
def _():
    # Keras's Conv2DTranspose runs Conv2DBackpropInput with its kernel as the
    # filter; its gradients are Conv2D and Conv2DBackpropFilter. Eager and
    # in a tf.function (Grappler's default passes), on SIMDEV as on CPU.
    import keras
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    dy = rng.standard_normal((2, 10, 12, 4)).astype(np.float32)
    with tf.device(CPU):
        layer = keras.layers.Conv2DTranspose(4, 3, strides=2, padding="same")
        layer.build(x.shape)
    def step(xt, dyt):
        with tf.GradientTape() as t:
            t.watch(xt)
            y = layer(xt)
        return [y] + t.gradient(y, [xt] + layer.trainable_weights, output_gradients=dyt)
    out, devices = {}, []
    for mode, fn in (("eager", step), ("function", tf.function(step))):
        for dev in (SIMDEV, CPU):
            with tf.device(dev):
                r = fn(tf.constant(x), tf.constant(dy))
            out[mode, dev] = [a.numpy() for a in r]
            if dev == SIMDEV:
                devices += [a.device for a in r]
    errs = [float(np.abs(a - b).max() / (np.abs(b).max() + 1e-30))
            for m in ("eager", "function") for a, b in zip(out[m, SIMDEV], out[m, CPU])]
    return {"devices": devices, "rel_errs": errs}

OPFN = {"fwd": fwd, "bpi": bpi, "bpf": bpf}
def after():
    x, w = np.ones((1, 4, 4, 2), np.float32), np.ones((3, 3, 2, 2), np.float32)
    G = Geometry(x.shape, w.shape, (1, 1), "SAME", (1, 1), None)
    r = versus_ref(fwd, x, w, ref=fwd_ref(G, x, w), bound=0.0, cpu=False,
                   strides=[1, 1, 1, 1], padding="SAME")
    return r["sim_ok"] and r["on_simdev"]

for name, (op, a0, a1, dys, kw) in ERRORS.items():
    args, kw = error_args(a0, a1, dys, kw)
    @check(f"error {name}")
    def _():
        return dict(error_pair(OPFN[op], *args, **kw), after=after_ok(after))
"""

CHILD_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0"}


@pytest.fixture(scope="module")
def conv(run_tf):
    return run_tf(SCRIPT, env=CHILD_ENV, timeout=300)


@pytest.mark.parametrize("check_name", run_names())
def test_vs_reference(conv, check_name):
    assert_vs_ref(conv.data(check_name), check_name, TF_CPU_DIVERGENCES)


@pytest.mark.parametrize("op", OPS)
def test_large(conv, op):
    assert_vs_ref(conv.data(f"{op} float32 large"), f"{op} float32 large",
                  TF_CPU_DIVERGENCES)


def test_input_sizes_two_values(conv):
    assert_vs_ref(conv.data("input_sizes with 2 values"), "input_sizes with 2 values")


def test_keras_conv2d_transpose(conv):
    d = conv.data("keras Conv2DTranspose")
    assert d["devices"] and all(dev.endswith("SIMDEV:0") for dev in d["devices"]), d
    assert max(d["rel_errs"]) < 1e-5, d


def test_deterministic(conv):
    d = conv.data("deterministic")
    assert d["equal"] == [True, True, True], d


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradient_tape(conv, name, dtype):
    assert_vs_ref(conv.data(f"tape {name} {dtype}"), f"tape {name} {dtype}")


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_from_kernel(conv, name):
    key, cpu_key = ERROR_KEYS[name]
    assert_error_like_cpu(conv.data(f"error {name}"), OP_NAMES[ERRORS[name][0]],
                          key, cpu_key=cpu_key)


def test_divergences_documented():
    assert_divergences_documented(TF_CPU_DIVERGENCES)


def test_clean_exit(conv):
    conv.assert_clean_exit()
