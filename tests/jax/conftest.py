"""Helpers for simdev's JAX tests (simdev.jax over libsimdev_xla.so).

These tests run JAX on CPU in the pytest process itself: libsimdev_xla.so
has no TensorFlow in it, and a JAX process must never load TensorFlow. The
`no_tensorflow` fixture (autouse, once per test module) asserts that
'tensorflow' is not in sys.modules before the module's first test and after
its last one, so every module proves it.

What is tested is the copy installed in this interpreter's site-packages
(`make install`), like tests/tf.

The pytest process runs with no SIMDEV_* variable: they are removed from
os.environ here, before anything loads the library (which reads them once,
when it creates its device), so that a developer's setting cannot change
what is tested. Tests that need a setting (SIMDEV_SYNC=1, a bad or tiny
SIMDEV_MEMORY_MB) run a script in a fresh process (`run_py`), with exactly
the SIMDEV_* variables they give.

float64 tests need jax_enable_x64, switched on here for the whole process
(float32 inputs stay float32: the tests give every dtype explicitly).

Error bounds (`assert_close`): results are compared with the jnp / lax
reference computed in the same dtype, so both sides carry rounding errors.
For a sum of k products each side is within gamma_k * (|a| @ |b|) of the
exact value (gamma_k = k u / (1 - k u), u the unit roundoff), so the two
are within 2 gamma_k (|a| @ |b|) of each other; the caller passes that
magnitude ("scale"). Never a tolerance picked to make a test pass.
"""
import json
import os
import subprocess
import sys
import textwrap

for _k in [k for k in os.environ if k.startswith("SIMDEV_")]:
    del os.environ[_k]

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")

CHECK_MARK = "@@SIMDEV_JAX@@ "


@pytest.fixture(scope="module", autouse=True)
def no_tensorflow():
    """No test module may import TensorFlow into the JAX process."""
    assert "tensorflow" not in sys.modules, "TensorFlow was imported before this module"
    yield
    assert "tensorflow" not in sys.modules, "TensorFlow was imported by this module"


@pytest.fixture(scope="session")
def sj():
    """simdev.jax, registered."""
    import simdev.jax as sj

    sj.register()
    return sj


def unit_roundoff(dtype):
    return float(np.finfo(np.dtype(dtype)).eps) / 2


def gamma(k, dtype):
    ku = k * unit_roundoff(dtype)
    assert ku < 0.5, "reduction too long for the bound"
    return ku / (1 - ku)


def assert_close(got, ref, scale, k, dtype, extra_ulps=0, what=""):
    """|got - ref| <= 2 gamma_k scale + extra_ulps u |ref| + tiny, elementwise
    (see the module docstring). scale >= 0 has ref's shape: the sum of the
    magnitudes of the terms (|a| @ |b| for a product)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, "%s: shape %s, reference %s" % (what, got.shape, ref.shape)
    u = unit_roundoff(dtype)
    tiny = float(np.finfo(np.dtype(dtype)).tiny)
    bound = (2 * gamma(max(k, 1), dtype) * np.asarray(scale, np.float64)
             + extra_ulps * u * np.abs(ref) + tiny)
    err = np.abs(got - ref)
    bad = err > bound
    assert np.all(np.isfinite(got)), "%s: non-finite result" % what
    if np.any(bad):
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        raise AssertionError(
            "%s: %d of %d elements out of bound; first at %s: got %r, ref %r, "
            "bound %r" % (what, int(bad.sum()), bad.size, i, got[i], ref[i], bound[i]))


def rand(rng, shape, dtype):
    """Uniform in [-1, 1) (relu's kink at 0 has measure zero)."""
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


def child_env(env=None):
    """This process's environment without SIMDEV_* (already removed at
    import), plus `env`."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("SIMDEV_")}
    child["JAX_PLATFORMS"] = "cpu"
    child.update(env or {})
    return child


# Prepended to every child script: check(name) runs a function at once and
# prints one line with its result or its exception (type and message), so
# each test asserts on its own check; the last line proves TF never loaded.
CHILD_PRELUDE = r'''
import json as _json, sys as _sys, atexit as _atexit
def _emit(rec):
    _sys.stdout.write(%(mark)r + _json.dumps(rec, default=repr) + "\n")
    _sys.stdout.flush()
def check(name):
    def run(fn):
        try:
            _emit({"name": name, "ok": True, "value": fn()})
        except BaseException as e:
            _emit({"name": name, "ok": False, "type": type(e).__name__,
                   "error": str(e)})
        return fn
    return run
@_atexit.register
def _tf_check():
    _emit({"name": "_no_tensorflow", "ok": True,
           "value": "tensorflow" not in _sys.modules})
''' % {"mark": CHECK_MARK}


class ChildRun:
    def __init__(self, proc, checks):
        self.proc = proc
        self.checks = checks

    def describe(self):
        return "exit %s\nstdout:\n%s\nstderr:\n%s" % (
            self.proc.returncode, self.proc.stdout[-3000:], self.proc.stderr[-3000:])

    def __getitem__(self, name):
        assert name in self.checks, "check %r did not report\n%s" % (name, self.describe())
        return self.checks[name]

    def value(self, name):
        rec = self[name]
        assert rec["ok"], "check %r raised %s: %s\n%s" % (
            name, rec.get("type"), rec.get("error"), self.describe())
        return rec["value"]

    def error(self, name):
        rec = self[name]
        assert not rec["ok"], "check %r did not raise (returned %r)" % (name, rec.get("value"))
        return rec["type"], rec["error"]


def run_py(code, env=None, timeout=120):
    """Runs CHILD_PRELUDE + code in a fresh interpreter with child_env(env);
    returns a ChildRun. Asserts the child exited 0 and never imported
    TensorFlow."""
    script = CHILD_PRELUDE + textwrap.dedent(code)
    p = subprocess.run([sys.executable, "-c", script], env=child_env(env),
                       capture_output=True, text=True, errors="replace",
                       timeout=timeout)
    checks = {}
    for line in p.stdout.splitlines():
        if line.startswith(CHECK_MARK):
            rec = json.loads(line[len(CHECK_MARK):])
            checks[rec["name"]] = rec
    run = ChildRun(p, checks)
    assert p.returncode == 0, "child failed\n" + run.describe()
    assert run.value("_no_tensorflow") is True, "the child imported TensorFlow"
    return run
