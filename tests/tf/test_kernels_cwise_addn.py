"""AddN and the legacy Add on SIMDEV against NumPy and TF's CPU kernels.

Covers src/kernels/math/cwise_addn.c (AddN) and the legacy Add of cwise_binary.c
(the AddV2 loops under TF's old name). One subprocess, soft placement off.

AddN: N = 1, 2, 3, 9 (more than TF CPU's groups of eight) and 40 inputs,
shapes scalar, empty, odd and a large one split over threads; float32,
float64 (reference: NumPy in float64 / long double, bound gamma(N - 1) of
the terms' absolute sum, conftest.sum_bound) and int64 (NumPy's wrapping
sum, exact). Add: broadcasting cases, one rounding (float), exact (int64).
Bad inputs: AddN with unequal shapes, Add with incompatible broadcasts.
"""
import pytest

from conftest import assert_error_like_cpu, assert_vs_ref

ADDN = [(n, dt, shape) for dt in ("float32", "float64", "int64")
        for n, shape in [(1, [5]), (2, [7, 13]), (3, []), (3, [0, 4]),
                         (9, [3, 5, 7]), (40, [33])]]
ADDN += [(4, "float32", [1 << 20])]
ADDN_NAMES = [f"AddN:{dt}:{n}x{shape}" for n, dt, shape in ADDN]
ADD = [(dt, sx, sy) for dt in ("float32", "float64", "int64")
       for sx, sy in [([7, 13], [7, 13]), ([], [5, 9]), ([6, 11], [6, 1]),
                      ([2, 1, 5], [3, 1]), ([0, 4], [4])]]
ADD_NAMES = [f"Add:{dt}:{sx}+{sy}" for dt, sx, sy in ADD]
ERRORS = [
    ("AddN:shape", "AddN", "float32", [[2, 3], [2, 3], [3, 2]],
     "Inputs to operation AddN of type AddN must have the same size and "
     "shape.  Input 0: [2,3] != input 2: [3,2]"),
    ("AddN:int64-shape", "AddN", "int64", [[4], [5]],
     "Inputs to operation AddN of type AddN must have the same size and "
     "shape.  Input 0: [4] != input 1: [5]"),
    ("Add:incompatible", "Add", "float32", [[2, 3], [4]],
     "Incompatible shapes: [2,3] vs. [4]"),
    ("Add:int64-incompatible", "Add", "int64", [[2, 3], [2]],
     "Incompatible shapes: [2,3] vs. [2]"),
]

SCRIPT = f"ADDN = {ADDN!r}\nADD = {ADD!r}\nERRORS = {ERRORS!r}\n" + r"""
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
raw = tf.raw_ops
LD = np.longdouble
rng = np.random.default_rng(13)

def data(dt, shape):
    if dt == "int64":
        return rng.integers(-2**63, 2**63 - 1, shape, dtype=np.int64, endpoint=True)
    return rng.standard_normal(shape).astype(dt)

def addn(*xs):
    return raw.AddN(inputs=list(xs))

for n, dt, shape in ADDN:
    def run():
        xs = [data(dt, shape) for _ in range(n)]
        if dt == "int64":
            with np.errstate(over="ignore"):
                ref = np.zeros(shape, np.int64)
                for x in xs:
                    ref = ref + x
            return versus_ref(addn, *xs, ref=ref, bound=0.0)
        la = [x.astype(LD if dt == "float64" else np.float64) for x in xs]
        ref = sum(la[1:], la[0])
        a = sum([np.abs(x) for x in la[1:]], np.abs(la[0]))
        return versus_ref(addn, *xs, ref=ref, bound=sum_bound(a, max(n - 1, 1), dt))
    check(f"AddN:{dt}:{n}x{shape}")(run)

def add(x, y):
    return raw.Add(x=x, y=y)

for dt, sx, sy in ADD:
    def run():
        x, y = data(dt, sx), data(dt, sy)
        if dt == "int64":
            with np.errstate(over="ignore"):
                return versus_ref(add, x, y, ref=x + y, bound=0.0)
        r = LD if dt == "float64" else np.float64
        ref = x.astype(r) + y.astype(r)
        return versus_ref(add, x, y, ref=ref,
                          bound=unit_roundoff(dt) * np.abs(ref) + tiny(dt))
    check(f"Add:{dt}:{sx}+{sy}")(run)

def good_op():
    a = np.arange(6, dtype=np.float32)
    with tf.device("/device:SIMDEV:0"):
        r = raw.AddN(inputs=[tf.constant(a)] * 3)
    return "SIMDEV:0" in r.device and bool(np.array_equal(r.numpy(), 3 * a))

for name, op, dt, shapes, key in ERRORS:
    def run_error():
        fn = addn if op == "AddN" else add
        args = [np.ones(s, dtype=dt) for s in shapes]
        return dict(error_pair(fn, *args), after=after_ok(good_op))
    check("error:" + name)(run_error)
"""


@pytest.fixture(scope="module")
def cw(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("name", ADDN_NAMES + ADD_NAMES)
def test_vs_reference(cw, name):
    assert_vs_ref(cw.data(name), name)


@pytest.mark.parametrize("error", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_inputs(cw, error):
    assert_error_like_cpu(cw.data("error:" + error[0]), error[1], error[4])


def test_clean_exit(cw):
    cw.assert_clean_exit()
