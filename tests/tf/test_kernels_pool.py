"""MaxPool, AvgPool, MaxPoolGrad, AvgPoolGrad on SIMDEV against TF's CPU
kernels (soft placement off), NHWC, float32 and float64.

Covered: VALID/SAME (and EXPLICIT for max pooling) over odd sizes, 1x1,
zero-size batch/height/depth, windows larger than the input, strides larger
than the window, a 4M-element input; MaxPoolGrad on inputs full of ties must
equal the CPU bit for bit (gradients go to the first max in row-major
order); NaN and -inf follow the CPU; gradients through tf.GradientTape; bad
attributes and shapes raise the CPU's exception class and the process stays
usable.

Where TF's CPU kernels are wrong, SIMDEV is checked against a NumPy
reference instead:
  - AvgPoolGrad float64 with SAME padding and a window wider than the input
    counts the window as if it were clipped on one side only (the float32
    oneDNN kernel and the forward AvgPool agree with the reference);
  - MaxPoolGrad whose pooled output is empty returns uninitialised memory
    on CPU (SIMDEV returns zeros);
  - oneDNN's float32 AvgPoolGrad fails on zero depth and does not check the
    grad shape (SIMDEV raises InvalidArgument).
"""
import pytest

DTYPES = ["float32", "float64"]
OPS = ["MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad"]

SCRIPT = f"DTYPES = {DTYPES!r}\nOPS = {OPS!r}\n" + r"""
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

def on_cpu(fn, *args, **kw):
    with tf.device(CPU):
        return fn(*[tf.constant(v) for v in args], **kw).numpy()

def on_simdev(fn, *args, **kw):
    with tf.device(SIMDEV):
        r = fn(*[tf.constant(v) for v in args], **kw)
        return r.numpy(), r.device

def out_size(n, k, s, pad):
    return (n + s - 1) // s if pad == "SAME" else (n - k + s) // s

def avg_pool_grad_ref(shape, g, k, s, pad):
    # NumPy reference: each gradient spread over the real window elements
    n, h, w, c = shape
    oh, ow = g.shape[1], g.shape[2]
    pt = max((oh - 1) * s[0] + k[0] - h, 0) // 2 if pad == "SAME" else 0
    pl = max((ow - 1) * s[1] + k[1] - w, 0) // 2 if pad == "SAME" else 0
    dx = np.zeros(shape, np.float64)
    for i in range(oh):
        h0, h1 = max(i * s[0] - pt, 0), min(i * s[0] - pt + k[0], h)
        for j in range(ow):
            w0, w1 = max(j * s[1] - pl, 0), min(j * s[1] - pl + k[1], w)
            dx[:, h0:h1, w0:w1, :] += (g[:, i:i + 1, j:j + 1, :] /
                                       ((h1 - h0) * (w1 - w0)))
    return dx

# (shape, window, stride)
CASES = [((1, 5, 5, 2), (2, 2), (1, 1)), ((2, 7, 9, 3), (3, 3), (2, 2)),
         ((1, 1, 1, 1), (1, 1), (1, 1)), ((3, 8, 8, 5), (2, 3), (2, 1)),
         ((1, 6, 6, 1), (3, 3), (3, 3)), ((0, 4, 4, 2), (2, 2), (1, 1)),
         ((1, 0, 4, 2), (2, 2), (1, 1)), ((1, 4, 4, 0), (2, 2), (1, 1)),
         ((1, 5, 5, 2), (6, 2), (1, 1)), ((2, 13, 11, 7), (5, 4), (3, 2)),
         ((1, 10, 10, 1), (1, 1), (4, 4)), ((1, 9, 9, 300), (2, 2), (2, 2)),
         ((2, 31, 17, 3), (7, 1), (1, 5))]

def sweep(op, dt):
    bad, off, n = [], [], 0
    for shape, k, s in CASES:
        for pad in ("VALID", "SAME"):
            oh, ow = out_size(shape[1], k[0], s[0], pad), out_size(shape[2], k[1], s[1], pad)
            if oh < 0 or ow < 0:
                continue
            a = attrs(k, s, pad)
            x = rng.standard_normal(shape).astype(dt)
            g = rng.standard_normal((shape[0], oh, ow, shape[3])).astype(dt)
            case = f"{shape} k={k} s={s} {pad}"
            if op == "MaxPool":
                rep = versus_cpu(max_pool, x, **a)
            elif op == "AvgPool":
                rep = versus_cpu(avg_pool, x, **a)
            elif op == "MaxPoolGrad":
                if g.size == 0 and x.size:   # CPU leaves the output unset
                    continue
                y = on_cpu(max_pool, x, **a)
                rep = versus_cpu(max_pool_grad, x, y, g, **a)
            else:
                wide = pad == "SAME" and (k[0] > shape[1] or k[1] > shape[2])
                if (dt == "float64" and wide) or (dt == "float32" and shape[3] == 0):
                    continue                 # CPU bugs: see the module doc
                rep = versus_cpu(avg_pool_grad, np.array(shape, np.int32), g, **a)
            n += 1
            if not rep["close"]:
                bad.append(f"{case}: {rep}")
            if not rep["on_simdev"]:
                off.append(f"{case}: {rep['devices']}")
    return {"cases": n, "bad": bad[:10], "not_on_simdev": off[:10]}

for op in OPS:
    for dt in DTYPES:
        check(f"sweep {op} {dt}")(lambda: sweep(op, dt))

for dt in DTYPES:
    @check(f"ties {dt}")
    def _(dt=dt):
        # values in {0, 0.5, ..., 2}: most windows hold several maxima
        diffs = []
        for shape, k, s in CASES:
            for pad in ("VALID", "SAME"):
                a = attrs(k, s, pad)
                if out_size(shape[1], k[0], s[0], pad) <= 0 or \
                        out_size(shape[2], k[1], s[1], pad) <= 0 or 0 in shape:
                    continue
                x = rng.integers(0, 5, shape).astype(dt) / 2
                y = on_cpu(max_pool, x, **a)
                g = rng.standard_normal(y.shape).astype(dt)
                got, _ = on_simdev(max_pool_grad, x, y, g, **a)
                want = on_cpu(max_pool_grad, x, y, g, **a)
                if not raw_equal(got, want)["equal"]:
                    diffs.append(f"{shape} k={k} s={s} {pad}")
        return {"diffs": diffs}

    @check(f"explicit {dt}")
    def _(dt=dt):
        x = rng.standard_normal((2, 6, 7, 3)).astype(dt)
        out = {}
        for ep in ([0, 0, 1, 1, 2, 1, 0, 0], [0, 0, 0, 1, 1, 0, 0, 0]):
            a = attrs((2, 3), (1, 2), "EXPLICIT", ep)
            y = on_cpu(max_pool, x, **a)
            g = rng.standard_normal(y.shape).astype(dt)
            out[f"fwd {ep}"] = versus_cpu(max_pool, x, **a)
            out[f"grad {ep}"] = versus_cpu(max_pool_grad, x, y, g, **a)
        return out

    @check(f"nan and inf {dt}")
    def _(dt=dt):
        a = attrs((2, 2), (1, 1), "VALID")
        t = np.array([[1, np.nan, 2], [3, 4, np.nan], [0, 0, 0]], dt).reshape(1, 3, 3, 1)
        nanall = np.full((1, 2, 2, 1), np.nan, dt)
        ninf = np.full((1, 2, 2, 1), -np.inf, dt)
        g = np.arange(1, 5).astype(dt).reshape(1, 2, 2, 1)
        return {
            "fwd nan": versus_cpu(max_pool, t, **a),
            "fwd all nan": versus_cpu(max_pool, nanall, **attrs((2, 2), (1, 1), "SAME")),
            "fwd all -inf": versus_cpu(max_pool, ninf, **attrs((2, 2), (1, 1), "SAME")),
            "grad nan": versus_cpu(max_pool_grad, t, g, g, **a),
            "avg nan": versus_cpu(avg_pool, t, **a),
        }

    @check(f"cpu bugs {dt}")
    def _(dt=dt):
        out = {}
        # AvgPoolGrad with windows wider than the input (SAME)
        for shape, k, s in [((1, 5, 5, 2), (6, 2), (1, 1)),
                            ((2, 3, 4, 3), (5, 7), (2, 1))]:
            oh, ow = out_size(shape[1], k[0], s[0], "SAME"), out_size(shape[2], k[1], s[1], "SAME")
            g = rng.standard_normal((shape[0], oh, ow, shape[3])).astype(dt)
            got, dev = on_simdev(avg_pool_grad, np.array(shape, np.int32), g,
                                 **attrs(k, s, "SAME"))
            ref = avg_pool_grad_ref(shape, g.astype(np.float64), k, s, "SAME")
            out[f"avg grad wide {shape}"] = bool(np.allclose(got, ref, rtol=1e-5, atol=1e-6)) and "SIMDEV" in dev
        # MaxPoolGrad with an empty pooled output: zeros
        x = rng.standard_normal((1, 5, 5, 2)).astype(dt)
        e = np.zeros((1, 0, 4, 2), dt)
        got, dev = on_simdev(max_pool_grad, x, e, e, **attrs((6, 2), (1, 1), "VALID"))
        out["max grad empty"] = got.shape == x.shape and not got.any() and "SIMDEV" in dev
        # AvgPoolGrad, zero depth
        g = np.zeros((1, 3, 3, 0), dt)
        got, dev = on_simdev(avg_pool_grad, np.array([1, 4, 4, 0], np.int32), g,
                             **attrs((2, 2), (1, 1), "VALID"))
        out["avg grad zero depth"] = got.shape == (1, 4, 4, 0) and "SIMDEV" in dev
        return out

    @check(f"large {dt}")
    def _(dt=dt):
        x = rng.standard_normal((4, 128, 128, 64)).astype(dt)   # 4M elements
        out = {}
        for k, s, pad in [((3, 3), (2, 2), "SAME"), ((2, 2), (2, 2), "VALID")]:
            a = attrs(k, s, pad)
            y = on_cpu(max_pool, x, **a)
            g = rng.standard_normal(y.shape).astype(dt)
            out[f"MaxPool {pad}"] = versus_cpu(max_pool, x, **a)
            out[f"AvgPool {pad}"] = versus_cpu(avg_pool, x, **a)
            out[f"MaxPoolGrad {pad}"] = versus_cpu(max_pool_grad, x, y, g, **a)
            out[f"AvgPoolGrad {pad}"] = versus_cpu(
                avg_pool_grad, np.array(x.shape, np.int32), g, **a)
        return out

    @check(f"tape {dt}")
    def _(dt=dt):
        x = rng.standard_normal((2, 9, 8, 3)).astype(dt)
        up_max = rng.standard_normal((2, 5, 4, 3)).astype(dt)
        up_avg = rng.standard_normal((2, 4, 3, 3)).astype(dt)

        def grads(x, up_max, up_avg):
            with tf.GradientTape(persistent=True) as t:
                t.watch(x)
                m = tf.nn.max_pool2d(x, ksize=3, strides=2, padding="SAME")
                v = tf.nn.avg_pool2d(x, ksize=(2, 3), strides=2, padding="VALID")
            return (m, v, t.gradient(m, x, output_gradients=up_max),
                    t.gradient(v, x, output_gradients=up_avg))
        return {"tape": versus_cpu(grads, x, up_max, up_avg)}

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
}
# CPU accepts these; SIMDEV refuses them (see the module doc).
SIMDEV_ONLY = {
    "max depth pooling": (max_pool, (x4,), dict(ok, ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2]), "UnimplementedError"),
    "avg grad wrong grad shape": (avg_pool_grad, (np.array([1, 5, 5, 2], np.int32), y4[:, :3]), ok, "InvalidArgumentError"),
    "avg grad ksize 0": (avg_pool_grad, (np.array([1, 5, 5, 2], np.int32), y4), attrs((0, 2), (1, 1), "VALID"), "InvalidArgumentError"),
}

def after():
    r = versus_cpu(max_pool, x4.astype(np.float32), **ok)
    return r["close"] and r["on_simdev"]

for name, (fn, args, a) in ERRORS.items():
    @check(f"error {name}")
    def _(fn=fn, args=args, a=a):
        sim = error_class(fn, *args, device=SIMDEV, **a)
        cpu = error_class(fn, *args, device=CPU, **a)
        return {"simdev": sim[0], "cpu": cpu[0], "msg": sim[1][:300], "after": after()}

for name, (fn, args, a, want) in SIMDEV_ONLY.items():
    @check(f"error {name}")
    def _(fn=fn, args=args, a=a, want=want):
        sim = error_class(fn, *args, device=SIMDEV, **a)
        return {"simdev": sim[0], "cpu": want, "msg": sim[1][:300], "after": after()}
"""

ERROR_NAMES = [
    "ksize 0", "ksize negative", "stride 0", "avg stride 0", "ksize batch",
    "stride batch", "avg depth", "ksize 5 ints", "strides 5 ints", "rank 3",
    "avg rank 5", "window too big", "NCHW float64", "explicit 6 values",
    "explicit negative", "explicit batch", "explicit >= window",
    "grad wrong grad shape", "grad wrong out shape", "grad rank 3",
    "grad ksize batch", "grad depth", "avg grad shape 3 ints",
    "avg grad negative dim", "avg grad rank 3", "avg grad depth",
    "max depth pooling", "avg grad wrong grad shape", "avg grad ksize 0"]


@pytest.fixture(scope="module")
def pl(run_tf):
    return run_tf(SCRIPT, timeout=300)


def _ok(rep):
    return rep["close"] and rep["on_simdev"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_sweep(pl, op, dtype):
    d = pl.data(f"sweep {op} {dtype}")
    assert d["cases"] >= 18
    assert not d["bad"], d["bad"]
    assert not d["not_on_simdev"], d["not_on_simdev"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_grad_ties_bit_exact(pl, dtype):
    assert not pl.data(f"ties {dtype}")["diffs"]


@pytest.mark.parametrize("check", ["explicit", "nan and inf", "large", "tape"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_vs_cpu(pl, check, dtype):
    d = pl.data(f"{check} {dtype}")
    assert d
    bad = {k: v for k, v in d.items() if not _ok(v)}
    assert not bad, bad


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_cpu_is_wrong(pl, dtype):
    d = pl.data(f"cpu bugs {dtype}")
    assert len(d) == 4
    assert all(d.values()), d


@pytest.mark.parametrize("name", ERROR_NAMES)
def test_errors(pl, name):
    d = pl.data(f"error {name}")
    assert d["cpu"], f"CPU accepted {name}"
    assert d["simdev"] == d["cpu"], d
    assert d["after"], "a good MaxPool on SIMDEV failed after the error"


def test_clean_exit(pl):
    pl.assert_clean_exit()
