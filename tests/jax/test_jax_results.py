"""simdev.jax's results vs jnp / lax, float32 and float64, over shape sweeps
with zero sizes; each call proved to run on simdev's stream (the work-item
count grows by one) or, for an empty result or an empty contraction, to
complete without it."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxutil import (assert_close, enqueued, HI, jax_module, jnp_act, lax_conv,  # noqa: F401
                     rand, sj)

DTYPES = [np.float32, np.float64]


def expect_items(sj, before, result_size, contraction):
    """A call with elements to compute queues one work item; one with an
    empty result or an empty contraction completes on XLA's thread."""
    n = 1 if result_size > 0 and contraction > 0 else 0
    assert enqueued(sj) - before == n


# ---- matmul ----------------------------------------------------------------

MATMUL_SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (64, 48, 40),
                 (0, 4, 5), (4, 0, 5), (4, 5, 0), (0, 0, 0)]


def _operands(rng, batch, m, k, n, ta, tb, dt):
    a = rand(rng, batch + ((k, m) if ta else (m, k)), dt)
    b = rand(rng, batch + ((n, k) if tb else (k, n)), dt)
    return a, b


def _np_op(x, t):
    return np.swapaxes(x, -1, -2) if t else x


@pytest.mark.parametrize("dt", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("ta,tb", list(itertools.product([False, True], repeat=2)))
def test_matmul_sweep(sj, dt, ta, tb):
    rng = np.random.default_rng(1)
    for (m, k, n), batch in itertools.product(MATMUL_SHAPES, [(), (2,)]):
        a, b = _operands(rng, batch, m, k, n, ta, tb, dt)
        before = enqueued(sj)
        got = sj.matmul(a, b, transpose_a=ta, transpose_b=tb)
        got.block_until_ready()
        expect_items(sj, before, m * n * int(np.prod(batch)), k)
        assert got.dtype == dt and got.shape == batch + (m, n)
        ref = jnp.matmul(_np_op(a, ta), _np_op(b, tb), precision=HI)
        scale = np.abs(_np_op(a, ta)).astype(np.float64) @ np.abs(_np_op(b, tb))
        assert_close(got, ref, scale, k, dt, what="matmul %s %s" % ((m, k, n), batch))
        if k == 0:
            assert np.all(np.asarray(got) == 0)


def test_matmul_two_batch_dims(sj):
    rng = np.random.default_rng(2)
    a = rand(rng, (2, 3, 4, 5), np.float64)
    b = rand(rng, (2, 3, 5, 6), np.float64)
    got = sj.matmul(a, b)
    ref = jnp.matmul(a, b, precision=HI)
    assert_close(got, ref, np.abs(a) @ np.abs(b), 5, np.float64)


# ---- relu ------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES, ids=["f32", "f64"])
def test_relu_sweep(sj, dt):
    rng = np.random.default_rng(3)
    for shape in [(), (1,), (7,), (3, 4, 5), (2, 3, 4, 5, 6), (0,), (2, 0, 3)]:
        x = rand(rng, shape, dt)
        before = enqueued(sj)
        got = sj.relu(x)
        got.block_until_ready()
        expect_items(sj, before, x.size, 1)
        assert got.dtype == dt and got.shape == shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.nn.relu(x)))


def test_relu_special_values(sj):
    x = np.array([-np.inf, -1e-30, -0.0, 0.0, 1e-30, 3.0, np.inf], np.float32)
    got = np.asarray(sj.relu(x))
    np.testing.assert_array_equal(got, np.array([0, 0, 0, 0, 1e-30, 3.0, np.inf],
                                                np.float32))


# ---- conv2d ----------------------------------------------------------------

# (N, H, W, C), (KH, KW, C/g, O), strides, padding, dilations
CONV_CASES = [
    ((1, 5, 5, 1), (3, 3, 1, 1), (1, 1), "SAME", (1, 1)),
    ((2, 8, 7, 3), (3, 2, 3, 4), (1, 1), "VALID", (1, 1)),
    ((2, 9, 9, 4), (3, 3, 4, 5), (2, 2), "SAME", (1, 1)),
    ((1, 10, 11, 2), (3, 3, 2, 3), (2, 3), "VALID", (1, 1)),
    ((1, 9, 9, 2), (3, 3, 2, 2), (1, 1), "SAME", (2, 2)),
    ((2, 12, 10, 3), (2, 3, 3, 4), (2, 1), "VALID", (2, 3)),
    ((1, 6, 6, 2), (3, 3, 2, 3), (1, 1), ((1, 2), (0, 1)), (1, 1)),
    ((1, 7, 8, 3), (3, 2, 3, 2), (2, 2), ((2, 0), (1, 3)), (2, 1)),
    ((1, 6, 6, 4), (1, 1, 4, 8), (1, 1), "VALID", (1, 1)),      # 1x1
    ((2, 7, 7, 6), (3, 3, 2, 9), (1, 1), "SAME", (1, 1)),       # 3 groups
    ((1, 8, 8, 4), (3, 3, 1, 4), (2, 2), "SAME", (1, 1)),       # depthwise
    ((0, 5, 5, 2), (3, 3, 2, 3), (1, 1), "SAME", (1, 1)),       # N = 0
    ((1, 2, 2, 2), (3, 3, 2, 3), (1, 1), "VALID", (1, 1)),      # OH = 0
    ((1, 0, 4, 2), (2, 2, 2, 3), (1, 1), "SAME", (1, 1)),       # H = 0
    ((1, 4, 4, 2), (2, 2, 2, 0), (1, 1), "SAME", (1, 1)),       # O = 0
]


def conv_id(case):
    return "x%s-w%s-s%s-%s-d%s" % tuple(
        "x".join(map(str, c)) if isinstance(c, tuple) and all(isinstance(i, int) for i in c)
        else str(c).replace(" ", "") for c in case)


@pytest.mark.parametrize("dt", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("case", CONV_CASES, ids=conv_id)
def test_conv2d_sweep(sj, dt, case):
    xs, ws, strides, padding, dil = case
    rng = np.random.default_rng(4)
    x, w = rand(rng, xs, dt), rand(rng, ws, dt)
    before = enqueued(sj)
    got = sj.conv2d(x, w, strides=strides, padding=padding, dilations=dil)
    got.block_until_ready()
    ref = lax_conv(x, w, strides, padding, dil)
    assert got.dtype == dt and got.shape == ref.shape
    k = ws[0] * ws[1] * ws[2]
    expect_items(sj, before, got.size, k)
    scale = lax_conv(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                     strides, padding, dil)
    assert_close(got, ref, scale, k, dt, what=conv_id(case))


def test_conv2d_batch_dim(sj):
    """A leading batch dim on x and w (what vmap's broadcast_all makes)."""
    rng = np.random.default_rng(5)
    x, w = rand(rng, (3, 2, 6, 6, 2), np.float64), rand(rng, (3, 3, 3, 2, 4), np.float64)
    got = sj.conv2d(x, w, strides=(2, 1), padding="SAME")
    for i in range(3):
        ref = lax_conv(x[i], w[i], (2, 1), "SAME", (1, 1))
        scale = lax_conv(np.abs(x[i]), np.abs(w[i]), (2, 1), "SAME", (1, 1))
        assert_close(got[i], ref, scale, 18, np.float64)


# ---- matmul_bias_act -------------------------------------------------------

def jnp_mba(a, b, bias, act, alpha, ta=False, tb=False):
    z = jnp.matmul(jnp.swapaxes(a, -1, -2) if ta else a,
                   jnp.swapaxes(b, -1, -2) if tb else b,
                   precision=HI) + bias[..., None, :]
    return jnp_act(z, act, alpha)


@pytest.mark.parametrize("dt", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("act", ["none", "relu", "relu6", "elu", "leaky_relu",
                                 "tanh", "sigmoid"])
def test_matmul_bias_act_sweep(sj, dt, act):
    rng = np.random.default_rng(6)
    alpha = 0.3
    for (m, k, n), (ta, tb) in [((5, 7, 3), (False, False)), ((16, 9, 12), (True, False)),
                                 ((8, 8, 8), (False, True)), ((3, 4, 5), (True, True)),
                                 ((0, 3, 4), (False, False)), ((3, 0, 4), (False, False)),
                                 ((3, 4, 0), (True, True))]:
        a, b = _operands(rng, (), m, k, n, ta, tb, dt)
        # values that reach relu6's upper kink too
        a, b = a * 3, b * 3
        bias = rand(rng, (n,), dt)
        got = sj.matmul_bias_act(a, b, bias, activation=act, alpha=alpha,
                                 transpose_a=ta, transpose_b=tb)
        # the handler's alpha is a float32 attribute, also for float64
        ref = jnp_mba(a, b, bias, act, float(np.float32(alpha)), ta, tb)
        assert got.dtype == dt and got.shape == (m, n)
        # z's error bound (k products and the bias: k + 1 terms) passes
        # through an activation with slope <= 1; tanh, elu and sigmoid add
        # a few ulps of libm each side.
        scale = (np.abs(_np_op(a, ta)).astype(np.float64) @ np.abs(_np_op(b, tb))
                 + np.abs(bias))
        assert_close(got, ref, scale, k + 1, dt, extra_ulps=16,
                     what="%s %s" % (act, (m, k, n)))


def test_empty(sj):
    before = enqueued(sj)
    out = np.asarray(sj.empty())   # ready before the count is read
    assert out.shape == () and out.dtype == np.float32 and float(out) == 0.0
    assert enqueued(sj) - before == 1
