"""Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter on SIMDEV against TF's
CPU kernels.

One subprocess, with TF_ENABLE_ONEDNN_OPTS=0 so that the CPU reference is
TF's own (Eigen) kernels: oneDNN's CPU kernels accept inputs TF's kernels
refuse (e.g. bad explicit_paddings), abort the process on others (a rank-3
Conv2D input), and give a zero-batch Conv2D the wrong output shape.

Every case runs Conv2D and both backprops on /device:SIMDEV:0 and
/device:CPU:0 (soft placement off) and compares: random inputs, SAME /
VALID / EXPLICIT padding, strides, dilations, 1x1 images and filters, odd
sizes, zero-size dimensions, grouped convolutions (forward only, as on CPU),
a case that needs several im2col chunks with chunk borders inside an image,
a large layer, float32 and float64. TF's CPU backprops refuse dilations > 1,
which SIMDEV supports; those are checked against CPU runs of the equivalent
undilated convolution (the filter with zeros stuffed between its taps). The
filter gradient of an empty out_backprop must be zeros (TF's CPU kernel
returns uninitialized memory there when the output has no pixels).
Gradients through tf.GradientTape must match too. Bad inputs and attributes
must raise the same exception class as on CPU, and SIMDEV must keep working.
"""
import pytest

from conftest import assert_error_like_cpu

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
}
LARGE = ((8, 56, 56, 64), (3, 3, 64, 64), (1, 1), "SAME", (1, 1), None)
DTYPES = ["float32", "float64"]
OPS = ["fwd", "bpi", "bpf"]
GRAD_CASES = ["3x3 same", "odd valid stride2", "explicit", "1x1 filter"]


def run_names():
    """Every (case, dtype, op) check the subprocess reports."""
    out = []
    for name, c in CASES.items():
        grouped = c[1][2] != c[0][3]
        for dt in DTYPES:
            for op in OPS:
                if op == "fwd" or not grouped:
                    out.append(f"{name} {dt} {op}")
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

SCRIPT = (f"CASES = {CASES!r}\nLARGE = {LARGE!r}\nDTYPES = {DTYPES!r}\n"
          f"GRAD_CASES = {GRAD_CASES!r}\nERRORS = {ERRORS!r}\n") + r"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_nn_ops

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(11)
SIMDEV, CPU = "/device:SIMDEV:0", "/device:CPU:0"

def attrs(stride, pad, dil, explicit):
    kw = {"strides": [1, *stride, 1], "padding": pad,
          "dilations": [1, *dil, 1], "explicit_paddings": []}
    if explicit is not None:
        kw["explicit_paddings"] = [0, 0, *explicit[:2], *explicit[2:], 0, 0]
    return kw

def fwd(x, w, **kw):
    return gen_nn_ops.conv2d(x, w, **kw)

def bpi(sizes, w, dy, **kw):
    return gen_nn_ops.conv2d_backprop_input(sizes, w, dy, **kw)

def bpf(x, sizes, dy, **kw):
    return gen_nn_ops.conv2d_backprop_filter(x, sizes, dy, **kw)

def out_shape(xs, fs, kw):
    with tf.device(CPU):
        return tuple(fwd(tf.zeros(xs), tf.zeros(fs), **kw).shape)

def tol(dt, reduction):
    # float32 sums run in another order than on CPU: scale atol with the
    # length of the reduction (terms are O(1)).
    if dt == "float64":
        return {"rtol": 1e-10, "atol": 1e-11 * max(1, reduction)}
    return {"rtol": 1e-4, "atol": max(1e-4, 2e-6 * reduction)}

def stuffed(w, dil):
    # The undilated filter equivalent to w with dilations dil.
    kh, kw_, c, o = w.shape
    out = np.zeros(((kh - 1) * dil[0] + 1, (kw_ - 1) * dil[1] + 1, c, o), w.dtype)
    out[::dil[0], ::dil[1]] = w
    return out

def on_simdev(fn, *args, **kw):
    with tf.device(SIMDEV):
        r = fn(*[tf.constant(a) if isinstance(a, np.ndarray) else a
                 for a in args], **kw)
    return r

def compare(sim, ref, rtol, atol):
    a, b = sim.numpy(), np.asarray(ref)
    rep = {"devices": [sim.device], "on_simdev": "SIMDEV:0" in sim.device,
           "shapes": [list(a.shape)], "close": a.shape == b.shape and a.dtype == b.dtype,
           "max_abs_err": 0.0}
    if rep["close"] and a.size:
        rep["max_abs_err"] = float(np.abs(a.astype(np.float64) - b).max())
        rep["close"] = bool(np.allclose(a, b, rtol=rtol, atol=atol))
    return rep

def dilated_backprop(op, x, w, dy, kw):
    # SIMDEV with dilations against CPU with the stuffed filter.
    dil = (kw["dilations"][1], kw["dilations"][2])
    ws = stuffed(w, dil)
    plain = dict(kw, dilations=[1, 1, 1, 1])
    t = tol(str(x.dtype), dy.shape[0] * dy.shape[1] * dy.shape[2]
            if op == "bpf" else ws.shape[0] * ws.shape[1] * w.shape[3])
    with tf.device(CPU):
        if op == "bpi":
            ref = bpi(list(x.shape), tf.constant(ws), tf.constant(dy), **plain).numpy()
        else:
            ref = bpf(tf.constant(x), list(ws.shape), tf.constant(dy), **plain).numpy()
            ref = ref[::dil[0], ::dil[1]]
    if op == "bpi":
        sim = on_simdev(bpi, list(x.shape), w, dy, **kw)
    else:
        sim = on_simdev(bpf, x, list(w.shape), dy, **kw)
    return compare(sim, ref, **t)

def run_case(name, c, dt, ops):
    xs, fs, stride, pad, dil, explicit = c
    kw = attrs(stride, pad, dil, explicit)
    x = rng.standard_normal(xs).astype(dt)
    w = (rng.standard_normal(fs) / np.sqrt(max(1, fs[0] * fs[1] * fs[2]))).astype(dt)
    ys = out_shape(xs, fs, kw)
    dy = rng.standard_normal(ys).astype(dt)
    k = fs[0] * fs[1] * fs[2]
    if "fwd" in ops:
        check(f"{name} {dt} fwd")(
            lambda: versus_cpu(fwd, x, w, **tol(dt, k), **kw))
    if "bpi" in ops:
        if dil != (1, 1):
            check(f"{name} {dt} bpi")(lambda: dilated_backprop("bpi", x, w, dy, kw))
        else:
            check(f"{name} {dt} bpi")(lambda: versus_cpu(
                bpi, list(xs), w, dy, **tol(dt, fs[0] * fs[1] * fs[3]), **kw))
    if "bpf" in ops:
        if dy.size == 0:
            # dW of an empty out_backprop is zeros. TF's CPU kernel returns
            # uninitialized memory when the output's spatial size is 0, so
            # the reference here is the exact answer.
            check(f"{name} {dt} bpf")(lambda: compare(
                on_simdev(bpf, x, list(fs), dy, **kw), np.zeros(fs, dt), 0, 0))
        elif dil != (1, 1):
            check(f"{name} {dt} bpf")(lambda: dilated_backprop("bpf", x, w, dy, kw))
        else:
            check(f"{name} {dt} bpf")(lambda: versus_cpu(
                bpf, x, list(fs), dy, **tol(dt, ys[0] * ys[1] * ys[2]), **kw))

for name, c in CASES.items():
    grouped = c[1][2] != c[0][3]
    for dt in DTYPES:
        run_case(name, c, dt, ["fwd"] if grouped else ["fwd", "bpi", "bpf"])
run_case("large", LARGE, "float32", ["fwd", "bpi", "bpf"])

@check("input_sizes with 2 values")
def _():
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    dy = rng.standard_normal((2, 4, 5, 4)).astype(np.float32)
    return versus_cpu(bpi, [7, 9], w, dy, rtol=1e-4, atol=1e-4,
                      strides=[1, 2, 2, 1], padding="SAME")

@check("deterministic")
def _():
    xs, fs = LARGE[0], LARGE[1]
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(fs).astype(np.float32)
    dy = rng.standard_normal(xs[:3] + (fs[3],)).astype(np.float32)
    kw = attrs((1, 1), "SAME", (1, 1), None)
    def once():
        return [on_simdev(fwd, x, w, **kw).numpy(),
                on_simdev(bpi, list(xs), w, dy, **kw).numpy(),
                on_simdev(bpf, x, list(fs), dy, **kw).numpy()]
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
        x = rng.standard_normal(xs).astype(dt)
        w = rng.standard_normal(fs).astype(dt)
        kw = attrs(stride, pad, dil, explicit)
        dy = rng.standard_normal(out_shape(xs, fs, kw)).astype(dt)
        padding = pad if explicit is None else [[0, 0], list(explicit[:2]),
                                                list(explicit[2:]), [0, 0]]
        check(f"tape {name} {dt}")(lambda: versus_cpu(
            tape_grads, x, w, dy, rtol=1e-4, atol=1e-4, strides=[1, *stride, 1],
            padding=padding, dilations=[1, *dil, 1]))

OPFN = {"fwd": fwd, "bpi": bpi, "bpf": bpf}
for name, (op, a0, a1, dys, kw) in ERRORS.items():
    args = [np.ones(a0, np.float32) if isinstance(a0, tuple) else a0,
            np.ones(a1, np.float32) if isinstance(a1, tuple) else a1]
    if dys is not None:
        args.append(np.ones(dys, np.float32))
    kw = dict({"strides": [1, 1, 1, 1], "padding": "SAME"}, **kw)
    @check(f"error {name}")
    def _():
        sim = error_class(OPFN[op], *args, device=SIMDEV, **kw)
        cpu = error_class(OPFN[op], *args, device=CPU, **kw)
        after = versus_cpu(fwd, np.ones((1, 4, 4, 2), np.float32),
                           np.ones((3, 3, 2, 2), np.float32), rtol=1e-5,
                           atol=1e-5, strides=[1, 1, 1, 1], padding="SAME")
        return {"sim": sim, "cpu": cpu, "after": after}
"""


@pytest.fixture(scope="module")
def conv(run_tf):
    return run_tf(SCRIPT, env={"TF_ENABLE_ONEDNN_OPTS": "0"}, timeout=300)


@pytest.mark.parametrize("check_name", run_names())
def test_versus_cpu(conv, check_name):
    d = conv.data(check_name)
    assert d["on_simdev"], f"result not on SIMDEV: {d['devices']}"
    assert d["close"], f"SIMDEV differs from CPU: {d}"


@pytest.mark.parametrize("op", OPS)
def test_large(conv, op):
    d = conv.data(f"large float32 {op}")
    assert d["on_simdev"] and d["close"], d


def test_input_sizes_two_values(conv):
    d = conv.data("input_sizes with 2 values")
    assert d["on_simdev"] and d["close"], d


def test_deterministic(conv):
    d = conv.data("deterministic")
    assert d["equal"] == [True, True, True], d


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradient_tape(conv, name, dtype):
    d = conv.data(f"tape {name} {dtype}")
    assert d["on_simdev"], f"gradients not on SIMDEV: {d['devices']}"
    assert d["close"], d


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_class_matches_cpu(conv, name):
    assert_error_like_cpu(conv.data(f"error {name}"))


def test_clean_exit(conv):
    conv.assert_clean_exit()
