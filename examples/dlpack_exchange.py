"""SIMDEV tensors shared with NumPy, JAX and TF's CPU device, without copies.

    .venv/bin/python examples/dlpack_exchange.py

A SIMDEV result goes to NumPy and JAX zero-copy; NumPy writes into it and
TF sees the write; a JAX array comes back to SIMDEV; a CPU tensor crosses
to SIMDEV and back. Every step prints the buffer addresses, so "no copy"
can be checked by eye (`simdev.dlpack`, README "DLPack").
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import simdev.dlpack as sdl  # noqa: E402

SIM = "/device:SIMDEV:0"


def address(t):
    """Where a SIMDEV tensor's buffer is (read through an export)."""
    return np.from_dlpack(sdl.wrap(t)).ctypes.data


def main():
    tf.config.set_soft_device_placement(False)  # nothing falls back to CPU
    with tf.device(SIM):
        x = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
        y = tf.nn.relu(x - 5.0)                 # computed by simdev's kernels
    print(f"y on {y.device}, buffer at {address(y):#x}")

    a = np.from_dlpack(sdl.wrap(y))             # NumPy view of y's buffer
    j = jax.dlpack.from_dlpack(sdl.wrap(y))     # JAX view of the same buffer
    print(f"NumPy array at {a.ctypes.data:#x}, JAX array at "
          f"{j.unsafe_buffer_pointer():#x}")

    a[0, 0] = 100.0                             # a write through NumPy ...
    with tf.device(SIM):
        seen = tf.reduce_max(y).numpy()         # ... is what simdev reads
    print(f"after a NumPy write, max(y) on SIMDEV = {seen}")

    k = jnp.arange(8, dtype=jnp.float32) * 2    # JAX -> SIMDEV, no copy
    s = sdl.from_dlpack(k, copy=False)
    print(f"JAX array at {k.unsafe_buffer_pointer():#x} is SIMDEV tensor "
          f"at {address(s):#x} on {s.device}")

    with tf.device("/device:CPU:0"):
        c = tf.constant([1.0, 2.0, 3.0])
    on_sim = sdl.from_dlpack(c)                 # TF CPU -> SIMDEV
    back = tf.experimental.dlpack.from_dlpack(sdl.to_dlpack(on_sim))
    print(f"CPU tensor -> {on_sim.device} -> {back.device}: {back.numpy()}")


if __name__ == "__main__":
    main()
