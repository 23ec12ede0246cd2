"""SIMDEV_DISCRETE=1: device memory that host code cannot touch.

Three TF children:

- kernels (SIMDEV_BFC=0: every tensor is one allocation, so the report
  names the op that allocated it): the device region is mapped twice (/proc/self/maps); kernels,
  copies (host <-> device, device <-> device between two SIMDEV devices) and
  DLPack (zero-copy to NumPy through the alias, back in, NumPy in) give
  NumPy's answers with soft placement off; then a deliberate host read of a
  device buffer through ctypes dies of SIGSEGV, after simdev's report (the
  address, the allocation, the op that allocated it, the thread, a
  backtrace) and before Python's faulthandler, which simdev hands it to.
- cnn (SIMDEV_BFC=1, for get_memory_info): the demo's CNN trains with its variables and Adam on the CPU and the
  forward and backward passes on SIMDEV; with everything on SIMDEV (as
  examples/demo.py does) it dies in TF 2.21's DEVICE_DEFAULT
  AssignAdd/AssignSubVariableOp (AssignUpdateVariableOp<ThreadPoolDevice,
  T, ADD|SUB>), which updates Adam's slots and counter with host code: the finding recorded in
  docs/debugging.md, "Discrete memory". If a TF version stops doing that,
  this test fails and the note must change. With TF 2.16-2.18 simdev
  registers its own variable kernels (src/kernels/variables/), which do
  every update on the stream: there it trains all on SIMDEV instead.
- ulimit -f below SIMDEV_MEMORY_MB: the device is refused with a message
  naming SIMDEV_DISCRETE and `ulimit -f`, and the process carries on.
"""
import re
import signal

import pytest

from conftest import simdev_variable_kernels

ENV = {"SIMDEV_DISCRETE": "1", "SIMDEV_BFC": "0", "SIMDEV_DEVICE_COUNT": "2",
       "PYTHONFAULTHANDLER": "1"}

KERNELS = r'''
import ctypes
import numpy as np
import tensorflow as tf
import simdev.dlpack as sdl

tf.config.set_soft_device_placement(False)
D0, D1 = "/device:SIMDEV:0", "/device:SIMDEV:1"
rng = np.random.default_rng(3)

def views(name):
    """{perms: (start, end)} of the memfd mappings of device `name`."""
    out = {}
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) >= 6 and f[5] == "/memfd:" + name:
            lo, hi = (int(v, 16) for v in f[0].split("-"))
            out[f[1]] = (lo, hi)
    return out

@check("views")
def _():
    with tf.device(D0):
        tf.zeros([1]).numpy()  # devices exist
    v = views("simdev-0")
    return {"perms": sorted(v), "sizes": sorted(h - l for l, h in v.values())}

@check("ops")
def _():
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((17, 9)).astype(np.float32)
    x = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
    k = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    with tf.device(D0):
        mm = tf.matmul(a, b)
        act = tf.nn.relu(mm + tf.constant(np.arange(9, dtype=np.float32)))
        red = tf.reduce_sum(act, axis=0)
        sm = tf.nn.softmax(mm)
        conv = tf.nn.conv2d(x, k, 1, "SAME")
        cat = tf.concat([tf.transpose(mm), tf.zeros([9, 2])], 1)
    with tf.device(D1):
        other = tf.identity(mm) * 2.0  # device 0 -> device 1 copy
    ref_mm = a.astype(np.float64) @ b
    e = np.exp(ref_mm - ref_mm.max(1, keepdims=True))
    ref_conv = np.zeros((2, 8, 8, 4))
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    for i in range(3):
        for j in range(3):
            ref_conv += np.einsum("nhwc,co->nhwo", xp[:, i:i + 8, j:j + 8],
                                  k[i, j])
    err = lambda t, r: float(np.max(np.abs(t.numpy() - r)))
    return {
        "devices": sorted({t.device.split("/")[-1] for t in
                           (mm, act, red, sm, conv, cat)}),
        "other_device": other.device.split("/")[-1],
        "mm": err(mm, ref_mm),
        "act": err(act, np.maximum(ref_mm + np.arange(9), 0)),
        "red": err(red, np.maximum(ref_mm + np.arange(9), 0).sum(0)),
        "sm": err(sm, e / e.sum(1, keepdims=True)),
        "conv": err(conv, ref_conv),
        "cat": err(cat, np.concatenate([ref_mm.T, np.zeros((9, 2))], 1)),
        "other": err(other, 2 * ref_mm),
    }

@check("dlpack")
def _():
    with tf.device(D0):
        x = tf.constant(rng.standard_normal(1000).astype(np.float32)) + 1.0
    arr = np.from_dlpack(sdl.wrap(x))           # zero-copy, through the alias
    lo, hi = views("simdev-0")["rw-s"]
    back = sdl.from_dlpack(arr)                 # our own buffer back in
    host = rng.standard_normal(64).astype(np.float32)
    imp = sdl.from_dlpack(host)                 # NumPy memory, zero-copy
    with tf.device(D0):
        s1 = tf.reduce_sum(back * 2.0)
        s2 = tf.reduce_sum(imp)
    return {"equal": bool(np.array_equal(arr, x.numpy())),
            "in_alias_view": lo <= arr.ctypes.data < hi,
            "back": float(s1.numpy() - 2 * arr.astype(np.float64).sum()),
            "back_device": back.device.split("/")[-1],
            "imported": float(s2.numpy() - host.astype(np.float64).sum())}

# The deliberate host read: the address TF holds for x's buffer is in the
# PROT_NONE view, at the alias's offset in it.
with tf.device(D0):
    x = tf.constant(np.arange(256, dtype=np.float32)) + 1.0
arr = np.from_dlpack(sdl.wrap(x))
v = views("simdev-0")
addr = arr.ctypes.data - v["rw-s"][0] + v["---s"][0]
print("READING %#x" % addr, flush=True)
ctypes.string_at(addr, 4)
print("NOT REACHED", flush=True)
'''

CNN = r'''
import os, sys
import numpy as np
import tensorflow as tf
import keras
sys.path.insert(0, os.path.join(%(root)r, "examples"))
import training

SIM = "/device:SIMDEV:0"
xs, ys = training.synthetic_data("cnn", 3)

@check("cpu_variables")
def _():
    with tf.device("/CPU:0"):
        model = training.build_model("cnn")
        opt = keras.optimizers.Adam(1e-3)
        opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.device(SIM):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    with tf.device(SIM):
        losses = [float(step(tf.constant(x), tf.constant(y)))
                  for x, y in zip(xs, ys)]
    return {"losses": losses,
            "sim_peak": tf.config.experimental.get_memory_info("SIMDEV:0")["peak"]}

print("ALL ON SIMDEV", flush=True)
losses, _ = training.train("cnn", SIM, steps=2, data=(xs, ys))
print("TRAINED", losses, flush=True)
'''


@pytest.fixture(scope="module")
def kernels(run_tf):
    return run_tf(KERNELS, env=ENV)


@pytest.fixture(scope="module")
def cnn(run_tf):
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    # SIMDEV_BFC=1 here: get_memory_info's peak proves the passes ran on
    # SIMDEV (with SIMDEV_BFC=0 TF keeps no statistics).
    return run_tf(CNN % {"root": root}, env=dict(ENV, SIMDEV_BFC="1"))


def report_of(stderr):
    i = stderr.find("simdev: host access to device memory")
    assert i >= 0, stderr[-3000:]
    j = stderr.find("simdev: passing the signal on to the previous handler", i)
    assert j > i, stderr[i:i + 3000]
    return stderr[i:j]


def test_region_mapped_twice(kernels):
    d = kernels.data("views")
    # A PROT_NONE view (what TF gets) and a read/write alias of one memfd.
    assert d["perms"] == ["---s", "rw-s"]
    assert d["sizes"][0] == d["sizes"][1] == 2048 << 20


def test_kernels_and_copies(kernels):
    d = kernels.data("ops")
    assert d["devices"] == ["device:SIMDEV:0"]
    assert d["other_device"] == "device:SIMDEV:1"
    for k in ("mm", "act", "red", "sm", "cat", "other"):
        assert d[k] < 1e-4, (k, d[k])
    assert d["conv"] < 1e-4


def test_dlpack_exports_the_alias(kernels):
    d = kernels.data("dlpack")
    assert d["equal"] and d["in_alias_view"]
    assert d["back_device"] == "device:SIMDEV:0"
    assert abs(d["back"]) < 1e-2 and abs(d["imported"]) < 1e-3


def test_host_read_is_reported(kernels):
    assert kernels.returncode == -signal.SIGSEGV, kernels.describe()
    m = re.search(r"READING (0x[0-9a-f]+)", kernels.stdout)
    assert m, kernels.describe()
    assert "NOT REACHED" not in kernels.stdout
    rep = report_of(kernels.stderr)
    assert f"host access to device memory at {m.group(1)} (SIGSEGV)" in rep
    assert "device: simdev-0 is discrete" in rep
    # x = constant + 1.0: its buffer comes from AddV2, on the Python thread.
    assert re.search(r"allocation: base 0x[0-9a-f]+, \d+ bytes, offset 0, "
                     r"allocated \d+ ms ago by op AddV2 \(node \"AddV2\"\) "
                     r"on tid \d+", rep), rep
    assert re.search(r'thread: "python\d*(\.\d+)?" tid \d+', rep), rep
    assert "_ctypes" in rep and "libffi" in rep  # the backtrace: ctypes' read
    # Then Python's faulthandler, which simdev handed the signal to.
    after = kernels.stderr[kernels.stderr.find(rep) + len(rep):]
    assert "Fatal Python error: Segmentation fault" in after
    assert "string_at" in after


def test_cnn_trains_with_cpu_variables(cnn):
    d = cnn.data("cpu_variables")
    assert len(d["losses"]) == 3
    assert all(0.5 < l < 10 for l in d["losses"]), d
    assert d["sim_peak"] > 1 << 20  # the passes ran on SIMDEV's memory


@pytest.mark.skipif(simdev_variable_kernels(), reason=(
    "this TensorFlow (2.16-2.18) exports kernels_experimental.h's functions: simdev's "
    "own variable kernels replace TF's DEFAULT AssignAdd/Sub "
    "(test_cnn_all_on_simdev_trains_with_simdev_variable_kernels)"))
def test_cnn_all_on_simdev_stops_in_tf_assign_add(cnn):
    assert "ALL ON SIMDEV" in cnn.stdout, cnn.describe()
    assert "TRAINED" not in cnn.stdout
    assert cnn.returncode == -signal.SIGSEGV, cnn.describe()
    rep = report_of(cnn.stderr)
    # TF's DEVICE_DEFAULT AssignAdd/AssignSubVariableOp kernel:
    # AssignUpdateVariableOp<Eigen::ThreadPoolDevice, T, ADD|SUB>::Compute,
    # for any T (Adam's float slots, or its int64 iteration counter, may be
    # the first update to run).
    assert re.search(
        r"_ZN10tensorflow22AssignUpdateVariableOpIN5Eigen16ThreadPoolDevice"
        r"E\w+?LNS_15DenseUpdateTypeE[01]EE7ComputeEPNS_15OpKernelContextE",
        rep), rep
    # With BFC on, the allocation is one of BFC's chunks.
    assert re.search(r"allocation: base 0x[0-9a-f]+, \d+ bytes, offset \d+, "
                     r"allocated \d+ ms ago (by op \w+|outside any simdev "
                     r"kernel)", rep), rep
    assert 'thread: "tf_Compute"' in rep


@pytest.mark.skipif(not simdev_variable_kernels(), reason=(
    "this TensorFlow (2.19+) exports none of kernels_experimental.h's functions: simdev "
    "registers no variable kernels (test_cnn_all_on_simdev_stops_in_tf_assign_add)"))
def test_cnn_all_on_simdev_trains_with_simdev_variable_kernels(cnn):
    # Adam's assign_add / assign_sub (float slots, int64 counter) are
    # simdev's kernels: no host access, the steps' losses as above.
    assert "ALL ON SIMDEV" in cnn.stdout, cnn.describe()
    assert "host access to device memory" not in cnn.stderr, cnn.describe()
    m = re.search(r"^TRAINED \[([^\]]*)\]", cnn.stdout, re.M)
    assert m, cnn.describe()
    losses = [float(x) for x in m.group(1).split(",")]
    assert len(losses) == 2 and all(0.5 < l < 10 for l in losses), losses
    cnn.assert_clean_exit()


def test_ulimit_f_below_device_memory_is_a_clear_error(run_tf):
    # The discrete region is a memfd, which RLIMIT_FSIZE covers: the device
    # is refused with a message naming the setting and `ulimit -f` (TF
    # raises it at the first use of the device), and the process lives on.
    r = run_tf(r'''
import resource
import tensorflow as tf

_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))

@check("create")
def _():
    with tf.device("/device:SIMDEV:0"):
        return {"v": float(tf.constant(1.0).numpy())}
''', env={"SIMDEV_DISCRETE": "1", "SIMDEV_MEMORY_MB": "64"})
    err, msg = r.error("create")
    assert err is not None, r.describe()
    assert ("cannot create device 0 with 64 MiB: SIMDEV_DISCRETE=1: the "
            "device's 64 MiB are a memfd, and the file size limit (ulimit -f) "
            "is 1024 KiB: raise `ulimit -f` or lower SIMDEV_MEMORY_MB") in msg, \
        r.describe()
    r.assert_clean_exit()
