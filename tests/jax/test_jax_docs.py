"""What docs/xla-custom-calls.md says about XLA:CPU's typed FFI and JAX's
ffi_call on jaxlib 0.10.2 that no other test pins:

- how Python attribute values arrive (seen through simdev's handlers'
  messages): bool PRED, int S64, float F64; which NumPy array dtypes XLA
  takes as array attributes and which it refuses; tuples (also `()`) are
  not attributes;
- JAX's eager dispatch cache compares attribute values with == and hash,
  so `1` after `True` (and `1.0` after `np.float32(1.0)`) reuses the
  program built for the first value (a JAX bug; checked in a fresh child);
- leaving out vmap_method makes vmap raise (no deprecation warning);
- an unused custom call is dropped; ffi_call is not differentiable;
- a host callback after a simdev call runs on simdev0-s0 or on XLA's
  thread, never on a third one;
- the metadata handshake refuses a handler answering API 1.0 or not
  answering at all (tests/jax/ffi_probe.c, built with cc), in both orders
  of registration and backend creation.

A jaxlib release that changes one of them fails here, and the chapter
needs a look."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxutil import jax_module, run_py, sj  # noqa: F401 (fixtures)
from probeutil import build_probe


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


@pytest.mark.parametrize("value", [(1, 1), ()], ids=["pair", "empty"])
def test_tuple_is_not_an_attribute(sj, value):
    raises(mm(transpose_a=False, transpose_b=False, strides=value),
           match="Unsupported attribute type for attribute: strides")


ARRAY_TAGS = {"int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64",
              "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
              "float32": "f32", "float64": "f64"}


@pytest.mark.parametrize("dtype", [*ARRAY_TAGS, "bool", "float16", "complex64"])
def test_array_attribute_dtypes(sj, dtype):
    """Integer arrays of 8 to 64 bits and f32 / f64 arrays reach the
    handler (its message names the type it got); bool, float16 and
    complex64 arrays are refused by XLA before it. A fresh jitted function
    per value: JAX's eager cache would not tell some values apart (below)."""
    v = np.array([1, 0], dtype)
    f = jax.jit(lambda a, b: jax.ffi.ffi_call(
        "simdev_matmul", jax.ShapeDtypeStruct((2, 2), jnp.float32))(
            a, b, transpose_a=v, transpose_b=False))
    args = (jnp.ones((2, 3), jnp.float32), jnp.ones((3, 2), jnp.float32))
    if dtype in ARRAY_TAGS:
        want = (r"simdev_matmul: attribute 'transpose_a' must be a bool \(pred\) "
                rf"scalar, got {ARRAY_TAGS[dtype]} array")
    else:
        want = "INVALID_ARGUMENT: Unsupported array element type for attribute: transpose_a"
    raises(lambda: f(*args), match=want)


def test_vmap_needs_vmap_method(sj):
    """Without vmap_method, vmap raises (JAX's ffi_call docstring still
    calls it deprecated and sequential); no warning comes first."""
    f = jax.ffi.ffi_call("simdev_relu", jax.ShapeDtypeStruct((3,), jnp.float32))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(NotImplementedError, match="Got vmap_method=None"):
            jax.vmap(f)(jnp.ones((2, 3), jnp.float32))
    assert [str(w.message) for w in seen if "vmap" in str(w.message)] == []
    y = jax.vmap(jax.ffi.ffi_call("simdev_relu", jax.ShapeDtypeStruct((3,), jnp.float32),
                                  vmap_method="sequential"))(-jnp.ones((2, 3), jnp.float32))
    assert np.all(np.asarray(y) == 0)


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


# In a fresh process: JAX's eager dispatch cache is process-wide, and the
# pytest process may already hold programs for these shapes.
EAGER_CACHE = r'''
import threading
import jax, jax.numpy as jnp, numpy as np
import simdev.jax as sj
sj.register()

def mm(n, **attrs):
    a = jnp.arange(n * n, dtype=jnp.float32).reshape(n, n)
    return np.asarray(jax.ffi.ffi_call("simdev_matmul", jax.ShapeDtypeStruct((n, n), jnp.float32))(
        a, jnp.eye(n, dtype=jnp.float32), transpose_b=False, **attrs)).tolist()

def fused(n, alpha):
    return np.asarray(jax.ffi.ffi_call(
        "simdev_matmul_bias_act", jax.ShapeDtypeStruct((n, n), jnp.float32))(
            jnp.ones((n, n), jnp.float32), jnp.ones((n, n), jnp.float32),
            jnp.zeros((n,), jnp.float32), transpose_a=False, transpose_b=False,
            activation="relu", alpha=alpha)).tolist()

check("true then 1: true")(lambda: mm(3, transpose_a=True))
check("true then 1: 1")(lambda: mm(3, transpose_a=1))
check("1 then true: 1")(lambda: mm(4, transpose_a=1))
check("1 then true: true")(lambda: mm(4, transpose_a=True))
check("f32 then float: f32")(lambda: fused(3, np.float32(1.0)))
check("f32 then float: float")(lambda: fused(3, 1.0))
check("float alone")(lambda: fused(4, 1.0))

def comm():
    with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
        return f.read().strip()

seen = []
def cb(x):
    seen.append(comm())
    return x

after = jax.jit(lambda a: jax.pure_callback(
    cb, jax.ShapeDtypeStruct((64, 64), jnp.float32), sj.matmul(a, a)) + 1)
alone = jax.jit(lambda a: jax.pure_callback(
    cb, jax.ShapeDtypeStruct((64, 64), jnp.float32), a) + 1)
def threads(f):
    seen.clear()
    for _ in range(5):
        jax.block_until_ready(f(jnp.ones((64, 64), jnp.float32)))
    return sorted(set(seen))
check("main thread")(comm)
check("callback alone")(lambda: threads(alone))
check("callback after simdev")(lambda: threads(after))
'''


@pytest.fixture(scope="module")
def eager_child():
    return run_py(EAGER_CACHE)


def test_eager_cache_reuses_the_program_of_an_equal_attribute(eager_child):
    """JAX's bug, pinned: the second call's attribute is == the first's
    (1 == True, 1.0 == np.float32(1.0)), so JAX reuses the first program,
    whose attribute has the first value's type."""
    n3 = np.arange(9, dtype=np.float32).reshape(3, 3)
    assert eager_child.value("true then 1: true") == n3.T.tolist()
    assert eager_child.value("true then 1: 1") == n3.T.tolist()  # ran as PRED
    s64 = r"attribute 'transpose_a' must be a bool (pred) scalar, got s64 scalar"
    for name in ("1 then true: 1", "1 then true: true"):  # the second ran as S64
        kind, msg = eager_child.error(name)
        assert kind == "JaxRuntimeError" and s64 in msg, (name, msg)
    assert eager_child.value("f32 then float: f32") == [[3.0] * 3] * 3
    assert eager_child.value("f32 then float: float") == [[3.0] * 3] * 3  # ran as F32
    kind, msg = eager_child.error("float alone")
    assert "attribute 'alpha' must be an f32 scalar, got f64 scalar" in msg, msg


def test_callback_after_simdev_call_runs_on_its_thread_or_xla(eager_child):
    """Completing a simdev future runs XLA's next ops on simdev0-s0, unless
    the job was done before XLA began to wait (then the waiting thread runs
    them): which one is a race, so only the set of possible threads is
    pinned."""
    main = eager_child.value("main thread")
    assert eager_child.value("callback alone") == [main]
    assert set(eager_child.value("callback after simdev")) <= {main, "simdev0-s0"}


HANDSHAKE = r'''
import ctypes, jax, jax.numpy as jnp
lib = ctypes.CDLL(%(lib)r)
if %(after)r:
    jax.devices()
for name in %(names)r:
    check("register " + name)(lambda: jax.ffi.register_ffi_target(
        name, jax.ffi.pycapsule(getattr(lib, name)), platform="cpu"))
check("first computation")(lambda: (jnp.ones(2) + 1).tolist())
'''


def refusal(name, version):
    return (f"INVALID_ARGUMENT: XLA FFI handler registration for {name} on platform Host "
            f"(canonical host) failed because the handler's API version ({version}) is "
            f"incompatible with the framework's API version (0.3)")


@pytest.fixture(scope="module")
def probe_lib(tmp_path_factory):
    return build_probe(tmp_path_factory, "ffi_probe.c", ffi_header=True)


def test_handshake_refused_at_registration_after_backend(probe_lib):
    run = run_py(HANDSHAKE % {"lib": probe_lib, "after": True,
                              "names": ["probe_badver", "probe_noans"]})
    for name, version in (("probe_badver", "1.0"), ("probe_noans", "0.0")):
        kind, msg = run.error("register " + name)
        assert kind == "JaxRuntimeError" and msg.startswith(refusal(name, version)), msg
    assert run.value("first computation") == [2.0, 2.0]  # the backend itself is fine


def test_handshake_refused_at_backend_creation_before(probe_lib):
    run = run_py(HANDSHAKE % {"lib": probe_lib, "after": False, "names": ["probe_badver"]})
    assert run.value("register probe_badver") is None  # kept until the backend exists
    kind, msg = run.error("first computation")
    assert kind == "RuntimeError" and msg.startswith(
        "Unable to initialize backend 'cpu': " + refusal("probe_badver", "1.0")), msg
