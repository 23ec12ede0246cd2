"""Zero-copy DLPack exchange between SIMDEV tensors and other frameworks.

TensorFlow's ``tf.experimental.dlpack`` refuses device types other than CPU
and GPU. simdev registers two ops of its own (``SimdevToDlpack`` and
``SimdevFromDlpack``, see ``src/kernels/interop/dlpack_ops.c``) that carry the
address of a DLPack managed tensor as an int64; this module wraps that
address in the protocol's capsule (``simdev._dlpack``, in C).

simdev memory is host memory, so tensors are exchanged as kDLCPU device 0:
NumPy, JAX (CPU) and TensorFlow's CPU tensors take them without a copy.

    import simdev.dlpack as sdl
    with tf.device("/device:SIMDEV:0"):
        t = tf.nn.relu(x)
    a = np.from_dlpack(sdl.wrap(t))          # shares t's buffer
    j = jax.dlpack.from_dlpack(sdl.wrap(t))  # same
    back = sdl.from_dlpack(a)                # a SIMDEV tensor over a's buffer

Exported buffers are writable (as with TensorFlow's own DLPack export): a
write on one side is seen on the other. Writing into a tensor that
TensorFlow still uses is the caller's responsibility, as with any shared
buffer. Eager mode only: the capsule is a Python object.
"""

import tensorflow as tf
from tensorflow.python.eager import context as _context
from tensorflow.python.eager import execute as _execute

from simdev import DEVICE_TYPE
from simdev import _dlpack

# DLPack device types (dlpack.h DLDeviceType) and dtype codes.
KDLCPU = 1
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6

_TO_TF = {
    (_DL_FLOAT, 16): tf.float16, (_DL_FLOAT, 32): tf.float32,
    (_DL_FLOAT, 64): tf.float64, (_DL_BFLOAT, 16): tf.bfloat16,
    (_DL_INT, 8): tf.int8, (_DL_INT, 16): tf.int16,
    (_DL_INT, 64): tf.int64,
    (_DL_UINT, 8): tf.uint8, (_DL_UINT, 16): tf.uint16,
    (_DL_UINT, 32): tf.uint32, (_DL_UINT, 64): tf.uint64,
    (_DL_BOOL, 8): tf.bool, (_DL_COMPLEX, 64): tf.complex64,
    (_DL_COMPLEX, 128): tf.complex128,
}
#: TensorFlow dtypes that can cross DLPack (both sides have them). Not int32:
#: TensorFlow keeps the int32 tensors of every device in host memory.
DTYPES = tuple(sorted(set(_TO_TF.values()), key=lambda d: d.name))
_INT32_MSG = ("simdev.dlpack: int32 is not exchanged: TensorFlow keeps the "
              "int32 tensors of every device in host memory (use int64, or "
              "tf.experimental.dlpack on a CPU tensor)")

_COPY_MODE = {None: "if_needed", False: "never", True: "always"}


def _simdev_device(t):
    dev = getattr(t, "device", "") or ""
    if ":%s:" % DEVICE_TYPE not in dev:
        raise ValueError(
            "simdev.dlpack: expected a tensor on a %s device, got one on %r"
            % (DEVICE_TYPE, dev or "no device"))
    return dev


def to_dlpack(t, *, versioned=False):
    """A DLPack capsule over the buffer of SIMDEV tensor ``t`` (no copy).

    The capsule holds the buffer until its consumer deletes it, even after
    ``t`` is gone. Work queued on ``t``'s stream has finished when the
    capsule exists. ``versioned``: a DLPack 1.x ``dltensor_versioned``
    capsule instead of the legacy ``dltensor``.
    """
    if not isinstance(t, tf.Tensor) or not hasattr(t, "numpy"):
        raise TypeError("simdev.dlpack.to_dlpack: expected an eager tf.Tensor, "
                        "got %s" % type(t).__name__)
    dev = _simdev_device(t)
    if t.dtype == tf.int32:
        raise TypeError(_INT32_MSG)
    if t.dtype not in DTYPES:
        raise TypeError("simdev.dlpack: DLPack has no %s" % t.dtype.name)
    ctx = _context.context()
    with tf.device(dev):
        (address,) = _execute.execute(
            b"SimdevToDlpack", 1, [t],
            ("T", t.dtype.as_datatype_enum, "versioned", bool(versioned)), ctx)
    return _dlpack.wrap(int(address.numpy()), bool(versioned))


def from_dlpack(obj, *, device=None, copy=None):
    """A SIMDEV tensor over the memory of ``obj`` (no copy when possible).

    ``obj`` is a DLPack capsule or any object with ``__dlpack__`` (a NumPy
    array, a JAX array, a TensorFlow CPU tensor). ``copy`` follows the array
    API: None copies only what cannot be shared (strided, unaligned or
    read-only memory), False refuses to copy (InvalidArgumentError), True
    always copies. ``device``: the SIMDEV device, default
    ``/device:SIMDEV:0``. The producer's deleter runs once, when TensorFlow
    frees the tensor (right after the copy, for a copy).
    """
    if copy not in _COPY_MODE:
        raise ValueError("simdev.dlpack: copy must be None, True or False")
    if device is None:
        device = "/device:%s:0" % DEVICE_TYPE
    if ":%s:" % DEVICE_TYPE not in device + ":":
        raise ValueError("simdev.dlpack: %r is not a %s device"
                         % (device, DEVICE_TYPE))
    capsule = _capsule_of(obj)
    address, versioned, (code, bits, lanes), (dev_type, _), _ = _dlpack.info(capsule)
    dtype = _TO_TF.get((code, bits)) if lanes == 1 else None
    if (code, bits, lanes) == (_DL_INT, 32, 1):
        raise TypeError(_INT32_MSG)
    if dtype is None:
        raise TypeError("simdev.dlpack: unsupported DLPack dtype (code %d, bits %d, "
                        "lanes %d)" % (code, bits, lanes))
    if dev_type != KDLCPU:
        raise BufferError("simdev.dlpack: DLPack device type %d is not host "
                          "memory (kDLCPU)" % dev_type)
    ctx = _context.context()
    addr = tf.constant(address, dtype=tf.int64)
    with tf.device(device):
        (out,) = _execute.execute(
            b"SimdevFromDlpack", 1, [addr],
            ("dtype", dtype.as_datatype_enum, "versioned", bool(versioned),
             "copy", _COPY_MODE[copy]), ctx)
    # The op owns the managed tensor now; the capsule must not delete it.
    _dlpack.consume(capsule)
    return out


def _capsule_of(obj):
    if type(obj).__name__ == "PyCapsule":
        return obj
    if isinstance(obj, tf.Tensor) and hasattr(obj, "numpy"):
        if ":%s:" % DEVICE_TYPE in (obj.device or ""):
            raise ValueError("simdev.dlpack.from_dlpack: the tensor is on "
                             "SIMDEV already")
        return tf.experimental.dlpack.to_dlpack(obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("simdev.dlpack.from_dlpack: %s is neither a DLPack "
                        "capsule nor has __dlpack__" % type(obj).__name__)
    if hasattr(obj, "__dlpack_device__"):
        dev_type, _ = obj.__dlpack_device__()
        if dev_type != KDLCPU:
            raise BufferError("simdev.dlpack: producer device type %d is not "
                              "host memory (kDLCPU)" % dev_type)
    try:
        return obj.__dlpack__(max_version=(1, 1))
    except TypeError:  # a producer from before DLPack 1.0
        return obj.__dlpack__()


class SimdevTensor:
    """Gives a SIMDEV tensor the DLPack protocol, for ``np.from_dlpack``,
    ``jax.dlpack.from_dlpack`` and other consumers."""

    def __init__(self, tensor):
        _simdev_device(tensor)
        self.tensor = tensor

    def __dlpack_device__(self):
        return (KDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
                   copy=None):
        if stream is not None and stream != -1:
            raise BufferError("simdev.dlpack: kDLCPU memory takes no stream "
                              "(got %r)" % (stream,))
        if dl_device is not None and tuple(dl_device) != (KDLCPU, 0):
            raise BufferError("simdev.dlpack: cannot export to device %r"
                              % (tuple(dl_device),))
        t = self.tensor
        if copy:
            t = _copy_on_device(t)
        versioned = max_version is not None and max_version[0] >= 1
        return to_dlpack(t, versioned=versioned)


def _copy_on_device(t):
    """A fresh SIMDEV buffer with t's values (for __dlpack__(copy=True))."""
    return from_dlpack(to_dlpack(t), device=t.device, copy=True)


def wrap(tensor):
    """``tensor`` (on SIMDEV) with ``__dlpack__`` / ``__dlpack_device__``."""
    return SimdevTensor(tensor)
