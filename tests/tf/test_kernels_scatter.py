"""ScatterNd, TensorScatterUpdate and TensorScatterAdd on SIMDEV against
NumPy and TF's CPU kernels (soft placement off), in one subprocess.

References: zeros or the input tensor, updates written (np.add.at for the
adding ops, so duplicate indices sum; plain assignment for
TensorScatterUpdate, tested without duplicates, where TF leaves the winner
unspecified). Float results within a summation bound, integers exactly;
TensorScatterUpdate bit for bit on random bit patterns. An out-of-range
index raises TF CPU's error.
"""

import pytest

from conftest import assert_error_like_cpu, error_rows, assert_sweep

SCRIPT = r'''
import ml_dtypes
import numpy as np
import tensorflow as tf
from childlib import CPU, SIM, check_errors, npt, rand, seed

tf.config.set_soft_device_placement(False)
rng = seed(77)
R = tf.raw_ops

@check("registered")
def _():
    from tensorflow.python.framework import kernels
    out = {}
    for op in ("ScatterNd", "TensorScatterUpdate", "TensorScatterAdd"):
        types = set()
        for k in kernels.get_registered_kernels_for_op(op).kernel:
            if k.device_type == "SIMDEV":
                types |= {tf.as_dtype(t).name for c in k.constraint if c.name == "T"
                          for t in c.allowed_values.list.type}
        out[op] = sorted(types)
    return out

# (output shape, indices) - indices may repeat for the adding ops
CASES = [([6], [[1], [4], [1]]), ([4, 3], [[0], [3], [0]]), ([4, 3], [[1, 2], [3, 0], [1, 2]]),
         ([2, 3, 4], [[[1, 0]], [[0, 2]]]), ([5], np.zeros([0, 1], int)), ([3, 0], [[1], [2]]),
         ([40, 50], [[i % 40] for i in range(300)])]

def upd_shape(shape, idx):
    idx = np.asarray(idx)
    return idx.shape[:-1] + tuple(shape[idx.shape[-1]:])

def np_add(base, idx, upd):
    out = base.astype(np.float64).copy() if base.dtype != np.int64 else base.copy()
    idx = np.asarray(idx)
    rows = idx.reshape(-1, idx.shape[-1])
    u = upd.reshape((rows.shape[0],) + base.shape[idx.shape[-1]:])
    for r, v in zip(rows, u):
        out[tuple(r)] += v
    return out

@check("add")
def _():
    reps = {}
    for t in ("float32", "float64", "int64"):
        for c, (shape, idx) in enumerate(CASES):
            if 0 in shape:
                continue  # TF refuses indices into an empty output (error test below)
            for it in (np.int32, np.int64):
                ii = np.asarray(idx, it).reshape(np.shape(idx))
                us = upd_shape(shape, ii)
                upd = rng.standard_normal(us).astype(t) if t != "int64" else rng.integers(-9, 9, us)
                base = rng.standard_normal(shape).astype(t) if t != "int64" else rng.integers(-9, 9, shape)
                n = max(len(ii.reshape(-1, ii.shape[-1])), 1) + 1
                for name, fn, b in (("ScatterNd", lambda i, u, shape=shape: tf.scatter_nd(i, u, shape), np.zeros(shape, npt(t))),
                                    ("TensorScatterAdd", None, base)):
                    ref = np_add(b, ii, upd)
                    absr = np_add(np.abs(b), ii, np.abs(upd)) if t != "int64" else 0 * ref
                    bound = gamma(n, t) * np.abs(absr) + tiny(t) if t != "int64" else 0 * ref
                    if fn is None:
                        rep = guarded(lambda b=b, ii=ii, upd=upd, ref=ref, bound=bound: versus_ref(
                            lambda x, i, u: tf.tensor_scatter_nd_add(x, i, u), b, ii, upd,
                            ref=ref, bound=bound))
                    else:
                        rep = guarded(lambda fn=fn, ii=ii, upd=upd, ref=ref, bound=bound: versus_ref(
                            fn, ii, upd, ref=ref, bound=bound, dtype=upd.dtype))
                    reps[f"{name} {t} case {c} {shape} {it.__name__}"] = rep
    return sweep_report(reps)

@check("update")
def _():
    bad, count = [], 0
    for t in ("float32", "float64", "half", "bfloat16", "int64", "uint8", "bool", "int8",
              "int16", "complex64"):
        for shape, idx in [([6], [[1], [4]]), ([4, 3], [[3], [0]]), ([4, 3], [[1, 2], [3, 0]]),
                           ([2, 3, 4], [[[1, 0]], [[0, 2]]])]:
            ii = np.asarray(idx, np.int32)
            x, upd = rand(t, shape), rand(t, upd_shape(shape, ii))
            ref = x.copy()
            rows = ii.reshape(-1, ii.shape[-1])
            for r, v in zip(rows, upd.reshape((rows.shape[0],) + tuple(shape[ii.shape[-1]:]))):
                ref[tuple(r)] = v
            for dev in (SIM, CPU):
                count += 1
                with tf.device(dev):
                    y = tf.tensor_scatter_nd_update(tf.constant(x), ii, tf.constant(upd))
                e = raw_equal(y.numpy(), ref)
                if not e["equal"] or (dev == SIM and "SIMDEV" not in y.device):
                    bad.append(f"{dev} {t} {shape}: {e} {y.device}")
    return {"count": count, "bad": bad[:10]}

ERRORS = [
    ("ScatterNd empty", lambda i, u: tf.scatter_nd(i, u, [3, 0]), [np.array([[1], [2]], np.int32), np.ones([2, 0], np.float32)], "Indices and updates specified for empty output shape"),
    ("ScatterNd index", lambda i, u: tf.scatter_nd(i, u, [4]), [np.array([[1], [5]], np.int32), np.ones([2], np.float32)], "indices[1] = [5] does not index into shape [4]"),
    ("TensorScatterAdd index", lambda x, i, u: tf.tensor_scatter_nd_add(x, i, u), [np.ones([3, 2], np.float32), np.array([[0, 1], [-1, 0]], np.int32), np.ones([2], np.float32)], "indices[1] = [-1, 0] does not index into shape [3,2]"),
    ("TensorScatterUpdate index", lambda x, i, u: tf.tensor_scatter_nd_update(x, i, u), [np.ones([3], np.float32), np.array([[3]], np.int64), np.ones([1], np.float32)], "indices[0] = [3] does not index into shape [3]"),
]

def after():
    with tf.device(SIM):
        y = tf.scatter_nd([[1]], tf.constant([2.0]), [3])
    return y.numpy().tolist() == [0.0, 2.0, 0.0]

check_errors(ERRORS, after)
'''


@pytest.fixture(scope="module")
def sc(run_tf):
    return run_tf(SCRIPT, timeout=300)


def test_adding_ops(sc):
    assert_sweep(sc.data("add"), min_cases=72)


def test_update(sc):
    d = sc.data("update")
    assert d["count"] == 80 and not d["bad"], d


@pytest.mark.registry
@pytest.mark.parametrize("op,types", [
    ("ScatterNd", ["float32", "float64", "int64"]),
    ("TensorScatterAdd", ["float32", "float64", "int64"]),
    ("TensorScatterUpdate", ["bfloat16", "bool", "complex64", "float16", "float32",
                             "float64", "int16", "int64", "int8", "uint8"])])
def test_registered_types(sc, op, types):
    assert sc.data("registered")[op] == types


def error_cases():
    return error_rows(SCRIPT)


@pytest.mark.parametrize("name,key", error_cases())
def test_error_from_kernel(sc, name, key):
    assert_error_like_cpu(sc.data("error " + name), name.split()[0], key)


def test_error_names_found():
    assert len(error_cases()) == 4


def test_clean_exit(sc):
    sc.assert_clean_exit()
