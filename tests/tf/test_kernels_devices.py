"""Kernels on every simulated device: each launch goes to the stream of the
device TF placed it on (TF_GetStream), and SIMDEV:1 computes what SIMDEV:0
does, including a chain across both devices. Results are checked against
NumPy (float64) within the rounding bound of a 200-term dot product
(conftest's sum_bound), the same on any machine."""
import pytest

SCRIPT = r"""
import numpy as np
import tensorflow as tf
tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(3)
a = rng.standard_normal((300, 200)).astype(np.float32)
a64 = a.astype(np.float64)
want = np.maximum(a64 @ a64.T, 0)
# relu is exact: the bound is the product's
bound = sum_bound(np.abs(a64) @ np.abs(a64).T, a.shape[1], "float32")

def judge(y):
    return dict(compare_to_ref(y.numpy(), want, bound), device=y.device)

@check("per_device")
def _():
    out = {}
    for d in ("/device:SIMDEV:0", "/device:SIMDEV:1"):
        with tf.device(d):
            y = tf.nn.relu(tf.matmul(tf.constant(a), tf.constant(a.T)))
        out[d] = judge(y)
    return out

@check("chain")
def _():
    with tf.device("/device:SIMDEV:0"):
        y = tf.matmul(tf.constant(a), tf.constant(a.T))
    with tf.device("/device:SIMDEV:1"):
        z = tf.nn.relu(y)          # TF copies y from SIMDEV:0 to SIMDEV:1
    return judge(z)
"""


@pytest.fixture(scope="module")
def two(run_tf):
    return run_tf(SCRIPT, env={"SIMDEV_DEVICE_COUNT": "2"})


@pytest.mark.parametrize("dev", ["/device:SIMDEV:0", "/device:SIMDEV:1"])
def test_kernels_run_on_each_device(two, dev):
    d = two.data("per_device")[dev]
    assert d["device"].endswith(dev.split("/device:")[1]), d
    assert d["ok"], d


def test_chain_across_devices(two):
    d = two.data("chain")
    assert d["device"].endswith("SIMDEV:1") and d["ok"], d
    two.assert_clean_exit()
