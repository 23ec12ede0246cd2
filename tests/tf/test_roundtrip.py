"""host -> SIMDEV -> host is bit-exact for every dtype and shape.

One subprocess builds every case and sends it through three paths:
  identity      CPU tensor, tf.identity under /device:SIMDEV:0 (TF copies the
                input to the device), back with .numpy()
  identity-cpu  as identity, back through a tf.identity on CPU:0
  copy          EagerTensor._copy_to_device both ways: a plain copy with no
                kernel in between (int32 Identity keeps its data in host
                memory on non-CPU devices, this path does not)
Soft placement is off, so an op without a SIMDEV kernel fails instead of
quietly running on CPU, and the intermediate tensor's device is checked.
Floats use random bit patterns plus NaNs with payloads (quiet and
signalling), -0.0, +-inf, denormals: every byte must come back unchanged.
"""
import pytest

CASES = [
    "float32", "float64", "int32", "int64", "uint8", "bool", "bfloat16", "half",
    "empty [0] float32", "empty [3,0] float32", "empty [0,5] int64", "empty [0] bool",
    "scalar float32 nan-payload", "scalar float64 -0.0", "scalar int64",
    "scalar bool", "scalar half snan", "scalar bfloat16 -inf",
    "odd uint8 n=1", "odd uint8 n=3", "odd uint8 n=63", "odd uint8 n=65",
    "odd uint8 n=4097", "odd uint8 n=65537", "odd uint8 n=1048573",
    "odd float64 n=12345", "odd int32 n=99991", "odd half n=777",
    "big uint8 256MiB",
]
PATHS = ["identity", "identity-cpu", "copy"]

SCRIPT = f"CASES = {CASES!r}\nPATHS = {PATHS!r}\n" + """
import gc
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(20240521)
BF16 = tf.bfloat16.as_numpy_dtype

# Bit patterns of special values, per float type (unsigned view).
SPECIALS = {
    np.float32: (np.uint32, [0x7fc00000, 0x7fc12345, 0xffc00001, 0x7f800001,
                             0xff812345, 0x80000000, 0x7f800000, 0xff800000,
                             0x00000001, 0x807fffff, 0x7f7fffff]),
    np.float64: (np.uint64, [0x7ff8000000000000, 0x7ff8deadbeef0001,
                             0xfff8000000000001, 0x7ff0000000000001,
                             0x8000000000000000, 0x7ff0000000000000,
                             0xfff0000000000000, 0x1, 0x7fefffffffffffff]),
    np.float16: (np.uint16, [0x7e00, 0x7e01, 0xfe01, 0x7c01, 0xfd55, 0x8000,
                             0x7c00, 0xfc00, 0x0001, 0x7bff]),
    BF16:       (np.uint16, [0x7fc0, 0x7fc1, 0xffc1, 0x7f81, 0xff81, 0x8000,
                             0x7f80, 0xff80, 0x0001, 0x7f7f]),
}

def random_bits(dtype, n):
    dtype = np.dtype(dtype)
    return np.frombuffer(rng.bytes(dtype.itemsize * n), dtype=dtype).copy()

def floats(t, n):
    u, specials = SPECIALS[t]
    a = random_bits(u, n)
    a[:len(specials)] = np.array(specials, dtype=u)
    return a.view(t)

def scalar_bits(t, pattern):
    u, _ = SPECIALS[t]
    return np.array(pattern, dtype=u).view(t).reshape(())

def make(case):
    shape = (7, 143)  # 1001 elements, odd in both dimensions
    n = 7 * 143
    if case == "float32": return floats(np.float32, n).reshape(shape)
    if case == "float64": return floats(np.float64, n).reshape(shape)
    if case == "half": return floats(np.float16, n).reshape(shape)
    if case == "bfloat16": return floats(BF16, n).reshape(shape)
    if case == "int32": return random_bits(np.int32, n).reshape(shape)
    if case == "int64": return random_bits(np.int64, n).reshape(shape)
    if case == "uint8": return random_bits(np.uint8, n).reshape(shape)
    if case == "bool": return (random_bits(np.uint8, n) & 1).astype(bool).reshape(shape)
    if case.startswith("empty"):
        dims = [int(d) for d in case.split()[1].strip("[]").split(",")]
        return np.zeros(dims, dtype=np.dtype(case.split()[2]))
    if case == "scalar float32 nan-payload": return scalar_bits(np.float32, 0x7fc12345)
    if case == "scalar float64 -0.0": return scalar_bits(np.float64, 0x8000000000000000)
    if case == "scalar int64": return np.array(-0x123456789abcdef, dtype=np.int64)
    if case == "scalar bool": return np.array(True)
    if case == "scalar half snan": return scalar_bits(np.float16, 0x7d55)
    if case == "scalar bfloat16 -inf": return scalar_bits(BF16, 0xff80)
    if case.startswith("odd"):
        _, t, count = case.split()
        t = {"half": np.float16}.get(t, t)
        return random_bits(t, int(count.split("=")[1]))
    if case == "big uint8 256MiB": return random_bits(np.uint8, 256 << 20)
    raise ValueError(case)

SIMDEV = "/device:SIMDEV:0"

def through(path, arr):
    with tf.device("/device:CPU:0"):
        x = tf.constant(arr)
    if not x.device.endswith("/device:CPU:0"):
        raise AssertionError(f"source tensor not on CPU: {x.device}")
    if path == "copy":
        y = x._copy_to_device(SIMDEV)
        back = y._copy_to_device("/device:CPU:0").numpy()
    else:
        with tf.device(SIMDEV):
            y = tf.identity(x)
        if path == "identity":
            back = y.numpy()
        else:
            with tf.device("/device:CPU:0"):
                back = tf.identity(y).numpy()
    out = {"device": y.device}
    out.update(raw_equal(arr, back))
    return out

for case in CASES:
    arr = make(case)
    for path in PATHS:
        check(f"{path}:{case}")(lambda: through(path, arr))
        gc.collect()
    del arr

# Streams are asynchronous: BFC hands a freed chunk to the next tensor while
# copies may still be queued. Back-to-back round trips through one reused
# chunk, then many tensors alive at once (many copies in flight).
@check("stress reuse")
def _():
    bad = []
    for i in range(300):
        arr = random_bits(np.uint8, 65536 + i)
        with tf.device(SIMDEV):
            y = tf.identity(tf.constant(arr))
        if y.numpy().tobytes() != arr.tobytes():
            bad.append(i)
        del y
    return {"bad_iterations": bad}

@check("stress many live")
def _():
    arrs = [random_bits(np.uint8, 4096 * (1 + i % 7)) for i in range(400)]
    with tf.device(SIMDEV):
        ys = [tf.identity(tf.constant(a)) for a in arrs]
    return {"bad_tensors": [i for i, (a, y) in enumerate(zip(arrs, ys))
                            if y.numpy().tobytes() != a.tobytes()]}
"""


@pytest.fixture(scope="module")
def rt(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("path", PATHS)
def test_roundtrip(rt, path, case):
    d = rt.data(f"{path}:{case}")
    assert d["device"].endswith("/device:SIMDEV:0"), \
        f"intermediate tensor is not on SIMDEV: {d['device']}"
    assert d["equal"], f"bytes changed host -> SIMDEV -> host: {d}"


def test_stress_reuse(rt):
    d = rt.data("stress reuse")
    assert not d["bad_iterations"], f"wrong bytes in iterations {d}"


def test_stress_many_live(rt):
    d = rt.data("stress many live")
    assert not d["bad_tensors"], f"wrong bytes in tensors {d}"


def test_clean_exit(rt):
    rt.assert_clean_exit()
