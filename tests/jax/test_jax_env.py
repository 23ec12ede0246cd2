"""simdev.jax under SIMDEV_* settings, each in a fresh process (the library
reads the settings when it creates its device): SIMDEV_SYNC=1 (the handler
waits for its work item and returns its error itself), a bad
SIMDEV_MEMORY_MB (register() raises naming it), and a device region too
small for a convolution's im2col scratch (the worker's allocation fails,
the call's future carries RESOURCE_EXHAUSTED, later calls work)."""
from jaxutil import jax_module, run_py, sj  # noqa: F401 (fixtures)

COMMON = r'''
import jax, jax.numpy as jnp, numpy as np
from jax import lax
import simdev.jax as sj
jax.config.update("jax_enable_x64", True)

def lax_conv(x, w, strides, padding):
    return lax.conv_general_dilated(x, w, strides, padding,
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        precision=lax.Precision.HIGHEST)
'''


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
    return [float(np.max(np.abs(c - np.matmul(a, b)))),
            float(np.max(np.abs(y - lax_conv(x, w, (2, 1), ((1, 1), (0, 2)))))),
            bool(np.array_equal(np.asarray(r), np.maximum(np.asarray(c), 0)))]

@check("grad")
def _():
    rng = np.random.default_rng(41)
    x, w = rng.normal(size=(1, 5, 5, 2)), rng.normal(size=(2, 2, 2, 3))
    loss = lambda conv: (lambda x, w: jnp.sum(conv(x, w) ** 2))
    got = jax.grad(loss(lambda x, w: sj.conv2d(x, w, padding="VALID")), (0, 1))(x, w)
    ref = jax.grad(loss(lambda x, w: lax_conv(x, w, (1, 1), "VALID")), (0, 1))(x, w)
    return [float(np.max(np.abs(g - e))) for g, e in zip(got, ref)]

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
    errs = run.value("results")
    assert errs[0] < 1e-12 and errs[1] < 1e-12 and errs[2] is True
    assert max(run.value("grad")) < 1e-12
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
    return [float(np.max(np.abs(y - lax_conv(x, w, (1, 1), "SAME")))),
            bool(np.array_equal(np.asarray(sj.matmul(a, a.T)), a @ a.T))]

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
    err, ok = run.value("after")
    assert err < 1e-12 and ok is True
    mixed = run.value("jit_mixed")
    assert mixed is not None and mixed.startswith("RESOURCE_EXHAUSTED:"), mixed


def test_worker_side_error():
    check_tiny(run_py(TINY, env={"SIMDEV_MEMORY_MB": "1"}))


def test_worker_side_error_sync():
    check_tiny(run_py(TINY, env={"SIMDEV_MEMORY_MB": "1", "SIMDEV_SYNC": "1"}))
