"""Set-up, fixtures and helpers of simdev's JAX tests (tests/jax).

Why no conftest.py: conftest files outside a Python package are all
imported under the module name `conftest`, and tests/tf's modules do
`from conftest import ...`; a second one here would take that name when
both folders run in one pytest (make test). So the fixtures live here and
each test module imports the ones it uses (`from jaxutil import sj,
jax_module`); pytest finds fixtures among a module's globals.

These tests run JAX on CPU in the pytest process itself: libsimdev_xla.so
has no TensorFlow in it, and a JAX process must never load TensorFlow. The
`jax_module` fixture (autouse, once per test module that imports it)
asserts that 'tensorflow' is not in sys.modules before the module's first
test and after its last one. Child processes (run_py) assert it too.

What is tested is the copy installed in this interpreter's site-packages
(`make install`), like tests/tf.

Importing this module changes nothing in the process but importing jax:
tests/tf's modules run in the same pytest processes (make test), and they
read SIMDEV_TEST_PLUGIN / SIMDEV_BUILD_DIR from os.environ. So:
- the library reads the SIMDEV_* settings once, when it creates its device:
  the session fixture `sj` removes them from os.environ around that one
  call (`register_without_settings`) and puts them back, so that a
  developer's setting cannot change what is tested. Tests that need a
  setting (SIMDEV_SYNC=1, a bad or tiny SIMDEV_MEMORY_MB) run a script in a
  fresh process (`run_py`), with exactly the SIMDEV_* variables they give.
- float64 tests need jax_enable_x64: `jax_module` switches it on for the
  module's tests and restores the previous value after them (float32
  inputs stay float32: the tests give every dtype explicitly; the default
  x64-off mode is tested in a child, test_jax_env.py). tests/tf never uses
  JAX in the pytest process (TF and JAX code there runs in children), so
  the setting could not reach it anyway.

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

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax


@pytest.fixture(scope="module", autouse=True)
def jax_module():
    """Per test module: no TensorFlow in the JAX process (before the first
    test and after the last), jax_enable_x64 on while the module runs, and
    JAX on CPU (the platform simdev's targets are registered for; set again
    by every module, a no-op once the backend exists)."""
    assert "tensorflow" not in sys.modules, "TensorFlow was imported before this module"
    jax.config.update("jax_platforms", "cpu")
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", was)
    assert "tensorflow" not in sys.modules, "TensorFlow was imported by this module"


def register_without_settings():
    """simdev.jax.register() with no SIMDEV_* variable in the environment
    (the device is created with the defaults), the variables restored
    afterwards, also when register() raises. Returns simdev.jax."""
    import simdev.jax as sj

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("SIMDEV_")}
    try:
        sj.register()
    finally:
        os.environ.update(saved)
    return sj


@pytest.fixture(scope="session")
def sj():
    """simdev.jax, registered (its device made without SIMDEV_* settings)."""
    return register_without_settings()


def enqueued(sj):
    """Work items queued on the simdev stream so far. A handler counts its
    item before it returns, so the count is current once the call's result
    is ready: read it after blocking on the result (np.asarray,
    block_until_ready), never right after an asynchronous dispatch."""
    return sj.counts()[0]


CHECK_MARK = "@@SIMDEV_JAX@@ "
HI = lax.Precision.HIGHEST


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


def lax_conv(x, w, strides, padding, dilations=(1, 1), precision=HI):
    groups = x.shape[-1] // w.shape[-2]
    return lax.conv_general_dilated(
        x, w, strides, padding, rhs_dilation=dilations,
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=groups, precision=precision)


def jnp_act(z, act, alpha):
    if act == "none":
        return z
    if act == "relu":
        return jax.nn.relu(z)
    if act == "relu6":
        return jax.nn.relu6(z)
    if act == "elu":
        return jax.nn.elu(z)
    if act == "leaky_relu":
        return jax.nn.leaky_relu(z, alpha)
    if act == "tanh":
        return jnp.tanh(z)
    if act == "sigmoid":
        return jax.nn.sigmoid(z)
    raise AssertionError(act)


def child_env(env=None):
    """This process's environment without SIMDEV_*, plus `env`."""
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
