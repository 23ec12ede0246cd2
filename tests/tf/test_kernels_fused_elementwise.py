"""_SimdevFusedElementwise (src/arith/ewprog.c, fused_elementwise.c) run directly.

The op is plugin-defined and has an underscore name, so it is not in
tf.raw_ops: the child runs it with tensorflow.python.eager.execute.execute
(eager) and op_def_library._apply_op_helper (inside tf.function), on SIMDEV
with soft placement off.

What is checked:
  - every op of the fusable-op table (read from src/arith/ewops.h here, the
    rows ewprog.c's table is built from, so a new row without a test
    fails), float32 and float64: the fused op
    "$0 Op" / "$0 $1 Op" equals the unfused SIMDEV op bit for bit, and an
    independent NumPy reference (float64 for float32 data, long double for
    float64) within a bound derived from the op's rounding count (as
    test_kernels_cwise.py: exact, gamma(k), or LIBM_ULPS ulps);
  - broadcasting (scalar, row, column, rank mismatch, zero sizes, a large
    case split over threads and blocks) and a long chain (Adam's update):
    bit for bit against the chain of unfused SIMDEV ops, and against NumPy
    within a bound propagated op by op through the program (running error
    analysis: each op's first-order propagation of its operands' bounds
    plus its own rounding);
  - bad programs and incompatible shapes: InvalidArgument from the SIMDEV
    kernel naming the token / the shapes; SIMDEV still works afterwards;
  - the op is defined once with the planned signature, its kernel
    registered once per dtype, only for SIMDEV; graph shape inference gives
    the broadcast shape (unknown dimensions and ranks included).
"""
import re

import pytest

from conftest import assert_vs_ref
# TABLE: {op name: arity}, the fusable-op table (src/arith/ewops.h's rows,
# which ewprog.c's table is built from); ROWS: each row's columns
from ewtable import ROWS, TABLE

DTYPES = ("float32", "float64")

# Broadcasting cases of "$0 $1 Mul $2 AddV2" (x * y + z): input shapes.
BCAST = {
    "same": ([4, 5], [4, 5], [4, 5]),
    "scalar": ([], [5, 9], []),
    "row": ([6, 11], [11], [1, 11]),
    "column": ([6, 11], [6, 1], [6, 11]),
    "rank-mismatch": ([2, 1, 5, 1], [3, 1, 7], [5, 1]),
    "zero": ([0, 4], [4], []),
    "zero-vs-1": ([3, 0], [3, 1], [1]),
    "scalars": ([], [], []),
    "big-mixed": ([1000, 1], [1037], [1000, 1037]),  # many blocks and ranges
}

ADAM = ("$0 $6 $1 $3 $1 Sub $4 Mul AddV2 Mul $2 $3 Square $2 Sub $5 Mul AddV2 "
        "Sqrt $7 AddV2 RealDiv Sub")

# (name, program, N, input shapes, key text of the kernel's message)
BAD = [
    ("unknown-op", "$0 Foo", 1, [[3]], "token 1 'Foo' at byte 3: unknown op"),
    ("leftover", "$0 $1", 2, [[3], [3]], "program leaves 2 values on the stack"),
    ("underflow", "$0 Sub", 1, [[3]],
     "token 1 'Sub' at byte 3: stack underflow (needs 2 operands, has 1)"),
    ("input-range", "$0 $2 AddV2", 2, [[3], [3]],
     "token 1 '$2' at byte 3: input 2 out of range (N = 2)"),
    ("bad-input-token", "$x Neg", 1, [[3]], "token 0 '$x' at byte 0: not an input"),
    ("leading-zero", "$01 Neg", 1, [[3]], "token 0 '$01' at byte 0: not an input"),
    ("double-space", "$0  Neg", 1, [[3]], "empty token 1 at byte 3"),
    ("trailing-space", "$0 Neg ", 1, [[3]], "empty token 2 at byte 7"),
    ("empty", "", 1, [[3]], "empty program"),
    ("lowercase-op", "$0 neg", 1, [[3]], "token 1 'neg' at byte 3: unknown op"),
    ("not-fusable", "$0 LeakyRelu", 1, [[3]], "token 1 'LeakyRelu' at byte 3: unknown op"),
    ("too-many-ops", "$0" + " Neg" * 65, 1, [[3]], "token 65 'Neg' at byte 259: more than 64 ops"),
    ("too-deep", " ".join(["$0"] * 17) + " AddV2" * 16, 1, [[3]],
     "token 16 '$0' at byte 48: stack deeper than 16"),
    ("too-many-inputs", " ".join(f"${k}" for k in range(17)) + " AddV2" * 16, 17,
     [[3]] * 17, "N = 17 inputs, must be in [1, 16]"),
    ("too-long", "$0" + " Abs" * 1100, 1, [[3]], "longer than the limit of 4096"),
    ("incompatible", "$0 $1 AddV2", 2, [[2, 3], [4]],
     "Incompatible shapes: [2,3] vs. [4] (inputs 0 and 1"),
    ("incompatible-3", "$0 $1 $2 AddV2 AddV2", 3, [[5, 3], [3], [4, 1]],
     "Incompatible shapes: [5,3] vs. [4,1] (inputs 0 and 2"),
    ("zero-vs-2", "$0 $1 Mul", 2, [[0, 3], [2, 3]], "Incompatible shapes: [0,3] vs. [2,3]"),
]

# Programs at the limits, accepted: (name, program, N)
LIMITS = [
    ("64-ops", "$0" + " Neg" * 64, 1),
    ("depth-16", " ".join(["$0"] * 16) + " AddV2" * 15, 1),
    ("16-inputs", " ".join(f"${k}" for k in range(16)) + " AddV2" * 15, 16),
    ("no-op", "$0", 1),
    ("reuse-input", "$0 $0 Mul $0 Mul", 1),
    ("unused-input", "$1 Neg", 2),
]

# Static shape inference: (name, input shapes (None: unknown rank), expected)
SHAPES = [
    ("known", [[2, 1], [1, 5]], [2, 5]),
    ("row-unknown-batch", [[None, 3], [3]], [None, 3]),
    ("two-unknown", [[None, 3], [None, 1]], [None, 3]),
    ("unknown-vs-1", [[None, 1], [1, 5]], [None, 5]),
    ("unknown-vs-known", [[None], [5]], [5]),
    ("rank-mismatch", [[2, 1, 1], [4, 1]], [2, 4, 1]),
    ("unknown-rank", [None, [3]], None),
    ("scalars", [[], []], []),
]

SCRIPT = (f"TABLE = {TABLE!r}\nBCAST = {BCAST!r}\nADAM = {ADAM!r}\n"
          f"BAD = {BAD!r}\nLIMITS = {LIMITS!r}\nSHAPES = {SHAPES!r}\n") + r"""
import math, zlib
import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context, execute
from tensorflow.python.framework import op_def_library, op_def_registry

tf.config.set_soft_device_placement(False)
SIMDEV, CPU = "/device:SIMDEV:0", "/device:CPU:0"
OP = "_SimdevFusedElementwise"
raw = tf.raw_ops

def fused(program, arrays, dtype):
    # the op on SIMDEV through eager execute (the op is not in tf.raw_ops)
    dt = tf.as_dtype(dtype)
    with tf.device(SIMDEV):
        ts = [tf.constant(a, dtype=dt) for a in arrays]
        (y,) = execute.execute(OP, 1, ts, ("T", dt.as_datatype_enum, "N", len(ts),
                                           "program", program), context.context())
    return y

def unfused_op(op, *ts):
    names = [a.name for a in op_def_registry.get(op).input_arg]
    return getattr(raw, op)(**dict(zip(names, ts)))

def unfused(program, arrays, dtype):
    # the same program as a chain of unfused ops on SIMDEV
    dt = tf.as_dtype(dtype)
    with tf.device(SIMDEV):
        ts = [tf.constant(a, dtype=dt) for a in arrays]
        st = []
        for tok in program.split(" "):
            if tok.startswith("$"):
                st.append(ts[int(tok[1:])])
            elif TABLE[tok] == 1:
                st.append(unfused_op(tok, st.pop()))
            else:
                b = st.pop(); a = st.pop()
                st.append(unfused_op(tok, a, b))
        (y,) = st
    return y

LD = np.longdouble
def ref_dtype(dt):
    return LD if dt == "float64" else np.float64
def ref_u(dt):
    return float(np.finfo(ref_dtype(dt)).eps) / 2

S, SA = 1.0507009873554804934193349852946, 1.7580993408473768599402175208123
def sigmoid(x): return 1 / (1 + np.exp(-x))
def elu(x): return np.where(x < 0, np.expm1(np.minimum(x, 0)), x)
def selu(x): return np.where(x < 0, SA * np.expm1(np.minimum(x, 0)), S * x)
_erf = np.vectorize(math.erf, otypes=[np.float64])
REF = {
    "Neg": np.negative, "Abs": np.abs, "Square": np.square, "Sqrt": np.sqrt,
    "Rsqrt": lambda x: 1 / np.sqrt(x), "Exp": np.exp, "Expm1": np.expm1,
    "Log": np.log, "Log1p": np.log1p, "Tanh": np.tanh, "Sigmoid": sigmoid,
    "Relu": lambda x: np.where(x < 0, 0, x),
    "Relu6": lambda x: np.clip(x, 0, 6), "Elu": elu, "Selu": selu,
    "Softplus": lambda x: np.log1p(np.exp(x)),
    "Softsign": lambda x: x / (np.abs(x) + 1),
    "Erf": lambda x: _erf(x.astype(np.float64)).astype(x.dtype),
    "Reciprocal": lambda x: 1 / x, "Sign": np.sign, "Floor": np.floor,
    "Ceil": np.ceil, "Round": np.rint,
    "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "RealDiv": np.divide, "Maximum": np.maximum, "Minimum": np.minimum,
    "DivNoNan": lambda x, y: np.where(y == 0, 0, x / np.where(y == 0, 1, y)),
    "SquaredDifference": lambda x, y: (x - y) ** 2, "Pow": np.power,
    "ReluGrad": lambda g, f: g * (f > 0),
    "Relu6Grad": lambda g, f: g * ((f > 0) & (f < 6)),
    "SoftplusGrad": lambda g, f: g * sigmoid(f),
    "SoftsignGrad": lambda g, f: g / (np.abs(f) + 1) ** 2,
    "EluGrad": lambda g, y: np.where(y < 0, g * (y + 1), g),
    "SeluGrad": lambda g, y: np.where(y < 0, g * (y + SA), g * S),
    "TanhGrad": lambda y, dy: dy * (1 - y * y),
    "SigmoidGrad": lambda y, dy: dy * y * (1 - y),
    "SqrtGrad": lambda y, dy: dy * 0.5 / y,
    "RsqrtGrad": lambda y, dy: dy * -0.5 * y * y * y,
}
# roundings of each op's formula in simdev's C (arith/scalar.h); "lib": a
# libm function involved (LIBM_ULPS ulps)
ULPS = {"Neg": 0, "Abs": 0, "Relu": 0, "Relu6": 0, "Sign": 0, "Floor": 0,
        "Ceil": 0, "Round": 0, "Maximum": 0, "Minimum": 0, "ReluGrad": 0,
        "Relu6Grad": 0, "Square": 1, "Sqrt": 1, "Reciprocal": 1, "AddV2": 1,
        "Sub": 1, "Mul": 1, "RealDiv": 1, "DivNoNan": 1, "Rsqrt": 2,
        "Softsign": 2, "SquaredDifference": 3, "SoftsignGrad": 4,
        "EluGrad": 2, "SeluGrad": 3, "TanhGrad": 3, "SigmoidGrad": 3,
        "SqrtGrad": 2, "RsqrtGrad": 4}
ABS_TERMS = {  # |terms| the roundings are relative to, where they cancel
    "TanhGrad": lambda y, dy: np.abs(dy) * (1 + y * y),
    "SigmoidGrad": lambda y, dy: np.abs(dy * y) * (1 + np.abs(y)),
}

def op_bound(op, ref, args, dt):
    k = ULPS.get(op, "lib")
    a = ABS_TERMS[op](*args) if op in ABS_TERMS else np.abs(ref)
    if k == 0:
        return 0.0
    g = 2 * LIBM_ULPS * unit_roundoff(dt) if k == "lib" else gamma(k, dt)
    kk = LIBM_ULPS if k == "lib" else k
    return g * a + LIBM_ULPS * ref_u(dt) * a + kk * tiny(dt)

def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))

def op_inputs(op, dt, shape, rng):
    n = lambda: rng.standard_normal(shape)
    pos = lambda lo=0.05, hi=8.0: rng.uniform(lo, hi, shape)
    away = lambda: np.where(rng.uniform(size=shape) < 0.5, -1, 1) * pos(0.25, 4)
    x = {"Sqrt": pos, "Rsqrt": pos, "Log": pos, "Log1p": lambda: pos(-0.9, 4),
         "Reciprocal": away, "Exp": lambda: 3 * n(), "Relu6": lambda: pos(-2, 8),
         "Softplus": lambda: pos(-20, 20), "Floor": lambda: 4 * n(),
         "Ceil": lambda: 4 * n(),
         "Round": lambda: np.round(8 * n()) / 2,  # halves: ties to even
         "Pow": lambda: pos(0.1, 3)}.get(op, n)()
    if TABLE[op] == 1:
        return [x.astype(dt)]
    y = n()
    if op == "RealDiv":
        y = away()
    elif op == "DivNoNan":
        y = np.where(rng.uniform(size=shape) < 0.2, 0.0, y)
    elif op in ("Relu6Grad",):
        y = pos(-2, 8)
    elif op == "EluGrad":
        y = elu(pos(-3, 2))
    elif op == "SeluGrad":
        y = selu(pos(-3, 2))
    elif op == "TanhGrad":
        x = np.tanh(x)
    elif op == "SigmoidGrad":
        x = sigmoid(x)
    elif op in ("SqrtGrad", "RsqrtGrad"):
        x = pos(0.1, 3)
    return [x.astype(dt), y.astype(dt)]

def compare(name, program, arrays, dt, ref, bound):
    # fused vs the unfused chain (bits) and vs the reference (bound)
    got = fused(program, arrays, dt)
    want = unfused(program, arrays, dt)
    rep = {"devices": [got.device], "on_simdev": "SIMDEV:0" in got.device,
           "unfused_device": want.device}
    eq = raw_equal(got.numpy(), want.numpy())
    rep["bits"] = eq
    r = compare_to_ref(got.numpy(), ref, bound)
    if got.dtype.name != dt:
        r.update(ok=False, mismatch=f"dtype {got.dtype.name}")
    rep["sim"] = [r]
    rep["sim_ok"] = r["ok"]
    rep["cpu_ok"] = True
    return rep

# ---- every op of the table ----------------------------------------------------
for op in sorted(TABLE):
    for dt in ("float32", "float64"):
        def run_op(op=op, dt=dt):
            rng = rng_for(f"{op}:{dt}")
            shape = [7, 13]
            arrays = op_inputs(op, dt, shape, rng)
            la = [a.astype(ref_dtype(dt)) for a in arrays]
            with np.errstate(all="ignore"):
                ref = REF[op](*la)
            prog = "$0 " + op if TABLE[op] == 1 else "$0 $1 " + op
            return compare(op, prog, arrays, dt, ref, op_bound(op, ref, la, dt))
        check(f"op:{op}:{dt}")(run_op)

# ---- running error analysis for chains ----------------------------------------
def propagate(program, la, dt):
    # value and absolute error bound of each stack entry, op by op
    u = unit_roundoff(dt)
    st = []
    for tok in program.split(" "):
        if tok.startswith("$"):
            x = la[int(tok[1:])]
            st.append((x, np.zeros_like(x)))
            continue
        if TABLE[tok] == 1:
            (a, ea) = st.pop()
            if tok == "Square":
                r = a * a
                e = 2 * np.abs(a) * ea + ea * ea + u * (np.abs(a) + ea) ** 2
            elif tok == "Sqrt":
                r = np.sqrt(a)
                den = np.sqrt(np.maximum(a - ea, 0)) + r
                e = (np.divide(ea, den, out=np.zeros_like(ea), where=ea > 0)
                     + u * np.sqrt(a + ea))
            elif tok in ("Neg", "Relu", "Abs"):
                r, e = REF[tok](a), ea
            else:
                raise ValueError(tok)
        else:
            (b, eb) = st.pop(); (a, ea) = st.pop()
            if tok in ("AddV2", "Sub"):
                r = REF[tok](a, b)
                e = ea + eb + u * (np.abs(a) + np.abs(b) + ea + eb)
            elif tok == "Mul":
                r = a * b
                e = (np.abs(a) * eb + np.abs(b) * ea + ea * eb
                     + u * (np.abs(a) + ea) * (np.abs(b) + eb))
            elif tok == "RealDiv":
                assert (np.abs(b) > eb).all()
                r = a / b
                e = (ea + np.abs(r) * eb + u * (np.abs(a) + ea)) / (np.abs(b) - eb)
            elif tok in ("Maximum", "Minimum"):
                r, e = REF[tok](a, b), np.maximum(ea, eb)
            else:
                raise ValueError(tok)
        st.append((r, e + tiny(dt)))
    (r, e), = st
    # + the reference's own rounding, a few ulps of its dtype per op
    nops = sum(1 for t in program.split(" ") if not t.startswith("$"))
    return r, e + 4 * nops * ref_u(dt) * (np.abs(r) + e)

def run_chain(name, program, arrays, dt):
    la = [a.astype(ref_dtype(dt)) for a in arrays]
    ref, bound = propagate(program, la, dt)
    return compare(name, program, arrays, dt, ref, bound)

for sname, shapes in BCAST.items():
    for dt in ("float32", "float64"):
        if sname.startswith("big") and dt == "float64":
            continue
        def run_bcast(sname=sname, shapes=shapes, dt=dt):
            rng = rng_for(f"bcast:{sname}:{dt}")
            arrays = [rng.standard_normal(s).astype(dt) for s in shapes]
            rep = run_chain(sname, "$0 $1 Mul $2 AddV2", arrays, dt)
            rep["shape"] = list(fused("$0 $1 Mul $2 AddV2", arrays, dt).shape)
            rep["np_shape"] = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
            return rep
        check(f"bcast:{sname}:{dt}")(run_bcast)

def adam_inputs(dt, shape, seed):
    rng = rng_for(f"adam:{dt}:{seed}")
    var, m, g = (rng.standard_normal(shape) for _ in range(3))
    v = rng.uniform(0, 2, shape)
    scal = [np.array(x) for x in (1 - 0.9, 1 - 0.999, 1e-3, 1e-7)]
    return [a.astype(dt) for a in [var, m, v, g] + scal]

for dt in ("float32", "float64"):
    check(f"adam:{dt}")(lambda dt=dt: run_chain("adam", ADAM, adam_inputs(dt, [257, 129], 1), dt))
check("adam:float32:big")(lambda: run_chain("adam", ADAM, adam_inputs("float32", [1 << 20], 2), "float32"))

# ---- programs at the limits: accepted, and equal to the unfused chain ---------
for name, program, n in LIMITS:
    def run_limit(program=program, n=n):
        rng = rng_for("limit:" + program)
        arrays = [rng.uniform(0.5, 1.5, [3, 5]).astype(np.float32) for _ in range(n)]
        got, want = fused(program, arrays, "float32"), unfused(program, arrays, "float32")
        return {"device": got.device, "bits": raw_equal(got.numpy(), want.numpy())}
    check("limit:" + name)(run_limit)

# ---- bad programs and shapes --------------------------------------------------
def good_op():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = fused("$0 $0 AddV2", [a], "float32")
    return "SIMDEV:0" in y.device and bool(np.array_equal(y.numpy(), 2 * a))

for name, program, n, shapes, key in BAD:
    def run_bad(program=program, shapes=shapes):
        arrays = [np.ones(s, dtype=np.float32) for s in shapes]
        try:
            fused(program, arrays, "float32").numpy()
            sim = ["", ""]
        except Exception as e:
            sim = [type(e).__name__, str(e)[:2000]]
        return {"sim": sim, "after": after_ok(good_op)}
    check("bad:" + name)(run_bad)

# ---- registration -------------------------------------------------------------
@check("registration")
def registration():
    from tensorflow.python.framework import kernels
    od = op_def_registry.get(OP)
    ks = [k for k in kernels.get_all_registered_kernels().kernel if k.op == OP]
    attrs = {a.name: a for a in od.attr}
    return {
        "inputs": [(a.name, a.number_attr, a.type_attr) for a in od.input_arg],
        "outputs": [(a.name, a.type_attr) for a in od.output_arg],
        "attrs": sorted(attrs),
        "T": sorted(tf.as_dtype(t).name for t in attrs["T"].allowed_values.list.type),
        "N_min": attrs["N"].minimum, "N_has_min": attrs["N"].has_minimum,
        "program_type": attrs["program"].type, "stateful": od.is_stateful,
        "kernels": sorted((k.device_type, [tf.as_dtype(t).name for c in k.constraint
                                            for t in c.allowed_values.list.type])
                          for k in ks),
    }

# ---- the table against the registry -------------------------------------------
@check("ewops-registry")
def ewops_registry():
    # Every SIMDEV kernel's dtypes (one entry per kernel), the table ops'
    # OpDef input names, and the SIMDEV ops whose OpDef looks like a pure
    # elementwise op: attribute T only, one or two inputs and one output,
    # all of type T, stateless.
    from tensorflow.python.framework import kernels
    ks = {}
    for k in kernels.get_all_registered_kernels().kernel:
        if k.device_type == "SIMDEV":
            ks.setdefault(k.op, []).extend(tf.as_dtype(t).name for c in k.constraint
                                           for t in c.allowed_values.list.type)
    like = []
    for op in sorted(ks):
        od = op_def_registry.get(op)
        args = list(od.input_arg) + list(od.output_arg) if od is not None else []
        if (od is not None and [a.name for a in od.attr] == ["T"]
                and 1 <= len(od.input_arg) <= 2 and len(od.output_arg) == 1
                and all(a.type_attr == "T" and not a.number_attr
                        and not a.type_list_attr for a in args)
                and not od.is_stateful and "float32" in ks[op]):
            like.append(op)
    return {"kernels": {op: sorted(ks.get(op, [])) for op in sorted(set(TABLE) | set(like))},
            "inputs": {op: [a.name for a in op_def_registry.get(op).input_arg]
                       for op in TABLE},
            "elementwise_like": like}

# ---- static shapes inside tf.function -----------------------------------------
def graph_shape(shapes):
    specs = [tf.TensorSpec(s, tf.float32) for s in shapes]
    @tf.function(input_signature=specs)
    def f(*xs):
        prog = "$0 " + " ".join(f"${k} AddV2" for k in range(1, len(xs)))
        _, _, op, _ = op_def_library._apply_op_helper(OP, x=list(xs), program=prog,
                                                      name="fused")
        return op.outputs[0]
    s = f.get_concrete_function().structured_outputs.shape
    return None if s.rank is None else s.as_list()

for name, shapes, want in SHAPES:
    check("shape:" + name)(lambda shapes=shapes: {"shape": graph_shape(shapes)})

@check("shape:incompatible")
def shape_incompatible():
    try:
        graph_shape([[2, 3], [4]])
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)[:1500]}
    return {"error": ""}

@check("graph-run")
def graph_run():
    @tf.function
    def f(x, y):
        _, _, op, _ = op_def_library._apply_op_helper(
            OP, x=[x, y], program="$0 $1 SquaredDifference $0 Mul", name="fused")
        return op.outputs[0]
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    b = np.linspace(-1, 1, 4)
    with tf.device(SIMDEV):
        y = f(tf.constant(a), tf.constant(b))
    want = unfused("$0 $1 SquaredDifference $0 Mul", [a, b], "float64")
    return {"device": y.device, "bits": raw_equal(y.numpy(), want.numpy())}
"""


@pytest.fixture(scope="module")
def ew(run_tf):
    return run_tf(SCRIPT, timeout=240)


def test_table_is_the_plan():
    """The table holds at least the plan's ops, with their arities."""
    plan_unary = ["Neg", "Abs", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Log1p",
                  "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Reciprocal", "Sign",
                  "Floor", "Ceil"]
    plan_binary = ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum",
                   "SquaredDifference", "ReluGrad", "Relu6Grad", "TanhGrad",
                   "SigmoidGrad", "EluGrad"]
    missing = [op for op in plan_unary if TABLE.get(op) != 1]
    missing += [op for op in plan_binary if TABLE.get(op) != 2]
    assert not missing, f"ops of the plan missing from ewprog.c's table: {missing}"


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", sorted(TABLE))
def test_op(ew, op, dt):
    d = ew.data(f"op:{op}:{dt}")
    assert_vs_ref(d, f"{op}:{dt}")
    assert "SIMDEV:0" in d["unfused_device"], d
    assert d["bits"]["equal"], f"fused {op} differs from the unfused SIMDEV op: {d['bits']}"


BCAST_CASES = [f"{s}:{dt}" for s in BCAST for dt in DTYPES
               if not (s.startswith("big") and dt == "float64")]


@pytest.mark.parametrize("case", BCAST_CASES)
def test_broadcast(ew, case):
    d = ew.data("bcast:" + case)
    assert d["shape"] == d["np_shape"], d
    assert_vs_ref(d, case)
    assert d["bits"]["equal"], f"fused differs from the unfused chain: {d['bits']}"


@pytest.mark.parametrize("case", ["float32", "float64", "float32:big"])
def test_adam_chain(ew, case):
    d = ew.data("adam:" + case)
    assert_vs_ref(d, "adam:" + case)
    assert d["bits"]["equal"], f"fused Adam update differs from the unfused chain: {d['bits']}"


@pytest.mark.parametrize("name", [l[0] for l in LIMITS])
def test_limits_accepted(ew, name):
    d = ew.data("limit:" + name)
    assert "SIMDEV:0" in d["device"], d
    assert d["bits"]["equal"], d


@pytest.mark.parametrize("bad", BAD, ids=[b[0] for b in BAD])
def test_bad_program(ew, bad):
    name, key = bad[0], bad[4]
    d = ew.data("bad:" + name)
    cls, msg = d["sim"]
    assert cls == "InvalidArgumentError", f"{name}: {d}"
    # the op's SIMDEV kernel raised it (TF's marker for the op on SIMDEV;
    # the op has no other kernel)
    assert re.search(r"\{\{function_node __wrapped____SimdevFusedElementwise\w*"
                     r"_device_/job:localhost/replica:0/task:0/device:SIMDEV:0\}\}", msg), msg
    assert key in msg, f"expected {key!r} in: {msg}"
    assert d["after"] is True, d["after"]


@pytest.mark.registry
def test_registered_once(ew):
    d = ew.data("registration")
    assert d["inputs"] == [["x", "N", "T"]]
    assert d["outputs"] == [["y", "T"]]
    assert d["attrs"] == ["N", "T", "program"]
    assert d["T"] == ["float32", "float64"]
    assert d["N_has_min"] and d["N_min"] == 1
    assert d["program_type"] == "string"
    assert not d["stateful"]
    assert d["kernels"] == [["SIMDEV", ["float32"]], ["SIMDEV", ["float64"]]], d
    assert "not registered" not in ew.stderr, ew.stderr[-2000:]


# The SIMDEV ops with a pure elementwise OpDef (attribute T only, one or two
# inputs of type T, one output) that are not rows of src/arith/ewops.h, and
# why. A new such op fails test_ewops_complete until it is a row (then
# unfused kernel and fusion come from that row) or listed here.
NOT_IN_TABLE = {
    "Add": "the legacy name of AddV2 (AddV2's loops, cwise_binary.c); "
           "programs and the graph pass use AddV2",
    "FloorDiv": "cwise_compare.c's loops (int64: the zero-divisor check); no "
                "sa_cws_ function, not fusable yet",
    "FloorMod": "as FloorDiv",
    "Softmax": "a reduction along the last dimension, not elementwise",
    "LogSoftmax": "as Softmax",
    "OnesLike": "a fill: does not read its input's values",
    "ZerosLike": "as OnesLike",
}


@pytest.mark.registry
@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_ewops_row_registered(ew, row):
    """Each row of ewops.h has its unfused SIMDEV kernel, once per dtype:
    float, double, half and bfloat16 (the driver feeds 16-bit floats to the
    float32 loop), and int64 exactly when the row says I64. (The fusable
    table is the same rows by construction: ewprog.c expands them, and
    test_op runs every row through the fused kernel.)"""
    d = ew.data("ewops-registry")
    want = ["bfloat16", "float16", "float32", "float64"] + (["int64"] if row.i64 else [])
    assert d["kernels"][row.name] == want, (row, d["kernels"][row.name])


@pytest.mark.registry
@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_ewops_row_operands(ew, row):
    """A row's kind and operand order are TF's OpDef's: unary ops take one
    input, broadcasting binary ops (x, y), gradients their row's (in0, in1)
    (the order of sa_cws_<stem>(a, b) and of a program's operands)."""
    names = ew.data("ewops-registry")["inputs"][row.name]
    if row.kind == "U":
        assert len(names) == 1, (row, names)
    elif row.kind == "B":
        assert names == ["x", "y"], (row, names)
    else:
        assert names == list(row.operands), (row, names)


@pytest.mark.registry
def test_ewops_complete(ew):
    """Every SIMDEV op with a pure elementwise OpDef is a row of ewops.h or
    in NOT_IN_TABLE with its reason: a float op added to a kernel file by
    hand instead of as a row (so never fused) fails here; so does a stale
    NOT_IN_TABLE entry, and a row the signature test would not recognise."""
    like = set(ew.data("ewops-registry")["elementwise_like"])
    assert not set(TABLE) - like, sorted(set(TABLE) - like)
    extra = like - set(TABLE)
    assert extra == set(NOT_IN_TABLE), (
        f"not rows of src/arith/ewops.h nor in NOT_IN_TABLE: "
        f"{sorted(extra - set(NOT_IN_TABLE))}; stale NOT_IN_TABLE: "
        f"{sorted(set(NOT_IN_TABLE) - extra)}")


@pytest.mark.parametrize("case", SHAPES, ids=[s[0] for s in SHAPES])
def test_static_shape(ew, case):
    name, _, want = case
    assert ew.data("shape:" + name)["shape"] == want


def test_static_shape_incompatible(ew):
    d = ew.data("shape:incompatible")
    assert d["error"], "graph construction accepted [2,3] with [4]"
    assert "Incompatible shapes" in d["message"], d


def test_graph_run(ew):
    d = ew.data("graph-run")
    assert "SIMDEV:0" in d["device"], d
    assert d["bits"]["equal"], d


def test_clean_exit(ew):
    ew.assert_clean_exit()
