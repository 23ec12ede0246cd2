"""Bad calls: each raises JAX's runtime error with the handler's message
(the target's name, the operand or attribute, what was expected and what
came), queues nothing on the stream, and the process goes on: a good call
right after works.

Bad ranks, missing attributes and wrong attribute types cannot come from
the wrappers (they compute the result shape and pass every attribute), so
those cases call jax.ffi.ffi_call directly."""
import jax
import numpy as np
import pytest

from jaxutil import jax_module, sj  # noqa: F401 (fixtures)

F32, F64 = np.float32, np.float64
JaxRuntimeError = jax.errors.JaxRuntimeError


def ffi(target, shape, dtype, *operands, **attrs):
    return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(shape, dtype),
                            vmap_method="broadcast_all")(*operands, **attrs)


def conv_attrs(strides=(1, 1), dilations=(1, 1), padding="SAME", explicit=(0, 0, 0, 0)):
    return dict(strides=np.array(strides, np.int64), dilations=np.array(dilations, np.int64),
                padding=padding, explicit_paddings=np.array(explicit, np.int64))


def ones(*shape, dt=F32):
    return np.ones(shape, dt)


MM = dict(transpose_a=False, transpose_b=False)

# name -> (thunk given simdev.jax, error code, message regex)
CASES = {
    # dtype
    "matmul_int32": (lambda sj: sj.matmul(ones(2, 3, dt=np.int32), ones(3, 2, dt=np.int32)),
                     "INVALID_ARGUMENT",
                     r"simdev_matmul: operand a must be float32 or float64, got s32"),
    "matmul_mixed": (lambda sj: sj.matmul(ones(2, 3), ones(3, 2, dt=F64)),
                     "INVALID_ARGUMENT", r"simdev_matmul: operand b must be f32 like a, got f64"),
    "relu_f16": (lambda sj: sj.relu(ones(3, dt=np.float16)),
                 "INVALID_ARGUMENT", r"simdev_relu: operand x must be float32 or float64, got f16"),
    "conv_int": (lambda sj: sj.conv2d(ones(1, 4, 4, 2, dt=np.int32), ones(3, 3, 2, 2, dt=np.int32)),
                 "INVALID_ARGUMENT", r"simdev_conv2d: operand x must be float32 or float64"),
    # rank
    "matmul_rank1": (lambda sj: ffi("simdev_matmul", (2,), F32, ones(3), ones(3, 2), **MM),
                     "INVALID_ARGUMENT", r"simdev_matmul: operand a must have rank >= 2, got 1"),
    "conv_rank3": (lambda sj: ffi("simdev_conv2d", (4, 4, 2), F32, ones(4, 4, 2), ones(3, 3, 2, 2),
                                  **conv_attrs()),
                   "INVALID_ARGUMENT", r"simdev_conv2d: operand x .*rank"),
    # mismatched dims
    "matmul_k": (lambda sj: sj.matmul(ones(2, 3), ones(4, 2)),
                 "INVALID_ARGUMENT",
                 r"simdev_matmul: contracting dims differ: operand a has k = 3 .* operand b has 4"),
    "matmul_batch": (lambda sj: sj.matmul(ones(2, 2, 3), ones(3, 3, 2)),
                     "INVALID_ARGUMENT",
                     r"simdev_matmul: operand b must have the batch dims \[2\] of operand a, "
                     r"got \[3\]"),
    "bias_len": (lambda sj: sj.matmul_bias_act(ones(2, 3), ones(3, 2), ones(3)),
                 "INVALID_ARGUMENT",
                 r"simdev_matmul_bias_act: operand bias must have shape \[2\], got \[3\]"),
    "conv_depth": (lambda sj: sj.conv2d(ones(1, 4, 4, 3), ones(3, 3, 2, 2)),
                   "INVALID_ARGUMENT",
                   r"simdev_conv2d: the input depth 3 \(operand x\) is not a multiple of the "
                   r"filter's input depth 2"),
    "relu_grad_shapes": (lambda sj: ffi("simdev_relu_grad", (3,), F32, ones(3), ones(4)),
                         "INVALID_ARGUMENT", r"simdev_relu_grad: operand x must have shape \[3\], "
                                             r"got \[4\]"),
    "matmul_result": (lambda sj: ffi("simdev_matmul", (2, 3), F32, ones(2, 3), ones(3, 2), **MM),
                      "INVALID_ARGUMENT",
                      r"simdev_matmul: result c must have shape \[2,2\], got \[2,3\]"),
    # attributes: missing, wrong type, wrong length, bad value, unexpected
    "matmul_missing": (lambda sj: ffi("simdev_matmul", (2, 2), F32, ones(2, 3), ones(3, 2),
                                      transpose_a=False),
                       "INVALID_ARGUMENT", r"simdev_matmul: attribute 'transpose_b' missing"),
    "conv_missing": (lambda sj: ffi("simdev_conv2d", (1, 4, 4, 2), F32, ones(1, 4, 4, 2),
                                    ones(3, 3, 2, 2), strides=np.array([1, 1], np.int64),
                                    padding="SAME", explicit_paddings=np.zeros(4, np.int64)),
                     "INVALID_ARGUMENT", r"simdev_conv2d: attribute 'dilations' missing"),
    "mba_missing": (lambda sj: ffi("simdev_matmul_bias_act", (2, 2), F32, ones(2, 3), ones(3, 2),
                                   ones(2), activation="relu", **MM),
                    "INVALID_ARGUMENT", r"simdev_matmul_bias_act: attribute 'alpha' missing"),
    "matmul_attr_type": (lambda sj: ffi("simdev_matmul", (2, 2), F32, ones(2, 3), ones(3, 2),
                                        transpose_a=np.int64(1), transpose_b=False),
                         "INVALID_ARGUMENT",
                         r"simdev_matmul: attribute 'transpose_a' must be a bool \(pred\) scalar, "
                         r"got s64 scalar"),
    "mba_alpha_f64": (lambda sj: ffi("simdev_matmul_bias_act", (2, 2), F32, ones(2, 3),
                                     ones(3, 2), ones(2), activation="relu",
                                     alpha=np.float64(0.2), **MM),
                      "INVALID_ARGUMENT", r"simdev_matmul_bias_act: attribute 'alpha' must be an "
                                          r"f32 scalar, got f64"),
    "conv_strides_len": (lambda sj: ffi("simdev_conv2d", (1, 4, 4, 2), F32, ones(1, 4, 4, 2),
                                        ones(3, 3, 2, 2), **conv_attrs(strides=(1, 1, 1))),
                         "INVALID_ARGUMENT",
                         r"simdev_conv2d: attribute 'strides' must have 2 elements, got 3"),
    "conv_strides_zero": (lambda sj: ffi("simdev_conv2d", (1, 4, 4, 2), F32, ones(1, 4, 4, 2),
                                         ones(3, 3, 2, 2), **conv_attrs(strides=(0, 1))),
                          "INVALID_ARGUMENT", r"simdev_conv2d: attribute 'strides'"),
    "conv_padding": (lambda sj: ffi("simdev_conv2d", (1, 4, 4, 2), F32, ones(1, 4, 4, 2),
                                    ones(3, 3, 2, 2), **conv_attrs(padding="FULL")),
                     "INVALID_ARGUMENT",
                     r"simdev_conv2d: attribute 'padding' must be SAME, VALID or EXPLICIT, "
                     r"got 'FULL'"),
    "mba_activation": (lambda sj: ffi("simdev_matmul_bias_act", (2, 2), F32, ones(2, 3),
                                      ones(3, 2), ones(2), activation="swish",
                                      alpha=np.float32(0.2), **MM),
                       "INVALID_ARGUMENT",
                       r"simdev_matmul_bias_act: attribute 'activation' must be one of .*"
                       r"got 'swish'"),
    "matmul_unexpected": (lambda sj: ffi("simdev_matmul", (2, 2), F32, ones(2, 3), ones(3, 2),
                                         precision=np.int64(3), **MM),
                          "INVALID_ARGUMENT", r"simdev_matmul: unexpected attribute 'precision'"),
    # what simdev lacks
    "backprop_groups": (lambda sj: ffi("simdev_conv2d_backprop_input", (1, 4, 4, 4), F32,
                                       ones(1, 4, 4, 4), ones(3, 3, 2, 4), **conv_attrs()),
                        "UNIMPLEMENTED",
                        r"simdev_conv2d_backprop_input: grouped convolutions"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_call_raises_and_process_goes_on(sj, name):
    thunk, code, pattern = CASES[name]
    before = sj.counts()
    with pytest.raises(JaxRuntimeError, match=pattern) as info:
        jax.block_until_ready(thunk(sj))
    assert str(info.value).startswith(code + ":"), str(info.value)
    # rejected on XLA's thread: nothing was queued
    assert sj.counts() == before
    # the next call works
    a = np.arange(6.0, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(sj.matmul(a, a.T)), a @ a.T)
    assert sj.counts()[0] == before[0] + 1


def test_bad_call_inside_jit(sj):
    """An invalid call in a jitted program fails that execution only; the
    program's good twin and the same program with good shapes run."""
    bad = jax.jit(lambda a, b: sj.relu(sj.matmul(a, b)))
    with pytest.raises(JaxRuntimeError, match=r"simdev_matmul: contracting dims differ"):
        jax.block_until_ready(bad(ones(2, 3), ones(4, 2)))
    got = bad(ones(2, 3), ones(3, 2))
    np.testing.assert_array_equal(np.asarray(got), np.full((2, 2), 3.0, F32))


def test_wrapper_argument_errors(sj):
    """What the wrappers need to compute the result shape is checked in
    Python, with a ValueError naming the argument."""
    with pytest.raises(ValueError, match=r"simdev.jax.matmul: operands must have rank >= 2"):
        sj.matmul(ones(3), ones(3, 2))
    with pytest.raises(ValueError, match=r"simdev.jax.conv2d: padding must be"):
        sj.conv2d(ones(1, 4, 4, 2), ones(3, 3, 2, 2), padding="FULL")
    with pytest.raises(ValueError, match=r"simdev.jax.matmul_bias_act: activation must be one"):
        sj.matmul_bias_act(ones(2, 3), ones(3, 2), ones(2), activation="swish")
    np.testing.assert_array_equal(np.asarray(sj.relu(np.array([-1.0, 2.0], F32))), [0.0, 2.0])


@pytest.mark.parametrize("ws,pattern", [
    ((3, 3, 2, 4), r"the input depth 5 \(x\) is not a multiple of the filter's input depth 2"),
    ((3, 3, 1, 7), r"the output depth 7 \(w\) is not a multiple of the groups 5")])
def test_grad_of_bad_groups_under_jit(sj, ws, pattern):
    """Under jit the backward pass is traced before the forward runs: its
    split into groups names the bad depth itself (the forward's handler
    names it when the forward runs first, as in CASES' conv_depth)."""
    f = jax.jit(jax.grad(lambda x, w: sj.conv2d(x, w).sum(), (0, 1)))
    with pytest.raises(ValueError, match=r"simdev.jax.conv2d: " + pattern):
        f(ones(1, 4, 4, 5), ones(*ws))


# strides / dilations that are not a positive int or a pair of them: floats
# are not rounded (1.7 is not 1), bools are not ints
BAD_PAIRS = [(0, 1), (1.7, 1), (1, 1.0), 1.5, 0, -2, (1, 1, 1), (1,), "11", (True, 1),
             None, np.array([1.0, 1.0])]


@pytest.mark.parametrize("name", ["strides", "dilations"])
@pytest.mark.parametrize("value", BAD_PAIRS, ids=repr)
def test_conv2d_bad_pair(sj, name, value):
    with pytest.raises(ValueError, match=r"simdev.jax.conv2d: %s must be a positive int or a "
                                         r"pair of positive ints, got " % name):
        sj.conv2d(ones(1, 6, 6, 2), ones(3, 3, 2, 2), **{name: value})


BAD_PADDINGS = [((1, 1), (1,)), ((1, 1),), (1, 1), 1, ((1, 1), (1, -1)), ((1.5, 1), (1, 1)),
                ((1, 1), (1, 1), (1, 1)), "same", None, ((True, 0), (0, 0))]


@pytest.mark.parametrize("padding", BAD_PADDINGS, ids=repr)
def test_conv2d_bad_padding(sj, padding):
    with pytest.raises(ValueError, match=r"simdev.jax.conv2d: padding must be 'SAME', 'VALID' "
                                         r"or \(\(top, bottom\), \(left, right\)\)"):
        sj.conv2d(ones(1, 6, 6, 2), ones(3, 3, 2, 2), padding=padding)


def test_conv2d_int_and_numpy_arguments(sj):
    """An int s means (s, s) (as in TF's conv2d); NumPy integers are ints.
    Same result as the explicit pairs, bit for bit."""
    rng = np.random.default_rng(50)
    x, w = rng.uniform(-1, 1, (1, 9, 9, 2)).astype(F32), rng.uniform(-1, 1, (3, 3, 2, 3)).astype(F32)
    want = np.asarray(sj.conv2d(x, w, strides=(2, 2), padding=((1, 2), (0, 1)),
                                dilations=(2, 2)))
    assert want.shape == (1, 4, 3, 3)   # (9 + 3 - 5) // 2 + 1, (9 + 1 - 5) // 2 + 1
    for kw in (dict(strides=2, dilations=2),
               dict(strides=np.int64(2), dilations=np.array([2, 2])),
               dict(strides=[2, 2], dilations=(np.int32(2), 2))):
        got = sj.conv2d(x, w, padding=np.array([[1, 2], [0, 1]]), **kw)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=repr(kw))
