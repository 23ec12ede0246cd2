"""Runs one benchmark case in a loop, for a profiler to watch.

    perf record -g -o perf.data -- .venv/bin/python bench/profile_case.py matmul 2048 SIMDEV
    perf report -i perf.data --no-children --sort dso,symbol

Cases: matmul N, conv (8x56x56x64 3x3 -> 64 SAME forward), addv2 (eager
tiny AddV2), chain (tf.function of 100 tiny ops), train mlp|cnn (one
training step of examples/training.py, as bench_train times it); device
SIMDEV or CPU.
Runs for SECONDS (default 8) after a warm-up.
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def make(case, arg, dev):
    if case == "train":
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "examples"))
        import training
        xs, ys = training.synthetic_data(arg, 1)
        tf.config.set_soft_device_placement(True)  # Keras' initializers
        try:
            _, step = training.make_trainer(arg, dev)
        finally:
            tf.config.set_soft_device_placement(False)
        with tf.device(dev):
            x, y = tf.constant(xs[0]), tf.constant(ys[0])
        return lambda: step(x, y).numpy()
    rng = np.random.default_rng(0)
    with tf.device(dev):
        if case == "matmul":
            n = int(arg)
            a = tf.constant(rng.standard_normal((n, n), dtype=np.float32))
            return lambda: tf.linalg.matmul(a, a).numpy()
        if case == "conv":
            x = tf.constant(rng.standard_normal((8, 56, 56, 64), dtype=np.float32))
            w = tf.constant(rng.standard_normal((3, 3, 64, 64), dtype=np.float32))
            return lambda: tf.nn.conv2d(x, w, 1, "SAME").numpy()
        if case == "addv2":
            a = tf.constant(np.ones(4, np.float32))

            def f():
                for _ in range(100):
                    tf.raw_ops.AddV2(x=a, y=a)
            return f
        if case == "chain":
            x = tf.constant(np.ones(4, np.float32))
            y = tf.constant(np.full(4, 1.0001, np.float32))

            @tf.function
            def g(x, y):
                for i in range(100):
                    x = x + y if i % 2 == 0 else x * y
                return x
            return lambda: g(x, y).numpy()
    raise SystemExit(f"unknown case {case}")


def main():
    case, arg, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 8.0
    tf.config.set_soft_device_placement(False)
    dev = f"/device:{kind}:0"
    fn = make(case, arg, dev)
    with tf.device(dev):
        for _ in range(5):
            fn()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn()
            n += 1
    print(f"{case} {arg} on {kind}: {n} calls, "
          f"{(time.perf_counter() - t0) / n * 1e3:.3f} ms per call")


if __name__ == "__main__":
    main()
