"""MatMul benchmark group: simdev next to TF's CPU device and raw OpenBLAS.

    .venv/bin/python bench/bench_matmul.py [--quick] [--json PATH]

Square MatMul, float32 at n = 256, 512, 1024, 2048 and float64 at n = 1024:
eager tf.linalg.matmul on SIMDEV and on TF's CPU device, and cblas_sgemm /
cblas_dgemm from libopenblas.so.0 (the OpenBLAS simdev links) through ctypes
on NumPy buffers. simdev sets OpenBLAS to one thread (it splits products over
the cores itself), so each raw call switches OpenBLAS to os.cpu_count()
threads and back afterwards. Sides alternate call by call.

"machine peak sgemm" is one long raw sgemm (n = 4096; 2048 with --quick),
side "peak": the machine's measured single-precision peak, for reference.

--quick: n = 256 and 512 only (float32), 3 repetitions, smaller peak case.
"""
import ctypes
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import CPU, SIM  # noqa: E402

tf.config.set_soft_device_placement(False)

GROUP = "matmul"
# The kernel issue's targets: >= 0.9 of raw OpenBLAS and >= TF CPU.
TARGET = [{"vs": "openblas", "min_ratio": 0.9},
          {"vs": "tf_cpu", "min_ratio": 1.0}]
# (dtype, n, repetitions) of the full run.
FULL = ((np.float32, 256, 100), (np.float32, 512, 60), (np.float32, 1024, 25),
        (np.float32, 2048, 10), (np.float64, 1024, 15))
QUICK = ((np.float32, 256, 3), (np.float32, 512, 3))
PEAK_N, PEAK_REPS = 4096, 3
QUICK_PEAK_N, QUICK_PEAK_REPS = 2048, 3


class OpenBLAS:
    """cblas_sgemm / cblas_dgemm of libopenblas.so.0, run with one OpenBLAS
    thread per CPU for the duration of each call."""

    def __init__(self):
        self.lib = lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_num_threads.restype = ctypes.c_int
        self.corename = lib.openblas_get_corename().decode()
        self.idle_threads = lib.openblas_get_num_threads()  # 1: simdev's
        P, I = ctypes.c_void_p, ctypes.c_int
        self.fns = {}
        for dt, name, scalar in ((np.float32, "cblas_sgemm", ctypes.c_float),
                                 (np.float64, "cblas_dgemm", ctypes.c_double)):
            f = getattr(lib, name)
            f.restype = None
            f.argtypes = [I] * 6 + [scalar, P, I, P, I, scalar, P, I]
            self.fns[np.dtype(dt)] = f

    def gemm(self, a, b, c):
        """c = a @ b, all square, C-contiguous, same dtype."""
        n = a.shape[0]
        f = self.fns[a.dtype]
        self.lib.openblas_set_num_threads(os.cpu_count())
        try:
            # CblasRowMajor, CblasNoTrans, CblasNoTrans
            f(101, 111, 111, n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n,
              0.0, c.ctypes.data, n)
        finally:
            self.lib.openblas_set_num_threads(self.idle_threads)


def dtype_tag(dt):
    return {np.float32: "f32", np.float64: "f64"}[dt]


def matmul_case(blas, dt, n, reps, rng):
    name = f"MatMul {dtype_tag(dt)} n={n}"
    common.progress(f"[{GROUP}] {name}: {reps} reps x 3 sides")
    a = rng.standard_normal((n, n)).astype(dt)
    b = rng.standard_normal((n, n)).astype(dt)
    c = np.empty((n, n), dt)
    with tf.device(SIM):
        sa, sb = tf.constant(a), tf.constant(b)
    with tf.device(CPU):
        ca, cb = tf.constant(a), tf.constant(b)

    def on(dev, x, y):
        def f():
            with tf.device(dev):
                return tf.linalg.matmul(x, y)
        return f
    sim, cpu = on(SIM, sa, sb), on(CPU, ca, cb)
    # Outside the timing: placement, and simdev's result against OpenBLAS.
    rs = common.check_device(sim(), "SIMDEV", name)
    common.check_device(cpu(), "CPU", name)
    blas.gemm(a, b, c)
    common.check_close(rs.numpy(), c, name,
                       rtol=1e-3 if dt == np.float32 else 1e-9)
    samples = common.alternate(
        {"simdev": sim, "tf_cpu": cpu, "openblas": lambda: blas.gemm(a, b, c)},
        reps, rounds=reps, warmup=0)
    return common.case(GROUP, name, samples, work=2 * n ** 3,
                       work_unit="FLOP", target=TARGET)


def peak_case(blas, n, reps, rng):
    name = "machine peak sgemm"
    common.progress(f"[{GROUP}] {name}: raw sgemm n={n}, {reps} reps")
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    samples = common.timeit(lambda: blas.gemm(a, b, c), reps)
    return common.case(GROUP, name, {"peak": samples}, work=2 * n ** 3,
                       work_unit="FLOP")


def run(quick=False):
    blas = OpenBLAS()
    common.progress(f"[{GROUP}] OpenBLAS core type: {blas.corename}")
    rng = np.random.default_rng(0)
    cases = [matmul_case(blas, dt, n, reps, rng)
             for dt, n, reps in (QUICK if quick else FULL)]
    pn, pr = (QUICK_PEAK_N, QUICK_PEAK_REPS) if quick else (PEAK_N, PEAK_REPS)
    cases.append(peak_case(blas, pn, pr, rng))
    info = common.base_info(tf, quick)
    info.update({"openblas_corename": blas.corename,
                 "openblas_threads_raw": os.cpu_count(),
                 "openblas_threads_simdev": blas.idle_threads,
                 "peak_n": pn})
    return common.result(GROUP, cases, info)


def main(argv=None):
    return common.main(run, __doc__, argv)


if __name__ == "__main__":
    main()
