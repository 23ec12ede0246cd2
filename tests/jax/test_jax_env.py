"""simdev.jax in fresh processes: under SIMDEV_* settings (the library
reads them when it creates its device): SIMDEV_SYNC=1 (the handler waits
for its work item and returns its error itself), a bad SIMDEV_MEMORY_MB
(register() raises naming it), and a device region too small for a
convolution's im2col scratch (the worker's allocation fails, the call's
future carries RESOURCE_EXHAUSTED, later calls work); with JAX's default
jax_enable_x64 off (float32 everywhere); and jaxutil's promise that
importing it changes nothing in the process.

The children return their operands and results as lists; the references
and bounds are computed here (jaxutil.assert_close)."""
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxutil import assert_close, jax_module, lax_conv, run_py, sj  # noqa: F401 (fixtures)

F32, F64 = np.float32, np.float64
HERE = os.path.dirname(os.path.abspath(__file__))

COMMON = r'''
import jax, jax.numpy as jnp, numpy as np
import simdev.jax as sj
jax.config.update("jax_enable_x64", True)
L = lambda *xs: [np.asarray(x).tolist() for x in xs]
'''


def conv_scale(x, w, strides, padding):
    return lax_conv(np.abs(x), np.abs(w), strides, padding)


def test_sync_mode():
    run = run_py(COMMON + r'''
sj.register()

@check("results")
def _():
    rng = np.random.default_rng(40)
    a, b = rng.normal(size=(2, 7, 5)), rng.normal(size=(2, 5, 3))
    x, w = rng.normal(size=(1, 6, 6, 2)), rng.normal(size=(3, 3, 2, 4))
    c = sj.matmul(a, b)
    y = sj.conv2d(x, w, strides=(2, 1), padding=((1, 1), (0, 2)))
    r = sj.relu(c)
    return L(a, b, c, x, w, y, r)

@check("grad")
def _():
    rng = np.random.default_rng(41)
    x, w, r = rng.normal(size=(1, 5, 5, 2)), rng.normal(size=(2, 2, 2, 3)), rng.normal(size=(1, 4, 4, 3))
    dx, dw = jax.grad(lambda x, w: jnp.sum(sj.conv2d(x, w, padding="VALID") * r), (0, 1))(x, w)
    return L(x, w, r, dx, dw)

@check("loop")
def _():
    b = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    e0, d0, f0 = sj.counts()
    outs = [sj.matmul(np.full((2, 4), float(i), np.float32), b) for i in range(200)]
    jax.block_until_ready(outs)
    ok = all(np.array_equal(np.asarray(o), np.full((2, 4), float(i), np.float32) @ b)
             for i, o in enumerate(outs))
    e, d, f = sj.counts()
    return [ok, e - e0, d - d0, f - f0]
''', env={"SIMDEV_SYNC": "1"})
    a, b, c, x, w, y, r = map(np.array, run.value("results"))
    assert_close(c, np.matmul(a, b), np.abs(a) @ np.abs(b), 5, F64)
    pad = ((1, 1), (0, 2))
    assert_close(y, lax_conv(x, w, (2, 1), pad), conv_scale(x, w, (2, 1), pad), 18, F64)
    np.testing.assert_array_equal(r, np.maximum(c, 0))
    # the gradient of the linear loss sum(conv(x, w) * r): dx sums 2 x 2 x 3
    # products, dw 4 x 4; the bound's scale is the same gradient of
    # magnitudes
    x, w, r, dx, dw = map(np.array, run.value("grad"))

    def loss(r):
        return lambda x, w: jnp.sum(lax_conv(x, w, (1, 1), "VALID") * r)

    ref = jax.grad(loss(r), (0, 1))(x, w)
    mag = jax.grad(loss(np.abs(r)), (0, 1))(np.abs(x), np.abs(w))
    for got, e, m in zip((dx, dw), ref, mag):
        assert_close(got, e, m, 16, F64)
    assert run.value("loop") == [True, 200, 200, 0]


def test_bad_memory_setting():
    run = run_py(COMMON + r'''
import os

@check("bad")
def _():
    sj.register()

@check("zero")
def _():
    os.environ["SIMDEV_MEMORY_MB"] = "0"
    sj.register()

@check("fixed")
def _():
    # a later register() reads the settings again
    os.environ["SIMDEV_MEMORY_MB"] = "64"
    sj.register()
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    return bool(np.array_equal(np.asarray(sj.matmul(a, a.T)), a @ a.T))
''', env={"SIMDEV_MEMORY_MB": "lots"})
    for name, value in (("bad", "lots"), ("zero", "0")):
        typ, msg = run.error(name)
        assert typ == "ValueError", (typ, msg)
        assert 'SIMDEV_MEMORY_MB="%s"' % value in msg, msg
    assert run.value("fixed") is True


TINY = COMMON + r'''
sj.register()
rng = np.random.default_rng(42)
# im2col scratch: 64*64 output rows x 3*3*16 taps x 4 bytes = 2.4 MB, more
# than the whole 1 MiB device region
big_x = rng.normal(size=(1, 64, 64, 16)).astype(np.float32)
big_w = rng.normal(size=(3, 3, 16, 8)).astype(np.float32)

@check("big")
def _():
    e0, d0, f0 = sj.counts()
    try:
        jax.block_until_ready(sj.conv2d(big_x, big_w))
    except jax.errors.JaxRuntimeError as exc:
        e, d, f = sj.counts()
        return {"error": str(exc), "counts": [e - e0, d - d0, f - f0]}
    return {"error": None}

@check("after")
def _():
    # a small convolution (scratch within the region) and a matmul work
    x = rng.normal(size=(1, 6, 6, 2)).astype(np.float64)
    w = rng.normal(size=(3, 3, 2, 3)).astype(np.float64)
    y = sj.conv2d(x, w)
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    return L(x, w, y) + [bool(np.array_equal(np.asarray(sj.matmul(a, a.T)), a @ a.T))]

@check("jit_mixed")
def _():
    # one program: the failing convolution and a good matmul; the program
    # fails with the conv's error, and the next run of a good one works
    f = jax.jit(lambda x, w, a: (sj.conv2d(x, w), sj.matmul(a, a.T)))
    a = np.ones((2, 3), np.float32)
    try:
        jax.block_until_ready(f(big_x, big_w, a))
        return None
    except jax.errors.JaxRuntimeError as exc:
        return str(exc)
'''


def check_tiny(run):
    big = run.value("big")
    assert big["error"] is not None, "the 2.4 MB scratch fit into 1 MiB?"
    assert big["error"].startswith("RESOURCE_EXHAUSTED:"), big["error"]
    assert "simdev_conv2d" in big["error"] and "device memory" in big["error"], big["error"]
    # queued, and completed with an error (the worker's failure)
    assert big["counts"] == [1, 0, 1], big["counts"]
    x, w, y, ok = run.value("after")
    x, w, y = np.array(x), np.array(w), np.array(y)
    assert_close(y, lax_conv(x, w, (1, 1), "SAME"), conv_scale(x, w, (1, 1), "SAME"), 18, F64)
    assert ok is True
    mixed = run.value("jit_mixed")
    assert mixed is not None and mixed.startswith("RESOURCE_EXHAUSTED:"), mixed


def test_worker_side_error():
    check_tiny(run_py(TINY, env={"SIMDEV_MEMORY_MB": "1"}))


def test_worker_side_error_sync():
    check_tiny(run_py(TINY, env={"SIMDEV_MEMORY_MB": "1", "SIMDEV_SYNC": "1"}))


def test_x64_off():
    """JAX's default: jax_enable_x64 off. Results are float32, checked
    against float64 references computed here (each side's bound covers
    float32's rounding: the reference's own is far smaller)."""
    run = run_py(r'''
import jax, jax.numpy as jnp, numpy as np
import simdev.jax as sj
L = lambda *xs: [np.asarray(x).tolist() for x in xs]
rng = np.random.default_rng(43)
f32 = lambda *s: rng.uniform(-1, 1, size=s).astype(np.float32)

@check("x64")
def _():
    return bool(jax.config.jax_enable_x64)

@check("matmul")
def _():
    a, b = f32(5, 7), f32(7, 3)
    c = sj.matmul(a, b)
    return [str(c.dtype)] + L(a, b, c)

@check("conv2d")
def _():
    x, w = f32(1, 7, 6, 2), f32(3, 2, 2, 4)
    y = sj.conv2d(x, w, strides=(2, 1), padding=((1, 2), (0, 1)))
    return [str(y.dtype)] + L(x, w, y)

@check("matmul_bias_act")
def _():
    a, b, bias = f32(4, 6), f32(6, 5), f32(5)
    y = sj.matmul_bias_act(a, b, bias, "relu")
    return [str(y.dtype)] + L(a, b, bias, y)

@check("grad")
def _():
    a, b, r = f32(3, 4), f32(4, 5), f32(3, 5)
    da, db = jax.jit(jax.grad(lambda a, b: jnp.sum(sj.matmul(a, b) * r), (0, 1)))(a, b)
    return [str(da.dtype), str(db.dtype)] + L(a, b, r, da, db)
''')
    assert run.value("x64") is False
    dt, a, b, c = run.value("matmul")
    a, b, c = np.array(a, F64), np.array(b, F64), np.array(c, F64)
    assert dt == "float32"
    assert_close(c, a @ b, np.abs(a) @ np.abs(b), 7, F32)
    dt, x, w, y = run.value("conv2d")
    assert dt == "float32"
    x, w, y = np.array(x, F64), np.array(w, F64), np.array(y, F64)
    pad = ((1, 2), (0, 1))
    assert_close(y, lax_conv(x, w, (2, 1), pad), conv_scale(x, w, (2, 1), pad), 3 * 2 * 2, F32)
    dt, a, b, bias, y = run.value("matmul_bias_act")
    assert dt == "float32"
    a, b, bias, y = (np.array(v, F64) for v in (a, b, bias, y))
    # relu's slope is at most 1: z's bound (6 products and the bias)
    assert_close(y, np.maximum(a @ b + bias, 0), np.abs(a) @ np.abs(b) + np.abs(bias), 7, F32)
    dta, dtb, a, b, r, da, db = run.value("grad")
    assert (dta, dtb) == ("float32", "float32")
    a, b, r, da, db = (np.array(v, F64) for v in (a, b, r, da, db))
    assert_close(da, r @ b.T, np.abs(r) @ np.abs(b).T, 5, F32)
    assert_close(db, a.T @ r, np.abs(a).T @ np.abs(r), 3, F32)


def test_importing_jaxutil_changes_nothing():
    """tests/tf runs in the same pytest processes and reads SIMDEV_* from
    os.environ, with JAX's default settings: importing jaxutil (every
    worker does, collecting tests/jax) must leave the environment and
    jax_enable_x64 alone; the sj fixture's registration ignores a SIMDEV_*
    setting (a bad one here) and puts it back."""
    run = run_py(r'''
import os, sys
sys.path.insert(0, %r)
import jax, jaxutil
import numpy as np

@check("import")
def _():
    return [os.environ.get("SIMDEV_MEMORY_MB"), os.environ.get("SIMDEV_TEST_PLUGIN"),
            bool(jax.config.jax_enable_x64)]

@check("register")
def _():
    sj = jaxutil.register_without_settings()
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    ok = bool(np.array_equal(np.asarray(sj.matmul(a, a.T)), a @ a.T))
    return [os.environ.get("SIMDEV_MEMORY_MB"), os.environ.get("SIMDEV_TEST_PLUGIN"), ok]
''' % HERE, env={"SIMDEV_MEMORY_MB": "lots", "SIMDEV_TEST_PLUGIN": "/nonexistent/libsimdev.so"})
    assert run.value("import") == ["lots", "/nonexistent/libsimdev.so", False]
    assert run.value("register") == ["lots", "/nonexistent/libsimdev.so", True]
