"""Passes `remap` and `fold_pad` (src/graph/remap.c, src/graph/fold_pad.c).

Each pattern is a tf.function on SIMDEV. One child runs them all with the
passes on (the default) and reads TF's optimized graphs back (graphutil);
a second child runs the same functions with SIMDEV_GRAPH_PASSES=none. A
pattern passes when its optimized graph holds the fused node on SIMDEV and
none of the nodes it absorbed, and its result equals the passes-off run and
TF CPU's. Negative cases (a consumer too many, a preserved node, a node on
the CPU, a dtype the fused kernels lack, an unknown activation, a Pad the
convolution cannot absorb) must come out with the original nodes.
Idempotence: the passes run twice on a GraphDef TF produced (the tool from
src/graph, through graphutil) leave it unchanged the second time.
"""
import json

import numpy as np
import pytest

# The cases, shared by both children. Each builds (fn, args) under SIMDEV; the
# child reports the ops of the optimized graph and the result.
CASES = r'''
import os, sys
import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

def optimized_graphs(fn, *args):
    """(post-optimization GraphDefs of fn's call, its result)."""
    ctx = context.context()
    ctx.enable_graph_collection()
    try:
        out = fn(*args)
        md = ctx.export_run_metadata()
    finally:
        ctx.disable_graph_collection()
    return [g.post_optimization_graph for g in md.function_graphs], out

def _attr(v):
    kind = v.WhichOneof("value")
    if kind == "list":
        l = v.list
        return (list(l.i) or list(l.type) or [s.decode() for s in l.s]
                or list(l.f) or [])
    if kind == "s":
        return v.s.decode()
    if kind in ("i", "f", "b", "type"):
        return getattr(v, kind)
    return kind

def node_summary(graphs):
    """Every node of the graphs: name, op, device, attrs (plain values)."""
    out = []
    for g in graphs:
        for n in g.node:
            attrs = {k: _attr(v) for k, v in n.attr.items() if k != "value"}
            out.append({"name": n.name, "op": n.op, "device": n.device,
                        "inputs": list(n.input), "attrs": attrs,
                        "fused_ops": attrs.get("fused_ops")})
    return out

D = "/device:SIMDEV:0"
rng = np.random.default_rng(14)

def arr(shape, dtype="float32", scale=1.0):
    return tf.constant((rng.standard_normal(shape) * scale).astype(dtype))

ACTS = {
    "": None,
    "Relu": tf.nn.relu,
    "Relu6": tf.nn.relu6,
    "Elu": tf.nn.elu,
    "LeakyRelu": lambda x: tf.nn.leaky_relu(x, alpha=0.3),
    "Tanh": tf.math.tanh,
    "Sigmoid": tf.math.sigmoid,
    "Softplus": tf.math.softplus,  # not fusable
}

def with_act(y, act):
    return y if not act else ACTS[act](y)

def conv_case(act, dtype="float32", padding="SAME", strides=1):
    x, w, b = arr([2, 9, 9, 3], dtype), arr([3, 3, 3, 5], dtype), arr([5], dtype)
    def f(x, w, b):
        return with_act(tf.nn.bias_add(tf.nn.conv2d(x, w, strides, padding), b), act)
    return f, (x, w, b)

def matmul_case(act, dtype="float32", ta=False, tb=False):
    a = arr([6, 7] if not ta else [7, 6], dtype)
    w = arr([7, 4] if not tb else [4, 7], dtype)
    b = arr([4], dtype)
    def f(a, w, b):
        return with_act(tf.nn.bias_add(
            tf.linalg.matmul(a, w, transpose_a=ta, transpose_b=tb), b), act)
    return f, (a, w, b)

def depthwise_case(act, dtype="float32", strides=1):
    x, w, b = arr([2, 9, 9, 3], dtype), arr([3, 3, 3, 2], dtype), arr([6], dtype)
    def f(x, w, b):
        return with_act(tf.nn.bias_add(tf.nn.depthwise_conv2d(
            x, w, [1, strides, strides, 1], "SAME"), b), act)
    return f, (x, w, b)

def pad_conv_case(pads, conv="conv", padding="VALID", act=None, v2=None):
    x = arr([2, 9, 9, 3])
    w = arr([3, 3, 3, 4] if conv == "conv" else [3, 3, 3, 2])
    b = arr([4 if conv == "conv" else 6])
    def f(x, w, b):
        if v2 is None:
            p = tf.pad(x, pads)
        else:
            p = tf.raw_ops.PadV2(input=x, paddings=tf.constant(pads),
                                 constant_values=tf.constant(v2))
        if conv == "conv":
            y = tf.nn.conv2d(p, w, 2, padding)
        else:
            y = tf.nn.depthwise_conv2d(p, w, [1, 2, 2, 1], padding)
        return with_act(tf.nn.bias_add(y, b), act) if act is not None else y
    return f, (x, w, b)

def two_consumers_bias():
    x, w, b = arr([2, 9, 9, 3]), arr([3, 3, 3, 5]), arr([5])
    def f(x, w, b):
        y = tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b)
        return tf.nn.relu(y) + y * 2.0
    return f, (x, w, b)

def two_consumers_conv():
    x, w, b = arr([2, 9, 9, 3]), arr([3, 3, 3, 5]), arr([5])
    def f(x, w, b):
        c = tf.nn.conv2d(x, w, 1, "SAME")
        return tf.nn.relu(tf.nn.bias_add(c, b)) - c
    return f, (x, w, b)

def on_cpu_bias():
    x, w, b = arr([2, 9, 9, 3]), arr([3, 3, 3, 5]), arr([5])
    def f(x, w, b):
        c = tf.nn.conv2d(x, w, 1, "SAME")
        with tf.device("/device:CPU:0"):
            y = tf.nn.relu(tf.nn.bias_add(c, b))
        return y
    return f, (x, w, b)

CASES = {}
for act in ["", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"]:
    CASES[f"conv_{act or 'bias'}"] = conv_case(act)
    CASES[f"matmul_{act or 'bias'}"] = matmul_case(act)
    CASES[f"depthwise_{act or 'bias'}"] = depthwise_case(act)
CASES["conv_Relu_double"] = conv_case("Relu", "float64")
CASES["conv_Elu_valid_s2"] = conv_case("Elu", padding="VALID", strides=2)
CASES["depthwise_Relu6_double"] = depthwise_case("Relu6", "float64")
CASES["matmul_Relu_tt"] = matmul_case("Relu", ta=True, tb=True)
# negatives
CASES["neg_bias_two_consumers"] = two_consumers_bias()
CASES["neg_conv_two_consumers"] = two_consumers_conv()
CASES["neg_on_cpu"] = on_cpu_bias()
CASES["neg_half"] = matmul_case("Relu", "float16")
CASES["neg_softplus"] = conv_case("Softplus")
CASES["neg_matmul_double"] = matmul_case("Relu", "float64")
# fold_pad
HW = [[0, 0], [1, 2], [2, 1], [0, 0]]
CASES["pad_conv"] = pad_conv_case(HW)
CASES["pad_depthwise"] = pad_conv_case(HW, conv="depthwise")
CASES["pad_conv_bias_relu"] = pad_conv_case(HW, act="Relu")
CASES["pad_v2_zero"] = pad_conv_case(HW, v2=0.0)
CASES["neg_pad_v2_one"] = pad_conv_case(HW, v2=1.0)
CASES["neg_pad_batch"] = pad_conv_case([[1, 0], [1, 1], [1, 1], [0, 0]])
CASES["neg_pad_same"] = pad_conv_case(HW, padding="SAME")

def run_case(name):
    f, args = CASES[name]
    with tf.device(D):
        sim_fn = tf.function(f)
        graphs, out = optimized_graphs(sim_fn, *args)
    rep = {"result": np.asarray(out).astype("float64").tolist(),
           "device": out.device, "nodes": node_summary(graphs)}
    return rep

def cpu_result(name):
    f, args = CASES[name]
    with tf.device("/device:CPU:0"):
        out = tf.function(f)(*args)
    return np.asarray(out).astype("float64").tolist()
'''

SNIPPET = CASES + r'''
passes_on = os.environ.get("SIMDEV_GRAPH_PASSES") is None
for name in CASES:
    @check(name)
    def _():
        rep = run_case(name)
        if passes_on:
            rep["cpu"] = cpu_result(name)
        return rep
'''

POSITIVE = {
    # case: (fused op, fused_ops, nodes absorbed by it)
    **{f"conv_{a or 'bias'}": ("_FusedConv2D", ["BiasAdd"] + ([a] if a else []),
                               ["Conv2D"] + (["BiasAdd"] if a else []))
       for a in ["", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"]},
    **{f"matmul_{a or 'bias'}": ("_FusedMatMul", ["BiasAdd"] + ([a] if a else []),
                                 ["MatMul"] + (["BiasAdd"] if a else []))
       for a in ["", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"]},
    **{f"depthwise_{a or 'bias'}": ("_FusedDepthwiseConv2dNative",
                                    ["BiasAdd"] + ([a] if a else []),
                                    ["DepthwiseConv2dNative"] +
                                    (["BiasAdd"] if a else []))
       for a in ["", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"]},
    "conv_Relu_double": ("_FusedConv2D", ["BiasAdd", "Relu"], ["Conv2D", "BiasAdd"]),
    "conv_Elu_valid_s2": ("_FusedConv2D", ["BiasAdd", "Elu"], ["Conv2D", "BiasAdd"]),
    "depthwise_Relu6_double": ("_FusedDepthwiseConv2dNative", ["BiasAdd", "Relu6"],
                               ["DepthwiseConv2dNative", "BiasAdd"]),
    "matmul_Relu_tt": ("_FusedMatMul", ["BiasAdd", "Relu"], ["MatMul", "BiasAdd"]),
    "pad_conv_bias_relu": ("_FusedConv2D", ["BiasAdd", "Relu"],
                           ["Pad", "Conv2D", "BiasAdd"]),
}

FUSED = ("_FusedConv2D", "_FusedMatMul", "_FusedDepthwiseConv2dNative")


@pytest.fixture(scope="module")
def runs(run_tf):
    on = run_tf(SNIPPET, timeout=300)
    off = run_tf(SNIPPET, env={"SIMDEV_GRAPH_PASSES": "none"}, timeout=300)
    return on, off


def ops_on(nodes, device="SIMDEV"):
    return [n["op"] for n in nodes if device in n["device"]]


def assert_same_results(on, off, name, rtol=1e-5, atol=1e-6):
    d_on, d_off = on.data(name), off.data(name)
    got, off_res, cpu = (np.array(d_on["result"]), np.array(d_off["result"]),
                         np.array(d_on["cpu"]))
    assert "SIMDEV" in d_on["device"], d_on["device"]
    np.testing.assert_allclose(got, off_res, rtol=rtol, atol=atol,
                               err_msg=f"{name}: passes on != passes off")
    np.testing.assert_allclose(got, cpu, rtol=10 * rtol, atol=10 * atol,
                               err_msg=f"{name}: SIMDEV (passes on) != TF CPU")


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_fused(runs, name):
    on, off = runs
    op, fused_ops, absorbed = POSITIVE[name]
    nodes = on.data(name)["nodes"]
    fused = [n for n in nodes if n["op"] == op]
    assert len(fused) == 1, f"{name}: expected one {op}: {nodes}"
    assert "SIMDEV" in fused[0]["device"], fused[0]
    assert fused[0]["fused_ops"] == fused_ops, fused[0]
    sim_ops = ops_on(nodes)
    for a in absorbed:
        assert a not in sim_ops, f"{name}: {a} left next to {op}: {nodes}"
    if len(fused_ops) > 1:
        assert fused_ops[1] not in sim_ops, f"{name}: activation left: {nodes}"
    # the passes-off run kept the original nodes
    off_ops = ops_on(off.data(name)["nodes"])
    assert op not in off_ops and absorbed[-1] in off_ops, off_ops
    assert_same_results(on, off, name)


def test_fused_attrs(runs):
    """The NodeDef the pass writes carries TF's remapper's attributes."""
    on, _ = runs
    n = [n for n in on.data("conv_LeakyRelu")["nodes"] if n["op"] == "_FusedConv2D"][0]
    a = n["attrs"]
    assert a["T"] == 1 and a["TArgs"] == [1] and a["num_args"] == 1, a
    assert a["num_host_args"] == 0 and a["epsilon"] == 0.0, a
    assert abs(a["leakyrelu_alpha"] - 0.3) < 1e-7, a
    assert a["strides"] == [1, 1, 1, 1] and a["padding"] == "SAME", a
    assert a["data_format"] == "NHWC" and a["dilations"] == [1, 1, 1, 1], a
    assert "alpha" not in a, a
    m = [n for n in on.data("matmul_Relu_tt")["nodes"] if n["op"] == "_FusedMatMul"][0]
    assert m["attrs"]["transpose_a"] is True and m["attrs"]["transpose_b"] is True, m
    assert "data_format" not in m["attrs"], m
    d = [n for n in on.data("depthwise_Relu6_double")["nodes"]
         if n["op"] == "_FusedDepthwiseConv2dNative"][0]
    assert d["attrs"]["T"] == 2 and "explicit_paddings" not in d["attrs"], d


NEGATIVE = {
    # case: (ops that must stay on SIMDEV, ops that must not appear on SIMDEV)
    "neg_conv_two_consumers": (["Conv2D", "BiasAdd", "Relu"], list(FUSED)),
    "neg_on_cpu": (["Conv2D"], list(FUSED)),
    # half: SIMDEV has no half BiasAdd (it runs on the CPU), and no fused
    # kernel takes half; neg_matmul_double is the case on SIMDEV throughout
    "neg_half": (["MatMul", "Relu"], list(FUSED)),
    "neg_matmul_double": (["MatMul", "BiasAdd", "Relu"], list(FUSED)),
    "neg_pad_v2_one": (["PadV2", "Conv2D"], []),
    "neg_pad_batch": (["Pad", "Conv2D"], []),
    "neg_pad_same": (["Pad", "Conv2D"], []),
}


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_left_alone(runs, name):
    on, off = runs
    keep, absent = NEGATIVE[name]
    nodes = on.data(name)["nodes"]
    sim_ops = ops_on(nodes)
    for k in keep:
        assert k in sim_ops, f"{name}: {k} was rewritten: {nodes}"
    for a in absent:
        assert a not in sim_ops, f"{name}: {a} appeared: {nodes}"
    for n in nodes:
        if n["op"] == "Conv2D" and "SIMDEV" in n["device"]:
            assert n["attrs"].get("padding") != "EXPLICIT", n
    assert_same_results(on, off, name, rtol=1e-3 if name == "neg_half" else 1e-5,
                        atol=1e-3 if name == "neg_half" else 1e-6)


def test_two_consumers_bias(runs):
    """A BiasAdd read by Relu and by something else: Conv2D + BiasAdd fuse
    (the BiasAdd is the root, its name and both readers stay), the Relu
    cannot absorb it."""
    on, off = runs
    nodes = on.data("neg_bias_two_consumers")["nodes"]
    fused = [n for n in nodes if n["op"] == "_FusedConv2D"]
    assert len(fused) == 1 and fused[0]["fused_ops"] == ["BiasAdd"], nodes
    assert "Relu" in ops_on(nodes) and "BiasAdd" not in ops_on(nodes), nodes
    assert_same_results(on, off, "neg_bias_two_consumers")


def test_unknown_activation(runs):
    """Softplus is no fused activation: Conv2D + BiasAdd fuse, Softplus stays."""
    on, off = runs
    nodes = on.data("neg_softplus")["nodes"]
    fused = [n for n in nodes if n["op"] == "_FusedConv2D"]
    assert len(fused) == 1 and fused[0]["fused_ops"] == ["BiasAdd"], nodes
    assert "Softplus" in ops_on(nodes), nodes
    assert_same_results(on, off, "neg_softplus")


@pytest.mark.parametrize("name,conv", [("pad_conv", "Conv2D"),
                                       ("pad_depthwise", "DepthwiseConv2dNative"),
                                       ("pad_v2_zero", "Conv2D")])
def test_fold_pad(runs, name, conv):
    on, off = runs
    nodes = on.data(name)["nodes"]
    sim_ops = ops_on(nodes)
    assert "Pad" not in sim_ops and "PadV2" not in sim_ops, nodes
    c = [n for n in nodes if n["op"] == conv]
    assert len(c) == 1 and "SIMDEV" in c[0]["device"], nodes
    assert c[0]["attrs"]["padding"] == "EXPLICIT", c[0]
    assert c[0]["attrs"]["explicit_paddings"] == [0, 0, 1, 2, 2, 1, 0, 0], c[0]
    off_ops = ops_on(off.data(name)["nodes"])
    assert "Pad" in off_ops or "PadV2" in off_ops, off_ops
    assert_same_results(on, off, name)
