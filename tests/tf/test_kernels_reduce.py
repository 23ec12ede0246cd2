"""Reductions on SIMDEV (Sum, Mean, Max, Min, Prod) against TF's CPU kernels.

One subprocess runs every case with soft placement off, so a missing SIMDEV
kernel raises instead of falling back to the CPU. Each check covers one
(op, dtype) over many shapes and axis lists (negative axes, int32 and int64
axes, empty axis lists, keep_dims both ways, zero-size dimensions, 1x1, odd
sizes) and reports the cases that differ from CPU or did not run on SIMDEV.
Large inputs (4M elements) are also compared with a float64 NumPy sum: the
CPU's own float32 column sums drift by ~1e-5, so vs CPU they use rtol 1e-4
and the tight bound is checked against the exact sum instead.
"""
import pytest

OPS = ["Sum", "Mean", "Max", "Min", "Prod"]
DTYPES = ["float32", "float64"]

SCRIPT = f"OPS = {OPS!r}\nDTYPES = {DTYPES!r}\n" + r"""
import itertools
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(7)
SIMDEV = "/device:SIMDEV:0"

SHAPES = [(), (1,), (5,), (1, 1), (3, 4), (7, 1, 3), (2, 3, 4, 5),
          (0,), (3, 0), (3, 0, 2), (0, 4, 1), (6, 1, 1, 5, 2), (17, 33, 9)]

def op_fn(name):
    f = getattr(tf.raw_ops, name)
    return lambda x, axes, keep: f(input=x, axis=axes, keep_dims=keep)

def data(shape, dtype, op):
    if dtype == "int64":
        return np.asarray(rng.integers(-1000, 1000, shape), np.int64)
    if op == "Prod":  # keep products of up to ~5000 factors finite
        return np.asarray(rng.uniform(0.9, 1.1, shape), dtype)
    return np.asarray(rng.standard_normal(shape), dtype)

def axis_lists(nd):
    for k in range(nd + 1):
        for i, axes in enumerate(itertools.combinations(range(nd), k)):
            # alternate positive / negative spellings and int32 / int64
            ax = [a - nd if (i + j) % 2 else a for j, a in enumerate(axes)]
            yield np.array(ax, np.int64 if (i + k) % 2 else np.int32)

def sweep(op, dtype):
    fn = op_fn(op)
    bad, off, n = [], [], 0
    for shape in SHAPES:
        x = data(shape, dtype, op)
        for axes in axis_lists(len(shape)):
            for keep in (False, True):
                rep = versus_cpu(fn, x, axes, keep, rtol=1e-5, atol=1e-6)
                n += 1
                case = f"{shape} axes={axes.tolist()}/{axes.dtype} keep={keep}"
                if not rep["close"]:
                    bad.append(f"{case}: {rep}")
                if not rep["on_simdev"]:
                    off.append(f"{case}: {rep['devices']}")
    return {"cases": n, "bad": bad[:10], "not_on_simdev": off[:10]}

for op in OPS:
    for dt in DTYPES:
        check(f"sweep {op} {dt}")(lambda: sweep(op, dt))
check("sweep Sum int64")(lambda: sweep("Sum", "int64"))

# ---- large inputs --------------------------------------------------------
BIG = 4 << 20
LAYOUTS = [((BIG,), [0]), ((2048, 2048), [0]), ((2048, 2048), [1]),
           ((16, 512, 512), [0, 2]), ((4, BIG // 4), [0]),
           ((BIG // 4, 4), [0]), ((BIG // 4, 4), [1]), ((64, 64, 1024), [1])]

def large(op, dtype):
    x = rng.uniform(0.5, 1.5, BIG).astype(dtype)
    if op == "Prod":
        x = rng.uniform(0.999, 1.001, BIG).astype(dtype)
    fn = op_fn(op)
    ref = {"Sum": np.sum, "Mean": np.mean, "Max": np.max, "Min": np.min,
           "Prod": np.prod}[op]
    bad, off = [], []
    for shape, axes in LAYOUTS:
        xs = x.reshape(shape)
        rep = versus_cpu(fn, xs, np.array(axes, np.int32), False,
                         rtol=1e-4, atol=1e-6)
        with tf.device(SIMDEV):
            got = fn(tf.constant(xs), np.array(axes, np.int32), False).numpy()
        exact = ref(xs.astype(np.float64), axis=tuple(axes))
        tight = np.allclose(got, exact, rtol=2e-6 if dtype == "float32" else 1e-12)
        if not rep["close"] or not tight:
            err = float(np.max(np.abs(got - exact) / np.abs(exact)))
            bad.append(f"{shape} {axes}: vs cpu {rep['close']} "
                       f"({rep['max_abs_err']}), vs exact rel err {err}")
        if not rep["on_simdev"]:
            off.append(str(shape))
    return {"bad": bad, "not_on_simdev": off}

for op in OPS:
    for dt in DTYPES:
        check(f"large {op} {dt}")(lambda: large(op, dt))

@check("deterministic")
def _():
    x = rng.standard_normal(BIG).astype(np.float32)
    outs = []
    with tf.device(SIMDEV):
        t = tf.constant(x)
        for _ in range(6):
            outs.append(tf.reduce_sum(t).numpy().tobytes() +
                        tf.reduce_sum(tf.reshape(t, [BIG // 4, 4]), 0).numpy().tobytes() +
                        tf.reduce_mean(tf.reshape(t, [2048, 2048]), 1).numpy().tobytes())
    return {"distinct": len(set(outs))}

# ---- special values --------------------------------------------------------
@check("nan and inf")
def _():
    x = np.array([[1, np.nan, 3], [np.nan, 1, 2], [-np.inf, 0, np.inf],
                  [5, 4, np.nan]], np.float32)
    bad = []
    for op in OPS:
        for axes in ([0], [1], [0, 1]):
            rep = versus_cpu(op_fn(op), x, np.array(axes, np.int32), False)
            if not rep["close"] or not rep["on_simdev"]:
                bad.append(f"{op} {axes}: {rep}")
    return {"bad": bad}

@check("zero-size identities")
def _():
    out = {}
    for op in OPS:
        for dt in DTYPES:
            x = np.zeros((3, 0, 2), dt)
            rep = versus_cpu(op_fn(op), x, np.array([1], np.int32), False)
            with tf.device(SIMDEV):
                v = op_fn(op)(tf.constant(x), np.array([1], np.int32), False)
            out[f"{op} {dt}"] = {"close": rep["close"], "on_simdev": rep["on_simdev"],
                                 "value": float(v.numpy().ravel()[0])}
    return out

# ---- bad inputs ------------------------------------------------------------
ERRORS = {
    "axis too large": (np.zeros((3, 4), np.float32), [2]),
    "axis too negative": (np.zeros((3, 4), np.float32), [-3]),
    "duplicate axis": (np.zeros((3, 4), np.float32), [1, 1]),
    "duplicate negative axis": (np.zeros((3, 4), np.float64), [1, -1]),
    "scalar axis 0": (np.array(3.0, np.float32), [0]),
    # would be axis 1 if read as int32
    "int64 axis 2^32+1": (np.zeros((3, 4), np.float32),
                          np.array([(1 << 32) + 1], np.int64)),
}
for name, (x, axes) in ERRORS.items():
    @check(f"error {name}")
    def _(x=x, axes=axes):
        out = {}
        for op in OPS:
            ax = np.asarray(axes, getattr(axes, "dtype", np.int32))
            sim = error_class(op_fn(op), x, ax, False, device=SIMDEV)
            cpu = error_class(op_fn(op), x, ax, False, device="/device:CPU:0")
            out[op] = {"simdev": sim[0], "cpu": cpu[0], "msg": sim[1][:200]}
        # the process and the device stay usable
        good = versus_cpu(op_fn("Sum"), np.ones((5, 6), np.float32),
                          np.array([1], np.int32), False)
        out["after"] = good["close"] and good["on_simdev"]
        return out
"""


@pytest.fixture(scope="module")
def rd(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_sweep(rd, op, dtype):
    d = rd.data(f"sweep {op} {dtype}")
    assert d["cases"] > 100
    assert not d["bad"], f"{op} {dtype} differs from CPU: {d['bad']}"
    assert not d["not_on_simdev"], d["not_on_simdev"]


def test_sweep_sum_int64(rd):
    d = rd.data("sweep Sum int64")
    assert d["cases"] > 100
    assert not d["bad"], d["bad"]
    assert not d["not_on_simdev"], d["not_on_simdev"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_large(rd, op, dtype):
    d = rd.data(f"large {op} {dtype}")
    assert not d["bad"], d["bad"]
    assert not d["not_on_simdev"], d["not_on_simdev"]


def test_deterministic(rd):
    assert rd.data("deterministic")["distinct"] == 1


def test_nan_inf(rd):
    d = rd.data("nan and inf")
    assert not d["bad"], d["bad"]


def test_zero_size_identities(rd):
    d = rd.data("zero-size identities")
    want = {"Sum": 0.0, "Prod": 1.0, "Max": float("-inf"), "Min": float("inf")}
    for key, r in d.items():
        assert r["close"] and r["on_simdev"], (key, r)
        op = key.split()[0]
        if op == "Mean":
            assert r["value"] != r["value"], (key, r)  # NaN
        else:
            assert r["value"] == want[op], (key, r)


@pytest.mark.parametrize("name", ["axis too large", "axis too negative",
                                  "duplicate axis", "duplicate negative axis",
                                  "scalar axis 0", "int64 axis 2^32+1"])
def test_errors(rd, name):
    d = rd.data(f"error {name}")
    for op in OPS:
        r = d[op]
        assert r["cpu"], f"CPU accepted {name} for {op}"
        assert r["simdev"] == r["cpu"], (op, r)
    assert d["after"], "a good Sum on SIMDEV failed after the error"


def test_clean_exit(rd):
    rd.assert_clean_exit()
