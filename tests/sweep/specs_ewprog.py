"""Sweep spec of _SimdevFusedElementwise (src/kernels/math/fused_elementwise.c).

The op is simdev's own: TF has no CPU kernel for it and it is not in
tf.raw_ops (sweep.op_function runs it). Its property instead of the CPU
comparison: the fused program equals the same program run as a chain of
unfused SIMDEV ops bit for bit (the kernels share their scalar functions,
arith/scalar.h), and the chain of TF CPU ops within `ulps`. Bad programs
and shapes are tested in tests/tf/test_kernels_fused_elementwise.py: with
no CPU kernel there is no CPU error class to compare them with here.
"""
import numpy as np

from specs_core import FT, Case, Spec, vals

OP = "_SimdevFusedElementwise"
ULPS = 8
ADAM = ("$0 $6 $1 $3 $1 Sub $4 Mul AddV2 Mul $2 $3 Square $2 Sub $5 Mul AddV2 "
        "Sqrt $7 AddV2 RealDiv Sub")


def _case(name, program, *arrays):
    return Case(name, {"x": list(arrays), "program": program})


def _cases(quick):
    cases = [
        _case("x*y+z [2,3] [3] []", "$0 $1 Mul $2 AddV2",
              vals((2, 3), key=1), vals((3,), key=2), vals((), key=3)),
        _case("swish [4,5]", "$0 Sigmoid $0 Mul", vals((4, 5), key=4)),
        _case("Adam update [3,4]", ADAM, vals((3, 4), key=5), vals((3, 4), key=6),
              vals((3, 4), 0, 2, key=7), vals((3, 4), key=8), np.array(0.1),
              np.array(0.001), np.array(1e-3), np.array(1e-7)),
        _case("zero [0,3] [3]", "$0 $1 SquaredDifference", vals((0, 3), key=9),
              vals((3,), key=10)),
    ]
    return cases[:2] if quick else cases


def _unfused(program, arrays, dev):
    """The program as a chain of tf.raw_ops ops on `dev`."""
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry
    with tf.device(dev):
        ts = [tf.constant(a) for a in arrays]
        stack = []
        for tok in program.split(" "):
            if tok.startswith("$"):
                stack.append(ts[int(tok[1:])])
                continue
            names = [a.name for a in op_def_registry.get(tok).input_arg]
            args = stack[-len(names):]
            del stack[-len(names):]
            stack.append(getattr(tf.raw_ops, tok)(**dict(zip(names, args))))
        (y,) = stack
        return y.numpy(), y.device


def _prop(run, case, combo):
    import tensorflow as tf
    dt = np.dtype(tf.as_dtype(combo["T"]).as_numpy_dtype)
    program = case.kwargs["program"]
    arrays = [np.asarray(a).astype(dt) for a in case.kwargs["x"]]
    (got,) = run("/device:SIMDEV:0")
    sim, sim_dev = _unfused(program, arrays, "/device:SIMDEV:0")
    cpu, _ = _unfused(program, arrays, "/device:CPU:0")
    if "SIMDEV:0" not in sim_dev:
        raise AssertionError(f"the unfused chain ran on {sim_dev}")
    if got.dtype != sim.dtype or got.shape != sim.shape or got.tobytes() != sim.tobytes():
        raise AssertionError(f"fused {got.dtype}{list(got.shape)} differs from the "
                             f"unfused SIMDEV chain {sim.dtype}{list(sim.shape)}")
    if got.shape != cpu.shape:
        raise AssertionError(f"shape {list(got.shape)}, CPU chain {list(cpu.shape)}")
    if got.size:
        u = float(np.finfo(dt).eps) / 2
        g, c = got.astype(np.float64), cpu.astype(np.float64)
        bound = ULPS * u * (np.abs(c) + np.abs(c).max()) + 4 * float(np.finfo(dt).tiny)
        if not (np.abs(g - c) <= bound).all():
            k = int(np.argmax(np.abs(g - c) - bound))
            raise AssertionError(f"fused vs the TF CPU chain: {g.reshape(-1)[k]!r} vs "
                                 f"{c.reshape(-1)[k]!r} (more than {ULPS} ulps)")


OPS = [Spec(OP, _cases, no_bad="no CPU kernel to compare errors with: bad programs "
                               "and incompatible shapes are tested in tests/tf/"
                               "test_kernels_fused_elementwise.py",
            ulps=ULPS, try_types=FT, prop=_prop)]
