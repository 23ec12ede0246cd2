"""simdev.jax: simdev's device and arithmetic as JAX FFI targets.

``libsimdev_xla.so`` (installed beside this module) holds XLA typed-FFI
handlers written in C (src/xla/): each validates its operands and attributes
on XLA's thread, queues the work on a simdev stream and returns an
``XLA_FFI_Future`` that the stream's worker completes. The library links
simdev's device and arithmetic, never TensorFlow, and neither does this
module: a JAX process that uses it does not load TensorFlow.

    import jax, jax.numpy as jnp
    import simdev.jax as sj
    sj.register()                       # once; raises on a bad SIMDEV_* setting
    y = jax.jit(lambda a, b: sj.relu(sj.matmul(a, b)))(a, b)

The wrappers (``matmul``, ``conv2d``, ``relu``, ``matmul_bias_act``) call
``register()`` themselves. Each is a ``jax.custom_vjp`` whose backward pass
runs simdev targets too, and each calls ``jax.ffi.ffi_call`` with
``vmap_method="broadcast_all"``: under ``vmap`` every operand gets the batch
dimension in front (an unbatched operand is broadcast), and the handlers take
any number of identical leading batch dimensions on all operands and the
result.

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
    back where the operand itself was transposed."""
    if ta:
        da = _matmul_call(b, dc, tb, True)        # op(b) @ dc^T
    else:
        da = _matmul_call(dc, b, False, not tb)   # dc @ op(b)^T
    if tb:
        db = _matmul_call(dc, a, True, ta)        # dc^T @ op(a)
    else:
        db = _matmul_call(a, dc, not ta, False)   # op(a)^T @ dc
    return da, db


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _matmul(a, b, ta, tb):
    return _matmul_call(a, b, ta, tb)


def _matmul_fwd(a, b, ta, tb):
    return _matmul_call(a, b, ta, tb), (a, b)


def _matmul_bwd(ta, tb, res, dc):
    a, b = res
    return _matmul_grads(a, b, dc, ta, tb)


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def matmul(a, b, *, transpose_a=False, transpose_b=False):
    """c = op(a) @ op(b) on simdev. a [*B, m, k] ([*B, k, m] with
    transpose_a), b [*B, k, n] ([*B, n, k] with transpose_b), the same
    leading dims B on both; returns [*B, m, n] of a's dtype."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    return _matmul(a, b, bool(transpose_a), bool(transpose_b))


# ---- relu -----------------------------------------------------------------

def _relu_call(x):
    return _call("simdev_relu", x.shape, x.dtype, x)


def _relu_grad_call(dy, x):
    return _call("simdev_relu_grad", x.shape, x.dtype, dy, x)


@jax.custom_vjp
def _relu(x):
    return _relu_call(x)


def _relu_fwd(x):
    return _relu_call(x), x


def _relu_bwd(x, dy):
    return (_relu_grad_call(dy, x),)


_relu.defvjp(_relu_fwd, _relu_bwd)


def relu(x):
    """max(x, 0) element-wise on simdev, any shape; the gradient is
    dy * (x > 0) (simdev_relu_grad)."""
    return _relu(jnp.asarray(x))


# ---- conv2d ---------------------------------------------------------------

def _pair(v, name):
    """A (h, w) pair of positive ints. Checked here because the result
    shape depends on it; the handler checks the attribute again."""
    t = tuple(int(i) for i in v)
    if len(t) != 2 or min(t) < 1:
        raise _shape_error("conv2d", "%s must be 2 positive ints, got %r"
                           % (name, v))
    return t


def _conv_padding(padding):
    """(padding string, explicit_paddings tuple) for the handler."""
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise _shape_error("conv2d", "padding must be 'SAME', 'VALID' "
                               "or ((top, bottom), (left, right)), got %r"
                               % (padding,))
        return padding, (0, 0, 0, 0)
    (t, b), (l, r) = padding
    return "EXPLICIT", (int(t), int(b), int(l), int(r))


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


def _conv_grads(x, w, dy, cfg):
    """dx and dw through simdev's two backprop targets. They take one group;
    a grouped convolution is cut into its groups along the channels (group
    i: input channels [i*C/g, (i+1)*C/g) and output channels
    [i*O/g, (i+1)*O/g))."""
    attrs = _conv_attrs(cfg)
    groups = x.shape[-1] // w.shape[-2] if w.shape[-2] else 1
    if groups <= 1:
        dx = _call("simdev_conv2d_backprop_input", x.shape, x.dtype, dy, w,
                   **attrs)
        dw = _call("simdev_conv2d_backprop_filter", w.shape, w.dtype, x, dy,
                   **attrs)
        return dx, dw
    cg, og = w.shape[-2], w.shape[-1] // groups
    dxs, dws = [], []
    for g in range(groups):
        xg = x[..., g * cg:(g + 1) * cg]
        wg = w[..., g * og:(g + 1) * og]
        dyg = dy[..., g * og:(g + 1) * og]
        dxs.append(_call("simdev_conv2d_backprop_input", xg.shape, x.dtype,
                         dyg, wg, **attrs))
        dws.append(_call("simdev_conv2d_backprop_filter", wg.shape, w.dtype,
                         xg, dyg, **attrs))
    return jnp.concatenate(dxs, axis=-1), jnp.concatenate(dws, axis=-1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _conv2d(x, w, cfg):
    return _conv_call(x, w, cfg)


def _conv2d_fwd(x, w, cfg):
    return _conv_call(x, w, cfg), (x, w)


def _conv2d_bwd(cfg, res, dy):
    x, w = res
    return _conv_grads(x, w, dy, cfg)


_conv2d.defvjp(_conv2d_fwd, _conv2d_bwd)


def conv2d(x, w, strides=(1, 1), padding="SAME", dilations=(1, 1)):
    """2-D convolution on simdev (im2col + GEMM, the code TF's Conv2D runs
    on SIMDEV). x NHWC [*B, N, H, W, C], w HWIO [*B, KH, KW, C/g, O] (g
    groups: w's input depth must divide C, and g must divide O); padding is
    "SAME", "VALID" or ((top, bottom), (left, right)). Returns
    [*B, N, OH, OW, O] of x's dtype."""
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
        return _relu_grad_call(dy, y)   # y > 0 exactly where z > 0
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
    y = _mba_call(a, b, bias, ta, tb, act, alpha)
    z = None
    if act == "leaky_relu" and alpha < 0:
        z = _mba_call(a, b, bias, ta, tb, "none", alpha)
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
    gradient is a jnp sum over the rows."""
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
