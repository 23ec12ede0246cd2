"""Bit-exact kernel checks against NumPy (child side).

Imported by the TF children of the data-movement kernel tests
(test_kernels_gather.py, test_kernels_slice.py, test_kernels_misc.py,
test_kernels_scatter.py), never by pytest: it imports TensorFlow. The child
runs conftest's PRELUDE as __main__, which puts this folder on sys.path and
defines check, raw_equal, error_pair and after_ok, reused here.

A case is (label, fn, args, reference): fn runs on SIMDEV and on TF's CPU
with soft placement off (the script turns it off), args are NumPy arrays
(made tensors on the device first) or Python values, and the reference is
NumPy's result for the same operation (a list of them when fn returns
several tensors). Every output must equal its reference in dtype, shape and
bytes, and SIMDEV's must be on SIMDEV; TF CPU is held to the same
reference, reported apart.

Random data come from one generator per child: seed(n) makes it and
returns it, so the script's own draws and rand()'s share one stream. Not
thread-safe (NumPy generators are not); the children run their checks on
one thread.
"""
import numpy as np
import tensorflow as tf

from __main__ import after_ok, check, error_pair, raw_equal

SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"
BF16 = tf.bfloat16.as_numpy_dtype

_rng = None


def seed(n):
    """Makes the child's generator (seeded n) and returns it."""
    global _rng
    _rng = np.random.default_rng(n)
    return _rng


def npt(name):
    """The NumPy scalar type of a TF dtype name (bfloat16: ml_dtypes')."""
    return BF16 if name == "bfloat16" else np.dtype(name).type


def rand(name, shape):
    """Random bit patterns (floats: NaNs, infs and denormals included)."""
    shape = tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    if name == "bool":
        return (_rng.integers(0, 2, n) == 1).reshape(shape)
    dt = np.dtype(npt(name))
    return np.frombuffer(_rng.bytes(n * dt.itemsize), dtype=dt).reshape(shape).copy()


def run(dev, fn, args):
    """fn(*args) under tf.device(dev), NumPy arrays made tensors there
    first; fn's own result (a tensor or a list of them)."""
    with tf.device(dev):
        targs = [tf.constant(a) if isinstance(a, np.ndarray) else a for a in args]
        return fn(*targs)


def same(fn, args, refs):
    """("", "") if fn gives refs' bytes, dtype and shape on SIMDEV (and the
    results are on SIMDEV) and on CPU; else (SIMDEV problem, CPU problem).
    refs: one array, or a list of them for an fn that returns a list."""
    refs = refs if isinstance(refs, (list, tuple)) else [refs]

    def problem(out, who):
        outs = out if isinstance(out, (list, tuple)) else [out]
        if len(outs) != len(refs):
            return f"{who}: {len(outs)} outputs, want {len(refs)}"
        for t, r in zip(outs, refs):
            if who == "SIMDEV" and "SIMDEV:0" not in t.device:
                return f"result on {t.device}"
            e = raw_equal(t.numpy(), np.asarray(r))
            if not e["equal"]:
                return f"{who} differs from NumPy: {e}"
        return ""

    sim = problem(run(SIM, fn, args), "SIMDEV")
    try:
        cpu = problem(run(CPU, fn, args), "TF CPU")
    except Exception as e:
        cpu = f"TF CPU raised {type(e).__name__}: {str(e)[:300]}"
    return sim, cpu


def collect(cases):
    """Runs (label, fn, args, NumPy reference) cases; returns {"count",
    "bad", "nbad" (SIMDEV), "cpu_bad", "ncpu_bad" (TF CPU)}."""
    bad, cpu_bad = [], []
    for label, fn, args, ref in cases:
        try:
            p, c = same(fn, args, ref)
        except Exception as e:
            p, c = f"raised {type(e).__name__}: {str(e)[:300]}", ""
        if p:
            bad.append(f"{label}: {p}")
        if c:
            cpu_bad.append(f"{label}: {c}")
    return {"count": len(cases), "bad": bad[:20], "nbad": len(bad),
            "cpu_bad": cpu_bad[:20], "ncpu_bad": len(cpu_bad)}


def check_errors(errors, after):
    """One check "error <name>" per (name, fn, args, key) row of errors: fn
    on bad args on SIMDEV and on CPU (error_pair), then after() (a good op
    on SIMDEV; true if it gave the right result) must still succeed. The
    test side reads the rows back from the script's text (error_cases)."""
    for name, fn, args, _key in errors:
        @check("error " + name)
        def _(fn=fn, args=args):
            return dict(error_pair(fn, *args), after=after_ok(after))
