"""DLPack exchange (simdev.dlpack, SimdevToDlpack / SimdevFromDlpack) with
NumPy, JAX (CPU) and TensorFlow CPU tensors, in one TF subprocess.

Zero-copy is proven two ways: the data pointers are equal, and a write on
one side is seen on the other (where the flags allow writing). Lifetimes:
an exported buffer outlives its TF tensor until the consumer drops it (TF's
device memory counter shows when it is released), and an imported tensor's
deleter runs exactly once, when TF frees it (a ctypes producer counts the
calls). Bad capsules and tensors raise clear Python exceptions and leave
the process usable; it exits cleanly at the end.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import child_env

SCRIPT = r'''
import ctypes, gc, weakref
import numpy as np
import tensorflow as tf
import jax, jax.numpy as jnp
import simdev.dlpack as sdl
from tensorflow.python.eager import context, execute

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")
tf.config.set_soft_device_placement(False)
SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"
rng = np.random.default_rng(4)

# Every dtype NumPy, JAX and TF CPU can exchange with simdev (NumPy has no
# bfloat16 DLPack type; JAX and TF do).
NP_TYPES = ["float16", "float32", "float64", "int8", "int16", "int64",
            "uint8", "uint16", "uint32", "uint64", "bool", "complex64",
            "complex128"]
JAX_TYPES = NP_TYPES + ["bfloat16"]
TF_TYPES = NP_TYPES + ["bfloat16"]

def np_type(name):
    return tf.bfloat16.as_numpy_dtype if name == "bfloat16" else np.dtype(name)

def values(name, shape=(3, 5)):
    n = int(np.prod(shape))
    if name == "bool":
        return (np.arange(n) % 3 == 0).reshape(shape)
    v = (np.arange(n) % 50 + 1).astype(np.float64)
    return v.astype(np_type(name)).reshape(shape)

def aligned(a):
    """A copy of a whose buffer is 64-byte aligned (NumPy's own allocator
    only guarantees 16): a zero-copy import needs TF's alignment."""
    a = np.asarray(a)
    raw = np.empty(a.nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out

def on_simdev(a):
    with tf.device(SIM):
        t = tf.identity(tf.constant(a))
    assert "SIMDEV:0" in t.device, t.device
    return t

def sim_ptr(t):
    """The address of a SIMDEV tensor's buffer: the data pointer of a second
    export (read from the managed tensor; the capsule deletes it)."""
    cap = sdl.to_dlpack(t)
    address = sdl._dlpack.info(cap)[0]
    return DLManagedTensor.from_address(address).dl_tensor.data or 0

def fresh(t):
    """t's values as a SIMDEV kernel sees them now. (A second t.numpy() may
    return TF's cached host mirror of t, since TF tensors are immutable.)"""
    with tf.device(SIM):
        if t.dtype == tf.bool:
            return tf.identity(t).numpy()
        return tf.bitcast(t, t.dtype).numpy()  # aliases; a fresh handle

def raw_view(t):
    """A NumPy array over t's SIMDEV buffer (NumPy has no bfloat16 DLPack
    type: a bfloat16 tensor is viewed as uint16 through a zero-copy
    Bitcast)."""
    if t.dtype == tf.bfloat16:
        with tf.device(SIM):
            t = tf.bitcast(t, tf.uint16)
    return np.from_dlpack(sdl.wrap(t))

def bits(a):
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype == np_type("bfloat16") else a

def cap_ptr(cap):
    """The data pointer of an unconsumed legacy capsule (which then deletes
    its tensor when it dies)."""
    return DLManagedTensor.from_address(sdl._dlpack.info(cap)[0]).dl_tensor.data or 0

def flip(a):
    """A value different from a.flat[0], for write-visibility checks."""
    return (not a.flat[0]) if a.dtype == bool else a.flat[0] + 7

def mem_in_use():
    return tf.config.experimental.get_memory_info("SIMDEV:0")["current"]

# ---- a ctypes DLPack producer that counts deleter calls -----------------
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]
class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]
class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER)]
class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]
class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
NAMES = {k: ctypes.create_string_buffer(k) for k in
         (b"dltensor", b"dltensor_versioned", b"something_else")}
KEEP = []  # producer objects stay alive for the whole run

class Producer:
    """A DLPack tensor over `arr` (or a fake data pointer) whose deleter
    only counts; the capsule has no destructor, so only a consumer calls
    it."""
    def __init__(self, arr, shape=None, strides=None, code=2, bits=32,
                 lanes=1, device=1, byte_offset=0, versioned=False, flags=0,
                 data=None, name=None):
        self.calls = 0
        self.arr = arr
        shape = list(arr.shape) if shape is None else shape
        self.shape = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        self.strides = None if strides is None else \
            (ctypes.c_int64 * max(1, len(strides)))(*strides)
        self.cb = DELETER(self._deleted)
        m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        if versioned:
            m.version.major, m.version.minor = 1, 1
            m.flags = flags
        t = m.dl_tensor
        t.data = data if data is not None else (arr.ctypes.data if arr is not None else None)
        t.device.device_type, t.device.device_id = device, 0
        t.ndim = len(shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            t.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        m.deleter = self.cb
        self.m = m
        nm = name or (b"dltensor_versioned" if versioned else b"dltensor")
        self.capsule = _capsule_new(ctypes.addressof(m), NAMES[nm], None)
        KEEP.append(self)
    def _deleted(self, p):
        assert p == ctypes.addressof(self.m)
        self.calls += 1

class Holder:
    """Hands out a capsule through the protocol (for np.from_dlpack)."""
    def __init__(self, capsule):
        self.capsule = capsule
    def __dlpack__(self, **kw):
        return self.capsule
    def __dlpack_device__(self):
        return (1, 0)

def expect_error(fn):
    try:
        fn()
    except Exception as e:
        return [type(e).__name__, str(e)[:400]]
    return ["", ""]

# ---- SIMDEV <-> NumPy ----------------------------------------------------
for name in NP_TYPES:
    @check(f"numpy {name}")
    def _():
        v = values(name)
        t = on_simdev(v)
        a = np.from_dlpack(sdl.wrap(t))           # SIMDEV -> NumPy
        out = {"export_values": bool(np.array_equal(a, v)),
               "export_dtype": str(a.dtype), "writeable": a.flags.writeable}
        new = flip(a)
        a.flat[0] = new                            # NumPy writes, TF sees
        out["write_seen_by_tf"] = bool(fresh(t).flat[0] == new)
        n = aligned(values(name)[::-1].copy())     # NumPy -> SIMDEV
        s = sdl.from_dlpack(n, copy=False)
        out["import_device"] = s.device
        out["import_values"] = bool(np.array_equal(s.numpy(), n))
        out["same_pointer"] = sim_ptr(s) == n.ctypes.data
        n.flat[1] = flip(n[..., 1:])                # NumPy writes, TF sees
        out["write_seen_by_simdev"] = bool(fresh(s).flat[1] == n.flat[1])
        return out

# ---- SIMDEV <-> JAX ------------------------------------------------------
for name in JAX_TYPES:
    @check(f"jax {name}")
    def _():
        v = values(name)
        t = on_simdev(v)
        j = jax.dlpack.from_dlpack(sdl.wrap(t))    # SIMDEV -> JAX
        out = {"export_values": bool(np.array_equal(np.asarray(j), v)),
               "export_dtype": str(j.dtype),
               "same_pointer_export": j.unsafe_buffer_pointer() == sim_ptr(t)}
        a = raw_view(t)
        new = flip(a)
        a.flat[0] = new                            # a SIMDEV-side write
        out["write_seen_by_jax"] = bool(bits(j).flat[0] == new)
        jv = jnp.asarray(values(name)[::-1].copy())  # JAX -> SIMDEV
        s = sdl.from_dlpack(jv, copy=False)
        out["import_device"] = s.device
        out["import_values"] = bool(np.array_equal(s.numpy(), np.asarray(jv)))
        out["same_pointer_import"] = sim_ptr(s) == jv.unsafe_buffer_pointer()
        return out

# ---- SIMDEV <-> TF CPU ---------------------------------------------------
for name in TF_TYPES:
    @check(f"tfcpu {name}")
    def _():
        v = values(name)
        t = on_simdev(v)
        c = tf.experimental.dlpack.from_dlpack(sdl.to_dlpack(t))  # -> CPU
        out = {"export_device": c.device,
               "export_values": bool(np.array_equal(c.numpy(), v))}
        out["same_pointer_export"] = cap_ptr(tf.experimental.dlpack.to_dlpack(c)) == sim_ptr(t)
        a = raw_view(t)
        a.flat[0] = flip(a)
        out["write_seen_by_cpu"] = bool(bits(c.numpy()).flat[0] == a.flat[0])
        with tf.device(CPU):
            src = tf.identity(tf.constant(values(name)[::-1].copy()))
        s = sdl.from_dlpack(src)                    # CPU -> SIMDEV
        out["import_device"] = s.device
        out["import_values"] = bool(np.array_equal(s.numpy(), src.numpy()))
        out["same_pointer_import"] = cap_ptr(tf.experimental.dlpack.to_dlpack(src)) == sim_ptr(s)
        return out

# ---- layouts ---------------------------------------------------------------
@check("scalar and empty")
def _():
    out = {}
    t = on_simdev(np.float32(3.5))
    a = np.from_dlpack(sdl.wrap(t))
    out["scalar"] = [list(a.shape), float(a)]
    e = on_simdev(np.zeros((0, 3), np.float32))
    a = np.from_dlpack(sdl.wrap(e))
    out["empty_export"] = list(a.shape)
    s = sdl.from_dlpack(np.zeros((2, 0), np.float64), copy=False)
    out["empty_import"] = [list(s.shape), s.device]
    s = sdl.from_dlpack(aligned(np.float64(2.25)), copy=False)
    out["scalar_import"] = [list(s.shape), float(s.numpy())]
    return out

@check("capsule kinds")
def _():
    t = on_simdev(values("float32"))
    w = sdl.wrap(t)
    return {"default": _capsule_name(w.__dlpack__()).decode(),
            "max_version_0": _capsule_name(w.__dlpack__(max_version=(0, 8))).decode(),
            "max_version_1": _capsule_name(w.__dlpack__(max_version=(1, 0))).decode(),
            "device": list(w.__dlpack_device__())}

@check("copy semantics")
def _():
    n = aligned(values("float32"))
    strided = n[:, ::2]
    out = {}
    s = sdl.from_dlpack(strided)                    # copy=None: copies
    out["strided_values"] = bool(np.array_equal(s.numpy(), strided))
    n[0, 0] = 99
    out["strided_is_copy"] = bool(s.numpy()[0, 0] != 99)
    out["strided_copy_false"] = expect_error(lambda: sdl.from_dlpack(strided, copy=False))
    c = sdl.from_dlpack(n, copy=True)               # always copies
    out["copy_true_pointer_differs"] = sim_ptr(c) != n.ctypes.data
    out["copy_true_values"] = bool(np.array_equal(c.numpy(), n))
    un = np.empty(64 + 64 + 4, np.uint8)
    off = (-un.ctypes.data) % 64 + 4                # 4 bytes past alignment
    una = un[off:off + 64].view(np.float32)
    una[:] = np.arange(16)
    out["unaligned_copy_false"] = expect_error(lambda: sdl.from_dlpack(una, copy=False))
    out["unaligned_copy_none"] = sdl.from_dlpack(una).numpy().tolist()
    ro = aligned(values("float32"))
    ro.flags.writeable = False                      # versioned READ_ONLY flag
    out["readonly_copy_false"] = expect_error(lambda: sdl.from_dlpack(ro, copy=False))
    out["readonly_copy_none"] = bool(np.array_equal(sdl.from_dlpack(ro).numpy(), ro))
    bc = np.broadcast_to(aligned(np.arange(4, dtype=np.float32)), (3, 4))
    out["broadcast"] = sdl.from_dlpack(bc).numpy().tolist()
    t = on_simdev(values("float32"))
    e = np.from_dlpack(sdl.wrap(t), copy=True)
    out["export_copy_true_distinct"] = e.ctypes.data != sim_ptr(t)
    return out

# ---- synchronisation -------------------------------------------------------
@check("export after queued work")
def _():
    """Async eager: the ops return before they ran; the export must still
    see their results."""
    x = rng.standard_normal((512, 512)).astype(np.float32)
    want = np.maximum(x @ x @ x, 0)
    tf.config.experimental.set_synchronous_execution(False)
    try:
        bad = 0
        for _ in range(5):
            with tf.device(SIM):
                tx = tf.constant(x)
                y = tf.nn.relu(tf.matmul(tf.matmul(tx, tx), tx))
            a = np.from_dlpack(sdl.wrap(y))
            if not np.allclose(a, want, rtol=1e-3, atol=1e-2):
                bad += 1
    finally:
        context.async_wait()
        tf.config.experimental.set_synchronous_execution(True)
    return {"bad": bad}

# ---- lifetimes -------------------------------------------------------------
@check("export outlives tensor")
def _():
    gc.collect()
    base = mem_in_use()
    with tf.device(SIM):
        t = tf.fill([1 << 20], 7.0)                 # 4 MiB
    a = np.from_dlpack(sdl.wrap(t))
    del t
    gc.collect()
    held = mem_in_use() - base
    with tf.device(SIM):                            # reuses freed memory
        junk = [tf.fill([1 << 20], float(i)) for i in range(4)]
    del junk
    intact = bool((a == 7.0).all())
    del a
    gc.collect()
    after = mem_in_use() - base
    cap = sdl.to_dlpack(on_simdev(np.ones(1 << 20, np.float32)))
    gc.collect()
    held_by_capsule = mem_in_use() - base
    del cap                                          # never consumed
    gc.collect()
    return {"held": held, "intact": intact, "after": after,
            "held_by_capsule": held_by_capsule,
            "after_capsule": mem_in_use() - base}

@check("import deleter once")
def _():
    out = {}
    for versioned in (False, True):
        n = aligned(np.arange(1024, dtype=np.float32))
        p = Producer(n, versioned=versioned)
        t = sdl.from_dlpack(p.capsule, copy=False)
        out[f"v{int(versioned)}_name_after"] = _capsule_name(p.capsule).decode()
        with tf.device(SIM):
            u = tf.reduce_sum(t * 2.0)
        out[f"v{int(versioned)}_calls_alive"] = p.calls
        out[f"v{int(versioned)}_sum"] = float(u.numpy())
        del t, u
        gc.collect()
        out[f"v{int(versioned)}_calls_freed"] = p.calls
        with tf.device(SIM):
            tf.fill([1 << 16], 1.0).numpy()
        gc.collect()
        out[f"v{int(versioned)}_calls_later"] = p.calls
        out[f"v{int(versioned)}_reuse"] = expect_error(lambda: sdl.from_dlpack(p.capsule))
    # The copy path deletes right after copying.
    n = aligned(np.arange(12, dtype=np.float32).reshape(3, 4))
    p = Producer(n[:, ::2], strides=[4, 2])
    t = sdl.from_dlpack(p.capsule)
    out["copy_calls"] = p.calls
    out["copy_values"] = t.numpy().tolist()
    # A refused import leaves the tensor with its producer.
    p = Producer(n[:, ::2], strides=[4, 2])
    out["refused"] = expect_error(lambda: sdl.from_dlpack(p.capsule, copy=False))
    out["refused_calls"] = p.calls
    out["refused_name"] = _capsule_name(p.capsule).decode()
    return out

@check("numpy source lifetime")
def _():
    n = aligned(np.arange(256, dtype=np.float64))
    base = n.base
    ref = weakref.ref(base)
    t = sdl.from_dlpack(n, copy=False)
    del n, base
    gc.collect()
    alive_with_tensor = ref() is not None
    v = float(tf.reduce_sum(t).numpy())
    del t
    gc.collect()
    return {"alive_with_tensor": alive_with_tensor, "sum": v,
            "freed_after": ref() is None}

# ---- bad input -------------------------------------------------------------
def fake(**kw):
    arr = kw.pop("arr", aligned(np.zeros(4, np.float32)))
    return Producer(arr, **kw)

BAD = {
    "wrong name": lambda: sdl.from_dlpack(fake(name=b"something_else").capsule),
    "not a capsule": lambda: sdl.from_dlpack(object()),
    "null data": lambda: sdl.from_dlpack(fake(data=0).capsule),
    "dtype lanes": lambda: sdl.from_dlpack(fake(lanes=4).capsule),
    "dtype float8": lambda: sdl.from_dlpack(fake(bits=8).capsule),
    "device cuda": lambda: sdl.from_dlpack(fake(device=2).capsule),
    "negative shape": lambda: sdl.from_dlpack(fake(shape=[2, -3]).capsule),
    "overflow shape": lambda: sdl.from_dlpack(fake(shape=[1 << 40, 1 << 40]).capsule),
    "byte offset": lambda: sdl.from_dlpack(fake(byte_offset=4).capsule),
    "version 2": lambda: sdl.from_dlpack(_v2()),
    "copy value": lambda: sdl.from_dlpack(np.zeros(4), copy="yes"),
    "not simdev device": lambda: sdl.from_dlpack(np.zeros(4), device="/device:CPU:0"),
    "export cpu tensor": lambda: _export_cpu(),
    "export string": lambda: sdl.to_dlpack(tf.constant(["a"])),
    "export numpy": lambda: sdl.to_dlpack(np.zeros(3)),
    "export int32": lambda: sdl.to_dlpack(on_simdev(np.zeros(3, np.int32))),
    "import int32": lambda: sdl.from_dlpack(aligned(np.zeros(3, np.int32))),
    "dlpack stream": lambda: sdl.wrap(on_simdev(np.zeros(3))).__dlpack__(stream=1),
    "dlpack device": lambda: sdl.wrap(on_simdev(np.zeros(3))).__dlpack__(dl_device=(2, 0)),
    "op null address": lambda: _op_import(0, tf.float32),
    "op dtype mismatch": lambda: _op_import(ctypes.addressof(fake().m), tf.float64),
    "op device cuda": lambda: _op_import(ctypes.addressof(fake(device=2).m), tf.float32),
}

def _v2():
    p = Producer(aligned(np.zeros(4, np.float32)), versioned=True)
    p.m.version.major = 2
    return p.capsule

def _export_cpu():
    with tf.device(CPU):
        c = tf.identity(tf.constant([1.0]))
    return sdl.to_dlpack(c)

def _op_import(address, dtype):
    """SimdevFromDlpack called directly: the kernel's own validation."""
    with tf.device(CPU):
        addr = tf.constant(address, tf.int64)
    with tf.device(SIM):
        (out,) = execute.execute(b"SimdevFromDlpack", 1, [addr],
                                 ("dtype", dtype.as_datatype_enum,
                                  "versioned", False, "copy", "never"),
                                 context.context())
    return out

for bad_name, fn in BAD.items():
    @check(f"bad {bad_name}")
    def _():
        return {"error": expect_error(fn)}

# ---- rank limit --------------------------------------------------------------
@check("rank limit")
def _():
    """simdev's rank limit (16, its kernels') on import and export: above it
    a clear InvalidArgumentError, and the process carries on."""
    out = {}
    for copy in (None, False, True):
        a20 = aligned(np.arange(2, dtype=np.float32).reshape((1,) * 19 + (2,)))
        out[f"import20_{copy}"] = expect_error(lambda: sdl.from_dlpack(a20, copy=copy))
    # The same through the op directly (a ctypes producer: its deleter must
    # not run, the producer keeps the tensor).
    p = Producer(aligned(np.zeros(4, np.float32)), shape=[1] * 19 + [4])
    out["op20"] = expect_error(lambda: _op_import(ctypes.addressof(p.m), tf.float32))
    out["op20_calls"] = p.calls
    # Rank 16 is accepted, shared and copied.
    a16 = aligned(np.arange(6, dtype=np.float32).reshape((1,) * 14 + (2, 3)))
    s = sdl.from_dlpack(a16, copy=False)
    out["import16"] = [s.shape.rank, s.device, bool(np.array_equal(s.numpy(), a16)),
                       sim_ptr(s) == a16.ctypes.data]
    c = sdl.from_dlpack(a16[..., ::2])               # strided: gathered
    out["import16_copy"] = [c.shape.rank, c.numpy().ravel().tolist()]
    b = np.from_dlpack(sdl.wrap(s))                  # and back out
    out["export16"] = [b.ndim, b.ravel().tolist()]
    # TF's own DEVICE_DEFAULT ExpandDims makes a rank-20 SIMDEV tensor
    # (simdev's kernels refuse them); exporting it is refused too.
    try:
        with tf.device(SIM):
            t20 = tf.expand_dims(tf.identity(tf.constant(a16)), 0)
            for _ in range(3):
                t20 = tf.expand_dims(t20, 0)
        out["t20"] = [t20.shape.rank, t20.device]
        out["export20"] = expect_error(lambda: sdl.to_dlpack(t20))
    except tf.errors.InvalidArgumentError as e:  # if ExpandDims refuses
        out["t20"] = ["refused", str(e)[:300]]
    # The process goes on: a later import works.
    n = aligned(np.arange(6, dtype=np.float64))
    out["after"] = sdl.from_dlpack(n, copy=False).numpy().tolist()
    return out

@check("consumed capsule")
def _():
    cap = sdl.to_dlpack(on_simdev(np.zeros(3, np.float32)))
    np.from_dlpack(Holder(cap))
    return {"name": _capsule_name(cap).decode(),
            "again": expect_error(lambda: sdl.from_dlpack(cap))}

@check("good after errors")
def _():
    n = aligned(np.arange(6, dtype=np.float32))
    t = sdl.from_dlpack(n, copy=False)
    with tf.device(SIM):
        u = tf.nn.relu(t - 2.0)
    return {"values": np.from_dlpack(sdl.wrap(u)).tolist(), "device": u.device}
'''


@pytest.fixture(scope="module")
def dl(run_tf):
    return run_tf(SCRIPT, env={"JAX_PLATFORMS": "cpu"}, timeout=300)


def assert_round_trip(d, kinds):
    for k in kinds:
        assert d[k] is True, f"{k} failed: {d}"


# int32 is not exchanged: TF keeps the int32 tensors of every device in
# host memory (see test_bad_input["int32 ..."]).
NP_TYPES = ["float16", "float32", "float64", "int8", "int16", "int64",
            "uint8", "uint16", "uint32", "uint64", "bool", "complex64",
            "complex128"]


@pytest.mark.parametrize("name", NP_TYPES)
def test_numpy_round_trip(dl, name):
    d = dl.data(f"numpy {name}")
    assert d["export_dtype"] == name
    assert d["writeable"] is True  # a versioned capsule without READ_ONLY
    assert "SIMDEV:0" in d["import_device"]
    assert_round_trip(d, ["export_values", "write_seen_by_tf", "import_values",
                          "same_pointer", "write_seen_by_simdev"])


@pytest.mark.parametrize("name", NP_TYPES + ["bfloat16"])
def test_jax_round_trip(dl, name):
    d = dl.data(f"jax {name}")
    assert d["export_dtype"] == name
    assert "SIMDEV:0" in d["import_device"]
    assert_round_trip(d, ["export_values", "same_pointer_export",
                          "write_seen_by_jax", "import_values",
                          "same_pointer_import"])


@pytest.mark.parametrize("name", NP_TYPES + ["bfloat16"])
def test_tf_cpu_round_trip(dl, name):
    d = dl.data(f"tfcpu {name}")
    assert "CPU:0" in d["export_device"]
    assert "SIMDEV:0" in d["import_device"]
    assert_round_trip(d, ["export_values", "same_pointer_export",
                          "write_seen_by_cpu", "import_values",
                          "same_pointer_import"])


def test_scalar_and_empty(dl):
    d = dl.data("scalar and empty")
    assert d["scalar"] == [[], 3.5]
    assert d["empty_export"] == [0, 3]
    assert d["empty_import"][0] == [2, 0] and "SIMDEV:0" in d["empty_import"][1]
    assert d["scalar_import"] == [[], 2.25]


def test_capsule_kind_follows_max_version(dl):
    d = dl.data("capsule kinds")
    assert d["default"] == "dltensor"
    assert d["max_version_0"] == "dltensor"
    assert d["max_version_1"] == "dltensor_versioned"
    assert d["device"] == [1, 0]  # kDLCPU: simdev memory is host memory


def test_copy_semantics(dl):
    d = dl.data("copy semantics")
    assert d["strided_values"] and d["strided_is_copy"]
    for k, word in [("strided_copy_false", "strides"),
                    ("unaligned_copy_false", "aligned"),
                    ("readonly_copy_false", "read-only")]:
        cls, msg = d[k]
        assert cls == "InvalidArgumentError" and word in msg, (k, d[k])
    assert d["copy_true_pointer_differs"] and d["copy_true_values"]
    assert d["unaligned_copy_none"] == list(range(16))
    assert d["readonly_copy_none"]
    assert d["broadcast"] == [[0, 1, 2, 3]] * 3
    assert d["export_copy_true_distinct"]


def test_export_waits_for_queued_work(dl):
    assert dl.data("export after queued work")["bad"] == 0


def test_rank_limit_import(dl):
    """Rank 20 from NumPy (shared, or copied) is InvalidArgument naming the
    limit, before anything is copied into a rank-16 array on TF's thread."""
    d = dl.data("rank limit")
    for k in ["import20_None", "import20_False", "import20_True", "op20"]:
        cls, msg = d[k]
        assert cls == "InvalidArgumentError", (k, d[k])
        assert "rank 20" in msg and "rank <= 16" in msg, (k, msg)
    assert d["op20_calls"] == 0  # refused: the producer keeps its tensor
    rank, device, same_values, same_pointer = d["import16"]
    assert rank == 16 and "SIMDEV:0" in device and same_values and same_pointer
    assert d["import16_copy"] == [16, [0.0, 2.0, 3.0, 5.0]]
    assert d["export16"] == [16, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]
    assert d["after"] == [0, 1, 2, 3, 4, 5]


def test_rank_limit_export(dl):
    d = dl.data("rank limit")
    if d["t20"][0] == "refused":  # no rank-20 SIMDEV tensor can exist
        assert "rank" in d["t20"][1] and "16" in d["t20"][1], d["t20"]
        return
    rank, device = d["t20"]
    assert rank == 20 and "SIMDEV:0" in device, d["t20"]
    cls, msg = d["export20"]
    assert cls == "InvalidArgumentError", d["export20"]
    assert "rank 20" in msg and "rank <= 16" in msg, msg


def test_exported_buffer_outlives_tensor(dl):
    d = dl.data("export outlives tensor")
    mib4 = 4 << 20
    assert d["held"] >= mib4, d       # the buffer stayed allocated
    assert d["intact"], d             # and nobody else got it
    assert d["after"] < mib4, d       # released with the NumPy array
    assert d["held_by_capsule"] >= mib4, d
    assert d["after_capsule"] < mib4, d  # unconsumed capsule released it


@pytest.mark.parametrize("v", ["v0", "v1"])
def test_import_deleter_runs_once(dl, v):
    d = dl.data("import deleter once")
    assert d[f"{v}_name_after"] == ("used_dltensor" if v == "v0"
                                    else "used_dltensor_versioned")
    assert d[f"{v}_calls_alive"] == 0
    assert d[f"{v}_sum"] == 2 * sum(range(1024))
    assert d[f"{v}_calls_freed"] == 1
    assert d[f"{v}_calls_later"] == 1
    assert d[f"{v}_reuse"][0] == "BufferError"


def test_copy_import_deletes_after_copy(dl):
    d = dl.data("import deleter once")
    assert d["copy_calls"] == 1
    assert d["copy_values"] == [[0, 2], [4, 6], [8, 10]]
    assert d["refused"][0] == "InvalidArgumentError"
    assert d["refused_calls"] == 0 and d["refused_name"] == "dltensor"


def test_numpy_source_freed_with_tensor(dl):
    d = dl.data("numpy source lifetime")
    assert d["alive_with_tensor"] and d["freed_after"]
    assert d["sum"] == sum(range(256))


BAD = {
    "wrong name": ("TypeError", "not a DLPack tensor"),
    "not a capsule": ("TypeError", "__dlpack__"),
    "null data": ("InvalidArgumentError", "NULL"),
    "dtype lanes": ("TypeError", "lanes 4"),
    "dtype float8": ("TypeError", "bits 8"),
    "device cuda": ("BufferError", "kDLCPU"),
    "negative shape": ("InvalidArgumentError", "-3"),
    "overflow shape": ("InvalidArgumentError", "overflow"),
    "byte offset": ("InvalidArgumentError", "byte_offset"),
    "version 2": ("InvalidArgumentError", "major version 2"),
    "copy value": ("ValueError", "copy"),
    "not simdev device": ("ValueError", "SIMDEV"),
    "export cpu tensor": ("ValueError", "SIMDEV"),
    "export string": ("TypeError", "string"),
    "export int32": ("TypeError", "host memory"),
    "import int32": ("TypeError", "host memory"),
    "export numpy": ("TypeError", "tf.Tensor"),
    "dlpack stream": ("BufferError", "stream"),
    "dlpack device": ("BufferError", "device"),
    "op null address": ("InvalidArgumentError", "NULL"),
    "op dtype mismatch": ("InvalidArgumentError", "not float64"),
    "op device cuda": ("InvalidArgumentError", "device type 2"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input(dl, name):
    cls, msg = dl.data(f"bad {name}")["error"]
    want_cls, word = BAD[name]
    assert cls == want_cls and word in msg, (cls, msg)


def test_consumed_capsule_refused(dl):
    d = dl.data("consumed capsule")
    assert d["name"] == "used_dltensor"
    assert d["again"][0] == "BufferError" and "consumed" in d["again"][1]


def test_good_after_errors(dl):
    d = dl.data("good after errors")
    assert d["values"] == [0, 0, 0, 1, 2, 3] and "SIMDEV:0" in d["device"]


def test_clean_exit(dl):
    dl.assert_clean_exit()


def test_example_shares_buffers(plugin):
    """examples/dlpack_exchange.py runs and its addresses show no copies."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                        "dlpack_exchange.py")
    p = subprocess.run([sys.executable, path], capture_output=True, text=True,
                       env=child_env(plugin), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    addrs = [re.findall(r"0x[0-9a-f]+", l) for l in lines]
    assert len(set(addrs[0] + addrs[1])) == 1, p.stdout  # y, NumPy, JAX
    assert "max(y) on SIMDEV = 100.0" in lines[2], p.stdout
    assert len(set(addrs[3])) == 1 and "SIMDEV:0" in lines[3], p.stdout
    assert lines[4].endswith("CPU:0: [1. 2. 3.]"), p.stdout
