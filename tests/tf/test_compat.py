"""The plugin stays out of the way when it must, and computes like TF's CPU.

- SIMDEV_DISABLE=1: the platform registers, no SIMDEV device exists, no
  kernel is registered, TensorFlow carries on with its CPU, and stderr says
  why in one line. It wins over other, even invalid, settings.
- Another TensorFlow release: SE_InitPlugin compares the release simdev was
  built against with the running one (TF_Version) and refuses, the same way.
  The child makes TF_Version answer "2.20.0" by loading, with global symbols
  and before TensorFlow, a tiny library that defines it (compiled here with
  the C compiler the build uses): the lookup that SE_InitPlugin does is the
  real one, only its answer is changed.
- Denormals: TF's CPU threads flush them to zero (FTZ and DAZ); simdev's
  stream workers do the same, so results that underflow agree with TF CPU.
"""
import concurrent.futures
import os
import shutil
import subprocess

import pytest

NO_DEVICE = """
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels as _k
@check("state")
def _():
    names = [d.name for d in tf.config.list_physical_devices("SIMDEV")]
    simdev_kernels = sorted({k.op for k in _k.get_all_registered_kernels().kernel
                             if k.device_type == "SIMDEV"})
    with tf.device("/device:CPU:0"):
        y = tf.matmul(tf.ones([2, 3]), tf.ones([3, 2])).numpy()
    # What SE_InitPlugin's lookup finds (dlsym(RTLD_DEFAULT, "TF_Version")):
    # if TF stopped exporting it globally, the release check would silently
    # rely on struct sizes alone.
    import ctypes
    fn = ctypes.CDLL(None).TF_Version
    fn.restype = ctypes.c_char_p
    return {"simdev": names, "kernels": simdev_kernels,
            "cpu_ok": bool(np.all(y == 3.0)),
            "global_tf_version": fn().decode(), "tf_version": tf.version.VERSION}
"""

FAKE_TF_VERSION = r"""
const char* TF_Version(void) { return "2.20.0"; }
"""

WITH_FAKE = """
import ctypes, os
ctypes.CDLL(os.environ["FAKE_TF_VERSION_LIB"], mode=ctypes.RTLD_GLOBAL)
""" + NO_DEVICE

# Products whose exact result is a float32 denormal (FTZ), and denormal
# inputs (DAZ): with both bits set both become 0, as on TF's CPU.
DENORMALS = """
import numpy as np
import tensorflow as tf
tf.config.set_soft_device_placement(False)
# float32's smallest normal is 1.18e-38. FTZ: normal operands whose exact
# result is a denormal. DAZ: denormal operands whose exact result is normal.
normal = np.array([2e-38, 1.5e-38, -2e-38, 1.0], np.float32)
den = np.array([3e-39, -1e-40, 1e-45, 2.0], np.float32)
half = np.full(4, 0.5, np.float32)
big = np.full(4, 1e10, np.float32)
under = np.array([2e-38, 1.5e-38, -2e-38, 0.0], np.float32)  # dot: 7.5e-39

def run(dev, fn, *a):
    with tf.device(dev):
        r = fn(*[tf.constant(x) for x in a])
        return r.numpy(), r.device

for name, fn, args in [("mul_ftz", tf.multiply, (normal, half)),
                       ("mul_daz", tf.multiply, (den, big)),
                       ("matmul", lambda a, b: tf.matmul(tf.reshape(a, [1, 4]),
                                                          tf.reshape(b, [4, 1])),
                        (under, half))]:
    @check(name)
    def _():
        s, sdev = run("/device:SIMDEV:0", fn, *args)
        c, _ = run("/device:CPU:0", fn, *args)
        return {"simdev": s.ravel().tolist(), "cpu": c.ravel().tolist(),
                "device": sdev}
"""


@pytest.fixture(scope="module")
def fake_version_lib(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler to build the fake TF_Version library")
    d = tmp_path_factory.mktemp("fakever")
    src = d / "fake.c"
    src.write_text(FAKE_TF_VERSION)
    lib = d / "libfake_tf_version.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)],
                   check=True, capture_output=True)
    return str(lib)


@pytest.fixture(scope="module")
def runs(run_tf, fake_version_lib):
    jobs = {
        "disabled": (NO_DEVICE, {"SIMDEV_DISABLE": "1"}),
        # Disabling works even when another setting is broken.
        "disabled_bad_other": (NO_DEVICE, {"SIMDEV_DISABLE": "1",
                                           "SIMDEV_MEMORY_MB": "2g"}),
        "enabled": (NO_DEVICE, {"SIMDEV_DISABLE": "0"}),
        "other_release": (WITH_FAKE, {"FAKE_TF_VERSION_LIB": fake_version_lib}),
        "denormals": (DENORMALS, None),
    }
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        futs = {n: ex.submit(run_tf, code, env) for n, (code, env) in jobs.items()}
        return {n: f.result() for n, f in futs.items()}


def _no_device_lines(r):
    return [l for l in r.stderr.splitlines() if l.startswith("simdev: no SIMDEV device")]


@pytest.mark.parametrize("name", ["disabled", "disabled_bad_other"])
def test_disable_switch(runs, name):
    r = runs[name]
    d = r.data("state")
    r.assert_clean_exit()
    assert d["simdev"] == [], d
    assert d["kernels"] == [], f"kernels registered with no device: {d['kernels'][:5]}"
    assert d["cpu_ok"], d
    lines = _no_device_lines(r)
    assert lines == ["simdev: no SIMDEV device: SIMDEV_DISABLE=1"], r.describe()


def test_disable_zero_changes_nothing(runs):
    r = runs["enabled"]
    d = r.data("state")
    assert d["simdev"] == ["/physical_device:SIMDEV:0"], d
    assert "MatMul" in d["kernels"], d
    assert d["global_tf_version"] == d["tf_version"], d
    assert _no_device_lines(r) == [], r.describe()


def test_other_tf_release_refused(runs):
    r = runs["other_release"]
    d = r.data("state")
    r.assert_clean_exit()
    assert d["simdev"] == [] and d["kernels"] == [], d
    assert d["cpu_ok"], d
    lines = _no_device_lines(r)
    assert len(lines) == 1, r.describe()
    assert "running in TensorFlow 2.20.0" in lines[0], lines
    assert "built for TensorFlow 2.21." in lines[0], lines


@pytest.mark.parametrize("name", ["mul_ftz", "mul_daz", "matmul"])
def test_denormals_flushed_like_cpu(runs, name):
    d = runs["denormals"].data(name)
    assert "SIMDEV:0" in d["device"], d
    assert d["simdev"] == d["cpu"], d
    # The independent reference: IEEE results with denormals replaced by 0.
    # IEEE would give 1e-38, 7.5e-39, -1e-38, 0.5 / 3e-29, -1e-30, 1.4e-35,
    # 2e10 / 7.5e-39: flushed, every denormal result or operand is 0.
    import numpy as np
    want = {"mul_ftz": [0.0, 0.0, 0.0, 0.5], "mul_daz": [0.0, 0.0, 0.0, 2e10],
            "matmul": [0.0]}[name]
    np.testing.assert_array_equal(np.array(d["simdev"], np.float32),
                                  np.array(want, np.float32))
