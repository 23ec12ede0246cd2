"""Elementwise kernels on SIMDEV against TF's CPU kernels.

Covers src/kernels/cwise*.c: binary ops with broadcasting (AddV2, Sub, Mul,
RealDiv, DivNoNan, Maximum, Minimum, Pow, SquaredDifference), unary ops (Neg,
Square, Sqrt, Rsqrt, Exp, Log, Tanh, Sigmoid, Relu, Abs, Reciprocal),
activation gradients (ReluGrad, TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad),
BiasAdd and BiasAddGrad.

One subprocess runs every case with soft placement off (a missing SIMDEV
kernel raises instead of falling back to CPU); each pytest test asserts on
one case. Shapes exercise each broadcasting path of the driver (same shape,
scalar, row, column, mixed rank-4/5, zero-size, 1x1, odd sizes, 4M
elements). int64 results must be bit-identical to CPU (wrap-around
included); floats within rtol/atol. BiasAddGrad sums in double on SIMDEV
(TF's CPU sums in float), so it is compared against CPU with a tolerance
that grows with the number of summed elements and against an exact float64
sum with a tight one.
"""
import pytest

BINARY = ["AddV2", "Sub", "Mul", "RealDiv", "DivNoNan", "Maximum", "Minimum",
          "Pow", "SquaredDifference"]
BINARY_I64 = ["AddV2", "Sub", "Mul", "Maximum", "Minimum"]
UNARY = ["Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Tanh", "Sigmoid",
         "Relu", "Abs", "Reciprocal"]
UNARY_I64 = ["Neg"]
GRADS = ["ReluGrad", "TanhGrad", "SigmoidGrad", "SqrtGrad", "RsqrtGrad"]
BIG = 1 << 22  # 4M elements

BIN_SHAPES = {
    "same": ([7, 13], [7, 13]),
    "scalar-x": ([], [5, 9]),
    "scalar-y": ([5, 9], []),
    "scalars": ([], []),
    "row": ([6, 11], [11]),
    "col": ([6, 11], [6, 1]),
    "rank4-mixed": ([2, 1, 5, 1], [3, 1, 7]),
    "rank5-mixed": ([1, 4, 1, 3, 1], [2, 1, 5, 1, 6]),
    "zero": ([0, 4], [4]),
    "zero-vs-1": ([3, 0], [3, 1]),
    "1x1": ([1, 1], [1, 1]),
    "odd": ([17, 1], [1, 23]),
}
BIN_BIG = {  # float32 only
    "big-same": ([BIG], [BIG]),
    "big-row": ([1024, 4096], [4096]),
    "big-col": ([4096, 1024], [4096, 1]),
    "big-mixed": ([64, 1, 256], [1, 256, 256]),
}
UN_SHAPES = {"scalar": [], "1x1": [1, 1], "zero": [0, 3], "mid": [7, 13],
             "odd": [3, 5, 7, 11]}
GRAD_SHAPES = {"same": ([7, 13], [7, 13]), "1x1": ([1, 1], [1, 1]),
               "zero": ([0, 3], [0, 3]), "odd": ([3, 5, 7], [3, 5, 7])}
BIAS_SHAPES = [  # (format, value shape); the bias matches the channel dim
    ("NHWC", [5, 7]), ("NHWC", [2, 3, 4, 5]), ("NHWC", [2, 1, 3, 1, 2, 5]),
    ("NCHW", [4, 6]), ("NCHW", [2, 3, 4, 5]), ("NCHW", [2, 3, 2, 2, 3]),
    ("NHWC", [0, 3]), ("NCHW", [2, 0, 3]), ("NHWC", [3, 0]),
    ("NHWC", [1, 1]), ("NCHW", [1, 1, 1]), ("NHWC", [3, 9000]),
]
BIAS_BIG = [("NHWC", [16384, 256]), ("NCHW", [16, 64, 64, 64]),
            ("NCHW", [1, 2, 1 << 21])]


def _case(name, kind, op, dtype, shapes, fmt=None):
    return {"name": name, "kind": kind, "op": op, "dtype": dtype,
            "shapes": shapes, "fmt": fmt}


def _cases():
    cases = []
    for op in BINARY:
        for dt in ("float32", "float64"):
            for sname, shapes in BIN_SHAPES.items():
                cases.append(_case(f"{op}:{dt}:{sname}", "binary", op, dt,
                                   list(shapes)))
        for sname, shapes in BIN_BIG.items():
            if sname == "big-mixed" and op not in ("AddV2", "Maximum"):
                continue
            cases.append(_case(f"{op}:float32:{sname}", "binary", op,
                               "float32", list(shapes)))
    for op in BINARY_I64:
        for sname, shapes in BIN_SHAPES.items():
            cases.append(_case(f"{op}:int64:{sname}", "binary", op, "int64",
                               list(shapes)))
        cases.append(_case(f"{op}:int64:big-row", "binary", op, "int64",
                           list(BIN_BIG["big-row"])))
    for op in UNARY:
        dts = ["float32", "float64"] + (["int64"] if op in UNARY_I64 else [])
        for dt in dts:
            for sname, shape in UN_SHAPES.items():
                cases.append(_case(f"{op}:{dt}:{sname}", "unary", op, dt,
                                   [shape]))
        cases.append(_case(f"{op}:float32:big", "unary", op, "float32",
                           [[BIG]]))
    for op in GRADS:
        for dt in ("float32", "float64"):
            for sname, shapes in GRAD_SHAPES.items():
                cases.append(_case(f"{op}:{dt}:{sname}", "grad", op, dt,
                                   list(shapes)))
            if op != "ReluGrad":  # the others only need equal counts
                cases.append(_case(f"{op}:{dt}:reshaped", "grad", op, dt,
                                   [[2, 3], [3, 2]]))
        cases.append(_case(f"{op}:float32:big", "grad", op, "float32",
                           [[BIG], [BIG]]))
    for kind in ("BiasAdd", "BiasAddGrad"):
        for dt in ("float32", "float64"):
            for fmt, shape in BIAS_SHAPES:
                cases.append(_case(f"{kind}:{dt}:{fmt}{shape}", kind, kind,
                                   dt, [shape], fmt))
        for fmt, shape in BIAS_BIG:
            cases.append(_case(f"{kind}:float32:{fmt}{shape}", kind, kind,
                               "float32", [shape], fmt))
    return cases


CASES = _cases()
CASE_NAMES = [c["name"] for c in CASES]

# Bad inputs: (name, op kind, op, dtype, shapes, fmt). Each must raise the
# same exception class on SIMDEV as on CPU.
ERRORS = [(f"{op}:incompatible", "binary", op, "float32", [[2, 3], [4]], None)
          for op in BINARY]
ERRORS += [
    ("AddV2:int64:incompatible", "binary", "AddV2", "int64", [[2, 3], [4]], None),
    ("AddV2:zero-vs-2", "binary", "AddV2", "float32", [[0, 3], [2, 3]], None),
    ("ReluGrad:shape", "grad", "ReluGrad", "float32", [[6], [3, 2]], None),
    ("ReluGrad:size", "grad", "ReluGrad", "float32", [[2, 3], [4]], None),
    ("TanhGrad:size", "grad", "TanhGrad", "float32", [[2, 3], [4]], None),
    ("SigmoidGrad:size", "grad", "SigmoidGrad", "float64", [[5], [4]], None),
    ("SqrtGrad:size", "grad", "SqrtGrad", "float32", [[5], [4]], None),
    ("RsqrtGrad:size", "grad", "RsqrtGrad", "float32", [[5], [4]], None),
    ("BiasAdd:value-1d", "BiasAdd", "BiasAdd", "float32", [[4], [4]], "NHWC"),
    ("BiasAdd:bias-2d", "BiasAdd", "BiasAdd", "float32", [[2, 3], [2, 3]], "NHWC"),
    ("BiasAdd:mismatch", "BiasAdd", "BiasAdd", "float32", [[2, 3], [4]], "NHWC"),
    ("BiasAdd:mismatch-nchw", "BiasAdd", "BiasAdd", "float32", [[2, 3, 4], [4]], "NCHW"),
    ("BiasAdd:bad-format", "BiasAdd", "BiasAdd", "float32", [[2, 3], [3]], "NHCW"),
    ("BiasAddGrad:1d", "BiasAddGrad", "BiasAddGrad", "float32", [[4]], "NHWC"),
    ("BiasAddGrad:scalar", "BiasAddGrad", "BiasAddGrad", "float64", [[]], "NCHW"),
]
ERROR_NAMES = [e[0] for e in ERRORS]

SPECIALS = ["Maximum", "Minimum", "Relu", "ReluGrad", "DivNoNan", "Sqrt",
            "Log", "Rsqrt", "Pow", "AddV2:int64-wrap", "Neg:int64-min"]

SCRIPT = f"CASES = {CASES!r}\nERRORS = {ERRORS!r}\n" + r"""
import zlib
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
raw = tf.raw_ops
SIMDEV, CPU = "/device:SIMDEV:0", "/device:CPU:0"

def op_fn(kind, op, fmt):
    if kind == "binary":
        return lambda x, y: getattr(raw, op)(x=x, y=y)
    if kind == "unary":
        if op == "Relu":
            return lambda x: raw.Relu(features=x)
        return lambda x: getattr(raw, op)(x=x)
    if kind == "grad":
        if op == "ReluGrad":
            return lambda g, f: raw.ReluGrad(gradients=g, features=f)
        return lambda y, dy: getattr(raw, op)(y=y, dy=dy)
    if kind == "BiasAdd":
        return lambda v, b: raw.BiasAdd(value=v, bias=b, data_format=fmt)
    return lambda v: raw.BiasAddGrad(out_backprop=v, data_format=fmt)

def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))

def away_from_zero(rng, shape):
    n = rng.standard_normal(shape)
    return np.where(n < 0, -1.0, 1.0) * (0.5 + np.abs(n))

def positive(rng, shape):
    return rng.uniform(0.01, 10.0, shape)

def inputs(c):
    rng = rng_for(c["name"])
    dt, op, shapes = c["dtype"], c["op"], c["shapes"]
    if dt == "int64":
        lim = 2**62 if op == "Mul" else 2**63 - 1
        return [rng.integers(-lim, lim, s, dtype=np.int64, endpoint=True)
                for s in shapes]
    arrs = [rng.standard_normal(s) for s in shapes]
    if c["kind"] == "binary":
        if op == "RealDiv":
            arrs[1] = away_from_zero(rng, shapes[1])
        elif op == "DivNoNan":
            arrs[1] = np.where(rng.uniform(size=shapes[1]) < 0.2, 0.0, arrs[1])
        elif op == "Pow":
            arrs[0] = np.abs(arrs[0]) + 0.1
    elif c["kind"] == "unary":
        if op in ("Sqrt", "Rsqrt", "Log"):
            arrs[0] = positive(rng, shapes[0])
        elif op == "Reciprocal":
            arrs[0] = away_from_zero(rng, shapes[0])
        elif op == "Exp":
            arrs[0] = 3 * arrs[0]
    elif c["kind"] == "grad":
        if op in ("SqrtGrad", "RsqrtGrad"):
            arrs[0] = positive(rng, shapes[0])
        elif op == "TanhGrad":
            arrs[0] = np.tanh(arrs[0])
        elif op == "SigmoidGrad":
            arrs[0] = 1 / (1 + np.exp(-arrs[0]))
    elif c["kind"] == "BiasAdd":
        v = shapes[0]
        ch = 1 if (c["fmt"] == "NCHW" and len(v) >= 3) else len(v) - 1
        arrs.append(rng.standard_normal([v[ch]]))
    return [a.astype(dt) for a in arrs]

def exact_vs_cpu(fn, *args):
    outs = {}
    for dev in (SIMDEV, CPU):
        with tf.device(dev):
            outs[dev] = fn(*[tf.constant(a) for a in args])
    rep = raw_equal(outs[SIMDEV].numpy(), outs[CPU].numpy())
    rep["devices"] = [outs[SIMDEV].device]
    rep["on_simdev"] = "SIMDEV:0" in outs[SIMDEV].device
    rep["close"] = rep["equal"]
    return rep

def reduced_axes(shape, fmt):
    ch = 1 if (fmt == "NCHW" and len(shape) >= 3) else len(shape) - 1
    return tuple(i for i in range(len(shape)) if i != ch)

def run_case(c):
    fn = op_fn(c["kind"], c["op"], c["fmt"])
    args = inputs(c)
    if c["dtype"] == "int64":
        return exact_vs_cpu(fn, *args)
    f64 = c["dtype"] == "float64"
    rtol, atol = (1e-10, 1e-12) if f64 else (1e-5, 1e-6)
    if c["kind"] == "BiasAddGrad":
        v = args[0]
        summed = 1
        for i in reduced_axes(v.shape, c["fmt"]):
            summed *= v.shape[i]
        atol = (1e-13 if f64 else 1e-6) * max(1, summed)
        rep = versus_cpu(fn, *args, rtol=rtol, atol=atol)
        with tf.device(SIMDEV):
            got = fn(tf.constant(v)).numpy()
        exact = v.astype(np.float64).sum(axis=reduced_axes(v.shape, c["fmt"]))
        tight = 1e-14 if f64 else 1e-7
        rep["exact_close"] = bool(np.allclose(got, exact, rtol=tight,
                                              atol=tight * max(1, summed) ** 0.5))
        rep["exact_max_err"] = float(np.max(np.abs(got - exact))) if got.size else 0.0
        return rep
    return versus_cpu(fn, *args, rtol=rtol, atol=atol)

for c in CASES:
    check(c["name"])(lambda: run_case(c))

# ---- bad inputs: same exception class as CPU, then SIMDEV still works ----
def good_op():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with tf.device(SIMDEV):
        r = raw.AddV2(x=tf.constant(a), y=tf.constant(a))
    return {"device": r.device, "ok": bool(np.array_equal(r.numpy(), 2 * a))}

for name, kind, op, dt, shapes, fmt in ERRORS:
    def run_error():
        fn = op_fn(kind, op, fmt)
        args = [np.ones(s, dtype=dt) for s in shapes]
        sim = error_class(fn, *args, device=SIMDEV)
        cpu = error_class(fn, *args, device=CPU)
        return {"simdev": sim[0], "simdev_msg": sim[1], "cpu": cpu[0],
                "cpu_msg": cpu[1], "after": good_op()}
    check("error:" + name)(run_error)

# ---- special values: bit-identical to CPU --------------------------------
F = np.float32
nan, inf = np.nan, np.inf
SPECIAL_INPUTS = {
    # No +-0 ties: TF's CPU answer for max(-0, +0) depends on whether Eigen
    # took its vector or scalar path.
    "Maximum": ([nan, 1, nan, -inf, inf, 2, 3, -5], [1, nan, nan, inf, -inf, 2, -1, 4]),
    "Minimum": ([nan, 1, nan, -inf, inf, 2, 3, -5], [1, nan, nan, inf, -inf, 2, -1, 4]),
    "Relu": ([nan, -0.0, 0.0, -inf, inf, -1, 1],),
    "ReluGrad": ([nan, inf, nan, 2, 3, -inf], [-1, -1, 1, nan, 0.0, 5]),
    "DivNoNan": ([1, nan, inf, 0, -0.0, 3], [0, 0, 0, 0, 0, -0.0]),
    "Sqrt": ([-1, 0, -0.0, inf, nan],),
    "Log": ([-1, 0, -0.0, inf, nan, 1],),
    "Rsqrt": ([-1, 0, -0.0, inf, nan, 4],),
    "Pow": ([-2, 0, 0, -8, nan, 1, inf], [0.5, -1, 0, 1 / 3, 0, nan, -1]),
}
for op, vals in SPECIAL_INPUTS.items():
    def run_special():
        kind = "binary" if len(vals) == 2 else "unary"
        if op == "ReluGrad":
            kind = "grad"
        args = [np.array(v, dtype=F) for v in vals]
        return exact_vs_cpu(op_fn(kind, op, None), *args)
    check("special:" + op)(run_special)

I64 = np.iinfo(np.int64)
check("special:AddV2:int64-wrap")(lambda: exact_vs_cpu(
    op_fn("binary", "AddV2", None),
    np.array([I64.max, I64.min, -1], dtype=np.int64),
    np.array([1, -1, I64.min], dtype=np.int64)))
check("special:Neg:int64-min")(lambda: exact_vs_cpu(
    op_fn("unary", "Neg", None), np.array([I64.min, 0, I64.max], dtype=np.int64)))

# ---- determinism: a large op twice gives the same bits -------------------
def twice(fn, *args):
    outs = []
    for _ in range(2):
        with tf.device(SIMDEV):
            outs.append(fn(*[tf.constant(a) for a in args]).numpy())
    return raw_equal(outs[0], outs[1])

rng = np.random.default_rng(7)
check("determinism:BiasAddGrad:NHWC")(lambda: twice(
    op_fn("BiasAddGrad", "BiasAddGrad", "NHWC"),
    rng.standard_normal((16384, 256)).astype(np.float32)))
check("determinism:BiasAddGrad:NCHW")(lambda: twice(
    op_fn("BiasAddGrad", "BiasAddGrad", "NCHW"),
    rng.standard_normal((2, 2, 1 << 20)).astype(np.float32)))
check("determinism:AddV2:mixed")(lambda: twice(
    op_fn("binary", "AddV2", None),
    rng.standard_normal((64, 1, 256)).astype(np.float32),
    rng.standard_normal((1, 256, 256)).astype(np.float32)))
"""


@pytest.fixture(scope="module")
def cw(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_versus_cpu(cw, name):
    d = cw.data(name)
    assert d["on_simdev"], f"result not on SIMDEV: {d['devices']}"
    assert d["close"], f"SIMDEV differs from CPU: {d}"
    if "exact_close" in d:
        assert d["exact_close"], f"BiasAddGrad far from the exact sum: {d}"


@pytest.mark.parametrize("name", ERROR_NAMES)
def test_bad_inputs(cw, name):
    d = cw.data("error:" + name)
    assert d["cpu"], f"CPU accepted the bad input: {d}"
    assert d["simdev"] == d["cpu"], f"different exception classes: {d}"
    assert d["after"]["ok"] and "SIMDEV" in d["after"]["device"], \
        f"SIMDEV broken after the error: {d}"


def test_incompatible_shapes_message(cw):
    d = cw.data("error:AddV2:incompatible")
    assert "Incompatible shapes: [2,3] vs. [4]" in d["simdev_msg"], d


@pytest.mark.parametrize("name", SPECIALS)
def test_special_values(cw, name):
    d = cw.data("special:" + name)
    assert d["on_simdev"], d
    assert d["equal"], f"special values differ from CPU: {d}"


@pytest.mark.parametrize("name", ["BiasAddGrad:NHWC", "BiasAddGrad:NCHW",
                                  "AddV2:mixed"])
def test_deterministic(cw, name):
    d = cw.data("determinism:" + name)
    assert d["equal"], f"two runs differ: {d}"


def test_clean_exit(cw):
    cw.assert_clean_exit()
