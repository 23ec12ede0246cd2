"""Per-op overhead benchmark group: simdev next to TF's CPU device.

    .venv/bin/python bench/bench_overhead.py [--quick] [--json PATH]

- "eager AddV2 f32[4]": tf.raw_ops.AddV2 on two float32[4] tensors, eager,
  timed as loops of 100 calls; samples are seconds per op (loop / 100).
- "tf.function 100-op chain f32[4]": one tf.function of 100 dependent tiny
  ops, x = x + y and x = x * y alternating (float32[4], y an argument);
  samples are seconds per call of the function.

Why not a chain of x = x + 1.0: Grappler's constant folding pushes the
constants together and leaves one AddV2; a chain of x = x + y is rewritten
by the arithmetic optimizer into one AddN (which SIMDEV has no kernel for).
The alternating chain keeps its 50 AddV2 + 50 Mul after Grappler (seen in
a v1 Session's partition graphs on both devices, and in a profiler trace of
this tf.function on the CPU device).

Sides alternate sample by sample.

--quick: fewer repetitions.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import CPU, SIM  # noqa: E402

tf.config.set_soft_device_placement(False)

GROUP = "overhead"
EAGER_TARGET = {"vs": "tf_cpu", "min_ratio": 0.667}
LOOP = 100    # eager ops per timed sample
CHAIN = 100   # ops in the tf.function
EAGER_REPS, FN_REPS = 500, 300
QUICK_EAGER_REPS, QUICK_FN_REPS = 40, 20


def eager_case(reps):
    name = "eager AddV2 f32[4]"
    common.progress(f"[{GROUP}] {name}: {reps} x {LOOP} ops x 2 sides")
    fns = {}
    for side, dev, kind in (("simdev", SIM, "SIMDEV"), ("tf_cpu", CPU, "CPU")):
        with tf.device(dev):
            a = tf.constant(np.ones(4, np.float32))
            common.check_device(tf.raw_ops.AddV2(x=a, y=a), kind, name)

        def f(dev=dev, a=a):
            with tf.device(dev):
                for _ in range(LOOP):
                    tf.raw_ops.AddV2(x=a, y=a)
        fns[side] = f
    res = common.alternate(fns, reps, rounds=reps, warmup=0)
    samples = {k: [t / LOOP for t in v] for k, v in res.items()}
    return common.case(GROUP, name, samples, target=EAGER_TARGET)


@tf.function
def chain(x, y):
    for i in range(CHAIN):
        x = x * y if i % 2 else x + y
    return x


def function_case(reps):
    name = f"tf.function {CHAIN}-op chain f32[4]"
    common.progress(f"[{GROUP}] {name}: {reps} calls x 2 sides")
    fns = {}
    for side, dev, kind in (("simdev", SIM, "SIMDEV"), ("tf_cpu", CPU, "CPU")):
        with tf.device(dev):
            x = tf.constant(np.zeros(4, np.float32))
            y = tf.constant(np.ones(4, np.float32))
            r = common.check_device(chain(x, y), kind, name)
        # y = 1: the chain adds 1 every other op.
        assert np.all(r.numpy() == CHAIN // 2), (name, r.numpy())

        def f(dev=dev, x=x, y=y):
            with tf.device(dev):
                chain(x, y)
        fns[side] = f
    samples = common.alternate(fns, reps, rounds=reps, warmup=0)
    return common.case(GROUP, name, samples)


def run(quick=False):
    er, fr = (QUICK_EAGER_REPS, QUICK_FN_REPS) if quick else (EAGER_REPS,
                                                               FN_REPS)
    cases = [eager_case(er), function_case(fr)]
    info = common.base_info(tf, quick)
    info.update({"eager_ops_per_sample": LOOP, "chain_ops": CHAIN})
    return common.result(GROUP, cases, info)


def main(argv=None):
    return common.main(run, __doc__, argv)


if __name__ == "__main__":
    main()
