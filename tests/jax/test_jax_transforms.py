"""simdev.jax under jit, vmap and grad: several simdev calls in one jitted
program (the HLO names the custom-call targets, and each call queues one
work item), vmap with batched and unbatched operands (broadcast_all), and
jax.grad through the custom_vjp rules (whose backward passes are simdev
calls too) vs jax.grad of the jnp / lax version."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxutil import assert_close, HI, jnp_act, lax_conv, jax_module, rand, sj  # noqa: F401 (fixtures)

F64 = np.float64


def enqueued(sj):
    return sj.counts()[0]


def targets(compiled_text):
    """{target: count} of the typed-FFI custom calls in compiled HLO."""
    found = {}
    for m in re.finditer(r'custom_call_target="([^"]+)"[^\n]*api_version=(\w+)',
                         compiled_text):
        assert m.group(2) == "API_VERSION_TYPED_FFI", m.group(0)
        found[m.group(1)] = found.get(m.group(1), 0) + 1
    return found


# ---- jit -----------------------------------------------------------------

def test_jit_several_calls(sj):
    rng = np.random.default_rng(10)
    a, b = rand(rng, (6, 5), F64), rand(rng, (5, 4), F64)
    bias = rand(rng, (4,), F64)
    x, w = rand(rng, (1, 6, 6, 2), F64), rand(rng, (3, 3, 2, 3), F64)

    def prog(a, b, bias, x, w):
        h = sj.relu(sj.matmul(a, b))
        g = sj.matmul_bias_act(a, b, bias, activation="tanh")
        y = sj.conv2d(x, w, strides=(1, 2), padding="VALID")
        return h + g, sj.relu(y)

    f = jax.jit(prog)
    # all five calls survive XLA's optimization, as typed-FFI custom calls
    assert targets(f.lower(a, b, bias, x, w).compile().as_text()) == {
        "simdev_matmul": 1, "simdev_relu": 2, "simdev_matmul_bias_act": 1,
        "simdev_conv2d": 1}
    before = enqueued(sj)
    hg, y = f(a, b, bias, x, w)
    jax.block_until_ready((hg, y))
    assert enqueued(sj) - before == 5   # matmul, relu, fused, conv, relu
    ref_hg = (jax.nn.relu(jnp.matmul(a, b, precision=HI))
              + jnp.tanh(jnp.matmul(a, b, precision=HI) + bias))
    # |relu(z)| + |tanh(z')|: both bounded by |a| @ |b| (+ |bias|)
    scale = 2 * (np.abs(a) @ np.abs(b)) + np.abs(bias)
    assert_close(hg, ref_hg, scale, 6, F64, extra_ulps=8)
    ref_y = jax.nn.relu(lax_conv(x, w, (1, 2), "VALID", (1, 1)))
    assert_close(y, ref_y, lax_conv(np.abs(x), np.abs(w), (1, 2), "VALID", (1, 1)),
                 18, F64)
    # the second run reuses the executable and queues as many items again
    before = enqueued(sj)
    jax.block_until_ready(f(a, b, bias, x, w))
    assert enqueued(sj) - before == 5


def test_jaxpr_names_ffi_call(sj):
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float32)
    jaxpr = str(jax.make_jaxpr(lambda a, b: sj.matmul(a, b))(a, b))
    assert "ffi_call" in jaxpr and "simdev_matmul" in jaxpr


# ---- vmap ------------------------------------------------------------------

def test_vmap_matmul_both_batched(sj):
    rng = np.random.default_rng(11)
    a, b = rand(rng, (4, 3, 5), F64), rand(rng, (4, 5, 2), F64)
    f = jax.jit(jax.vmap(sj.matmul))
    assert targets(f.lower(a, b).compile().as_text()) == {"simdev_matmul": 1}
    before = enqueued(sj)
    got = f(a, b)
    got.block_until_ready()
    assert enqueued(sj) - before == 1   # one batched call, not 4
    assert_close(got, jnp.matmul(a, b, precision=HI), np.abs(a) @ np.abs(b), 5, F64)


@pytest.mark.parametrize("axes", [(0, None), (None, 0), (1, None), (None, 2)])
def test_vmap_one_operand(sj, axes):
    rng = np.random.default_rng(12)
    na, nb = axes
    a = rand(rng, (3, 4) if na is None else (3, 4)[:na] + (5,) + (3, 4)[na:], F64)
    b = rand(rng, (4, 2) if nb is None else (4, 2)[:nb] + (5,) + (4, 2)[nb:], F64)
    got = jax.vmap(lambda a, b: sj.matmul(a, b, transpose_b=False), in_axes=axes)(a, b)
    ref = jax.vmap(lambda a, b: jnp.matmul(a, b, precision=HI), in_axes=axes)(a, b)
    scale = jax.vmap(lambda a, b: jnp.abs(a) @ jnp.abs(b), in_axes=axes)(a, b)
    assert got.shape == (5, 3, 2)
    assert_close(got, ref, scale, 4, F64)


def test_vmap_nested_transposed(sj):
    rng = np.random.default_rng(13)
    a, b = rand(rng, (2, 3, 5, 4), F64), rand(rng, (3, 6, 5), F64)
    f = jax.vmap(jax.vmap(lambda a, b: sj.matmul(a, b, transpose_a=True, transpose_b=True),
                          in_axes=(0, 0)), in_axes=(0, None))
    got = f(a, b)
    ref = jnp.einsum("xykm,ynk->xymn", a, b, precision=HI)
    scale = jnp.einsum("xykm,ynk->xymn", np.abs(a), np.abs(b))
    assert_close(got, ref, scale, 5, F64)


def test_vmap_conv_relu_fused(sj):
    rng = np.random.default_rng(14)
    xs, w = rand(rng, (3, 1, 7, 7, 2), F64), rand(rng, (3, 3, 2, 4), F64)
    got = jax.vmap(lambda x: sj.relu(sj.conv2d(x, w, strides=(2, 2))))(xs)
    for i in range(3):
        ref = jax.nn.relu(lax_conv(xs[i], w, (2, 2), "SAME", (1, 1)))
        assert_close(got[i], ref, lax_conv(np.abs(xs[i]), np.abs(w), (2, 2), "SAME",
                                           (1, 1)), 18, F64)
    a, bs = rand(rng, (4, 3), F64), rand(rng, (5, 3, 2), F64)
    bias = rand(rng, (2,), F64)
    got = jax.vmap(lambda b: sj.matmul_bias_act(a, b, bias, "sigmoid"))(bs)
    ref = jax.nn.sigmoid(jnp.matmul(a, bs, precision=HI) + bias)
    assert_close(got, ref, np.abs(a) @ np.abs(bs) + np.abs(bias), 4, F64, extra_ulps=8)


# ---- grad ------------------------------------------------------------------

def check_grads(sj_fn, ref_fn, args, dt, k, what, mag_fn=None):
    """jax.grad of sum(f * r) for a fixed random r (every output element
    matters) w.r.t. every argument, simdev vs reference. Each gradient is a
    sum of at most k products (the caller counts them), so the bound is
    2 gamma_k times the sum of the magnitudes of its terms: the gradient of
    the same loss through the linear part of f (mag_fn, default ref_fn)
    with every operand and r replaced by its magnitude. The activations'
    slopes are at most 1, and their derivatives' own rounding (a few ulps
    of 1) is covered by the extra terms the caller adds to k."""
    rng = np.random.default_rng(99)
    out = ref_fn(*args)
    r = rand(rng, out.shape, dt)
    argnums = tuple(range(len(args)))

    def loss(fn, r):
        return lambda *xs: jnp.sum(fn(*xs) * r)

    # jitted: one compilation each instead of one per eager primitive
    got = jax.jit(jax.grad(loss(sj_fn, r), argnums))(*args)
    ref = jax.jit(jax.grad(loss(ref_fn, r), argnums))(*args)
    mag = jax.jit(jax.grad(loss(mag_fn or ref_fn, np.abs(r)), argnums))(
        *[np.abs(x) for x in args])
    for i, (g, e, m) in enumerate(zip(got, ref, mag)):
        assert g.shape == np.shape(args[i]) and g.dtype == dt
        assert_close(g, e, np.abs(m), k, dt, what="%s d/darg%d" % (what, i))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_grad_matmul(sj, dt, ta, tb):
    rng = np.random.default_rng(20)
    a = rand(rng, (4, 3) if ta else (3, 4), dt)
    b = rand(rng, (5, 4) if tb else (4, 5), dt)

    def ref(a, b):
        return jnp.matmul(a.T if ta else a, b.T if tb else b, precision=HI)

    before = enqueued(sj)
    check_grads(lambda a, b: sj.matmul(a, b, transpose_a=ta, transpose_b=tb), ref,
                (a, b), dt, 5, "matmul ta=%s tb=%s" % (ta, tb))
    # the two backward matmuls ran on simdev (the jitted gradient does not
    # use the forward product, and XLA drops that pure call)
    assert enqueued(sj) - before == 2


def test_grad_matmul_batched_jit(sj):
    rng = np.random.default_rng(21)
    a, b = rand(rng, (2, 3, 4), F64), rand(rng, (2, 4, 5), F64)
    f = jax.jit(jax.grad(lambda a, b: jnp.sum(sj.matmul(a, b) ** 2), (0, 1)))
    assert targets(f.lower(a, b).compile().as_text()) == {"simdev_matmul": 3}
    got = f(a, b)
    ref = jax.grad(lambda a, b: jnp.sum(jnp.matmul(a, b, precision=HI) ** 2), (0, 1))(a, b)
    for g, e in zip(got, ref):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


GRAD_CONV = [
    ((2, 7, 7, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((1, 9, 8, 2), (3, 2, 2, 3), (2, 3), "VALID", (1, 1)),
    ((1, 9, 9, 2), (3, 3, 2, 2), (2, 2), "SAME", (2, 2)),
    ((2, 8, 7, 2), (2, 3, 2, 3), (1, 2), ((1, 2), (2, 0)), (2, 1)),
    ((1, 6, 6, 4), (3, 3, 2, 6), (1, 1), "SAME", (1, 1)),       # 2 groups
]


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", GRAD_CONV, ids=[str(i) for i in range(len(GRAD_CONV))])
def test_grad_conv2d(sj, dt, case):
    xs, ws, strides, padding, dil = case
    rng = np.random.default_rng(22)
    x, w = rand(rng, xs, dt), rand(rng, ws, dt)
    groups = xs[-1] // ws[-2]
    y = lax_conv(x, w, strides, padding, dil)
    # dx sums over the filter taps and output channels, dw over the images
    # and output positions
    k = max(ws[0] * ws[1] * ws[3], y.shape[0] * y.shape[1] * y.shape[2])
    before = enqueued(sj)
    check_grads(lambda x, w: sj.conv2d(x, w, strides=strides, padding=padding,
                                       dilations=dil),
                lambda x, w: lax_conv(x, w, strides, padding, dil), (x, w), dt, k,
                "conv2d %s" % (case,))
    # both backprops of each group ran on simdev (the forward result is
    # unused by the jitted gradient, and XLA drops that pure call)
    assert enqueued(sj) - before == 2 * groups


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_grad_relu(sj, dt):
    rng = np.random.default_rng(23)
    x = rand(rng, (4, 6), dt)
    before = enqueued(sj)
    g = jax.grad(lambda x: jnp.sum(sj.relu(x) * jnp.arange(24.0).reshape(4, 6)))(x)
    assert enqueued(sj) - before == 2   # relu, relu_grad
    ref = jax.grad(lambda x: jnp.sum(jax.nn.relu(x) * jnp.arange(24.0).reshape(4, 6)))(x)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(ref))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("act,alpha", [("none", 0.2), ("relu", 0.2), ("relu6", 0.2),
                                       ("elu", 0.2), ("leaky_relu", 0.2),
                                       ("leaky_relu", -0.5), ("tanh", 0.2),
                                       ("sigmoid", 0.2)])
def test_grad_matmul_bias_act(sj, dt, act, alpha):
    rng = np.random.default_rng(24)
    a, b = rand(rng, (6, 4), dt) * 3, rand(rng, (4, 5), dt) * 3
    bias = rand(rng, (5,), dt)
    alpha32 = float(np.float32(alpha))   # the handler's alpha is float32

    def ref(a, b, bias):
        return jnp_act(jnp.matmul(a, b, precision=HI) + bias, act, alpha32)

    def linear(a, b, bias):
        return jnp.matmul(a, b, precision=HI) + bias

    # sums of 6 (dbias, db) or 5 (da) terms; 8 more for the activation's
    # derivative
    check_grads(lambda a, b, bias: sj.matmul_bias_act(a, b, bias, act, alpha), ref,
                (a, b, bias), dt, 6 + 8, "%s alpha=%s" % (act, alpha), mag_fn=linear)


def test_grad_matmul_bias_act_transposed_vmapped(sj):
    rng = np.random.default_rng(25)
    a, b = rand(rng, (3, 4, 6), F64), rand(rng, (5, 4), F64)
    bias = rand(rng, (5,), F64)

    def loss(fn):
        return lambda a, b, bias: jnp.sum(
            jax.vmap(fn, in_axes=(0, None, None))(a, b, bias) ** 2)

    got = jax.jit(jax.grad(loss(lambda a, b, c: sj.matmul_bias_act(
        a, b, c, "elu", transpose_a=True, transpose_b=True)), (0, 1, 2)))(a, b, bias)
    ref = jax.jit(jax.grad(loss(lambda a, b, c: jax.nn.elu(
        jnp.matmul(a.T, b.T, precision=HI) + c)), (0, 1, 2)))(a, b, bias)
    for g, e in zip(got, ref):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_grad_vmap_one_operand_conv(sj):
    """grad of a vmapped conv whose filter is shared: the filter's cotangent
    is summed over the batch (custom_vjp's batching rule)."""
    rng = np.random.default_rng(26)
    xs, w = rand(rng, (3, 1, 6, 6, 2), F64), rand(rng, (3, 3, 2, 2), F64)

    def loss(conv):
        return lambda xs, w: jnp.sum(jax.vmap(lambda x: conv(x, w))(xs) ** 2)

    got = jax.jit(jax.grad(loss(lambda x, w: sj.conv2d(x, w, strides=(2, 1))),
                           (0, 1)))(xs, w)
    ref = jax.jit(jax.grad(loss(lambda x, w: lax_conv(x, w, (2, 1), "SAME", (1, 1))),
                           (0, 1)))(xs, w)
    for g, e in zip(got, ref):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
