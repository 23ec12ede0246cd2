"""simdev demo: TensorFlow loads the plugin, SIMDEV:0 appears, tensors go
host -> SIMDEV -> host unchanged, and TensorFlow's memory info for the device
follows real allocations.

    make demo              (or: .venv/bin/python examples/demo.py)

Soft placement is off: an op that cannot run on SIMDEV fails instead of
quietly running on the CPU. Set TF_CPP_MIN_LOG_LEVEL=0 to see TF's own logs.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before importing TF

import numpy as np
import tensorflow as tf  # loads site-packages/tensorflow-plugins/libsimdev.so

DEVICE = "/device:SIMDEV:0"


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def memory(label):
    info = tf.config.experimental.get_memory_info("SIMDEV:0")
    print(f"  {label:<26} current {human(info['current']):>10}   "
          f"peak {human(info['peak']):>10}")


def round_trip(name, value):
    with tf.device("/device:CPU:0"):
        host = tf.constant(value)
    with tf.device(DEVICE):
        on_device = tf.identity(host)  # TF copies the input to SIMDEV
    back = on_device.numpy()           # and this copies it back
    same = back.dtype == value.dtype and back.tobytes() == value.tobytes()
    shape = "x".join(map(str, value.shape)) or "scalar"
    print(f"  {name:<10} {shape:>8}  on {on_device.device.split('/')[-1][7:]:<9}"
          f" back equal: {'yes' if same else 'NO'}")
    return same


def main():
    tf.config.set_soft_device_placement(False)
    try:
        import simdev
        where = simdev.library_path()
    except (ImportError, FileNotFoundError):
        where = os.environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "?")
    print(f"TensorFlow {tf.__version__}, plugin {where}\n")

    print("Physical devices:")
    devices = tf.config.list_physical_devices()
    for d in devices:
        print(f"  {d.name:<28} {d.device_type}")
    if not any(d.device_type == "SIMDEV" for d in devices):
        sys.exit("\nno SIMDEV device: is simdev installed (pip install .)?")

    print("\nhost -> SIMDEV -> host:")
    rng = np.random.default_rng(0)
    ok = all([
        round_trip("float32", rng.standard_normal(1000).astype(np.float32)),
        round_trip("float64", np.array([0.0, -0.0, np.inf, -np.inf, np.nan])),
        round_trip("int64", np.arange(20, dtype=np.int64).reshape(4, 5)),
        round_trip("bfloat16", np.array([1.5, -2.25, 3.0],
                                        dtype=tf.bfloat16.as_numpy_dtype)),
        round_trip("bool", np.array(True)),
    ])

    print("\nMemory on SIMDEV:0 (TensorFlow's allocator on top of the device):")
    memory("before")
    with tf.device(DEVICE):
        t = tf.identity(np.ones(16 << 20, np.float32))  # 64 MiB
    memory("holding a 64 MiB tensor")
    del t
    memory("after del")

    print("\nall round trips equal" if ok else "\nMISMATCH: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
