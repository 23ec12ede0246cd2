"""Writes tests/fuzz/seeds_graph/*.pb: GraphDefs as TF 2.21 hands them to
simdev's optimizer (post-optimization graphs of small SIMDEV functions,
read back with tests/tf/graphutil.py), the starting corpus of fuzz_graph.

    .venv/bin/python tests/fuzz/make_graph_seeds.py

Each graph holds the patterns simdev's passes look for (Conv2D + BiasAdd +
activation, MatMul + BiasAdd, Pad before Conv2D, elementwise chains, an
optimizer update), so the fuzzer starts next to the code paths that matter.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tf"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import graphutil  # noqa: E402


def main():
    tf.config.set_soft_device_placement(False)
    out = os.path.join(HERE, "seeds_graph")
    os.makedirs(out, exist_ok=True)

    @tf.function
    def conv(x, w, b, w2):
        y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(
            tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), w, 1, "VALID"), b))
        y = tf.nn.depthwise_conv2d(y, w2, [1, 1, 1, 1], "SAME")
        return tf.nn.relu6(y) * 0.5

    @tf.function
    def mlp(x, w, b):
        h = tf.nn.elu(tf.nn.bias_add(tf.matmul(x, w), b))
        return tf.sqrt(tf.square(h) + 1e-3) - tf.abs(h)

    rng = np.random.default_rng(1)
    with tf.device("/device:SIMDEV:0"):
        x, w, b, w2, xm, wm, bm, v0 = [
            tf.constant(rng.standard_normal(s, dtype=np.float32)) for s in
            ([2, 6, 6, 3], [3, 3, 3, 4], [4], [3, 3, 4, 1], [4, 5], [5, 3],
             [3], [5, 3])]
        v = tf.Variable(v0)

        @tf.function
        def step(x):
            with tf.GradientTape() as t:
                loss = tf.reduce_sum(tf.matmul(x, v) ** 2)
            g = t.gradient(loss, v)
            v.assign_sub(0.1 * g / (tf.sqrt(tf.square(g)) + 1e-7))
            return loss

        cases = {"conv": (conv, (x, w, b, w2)), "mlp": (mlp, (xm, wm, bm)),
                 "step": (step, (xm,))}
        for name, (fn, args) in cases.items():
            c = graphutil.collect(fn, *args)
            for i, g in enumerate(c.post):
                path = os.path.join(out, f"{name}_{i}.pb")
                with open(path, "wb") as f:
                    f.write(g.SerializeToString())
                print(path, len(g.node), "nodes")


if __name__ == "__main__":
    main()
