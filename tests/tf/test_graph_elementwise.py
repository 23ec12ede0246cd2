"""The graph optimizer's `elementwise` pass (src/graph/fuse_elementwise.c)
in real TF 2.21: trees of elementwise ops on SIMDEV become one
`_SimdevFusedElementwise` node.

One TF child runs every case. Each case builds a fresh tf.function twice,
with the plugin's optimizers off and on (graphutil.plugin_optimizers: per
function instantiation), on SIMDEV with soft placement off, and reads back
the graph TF ran after Grappler (graphutil.collect), with
SIMDEV_GRAPH_PASSES=elementwise (the pass under test alone). The tests then check:

- the fused node: on SIMDEV, named as the tree's root (the node the
  passes-off graph computes the result with), its program's ops are exactly
  the table ops that left the graph, inputs deduplicated, T right; results
  equal the passes-off run bit for bit and TF's CPU run within rounding;
- control inputs of absorbed nodes move to the fused node (the assignment
  they order still happens once per call);
- boundaries: an intermediate with two consumers stays a node and feeds two
  fused trees; a preserved intermediate (simdev_graph_opt --preserve) stays
  a node and splits the tree; nodes placed on the CPU are untouched; half
  and integer chains and gradient ops (TanhGrad) are left alone;
- every row of src/arith/ewops.h (ewtable.ROWS), float and double, in a
  chain OP(x * w [, y]) * z: a unary or binary row's op is fused, with the
  chain, into one node whose program is the chain's and no node of the op
  is left, results equal passes off bit for bit; a gradient row's op and
  its neighbours stay nodes (the pass leaves gradient ops alone, is_grad);
- limits: a chain of 140 ops over 21 inputs and a right-deep expression are
  cut into trees within the kernel's limits (ops, inputs, stack), no op lost;
- idempotence: the optimized graphs fed to simdev_graph_opt come back
  unchanged (0 rewrites, same bytes), the passes-off ones change once;
- training: Keras 3 Adam and SGD with momentum on the MLP of
  examples/training.py: losses with the pass on equal those with it off bit
  for bit and TF CPU's within tolerance, and every float op of the Adam
  update is fused (72 nodes fewer per step on TF 2.21).
"""
import pytest

# TABLE: {op name: arity}, the fusable-op table (src/arith/ewops.h's rows,
# which ewprog.c's table is built from)
from ewtable import ROWS, TABLE
from graphutil import IMPORT

LIMIT_OPS, LIMIT_INPUTS, LIMIT_STACK = 64, 16, 16  # ewprog.h

# The rows of ewops.h the pass fuses (unary U, binary B) and the gradient
# rows it leaves alone (fuse_elementwise.c's is_grad: TF's gradient kernels
# require equal shapes, the fused kernel broadcasts), although ewprog.c's
# table, and so the fused kernel, has them too.
FUSED_ROWS = [r for r in ROWS if r.kind in "UB"]
GRAD_ROWS = [r for r in ROWS if r.kind == "G"]
ROW_DTYPES = ("float32", "float64")

SCRIPT = IMPORT + (f"TABLE = {sorted(TABLE)!r}\n"
                   f"KINDS = {dict((r.name, r.kind) for r in ROWS)!r}\n"
                   f"ROW_DTYPES = {ROW_DTYPES!r}\n") + r'''
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(graphutil.__file__), "..", "..", "examples"))
import numpy as np
tf.config.set_soft_device_placement(False)
D, CPU = "/device:SIMDEV:0", "/device:CPU:0"
FUSED = "_SimdevFusedElementwise"
rng = np.random.default_rng(11)

def summary(graphs):
    fused = [{"name": n.name, "device": n.device, "inputs": list(n.input),
              "program": graphutil.attr(n, "program"),
              "N": graphutil.attr(n, "N"), "T": graphutil.attr(n, "T")}
             for n in graphutil.nodes(graphs, op=FUSED)]
    nodes = {n.name: [n.op, n.device, list(n.input)]
             for n in graphutil.nodes(graphs)}
    return {"fused": fused, "nodes": nodes,
            "table_ops": sorted(n.op for n in graphutil.nodes(graphs)
                                if n.op in TABLE)}

def as_np(r):
    return [t.numpy() for t in (r if isinstance(r, (tuple, list)) else (r,))]

def both(body, arrays, dtype, cpu=True):
    """body's tf.function with the plugin's passes off and on (fresh
    functions), and (cpu) on TF's CPU: graphs, bit equality, closeness,
    whether the results are finite."""
    out = {}
    runs = (("off", False, D), ("on", True, D)) + ((("cpu", True, CPU),) if cpu else ())
    for name, on, dev in runs:
        graphutil.plugin_optimizers(on)
        with tf.device(dev):
            args = [tf.constant(a, dtype=dtype) for a in arrays]
        f = tf.function(body)
        with tf.device(dev):
            out[name] = graphutil.collect(f, *args)
    graphutil.plugin_optimizers(True)
    off, on = (as_np(out[k].result) for k in ("off", "on"))
    res = out["on"].result
    res = res if isinstance(res, (tuple, list)) else (res,)
    r = {"off": summary(out["off"].post), "on": summary(out["on"].post),
         "equal": [raw_equal(a, b)["equal"] for a, b in zip(off, on)],
         "finite": [bool(np.isfinite(a).all()) for a in on],
         "devices": [t.device for t in res]}
    if cpu:
        r["close_cpu"] = [bool(np.allclose(a.astype(np.float64), b.astype(np.float64),
                                           rtol=1e-5, atol=1e-6, equal_nan=True))
                          for a, b in zip(on, as_np(out["cpu"].result))]
        r["graph_on"] = out["on"].post[0].SerializeToString().hex()
        r["graph_off"] = out["off"].post[0].SerializeToString().hex()
    return r

def arr(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape)

def chain(x, y, z):
    return tf.sqrt(tf.abs(x * y - z)) + tf.exp(-x)

for dt in ("float32", "float64"):
    @check("chain_" + dt)
    def _():
        return both(chain, [arr(4, 33), arr(4, 33), arr(33)], dt)

@check("control")
def _():
    with tf.device(D):
        v = tf.Variable(0.0)
    def ctl(x, y):
        inc = v.assign_add(1.0)
        with tf.control_dependencies([inc]):
            a = x * y
        return tf.tanh(a) + y
    r = both(ctl, [arr(8), arr(8)], "float32")
    r["counter"] = float(v.numpy())
    return r

@check("two_consumers")
def _():
    def two(x, y):
        a = x * y
        return tf.exp(a) + y, tf.sqrt(tf.abs(a)) * x
    return both(two, [arr(16), arr(16)], "float32")

@check("on_cpu")
def _():
    def oncpu(x, y, z):
        with tf.device(CPU):
            b = tf.exp(x * y)
        return tf.abs(b) + z
    return both(oncpu, [arr(16), arr(16), arr(16)], "float32")

@check("half")
def _():
    return both(chain, [arr(4, 8), arr(4, 8), arr(8)], "float16")

@check("int")
def _():
    def ichain(x, y, z):
        return tf.abs(x * y - z) + x
    out = {}
    for dt in ("int32", "int64"):
        a = [rng.integers(-50, 50, size=(16,)) for _ in range(3)]
        try:
            out[dt] = both(ichain, a, dt)
        except tf.errors.InvalidArgumentError as e:   # no SIMDEV kernel
            out[dt] = {"placement_error": str(e).splitlines()[0][:300]}
    return out

@check("grad")
def _():
    def g(x, y):
        return tf.raw_ops.TanhGrad(y=tf.tanh(x), dy=x * y)
    return both(g, [arr(16), arr(16)], "float32")

# ---- every row of ewops.h inside a chain --------------------------------------
# Unary:  OP(x * w) * z;  binary and gradient:  OP(x * w, y) * z, all four
# operands arguments: with constants Grappler rewrites such chains before
# the pass sees them (x * 2 * 3 folds to x * 6, (x - y) + 1 becomes
# x + (1 - y), (x + y) + 1 an AddN, -x + 1 a Sub), so the case would no
# longer hold the op it is about. w is 2 and x is fed halved (exact), so
# that OP meets the operand its domain wants.
import zlib
from tensorflow.python.framework import op_def_registry

def table_op(op, *ts):
    names = [a.name for a in op_def_registry.get(op).input_arg]
    return getattr(tf.raw_ops, op)(**dict(zip(names, ts)))

def row_arrays(op, dt, shape=(5, 7)):
    # operands in the op's domain (as op_inputs of
    # test_kernels_fused_elementwise.py): finite results. A generator per
    # case: the other cases' data stay what they were.
    g = np.random.default_rng(zlib.crc32(f"row:{op}:{dt}".encode()))
    u = lambda lo, hi: g.uniform(lo, hi, shape)
    away = lambda: np.where(g.uniform(size=shape) < 0.5, -1, 1) * u(0.25, 4)
    x = {"Sqrt": lambda: u(0.05, 8), "Rsqrt": lambda: u(0.05, 8),
         "Log": lambda: u(0.05, 8), "Log1p": lambda: u(-0.9, 4),
         "Reciprocal": away, "Relu6": lambda: u(-2, 8),
         "Softplus": lambda: u(-20, 20), "Pow": lambda: u(0.1, 3),
         "Round": lambda: np.round(g.uniform(-8, 8, shape) * 2) / 2,  # ties
         "TanhGrad": lambda: u(-0.99, 0.99), "SigmoidGrad": lambda: u(0.01, 0.99),
         "SqrtGrad": lambda: u(0.1, 3), "RsqrtGrad": lambda: u(0.1, 3),
         }.get(op, lambda: u(-4, 4))()
    w, z = np.full(shape, 2.0), u(0.5, 1.5)
    if KINDS[op] == "U":
        return [x / 2, w, z]
    y = {"RealDiv": away,
         "DivNoNan": lambda: np.where(g.uniform(size=shape) < 0.2, 0.0, u(-2, 2)),
         "Relu6Grad": lambda: u(-2, 8),
         "EluGrad": lambda: u(-0.9, 2), "SeluGrad": lambda: u(-1.7, 2),
         }.get(op, lambda: u(-2, 2))()
    return [x / 2, w, y, z]

for op in sorted(KINDS):
    for dt in ROW_DTYPES:
        def run_row(op=op, dt=dt):
            if KINDS[op] == "U":
                body = lambda x, w, z: table_op(op, x * w) * z
            else:
                body = lambda x, w, y, z: table_op(op, x * w, y) * z
            return both(body, row_arrays(op, dt), dt, cpu=False)
        check(f"row:{op}:{dt}")(run_row)

@check("long")
def _():
    def long(x, *ws):
        for i in range(70):
            x = tf.tanh(x * ws[i % 20])
        return x
    return both(long, [arr(64)] + [arr(64, lo=0.5, hi=1.5) for _ in range(20)],
                "float32")

@check("deep")
def _():
    def deep(*xs):
        e = xs[-1]
        for k in reversed(range(len(xs) - 1)):
            e = xs[k] - tf.abs(e)
        return e
    return both(deep, [arr(32) for _ in range(20)], "float32")

@check("preserve")
def _():
    # The passes-off graph of chain, through simdev_graph_opt with the
    # intermediate Sub in the preserve list.
    graphutil.plugin_optimizers(False)
    with tf.device(D):
        args = [tf.constant(a, tf.float32) for a in (arr(4), arr(4), arr(4))]
        c = graphutil.collect(tf.function(chain), *args)
    graphutil.plugin_optimizers(True)
    g = c.post[0]
    sub = [n.name for n in g.node if n.op == "Sub"]
    from tensorflow.core.framework import graph_pb2
    out, info = graphutil.optimize_bytes(g, preserve=sub, passes="elementwise")
    g2 = graph_pb2.GraphDef.FromString(out)
    plain, pinfo = graphutil.optimize_bytes(g, passes="elementwise")
    return {"sub": sub, "info": info, "plain_info": pinfo,
            "after": summary(g2)}

@check("tool")
def _():
    from tensorflow.core.framework import graph_pb2
    r = both(chain, [arr(4, 5), arr(4, 5), arr(5)], "float32")
    on = bytes.fromhex(r["graph_on"]); off = bytes.fromhex(r["graph_off"])
    out_on, info_on = graphutil.optimize_bytes(on, passes="elementwise")
    out_off, info_off = graphutil.optimize_bytes(off, passes="elementwise")
    again, info_again = graphutil.optimize_bytes(out_off, passes="elementwise")
    return {"on": info_on, "on_same": out_on == on,
            "off": info_off, "off_changed": out_off != off,
            "again": info_again, "again_same": again == out_off}

import training, keras

def train(opt_name, dev, on, steps=4):
    graphutil.plugin_optimizers(on)
    with tf.device(dev):
        model = training.build_model("mlp")
        opt = (keras.optimizers.Adam(1e-3) if opt_name == "adam" else
               keras.optimizers.SGD(0.05, momentum=0.9))
        opt.build(model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        xs, ys = training.synthetic_data("mlp", steps)
        batches = [(tf.constant(x), tf.constant(y)) for x, y in zip(xs, ys)]
        c = graphutil.collect(step, *batches[0])
        losses = [float(c.result)] + [float(step(*b)) for b in batches[1:]]
    graphutil.plugin_optimizers(True)
    return c.post, losses

for opt_name in ("adam", "sgdm"):
    @check("mlp_" + opt_name)
    def _():
        off, l_off = train(opt_name, D, False)
        on, l_on = train(opt_name, D, True)
        _, l_cpu = train(opt_name, CPU, True)
        from tensorflow.core.framework import types_pb2
        left = [n.name + ":" + n.op for n in graphutil.nodes(on, device="SIMDEV")
                if n.op in TABLE and n.name.startswith(("adam/", "sgd/"))
                and n.attr["T"].type in (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE)]
        out, info = graphutil.optimize_bytes(on[0], passes="elementwise")
        return {"losses_off": [x.hex() for x in l_off],
                "losses_on": [x.hex() for x in l_on],
                "losses_cpu": l_cpu, "losses": l_on,
                "nodes_off": sum(len(g.node) for g in off),
                "nodes_on": sum(len(g.node) for g in on),
                "fused_on_simdev": len(graphutil.nodes(on, op=FUSED, device="SIMDEV")),
                "fused": len(graphutil.nodes(on, op=FUSED)),
                "unfused_update_ops": left,
                "tool_again": info, "tool_same": out == on[0].SerializeToString()}
'''


@pytest.fixture(scope="module")
def ew(run_tf):
    # The pass under test alone: remap would also shrink the MLP step
    # (MatMul + BiasAdd + act) and the node counts below are this pass's.
    return run_tf(SCRIPT, env={"SIMDEV_GRAPH_PASSES": "elementwise"}, timeout=240)


def prog_ops(program):
    return sorted(t for t in program.split(" ") if not t.startswith("$"))


def prog_inputs(program):
    return sorted({int(t[1:]) for t in program.split(" ") if t.startswith("$")})


def prog_depth(program):
    depth = peak = 0
    for t in program.split(" "):
        depth = depth + 1 if t.startswith("$") else depth - TABLE[t] + 1
        peak = max(peak, depth)
    return peak


def expected_program(nodes, root):
    """The program the pass must write for the tree at `root` of a graph
    whose table ops all have one consumer (the chain case): operands in
    input order, leaves numbered by first use ("x" and "x:0" alike)."""
    leaves, out = [], []

    def walk(name):
        op, _, inputs = nodes[name]
        for i in inputs:
            if i.startswith("^"):
                continue
            src = i[:-2] if i.endswith(":0") else i
            if src in nodes and nodes[src][0] in TABLE:
                walk(src)
                continue
            if src not in leaves:
                leaves.append(src)
            out.append(f"${leaves.index(src)}")
        out.append(op)

    walk(root)
    return " ".join(out)


def data_inputs(node):
    return [i for i in node["inputs"] if not i.startswith("^")]


def lost_ops(r):
    """Table ops of the passes-off graph that the passes-on graph lacks."""
    left = list(r["on"]["table_ops"])
    lost = []
    for op in r["off"]["table_ops"]:
        if op in left:
            left.remove(op)
        else:
            lost.append(op)
    return sorted(lost)


def assert_results(r):
    assert all(r["equal"]), r["equal"]          # bit for bit vs passes off
    assert all(r["close_cpu"]), r["close_cpu"]  # TF CPU within rounding
    assert all("SIMDEV" in d for d in r["devices"]), r["devices"]


def assert_fused_well_formed(r):
    """Every fused node: on SIMDEV, N = distinct data inputs, all used."""
    for f in r["on"]["fused"]:
        assert "SIMDEV" in f["device"], f
        ins = data_inputs(f)
        assert f["N"] == len(ins) == len(set(ins)), f
        assert prog_inputs(f["program"]) == list(range(f["N"])), f


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_chain_becomes_one_fused_node(ew, dt):
    r = ew.data("chain_" + dt)
    assert_results(r)
    assert r["off"]["fused"] == []
    (f,) = r["on"]["fused"]
    assert f["T"] == {"float32": "DT_FLOAT", "float64": "DT_DOUBLE"}[dt]
    assert f["program"] == expected_program(r["off"]["nodes"], f["name"]), f
    assert prog_ops(f["program"]) == lost_ops(r)
    assert r["on"]["table_ops"] == []
    # named as the root: the passes-off graph's AddV2 on SIMDEV
    roots = [k for k, (op, dev, _) in r["off"]["nodes"].items()
             if op == "AddV2" and "SIMDEV" in dev]
    assert [f["name"]] == roots
    # x, y, z once each, x deduplicated although it feeds two ops
    assert len(data_inputs(f)) == 3 and f["N"] == 3
    assert_fused_well_formed(r)


def test_control_inputs_move_to_the_fused_node(ew):
    r = ew.data("control")
    assert_results(r)
    (f,) = r["on"]["fused"]
    assert prog_ops(f["program"]) == ["AddV2", "Mul", "Tanh"], f
    off_mul = [v for v in r["off"]["nodes"].values() if v[0] == "Mul"]
    (mul,) = off_mul
    ctrl = [i for i in mul[2] if i.startswith("^")]
    assert ctrl, mul  # the case needs a control input on an absorbed node
    assert set(ctrl) <= set(f["inputs"]), (ctrl, f["inputs"])
    # once per call: passes off, on, and the CPU run (whose assign_add runs
    # with the variable, on SIMDEV)
    assert r["counter"] == 3.0
    assert_fused_well_formed(r)


def test_two_consumers_make_a_boundary(ew):
    r = ew.data("two_consumers")
    assert_results(r)
    muls_off = {k for k, v in r["off"]["nodes"].items()
                if v[0] == "Mul" and r["off"]["nodes"][k][2][0].startswith(("x", "y"))}
    fused = r["on"]["fused"]
    assert sorted(prog_ops(f["program"]) for f in fused) == [
        ["Abs", "Mul", "Sqrt"], ["AddV2", "Exp"]], fused
    # the shared product stays a Mul node and feeds both trees
    (a,) = [k for k in muls_off if k not in {f["name"] for f in fused}]
    assert r["on"]["nodes"][a][0] == "Mul"
    assert all(a in data_inputs(f) for f in fused), (a, fused)
    assert_fused_well_formed(r)


def test_cpu_nodes_untouched(ew):
    r = ew.data("on_cpu")
    assert_results(r)
    cpu_off = {k: v[0] for k, v in r["off"]["nodes"].items()
               if "CPU" in v[1] and v[0] in TABLE}
    assert sorted(cpu_off.values()) == ["Exp", "Mul"], cpu_off
    for k, op in cpu_off.items():
        assert r["on"]["nodes"][k][0] == op
        assert r["on"]["nodes"][k][1] == r["off"]["nodes"][k][1]
    (f,) = r["on"]["fused"]
    assert prog_ops(f["program"]) == ["Abs", "AddV2"], f
    assert_fused_well_formed(r)


def test_half_is_left_alone(ew):
    r = ew.data("half")
    assert_results(r)
    assert r["on"]["fused"] == []
    assert r["on"]["table_ops"] == r["off"]["table_ops"]
    assert len(r["off"]["table_ops"]) == 7
    assert all("SIMDEV" in v[1] for k, v in r["on"]["nodes"].items()
               if v[0] in TABLE)


def test_integers_are_left_alone(ew):
    d = ew.data("int")
    ran = 0
    for dt, r in d.items():
        if "placement_error" in r:  # no SIMDEV kernel: nothing to fuse
            continue
        ran += 1
        assert all(r["equal"]), (dt, r["equal"])
        assert r["on"]["fused"] == [], dt
        assert r["on"]["table_ops"] == r["off"]["table_ops"], dt
        assert len(r["off"]["table_ops"]) == 4, (dt, r["off"]["table_ops"])
    assert ran >= 1, d  # int64 has SIMDEV kernels


def test_gradient_ops_are_left_alone(ew):
    r = ew.data("grad")
    assert_results(r)
    assert r["on"]["fused"] == []
    assert r["on"]["table_ops"] == r["off"]["table_ops"] == ["Mul", "Tanh",
                                                             "TanhGrad"]


@pytest.mark.parametrize("dt", ROW_DTYPES)
@pytest.mark.parametrize("row", FUSED_ROWS, ids=[r.name for r in FUSED_ROWS])
def test_every_fusable_row_is_fused(ew, row, dt):
    """OP(x * w [, y]) * z for each unary and binary row: one fused node
    runs the whole chain, OP included, and no unfused OP is left. Bit for
    bit: the kernel evaluates each op with the unfused kernel's scalar
    function, in T (fuse_elementwise.c, "Why this is safe")."""
    r = ew.data(f"row:{row.name}:{dt}")
    assert all(r["equal"]), r["equal"]  # bit for bit vs passes off
    assert all(r["finite"]), r["finite"]  # inputs in the op's domain
    assert all("SIMDEV" in d for d in r["devices"]), r["devices"]
    # the case is what it says: Grappler kept the chain, OP on SIMDEV
    assert r["off"]["table_ops"] == sorted(["Mul", row.name, "Mul"]), r["off"]
    assert any(op == row.name and "SIMDEV" in dev
               for op, dev, _ in r["off"]["nodes"].values()), r["off"]["nodes"]
    assert r["off"]["fused"] == []
    # one fused node, and it runs OP
    assert [row.name in prog_ops(f["program"]) for f in r["on"]["fused"]] == [True], (
        f"{row.name} is not fused with its chain", r["on"]["fused"], r["on"]["table_ops"])
    (f,) = r["on"]["fused"]
    assert f["program"] == expected_program(r["off"]["nodes"], f["name"]), f
    assert prog_ops(f["program"]) == lost_ops(r)
    assert r["on"]["table_ops"] == [], r["on"]["table_ops"]  # no OP unfused
    assert not any(op == row.name for op, _, _ in r["on"]["nodes"].values())
    assert f["T"] == {"float32": "DT_FLOAT", "float64": "DT_DOUBLE"}[dt]
    assert_fused_well_formed(r)


@pytest.mark.parametrize("dt", ROW_DTYPES)
@pytest.mark.parametrize("row", GRAD_ROWS, ids=[r.name for r in GRAD_ROWS])
def test_every_gradient_row_is_left_alone(ew, row, dt):
    """OP(x * w, y) * z for each gradient row: the pass leaves the gradient
    op alone (is_grad), so the two Muls around it are single ops and
    nothing is fused."""
    r = ew.data(f"row:{row.name}:{dt}")
    assert all(r["equal"]), r["equal"]
    assert all(r["finite"]), r["finite"]
    assert all("SIMDEV" in d for d in r["devices"]), r["devices"]
    assert r["on"]["fused"] == [], r["on"]["fused"]
    assert r["on"]["table_ops"] == r["off"]["table_ops"] == sorted(
        ["Mul", row.name, "Mul"]), (r["off"]["table_ops"], r["on"]["table_ops"])


@pytest.mark.parametrize("case", ["long", "deep"])
def test_limits_cut_trees(ew, case):
    r = ew.data(case)
    assert_results(r)
    fused = r["on"]["fused"]
    assert len(fused) >= 2, fused
    for f in fused:
        assert len(prog_ops(f["program"])) <= LIMIT_OPS, f
        assert f["N"] <= LIMIT_INPUTS, f
        assert prog_depth(f["program"]) <= LIMIT_STACK, f
    # no op lost or invented: what left the graph is what the programs run
    assert sorted(op for f in fused for op in prog_ops(f["program"])) == lost_ops(r)
    assert len(lost_ops(r)) >= len(r["off"]["table_ops"]) - 1
    assert_fused_well_formed(r)


def test_preserved_intermediate_stays_a_node(ew):
    d = ew.data("preserve")
    (sub,) = d["sub"]
    nodes = d["after"]["nodes"]
    assert d["plain_info"]["rewrites"] == 1  # unpreserved: one tree
    assert d["info"]["rewrites"] == 2
    assert sub in nodes  # a node of its own (the root of its own tree)
    fused = {f["name"]: f for f in d["after"]["fused"]}
    assert prog_ops(fused[sub]["program"]) == ["Mul", "Sub"]
    (root,) = [f for n, f in fused.items() if n != sub]
    assert prog_ops(root["program"]) == ["Abs", "AddV2", "Exp", "Neg", "Sqrt"]
    assert sub in data_inputs(root)


def test_tool_idempotence(ew):
    d = ew.data("tool")
    assert d["on"]["rewrites"] == 0 and d["on_same"], d
    assert d["off"]["rewrites"] == 1 and d["off_changed"], d
    assert d["again"]["rewrites"] == 0 and d["again_same"], d


@pytest.mark.parametrize("opt", ["adam", "sgdm"])
def test_mlp_training_losses_on_equal_off(ew, opt):
    d = ew.data("mlp_" + opt)
    assert d["losses_on"] == d["losses_off"], d  # bit for bit
    for a, b in zip(d["losses"], d["losses_cpu"]):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(b)), (d["losses"], d["losses_cpu"])
    assert d["fused"] == d["fused_on_simdev"] >= 6  # at least one per variable
    assert d["unfused_update_ops"] == [], d["unfused_update_ops"]
    assert d["tool_again"]["rewrites"] == 0 and d["tool_same"]
    if opt == "adam":
        # TF 2.21 + Keras 3: 24 fused nodes replace 96 (per step)
        assert d["nodes_off"] - d["nodes_on"] == 72, d
        assert d["fused"] == 24
    else:
        assert d["nodes_off"] - d["nodes_on"] == 12, d


def test_clean_exit(ew):
    ew.assert_clean_exit()
