"""simdev as XLA custom calls from JAX: no TensorFlow in this process.

    .venv/bin/python examples/jax_custom_call.py

simdev.jax registers the typed-FFI handlers of libsimdev_xla.so (C, in
src/xla/) as XLA:CPU custom-call targets. Each call validates its operands
on the thread XLA calls it from, queues the arithmetic on a simdev stream
(the GEMM and im2col code TF's kernels run on SIMDEV) and hands XLA a
future that the stream's worker completes. This script:

  1. runs a small conv -> relu -> dense network as one jitted program made
     of several simdev calls, next to the same network in jnp / lax;
  2. maps a simdev matmul over a batch with jax.vmap;
  3. takes jax.grad through the network (each simdev op is a custom_vjp
     whose backward pass is simdev calls too);
  4. shows a bad call failing with the handler's message, and the next
     call working;
  5. runs simdev_legacy_matmul, the same product in XLA's legacy custom-call
     convention (an opaque string instead of typed operands), side by side
     with the typed target, and checks that the two agree bit for bit.

Any mismatch makes the script exit with a nonzero status.

Every result is printed next to its jnp reference: max |simdev - jnp|
relative to max |jnp|, against a loose tolerance of 1e-4 (a check of the
wiring; float32 rounding here stays around 1e-6, and tests/jax holds the
exact rounding bounds). docs/xla-custom-calls.md explains the two
conventions.
"""
import ctypes
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import simdev.jax as sj  # noqa: E402

RTOL = 1e-4
failures = []


def report(what, got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    rel = float(np.max(np.abs(got - want))) / (float(np.max(np.abs(want))) or 1.0)
    ok = rel <= RTOL
    if not ok:
        failures.append(what)
    print(f"{what:<44} shape {str(got.shape):<16} rel. error {rel:.1e}  "
          f"{'OK' if ok else 'MISMATCH'}")


# ---- the network, twice: simdev calls and jnp / lax ------------------------

def net_simdev(p, x):
    h = sj.relu(sj.conv2d(x, p["w1"], strides=(1, 1), padding="SAME"))
    h = sj.conv2d(h, p["w2"], strides=(2, 2), padding="VALID")
    h = h.reshape(h.shape[0], -1)
    h = sj.matmul_bias_act(h, p["d1"], p["b1"], activation="relu")
    return sj.matmul(h, p["d2"])


def conv_ref(x, w, strides, padding):
    return lax.conv_general_dilated(x, w, strides, padding,
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def net_jnp(p, x):
    h = jax.nn.relu(conv_ref(x, p["w1"], (1, 1), "SAME"))
    h = conv_ref(h, p["w2"], (2, 2), "VALID")
    h = h.reshape(h.shape[0], -1)
    h = jax.nn.relu(h @ p["d1"] + p["b1"])
    return h @ p["d2"]


def params(rng):
    def n(shape, scale):  # NumPy's generator: no XLA program per shape
        return jnp.asarray(rng.standard_normal(shape).astype(np.float32) * scale)
    return {"w1": n((3, 3, 3, 8), 0.3), "w2": n((3, 3, 8, 16), 0.2),
            "d1": n((7 * 7 * 16, 32), 0.05), "b1": n((32,), 0.1),
            "d2": n((32, 10), 0.2)}


# ---- the legacy target (src/xla/legacy.c) -----------------------------------

def register_legacy():
    """simdev_legacy_matmul lives in XLA's legacy registry: api_version=0."""
    lib = ctypes.CDLL(sj.library_path())
    jax.ffi.register_ffi_target("simdev_legacy_matmul",
                                jax.ffi.pycapsule(lib.simdev_xla_legacy_matmul),
                                platform="cpu", api_version=0)


def legacy_matmul(a, b):
    """The legacy target sees two pointers and an opaque string, nothing
    else: the shapes are checked here and written into the opaque. A wrong
    opaque cannot be detected on the C side (docs/xla-custom-calls.md)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError(f"legacy_matmul: need a [m, k] and b [k, n] of one dtype, "
                         f"got {a.shape} {a.dtype} and {b.shape} {b.dtype}")
    dt = {jnp.dtype(jnp.float32): "f32", jnp.dtype(jnp.float64): "f64"}[a.dtype]
    opaque = f"m={a.shape[0]},k={a.shape[1]},n={b.shape[1]},dtype={dt}"
    out = jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype)
    return jax.ffi.ffi_call("simdev_legacy_matmul", out, custom_call_api_version=3,
                            legacy_backend_config=opaque,
                            vmap_method="sequential")(a, b)


def main():
    sj.register()
    register_legacy()
    print(f"JAX {jax.__version__} on {jax.devices()[0].platform}, "
          f"simdev targets from {sj.library_path()}")
    rng = np.random.default_rng(0)
    p = params(rng)
    x = jnp.asarray(rng.standard_normal((4, 16, 16, 3)).astype(np.float32))

    # 1. One jitted program, several simdev calls.
    f = jax.jit(net_simdev)
    hlo = f.lower(p, x).as_text()
    calls = sorted({line.split("@")[1].split("(")[0] for line in hlo.splitlines()
                    if "stablehlo.custom_call @simdev_" in line})
    print(f"1. jit: {hlo.count('stablehlo.custom_call @simdev_')} simdev custom "
          f"calls in one program: {', '.join(calls)}")
    report("   network forward (jit)", f(p, x), jax.jit(net_jnp)(p, x))

    # 2. vmap: broadcast_all gives every operand the batch dim in front.
    a = jnp.asarray(rng.standard_normal((6, 20, 30)).astype(np.float32))
    b = jnp.asarray(rng.standard_normal((30, 10)).astype(np.float32))
    report("2. vmap(matmul) over 6 matrices", jax.jit(jax.vmap(sj.matmul, (0, None)))(a, b),
           jnp.einsum("bmk,kn->bmn", a, b))

    # 3. grad through custom_vjp: the backward pass is simdev calls too.
    def loss(net):
        return lambda p: jnp.mean(net(p, x) ** 2)
    g = jax.jit(jax.grad(loss(net_simdev)))(p)
    gr = jax.jit(jax.grad(loss(net_jnp)))(p)
    bwd = jax.jit(jax.grad(loss(net_simdev))).lower(p).as_text()
    print(f"3. grad: {bwd.count('stablehlo.custom_call @simdev_')} simdev custom "
          f"calls in the forward + backward program")
    for name in sorted(p):
        report(f"   d loss / d {name}", g[name], gr[name])

    # 4. A bad call fails with the handler's message; the next one works.
    try:
        jax.block_until_ready(sj.matmul(jnp.ones((2, 3), jnp.int32),
                                        jnp.ones((3, 4), jnp.int32)))
        print("4. error: the int32 matmul did not fail")
        failures.append("error")
    except Exception as e:  # jax.errors.JaxRuntimeError
        print(f"4. error: {type(e).__name__}: {str(e).splitlines()[0]}")
    report("   the next call", sj.matmul(a[0], b), a[0] @ b)

    # 5. The legacy convention next to the typed FFI, in one program.
    old, new = jax.jit(lambda a, b: (legacy_matmul(a, b), sj.matmul(a, b)))(a[0], b)
    report("5. legacy simdev_legacy_matmul", old, a[0] @ b)
    report("   typed  simdev_matmul", new, a[0] @ b)
    # Both run sa_gemm on the same shapes, so the same blocks and OpenBLAS
    # calls: equal bits. Denormals too: the legacy call runs on whichever
    # thread runs the program there (XLA's, or simdev0-s0 after a simdev
    # call), and XLA:CPU flushes denormals (FTZ/DAZ) as simdev's threads do.
    same = bool(jnp.all(old == new))
    print(f"   legacy == typed bit for bit: {same}")
    if not same:
        failures.append("legacy != typed")

    queued, completed, failed = sj.counts()
    print(f"simdev stream: {queued} calls queued, {completed} completed, "
          f"{failed} failed")
    print(f"TensorFlow loaded: {'tensorflow' in sys.modules}")
    if failures:
        sys.exit(f"MISMATCH: {', '.join(failures)}")
    print("all results match jnp")


if __name__ == "__main__":
    main()
