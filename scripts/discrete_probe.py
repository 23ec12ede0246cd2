#!/usr/bin/env python3
"""Which TensorFlow operations touch SIMDEV memory with host code?

Runs small TF programs, each in its own process, with SIMDEV_DISCRETE=1
(device memory is not host-accessible; a host access dies of SIGSEGV after
simdev's report) and SIMDEV_BFC=0 (every tensor is one allocation, so the
report names the op that allocated the buffer). For each program it prints
"ok" or the report's first TensorFlow frame, the allocating op and the
thread; --full prints the whole report.

    .venv/bin/python scripts/discrete_probe.py [--full] [NAME ...]

The findings are in docs/debugging.md, "Discrete memory".
"""
import argparse
import os
import tempfile
import re
import subprocess
import sys
import textwrap

PRELUDE = """
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
D = "/device:SIMDEV:0"  # soft placement on, as in users' programs
ROOT = %r
"""

PROBES = {
    # Variables: TF 2.21 serves them on a PluggableDevice with its
    # DEVICE_DEFAULT kernels (src/kernels/sk.h explains).
    "variable_create": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
        print(v.numpy().sum())
    """,
    "variable_assign": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            v.assign(tf.fill([256], 2.0))
        print(v.numpy().sum())
    """,
    "variable_assign_while_read": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            old = v.read_value()   # keeps the old buffer referenced
            v.assign(tf.fill([256], 2.0))
        print(v.numpy().sum(), old.numpy().sum())
    """,
    "variable_assign_kept_value": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            x = tf.fill([256], 2.0)
            v.assign(x)            # x stays alive: its buffer is shared
            v.assign(x * 3.0)
        print(v.numpy().sum(), x.numpy().sum())
    """,
    "variable_assign_add": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            v.assign_add(tf.ones([256]))
        print(v.numpy().sum())
    """,
    "variable_assign_sub": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            v.assign_sub(tf.ones([256]))
        print(v.numpy().sum())
    """,
    "variable_read_compute": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            y = tf.reduce_sum(v * 3.0)
        print(y.numpy())
    """,
    "variable_gather": """
        with tf.device(D):
            v = tf.Variable(tf.ones([16, 4]))
            y = tf.gather(v, [1, 3])
        print(y.numpy().sum())
    """,
    "variable_scatter_add": """
        with tf.device(D):
            v = tf.Variable(tf.ones([16, 4]))
            v.scatter_add(tf.IndexedSlices(tf.ones([2, 4]), [1, 3]))
        print(v.numpy().sum())
    """,
    "variable_in_function": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
        @tf.function
        def f(x):
            with tf.device(D):
                v.assign_add(x)
                return tf.reduce_sum(v)
        print(f(tf.ones([256])).numpy())
    """,
    "checkpoint_restore": """
        import tempfile
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
        ck = tf.train.Checkpoint(v=v)
        path = ck.write(tempfile.mkdtemp() + "/ck")
        ck.read(path).assert_consumed()
        print(v.numpy().sum())
    """,
    "random_generator": """
        with tf.device(D):
            g = tf.random.Generator.from_seed(1)
            y = g.normal([64])
        print(y.numpy().sum())
    """,
    # No variables: kernels, copies and TF's own DEVICE_DEFAULT plumbing.
    "ops_no_variables": """
        with tf.device(D):
            a = tf.random.uniform([32, 32])
            b = tf.matmul(a, a)
            c = tf.nn.relu(b) + tf.reshape(tf.range(32.0), [32, 1])
            d = tf.concat([c, tf.expand_dims(tf.reduce_sum(c, 1), 1)], 1)
            e = tf.identity(tf.squeeze(tf.reshape(d, [1, 32, 33])))
            f = tf.nn.softmax(tf.cast(e, tf.float64))
        print(f.numpy().sum(), f.device)
    """,
    "function_control_flow": """
        @tf.function
        def f(x):
            with tf.device(D):
                i = tf.constant(0)
                def body(i, x):
                    return i + 1, tf.cond(tf.reduce_sum(x) > 0.0,
                                          lambda: x * 0.5, lambda: x + 1.0)
                _, y = tf.while_loop(lambda i, x: i < 5, body, [i, x])
                return y
        with tf.device(D):
            x = tf.ones([64])
        print(f(x).numpy().sum())
    """,
    "tensor_array": """
        @tf.function
        def f(x):
            with tf.device(D):
                ta = tf.TensorArray(tf.float32, size=4)
                for i in tf.range(4):
                    ta = ta.write(i, x * tf.cast(i, tf.float32))
                return ta.stack()
        with tf.device(D):
            x = tf.ones([8])
        print(f(x).numpy().sum())
    """,
    "print_and_assert": """
        with tf.device(D):
            x = tf.ones([8])
            tf.print(tf.reduce_sum(x))
            tf.debugging.assert_equal(x, tf.ones([8]))
            tf.debugging.check_numerics(x, "x")
        print("done")
    """,
    "prefetch_to_device": """
        ds = tf.data.Dataset.from_tensor_slices(np.ones([8, 4], np.float32))
        ds = ds.apply(tf.data.experimental.prefetch_to_device(D))
        print(sum(float(tf.reduce_sum(t)) for t in ds))
    """,
    "keras_predict": """
        import keras
        with tf.device(D):
            m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
            y = m(np.ones([2, 8], np.float32))
        print(y.numpy().sum())
    """,
    "dense_sgd_step": """
        import keras
        with tf.device(D):
            m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
            opt = keras.optimizers.SGD(0.1)
            @tf.function
            def step(x, y):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((m(x) - y) ** 2)
                g = tape.gradient(loss, m.trainable_variables)
                opt.apply_gradients(zip(g, m.trainable_variables))
                return loss
            print(float(step(tf.ones([4, 8]), tf.ones([4, 4]))))
    """,
    # examples/demo.py's CNN (Conv2D, MaxPool, Dense, Adam), 3 steps.
    "demo_cnn_adam": """
        import sys
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import training
        losses, _ = training.train("cnn", D, steps=3)
        print(losses)
    """,
}

FRAME = re.compile(r"\((_Z[^+)]*)")


def demangle(names):
    try:
        p = subprocess.run(["c++filt"], input="\n".join(names), text=True,
                           capture_output=True, check=True)
        return p.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return names


def summarize(stderr):
    """(first TF frame, allocation line, thread line) of the first report."""
    start = stderr.find("simdev: host access to device memory")
    if start < 0:
        return None
    rep = stderr[start:]
    alloc = re.search(r"  allocation: (.*)", rep)
    thread = re.search(r"  thread: (.*)", rep)
    frames = []
    after_signal = False
    for line in rep.splitlines():
        if "libc.so" in line and not after_signal:
            after_signal = True  # the signal trampoline
            continue
        if after_signal:
            m = FRAME.search(line)
            if m and "libsimdev" not in line:
                frames.append(m.group(1))
        if line.startswith("  hint:"):
            break
    first = demangle(frames[:1])[0] if frames else "(no named frame)"
    return first, alloc.group(1) if alloc else "?", \
        thread.group(1) if thread else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="probes to run (default: all)")
    ap.add_argument("--full", action="store_true",
                    help="print each report in full")
    args = ap.parse_args()
    names = args.names or list(PROBES)
    env = dict(os.environ, SIMDEV_DISCRETE="1", SIMDEV_BFC="0",
               PYTHONUNBUFFERED="1")
    for name in names:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        code = PRELUDE % root + textwrap.dedent(PROBES[name])
        # A file, not -c: tf.function's autograph reads the source.
        with tempfile.NamedTemporaryFile("w", suffix=".py",
                                         prefix=name + "_") as f:
            f.write(code)
            f.flush()
            p = subprocess.run([sys.executable, f.name], env=env, text=True,
                               capture_output=True, timeout=300)
        s = summarize(p.stderr)
        if s is None:
            tail = p.stderr.strip().splitlines()[-1:] if p.returncode else []
            print(f"{name}: {'ok' if p.returncode == 0 else 'failed'} "
                  f"(exit {p.returncode}) {' '.join(tail)}"[:300])
        else:
            print(f"{name}: HOST ACCESS in {s[0]}\n    {s[1]}\n    thread {s[2]}")
            if args.full:
                i = p.stderr.find("simdev: host access")
                j = p.stderr.find("simdev: passing the signal", i)
                print(textwrap.indent(p.stderr[i:j], "    | "))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
