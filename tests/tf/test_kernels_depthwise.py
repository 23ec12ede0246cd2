"""DepthwiseConv2dNative and its two backprops on SIMDEV against a NumPy
reference and TF's CPU kernels.

The reference sums, in float64, one broadcast product per filter tap over
the zero-padded input (depth multiplier, strides, dilations, explicit
paddings); the backprops are its exact adjoints. The bound is gamma(K) times
the same computation on absolute values, K the number of terms of each sum
(kh*kw forward, kh*kw*multiplier for the input gradient, batch*out_h*out_w
for the filter gradient), plus the reference's own rounding (conftest).

TF's CPU kernels refuse NCHW and forward dilations, and its backprops
ignore dilations: there TF CPU runs the equivalent computation (NHWC between
transposes; the undilated filter with zeros stuffed between the taps).
One subprocess, TF_ENABLE_ONEDNN_OPTS=0 (TF's own CPU kernels). Bad inputs
and attributes must raise the SIMDEV kernel's own error with TF CPU's class
and wording, and SIMDEV must keep working afterwards.
"""
import pytest

from conftest import (assert_divergences_documented, assert_error_like_cpu,
                      assert_vs_ref)

# name -> (input shape NHWC, filter shape, stride, padding, dilations (h, w),
#          explicit paddings (top, bottom, left, right) or None, nchw)
CASES = {
    "3x3 same": ((2, 7, 9, 4), (3, 3, 4, 1), 1, "SAME", (1, 1), None, False),
    "3x3 valid stride 2 mult 2": ((2, 8, 9, 3), (3, 3, 3, 2), 2, "VALID", (1, 1), None, False),
    "5x5 stride 2 same": ((1, 9, 10, 5), (5, 5, 5, 1), 2, "SAME", (1, 1), None, False),
    "explicit": ((2, 6, 7, 3), (3, 2, 3, 2), 2, "EXPLICIT", (1, 1), (1, 2, 0, 3), False),
    "dilation 2": ((1, 9, 9, 3), (3, 3, 3, 2), 1, "SAME", (2, 2), None, False),
    "dilation 2x1 strided": ((2, 10, 9, 2), (3, 2, 2, 1), 2, "VALID", (2, 1), None, False),
    "1x1 image": ((2, 1, 1, 3), (3, 3, 3, 1), 1, "SAME", (1, 1), None, False),
    "many channels": ((2, 5, 6, 70), (3, 3, 70, 1), 1, "SAME", (1, 1), None, False),
    "stride beyond filter": ((1, 10, 10, 2), (2, 2, 2, 3), 3, "VALID", (1, 1), None, False),
    "zero batch": ((0, 5, 5, 3), (3, 3, 3, 1), 1, "SAME", (1, 1), None, False),
    "multiplier 0": ((1, 5, 5, 3), (3, 3, 3, 0), 1, "SAME", (1, 1), None, False),
    "nchw same": ((2, 7, 8, 3), (3, 3, 3, 2), 1, "SAME", (1, 1), None, True),
    "nchw strided explicit": ((1, 9, 8, 4), (3, 3, 4, 1), 2, "EXPLICIT", (1, 1), (2, 0, 1, 1), True),
}
LARGE = ((8, 32, 32, 32), (3, 3, 32, 1), 1, "SAME", (1, 1), None, False)
DTYPES = ["float32", "float64"]
OPS = ["DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
       "DepthwiseConv2dNativeBackpropFilter"]
GRAD_CASES = ["3x3 same", "3x3 valid stride 2 mult 2"]
# Cases where TF's CPU kernel disagrees with the reference (it leaves a sum
# over nothing unwritten); see docs/tf-cpu-divergences.md.
TF_CPU_DIVERGENCES = {
    "DepthwiseConv2dNativeBackpropFilter float32 zero batch",
    "DepthwiseConv2dNativeBackpropFilter float64 zero batch",
    "DepthwiseConv2dNativeBackpropInput float32 multiplier 0",
    "DepthwiseConv2dNativeBackpropInput float64 multiplier 0",
}

# name -> (op, input/sizes, filter/sizes, out_backprop shape or None, attrs,
#          key of the message (TF CPU's wording too))
ERRORS = {
    "fwd rank3 input": ("fwd", (5, 5, 3), (3, 3, 3, 2), None, {}, "input must be 4-dimensional[5,5,3]"),
    "fwd rank3 filter": ("fwd", (1, 5, 5, 3), (3, 3, 2), None, {}, "filter must be 4-dimensional: [3,3,2]"),
    "fwd depth mismatch": ("fwd", (1, 5, 5, 3), (3, 3, 2, 2), None, {},
                           "input and filter must have the same depth: 3 vs 2"),
    "fwd unequal strides": ("fwd", (1, 5, 5, 3), (3, 3, 3, 2), None, {"strides": [1, 1, 2, 1]},
                            "only supports equal length strides in the row and column"),
    "fwd batch stride": ("fwd", (1, 5, 5, 3), (3, 3, 3, 2), None, {"strides": [2, 1, 1, 1]},
                         "does not yet support strides in the batch and depth dimensions"),
    "fwd stride 0": ("fwd", (1, 5, 5, 3), (3, 3, 3, 2), None, {"strides": [1, 0, 0, 1]},
                     "Stride must be > 0, but got 0"),
    "fwd 3 strides": ("fwd", (1, 5, 5, 3), (3, 3, 3, 2), None, {"strides": [1, 1, 1]},
                      "Sliding window strides field must specify 4 dimensions"),
    "fwd valid filter too big": ("fwd", (1, 5, 5, 3), (7, 7, 3, 2), None, {"padding": "VALID"},
                                 "Computed output size would be negative: -1 [input_size: 5, "
                                 "effective_filter_size: 7, stride: 1]"),
    "fwd explicit 6 values": ("fwd", (1, 5, 5, 3), (3, 3, 3, 2), None,
                              {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 1, 1, 1]},
                              "explicit_paddings attribute must contain 8 values, but got: 6"),
    "fwd explicit negative": ("fwd", (1, 5, 5, 3), (3, 3, 3, 2), None,
                              {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, -1, 1, 1, 0, 0]},
                              "All elements of explicit_paddings must be nonnegative"),
    "bpi 3 sizes": ("bpi", [1, 5, 5], (3, 3, 3, 2), (1, 5, 5, 6), {},
                    "DepthwiseConv2DBackpropInput: input must be 4-dimensional"),
    "bpi negative size": ("bpi", [1, -5, 5, 3], (3, 3, 3, 2), (1, 5, 5, 6), {},
                          "Dimension 1 of input_sizes must be >= 0"),
    "bpi wrong rows": ("bpi", [1, 5, 5, 3], (3, 3, 3, 2), (1, 4, 5, 6), {},
                       "DepthwiseConv2DBackpropInput: Number of rows of out_backprop doesn't "
                       "match computed: actual = 4, computed = 5"),
    "bpi batch mismatch": ("bpi", [2, 5, 5, 3], (3, 3, 3, 2), (1, 5, 5, 6), {},
                           "DepthwiseConv2DBackpropInput: input and out_backprop must have the "
                           "same batch size"),
    "bpi out depth": ("bpi", [1, 5, 5, 3], (3, 3, 3, 2), (1, 5, 5, 5), {},
                      "DepthwiseConv2DBackpropInput: depth_multiplier * in_depth not equal "
                      "to out_depth"),
    "bpi in depth": ("bpi", [1, 5, 5, 2], (3, 3, 3, 2), (1, 5, 5, 6), {},
                     "DepthwiseConv2DBackpropInput: input and filter must have the same in_depth"),
    "bpi rank3 out_backprop": ("bpi", [1, 5, 5, 3], (3, 3, 3, 2), (5, 5, 6), {},
                               "DepthwiseConv2DBackpropInput: out_backprop must be 4-dimensional"),
    "bpi rank3 filter": ("bpi", [1, 5, 5, 3], (3, 3, 3), (1, 5, 5, 6), {},
                         "DepthwiseConv2DBackpropInput: filter must be 4-dimensional"),
    "bpf 3 sizes": ("bpf", (1, 5, 5, 3), [3, 3, 3], (1, 5, 5, 6), {},
                    "DepthwiseConv2DBackpropFilter: filter must be 4-dimensional"),
    "bpf negative size": ("bpf", (1, 5, 5, 3), [3, -3, 3, 2], (1, 5, 5, 6), {},
                          "Dimension 1 of filter_sizes must be >= 0"),
    "bpf wrong cols": ("bpf", (1, 5, 5, 3), [3, 3, 3, 2], (1, 5, 4, 6), {},
                       "DepthwiseConv2DBackpropFilter: Number of cols of out_backprop doesn't "
                       "match computed: actual = 4, computed = 5"),
    "bpf out depth": ("bpf", (1, 5, 5, 3), [3, 3, 3, 2], (1, 5, 5, 5), {},
                      "DepthwiseConv2DBackpropFilter: depth_multiplier * in_depth not equal "
                      "to out_depth"),
    "bpf rank3 input": ("bpf", (5, 5, 3), [3, 3, 3, 2], (1, 5, 5, 6), {},
                        "DepthwiseConv2DBackpropFilter: input must be 4-dimensional"),
    "bpf in depth": ("bpf", (1, 5, 5, 3), [3, 3, 2, 2], (1, 5, 5, 4), {},
                     "DepthwiseConv2DBackpropFilter: input and filter must have the same in_depth"),
}
OP_NAMES = {"fwd": OPS[0], "bpi": OPS[1], "bpf": OPS[2]}


def run_names():
    return [f"{op} {dt} {name}" for name in CASES for dt in DTYPES for op in OPS]


SCRIPT = (f"CASES = {CASES!r}\nLARGE = {LARGE!r}\nDTYPES = {DTYPES!r}\n"
          f"GRAD_CASES = {GRAD_CASES!r}\nERRORS = {ERRORS!r}\n") + r"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_nn_ops
from convref import (Geometry, attrs, bpf_ref, bpi_ref, error_args, fwd_ref,
                     stuffed)

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(13)
SIMDEV = "/device:SIMDEV:0"

def fwd(x, w, **kw):
    return gen_nn_ops.depthwise_conv2d_native(x, w, **kw)

def bpi(sizes, w, dy, **kw):
    return gen_nn_ops.depthwise_conv2d_native_backprop_input(sizes, w, dy, **kw)

def bpf(x, sizes, dy, **kw):
    return gen_nn_ops.depthwise_conv2d_native_backprop_filter(x, sizes, dy, **kw)

# ---- the NumPy reference (convref.py) and its bound ---------------------------
def reference(op, G, x, w, dy, dt):
    kh, kw_, c, m = G.fs
    if op == "DepthwiseConv2dNative":
        return fwd_ref(G, x, w), sum_bound(fwd_ref(G, np.abs(x), np.abs(w)), kh * kw_, dt)
    if op == "DepthwiseConv2dNativeBackpropInput":
        return bpi_ref(G, w, dy), sum_bound(bpi_ref(G, np.abs(w), np.abs(dy)), kh * kw_ * m, dt)
    n = dy.shape[0] * dy.shape[1] * dy.shape[2]
    return bpf_ref(G, x, dy), sum_bound(bpf_ref(G, np.abs(x), np.abs(dy)), n, dt)

TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]

def run_case(name, c, dt):
    xs, fs, stride, pad, dil, explicit, nchw = c
    kw = attrs(stride, pad, dil, explicit, nchw)
    G = Geometry(xs, fs, stride, pad, dil, explicit, depthwise=True)
    x = rng.standard_normal(xs).astype(dt)
    w = rng.standard_normal(fs).astype(dt)
    dy = rng.standard_normal(G.ys).astype(dt)
    # TF CPU: NHWC, undilated (stuffed) filter
    plain = attrs(stride, pad, (1, 1), explicit, False)
    ws = stuffed(w, dil)
    lay = (lambda a: a.transpose(TO_NCHW)) if nchw else (lambda a: a)
    tin = (lambda t: tf.transpose(t, TO_NHWC)) if nchw else (lambda t: t)
    tout = (lambda t: tf.transpose(t, TO_NCHW)) if nchw else (lambda t: t)
    sizes = lambda s: np.array([s[i] for i in TO_NCHW] if nchw else s, np.int32)
    def run(op):
        ref, b = reference(op, G, x, w, dy, dt)
        if op == OPS[0]:
            return versus_ref(fwd, lay(x), w, ref=lay(ref), bound=lay(b),
                              cpu_fn=lambda x_, w_, **k: tout(fwd(tin(x_), tf.constant(ws), **plain)),
                              **kw)
        if op == OPS[1]:
            return versus_ref(bpi, sizes(xs), w, lay(dy), ref=lay(ref), bound=lay(b), dtype=dt,
                              cpu_fn=lambda s_, w_, dy_, **k: tout(bpi(
                                  np.array(xs, np.int32), tf.constant(ws), tin(dy_), **plain)),
                              **kw)
        return versus_ref(bpf, lay(x), np.array(fs, np.int32), lay(dy), ref=ref, bound=b,
                          cpu_fn=lambda x_, s_, dy_, **k: bpf(
                              tin(x_), list(ws.shape), tin(dy_), **plain)[::dil[0], ::dil[1]],
                          **kw)
    for op in OPS:
        check(f"{op} {dt} {name}")(lambda: run(op))

OPS = ["DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
       "DepthwiseConv2dNativeBackpropFilter"]
for name, c in CASES.items():
    for dt in DTYPES:
        run_case(name, c, dt)
run_case("large", LARGE, "float32")

@check("deterministic")
def _():
    xs, fs = LARGE[0], LARGE[1]
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(fs).astype(np.float32)
    dy = rng.standard_normal(xs[:3] + (fs[2] * fs[3],)).astype(np.float32)
    kw = attrs(1, "SAME", (1, 1), None, False)
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
        y = tf.nn.depthwise_conv2d(x, w, **kw)
    return tuple(t.gradient(y, [x, w], output_gradients=dy))

for name in GRAD_CASES:
    xs, fs, stride, pad, dil, explicit, nchw = CASES[name]
    for dt in DTYPES:
        G = Geometry(xs, fs, stride, pad, dil, explicit, depthwise=True)
        x = rng.standard_normal(xs).astype(dt)
        w = rng.standard_normal(fs).astype(dt)
        dy = rng.standard_normal(G.ys).astype(dt)
        rx, bx = reference(OPS[1], G, x, w, dy, dt)
        rw, bw = reference(OPS[2], G, x, w, dy, dt)
        check(f"tape {name} {dt}")(lambda: versus_ref(
            tape_grads, x, w, dy, ref=(rx, rw), bound=(bx, bw),
            strides=[1, stride, stride, 1], padding=pad))

OPFN = {"fwd": fwd, "bpi": bpi, "bpf": bpf}
def after():
    x, w = np.ones((1, 4, 4, 2), np.float32), np.ones((3, 3, 2, 1), np.float32)
    G = Geometry(x.shape, w.shape, 1, "SAME", (1, 1), None, depthwise=True)
    r = versus_ref(fwd, x, w, ref=fwd_ref(G, x, w), bound=0.0, cpu=False,
                   strides=[1, 1, 1, 1], padding="SAME")
    return r["sim_ok"] and r["on_simdev"]

for name, (op, a0, a1, dys, kw, key) in ERRORS.items():
    args, kw = error_args(a0, a1, dys, kw)
    @check(f"error {name}")
    def _():
        return dict(error_pair(OPFN[op], *args, **kw), after=after_ok(after))
"""

CHILD_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0"}


@pytest.fixture(scope="module")
def dw(run_tf):
    return run_tf(SCRIPT, env=CHILD_ENV, timeout=300)


@pytest.mark.parametrize("check_name", run_names())
def test_vs_reference(dw, check_name):
    assert_vs_ref(dw.data(check_name), check_name, TF_CPU_DIVERGENCES)


@pytest.mark.parametrize("op", OPS)
def test_large(dw, op):
    assert_vs_ref(dw.data(f"{op} float32 large"), f"{op} float32 large")


def test_deterministic(dw):
    d = dw.data("deterministic")
    assert d["equal"] == [True, True, True], d


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradient_tape(dw, name, dtype):
    assert_vs_ref(dw.data(f"tape {name} {dtype}"), f"tape {name} {dtype}")


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_from_kernel(dw, name):
    assert_error_like_cpu(dw.data(f"error {name}"), OP_NAMES[ERRORS[name][0]],
                          ERRORS[name][5])


def test_divergences_documented():
    assert_divergences_documented(TF_CPU_DIVERGENCES)


def test_clean_exit(dw):
    dw.assert_clean_exit()
