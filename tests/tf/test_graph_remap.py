"""Passes `remap` and `fold_pad` (src/graph/remap.c, src/graph/fold_pad.c).

Each pattern is a case under its own name scope; ONE child builds one
tf.function holding every case (a function per case would cost seconds of
tracing and optimizing each) and runs it three times: on the CPU (TF CPU's
results), on SIMDEV with the plugin's optimizer on, and on SIMDEV with it
off (graphutil.plugin_optimizers(False), fresh tf.function), reading TF's
optimized graphs back with graphutil. The child runs with
SIMDEV_GRAPH_PASSES=fold_pad,remap: the passes under test, without the
elementwise pass that would fold what the negative cases keep.

A pattern passes when its optimized graph holds the fused node on SIMDEV
and none of the nodes it absorbed, and its result equals the passes-off
run bit for bit and TF CPU's within rounding. Negative cases (a consumer
too many, a control edge from an intermediate, a node on the CPU, a dtype
the fused kernels lack, an unknown activation, a BiasAdd on another
dimension, a Pad the convolution cannot absorb) come out with the original
nodes; a TF1 Session fetching an intermediate, and simdev_graph_opt
--preserve, show the preserve list honoured. Idempotence: simdev_graph_opt
run twice on the GraphDef TF hands in leaves it unchanged the second time.
A Keras training step fuses and folds, with the passes-off losses.
"""
import numpy as np
import pytest

import graphutil

# The cases. Each builds (fn, args); all_cases puts them in one function; the
# child reports the ops of the optimized graph and the result.
CASES = r'''
import numpy as np

def node_summary(graphs):
    """Every node of the graphs: name, op, device, inputs, attrs (values)."""
    out = []
    for n in graphutil.nodes(graphs):
        attrs = {k: graphutil.attr(n, k) for k in n.attr if k != "value"}
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

def depthwise_nchw_case(act):
    """Depthwise conv + BiasAdd + act in NCHW (SIMDEV's kernels take NCHW);
    TF CPU has no NCHW depthwise: CPU_FN computes it in NHWC."""
    x, w, b = arr([2, 3, 9, 9]), arr([3, 3, 3, 2]), arr([6])
    def f(x, w, b):
        y = tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME", data_format="NCHW")
        return with_act(tf.nn.bias_add(y, b, data_format="NCHW"), act)
    def cpu(x, w, b):
        y = tf.nn.depthwise_conv2d(tf.transpose(x, [0, 2, 3, 1]), w, [1, 1, 1, 1], "SAME")
        return tf.transpose(with_act(tf.nn.bias_add(y, b), act), [0, 3, 1, 2])
    return f, (x, w, b), cpu

def bias_layout_case():
    """Conv2D (NHWC) + BiasAdd(NCHW): the bias goes on dimension 1, not the
    conv's channels: no fusion. TF CPU's own remapper fuses it anyway and
    adds the bias to the wrong dimension (docs/tf-cpu-divergences.md):
    CPU_FN adds it with a broadcast instead."""
    x, w, b = arr([2, 9, 9, 3]), arr([3, 3, 3, 5]), arr([9])
    def f(x, w, b):
        return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b,
                                         data_format="NCHW"))
    def cpu(x, w, b):
        return tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME") +
                          tf.reshape(b, [1, -1, 1, 1]))
    return f, (x, w, b), cpu

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

def control_source_conv():
    """The Conv2D is the source of a control edge (TF keeps it, on the
    Const of b * 2.0): never absorbed."""
    x, w, b = arr([2, 9, 9, 3]), arr([3, 3, 3, 5]), arr([5])
    def f(x, w, b):
        c = tf.nn.conv2d(x, w, 1, "SAME")
        with tf.control_dependencies([c]):
            b2 = b * 2.0
        return tf.nn.relu(tf.nn.bias_add(c, b)) + b2
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
CPU_FN = {}
_f, _a, CPU_FN["depthwise_Relu6_nchw"] = depthwise_nchw_case("Relu6")
CASES["depthwise_Relu6_nchw"] = (_f, _a)
_f, _a, CPU_FN["neg_bias_layout"] = bias_layout_case()
CASES["neg_bias_layout"] = (_f, _a)
# negatives
CASES["neg_bias_two_consumers"] = two_consumers_bias()
CASES["neg_conv_two_consumers"] = two_consumers_conv()
CASES["neg_conv_control"] = control_source_conv()
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
# TF CPU with oneDNN folds this Pad into its convolution and drops the batch
# padding (docs/tf-cpu-divergences.md): the CPU pads the batch by a concat.
CPU_FN["neg_pad_batch"] = lambda x, w, b: tf.nn.conv2d(
    tf.pad(tf.concat([tf.zeros_like(x[:1]), x], 0), [[0, 0], [1, 1], [1, 1], [0, 0]]),
    w, 2, "VALID")
CASES["neg_pad_same"] = pad_conv_case(HW, padding="SAME")

def all_cases(device):
    """Every case in ONE tf.function on `device` (a function per case costs
    a trace, an optimization and an instantiation each: seconds in all),
    each under its own name scope, so its nodes are "<case>/...". Returns
    the Collected (graphutil) of its first call."""
    names = list(CASES)
    flat = [a for n in names for a in CASES[n][1]]
    def f(*xs):
        outs, i = {}, 0
        for n in names:
            fn, args = CASES[n]
            if "CPU" in device:
                fn = CPU_FN.get(n, fn)
            with tf.name_scope(n):
                outs[n] = fn(*xs[i:i + len(args)])
            i += len(args)
        return outs
    with tf.device(device):
        return graphutil.collect(tf.function(f), *flat)

def report(c):
    """Per case: its result, the device it came from, its nodes."""
    nodes = node_summary(c.post)
    return {n: {"result": np.asarray(c.result[n]).astype("float64").tolist(),
                "device": c.result[n].device,
                "nodes": [d for d in nodes if d["name"].startswith(n + "/")]}
            for n in CASES}
'''

# One child: every case with the plugin's optimizer on, then again (fresh
# tf.functions) with it off (graphutil.plugin_optimizers: TF's
# use_plugin_optimizers, the same as SIMDEV_GRAPH_PASSES=none for these).
SNIPPET = graphutil.IMPORT + CASES + r'''
REPORT = {}

@check("cpu")
def _():
    REPORT["cpu"] = report(all_cases("/device:CPU:0"))
    return {}

@check("on")
def _():
    REPORT["on"] = report(all_cases(D))
    return {}

for name in CASES:
    @check(name)
    def _():
        return dict(REPORT["on"][name], cpu=REPORT["cpu"][name]["result"])

def session_graph(fetch_conv):
    """A TF1 Session (its graph optimized with item.fetch = the fetches,
    TF's preserve list) runs Conv2D + BiasAdd + Relu on SIMDEV, fetching the
    Relu and, if fetch_conv, the Conv2D too: the ops of the partition graph
    SIMDEV ran."""
    xv, wv, bv = (np.asarray(t) for t in CASES["conv_Relu"][1])
    with tf.Graph().as_default() as g:
        with tf.device(D):
            # placeholders: constants would be folded away before the pass
            x, w, b = (tf.compat.v1.placeholder(tf.float32, v.shape)
                       for v in (xv, wv, bv))
            c = tf.nn.conv2d(x, w, 1, "SAME", name="conv")
            y = tf.nn.relu(tf.nn.bias_add(c, b), name="act")
        md = tf.compat.v1.RunMetadata()
        opts = tf.compat.v1.RunOptions(output_partition_graphs=True)
        with tf.compat.v1.Session(graph=g) as s:
            out = s.run([y, c] if fetch_conv else [y], options=opts,
                        run_metadata=md, feed_dict={x: xv, w: wv, b: bv})
    nodes = node_summary(list(md.partition_graphs))
    return {"nodes": nodes, "result": np.asarray(out[0]).astype("float64").tolist()}

@check("session_fetch_relu")
def _():
    return session_graph(False)

@check("session_fetch_conv")
def _():
    return session_graph(True)

# A Keras training step: ZeroPadding2D + Conv2D(relu) + Dense(relu) + Dense.
import keras
keras.utils.set_random_seed(14)
with tf.device(D):
    MODEL = keras.Sequential([
        keras.Input((10, 10, 3)), keras.layers.ZeroPadding2D(1),
        keras.layers.Conv2D(4, 3, strides=2, activation="relu"),
        keras.layers.Flatten(), keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(3)])
    TX, TY = arr([4, 10, 10, 3]), arr([4, 3])
W0 = [v.numpy() for v in MODEL.trainable_variables]

def train_step():
    """Two SGD steps from the same weights, in a fresh tf.function: the
    losses, the weights after, the SIMDEV ops of the optimized graph."""
    for v, w in zip(MODEL.trainable_variables, W0):
        v.assign(w)
    opt = keras.optimizers.SGD(0.1)
    def step(x, y):
        with tf.GradientTape() as t:
            loss = tf.reduce_mean((MODEL(x, training=True) - y) ** 2)
        g = t.gradient(loss, MODEL.trainable_variables)
        opt.apply_gradients(zip(g, MODEL.trainable_variables))
        return loss
    with tf.device(D):
        fn = tf.function(step)
        c = graphutil.collect(fn, TX, TY)
        losses = [float(c.result), float(fn(TX, TY))]
    return {"losses": losses,
            "weights": [v.numpy().astype("float64").tolist()
                        for v in MODEL.trainable_variables],
            "nodes": [d for d in node_summary(c.post) if "SIMDEV" in d["device"]]}

@check("train_on")
def _():
    return train_step()

graphutil.plugin_optimizers(False)

@check("train_off")
def _():
    return train_step()

@check("off")
def _():
    c = all_cases(D)
    REPORT["off"] = report(c)
    REPORT["off_graph"] = c.post[0].SerializeToString()  # as TF hands it in
    return {}

from tensorflow.core.framework import graph_pb2

def graph_opt(data, preserve=()):
    """simdev_graph_opt on GraphDef bytes: (its JSON line, the output bytes)."""
    out, info = graphutil.optimize_bytes(data, preserve=preserve,
                                         passes="fold_pad,remap")
    return info, out

def ops_by_name(data):
    g = graph_pb2.GraphDef()
    g.ParseFromString(data)
    return {n.name: n.op for n in g.node}

@check("idempotent")
def _():
    first, out1 = graph_opt(REPORT["off_graph"])
    second, out2 = graph_opt(out1)
    return {"first": first, "second": second, "same_bytes": out1 == out2,
            "ops": ops_by_name(out1)}

@check("tool_preserve")
def _():
    keep_bias = ops_by_name(graph_opt(REPORT["off_graph"],
                                      ["conv_Relu/BiasAdd"])[1])
    keep_conv = ops_by_name(graph_opt(REPORT["off_graph"],
                                      ["conv_Relu/Conv2D"])[1])
    return {"bias": {k: v for k, v in keep_bias.items() if k.startswith("conv_Relu/")},
            "conv": {k: v for k, v in keep_conv.items() if k.startswith("conv_Relu/")}}

for name in CASES:
    @check("off_" + name)
    def _():
        return REPORT["off"][name]
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
    "depthwise_Relu6_nchw": ("_FusedDepthwiseConv2dNative", ["BiasAdd", "Relu6"],
                             ["DepthwiseConv2dNative", "BiasAdd"]),
    "pad_conv_bias_relu": ("_FusedConv2D", ["BiasAdd", "Relu"],
                           ["Pad", "Conv2D", "BiasAdd"]),
}

FUSED = ("_FusedConv2D", "_FusedMatMul", "_FusedDepthwiseConv2dNative")


class _Off:
    """The passes-off half of the child's checks, by case name."""

    def __init__(self, run):
        self.run = run

    def data(self, name):
        return self.run.data("off_" + name)


@pytest.fixture(scope="module")
def runs(run_tf):
    # Only this module's passes: the elementwise pass (which runs after
    # remap) would fold the Relu/Sub/Mul the negative cases keep into its
    # own node, and these tests are about what remap and fold_pad do.
    run = run_tf(SNIPPET, env={"SIMDEV_GRAPH_PASSES": "fold_pad,remap"},
                 timeout=300)
    for whole in ("cpu", "on", "off"):  # each case's check needs these
        run.data(whole)
    run.assert_clean_exit()
    return run, _Off(run)


def ops_on(nodes, device="SIMDEV"):
    return [n["op"] for n in nodes if device in n["device"]]


def assert_same_results(on, off, name, rtol=1e-5, atol=1e-6):
    """Passes on == passes off bit for bit (the fused kernels run the
    unfused kernels' GEMM calls and scalar functions, src/kernels/framework/fused.h;
    an explicit padding reads the zeros the Pad wrote), and == TF CPU
    within rtol/atol x 10."""
    d_on, d_off = on.data(name), off.data(name)
    got, off_res, cpu = (np.array(d_on["result"]), np.array(d_off["result"]),
                         np.array(d_on["cpu"]))
    assert "SIMDEV" in d_on["device"], d_on["device"]
    np.testing.assert_array_equal(got, off_res,
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
    assert a["T"] == "DT_FLOAT" and a["TArgs"] == ["DT_FLOAT"], a
    assert a["num_args"] == 1 and a["fused_ops"] == ["BiasAdd", "LeakyRelu"], a
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
    assert d["attrs"]["T"] == "DT_DOUBLE", d
    assert "explicit_paddings" not in d["attrs"], d


NEGATIVE = {
    # case: (ops that must stay on SIMDEV, ops that must not appear on SIMDEV)
    "neg_conv_two_consumers": (["Conv2D", "BiasAdd", "Relu"], list(FUSED)),
    "neg_bias_layout": (["Conv2D", "BiasAdd", "Relu"], list(FUSED)),
    "neg_conv_control": (["Conv2D", "BiasAdd", "Relu"], list(FUSED)),
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


def test_preserved(runs):
    """A TF1 Session fetching the Conv2D's output too: TF puts it in the
    preserve list, and the Conv2D (one data consumer, the BiasAdd) is
    still not absorbed; fetching only the Relu, the same graph fuses (so
    the optimizer does run on Session graphs)."""
    on, _ = runs
    fused = on.data("session_fetch_relu")["nodes"]
    kept = on.data("session_fetch_conv")["nodes"]
    assert "_FusedConv2D" in ops_on(fused), fused
    assert "Conv2D" not in ops_on(fused), fused
    sim = ops_on(kept)
    assert "Conv2D" in sim and not any(f in sim for f in FUSED), kept
    np.testing.assert_allclose(on.data("session_fetch_relu")["result"],
                               on.data("session_fetch_conv")["result"],
                               rtol=1e-5, atol=1e-6)


def test_keras_training_step(runs):
    """Keras's layers in a training step: Dense(relu) is MatMul + BiasAdd +
    Relu whose gradient reads the Relu's output, so it fuses; the last
    Dense fuses with its BiasAdd; ZeroPadding2D's Pad feeds the Conv2D and
    its filter gradient and folds into both (TF's constant folding leaves a
    control edge on it); the losses and weights equal the passes-off run."""
    run, _ = runs
    t_on, t_off = run.data("train_on"), run.data("train_off")
    nodes = t_on["nodes"]
    ops = [n["op"] for n in nodes]
    mm = [n for n in nodes if n["op"] == "_FusedMatMul"]
    assert sorted(tuple(n["fused_ops"]) for n in mm) == \
        [("BiasAdd",), ("BiasAdd", "Relu")], mm
    conv = [n for n in nodes if n["op"] == "_FusedConv2D"]
    assert len(conv) == 1 and conv[0]["fused_ops"] == ["BiasAdd", "Relu"], conv
    assert conv[0]["attrs"]["padding"] == "EXPLICIT", conv[0]
    assert conv[0]["attrs"]["explicit_paddings"] == [0, 0, 1, 1, 1, 1, 0, 0]
    bf = [n for n in nodes if n["op"] == "Conv2DBackpropFilter"]
    assert len(bf) == 1 and bf[0]["attrs"]["padding"] == "EXPLICIT", bf
    assert "Pad" not in ops, ops
    off_ops = [n["op"] for n in t_off["nodes"]]
    assert "Pad" in off_ops and "_FusedMatMul" not in off_ops, off_ops
    np.testing.assert_allclose(t_on["losses"], t_off["losses"], rtol=1e-6)
    for w_on, w_off in zip(t_on["weights"], t_off["weights"]):
        np.testing.assert_allclose(w_on, w_off, rtol=1e-5, atol=1e-7)


def test_idempotent(runs):
    """The passes on the GraphDef TF handed in (passes off): the first run
    rewrites, a second run on its output rewrites nothing and gives the
    same bytes."""
    run, _ = runs
    d = run.data("idempotent")
    assert d["first"]["rewrites"] > len(POSITIVE), d["first"]
    assert d["second"]["rewrites"] == 0, d["second"]
    assert d["same_bytes"], "second run changed the graph"
    assert d["ops"]["conv_Relu/Relu"] == "_FusedConv2D", d["ops"]
    assert "conv_Relu/Conv2D" not in d["ops"], d["ops"]


def test_preserve_list_tool(runs):
    """With the BiasAdd preserved, the Relu cannot absorb it (Conv2D +
    BiasAdd still fuse, rooted at the BiasAdd); with the Conv2D preserved,
    nothing fuses."""
    run, _ = runs
    d = run.data("tool_preserve")
    assert d["bias"] == {"conv_Relu/BiasAdd": "_FusedConv2D",
                         "conv_Relu/Relu": "Relu"}, d["bias"]
    assert d["conv"] == {"conv_Relu/Conv2D": "Conv2D",
                         "conv_Relu/BiasAdd": "BiasAdd",
                         "conv_Relu/Relu": "Relu"}, d["conv"]
