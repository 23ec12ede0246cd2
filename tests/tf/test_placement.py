"""The placement log, the usual way users find out where ops ran, names
SIMDEV for ops placed on it (eager ops and ops in a tf.function graph)."""
import re

import pytest

SCRIPT = """
import sys
import tensorflow as tf

tf.config.set_soft_device_placement(False)
tf.debugging.set_log_device_placement(True)

with tf.device("/device:CPU:0"):
    x = tf.constant([1.0, 2.0, 3.0])

print("MARK eager", file=sys.stderr, flush=True)

@check("eager")
def _():
    with tf.device("/device:SIMDEV:0"):
        y = tf.identity(x)
    return {"device": y.device}

print("MARK graph", file=sys.stderr, flush=True)

@tf.function
def f(t):
    with tf.device("/device:SIMDEV:0"):
        return tf.identity(t, name="simdev_identity")

@check("graph")
def _():
    return {"device": f(x).device}

print("MARK end", file=sys.stderr, flush=True)
"""

PREFIX = "/job:localhost/replica:0/task:0/device:"


@pytest.fixture(scope="module")
def log(run_tf):
    return run_tf(SCRIPT, env={"TF_CPP_MIN_LOG_LEVEL": "0"})


def section(run, name):
    """Both streams' text between MARK <name> and the next MARK."""
    text = run.stderr + "\n" + run.stdout
    m = re.search(rf"MARK {name}\n(.*?)(MARK |\Z)", text, re.S)
    assert m, f"marker {name!r} missing\n{run.describe()}"
    return m.group(1)


def test_eager_op_logged_on_simdev(log):
    d = log.data("eager")
    assert d["device"] == PREFIX + "SIMDEV:0", d
    text = section(log, "eager")
    want = f"Executing op Identity in device {PREFIX}SIMDEV:0"
    assert want in text, f"{want!r} not in the placement log:\n{text[-3000:]}"


def test_graph_node_logged_on_simdev(log):
    log.data("graph")  # the function ran
    text = section(log, "graph")
    want = f"simdev_identity: (Identity): {PREFIX}SIMDEV:0"
    assert want in text, f"{want!r} not in the placement log:\n{text[-3000:]}"


def test_clean_exit(log):
    log.assert_clean_exit()
