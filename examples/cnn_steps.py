"""A few training steps of the demo's CNN on /device:SIMDEV:0, timed: for
measuring what a tool (valgrind, a debugger) costs per step.

    python examples/cnn_steps.py [STEPS]                 (default 3)
    python -m simdev.valgrind examples/cnn_steps.py 3    (docs/debugging.md)

Prints the time of the first step (tf.function tracing included) and of each
later step, and the whole script's time since start (TensorFlow's import
included).
"""
import os
import sys
import time

T0 = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before importing TF

import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import training  # noqa: E402


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if steps < 2:
        sys.exit("cnn_steps.py: STEPS must be at least 2 (the first traces)")
    tf.config.set_soft_device_placement(False)
    t_import = time.perf_counter() - T0
    xs, ys = training.synthetic_data("cnn", steps)
    model, step = training.make_trainer("cnn", "/device:SIMDEV:0")
    times = []
    with tf.device("/device:SIMDEV:0"):
        for x, y in zip(xs, ys):
            t = time.perf_counter()
            loss = float(step(tf.constant(x), tf.constant(y)).numpy())
            times.append(time.perf_counter() - t)
    print(f"import {t_import:.1f} s; first step {times[0]:.2f} s; "
          f"later steps {' '.join(f'{s:.3f}' for s in times[1:])} s; "
          f"loss {loss:.4f}; total {time.perf_counter() - T0:.1f} s")


if __name__ == "__main__":
    main()
