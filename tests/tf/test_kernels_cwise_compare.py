"""Comparisons, logical ops, FloorDiv/FloorMod and Select/SelectV2 on SIMDEV
against NumPy and TF's CPU kernels.

Covers src/kernels/math/cwise_compare.c (Greater, GreaterEqual, Less, LessEqual,
Equal, NotEqual with incompatible_shape_error both ways, LogicalAnd,
LogicalOr, LogicalNot, FloorDiv, FloorMod) and cwise_select.c (Select,
SelectV2). One subprocess, soft placement off, small shapes over the
driver's broadcasting paths (same, scalar, row, mixed rank, empty) and one
large enough to split over threads.

All results are exact except float FloorMod (the remainder is exact, the
move to y's sign is one rounding: u |ref|) and float FloorDiv (floor of the
correctly rounded quotient, so the reference floors NumPy's quotient in the
same dtype). Float inputs include NaN and ties; integer inputs negative
values on both sides. Bad inputs: incompatible shapes, an integer zero
divisor (TF CPU: InvalidArgument "Integer division by zero"), Select's
shape rules.
"""
import pytest

from conftest import assert_error_like_cpu, assert_vs_ref

CMP = ["Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual"]
SHAPES = {"same": ([7, 13], [7, 13]), "scalar-y": ([5, 9], []),
          "row": ([6, 11], [11]), "mixed": ([2, 1, 5], [3, 1]),
          "zero": ([0, 4], [4]), "big": ([300, 257], [257])}
CASES = [(op, dt, s) for op in CMP + ["FloorDiv", "FloorMod"]
         for dt in ("float32", "float64", "int64") for s in SHAPES]
CASES += [(op, "bool", s) for op in ("Equal", "NotEqual", "LogicalAnd",
                                     "LogicalOr") for s in SHAPES]
CASES += [("LogicalNot", "bool", s) for s in ("same", "zero", "big")]
CASES += [(op, "float32", "mismatch") for op in ("Equal", "NotEqual")]
SEL = {  # condition, t, e shapes
    "SelectV2": {"same": ([4, 5], [4, 5], [4, 5]), "cond-row": ([5], [4, 5], [4, 5]),
                 "scalar-e": ([4, 5], [4, 5], []), "mixed": ([3, 1, 1], [1, 4, 1], [5]),
                 "scalar-cond": ([], [2, 3], [2, 3]), "zero": ([0, 3], [3], []),
                 "big": ([300, 1], [300, 257], [])},
    "Select": {"same": ([4, 5], [4, 5], [4, 5]), "scalar-cond": ([], [3, 4], [3, 4]),
               "batch": ([4], [4, 3, 2], [4, 3, 2]), "vector": ([6], [6], [6]),
               "big": ([300], [300, 257], [300, 257])},
}
CASES += [(op, dt, s) for op in SEL for dt in ("float32", "float64", "int64", "int32", "bool")
          for s in SEL[op]]
NAMES = [f"{op}:{dt}:{s}" for op, dt, s in CASES]

DIV0 = "Integer division by zero"
ERRORS = [  # name, op, dtype, shapes, key
    ("Greater:incompatible", "Greater", "float32", [[2, 3], [4]], "Incompatible shapes: [2,3] vs. [4]"),
    ("Equal:incompatible", "Equal", "int64", [[2, 3], [4]], "Incompatible shapes: [2,3] vs. [4]"),
    ("LogicalAnd:incompatible", "LogicalAnd", "bool", [[2, 3], [4]], "Incompatible shapes: [2,3] vs. [4]"),
    ("FloorMod:incompatible", "FloorMod", "float32", [[2, 3], [4]], "Incompatible shapes: [2,3] vs. [4]"),
    ("FloorDiv:int64-zero", "FloorDiv", "int64", [[2, 3], [3]], DIV0),
    ("FloorMod:int64-zero", "FloorMod", "int64", [[2, 3], []], DIV0),
    ("SelectV2:incompatible", "SelectV2", "float32", [[2, 3], [4], [2, 3]],
     "condition [2,3], then [4], and else [2,3] must be broadcastable"),
    ("Select:then-else", "Select", "float32", [[2, 3], [2, 3], [3, 2]],
     "Inputs to operation Select of type Select must have the same size and "
     "shape.  Input 0: [2,3] != input 2: [3,2]"),
    ("Select:cond-then", "Select", "float32", [[3, 2], [2, 3], [2, 3]],
     "Inputs to operation Select of type Select must have the same size and "
     "shape.  Input 0: [3,2] != input 1: [2,3]"),
    ("Select:scalar-then-else", "Select", "float32", [[], [2, 3], [3, 2]],
     "'then' and 'else' must have the same size.  but received: [2,3] vs. [3,2]"),
    ("Select:batch-then-else", "Select", "int64", [[2], [2, 3], [2, 2]],
     "'then' and 'else' must have the same size.  but received: [2,3] vs. [2,2]"),
    ("Select:batch", "Select", "int64", [[3], [2, 3], [2, 3]],
     "Number of batches of 'then' must match size of 'cond', but saw: 2 vs. 3"),
]

SCRIPT = f"CASES = {CASES!r}\nSHAPES = {SHAPES!r}\nSEL = {SEL!r}\nERRORS = {ERRORS!r}\n" + r"""
import zlib
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
raw = tf.raw_ops
LD = np.longdouble
REF = {"Greater": np.greater, "GreaterEqual": np.greater_equal, "Less": np.less,
       "LessEqual": np.less_equal, "Equal": np.equal, "NotEqual": np.not_equal,
       "LogicalAnd": np.logical_and, "LogicalOr": np.logical_or}

def fn_for(op, shape_error=True):
    if op in ("Equal", "NotEqual"):
        return lambda x, y: getattr(raw, op)(x=x, y=y, incompatible_shape_error=shape_error)
    if op == "LogicalNot":
        return lambda x: raw.LogicalNot(x=x)
    if op == "Select":
        return lambda c, t, e: raw.Select(condition=c, x=t, y=e)
    if op == "SelectV2":
        return lambda c, t, e: raw.SelectV2(condition=c, t=t, e=e)
    return lambda x, y: getattr(raw, op)(x=x, y=y)

def data(dt, shape, rng, divisor=False):
    if dt == "bool":
        return rng.uniform(size=shape) < 0.5
    if dt in ("int64", "int32"):
        x = rng.integers(-9, 10, shape).astype(dt)
        if divisor:
            x = np.where(x == 0, 3, x).astype(dt)
        return x
    x = np.round(rng.standard_normal(shape) * 4, 1)   # ties between x and y
    if divisor:
        return np.where(x == 0, 0.5, x).astype(dt)
    x = np.where(rng.uniform(size=shape) < 0.05, np.nan, x)
    return x.astype(dt)

def run_case(op, dt, sname):
    rng = np.random.default_rng(zlib.crc32(f"{op}:{dt}:{sname}".encode()))
    if op in ("Select", "SelectV2"):
        cs, ts, es = SEL[op][sname]
        c, t, e = data("bool", cs, rng), data(dt, ts, rng), data(dt, es, rng)
        if op == "SelectV2" or c.ndim == 0 or c.shape == t.shape:
            ref = np.where(c, t, e)
        else:
            ref = np.where(c.reshape([-1] + [1] * (t.ndim - 1)), t, e)
        return versus_ref(fn_for(op), c, t, e, ref=ref, bound=0.0, dtype=dt)
    if op == "LogicalNot":
        x = data("bool", SHAPES[sname][0], rng)
        return versus_ref(fn_for(op), x, ref=~x, bound=0.0)
    if sname == "mismatch":
        x, y = data(dt, [2, 3], rng), data(dt, [4], rng)
        return versus_ref(fn_for(op, False), x, y, ref=np.array(op == "NotEqual"),
                          bound=0.0, dtype=bool)
    xs, ys = SHAPES[sname]
    x = data(dt, xs, rng)
    y = data(dt, ys, rng, divisor=op in ("FloorDiv", "FloorMod"))
    if op in REF:
        return versus_ref(fn_for(op), x, y, ref=REF[op](x, y), bound=0.0, dtype=bool)
    if dt == "int64":
        f = np.floor_divide if op == "FloorDiv" else np.mod
        return versus_ref(fn_for(op), x, y, ref=f(x, y), bound=0.0)
    with np.errstate(all="ignore"):
        if op == "FloorDiv":   # floor of the quotient rounded to dt
            return versus_ref(fn_for(op), x, y, ref=np.floor(x / y), bound=0.0)
        lx, ly = np.broadcast_arrays(x.astype(LD), y.astype(LD))
        r = np.fmod(lx, ly)                       # exact
        ref = np.where((r != 0) & ((r < 0) != (ly < 0)), r + ly, r)
    return versus_ref(fn_for(op), x, y, ref=ref,
                      bound=unit_roundoff(dt) * np.abs(ref) + tiny(dt))

for op, dt, sname in CASES:
    check(f"{op}:{dt}:{sname}")(lambda: run_case(op, dt, sname))

def good_op():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    with tf.device("/device:SIMDEV:0"):
        r = raw.Greater(x=tf.constant(a), y=tf.constant(np.float32(2)))
    return "SIMDEV:0" in r.device and r.numpy().tolist() == [False, False, True]

for name, op, dt, shapes, key in ERRORS:
    def run_error():
        if op in ("Select", "SelectV2"):
            args = [np.ones(shapes[0], bool)] + [np.ones(s, dt) for s in shapes[1:]]
        elif key == DIV0:
            args = [np.ones(shapes[0], dt), np.array(np.arange(np.prod(shapes[1], dtype=int)) - np.prod(shapes[1], dtype=int) // 2, dt).reshape(shapes[1])]
        else:
            args = [np.ones(s, dt) for s in shapes]
        return dict(error_pair(fn_for(op), *args), after=after_ok(good_op))
    check("error:" + name)(run_error)
""".replace("DIV0", repr(DIV0))


@pytest.fixture(scope="module")
def cmp(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("name", NAMES)
def test_vs_reference(cmp, name):
    assert_vs_ref(cmp.data(name), name)


@pytest.mark.parametrize("error", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_inputs(cmp, error):
    assert_error_like_cpu(cmp.data("error:" + error[0]), error[1], error[4])


def test_clean_exit(cmp):
    cmp.assert_clean_exit()
