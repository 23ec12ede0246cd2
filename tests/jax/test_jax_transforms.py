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

from jaxutil import (assert_close, enqueued, HI, jax_module, jnp_act, lax_conv,  # noqa: F401
                     rand, sj)

F64 = np.float64


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

def check_grads(sj_fn, ref_fn, args, dt, k, what, mag_fn=None, weight=None):
    """jax.grad of sum(f * r) for a fixed random r (every output element
    matters) w.r.t. every argument, simdev vs reference. Returns the
    simdev gradients.

    Bound: each gradient is a sum of at most k products (the caller counts
    them), so each side is within gamma_k times the sum of the magnitudes
    of its terms of the exact value: the gradient of the same loss through
    the linear part of f (mag_fn, default ref_fn) with every operand and r
    replaced by its magnitude. An activation act(z) after the linear part
    multiplies r by act'(z), which is at most 1 in magnitude but computed
    from the rounded output y: its error |act''| |y - y_exact| scales with
    z's magnitude |a| @ |b| (+ |bias|), not with 1. So for an activation
    with act'' != 0 the caller passes `weight` (>= 1, r's shape; r's
    magnitude is multiplied by it) and adds the forward pass's own length
    and a few ulps to k; see test_grad_matmul_bias_act."""
    rng = np.random.default_rng(99)
    out = ref_fn(*args)
    r = rand(rng, out.shape, dt)
    argnums = tuple(range(len(args)))

    def loss(fn, r):
        return lambda *xs: jnp.sum(fn(*xs) * r)

    # jitted: one compilation each instead of one per eager primitive
    got = jax.jit(jax.grad(loss(sj_fn, r), argnums))(*args)
    ref = jax.jit(jax.grad(loss(ref_fn, r), argnums))(*args)
    rmag = np.abs(r) if weight is None else np.abs(r) * weight
    mag = jax.jit(jax.grad(loss(mag_fn or ref_fn, rmag), argnums))(
        *[np.abs(x) for x in args])
    for i, (g, e, m) in enumerate(zip(got, ref, mag)):
        assert g.shape == np.shape(args[i]) and g.dtype == dt
        assert_close(g, e, np.abs(m), k, dt, what="%s d/darg%d" % (what, i))
    return got


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
    # the forward product is needed (the loss is not linear in it)
    assert targets(f.lower(a, b).compile().as_text()) == {"simdev_matmul": 3}
    got = f(a, b)

    def ref_loss(a, b):
        return jnp.sum(jnp.matmul(a, b, precision=HI) ** 2)

    ref = jax.grad(ref_loss, (0, 1))(a, b)
    # da = 2 c @ b^T with c = a @ b: c is within gamma_4 |a| @ |b| of exact
    # and the second product adds gamma_5 (db: gamma_3), so each side is
    # within gamma_(4+5) 2 (|a| @ |b|) @ |b|^T, which is the same gradient
    # taken with |a| and |b| (and likewise for db)
    mag = jax.grad(ref_loss, (0, 1))(np.abs(a), np.abs(b))
    for g, e, m in zip(got, ref, mag):
        assert_close(g, e, m, 4 + 5, F64)


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
    # both backprops ran on simdev, one call each also with groups (the
    # forward result is unused by the jitted gradient, and XLA drops that
    # pure call)
    assert enqueued(sj) - before == 2, groups


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_grad_conv2d_input_depth_zero(sj, jit):
    """An input of depth 0 against a filter of input depth 2: the forward
    gives zeros (the handler's groups = 0), and so does the gradient: dx
    of depth 0, dw all zeros (a regression: the grouped backward once
    divided by the group count)."""
    x = np.zeros((1, 4, 4, 0), np.float32)
    w = np.ones((3, 3, 2, 4), np.float32)
    f = jax.grad(lambda x, w: jnp.sum(sj.conv2d(x, w) ** 2), (0, 1))
    dx, dw = (jax.jit(f) if jit else f)(x, w)
    assert dx.shape == (1, 4, 4, 0) and dw.shape == w.shape
    assert not np.any(np.asarray(dw))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_grad_grouped_conv_is_per_group_conv(sj, dt):
    """A grouped convolution's gradient (its groups as a batch dim of one
    backprop call each) equals, bit for bit, the one-group gradients of
    its groups computed one by one: the handler runs the same arithmetic
    on each batch element."""
    rng = np.random.default_rng(27)
    g, cg, og = 3, 2, 2
    x, w = rand(rng, (2, 7, 6, g * cg), dt), rand(rng, (3, 2, cg, g * og), dt)
    dy_r = rand(rng, (2, 4, 3, g * og), dt)
    cfg = dict(strides=(2, 2), padding=((1, 1), (0, 1)), dilations=(1, 2))

    def grads(x, w, dy):
        return jax.vjp(lambda x, w: sj.conv2d(x, w, **cfg), x, w)[1](dy)

    dx, dw = jax.jit(grads)(x, w, dy_r)
    assert dx.shape == x.shape and dw.shape == w.shape
    for i in range(g):
        xi = x[..., i * cg:(i + 1) * cg]
        wi, dyi = w[..., i * og:(i + 1) * og], dy_r[..., i * og:(i + 1) * og]
        dxi, dwi = jax.jit(grads)(xi, wi, dyi)
        np.testing.assert_array_equal(np.asarray(dx)[..., i * cg:(i + 1) * cg], dxi)
        np.testing.assert_array_equal(np.asarray(dw)[..., i * og:(i + 1) * og], dwi)


def test_grad_depthwise_conv_is_two_calls(sj):
    """A depthwise convolution with 64 channels: the compiled gradient has
    one call of each backprop (not one pair per channel)."""
    x, w = np.ones((1, 5, 5, 64), np.float32), np.ones((3, 3, 1, 64), np.float32)
    f = jax.jit(jax.grad(lambda x, w: jnp.sum(sj.conv2d(x, w)), (0, 1)))
    assert targets(f.lower(x, w).compile().as_text()) == {
        "simdev_conv2d_backprop_input": 1, "simdev_conv2d_backprop_filter": 1}
    dx, dw = f(x, w)
    ref = jax.grad(lambda x, w: jnp.sum(lax_conv(x, w, (1, 1), "SAME")), (0, 1))(x, w)
    # sums of at most 25 ones: exact in float32
    np.testing.assert_array_equal(dx, ref[0])
    np.testing.assert_array_equal(dw, ref[1])


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_grad_relu(sj, dt):
    rng = np.random.default_rng(23)
    x = rand(rng, (4, 6), dt)
    before = enqueued(sj)
    g = jax.grad(lambda x: jnp.sum(sj.relu(x) * jnp.arange(24.0).reshape(4, 6)))(x)
    g = np.asarray(g)   # ready before the count is read
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

    check_grads(lambda a, b, bias: sj.matmul_bias_act(a, b, bias, act, alpha), ref,
                (a, b, bias), dt, K_ACT, "%s alpha=%s" % (act, alpha), mag_fn=linear,
                weight=act_weight(act, np.abs(a) @ np.abs(b) + np.abs(bias)))


# The gradients' k for matmul_bias_act below: each gradient sums at most 6
# (dbias, db) or 5 (da) products of the scaled r with an operand; r's
# scale act'(z) is computed from y, which is within gamma_5 |z| (4 products
# and the bias) plus the libm function's few ulps (say 6) of the exact
# value, and |act''| <= 2 (tanh: 2|y|, sigmoid: |1 - 2y|, elu: 1), plus 3
# roundings in act' and its product with r. With r's magnitude weighted by
# 1 + 2 |z| (act_weight), each side stays within gamma_(6 + 5 + 2*6 + 3).
K_ACT = 6 + 5 + 2 * 6 + 3


def act_weight(act, zmag):
    """The weight of check_grads for an activation: 1 + 2 |z|'s magnitude
    where act'' != 0, none for the piecewise linear ones (act'' = 0; the
    kinks have measure zero)."""
    return 1 + 2 * zmag if act in ("tanh", "sigmoid", "elu") else None


def test_grad_matmul_bias_act_transposed_vmapped(sj):
    rng = np.random.default_rng(25)
    a, b = rand(rng, (3, 4, 6), F64), rand(rng, (5, 4), F64)
    bias = rand(rng, (5,), F64)

    def batched(fn):
        return lambda a, b, bias: jax.vmap(fn, in_axes=(0, None, None))(a, b, bias)

    def ref(a, b, c):
        return jax.nn.elu(jnp.matmul(a.T, b.T, precision=HI) + c)

    def linear(a, b, c):
        return jnp.matmul(a.T, b.T, precision=HI) + c

    zmag = np.abs(np.swapaxes(a, -1, -2)) @ np.abs(b.T) + np.abs(bias)
    # db and dbias sum over the 3 x 6 rows of the batch (da over 5): 18
    # products where test_grad_matmul_bias_act has 6
    check_grads(batched(lambda a, b, c: sj.matmul_bias_act(
        a, b, c, "elu", transpose_a=True, transpose_b=True)), batched(ref),
                (a, b, bias), F64, K_ACT - 6 + 18, "elu transposed vmapped",
                mag_fn=batched(linear), weight=act_weight("elu", zmag))


def test_grad_vmap_one_operand_conv(sj):
    """grad of a vmapped conv whose filter is shared: the filter's cotangent
    is summed over the batch (custom_vjp's batching rule)."""
    rng = np.random.default_rng(26)
    xs, w = rand(rng, (3, 1, 6, 6, 2), F64), rand(rng, (3, 3, 2, 2), F64)

    def batched(conv):
        return lambda xs, w: jax.vmap(lambda x: conv(x, w))(xs)

    # dx sums over 3 x 3 taps x 2 output channels, dw over 3 batch x 3 x 6
    # output positions
    check_grads(batched(lambda x, w: sj.conv2d(x, w, strides=(2, 1))),
                batched(lambda x, w: lax_conv(x, w, (2, 1), "SAME")), (xs, w), F64,
                max(3 * 3 * 2, 3 * 3 * 6), "vmapped conv, shared filter")


# ---- higher orders -----------------------------------------------------------

def hessians(fn, args):
    """Hessian of a scalar fn w.r.t. every argument pair, by reverse over
    reverse (jax.hessian, jacfwd over jacrev, needs forward mode)."""
    argnums = tuple(range(len(args)))
    return jax.jit(jax.jacrev(jax.jacrev(fn, argnums), argnums))(*args)


def check_hessians(sj_fn, ref_fn, mag_fn, args, k, dt, what):
    """simdev's Hessians by reverse over reverse vs jax.hessian of the jnp
    version. Bound: a second derivative by reverse over reverse runs four
    passes (forward, backward, and the backward's own forward and
    backward); the caller gives k >= the sum of their longest sums. Each
    side is then within gamma_k of the exact value times the same Hessian
    of mag_fn (the loss with every term made non-negative, so that each
    term of the Hessian's expression is at least the magnitude of the
    exact one) at the operands' magnitudes."""
    got = hessians(sj_fn, args)
    argnums = tuple(range(len(args)))
    ref = jax.jit(jax.hessian(ref_fn, argnums))(*args)
    mag = jax.jit(jax.hessian(mag_fn, argnums))(*[np.abs(x) for x in args])
    for i in argnums:
        for j in argnums:
            assert got[i][j].dtype == dt
            assert_close(got[i][j], ref[i][j], np.abs(mag[i][j]), k, dt,
                         what="%s d2/darg%d darg%d" % (what, i, j))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_hessian_matmul(sj, dt):
    """L = sum((op(a) @ b)^2 * r): its second derivatives are products of
    the operands and r, all through simdev matmuls (the backward's matmuls
    are custom_vjp matmuls in turn)."""
    rng = np.random.default_rng(28)
    a, b = rand(rng, (4, 3), dt), rand(rng, (4, 2), dt)
    r = rand(rng, (3, 2), dt)

    def loss(mm, r):
        return lambda a, b: jnp.sum(mm(a, b) ** 2 * r)

    # four passes, each summing at most max(k, m, n) = 4 terms
    check_hessians(loss(lambda a, b: sj.matmul(a, b, transpose_a=True), r),
                   loss(lambda a, b: jnp.matmul(a.T, b, precision=HI), r),
                   loss(lambda a, b: jnp.matmul(a.T, b, precision=HI), np.abs(r)),
                   (a, b), 4 * 4, dt, "matmul")


def test_hessian_relu_matmul(sj):
    """relu's derivative (relu_grad, a custom_vjp whose derivative in x is
    0) under a second derivative: L = sum(relu(a @ b)^2)."""
    rng = np.random.default_rng(29)
    a, b = rand(rng, (3, 4), F64), rand(rng, (4, 5), F64)

    def loss(mm, act):
        return lambda a, b: jnp.sum(act(mm(a, b)) ** 2)

    mm = lambda a, b: jnp.matmul(a, b, precision=HI)   # noqa: E731
    # relu's masks are exact (its kink has measure zero), so the magnitude
    # loss is sum(z^2); four passes of sums of at most max(k, m, n) = 5
    check_hessians(loss(sj.matmul, sj.relu), loss(mm, jax.nn.relu),
                   loss(mm, lambda z: z), (a, b), 4 * 5, F64, "relu")


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "elu", "relu"])
def test_hessian_matmul_bias_act(sj, act):
    """act's second derivative through the fused op's output y (the
    residual is the custom_vjp's own result, so it is differentiated too).

    L = sum(r * act(z)), z = a @ b + bias. Its Hessian's terms are
    r act''(z) b b^T, r act''(z) a b and r act'(z) (the mixed one's
    diagonal), with |act'| <= 1 and |act''| <= 1 for these four, so they
    are at most the terms of the Hessian of sum(|r| (z^2 / 2 + z)) at the
    operands' magnitudes. act' and act'' are computed from the rounded y
    (within gamma_5 |z| plus 6 libm ulps of exact, as in K_ACT), with
    derivatives in y of at most 2 (act') and 4 (act''): r's magnitude is
    weighted by 1 + 4 |z|, and k adds the forward's 5 terms, 2 * 6 ulps and
    6 roundings to the four passes' sums of at most 4 terms."""
    rng = np.random.default_rng(30)
    a, b = rand(rng, (3, 4), F64), rand(rng, (4, 2), F64)
    bias, r = rand(rng, (2,), F64), rand(rng, (3, 2), F64)
    zmag = np.abs(a) @ np.abs(b) + np.abs(bias)

    def ref(a, b):
        return jnp.sum(r * jnp_act(jnp.matmul(a, b, precision=HI) + bias, act, 0.2))

    def mag(a, b):
        z = jnp.matmul(a, b, precision=HI) + np.abs(bias)
        return jnp.sum(np.abs(r) * (1 + 4 * zmag) * (z * z / 2 + z))

    check_hessians(lambda a, b: jnp.sum(r * sj.matmul_bias_act(a, b, bias, act)), ref, mag,
                   (a, b), 4 * 4 + 5 + 2 * 6 + 6, F64, act)


def test_hessian_conv2d(sj):
    """Second derivatives of L = sum(conv(x, w)^2): the backprops' own vjps
    (conv2d and the other backprop) on simdev; a grouped convolution, whose
    backprops take the groups as a batch dim at every order."""
    rng = np.random.default_rng(31)
    x, w = rand(rng, (1, 4, 4, 4), F64), rand(rng, (2, 2, 2, 4), F64)

    def loss(conv):
        return lambda x, w: jnp.sum(conv(x, w) ** 2)

    def lconv(x, w):
        return lax_conv(x, w, (1, 1), ((1, 0), (0, 1)))

    # four passes, each summing at most 4 x 4 output positions (dw; y and
    # dx sum 2 x 2 x 2 taps)
    check_hessians(loss(lambda x, w: sj.conv2d(x, w, padding=((1, 0), (0, 1)))),
                   loss(lconv), loss(lconv), (x, w), 4 * 16, F64, "conv2d")


def test_forward_mode_is_refused(sj):
    """custom_vjp has no JVP: jax.jvp, jacfwd and jax.hessian raise (the
    module's docstring says so)."""
    a = np.ones((2, 2), np.float32)
    for transform in (lambda f: jax.jacfwd(f)(a), lambda f: jax.hessian(
            lambda a: jnp.sum(f(a)))(a), lambda f: jax.jvp(f, (a,), (a,))):
        with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
            transform(lambda a: sj.matmul(a, a))
