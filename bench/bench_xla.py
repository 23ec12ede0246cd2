"""XLA custom-call benchmark group: simdev's JAX FFI targets next to XLA:CPU.

    .venv/bin/python bench/bench_xla.py [--quick] [--json PATH]

JAX on CPU, no TensorFlow in the process. Sides, each a jitted function
called with its result waited for (block_until_ready), alternating call by
call:

    simdev  simdev.jax: the typed-FFI targets of libsimdev_xla.so (the
            handler validates on XLA's thread, the work runs on the simdev
            stream, XLA waits on the future)
    xla     the same computation in jnp / lax, compiled by XLA:CPU (its
            own dot and convolution kernels, on XLA's own threads)

Cases: matmul float32 n = 128..1024 and float64 n = 512 (jnp.dot);
conv2d forward, NHWC/HWIO, SAME, stride 1, on three shapes
(lax.conv_general_dilated); and the fixed cost of one call: a jitted
program holding one simdev_empty (a float32 0 written through the stream)
vs a jitted program that returns a constant 0 (XLA's dispatch alone).
Each simdev result is checked against the xla side once, outside the
timing.

info records the load average (1-minute at the start; 1, 5 and 15 minutes
at the end): on a shared 2-CPU machine other jobs move the figures, and a
table is only worth reading with it.

--quick: one small case of each kind, 3 repetitions (a smoke run).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import simdev.jax as sj  # noqa: E402

GROUP = "xla"
# (dtype, n, repetitions)
MATMUL_FULL = ((np.float32, 128, 400), (np.float32, 256, 200),
               (np.float32, 512, 80), (np.float32, 1024, 30),
               (np.float64, 512, 60))
MATMUL_QUICK = ((np.float32, 128, 3),)
# (x NHWC, w HWIO, repetitions)
CONV_FULL = (((1, 32, 32, 16), (3, 3, 16, 32), 200),
             ((8, 56, 56, 64), (3, 3, 64, 64), 20),
             ((8, 28, 28, 128), (3, 3, 128, 128), 20))
CONV_QUICK = (((1, 32, 32, 16), (3, 3, 16, 32), 3),)
EMPTY_REPS, EMPTY_QUICK_REPS = 5000, 3


def tag(dt):
    return {np.float32: "f32", np.float64: "f64"}[dt]


def timed(fn, *args):
    """A call that waits for its result (XLA dispatch is asynchronous)."""
    return lambda: jax.block_until_ready(fn(*args))


def compare(name, fn_simdev, fn_xla, args, reps, work=None, rtol=1e-4):
    common.progress(f"[{GROUP}] {name}: {reps} reps x 2 sides")
    got = np.asarray(fn_simdev(*args))
    want = np.asarray(fn_xla(*args))
    common.check_close(got, want, name, rtol=rtol)
    samples = common.alternate({"simdev": timed(fn_simdev, *args),
                                "xla": timed(fn_xla, *args)},
                               reps, rounds=reps, warmup=0)
    return common.case(GROUP, name, samples, work=work,
                       work_unit=None if work is None else "FLOP")


def matmul_case(dt, n, reps, rng):
    a = jnp.asarray(rng.standard_normal((n, n)).astype(dt))
    b = jnp.asarray(rng.standard_normal((n, n)).astype(dt))
    return compare(f"matmul {tag(dt)} n={n}", jax.jit(sj.matmul),
                   jax.jit(jnp.dot), (a, b), reps, work=2 * n ** 3,
                   rtol=1e-4 if dt == np.float32 else 1e-12)


def conv_case(xs, ws, reps, rng):
    x = jnp.asarray(rng.standard_normal(xs).astype(np.float32))
    w = jnp.asarray(rng.standard_normal(ws).astype(np.float32))

    def ref(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))
    n, h, wd, _ = xs
    kh, kw, c, o = ws
    name = (f"conv2d f32 x={'x'.join(map(str, xs))} "
            f"w={'x'.join(map(str, ws))}")
    return compare(name, jax.jit(lambda x, w: sj.conv2d(x, w)), jax.jit(ref),
                   (x, w), reps, work=2 * n * h * wd * kh * kw * c * o)


def empty_case(reps):
    simdev = jax.jit(sj.empty)
    xla = jax.jit(lambda: jnp.zeros((), jnp.float32))
    assert float(simdev()) == 0.0 and float(xla()) == 0.0
    name = "one empty call (simdev_empty vs empty jit)"
    common.progress(f"[{GROUP}] {name}: {reps} reps x 2 sides")
    samples = common.alternate({"simdev": timed(simdev), "xla": timed(xla)},
                               reps, rounds=reps, warmup=0)
    return common.case(GROUP, name, samples)


def run(quick=False):
    sj.register()
    rng = np.random.default_rng(0)
    e0, c0, f0 = sj.counts()
    load_start = os.getloadavg()[0]
    cases = [matmul_case(dt, n, reps, rng)
             for dt, n, reps in (MATMUL_QUICK if quick else MATMUL_FULL)]
    cases += [conv_case(xs, ws, reps, rng)
              for xs, ws, reps in (CONV_QUICK if quick else CONV_FULL)]
    cases.append(empty_case(EMPTY_QUICK_REPS if quick else EMPTY_REPS))
    e1, c1, f1 = sj.counts()
    # Every queued call completed, none failed: no lost completion.
    assert (e1 - e0, f1 - f0) == (c1 - c0, 0), (e0, c0, f0, e1, c1, f1)
    assert "tensorflow" not in sys.modules, "bench_xla must not load TensorFlow"
    load = os.getloadavg()  # the machine's load over the run's last minutes
    info = {"jax": jax.__version__, "cpus": os.cpu_count(), "quick": bool(quick),
            "loadavg_1_5_15": [round(x, 2) for x in load],
            "loadavg_1_at_start": round(load_start, 2),
            "SIMDEV_SYNC": os.environ.get("SIMDEV_SYNC"),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "XLA_FLAGS": os.environ.get("XLA_FLAGS")}
    metrics = [common.metric("simdev calls queued", e1 - e0, unit="calls"),
               common.metric("simdev calls completed", c1 - c0, unit="calls")]
    return common.result(GROUP, cases, info, metrics)


def main(argv=None):
    return common.main(run, __doc__, argv)


if __name__ == "__main__":
    main()
