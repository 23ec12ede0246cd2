"""GatherV2, OneHot, ArgMax, ArgMin, UnsortedSegmentSum, Split, SplitV and
Unpack on SIMDEV against NumPy and TF's CPU kernels (soft placement off),
in one subprocess.

Data movement (GatherV2 with batch_dims, OneHot, Split, SplitV, Unpack) is
compared bit for bit with NumPy's take/where/split on random bit patterns;
ArgMax/ArgMin exactly with NumPy's argmax/argmin (first index on ties; no
NaN in the data, see gather.c); UnsortedSegmentSum within a summation bound
of a float64 reference (np.add.at). TF CPU is held to the same references.
Bad inputs - an out-of-range gather index included, which TF's GPU kernel
would zero-fill - raise the kernel's own error with TF CPU's class and
wording.
"""

import pytest

from conftest import assert_error_like_cpu, error_rows, assert_sweep

SCRIPT = r'''
import ml_dtypes
import numpy as np
import tensorflow as tf
from childlib import SIM, check_errors, collect, npt, rand, same, seed

tf.config.set_soft_device_placement(False)
rng = seed(1331)
R = tf.raw_ops
MOVE = ["float32", "float64", "half", "bfloat16", "int64", "uint8", "bool",
        "int8", "int16", "complex64"]

@check("registered")
def _():
    from tensorflow.python.framework import kernels
    out = {}
    for op in ("GatherV2", "OneHot", "ArgMax", "ArgMin", "UnsortedSegmentSum",
               "Split", "SplitV", "Unpack"):
        types = set()
        for k in kernels.get_registered_kernels_for_op(op).kernel:
            if k.device_type != "SIMDEV":
                continue
            types |= {tf.as_dtype(t).name for c in k.constraint
                      if c.name in ("T", "Tparams") for t in c.allowed_values.list.type}
        out[op] = sorted(types)
    return out

# ---- GatherV2 -----------------------------------------------------------------
def np_gather(x, idx, axis, bd):
    if bd == 0:
        return np.take(x, idx, axis=axis)
    return np.stack([np_gather(x[i], idx[i], axis - 1, bd - 1) for i in range(x.shape[0])]) \
        if x.shape[0] else np.zeros(x.shape[:axis] + idx.shape[bd:] + x.shape[axis + 1:], x.dtype)

GATHERS = [([5], [3], 0, 0), ([5, 3], [2, 0, 4, 4], 0, 0), ([5, 3], [[1, 2], [0, 0]], 1, 0),
           ([2, 3, 4], [3, 0], -1, 0), ([4, 3], [], 0, 0), ([4, 0], [1, 3], 0, 0),
           ([3, 4, 2], [[0, 3], [1, 1], [2, 0]], 1, 1), ([2, 3, 4], [[2, 2, 0], [1, 0, 1]], 2, 1),
           ([5], 2, 0, 0)]

@check("gather")
def _():
    cases = []
    for t in MOVE:
        for sh, idx, axis, bd in GATHERS:
            for it in (np.int32, np.int64):
                x = rand(t, sh)
                ii = np.array(idx, it).reshape(np.shape(idx))
                cases.append((f"{t} {sh} {idx} axis={axis} bd={bd} {it.__name__}",
                              lambda x, ii, axis=axis, bd=bd: tf.gather(x, ii, axis=axis, batch_dims=bd),
                              (x, ii), np_gather(x, ii, axis % len(sh), bd)))
    x = rand("float32", [5000, 64])
    ii = rng.integers(0, 5000, 3000).astype(np.int32)
    cases.append(("big", lambda x, i: tf.gather(x, i), (x, ii), np.take(x, ii, axis=0)))
    return collect(cases)

# ---- OneHot ----------------------------------------------------------------------
def np_onehot(idx, depth, on, off, axis):
    idx = np.asarray(idx).astype(np.int64)
    eq = idx[..., None] == np.arange(depth)
    out = np.where(eq, on, off)
    if axis != -1:
        out = np.moveaxis(out, -1, axis)
    return out

@check("onehot")
def _():
    cases = []
    for t in MOVE:
        for idx, depth, axis in [([0, 2, 5, -1], 4, -1), ([[1, 0], [3, 3]], 3, 0),
                                 ([[1, 0], [3, 2]], 4, 1), (2, 3, -1), ([], 2, -1), ([1, 2], 0, -1)]:
            for it in (np.uint8, np.int32, np.int64):
                if it == np.uint8 and np.min(idx, initial=0) < 0:
                    continue
                ii = np.array(idx, it)
                on, off = rand(t, []), rand(t, [])
                cases.append((f"{t} {idx} {depth} {axis} {it.__name__}",
                              lambda ii, on, off, depth=depth, axis=axis: tf.one_hot(
                                  ii, depth, on_value=on, off_value=off, axis=axis),
                              (ii, on, off), np_onehot(ii, depth, on, off, axis)))
    return collect(cases)

# ---- ArgMax, ArgMin ---------------------------------------------------------------
@check("argmax")
def _():
    cases = []
    for t in ("float32", "float64", "half", "bfloat16", "int64"):
        for sh, axis in [([7], 0), ([3, 5], 0), ([3, 5], 1), ([2, 3, 4], -2), ([4, 1], 1),
                         ([0, 3], 1)]:
            x = rng.integers(-4, 5, sh).astype(npt(t))  # small range: ties
            for ot in (tf.int32, tf.int64):
                for name, fn, ref in (("max", tf.math.argmax, np.argmax), ("min", tf.math.argmin, np.argmin)):
                    cases.append((f"arg{name} {t} {sh} {axis} {ot.name}",
                                  lambda x, fn=fn, axis=axis, ot=ot: fn(x, axis=axis, output_type=ot),
                                  (x,), np.asarray(ref(x, axis=axis)).astype(ot.as_numpy_dtype)))
    x = rng.standard_normal([300, 1000]).astype(np.float32)
    cases.append(("big", lambda x: tf.math.argmax(x, axis=1), (x,), np.argmax(x, 1)))
    return collect(cases)

# ---- UnsortedSegmentSum ---------------------------------------------------------------
@check("segment_sum")
def _():
    reps = {}
    for t in ("float32", "float64", "int64"):
        for sh, idsh, segs in [([6], [6], 4), ([6, 3], [6], 5), ([4, 3, 2], [4, 3], 3),
                               ([5, 2], [5], 0), ([0, 3], [0], 2), ([2000, 33], [2000], 70)]:
            ids = rng.integers(-1, max(segs, 1), idsh).astype(np.int32)
            if segs == 0:
                ids[:] = -1
            x = (rng.standard_normal(sh) * 10).astype(t) if t != "int64" else \
                rng.integers(-100, 100, sh).astype(np.int64)
            ref = np.zeros((segs,) + tuple(sh[len(idsh):]), np.float64)
            absr = np.zeros_like(ref)
            keep = ids >= 0
            np.add.at(ref, ids[keep], x[keep].astype(np.float64))
            np.add.at(absr, ids[keep], np.abs(x[keep].astype(np.float64)))
            n = max(int(np.bincount(ids[keep].ravel(), minlength=1).max(initial=1)), 1)
            bound = (gamma(n, t) * absr + tiny(t)) if t != "int64" else 0 * absr
            for it in (np.int32, np.int64):
                rep = guarded(lambda x=x, ids=ids.astype(it), segs=segs, ref=ref, bound=bound:
                              versus_ref(lambda x, i: tf.math.unsorted_segment_sum(x, i, segs),
                                         x, ids, ref=ref, bound=bound, dtype=x.dtype))
                reps[f"{t} {sh} {segs} {it.__name__}"] = rep
    return sweep_report(reps)

# ---- Split, SplitV, Unpack ------------------------------------------------------------------
@check("split")
def _():
    cases = []
    for t in MOVE + ["int32"]:
        for sh, axis, n in [([6], 0, 3), ([4, 6], 1, 2), ([4, 6], -2, 4), ([2, 3, 4], 2, 1),
                            ([0, 4], 1, 2), ([3, 4], 0, 3)]:
            x = rand(t, sh)
            if t != "int32":
                cases.append((f"Split {t} {sh} {axis} {n}",
                              lambda x, axis=axis, n=n: tf.split(x, n, axis=axis),
                              (x,), np.split(x, n, axis=axis)))
        for sh, axis, sizes in [([6], 0, [1, 2, 3]), ([4, 6], 1, [2, -1, 0]), ([4, 6], 0, [4]),
                                ([2, 5, 3], -2, [-1, 4])]:
            x = rand(t, sh)
            ax = axis % len(sh)
            full = [s if s >= 0 else sh[ax] - sum(v for v in sizes if v >= 0) for s in sizes]
            if t != "int32":
                cases.append((f"SplitV {t} {sh} {axis} {sizes}",
                              lambda x, axis=axis, sizes=sizes: tf.split(x, sizes, axis=axis),
                              (x,), np.split(x, np.cumsum(full)[:-1], axis=ax)))
        if t in ("int64", "int32"):
            continue  # TF serves Unpack int32/int64 with its DEFAULT kernels
        for sh, axis in [([3], 0), ([2, 3], 1), ([2, 3, 4], -1), ([1, 0], 0), ([4, 2], -2)]:
            x = rand(t, sh)
            cases.append((f"Unpack {t} {sh} {axis}",
                          lambda x, axis=axis: tf.unstack(x, axis=axis),
                          (x,), [np.take(x, i, axis=axis) for i in range(sh[axis])]))
    x = rand("float32", [64, 3000])
    cases.append(("big", lambda x: tf.split(x, 4, axis=1), (x,), np.split(x, 4, axis=1)))
    return collect(cases)

# ---- errors ---------------------------------------------------------------------------------
f32 = lambda *sh: rand("float32", sh)
i32 = lambda v: np.array(v, np.int32)
ERRORS = [
    ("GatherV2 index", lambda x, i: tf.gather(x, i), [f32(5, 2), i32([[1, 2], [7, 0]])], "indices[1,0] = 7 is not in [0, 5)"),
    ("GatherV2 negative", lambda x, i: tf.gather(x, i), [f32(5), i32([-1])], "indices[0] = -1 is not in [0, 5)"),
    ("GatherV2 batch_dims", lambda x, i: tf.gather(x, i, axis=1, batch_dims=1), [f32(3, 2), i32([[0], [1]])], "params.shape[0]: 3 should be equal to indices.shape[0]: 2"),
    ("OneHot depth", lambda i: tf.one_hot(i, -1), [i32([0, 1])], "depth must be non-negative, got: -1"),
    ("OneHot axis", lambda i: tf.one_hot(i, 3, axis=3), [i32([0, 1])], "Expected axis to be -1 or between [0, 2).  But received: 3"),
    ("ArgMax dim", lambda x: tf.math.argmax(x, axis=2), [f32(2, 3)], "Expected dimension in the range [-2, 2), but got 2"),
    ("ArgMin empty", lambda x: tf.math.argmin(x, axis=1), [f32(2, 0)], "Reduction axis 1 is empty in shape [2,0]"),
    ("UnsortedSegmentSum id", lambda x, i: tf.math.unsorted_segment_sum(x, i, 3), [f32(4), i32([0, 3, 1, 1])], "segment_ids[1] = 3 is out of range [0, 3)"),
    ("UnsortedSegmentSum shape", lambda x, i: tf.math.unsorted_segment_sum(x, i, 3), [f32(4), i32([0, 1])], "does not start with segment_ids.shape"),
    ("Split divide", lambda x: tf.split(x, 4, axis=1), [f32(2, 6)], "Number of ways to split should evenly divide the split dimension"),
    ("Split dim", lambda x: R.Split(axis=2, value=x, num_split=2), [f32(2, 6)], "-input rank(-2) <= split_dim < input rank (2), but got 2"),
    ("SplitV sizes", lambda x: tf.split(x, [2, 5], axis=1), [f32(2, 6)], "Determined shape must either match input shape along split_dim exactly"),
    ("SplitV two -1", lambda x: tf.split(x, [-1, -1], axis=1), [f32(2, 6)], "There can only be one -1 in the input."),
    ("Unpack num", lambda x: R.Unpack(value=x, num=3, axis=0), [f32(2, 6)], "Input shape axis 0 must equal 3, got shape [2,6]"),
]

def after():
    x = rand("float32", [5, 3])
    return same(lambda t: tf.gather(t, [4, 0]), (x,), x[[4, 0]])[0] == ""

check_errors(ERRORS, after)

@check("tf.function")
def _():
    @tf.function
    def f(x, i):
        with tf.device(SIM):
            a, b = tf.split(tf.gather(x, i), 2, axis=1)
            return tf.one_hot(tf.math.argmax(a + b, axis=1), 4)
    x = rng.standard_normal([6, 4]).astype(np.float32)
    i = np.array([5, 1, 1], np.int32)
    g = x[i]
    ref = np.eye(4, dtype=np.float32)[np.argmax(g[:, :2] + g[:, 2:], 1)]
    return {"problem": same(f, (x, i), ref)}
'''


@pytest.fixture(scope="module")
def g(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("name", ["gather", "onehot", "argmax", "split"])
def test_matches_reference(g, name):
    d = g.data(name)
    assert d["count"] > 0
    assert d["nbad"] == 0, f"{d['nbad']} of {d['count']} cases differ: {d['bad']}"
    assert d["ncpu_bad"] == 0, f"TF CPU differs on {d['ncpu_bad']}: {d['cpu_bad']}"


def test_segment_sum(g):
    assert_sweep(g.data("segment_sum"), min_cases=30)


MOVE = ["bfloat16", "bool", "complex64", "float16", "float32", "float64",
        "int16", "int64", "int8", "uint8"]


@pytest.mark.registry
@pytest.mark.parametrize("op,types", [
    ("GatherV2", MOVE), ("OneHot", MOVE), ("Split", MOVE), ("SplitV", MOVE),
    ("Unpack", [t for t in MOVE if t != "int64"]),
    ("ArgMax", ["bfloat16", "float16", "float32", "float64", "int64"]),
    ("ArgMin", ["bfloat16", "float16", "float32", "float64", "int64"]),
    ("UnsortedSegmentSum", ["float32", "float64", "int64"])])
def test_registered_types(g, op, types):
    assert g.data("registered")[op] == types


def error_cases():
    return error_rows(SCRIPT)


@pytest.mark.parametrize("name,key", error_cases())
def test_error_from_kernel(g, name, key):
    assert_error_like_cpu(g.data("error " + name), name.split()[0], key)


def test_error_names_found():
    assert len(error_cases()) == 14


def test_graph_mode(g):
    assert g.data("tf.function")["problem"] == ["", ""]


def test_clean_exit(g):
    g.assert_clean_exit()
