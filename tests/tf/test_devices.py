"""simdev shows up as TF devices, and tensors move between two of them."""
import pytest

LIST = """
import tensorflow as tf

@check("physical")
def _():
    return {"devices": [[d.name, d.device_type]
                        for d in tf.config.list_physical_devices()]}

@check("logical")
def _():
    return {"devices": [d.name for d in tf.config.list_logical_devices("SIMDEV")]}
"""

TWO_DEVICES = LIST + """
import numpy as np
tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(7)
# Random bits: NaN payloads, -0.0, denormals all included.
host = np.frombuffer(rng.bytes(4 * 1000003), dtype=np.float32).copy()
host_i = rng.integers(-2**62, 2**62, size=4097, dtype=np.int64)

def move(arr, src, dst):
    with tf.device("/device:CPU:0"):
        x = tf.constant(arr)
    with tf.device(f"/device:SIMDEV:{src}"):
        a = tf.identity(x)
    with tf.device(f"/device:SIMDEV:{dst}"):
        b = tf.identity(a)
    out = {"src_device": a.device, "dst_device": b.device}
    out.update(raw_equal(arr, b.numpy()))
    return out

@check("0->1 float32")
def _():
    return move(host, 0, 1)

@check("0->1 int64")
def _():
    return move(host_i, 0, 1)

@check("1->0 float32")
def _():
    return move(host, 1, 0)
"""


@pytest.fixture(scope="module")
def one(run_tf):
    return run_tf(LIST)


@pytest.fixture(scope="module")
def two(run_tf):
    return run_tf(TWO_DEVICES, env={"SIMDEV_DEVICE_COUNT": "2"})


def simdev_devices(devices):
    return sorted(d for d in devices if d[1] == "SIMDEV")


def test_default_one_device(one):
    devs = one.data("physical")["devices"]
    assert simdev_devices(devs) == [["/physical_device:SIMDEV:0", "SIMDEV"]], devs


def test_cpu_still_listed(one):
    devs = one.data("physical")["devices"]
    assert ["/physical_device:CPU:0", "CPU"] in devs, devs


def test_logical_device(one):
    assert one.data("logical")["devices"] == ["/device:SIMDEV:0"]


def test_two_devices(two):
    devs = two.data("physical")["devices"]
    assert simdev_devices(devs) == [["/physical_device:SIMDEV:0", "SIMDEV"],
                                    ["/physical_device:SIMDEV:1", "SIMDEV"]], devs


@pytest.mark.parametrize("name", ["0->1 float32", "0->1 int64", "1->0 float32"])
def test_move_between_devices(two, name):
    d = two.data(name)
    src, dst = name.split()[0].split("->")
    assert d["src_device"].endswith(f"/device:SIMDEV:{src}"), d
    assert d["dst_device"].endswith(f"/device:SIMDEV:{dst}"), d
    assert d["equal"], f"tensor changed on the way: {d}"


def test_clean_exit_one(one):
    one.assert_clean_exit()


def test_clean_exit_two(two):
    two.assert_clean_exit()
