"""simdev demo: train a small Keras CNN on /device:SIMDEV:0.

    make demo              (or: .venv/bin/python examples/demo.py)

TensorFlow loads the plugin from site-packages/tensorflow-plugins/, SIMDEV:0
appears, and a CNN (Conv2D, ReLU, MaxPool, Dense, softmax cross-entropy,
Adam) trains on synthetic data. Every compute op of the step runs in
simdev's C kernels on the device's stream thread. The demo prints the loss
per epoch, where the ops of a step were placed, and the time per step next
to the same training on TF's own CPU device.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before importing TF

import numpy as np
import tensorflow as tf  # loads site-packages/tensorflow-plugins/libsimdev.so

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import placement_report  # noqa: E402
import training  # noqa: E402

EPOCHS = 5
STEPS_PER_EPOCH = 20


def main():
    try:
        import simdev
        where = simdev.library_path()
    except (ImportError, FileNotFoundError):
        where = os.environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "?")
    print(f"TensorFlow {tf.__version__}, plugin {where}")
    devices = [d.name for d in tf.config.list_physical_devices()]
    print("Physical devices: " + ", ".join(devices))
    if not any("SIMDEV" in d for d in devices):
        sys.exit("no SIMDEV device: is simdev installed (pip install .)?")

    steps = EPOCHS * STEPS_PER_EPOCH
    data = training.synthetic_data("cnn", STEPS_PER_EPOCH)
    print(f"\nTraining a small CNN, batch {training.BATCH}, "
          f"{EPOCHS} epochs x {STEPS_PER_EPOCH} steps, Adam:")
    results = {}
    for dev in ("SIMDEV", "CPU"):
        losses, per_step = training.train("cnn", f"/device:{dev}:0",
                                          steps=steps, data=data)
        results[dev] = (losses, per_step)
    sim, cpu = results["SIMDEV"][0], results["CPU"][0]
    print(f"  {'epoch':>5}  {'loss SIMDEV':>12}  {'loss CPU':>12}")
    for e in range(EPOCHS):
        s = slice(e * STEPS_PER_EPOCH, (e + 1) * STEPS_PER_EPOCH)
        print(f"  {e + 1:>5}  {np.mean(sim[s]):12.6f}  {np.mean(cpu[s]):12.6f}")
    worst = max(abs(a - b) / abs(b) for a, b in zip(sim, cpu))
    print(f"  largest relative difference of a step's loss: {worst:.2e}")

    print("\nTime per step (median, after tracing):")
    t_sim, t_cpu = results["SIMDEV"][1], results["CPU"][1]
    print(f"  SIMDEV {t_sim * 1e3:8.2f} ms   CPU {t_cpu * 1e3:8.2f} ms   "
          f"SIMDEV/CPU {t_sim / t_cpu:.2f}x")

    print("\nOp placement of a training step (TF's placement log):")
    placement_report.report("cnn")


if __name__ == "__main__":
    main()
