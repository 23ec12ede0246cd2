"""MaxPool, AvgPool, MaxPoolGrad, AvgPoolGrad on SIMDEV against a NumPy
reference and TF's CPU kernels (soft placement off), NHWC, float32 and
float64.

The reference (float64) follows TF's definitions: padded positions never
take part; a max starts from the lowest finite value and takes v when
v > max (NaNs skipped, an all -inf window gives the lowest finite value);
an average divides by the number of real elements in its window; MaxPoolGrad
sends each gradient to its window's first maximum in row-major order;
AvgPoolGrad spreads each gradient evenly over its window's real elements.
Bounds: max pooling is exact; a sum of n terms is within gamma(n) of the
sum of their absolute values (conftest), n = the window size or the number
of windows covering an input element.

Covered: VALID/SAME (and EXPLICIT for max pooling) over odd sizes, 1x1,
zero-size batch/height/width/depth, windows larger than the input (one or
both dimensions), strides larger than the window and than the input, a
stride that leaves a ragged last window, a 4M-element input; MaxPoolGrad on
inputs full of ties; NaN and -inf; gradients through tf.GradientTape; bad
attributes and shapes raise the kernel's own error (as TF CPU words it) and
the process stays usable.

TF's CPU kernels are wrong on some of these edges (TF_CPU_DIVERGENCES,
docs/tf-cpu-divergences.md); SIMDEV is held to the reference there too.
"""
import pytest

from conftest import (assert_divergences_documented, assert_error_like_cpu,
                      assert_sweep, assert_vs_ref)

DTYPES = ["float32", "float64"]
OPS = ["MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad"]

# Cases where TF's CPU kernel disagrees with the reference on some machine
# or setting; see docs/tf-cpu-divergences.md.
TF_CPU_DIVERGENCES = {
    # counts a window wider than the input as if clipped on one side only
    "AvgPoolGrad float32 (1, 5, 5, 2) k=(6, 2) s=(1, 1) SAME",
    "AvgPoolGrad float64 (1, 5, 5, 2) k=(6, 2) s=(1, 1) SAME",
    # oneDNN's float32 MaxPool raises AbortedError on an empty output
    "MaxPool float32 (1, 2, 2, 1) k=(3, 3) s=(2, 2) VALID",
    # an empty pooled output leaves the gradient uninitialised
    "MaxPoolGrad float32 (1, 5, 5, 2) k=(6, 2) s=(1, 1) VALID",
    "MaxPoolGrad float64 (1, 5, 5, 2) k=(6, 2) s=(1, 1) VALID",
    "MaxPoolGrad float32 (1, 2, 2, 1) k=(3, 3) s=(2, 2) VALID",
    "MaxPoolGrad float64 (1, 2, 2, 1) k=(3, 3) s=(2, 2) VALID",
    # oneDNN's float32 AvgPoolGrad raises on zero depth
    "AvgPoolGrad float32 (1, 4, 4, 0) k=(2, 2) s=(1, 1) VALID",
    "AvgPoolGrad float32 (1, 4, 4, 0) k=(2, 2) s=(1, 1) SAME",
}

# (shape, window, stride)
CASES = [((1, 5, 5, 2), (2, 2), (1, 1)), ((2, 7, 9, 3), (3, 3), (2, 2)),
         ((1, 1, 1, 1), (1, 1), (1, 1)), ((3, 8, 8, 5), (2, 3), (2, 1)),
         ((1, 6, 6, 1), (3, 3), (3, 3)), ((0, 4, 4, 2), (2, 2), (1, 1)),
         ((1, 0, 4, 2), (2, 2), (1, 1)), ((1, 4, 0, 2), (2, 2), (1, 1)),
         ((1, 4, 4, 0), (2, 2), (1, 1)),
         ((1, 5, 5, 2), (6, 2), (1, 1)), ((2, 3, 4, 3), (5, 7), (2, 1)),
         ((1, 3, 2, 1), (4, 4), (1, 1)), ((1, 2, 2, 1), (3, 3), (2, 2)),
         ((1, 3, 3, 2), (2, 2), (5, 5)), ((2, 7, 5, 3), (3, 2), (3, 3)),
         ((1, 1, 9, 2), (1, 9), (1, 1)),
         ((2, 13, 11, 7), (5, 4), (3, 2)),
         ((1, 10, 10, 1), (1, 1), (4, 4)), ((1, 9, 9, 300), (2, 2), (2, 2)),
         ((2, 31, 17, 3), (7, 1), (1, 5))]

SCRIPT = f"DTYPES = {DTYPES!r}\nOPS = {OPS!r}\nCASES = {CASES!r}\n" + r"""
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(5)
SIMDEV = "/device:SIMDEV:0"
CPU = "/device:CPU:0"

def attrs(k, s, pad, ep=None):
    a = dict(ksize=[1, k[0], k[1], 1], strides=[1, s[0], s[1], 1], padding=pad)
    if ep is not None:
        a["explicit_paddings"] = ep
    return a

def max_pool(x, **a): return tf.raw_ops.MaxPool(input=x, **a)
def avg_pool(x, **a): return tf.raw_ops.AvgPool(value=x, **a)
def max_pool_grad(x, y, g, **a):
    return tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=g, **a)
def avg_pool_grad(shape, g, **a):
    return tf.raw_ops.AvgPoolGrad(orig_input_shape=shape, grad=g, **a)

# ---- the NumPy reference ----------------------------------------------------
def geometry(n, k, s, pad, ep=None):
    # (outputs, padding before, padding after) along one dimension
    if pad == "SAME":
        out = -(-n // s)
        before = max((out - 1) * s + k - n, 0) // 2
    elif pad == "VALID":
        out, before = (n - k + s) // s, 0
    else:
        before = ep[0]
        out = (n + ep[0] + ep[1] - k) // s + 1
    out = max(out, 0)
    after = max((out - 1) * s + k - n - before, 0) if out else 0
    return out, before, after

class Windows:
    # The windows of one pooling: win(a, di, dj) is the [n, oh, ow, c] view
    # of the padded array a at window offset (di, dj).
    def __init__(self, shape, k, s, pad, ep=None):
        eh = ew = None
        if ep is not None:
            eh, ew = ep[2:4], ep[4:6]
        self.shape, self.k, self.s = shape, k, s
        self.oh, self.pt, self.pb = geometry(shape[1], k[0], s[0], pad, eh)
        self.ow, self.pl, self.pr = geometry(shape[2], k[1], s[1], pad, ew)
        self.real = self.padded(np.ones(shape), 0.0) > 0
        # windows covering one input element, at most
        self.overlap = -(-k[0] // s[0]) * -(-k[1] // s[1])
        self.out = (shape[0], self.oh, self.ow, shape[3])

    def padded(self, a, fill):
        return np.pad(a.astype(np.float64), ((0, 0), (self.pt, self.pb),
                                             (self.pl, self.pr), (0, 0)),
                      constant_values=fill)

    def crop(self, a):
        return a[:, self.pt:self.pt + self.shape[1], self.pl:self.pl + self.shape[2], :]

    def offsets(self):
        return [(di, dj) for di in range(self.k[0]) for dj in range(self.k[1])]

    def win(self, a, di, dj):
        (sh, sw), oh, ow = self.s, self.oh, self.ow
        v = a[:, di:di + (oh - 1) * sh + 1:sh, dj:dj + (ow - 1) * sw + 1:sw, :]
        return v[:, :oh, :ow]

    def count(self):
        c = np.zeros(self.out)
        for di, dj in self.offsets():
            c += self.win(self.real, di, dj)
        return c

def max_pool_ref(x, W):
    xp = W.padded(x, -np.inf)
    m = np.full(W.out, float(np.finfo(x.dtype).min))
    for di, dj in W.offsets():
        v = W.win(xp, di, dj)
        m = np.where(v > m, v, m)
    return m, 0.0

def avg_pool_ref(x, W, dt):
    xp, ap = W.padded(x, 0.0), W.padded(np.abs(x), 0.0)
    s, a = np.zeros(W.out), np.zeros(W.out)
    for di, dj in W.offsets():
        s += W.win(xp, di, dj)
        a += W.win(ap, di, dj)
    cnt = np.maximum(W.count(), 1)
    # a sum of up to kh*kw terms, then a division (or a reciprocal and a
    # product)
    return s / cnt, sum_bound(a / cnt, W.k[0] * W.k[1] + 2, dt)

def argmax_offsets(x, W):
    # First real element of the window, replaced by a strictly larger one.
    xp = W.padded(x, 0.0)
    has = np.zeros(W.out, bool)
    best = np.zeros(W.out)
    idx = np.full(W.out, -1)
    for o, (di, dj) in enumerate(W.offsets()):
        v, r = W.win(xp, di, dj), W.win(W.real, di, dj)
        take = r & (~has | (best < v))
        best = np.where(take, v, best)
        idx = np.where(take, o, idx)
        has |= r
    return idx

def max_pool_grad_ref(x, g, W, dt):
    idx = argmax_offsets(x, W)
    dx = W.padded(np.zeros(x.shape), 0.0)
    ab = dx.copy()
    g = g.astype(np.float64)
    for o, (di, dj) in enumerate(W.offsets()):
        W.win(dx, di, dj)[...] += np.where(idx == o, g, 0)
        W.win(ab, di, dj)[...] += np.where(idx == o, np.abs(g), 0)
    return W.crop(dx), sum_bound(W.crop(ab), W.overlap, dt)

def avg_pool_grad_ref(g, W, dt):
    cnt = np.maximum(W.count(), 1)
    dx = W.padded(np.zeros(W.shape), 0.0)
    ab = dx.copy()
    g = g.astype(np.float64)
    for di, dj in W.offsets():
        W.win(dx, di, dj)[...] += g / cnt
        W.win(ab, di, dj)[...] += np.abs(g) / cnt
    # each term is g / count (two roundings at most), then summed
    return W.crop(dx), sum_bound(W.crop(ab), W.overlap + 2, dt)

def run_op(op, dt, shape, k, s, pad, x=None, ep=None, g=None):
    # The op on SIMDEV and CPU against the reference: a versus_ref report.
    a = attrs(k, s, pad, ep)
    W = Windows(shape, k, s, pad, ep)
    if x is None:
        x = rng.standard_normal(shape).astype(dt)
    if g is None:
        g = rng.standard_normal(W.out).astype(dt)
    if op == "MaxPool":
        ref, b = max_pool_ref(x, W)
        return versus_ref(max_pool, x, ref=ref, bound=b, **a)
    if op == "AvgPool":
        ref, b = avg_pool_ref(x, W, dt)
        return versus_ref(avg_pool, x, ref=ref, bound=b, **a)
    if op == "MaxPoolGrad":
        y = max_pool_ref(x, W)[0].astype(dt)
        ref, b = max_pool_grad_ref(x, g, W, dt)
        return versus_ref(max_pool_grad, x, y, g, ref=ref, bound=b, **a)
    ref, b = avg_pool_grad_ref(g, W, dt)
    return versus_ref(avg_pool_grad, np.array(shape, np.int32), g, ref=ref,
                      bound=b, dtype=dt, **a)

def raw_out(n, k, s, pad):
    return -(-n // s) if pad == "SAME" else (n - k + s) // s

def sweep(op, dt):
    reps = {}
    for shape, k, s in CASES:
        for pad in ("VALID", "SAME"):
            if raw_out(shape[1], k[0], s[0], pad) < 0 or \
                    raw_out(shape[2], k[1], s[1], pad) < 0:
                continue   # a negative output size is an error (tested below)
            reps[f"{op} {dt} {shape} k={k} s={s} {pad}"] = guarded(
                lambda: run_op(op, dt, shape, k, s, pad))
    return sweep_report(reps)

for op in OPS:
    for dt in DTYPES:
        check(f"sweep {op} {dt}")(lambda: sweep(op, dt))

for dt in DTYPES:
    @check(f"ties {dt}")
    def _(dt=dt):
        # values in {0, 0.5, ..., 2}: most windows hold several maxima
        reps = {}
        for shape, k, s in CASES:
            for pad in ("VALID", "SAME"):
                W = Windows(shape, k, s, pad)
                if W.oh <= 0 or W.ow <= 0 or 0 in shape:
                    continue
                x = rng.integers(0, 5, shape).astype(dt) / 2
                reps[f"{shape} k={k} s={s} {pad}"] = guarded(lambda: run_op(
                    "MaxPoolGrad", dt, shape, k, s, pad, x=x))
        return sweep_report(reps)

    @check(f"explicit {dt}")
    def _(dt=dt):
        out = {}
        for ep in ([0, 0, 1, 1, 2, 1, 0, 0], [0, 0, 0, 1, 1, 0, 0, 0]):
            for op in ("MaxPool", "MaxPoolGrad"):
                out[f"{op} {ep}"] = run_op(op, dt, (2, 6, 7, 3), (2, 3), (1, 2),
                                           "EXPLICIT", ep=ep)
        return out

    @check(f"nan and inf {dt}")
    def _(dt=dt):
        t = np.array([[1, np.nan, 2], [3, 4, np.nan], [0, 0, 0]], dt).reshape(1, 3, 3, 1)
        nanall = np.full((1, 2, 2, 1), np.nan, dt)
        ninf = np.full((1, 2, 2, 1), -np.inf, dt)
        g = np.arange(1, 5).astype(dt).reshape(1, 2, 2, 1)
        return {
            "fwd nan": run_op("MaxPool", dt, t.shape, (2, 2), (1, 1), "VALID", x=t),
            "fwd all nan": run_op("MaxPool", dt, nanall.shape, (2, 2), (1, 1), "SAME", x=nanall),
            "fwd all -inf": run_op("MaxPool", dt, ninf.shape, (2, 2), (1, 1), "SAME", x=ninf),
            "grad nan": run_op("MaxPoolGrad", dt, t.shape, (2, 2), (1, 1), "VALID", x=t, g=g),
            "avg nan": run_op("AvgPool", dt, t.shape, (2, 2), (1, 1), "VALID", x=t),
        }

    @check(f"large {dt}")
    def _(dt=dt):
        shape = (4, 128, 128, 64)   # 4M elements
        x = rng.standard_normal(shape).astype(dt)
        out = {}
        for k, s, pad in [((3, 3), (2, 2), "SAME"), ((2, 2), (2, 2), "VALID")]:
            for op in OPS:
                out[f"{op} {pad}"] = run_op(op, dt, shape, k, s, pad, x=x)
        return out

    @check(f"tape {dt}")
    def _(dt=dt):
        x = rng.standard_normal((2, 9, 8, 3)).astype(dt)
        up_max = rng.standard_normal((2, 5, 4, 3)).astype(dt)
        up_avg = rng.standard_normal((2, 4, 3, 3)).astype(dt)
        Wm = Windows(x.shape, (3, 3), (2, 2), "SAME")
        Wa = Windows(x.shape, (2, 3), (2, 2), "VALID")
        m, bm = max_pool_ref(x, Wm)
        v, bv = avg_pool_ref(x, Wa, dt)
        gm, bgm = max_pool_grad_ref(x, up_max, Wm, dt)
        ga, bga = avg_pool_grad_ref(up_avg, Wa, dt)

        def grads(x, up_max, up_avg):
            with tf.GradientTape(persistent=True) as t:
                t.watch(x)
                m = tf.nn.max_pool2d(x, ksize=3, strides=2, padding="SAME")
                v = tf.nn.avg_pool2d(x, ksize=(2, 3), strides=2, padding="VALID")
            return (m, v, t.gradient(m, x, output_gradients=up_max),
                    t.gradient(v, x, output_gradients=up_avg))
        return {"tape": versus_ref(grads, x, up_max, up_avg, ref=(m, v, gm, ga),
                                   bound=(bm, bv, bgm, bga))}

# ---- bad inputs ------------------------------------------------------------
x4 = rng.standard_normal((1, 5, 5, 2))
y4 = np.zeros((1, 4, 4, 2))
ok = attrs((2, 2), (1, 1), "VALID")
ERRORS = {
    "ksize 0": (max_pool, (x4,), attrs((0, 2), (1, 1), "VALID")),
    "ksize negative": (avg_pool, (x4,), attrs((-2, 2), (1, 1), "SAME")),
    "stride 0": (max_pool, (x4,), attrs((2, 2), (0, 1), "VALID")),
    "avg stride 0": (avg_pool, (x4,), attrs((2, 2), (1, 0), "VALID")),
    "ksize batch": (max_pool, (x4,), dict(ok, ksize=[2, 2, 2, 1])),
    "stride batch": (avg_pool, (x4,), dict(ok, strides=[2, 1, 1, 1])),
    "avg depth": (avg_pool, (x4,), dict(ok, ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2])),
    "ksize 5 ints": (max_pool, (x4,), dict(ok, ksize=[1, 2, 2, 1, 1])),
    "strides 5 ints": (avg_pool, (x4,), dict(ok, strides=[1, 1, 1, 1, 1])),
    "rank 3": (max_pool, (x4[0],), ok),
    "avg rank 5": (avg_pool, (x4[None],), ok),
    "window too big": (max_pool, (x4,), attrs((8, 2), (1, 1), "VALID")),
    "avg window too big": (avg_pool, (x4,), attrs((2, 8), (1, 1), "VALID")),
    "NCHW float64": (max_pool, (x4,), dict(ok, data_format="NCHW")),
    "explicit 6 values": (max_pool, (x4,), attrs((2, 2), (1, 1), "EXPLICIT", [0, 0, 1, 1, 1, 1])),
    "explicit negative": (max_pool, (x4,), attrs((2, 2), (1, 1), "EXPLICIT", [0, 0, -1, 1, 1, 1, 0, 0])),
    "explicit batch": (max_pool, (x4,), attrs((2, 2), (1, 1), "EXPLICIT", [1, 0, 1, 1, 1, 1, 0, 0])),
    "explicit >= window": (max_pool, (x4,), attrs((2, 2), (1, 1), "EXPLICIT", [0, 0, 3, 1, 1, 1, 0, 0])),
    "grad wrong grad shape": (max_pool_grad, (x4, y4, y4[:, :3]), ok),
    "grad wrong out shape": (max_pool_grad, (x4, y4[:, :, :3], y4), ok),
    "grad rank 3": (max_pool_grad, (x4[0], y4, y4), ok),
    "grad ksize batch": (max_pool_grad, (x4, y4, y4), dict(ok, ksize=[2, 2, 2, 1])),
    "grad depth": (max_pool_grad, (x4, y4[..., :1], y4[..., :1]),
                   dict(ok, ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2])),
    # float64: oneDNN's float32 AvgPoolGrad aborts the process on this one
    "avg grad shape 3 ints": (avg_pool_grad, (np.array([1, 5, 5], np.int32), y4), ok),
    "avg grad negative dim": (avg_pool_grad, (np.array([1, -5, 5, 2], np.int32), y4), ok),
    "avg grad rank 3": (avg_pool_grad, (np.array([1, 5, 5, 2], np.int32), y4[0]), ok),
    "avg grad depth": (avg_pool_grad, (np.array([1, 5, 5, 2], np.int32), y4),
                       dict(ok, ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2])),
    # CPU accepts these; SIMDEV refuses them (the test says which class)
    "max depth pooling": (max_pool, (x4,), dict(ok, ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2])),
    "avg grad wrong grad shape": (avg_pool_grad, (np.array([1, 5, 5, 2], np.int32), y4[:, :3]), ok),
    "avg grad ksize 0": (avg_pool_grad, (np.array([1, 5, 5, 2], np.int32), y4), attrs((0, 2), (1, 1), "VALID")),
}

def after():
    x = x4.astype(np.float32)
    W = Windows(x.shape, (2, 2), (1, 1), "VALID")
    r = versus_ref(max_pool, x, ref=max_pool_ref(x, W)[0], bound=0.0, cpu=False, **ok)
    return r["sim_ok"] and r["on_simdev"]

for name, (fn, args, a) in ERRORS.items():
    @check(f"error {name}")
    def _(fn=fn, args=args, a=a):
        return dict(error_pair(fn, *args, **a), after=after_ok(after))
"""

# name -> (op, key text of the kernel's message, extra assert_error_like_cpu
# arguments). key is TF CPU's wording unless cpu_key is False.
ERRORS = {
    "ksize 0": ("MaxPool", "Sliding window ksize must be positive", {}),
    "ksize negative": ("AvgPool", "ksize must be", {}),
    "stride 0": ("MaxPool", "Stride must be > 0", {}),
    "avg stride 0": ("AvgPool", "Stride must be > 0", {}),
    "ksize batch": ("MaxPool", "Pooling is not yet supported on the batch dimension", {}),
    "stride batch": ("AvgPool", "Pooling is not yet supported on the batch dimension", {}),
    "avg depth": ("AvgPool", "simdev pooling does not support pooling across depth", {"cpu_key": False}),
    "ksize 5 ints": ("MaxPool", "Sliding window ksize field must specify 4 dimensions", {}),
    "strides 5 ints": ("AvgPool", "Sliding window stride field must specify 4 dimensions", {}),
    "rank 3": ("MaxPool", "input must be 4-dimensional", {"cpu_key": False}),
    "avg rank 5": ("AvgPool", "input must be 4-dimensional", {"cpu_key": False}),
    "window too big": ("MaxPool", "Computed output size would be negative", {}),
    "avg window too big": ("AvgPool", "Computed output size would be negative", {}),
    "NCHW float64": ("MaxPool", "NHWC", {}),
    "explicit 6 values": ("MaxPool", "explicit_paddings attribute must contain 8 values", {}),
    "explicit negative": ("MaxPool", "All elements of explicit_paddings must be nonnegative", {}),
    "explicit batch": ("MaxPool", "Nonzero explicit padding in the batch or depth dimensions is not supported", {}),
    "explicit >= window": ("MaxPool", "needs to be smaller than the window size", {}),
    "grad wrong grad shape": ("MaxPoolGrad", "Expected grad shape to be [1,4,4,2], but got [1,3,4,2]", {}),
    "grad wrong out shape": ("MaxPoolGrad", "Expected orig_output shape to be [1,4,4,2], but got [1,4,3,2]", {}),
    "grad rank 3": ("MaxPoolGrad", "tensor_in must be 4-dimensional", {}),
    "grad ksize batch": ("MaxPoolGrad", "Pooling is not yet supported on the batch dimension", {}),
    "grad depth": ("MaxPoolGrad", "simdev pooling does not support pooling across depth", {"cpu_key": False}),
    "avg grad shape 3 ints": ("AvgPoolGrad", "must be 1-dimensional and 4 elements", {}),
    "avg grad negative dim": ("AvgPoolGrad", "non-negative", {}),
    "avg grad rank 3": ("AvgPoolGrad", "out_backprop must be 4-dimensional", {}),
    "avg grad depth": ("AvgPoolGrad", "simdev pooling does not support pooling across depth", {"cpu_key": False}),
    "max depth pooling": ("MaxPool", "simdev pooling does not support pooling across depth",
                          {"cls": "UnimplementedError"}),
    "avg grad wrong grad shape": ("AvgPoolGrad", "Expected grad shape to be [1,4,4,2], but got [1,3,4,2]",
                                  {"cls": "InvalidArgumentError"}),
    "avg grad ksize 0": ("AvgPoolGrad", "Sliding window ksize must be positive",
                         {"cls": "InvalidArgumentError"}),
}


@pytest.fixture(scope="module")
def pl(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_sweep(pl, op, dtype):
    assert_sweep(pl.data(f"sweep {op} {dtype}"), TF_CPU_DIVERGENCES, min_cases=30)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_grad_ties(pl, dtype):
    """Gradients go to the first maximum of each window in row-major order."""
    assert_sweep(pl.data(f"ties {dtype}"), min_cases=20)


@pytest.mark.parametrize("check", ["explicit", "nan and inf", "large", "tape"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_vs_reference(pl, check, dtype):
    d = pl.data(f"{check} {dtype}")
    assert d
    for case, rep in d.items():
        assert_vs_ref(rep, f"{check} {dtype} {case}")


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(pl, name):
    op, key, kw = ERRORS[name]
    assert_error_like_cpu(pl.data(f"error {name}"), op, key, **kw)


def test_divergences_documented():
    assert_divergences_documented(TF_CPU_DIVERGENCES)


def test_clean_exit(pl):
    pl.assert_clean_exit()
