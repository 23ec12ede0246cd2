"""Training-step benchmark group: simdev next to TF's CPU device.

    .venv/bin/python bench/bench_train.py [--quick] [--json PATH]

One training step (the tf.function of examples/training.py: forward, softmax
cross-entropy, gradients, Adam) of the small CNN and of the MLP, batch 32,
each model built on its device from the same seed; the step's loss is
fetched (.numpy()) inside the timing. Sides alternate call by call.

Metrics (bytes):
- "SIMDEV peak memory, CNN train step": the SIMDEV allocator's peak over a
  few CNN steps, after tf.config.experimental.reset_memory_stats (so it
  includes the model's variables and optimizer state, which stay allocated);
- "process peak RSS": resource.getrusage maxrss of this process after all
  runs (the whole process so far, TensorFlow itself included).

--quick: fewer repetitions.
"""
import os
import resource
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import common  # noqa: E402
import training  # noqa: E402
from common import CPU, SIM  # noqa: E402

tf.config.set_soft_device_placement(False)

GROUP = "train"
REPS = {"cnn": 120, "mlp": 300}
QUICK_REPS = {"cnn": 8, "mlp": 15}
MEMORY_STEPS = 3
TITLES = {"cnn": "train step CNN b32", "mlp": "train step MLP b32"}


def make_step(kind, dev, xs, ys):
    # Keras' initializers run a few eager int ops (seed FloorMod) that have
    # no SIMDEV kernel: build with soft placement, then switch it off again.
    tf.config.set_soft_device_placement(True)
    try:
        _, step = training.make_trainer(kind, dev)
    finally:
        tf.config.set_soft_device_placement(False)
    with tf.device(dev):
        x, y = tf.constant(xs[0]), tf.constant(ys[0])

    def call():
        # The call itself must be under the device scope too: outside it the
        # function runs on the default device (SIMDEV) whatever its weights.
        with tf.device(dev):
            return step(x, y)

    def f():
        return call().numpy()
    return call, f


def train_case(kind, reps):
    name = TITLES[kind]
    common.progress(f"[{GROUP}] {name}: {reps} steps x 2 sides")
    xs, ys = training.synthetic_data(kind, 1)
    fns, calls = {}, {}
    for side, dev, dev_kind in (("simdev", SIM, "SIMDEV"),
                                ("tf_cpu", CPU, "CPU")):
        call, f = make_step(kind, dev, xs, ys)
        loss = common.check_device(call(), dev_kind, name)  # + tracing
        assert np.isfinite(loss.numpy()), (name, side, loss)
        fns[side], calls[side] = f, call
    samples = common.alternate(fns, reps, rounds=reps, warmup=0)
    return common.case(GROUP, name, samples), calls["simdev"]


def simdev_peak_bytes(call):
    """Peak SIMDEV allocator bytes over MEMORY_STEPS steps (traced already)."""
    tf.config.experimental.reset_memory_stats("SIMDEV:0")
    for _ in range(MEMORY_STEPS):
        call().numpy()
    return tf.config.experimental.get_memory_info("SIMDEV:0")["peak"]


def run(quick=False):
    reps = QUICK_REPS if quick else REPS
    cnn, cnn_sim = train_case("cnn", reps["cnn"])
    mlp, _ = train_case("mlp", reps["mlp"])
    metrics = [common.metric("SIMDEV peak memory, CNN train step",
                             simdev_peak_bytes(cnn_sim))]
    # ru_maxrss is in KiB on Linux.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    metrics.append(common.metric("process peak RSS", rss))
    info = common.base_info(tf, quick)
    info.update({"batch": training.BATCH, "memory_steps": MEMORY_STEPS})
    return common.result(GROUP, [cnn, mlp], info, metrics)


def main(argv=None):
    return common.main(run, __doc__, argv)


if __name__ == "__main__":
    main()
