#!/usr/bin/env python3
"""Which TensorFlow operations touch SIMDEV memory with host code?

Runs small TF programs, each in its own process, with SIMDEV_DISCRETE=1
(device memory is not host-accessible; a host access dies of SIGSEGV after
simdev's report) and SIMDEV_BFC=0 (every tensor is one allocation, so the
report names the op that allocated the buffer), with soft placement off, so
every op a probe places on SIMDEV runs there or the probe fails. Each probe
checks the device of its results and ends with `done(value, tensors...)`;
the value is compared with the probe's expected one. Per probe it prints
one of:
  ok                 on SIMDEV, the expected value
  HOST ACCESS        simdev's report: its first TensorFlow frame, the
                     allocating op and the thread (--full: the whole report)
  NO SIMDEV KERNEL   TF found no SIMDEV kernel for an op (a placement error
                     with soft placement off): nothing ran on the device
  NOT ON SIMDEV      a result's device is not SIMDEV
  WRONG VALUE        on SIMDEV, but not the expected value
  failed             anything else (exit code and last line)

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
D = "/device:SIMDEV:0"
tf.config.set_soft_device_placement(False)
ROOT = %r


def done(value, *on_simdev):
    # Prints the probe's value after checking where its results live.
    for t in on_simdev:
        dev = t if isinstance(t, str) else t.device
        if "SIMDEV" not in dev:
            print("PROBE_NOT_ON_SIMDEV", repr(dev), flush=True)
            raise SystemExit(3)
    print("PROBE_VALUE", repr(value), flush=True)
"""

PROBES = {
    # Variables: TF 2.21 serves them on a PluggableDevice with its
    # DEVICE_DEFAULT kernels (src/kernels/framework/sk.h explains).
    "variable_create": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
        done(float(v.numpy().sum()), v)
    """,
    "variable_assign": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            v.assign(tf.fill([256], 2.0))
        done(float(v.numpy().sum()), v)
    """,
    "variable_assign_while_read": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            old = v.read_value()   # keeps the old buffer referenced
            v.assign(tf.fill([256], 2.0))
        done((float(v.numpy().sum()), float(old.numpy().sum())), v, old)
    """,
    "variable_assign_kept_value": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            x = tf.fill([256], 2.0)
            v.assign(x)            # x stays alive: its buffer is shared
            v.assign(x * 3.0)
        done((float(v.numpy().sum()), float(x.numpy().sum())), v, x)
    """,
    "variable_assign_add": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            v.assign_add(tf.ones([256]))
        done(float(v.numpy().sum()), v)
    """,
    "variable_assign_sub": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            v.assign_sub(tf.ones([256]))
        done(float(v.numpy().sum()), v)
    """,
    "variable_read_compute": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
            y = tf.reduce_sum(v * 3.0)
        done(float(y.numpy()), v, y)
    """,
    "variable_gather": """
        with tf.device(D):
            v = tf.Variable(tf.ones([16, 4]))
            y = tf.gather(v, [1, 3])
        done(float(y.numpy().sum()), v, y)
    """,
    "variable_scatter_add": """
        with tf.device(D):
            v = tf.Variable(tf.ones([16, 4]))
            v.scatter_add(tf.IndexedSlices(tf.ones([2, 4]), [1, 3]))
        done(float(v.numpy().sum()), v)
    """,
    "variable_in_function": """
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
        @tf.function
        def f(x):
            with tf.device(D):
                v.assign_add(x)
                return tf.reduce_sum(v)
        y = f(tf.ones([256]))
        done(float(y.numpy()), v, y)
    """,
    "checkpoint_restore": """
        import tempfile
        with tf.device(D):
            v = tf.Variable(tf.ones([256]))
        ck = tf.train.Checkpoint(v=v)
        path = ck.write(tempfile.mkdtemp() + "/ck")
        ck.read(path).assert_consumed()
        done(float(v.numpy().sum()), v)
    """,
    "random_generator": """
        with tf.device(D):
            g = tf.random.Generator.from_seed(1)
            y = g.normal([64])
        done(int(y.shape[0]), y)
    """,
    # No variables: kernels, copies and TF's own DEVICE_DEFAULT plumbing.
    "ops_no_variables": """
        with tf.device(D):
            # Not tf.random: RandomUniform has no SIMDEV kernel.
            a = tf.constant(np.linspace(-1, 1, 1024, dtype=np.float32)
                            .reshape(32, 32))
            b = tf.matmul(a, a)
            c = tf.nn.relu(b) + tf.constant(np.arange(32.0, dtype=np.float32)
                                          .reshape(32, 1))
            d = tf.concat([c, tf.expand_dims(tf.reduce_sum(c, 1), 1)], 1)
            e = tf.identity(tf.squeeze(tf.reshape(d, [1, 32, 33])))
            f = tf.nn.softmax(tf.cast(e, tf.float64))
        done(round(float(f.numpy().sum()), 6), a, b, c, d, e, f)
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
        y = f(x)
        done(float(y.numpy().sum()), x, y)
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
        y = f(x)
        done(float(y.numpy().sum()), x, y)
    """,
    # Not tf.print (StringFormat) nor tf.debugging.assert_equal (All): no
    # SIMDEV kernels for them.
    "check_numerics": """
        with tf.device(D):
            x = tf.ones([8])
            y = tf.debugging.check_numerics(x, "x")
        done("done", x, y)
    """,
    "prefetch_to_device": """
        ds = tf.data.Dataset.from_tensor_slices(np.ones([8, 4], np.float32))
        ds = ds.apply(tf.data.experimental.prefetch_to_device(D))
        ts = list(ds)
        done(sum(float(tf.reduce_sum(t)) for t in ts), *ts)
    """,
    "keras_predict": """
        import keras
        with tf.device(D):
            m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(
                4, kernel_initializer="ones")])
            y = m(np.ones([2, 8], np.float32))
        done(float(y.numpy().sum()), y, *[w.value for w in m.weights])
    """,
    "dense_sgd_step": """
        import keras
        with tf.device(D):
            m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(
                4, kernel_initializer="ones")])
            opt = keras.optimizers.SGD(0.1)
            @tf.function
            def step(x, y):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((m(x) - y) ** 2)
                g = tape.gradient(loss, m.trainable_variables)
                opt.apply_gradients(zip(g, m.trainable_variables))
                return loss
            loss = step(tf.ones([4, 8]), tf.ones([4, 4]))
        done(float(loss), loss, *[w.value for w in m.weights])
    """,
    # examples/demo.py's CNN (Conv2D, MaxPool, Dense, Adam), 3 steps.
    "demo_cnn_adam": """
        import sys
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import training
        losses, _ = training.train("cnn", D, steps=3)
        done(len([l for l in losses if np.isfinite(l)]))
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


# The value each probe computes when it runs on SIMDEV as written.
VALUES = {
    "variable_create": 256.0,
    "variable_assign": 512.0,
    "variable_assign_while_read": (512.0, 256.0),
    "variable_assign_kept_value": (1536.0, 512.0),
    "variable_assign_add": 512.0,
    "variable_assign_sub": 0.0,
    "variable_read_compute": 768.0,
    "variable_gather": 8.0,
    "variable_scatter_add": 72.0,
    "variable_in_function": 512.0,
    "checkpoint_restore": 256.0,
    "random_generator": 64,
    "ops_no_variables": 32.0,      # softmax rows sum to 1
    "function_control_flow": 2.0,  # 64 * 0.5**5
    "tensor_array": 48.0,          # 8 * (0 + 1 + 2 + 3)
    "check_numerics": "done",
    "prefetch_to_device": 32.0,
    "keras_predict": 64.0,         # ones kernel: 8 per output
    "dense_sgd_step": 49.0,        # (8 - 1)**2
    "demo_cnn_adam": 3,            # three finite losses
}
assert set(VALUES) == set(PROBES)

# Placement errors with soft placement off: the op has no SIMDEV kernel.
NO_KERNEL = re.compile(
    r"Could not satisfy (explicit )?device specification|"
    r"no supported kernel for SIMDEV|"
    r"Could not find device for node|"
    r"No registered '[^']+' OpKernel for '?SIMDEV")


def same(a, b):
    if isinstance(b, tuple):
        return isinstance(a, tuple) and len(a) == len(b) and \
            all(same(x, y) for x, y in zip(a, b))
    if isinstance(b, float):
        return isinstance(a, (int, float)) and abs(a - b) <= 1e-4 * max(1, abs(b))
    return a == b


def classify(name, p):
    """(outcome, detail) of one probe's process."""
    s = summarize(p.stderr)
    if s is not None:
        return "HOST ACCESS", f"in {s[0]}\n    {s[1]}\n    thread {s[2]}"
    out = p.stdout
    m = re.search(r"^PROBE_NOT_ON_SIMDEV (.*)$", out, re.M)
    if m:
        return "NOT ON SIMDEV", m.group(1)
    m = re.search(r"^PROBE_VALUE (.*)$", out, re.M)
    if m and p.returncode == 0:
        import ast
        got = ast.literal_eval(m.group(1))
        if same(got, VALUES[name]):
            return "ok", repr(got)
        return "WRONG VALUE", f"{got!r}, expected {VALUES[name]!r}"
    nk = NO_KERNEL.search(p.stderr)
    if nk:
        op = re.search(r"for operation (\w+)|\[Op:(\w+)\]|\{\{node ([^}]+)\}\}",
                       p.stderr)
        op = next((g for g in op.groups() if g), "?") if op else "?"
        return "NO SIMDEV KERNEL", f"for {op}"
    tail = p.stderr.strip().splitlines()[-1:]
    return "failed", f"(exit {p.returncode}) {' '.join(tail)}"[:300]


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
        outcome, detail = classify(name, p)
        print(f"{name}: {outcome} {detail}")
        if outcome == "HOST ACCESS" and args.full:
            i = p.stderr.find("simdev: host access")
            j = p.stderr.find("simdev: passing the signal", i)
            print(textwrap.indent(p.stderr[i:j], "    | "))
        sys.stdout.flush()

if __name__ == "__main__":
    main()
