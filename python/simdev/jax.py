"""simdev.jax: simdev's device and arithmetic as JAX FFI targets.

``libsimdev_xla.so`` (installed beside this module) holds XLA typed-FFI
handlers written in C (src/xla/): each validates its operands and attributes
on the thread XLA calls it from, queues the work on a simdev stream and returns an
``XLA_FFI_Future`` that the stream's worker completes. The library links
simdev's device and arithmetic, never TensorFlow, and neither does this
module: a JAX process that uses it does not load TensorFlow.

    import jax, jax.numpy as jnp
    import simdev.jax as sj
    sj.register()                       # once; raises on a bad SIMDEV_* setting
    y = jax.jit(lambda a, b: sj.relu(sj.matmul(a, b)))(a, b)

The wrappers (``matmul``, ``conv2d``, ``relu``, ``matmul_bias_act``) call
``register()`` themselves. Each calls ``jax.ffi.ffi_call`` with
``vmap_method="broadcast_all"``: under ``vmap`` every operand gets the batch
dimension in front (an unbatched operand is broadcast), and the handlers take
any number of identical leading batch dimensions on all operands and the
result.

Differentiation: ``ffi_call`` has no derivative of its own, so each wrapper
is a ``jax.custom_vjp`` whose backward pass runs simdev targets too. Its
forward and backward passes are made of the same differentiable wrappers
(the backward of a matmul is two matmuls; of a convolution, its two
backprops, which are ``custom_vjp``s of each other and of the convolution;
of relu, relu_grad, itself a ``custom_vjp``), so reverse mode works to any
order: ``jax.grad``, ``jax.vjp``, ``jax.jacrev`` and nested ones
(``jax.grad(jax.grad(f))``, ``jax.jacrev(jax.jacrev(f))`` for a Hessian).
Forward mode does not: a ``custom_vjp`` has no JVP, so ``jax.jvp``,
``jax.jacfwd``, ``jax.hessian`` (which is ``jacfwd(jacrev)``) and the linear
function ``jax.linearize`` returns raise JAX's TypeError ("can't apply
forward-mode autodiff (jvp) to a custom_vjp function").

Operands are float32 or float64 (all of one call alike; float64 needs
``jax_enable_x64``). The wrappers work out the result shape and pass the
rest to the handlers, which check every dtype, rank, dimension and
attribute: a bad call raises JAX's error with the handler's message, e.g.
"simdev_matmul: operand a must be float32 or float64, got s32".

Attributes reach the handlers as XLA FFI attributes: Python bools as pred
scalars, strings as strings, ``np.float32`` as f32 scalars and int64 NumPy
arrays as s64 arrays (a Python tuple is not an FFI attribute type).

Thread contract: ``register()`` may be called from any thread, any number of
times; the first call loads the library, creates the device and registers
the targets under a lock, later calls return at once.
"""

import ctypes
import functools
import operator
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np

LIBRARY_NAME = "libsimdev_xla.so"

# Handler symbols are simdev_xla_<name>; the JAX target of each is
# simdev_<name> (docs/xla-custom-calls.md).
HANDLERS = ("matmul", "matmul_bias_act", "conv2d", "conv2d_backprop_input",
            "conv2d_backprop_filter", "relu", "relu_grad", "empty")

ACTIVATIONS = ("none", "relu", "relu6", "elu", "leaky_relu", "tanh",
               "sigmoid")

_lock = threading.Lock()
_lib = None          # the loaded library, once register() succeeded
_registered = False


def library_path():
    """Absolute path of the installed libsimdev_xla.so."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        LIBRARY_NAME)
    if not os.path.exists(path):
        raise FileNotFoundError(
            "%s is not installed next to simdev.jax (expected %s)"
            % (LIBRARY_NAME, path))
    return path


def _load():
    lib = ctypes.CDLL(library_path())
    lib.simdev_xla_init.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.simdev_xla_init.restype = ctypes.c_int
    lib.simdev_xla_counts.argtypes = [ctypes.POINTER(ctypes.c_uint64)] * 3
    lib.simdev_xla_counts.restype = None
    return lib


def register():
    """Load libsimdev_xla.so, create the simdev device and register every
    target with XLA:CPU. Idempotent.

    Raises ValueError with the library's message when the device cannot be
    created (e.g. a bad SIMDEV_MEMORY_MB); nothing is registered then, and
    a later call tries again.
    """
    global _lib, _registered
    with _lock:
        if _registered:
            return
        lib = _lib if _lib is not None else _load()
        _lib = lib
        msg = ctypes.create_string_buffer(512)
        rc = lib.simdev_xla_init(msg, len(msg))
        if rc != 0:
            text = msg.value.decode("utf-8", "replace") or "error %d" % rc
            raise ValueError("simdev.jax.register: %s" % text)
        for name in HANDLERS:
            fn = getattr(lib, "simdev_xla_" + name)
            jax.ffi.register_ffi_target("simdev_" + name,
                                        jax.ffi.pycapsule(fn),
                                        platform="cpu")
        _registered = True


def counts():
    """(enqueued, completed, failed): work items the handlers queued on the
    simdev stream since the process started, and how many of them completed
    OK or with an error (simdev_xla_counts). Calls that failed validation
    or had nothing to compute are not counted."""
    register()
    vals = [ctypes.c_uint64() for _ in range(3)]
    _lib.simdev_xla_counts(*[ctypes.byref(v) for v in vals])
    return tuple(v.value for v in vals)


def _call(target, out_shape, out_dtype, *operands, **attrs):
    register()
    return jax.ffi.ffi_call(
        target, jax.ShapeDtypeStruct(tuple(out_shape), out_dtype),
        vmap_method="broadcast_all")(*operands, **attrs)


def _shape_error(fn, what):
    return ValueError("simdev.jax.%s: %s" % (fn, what))


# ---- matmul ---------------------------------------------------------------

def _matmul_call(a, b, ta, tb):
    if a.ndim < 2 or b.ndim < 2:
        raise _shape_error("matmul", "operands must have rank >= 2, got "
                           "a %s and b %s" % (a.shape, b.shape))
    m = a.shape[-1] if ta else a.shape[-2]
    n = b.shape[-2] if tb else b.shape[-1]
    return _call("simdev_matmul", a.shape[:-2] + (m, n), a.dtype, a, b,
                 transpose_a=bool(ta), transpose_b=bool(tb))


def _matmul_grads(a, b, dc, ta, tb):
    """Gradients of c = op(a) @ op(b) (op = transpose when set), as simdev
    matmuls: d op(a) = dc @ op(b)^T and d op(b) = op(a)^T @ dc, transposed
    back where the operand itself was transposed. They are _matmul, the
    custom_vjp, so the backward pass is differentiable in turn."""
    if ta:
        da = _matmul(b, dc, tb, True)        # op(b) @ dc^T
    else:
        da = _matmul(dc, b, False, not tb)   # dc @ op(b)^T
    if tb:
        db = _matmul(dc, a, True, ta)        # dc^T @ op(a)
    else:
        db = _matmul(a, dc, not ta, False)   # op(a)^T @ dc
    return da, db


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _matmul(a, b, ta, tb):
    return _matmul_call(a, b, ta, tb)


def _matmul_fwd(a, b, ta, tb):
    # _matmul, not the raw call: under a second differentiation this runs
    # with the outer derivative's tracers, which an ffi_call refuses.
    return _matmul(a, b, ta, tb), (a, b)


def _matmul_bwd(ta, tb, res, dc):
    a, b = res
    return _matmul_grads(a, b, dc, ta, tb)


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def matmul(a, b, *, transpose_a=False, transpose_b=False):
    """c = op(a) @ op(b) on simdev. a [*B, m, k] ([*B, k, m] with
    transpose_a), b [*B, k, n] ([*B, n, k] with transpose_b), the same
    leading dims B on both; returns [*B, m, n] of a's dtype.
    Differentiable in reverse mode to any order (the module's docstring)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    return _matmul(a, b, bool(transpose_a), bool(transpose_b))


# ---- relu -----------------------------------------------------------------

def _relu_call(x):
    return _call("simdev_relu", x.shape, x.dtype, x)


def _relu_grad_call(dy, x):
    return _call("simdev_relu_grad", x.shape, x.dtype, dy, x)


@jax.custom_vjp
def _relu_grad(dy, x):
    return _relu_grad_call(dy, x)


def _relu_grad_fwd(dy, x):
    return _relu_grad(dy, x), x


def _relu_grad_bwd(x, ddx):
    # linear in dy; a step function of x (derivative 0 wherever defined)
    return _relu_grad(ddx, x), jnp.zeros_like(x)


_relu_grad.defvjp(_relu_grad_fwd, _relu_grad_bwd)


@jax.custom_vjp
def _relu(x):
    return _relu_call(x)


def _relu_fwd(x):
    return _relu(x), x


def _relu_bwd(x, dy):
    return (_relu_grad(dy, x),)


_relu.defvjp(_relu_fwd, _relu_bwd)


def relu(x):
    """max(x, 0) element-wise on simdev, any shape; the gradient is
    dy * (x > 0) (simdev_relu_grad), whose own derivative in x is 0.
    Reverse mode to any order (the module's docstring)."""
    return _relu(jnp.asarray(x))


# ---- conv2d ---------------------------------------------------------------

def _int(v):
    """v as an int if it is one (Python or NumPy integer: operator.index);
    TypeError for anything else, a float or a bool included."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("bool")
    return operator.index(v)


def _pair(v, name):
    """(h, w) from an int s (meaning (s, s)) or a sequence of two ints, all
    positive. Checked here because the result shape depends on it (the
    handler checks the attribute again)."""
    try:
        t = (_int(v),) * 2
    except TypeError:
        try:
            t = tuple(_int(i) for i in v)
        except TypeError:
            t = None
    if t is None or len(t) != 2 or min(t) < 1:
        raise _shape_error("conv2d", "%s must be a positive int or a pair "
                           "of positive ints, got %r" % (name, v))
    return t


def _conv_padding(padding):
    """(padding string, explicit_paddings tuple) for the handler."""
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise _shape_error("conv2d", "padding must be 'SAME', 'VALID' "
                               "or ((top, bottom), (left, right)), got %r"
                               % (padding,))
        return padding, (0, 0, 0, 0)
    try:
        (t, b), (l, r) = padding
        pads = tuple(_int(i) for i in (t, b, l, r))
    except (TypeError, ValueError):
        pads = None
    if pads is None or min(pads) < 0:
        raise _shape_error("conv2d", "padding must be 'SAME', 'VALID' or "
                           "((top, bottom), (left, right)) of non-negative "
                           "ints, got %r" % (padding,))
    return "EXPLICIT", pads


def _conv_out_size(size, k, stride, dil, pad, lo, hi):
    eff = (k - 1) * dil + 1
    if pad == "SAME":
        return -(-size // stride)
    if pad == "VALID":
        lo = hi = 0
    span = size + lo + hi - eff
    return span // stride + 1 if span >= 0 else 0


def _conv_attrs(cfg):
    strides, dilations, pad, explicit = cfg
    return dict(strides=np.array(strides, np.int64),
                dilations=np.array(dilations, np.int64),
                padding=pad,
                explicit_paddings=np.array(explicit, np.int64))


def _conv_call(x, w, cfg):
    if x.ndim < 4 or w.ndim != x.ndim:
        raise _shape_error("conv2d", "x must be NHWC (rank >= 4) and w HWIO "
                           "of the same rank, got x %s and w %s"
                           % (x.shape, w.shape))
    strides, dilations, pad, ex = cfg
    oh = _conv_out_size(x.shape[-3], w.shape[-4], strides[0], dilations[0],
                        pad, ex[0], ex[1])
    ow = _conv_out_size(x.shape[-2], w.shape[-3], strides[1], dilations[1],
                        pad, ex[2], ex[3])
    out = x.shape[:-3] + (oh, ow, w.shape[-1])
    return _call("simdev_conv2d", out, x.dtype, x, w, **_conv_attrs(cfg))


def _groups(c, cg, o):
    """g for an input depth c, a filter input depth cg and an output depth
    o (1 when cg or c is 0: an input of depth 0 gives zeros, which the
    one-group handlers compute too). The backward pass splits the channels
    into the groups before any handler sees them, so it checks what the
    forward's handler checks (under jit the backward is traced before the
    forward runs)."""
    if not cg or not c:
        return 1
    if c % cg:
        raise _shape_error("conv2d", "the input depth %d (x) is not a "
                           "multiple of the filter's input depth %d (w)"
                           % (c, cg))
    if o % (c // cg):
        raise _shape_error("conv2d", "the output depth %d (w) is not a "
                           "multiple of the groups %d" % (o, c // cg))
    return c // cg


def _to_groups(t, g):
    """[..., A, B, C, g*c] -> [..., g, A, B, C, c]: the channel groups of
    an NHWC tensor or of an HWIO filter's output channels as one more
    leading batch dim (group i: channels [i*c, (i+1)*c), TF's and lax's
    order), which the one-group backprop targets loop over in one call."""
    t = t.reshape(t.shape[:-1] + (g, t.shape[-1] // g))
    return jnp.moveaxis(t, -2, -5)


def _from_groups(t):
    """The inverse of _to_groups."""
    t = jnp.moveaxis(t, -5, -2)
    return t.reshape(t.shape[:-2] + (t.shape[-2] * t.shape[-1],))


def _grouped_shape(shape, g):
    return shape[:-4] + (g,) + shape[-4:-1] + (shape[-1] // g,)


def _bpi_call(dy, w, x_shape, cfg):
    """simdev_conv2d_backprop_input: dx of x's shape. The target takes one
    group; with g groups, the groups become a batch dim (one call)."""
    g = _groups(x_shape[-1], w.shape[-2], w.shape[-1])
    attrs = _conv_attrs(cfg)
    if g == 1:
        return _call("simdev_conv2d_backprop_input", x_shape, dy.dtype, dy,
                     w, **attrs)
    return _from_groups(_call("simdev_conv2d_backprop_input",
                              _grouped_shape(x_shape, g), dy.dtype,
                              _to_groups(dy, g), _to_groups(w, g), **attrs))


def _bpf_call(x, dy, w_shape, cfg):
    """simdev_conv2d_backprop_filter: dw of w's shape; groups as in
    _bpi_call."""
    g = _groups(x.shape[-1], w_shape[-2], w_shape[-1])
    attrs = _conv_attrs(cfg)
    if g == 1:
        return _call("simdev_conv2d_backprop_filter", w_shape, x.dtype, x,
                     dy, **attrs)
    return _from_groups(_call("simdev_conv2d_backprop_filter",
                              _grouped_shape(w_shape, g), x.dtype,
                              _to_groups(x, g), _to_groups(dy, g), **attrs))


# The convolution y = conv(x, w) is bilinear, and its two backprops are its
# transposes: dx = bpi(dy, w) = (d conv / dx)^T dy, dw = bpf(x, dy) =
# (d conv / dw)^T dy. So <dx', bpi(dy, w)> = <conv(dx', w), dy> =
# <w, bpf(dx', dy)> and <dw', bpf(x, dy)> = <conv(x, dw'), dy> =
# <x, bpi(dy, dw')>: each one's vjp is made of the other two, and every
# order of reverse-mode derivative stays on simdev.

@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _bpi(dy, w, x_shape, cfg):
    return _bpi_call(dy, w, x_shape, cfg)


def _bpi_fwd(dy, w, x_shape, cfg):
    return _bpi(dy, w, x_shape, cfg), (dy, w)


def _bpi_bwd(x_shape, cfg, res, ddx):
    dy, w = res
    return _conv2d(ddx, w, cfg), _bpf(ddx, dy, w.shape, cfg)


_bpi.defvjp(_bpi_fwd, _bpi_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _bpf(x, dy, w_shape, cfg):
    return _bpf_call(x, dy, w_shape, cfg)


def _bpf_fwd(x, dy, w_shape, cfg):
    return _bpf(x, dy, w_shape, cfg), (x, dy)


def _bpf_bwd(w_shape, cfg, res, ddw):
    x, dy = res
    return _bpi(dy, ddw, x.shape, cfg), _conv2d(x, ddw, cfg)


_bpf.defvjp(_bpf_fwd, _bpf_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _conv2d(x, w, cfg):
    return _conv_call(x, w, cfg)


def _conv2d_fwd(x, w, cfg):
    return _conv2d(x, w, cfg), (x, w)


def _conv2d_bwd(cfg, res, dy):
    x, w = res
    return _bpi(dy, w, x.shape, cfg), _bpf(x, dy, w.shape, cfg)


_conv2d.defvjp(_conv2d_fwd, _conv2d_bwd)


def conv2d(x, w, strides=(1, 1), padding="SAME", dilations=(1, 1)):
    """2-D convolution on simdev (im2col + GEMM, the code TF's Conv2D runs
    on SIMDEV). x NHWC [*B, N, H, W, C], w HWIO [*B, KH, KW, C/g, O] (g
    groups: w's input depth must divide C, and g must divide O). strides
    and dilations: a positive int s (meaning (s, s), as in TF's conv2d) or
    a pair (h, w) of positive ints; padding: "SAME", "VALID" or
    ((top, bottom), (left, right)) of non-negative ints. Ints are what
    operator.index accepts (Python and NumPy integers, not floats nor
    bools); anything else raises ValueError naming the argument. Returns
    [*B, N, OH, OW, O] of x's dtype.

    The gradient is simdev_conv2d_backprop_input and _filter, one call
    each, also for a grouped convolution (its groups become a batch dim).
    Reverse mode to any order (the module's docstring)."""
    x, w = jnp.asarray(x), jnp.asarray(w)
    pad, explicit = _conv_padding(padding)
    cfg = (_pair(strides, "strides"), _pair(dilations, "dilations"), pad,
           explicit)
    return _conv2d(x, w, cfg)


# ---- matmul_bias_act ------------------------------------------------------

def _mba_call(a, b, bias, ta, tb, act, alpha):
    if a.ndim < 2 or b.ndim < 2:
        raise _shape_error("matmul_bias_act", "operands must have rank >= 2,"
                           " got a %s and b %s" % (a.shape, b.shape))
    m = a.shape[-1] if ta else a.shape[-2]
    n = b.shape[-2] if tb else b.shape[-1]
    return _call("simdev_matmul_bias_act", a.shape[:-2] + (m, n), a.dtype,
                 a, b, bias, transpose_a=bool(ta), transpose_b=bool(tb),
                 activation=act, alpha=np.float32(alpha))


def _act_grad(act, alpha, y, z, dy):
    """dL/dz from dL/dy for y = act(z). Every activation's derivative is a
    function of its output y (the residual), except leaky_relu with a
    negative slope, whose y > 0 on both sides of 0: then z is kept too."""
    if act == "none":
        return dy
    if act == "relu":
        return _relu_grad(dy, y)   # y > 0 exactly where z > 0
    zero = jnp.zeros((), y.dtype)
    if act == "relu6":
        return jnp.where((y > 0) & (y < 6), dy, zero)
    if act == "elu":
        return jnp.where(y > 0, dy, dy * (y + 1))
    if act == "leaky_relu":
        pos = (z if z is not None else y) > 0
        return jnp.where(pos, dy, dy * jnp.asarray(alpha, y.dtype))
    if act == "tanh":
        return dy * (1 - y * y)
    if act == "sigmoid":
        return dy * y * (1 - y)
    raise AssertionError(act)   # checked in matmul_bias_act


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6))
def _mba(a, b, bias, ta, tb, act, alpha):
    return _mba_call(a, b, bias, ta, tb, act, alpha)


def _mba_fwd(a, b, bias, ta, tb, act, alpha):
    # _mba itself, not the raw call: y is a residual the backward pass
    # differentiates through under a second derivative
    y = _mba(a, b, bias, ta, tb, act, alpha)
    z = None
    if act == "leaky_relu" and alpha < 0:
        z = _mba(a, b, bias, ta, tb, "none", alpha)
    return y, (a, b, y, z)


def _mba_bwd(ta, tb, act, alpha, res, dy):
    a, b, y, z = res
    dz = _act_grad(act, alpha, y, z, dy)
    da, db = _matmul_grads(a, b, dz, ta, tb)
    return da, db, jnp.sum(dz, axis=-2)


_mba.defvjp(_mba_fwd, _mba_bwd)


def matmul_bias_act(a, b, bias, activation="relu", alpha=0.2, *,
                    transpose_a=False, transpose_b=False):
    """act(op(a) @ op(b) + bias) in one simdev call (TF's _FusedMatMul
    epilogue). bias [*B, n]; activation one of ACTIVATIONS; alpha is
    leaky_relu's slope, rounded to float32 (the handler's attribute is an
    f32 scalar, also for float64 operands; the gradient uses the same
    rounded slope). The backward pass is act's derivative (computed from the
    output; simdev_relu_grad for relu) and two simdev matmuls; the bias's
    gradient is a jnp sum over the rows. Reverse mode to any order (the
    module's docstring): the derivative of act's derivative goes through
    the output y, itself this function's result."""
    if activation not in ACTIVATIONS:
        raise _shape_error("matmul_bias_act", "activation must be one of %s,"
                           " got %r" % ("|".join(ACTIVATIONS), activation))
    a, b, bias = jnp.asarray(a), jnp.asarray(b), jnp.asarray(bias)
    return _mba(a, b, bias, bool(transpose_a), bool(transpose_b), activation,
                float(np.float32(alpha)))


def empty():
    """One call of simdev_empty: a float32 0 written through the stream
    (the fixed cost of a simdev FFI call)."""
    return _call("simdev_empty", (), jnp.float32)
