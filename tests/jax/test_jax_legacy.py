"""XLA's legacy custom-call convention on jaxlib 0.10.2's XLA:CPU.

simdev_legacy_matmul (src/xla/legacy.c) is a matmul in the legacy CPU
convention, `fn(out, in[], opaque, opaque_len, status)`, registered with
`register_ffi_target(..., api_version=0)` and called with
`ffi_call(..., custom_call_api_version=3, legacy_backend_config=opaque)`.
These tests check its results, and pin what the docs say about the
convention (docs/xla-custom-calls.md, "The legacy convention"), so that a
jaxlib release that changes it is noticed:

- the oldest versions 1 and 2 (the seed's `fn(out, in)`) still run, with
  a logged notice that XLA:CPU is removing them (tests/jax/legacy_probe.c,
  built here with cc); version 3 runs without one;
- the convention's error function, XlaCustomCallStatusSetFailure, is not
  exported by jaxlib, so a legacy target cannot fail a call: a bad opaque is
  reported on stderr and the result is left unwritten;
- typed attributes need the typed FFI, and the two kinds of target live in
  separate registries;
- XLA:CPU flushes denormals like simdev's threads: a product of denormal
  inputs is 0 from the legacy target, simdev_matmul and jnp alike.

JAX runs in this process (no TensorFlow: jaxutil.jax_module checks it);
the logging and stderr cases run in a child process.
"""
import ctypes
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxutil import jax_module, run_py, sj  # noqa: F401 (fixtures)
from probeutil import build_probe

TARGET = "simdev_legacy_matmul"


@pytest.fixture(scope="module")
def legacy(sj):
    """The legacy target, registered in the legacy registry (api_version=0),
    and a wrapper that builds its opaque from the operands' shapes."""
    lib = ctypes.CDLL(sj.library_path())
    jax.ffi.register_ffi_target(TARGET,
                                jax.ffi.pycapsule(lib.simdev_xla_legacy_matmul),
                                platform="cpu", api_version=0)
    return legacy_matmul


def opaque_of(a, b):
    m, k = a.shape
    n = b.shape[1]
    dt = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[np.dtype(a.dtype)]
    return f"m={m},k={k},n={n},dtype={dt}"


def legacy_matmul(a, b):
    """a [m, k] @ b [k, n] through simdev_legacy_matmul. The shapes are
    checked here: the C side sees only opaque. vmap "sequential": each call
    sees the unbatched shapes the opaque describes (broadcast_all would hand
    it batched buffers and a stale opaque)."""
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]
    assert a.dtype == b.dtype and a.dtype in (jnp.float32, jnp.float64)
    out = jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype)
    return jax.ffi.ffi_call(TARGET, out, custom_call_api_version=3,
                            legacy_backend_config=opaque_of(a, b),
                            vmap_method="sequential")(a, b)


def assert_product(got, a, b):
    """|got - a @ b| within 2 gamma_k (|a| @ |b|) (each side's rounding bound
    for a sum of k products; the reference is NumPy's in float64 or the
    dtype's)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    want = a64 @ b64
    u = np.finfo(np.asarray(a).dtype).eps / 2
    k = max(a.shape[1], 1)
    bound = 2 * (k * u / (1 - k * u)) * (np.abs(a64) @ np.abs(b64)) + \
        np.finfo(np.asarray(a).dtype).tiny
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= bound), float(np.max(np.abs(got - want)))


SHAPES = [(1, 1, 1), (3, 4, 5), (64, 33, 17), (130, 257, 70), (0, 3, 4),
          (3, 0, 4), (3, 4, 0), (0, 0, 0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_results_match_numpy(legacy, dtype, m, k, n):
    rng = np.random.default_rng(m * 10007 + k * 101 + n)
    a = jnp.asarray(rng.uniform(-1, 1, (m, k)).astype(dtype))
    b = jnp.asarray(rng.uniform(-1, 1, (k, n)).astype(dtype))
    got = jax.jit(legacy)(a, b)
    assert got.dtype == dtype and got.shape == (m, n)
    if k == 0:
        assert np.all(np.asarray(got) == 0)  # written as zeros, not left
    assert_product(got, a, b)
    assert np.array_equal(np.asarray(legacy(a, b)), np.asarray(got))  # eager


def test_vmap_sequential(legacy):
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.uniform(-1, 1, (5, 6, 7)).astype(np.float32))
    b = jnp.asarray(rng.uniform(-1, 1, (5, 7, 3)).astype(np.float32))
    got = jax.jit(jax.vmap(legacy))(a, b)
    assert got.shape == (5, 6, 3)
    for i in range(5):
        assert_product(got[i], a[i], b[i])


def test_side_by_side_with_typed_ffi(legacy, sj):
    """One jitted program with the legacy target and simdev_matmul (typed
    FFI): both run sa_gemm on the same operands."""
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.uniform(-1, 1, (40, 50)).astype(np.float64))
    b = jnp.asarray(rng.uniform(-1, 1, (50, 30)).astype(np.float64))
    old, new = jax.jit(lambda x, y: (legacy(x, y), sj.matmul(x, y)))(a, b)
    assert_product(old, a, b)
    assert_product(new, a, b)
    text = jax.jit(lambda x, y: (legacy(x, y), sj.matmul(x, y))).lower(a, b).as_text()
    assert "api_version = 3" in text and 'backend_config = "m=40,k=50,n=30,dtype=f64"' in text
    # The typed call: API 4 (the default, not printed), attributes as a
    # dictionary instead of a string.
    assert "mhlo.backend_config = {transpose_a = false, transpose_b = false}" in text


def test_typed_attributes_need_the_typed_ffi(legacy):
    a = jnp.ones((2, 3), jnp.float32)
    b = jnp.ones((3, 4), jnp.float32)
    f = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct((2, 4), jnp.float32),
                         custom_call_api_version=3)
    with pytest.raises(ValueError, match="requires a custom call API version of at least 4"):
        f(a, b, m=2)


def test_separate_registries(legacy, sj):
    """A legacy target is not a typed-FFI handler and vice versa: the call
    site's api_version picks the registry."""
    a = jnp.ones((2, 3), jnp.float32)
    b = jnp.ones((3, 4), jnp.float32)
    out = jax.ShapeDtypeStruct((2, 4), jnp.float32)
    with pytest.raises(Exception, match=f"No FFI handler registered for {TARGET}"):
        jax.ffi.ffi_call(TARGET, out)(a, b)
    with pytest.raises(Exception,
                       match="No registered implementation for untyped custom call to simdev_matmul"):
        jax.ffi.ffi_call("simdev_matmul", out, custom_call_api_version=3,
                         legacy_backend_config="")(a, b)


def test_status_failure_is_not_exported():
    """XlaCustomCallStatusSetFailure (the legacy convention's only way to
    fail a call) is in none of jaxlib's dynamic symbol tables: libjax_common.so
    holds XLA, and nothing visible to the process has it."""
    import jaxlib

    jax.devices()  # XLA:CPU loaded
    common = os.path.join(os.path.dirname(jaxlib.__file__), "libjax_common.so")
    assert os.path.exists(common)
    for lib in (ctypes.CDLL(common), ctypes.CDLL(None)):
        for sym in ("XlaCustomCallStatusSetFailure", "XlaCustomCallStatusSetSuccess"):
            assert not hasattr(lib, sym), f"{sym} is exported now: legacy.c could fail calls"


CHILD = r'''
import ctypes, sys
import jax, jax.numpy as jnp, numpy as np
import simdev.jax as sj
lib = ctypes.CDLL(sj.library_path())
probe = ctypes.CDLL(%(probe)r)
jax.ffi.register_ffi_target("simdev_legacy_matmul",
    jax.ffi.pycapsule(lib.simdev_xla_legacy_matmul), platform="cpu", api_version=0)
for v in (1, 2):
    jax.ffi.register_ffi_target(f"probe_v{v}", jax.ffi.pycapsule(getattr(probe, f"probe_v{v}")),
                                platform="cpu", api_version=0)
out4 = jax.ShapeDtypeStruct((4,), jnp.float32)
x, y = jnp.arange(4, dtype=jnp.float32), jnp.full(4, 2.0, jnp.float32)
for v in (1, 2):
    check(f"probe_v{v}")(lambda: np.asarray(jax.ffi.ffi_call(
        f"probe_v{v}", out4, custom_call_api_version=v)(x, y)).tolist())
a, b = jnp.ones((2, 3), jnp.float32), jnp.ones((3, 4), jnp.float32)
def call(opaque):
    return jax.ffi.ffi_call("simdev_legacy_matmul", jax.ShapeDtypeStruct((2, 4), jnp.float32),
                            custom_call_api_version=3, legacy_backend_config=opaque)(a, b)
for i, bad in enumerate(%(bad)r):
    call(bad).block_until_ready()
    sys.stderr.flush()
    check(f"after bad {i}")(lambda: np.asarray(call("m=2,k=3,n=4,dtype=f32")).tolist())
'''

BAD_OPAQUES = {
    "": "opaque is empty",
    "m=2,k=3,n=4,dtype=s32": "dtype must be f32 or f64, got 's32'",
    "m=2,k=3": "expected ',' after k=3",
    "m=-1,k=3,n=4,dtype=f32": "m needs a decimal size",
    "m=2,k=3,n=4,dtype=f32;": "dtype must be f32 or f64, got 'f32;'",
    "m=2,k=99999999999,n=4,dtype=f32": "k is larger than 2147483647",
    "k=3,m=2,n=4,dtype=f32": "expected 'm='",
}


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    """One child process (jaxutil.run_py: exits 0, never imports
    TensorFlow): the two probes, then each bad opaque followed by a good
    call. Its stderr holds XLA's log and legacy.c's reports."""
    probe = build_probe(tmp_path_factory, "legacy_probe.c")
    return run_py(CHILD % {"probe": probe, "bad": list(BAD_OPAQUES)})


def test_oldest_versions_still_run_with_a_removal_notice(child):
    assert child.value("probe_v1") == [2.0, 3.0, 4.0, 5.0]
    assert child.value("probe_v2") == [-2.0, -1.0, 0.0, 1.0]
    stderr = child.proc.stderr
    for name in ("API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING"):
        notice = (f"Custom call API version `{name}` is not supported by XLA:CPU")
        assert notice in stderr, stderr[-2000:]
    assert "Custom call target: probe_v1" in stderr
    assert "Custom call target: probe_v2" in stderr


def test_version_3_runs_silently(child):
    """The version simdev's target uses gets no notice (the child ran it
    once per bad opaque and once after each)."""
    assert "API_VERSION_STATUS_RETURNING_UNIFIED" not in child.proc.stderr
    assert f"Custom call target: {TARGET}" not in child.proc.stderr


def test_bad_opaque_reported_and_process_goes_on(child):
    stderr = child.proc.stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith(f"{TARGET}: bad opaque")]
    assert len(lines) == len(BAD_OPAQUES), stderr[-3000:]
    for line, (bad, why) in zip(lines, BAD_OPAQUES.items()):
        assert f'bad opaque "{bad}": {why}' in line, line
        assert "the result is left unwritten" in line
    # Each bad call is followed by a good one with the right result.
    for i in range(len(BAD_OPAQUES)):
        assert child.value(f"after bad {i}") == [[3.0] * 4] * 2


def test_denormals_flushed_like_xla(legacy, sj):
    """XLA:CPU runs its programs with denormals flushed (FTZ and DAZ), as
    simdev's threads do: a product of denormal inputs is 0 from the legacy
    target (on XLA's thread), simdev_matmul (on simdev's) and jnp alike,
    and the two simdev targets agree bit for bit."""
    tiny = np.float32(1e-39)
    assert 0 < tiny < np.finfo(np.float32).tiny  # a float32 denormal
    a = jnp.full((4, 4), tiny, jnp.float32)
    b = jnp.ones((4, 4), jnp.float32)
    old = np.asarray(jax.jit(legacy)(a, b))
    new = np.asarray(jax.jit(sj.matmul)(a, b))
    ref = np.asarray(jax.jit(jnp.dot)(a, b))
    assert np.all(ref == 0) and np.all(old == 0) and np.all(new == 0), (old, new, ref)
