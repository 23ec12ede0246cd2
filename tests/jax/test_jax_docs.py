"""What docs/xla-custom-calls.md says about XLA:CPU's typed FFI on jaxlib
0.10.2 that no other test pins: how Python attribute values arrive (seen
through simdev's handlers' messages), that tuples are not attributes, that
an unused custom call is dropped, that ffi_call is not differentiable, and
the metadata handshake's refusal of a handler answering API 1.0
(tests/jax/ffi_probe.c, built here with cc), in both orders of registration
and backend creation. A jaxlib release that changes one of them fails here,
and the chapter needs a look."""
import os
import shutil
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxutil import jax_module, sj  # noqa: F401 (fixtures)

HERE = os.path.dirname(os.path.abspath(__file__))


def raises(fn, *, match):
    with pytest.raises(Exception, match=match) as e:
        jax.block_until_ready(fn())
    return e.value


def mm(**attrs):
    return lambda: jax.ffi.ffi_call(
        "simdev_matmul", jax.ShapeDtypeStruct((2, 2), jnp.float32))(
            jnp.ones((2, 3), jnp.float32), jnp.ones((3, 2), jnp.float32), **attrs)


def test_python_int_is_s64_and_bool_is_pred(sj):
    raises(mm(transpose_a=1, transpose_b=False),
           match=r"attribute 'transpose_a' must be a bool \(pred\) scalar, got s64 scalar")
    assert np.all(np.asarray(mm(transpose_a=False, transpose_b=False)()) == 3)


def test_python_float_is_f64(sj):
    def fused(alpha):
        return lambda: jax.ffi.ffi_call(
            "simdev_matmul_bias_act", jax.ShapeDtypeStruct((2, 2), jnp.float32))(
                jnp.ones((2, 3), jnp.float32), jnp.ones((3, 2), jnp.float32),
                jnp.zeros((2,), jnp.float32), transpose_a=False, transpose_b=False,
                activation="relu", alpha=alpha)
    raises(fused(0.2), match=r"attribute 'alpha' must be an? f32 scalar, got f64 scalar")
    assert np.all(np.asarray(fused(np.float32(0.2))()) == 3)


def test_tuple_is_not_an_attribute(sj):
    raises(mm(transpose_a=False, transpose_b=False, strides=(1, 1)),
           match="Unsupported attribute type for attribute: strides")


def test_unused_result_is_dropped(sj):
    before = sj.counts()
    f = jax.jit(lambda a: (sj.matmul(a, a), a + 1)[1])
    assert np.all(np.asarray(f(jnp.ones((4, 4), jnp.float32))) == 2)
    assert sj.counts() == before  # no job queued
    jax.block_until_ready(jax.jit(lambda a: sj.matmul(a, a))(jnp.ones((4, 4), jnp.float32)))
    assert sj.counts()[0] == before[0] + 1  # the counter does move


def test_ffi_call_is_not_differentiable(sj):
    f = jax.ffi.ffi_call("simdev_relu", jax.ShapeDtypeStruct((2,), jnp.float32))
    with pytest.raises(ValueError, match="The FFI call to `simdev_relu` cannot be differentiated"):
        jax.grad(lambda a: jnp.sum(f(a)))(jnp.ones(2, jnp.float32))


CHILD = r'''
import ctypes, sys, jax, jax.numpy as jnp
lib = ctypes.CDLL(sys.argv[1])
if sys.argv[2] == "after":
    jax.devices()
try:
    jax.ffi.register_ffi_target("probe_badver", jax.ffi.pycapsule(lib.probe_badver),
                                platform="cpu")
    print("registered", flush=True)
except Exception as e:
    print("register raised:", type(e).__name__, str(e).splitlines()[0], flush=True)
try:
    print(jnp.ones(2) + 1)
except Exception as e:
    print("first computation raised:", type(e).__name__, str(e).splitlines()[0], flush=True)
'''

REFUSAL = ("XLA FFI handler registration for probe_badver on platform Host (canonical "
           "host) failed because the handler's API version (1.0) is incompatible with "
           "the framework's API version (0.3)")


@pytest.fixture(scope="module")
def probe_lib(tmp_path_factory):
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("cc not found: tests/jax/ffi_probe.c is built with it")
    lib = tmp_path_factory.mktemp("ffi_probe") / "libffi_probe.so"
    p = subprocess.run([cc, "-std=c11", "-shared", "-fPIC", "-Wall", "-Werror",
                        "-I", jax.ffi.include_dir(), "-o", str(lib),
                        os.path.join(HERE, "ffi_probe.c")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return str(lib)


def run_child(lib, when):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDEV_")}
    env["JAX_PLATFORMS"] = "cpu"
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), lib, when],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.splitlines()


def test_handshake_refused_at_registration_after_backend(probe_lib):
    out = run_child(probe_lib, "after")
    assert out[0].startswith("register raised: JaxRuntimeError INVALID_ARGUMENT: " + REFUSAL), out
    assert out[1] == "[2. 2.]", out  # the backend itself is fine


def test_handshake_refused_at_backend_creation_before(probe_lib):
    out = run_child(probe_lib, "before")
    assert out[0] == "registered", out  # kept until the backend exists
    assert out[1].startswith(
        "first computation raised: RuntimeError Unable to initialize backend 'cpu': "
        "INVALID_ARGUMENT: " + REFUSAL), out
