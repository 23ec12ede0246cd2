"""Keras 3 training on SIMDEV: same losses as CPU, ops placed on SIMDEV,
identical losses with SIMDEV_SYNC=1.

examples/training.py builds an MLP and a small CNN (Conv2D, ReLU, MaxPool,
Dense, softmax cross-entropy, Adam) from a fixed seed on one device and
trains 50 steps; the SIMDEV and CPU runs share the data and initial weights.
"""
import os
import re

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
STEPS = 50
KINDS = ["mlp", "cnn"]

TRAIN = f"""
import sys
sys.path.insert(0, {os.path.abspath(EXAMPLES)!r})
import tensorflow as tf
import training
for kind in {KINDS!r}:
    for dev in DEVICES:
        @check(kind + "@" + dev)
        def _():
            losses, _ = training.train(kind, "/device:%s:0" % dev, steps={STEPS})
            return {{"losses": losses}}
"""

# Ops of the forward and backward pass that must run on SIMDEV.
MUST_BE_ON_SIMDEV = {
    "MatMul", "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
    "BiasAdd", "BiasAddGrad", "Relu", "ReluGrad", "Tanh", "TanhGrad",
    "MaxPool", "MaxPoolGrad", "SparseSoftmaxCrossEntropyWithLogits",
}

PLACEMENT = f"""
import sys
sys.path.insert(0, {os.path.abspath(EXAMPLES)!r})
import tensorflow as tf
import training
tf.debugging.set_log_device_placement(True)
for kind in {KINDS!r}:
    @check("placed-" + kind)
    def _():
        training.train(kind, "/device:SIMDEV:0", steps=2)
"""

# TF prints "node: (Op): /job:.../device:TYPE:N" to stdout (and again,
# with a log prefix, to stderr at TF_CPP_MIN_LOG_LEVEL=0); stdout is parsed.
LOG_LINE = re.compile(r"^(\S+): \((\w+)\): /job:\S+/device:(\w+):\d+", re.M)


@pytest.fixture(scope="module")
def both(run_tf):
    return run_tf("DEVICES = ['SIMDEV', 'CPU']\n" + TRAIN, timeout=600)


@pytest.fixture(scope="module")
def sync(run_tf):
    return run_tf("DEVICES = ['SIMDEV']\n" + TRAIN,
                  env={"SIMDEV_SYNC": "1"}, timeout=600)


@pytest.fixture(scope="module")
def placed(run_tf):
    return run_tf(PLACEMENT, env={"TF_CPP_MIN_LOG_LEVEL": "0"}, timeout=600)


@pytest.mark.parametrize("kind", KINDS)
def test_losses_match_cpu(both, kind):
    sim = both.data(kind + "@SIMDEV")["losses"]
    cpu = both.data(kind + "@CPU")["losses"]
    assert len(sim) == len(cpu) == STEPS
    worst = max(abs(a - b) / abs(b) for a, b in zip(sim, cpu))
    assert worst <= 1e-4, f"max relative loss difference {worst:.2e}"


@pytest.mark.parametrize("kind", KINDS)
def test_model_learns(both, kind):
    """The comparison is only meaningful if training moves the loss."""
    sim = both.data(kind + "@SIMDEV")["losses"]
    assert sum(sim[-5:]) / 5 < 0.8 * sum(sim[:5]) / 5


@pytest.mark.parametrize("kind", KINDS)
def test_sync_mode_identical(both, sync, kind):
    assert sync.data(kind + "@SIMDEV")["losses"] == \
        both.data(kind + "@SIMDEV")["losses"]


def test_training_ops_on_simdev(placed):
    """Every compute op of both models' steps, forward and backward."""
    for kind in KINDS:
        placed.data("placed-" + kind)
    seen = {}
    for name, op, dev in LOG_LINE.findall(placed.stdout):
        seen.setdefault(op, set()).add(dev)
    missing = sorted(op for op in MUST_BE_ON_SIMDEV if op not in seen)
    assert not missing, f"not in the placement log: {missing}"
    off = sorted(op for op in MUST_BE_ON_SIMDEV if seen[op] != {"SIMDEV"})
    assert not off, f"placed off SIMDEV: {[(op, seen[op]) for op in off]}"
