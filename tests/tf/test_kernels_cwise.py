"""Elementwise kernels on SIMDEV against NumPy and TF's CPU kernels.

Covers src/kernels/math/cwise*.c: binary ops with broadcasting (AddV2, Sub, Mul,
RealDiv, DivNoNan, Maximum, Minimum, Pow, SquaredDifference), unary ops (Neg,
Square, Sqrt, Rsqrt, Exp, Log, Tanh, Sigmoid, Relu, Abs, Reciprocal),
activation gradients (ReluGrad, TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad),
BiasAdd and BiasAddGrad.

One subprocess runs every case with soft placement off (a missing SIMDEV
kernel raises instead of falling back to CPU); each pytest test asserts on
one case. Shapes exercise each broadcasting path of the driver (same shape,
scalar, row, column, mixed rank-4/5, zero-size, 1x1, odd sizes, 4M
elements).

The reference is NumPy in long double (int64: NumPy's wrapping int64
arithmetic, compared bit for bit). Bounds, in units of the dtype's unit
roundoff u (conftest): exact for Neg, Abs, Relu, Maximum, Minimum, ReluGrad;
one rounding (u |ref|) for the IEEE operations (+, -, *, /, sqrt, Square,
BiasAdd); gamma(k) for k roundings in a row (Rsqrt on SIMDEV, the activation
gradients, SquaredDifference); LIBM_ULPS ulps for exp, log, tanh, sigmoid,
pow (and for TF CPU's Rsqrt and Reciprocal, which Eigen may compute with
approximations). BiasAddGrad sums in double on SIMDEV (its bound: the final
rounding plus float64's gamma(n)); TF's CPU sums in float, in any order
(gamma(n) for the dtype).
"""
import pytest

from conftest import assert_error_like_cpu, assert_vs_ref

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

# Bad inputs: (name, op kind, op, dtype, shapes, fmt, key text of the
# kernel's message, which is also TF CPU's wording).
ERRORS = [(f"{op}:incompatible", "binary", op, "float32", [[2, 3], [4]], None,
           "Incompatible shapes: [2,3] vs. [4]") for op in BINARY]
SAME_SIZE = "must have the same size and shape.  Input 0: "
CWISE_COUNT = "The two arguments to a cwise op must have same number of elements, got "
ERRORS += [
    ("AddV2:int64:incompatible", "binary", "AddV2", "int64", [[2, 3], [4]], None,
     "Incompatible shapes: [2,3] vs. [4]"),
    ("AddV2:zero-vs-2", "binary", "AddV2", "float32", [[0, 3], [2, 3]], None,
     "Incompatible shapes: [0,3] vs. [2,3]"),
    ("ReluGrad:shape", "grad", "ReluGrad", "float32", [[6], [3, 2]], None,
     SAME_SIZE + "[6] != input 1: [3,2]"),
    ("ReluGrad:size", "grad", "ReluGrad", "float32", [[2, 3], [4]], None,
     SAME_SIZE + "[2,3] != input 1: [4]"),
    ("TanhGrad:size", "grad", "TanhGrad", "float32", [[2, 3], [4]], None, CWISE_COUNT + "6 and 4"),
    ("SigmoidGrad:size", "grad", "SigmoidGrad", "float64", [[5], [4]], None, CWISE_COUNT + "5 and 4"),
    ("SqrtGrad:size", "grad", "SqrtGrad", "float32", [[5], [4]], None, CWISE_COUNT + "5 and 4"),
    ("RsqrtGrad:size", "grad", "RsqrtGrad", "float32", [[5], [4]], None, CWISE_COUNT + "5 and 4"),
    ("BiasAdd:value-1d", "BiasAdd", "BiasAdd", "float32", [[4], [4]], "NHWC",
     "Input tensor must be at least 2D: [4]"),
    ("BiasAdd:bias-2d", "BiasAdd", "BiasAdd", "float32", [[2, 3], [2, 3]], "NHWC",
     "Biases must be 1D: [2,3]"),
    ("BiasAdd:mismatch", "BiasAdd", "BiasAdd", "float32", [[2, 3], [4]], "NHWC",
     "Must provide as many biases as the last dimension of the input tensor: [4] vs. [2,3]"),
    ("BiasAdd:mismatch-nchw", "BiasAdd", "BiasAdd", "float32", [[2, 3, 4], [4]], "NCHW",
     "Must provide as many biases as the last dimension of the input tensor: [4] vs. [2,3,4]"),
    ("BiasAddGrad:1d", "BiasAddGrad", "BiasAddGrad", "float32", [[4]], "NHWC",
     "Input tensor must be at least 2D: [4]"),
    ("BiasAddGrad:scalar", "BiasAddGrad", "BiasAddGrad", "float64", [[]], "NCHW",
     "Input tensor must be at least 2D: []"),
]
# (A data_format outside {NHWC, NCHW} is refused by TF's op definition before
# any kernel is looked up, so it proves nothing about SIMDEV: not tested.)

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

# ---- the NumPy reference ------------------------------------------------------
LD = np.longdouble

def ref_dtype(dt):
    # float32 data: float64 references; float64 data: long double
    return LD if dt == "float64" else np.float64

def ref_u(dt):
    return float(np.finfo(ref_dtype(dt)).eps) / 2

def sigmoid(x):
    return 1 / (1 + np.exp(-x))

REF = {
    "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "RealDiv": np.divide, "Maximum": np.maximum, "Minimum": np.minimum,
    "Pow": np.power, "SquaredDifference": lambda x, y: (x - y) ** 2,
    "DivNoNan": lambda x, y: np.where(y == 0, 0, x / np.where(y == 0, 1, y)),
    "Neg": np.negative, "Square": np.square, "Sqrt": np.sqrt,
    "Rsqrt": lambda x: 1 / np.sqrt(x), "Exp": np.exp, "Log": np.log,
    "Tanh": np.tanh, "Sigmoid": sigmoid, "Relu": lambda x: np.where(x < 0, 0, x),
    "Abs": np.abs, "Reciprocal": lambda x: 1 / x,
    "ReluGrad": lambda g, f: g * (f > 0),      # TF: a NaN gradient stays NaN
    "TanhGrad": lambda y, dy: dy * (1 - y * y),
    "SigmoidGrad": lambda y, dy: dy * y * (1 - y),
    "SqrtGrad": lambda y, dy: dy * 0.5 / y,
    "RsqrtGrad": lambda y, dy: dy * -0.5 * y * y * y,
}
# rounding count of each op's formula on SIMDEV (C, IEEE operations) and on
# TF CPU (Eigen: approximations where noted); "lib" = LIBM_ULPS
ULPS = {"AddV2": 1, "Sub": 1, "Mul": 1, "RealDiv": 1, "DivNoNan": 1,
        "Maximum": 0, "Minimum": 0, "Neg": 0, "Abs": 0, "Relu": 0, "ReluGrad": 0,
        "Square": 1, "Sqrt": 1, "SquaredDifference": 3, "Rsqrt": 2,
        "Reciprocal": 1, "Pow": "lib", "Exp": "lib", "Log": "lib",
        "Tanh": "lib", "Sigmoid": "lib", "TanhGrad": 3, "SigmoidGrad": 3,
        "SqrtGrad": 2, "RsqrtGrad": 4}
CPU_ULPS = dict(ULPS, Rsqrt="lib", Reciprocal="lib")

# |terms| of each gradient formula: its roundings are relative to these
ABS_TERMS = {
    "TanhGrad": lambda y, dy: np.abs(dy) * (1 + y * y),
    "SigmoidGrad": lambda y, dy: np.abs(dy * y) * (1 + np.abs(y)),
}

def elementwise_bound(op, ref, args, dt, ulps):
    k = LIBM_ULPS if ulps == "lib" else ulps
    a = ABS_TERMS[op](*args) if op in ABS_TERMS else np.abs(ref)
    if k == 0:
        return 0.0
    g = 2 * k * unit_roundoff(dt) if ulps == "lib" else gamma(k, dt)
    # + the reference's own rounding, + the subnormal range
    return g * a + LIBM_ULPS * ref_u(dt) * a + k * tiny(dt)

def reduced_axes(shape, fmt):
    ch = 1 if (fmt == "NCHW" and len(shape) >= 3) else len(shape) - 1
    return tuple(i for i in range(len(shape)) if i != ch)

def bias_view(v, b, fmt):
    # the bias broadcast along v's channel dimension
    ch = 1 if (fmt == "NCHW" and len(v.shape) >= 3) else len(v.shape) - 1
    return b.reshape([-1 if i == ch else 1 for i in range(len(v.shape))])

def run_case(c):
    fn = op_fn(c["kind"], c["op"], c["fmt"])
    args = inputs(c)
    dt, op = c["dtype"], c["op"]
    if dt == "int64":
        with np.errstate(over="ignore"):
            ref = REF[op](*args)          # NumPy's int64 wraps, like TF's
        return versus_ref(fn, *args, ref=ref, bound=0.0)
    la = [a.astype(ref_dtype(dt)) for a in args]
    if c["kind"] == "grad":
        la[1] = la[1].reshape(la[0].shape)   # TF pairs elements in order
    if c["kind"] == "BiasAdd":
        ref = la[0] + bias_view(la[0], la[1], c["fmt"])
        return versus_ref(fn, *args, ref=ref, bound=elementwise_bound(op, ref, la, dt, 1))
    if c["kind"] == "BiasAddGrad":
        ax = reduced_axes(args[0].shape, c["fmt"])
        n = 1
        for i in ax:
            n *= args[0].shape[i]
        ref = la[0].sum(axis=ax)
        a = np.abs(la[0]).sum(axis=ax)
        return versus_ref(fn, *args, ref=ref,
                          bound=sum_bound(a, n, dt, acc="float64", ref_dt="float64"),
                          cpu_bound=sum_bound(a, n, dt, ref_dt="float64"))
    with np.errstate(all="ignore"):
        ref = REF[op](*la)
    return versus_ref(fn, *args, ref=ref,
                      bound=elementwise_bound(op, ref, la, dt, ULPS[op]),
                      cpu_bound=elementwise_bound(op, ref, la, dt, CPU_ULPS[op]))

for c in CASES:
    check(c["name"])(lambda: run_case(c))

# ---- bad inputs: the kernel's own error, then SIMDEV still works ------------
def good_op():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with tf.device(SIMDEV):
        r = raw.AddV2(x=tf.constant(a), y=tf.constant(a))
    return "SIMDEV:0" in r.device and bool(np.array_equal(r.numpy(), 2 * a))

for name, kind, op, dt, shapes, fmt, key in ERRORS:
    def run_error():
        fn = op_fn(kind, op, fmt)
        args = [np.ones(s, dtype=dt) for s in shapes]
        return dict(error_pair(fn, *args), after=after_ok(good_op))
    check("error:" + name)(run_error)

# ---- special values: IEEE and TF's conventions, exactly ------------------
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

def special(op, vals):
    kind = "binary" if len(vals) == 2 else "unary"
    if op == "ReluGrad":
        kind = "grad"
    args = [np.array(v, dtype=F) for v in vals]
    with np.errstate(all="ignore"):
        ref = REF[op](*[a.astype(LD) for a in args])
    rep = versus_ref(op_fn(kind, op, None), *args, ref=ref, bound=0.0)
    # zeros carry the reference's sign (IEEE: sqrt(-0) = -0; TF's Relu keeps
    # -0 as max(x, 0) with x on ties)
    with tf.device(SIMDEV):
        got = op_fn(kind, op, None)(*[tf.constant(a) for a in args]).numpy()
    z = ref == 0
    rep["zero_signs_ok"] = bool((np.signbit(got[z]) == np.signbit(ref[z])).all())
    return rep

for op, vals in SPECIAL_INPUTS.items():
    check("special:" + op)(lambda: special(op, vals))

I64 = np.iinfo(np.int64)
def special_i64(kind, op, *vals):
    args = [np.array(v, dtype=np.int64) for v in vals]
    with np.errstate(over="ignore"):
        ref = REF[op](*args)
    return dict(versus_ref(op_fn(kind, op, None), *args, ref=ref, bound=0.0),
                zero_signs_ok=True)
check("special:AddV2:int64-wrap")(lambda: special_i64(
    "binary", "AddV2", [I64.max, I64.min, -1], [1, -1, I64.min]))
check("special:Neg:int64-min")(lambda: special_i64(
    "unary", "Neg", [I64.min, 0, I64.max]))

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
def test_vs_reference(cw, name):
    assert_vs_ref(cw.data(name), name)


@pytest.mark.parametrize("error", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_inputs(cw, error):
    name, op, key = error[0], error[2], error[6]
    assert_error_like_cpu(cw.data("error:" + name), op, key)


@pytest.mark.parametrize("name", SPECIALS)
def test_special_values(cw, name):
    d = cw.data("special:" + name)
    assert_vs_ref(d, name)
    assert d["zero_signs_ok"], f"signs of zeros differ from the reference: {d}"


@pytest.mark.parametrize("name", ["BiasAddGrad:NHWC", "BiasAddGrad:NCHW",
                                  "AddV2:mixed"])
def test_deterministic(cw, name):
    d = cw.data("determinism:" + name)
    assert d["equal"], f"two runs differ: {d}"


def test_clean_exit(cw):
    cw.assert_clean_exit()
