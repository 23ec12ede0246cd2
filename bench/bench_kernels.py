"""Kernel benchmarks: simdev next to TF's CPU device and raw OpenBLAS, in one
process, cases alternating so machine drift hits every side alike.

    .venv/bin/python bench/bench_kernels.py [--reps N]

Eager ops on SIMDEV return when the kernel has run (simdev completes TF's
async kernel after its stream item), so the wall time of one call is the
kernel's time plus TF's per-op overhead, like on the CPU device.
Reports medians with [min, max] and ratios; nothing here is a test.
"""
import argparse
import ctypes
import ctypes.util
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "examples"))
import training  # noqa: E402

SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"


def timeit(fn, reps):
    """Wall times of `reps` calls (after one warm-up)."""
    fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def alternate(cases, reps, rounds=5):
    """cases: {name: fn}. Runs the cases round-robin `rounds` times,
    reps/rounds calls each time; returns {name: [seconds...]}."""
    res = {k: [] for k in cases}
    per = max(1, reps // rounds)
    for _ in range(rounds):
        for k, fn in cases.items():
            res[k] += timeit(fn, per)
    return res


def med(xs):
    return statistics.median(xs)


def fmt_range(xs, scale=1.0):
    return f"{med(xs) * scale:9.3f} [{min(xs) * scale:.3f}, {max(xs) * scale:.3f}]"


def openblas_sgemm():
    """cblas_sgemm from the same libopenblas simdev links (Debian's), with
    OpenBLAS's own threads: simdev sets OpenBLAS to one thread (it splits
    products over the cores itself), so the raw calls switch it back to one
    thread per CPU for their duration."""
    name = "libopenblas.so.0"
    lib = ctypes.CDLL(name)
    lib.openblas_get_corename.restype = ctypes.c_char_p
    print(f"  OpenBLAS core type: {lib.openblas_get_corename().decode()}")
    f = lib.cblas_sgemm
    f.restype = None
    P = ctypes.c_void_p
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, P, ctypes.c_int, P,
                                       ctypes.c_int, ctypes.c_float, P,
                                       ctypes.c_int]

    def gemm(a, b, c):
        n = a.shape[0]
        lib.openblas_set_num_threads(os.cpu_count())
        f(101, 111, 111, n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n,
          0.0, c.ctypes.data, n)
        lib.openblas_set_num_threads(1)
    return gemm


def bench_matmul(reps):
    print("MatMul float32, GFLOP/s median [min, max]")
    gemm = openblas_sgemm()
    print(f"  {'n':>5} {'SIMDEV':>26} {'TF CPU':>26} {'raw OpenBLAS':>26}"
          f" {'SIM/BLAS':>9} {'SIM/CPU':>8}")
    rng = np.random.default_rng(0)
    for n in (256, 512, 1024, 2048):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty((n, n), np.float32)
        with tf.device(SIM):
            sa, sb = tf.constant(a), tf.constant(b)
        with tf.device(CPU):
            ca, cb = tf.constant(a), tf.constant(b)

        def on(dev, x, y):
            def f():
                with tf.device(dev):
                    tf.linalg.matmul(x, y)
            return f
        r = max(3, reps // (n // 256) ** 2)
        res = alternate({"sim": on(SIM, sa, sb), "cpu": on(CPU, ca, cb),
                         "blas": lambda: gemm(a, b, c)}, r)
        flop = 2.0 * n ** 3
        g = {k: [flop / t / 1e9 for t in v] for k, v in res.items()}
        print(f"  {n:>5} {fmt_range(g['sim'])} {fmt_range(g['cpu'])} "
              f"{fmt_range(g['blas'])} {med(g['sim']) / med(g['blas']):9.2f}"
              f" {med(g['sim']) / med(g['cpu']):8.2f}")


def bench_conv(reps):
    print("\nConv2D 3x3 SAME, batch 8, 56x56x64 -> 64, float32 (ms)")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 56, 56, 64), dtype=np.float32)
    w = rng.standard_normal((3, 3, 64, 64), dtype=np.float32) * 0.1
    fns = {}
    for key, dev in (("sim", SIM), ("cpu", CPU)):
        with tf.device(dev):
            tx, tw = tf.constant(x), tf.constant(w)

        def f(dev=dev, tx=tx, tw=tw):
            with tf.device(dev):
                tf.nn.conv2d(tx, tw, strides=1, padding="SAME")
        fns[key] = f
    res = alternate(fns, reps)
    print(f"  SIMDEV {fmt_range(res['sim'], 1e3)}   CPU {fmt_range(res['cpu'], 1e3)}"
          f"   CPU/SIMDEV throughput ratio {med(res['cpu']) / med(res['sim']):.2f}")


def bench_tiny(reps):
    print("\nEager tiny AddV2 (float32 [4]), microseconds per op")
    fns = {}
    for key, dev in (("sim", SIM), ("cpu", CPU)):
        with tf.device(dev):
            a = tf.constant(np.ones(4, np.float32))

        def f(dev=dev, a=a):
            with tf.device(dev):
                for _ in range(100):
                    tf.raw_ops.AddV2(x=a, y=a)
        fns[key] = f
    res = alternate(fns, reps)
    sim = [t / 100 for t in res["sim"]]
    cpu = [t / 100 for t in res["cpu"]]
    print(f"  SIMDEV {fmt_range(sim, 1e6)}   CPU {fmt_range(cpu, 1e6)}"
          f"   SIMDEV/CPU {med(sim) / med(cpu):.2f}x")


def bench_train(reps):
    print("\nOne training step, small CNN, batch 32 (ms)")
    xs, ys = training.synthetic_data("cnn", 4)
    fns = {}
    for key, dev in (("sim", SIM), ("cpu", CPU)):
        _, step = training.make_trainer("cnn", dev)
        with tf.device(dev):
            x, y = tf.constant(xs[0]), tf.constant(ys[0])

        def f(step=step, x=x, y=y):
            step(x, y).numpy()
        fns[key] = f
    res = alternate(fns, reps)
    print(f"  SIMDEV {fmt_range(res['sim'], 1e3)}   CPU {fmt_range(res['cpu'], 1e3)}"
          f"   SIMDEV/CPU {med(res['sim']) / med(res['cpu']):.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs\n")
    bench_matmul(args.reps)
    bench_conv(args.reps)
    bench_tiny(args.reps)
    bench_train(args.reps)


if __name__ == "__main__":
    main()
