"""Whole models training with their variables on SIMDEV (issue 28), on the
releases where simdev registers its own resource-variable kernels
(TF 2.16-2.18, src/kernels/variables/; conftest's simdev_variable_kernels).
On 2.19 and later the module is skipped with the reason: there TF's
DEVICE_DEFAULT variable kernels serve SIMDEV and the C API has no way to add
the resource ops these models need (docs/op-coverage.md).

Four TF children, each a few seconds of training:

- keras: (a) Embedding + LSTM classifier and (b) a Transformer encoder block
  (Embedding, MultiHeadAttention, LayerNormalization, GELU Dense
  feed-forward), Keras 3, every variable (embedding and optimizer slots
  included) created under tf.device(SIMDEV), 3 steps of a tf.function
  training step with soft placement off, against the same model, data and
  initial weights on TF's CPU. With Adam the embedding's gradient is made
  dense (UnsortedSegmentSum) and every update is an Assign*VariableOp; with
  SGD it stays sparse and the update is ResourceScatterSub (float32 rows,
  int32 indices: simdev's scatter_ops.c).
  The models are built with soft placement on, then it is turned off: the
  LSTM's Orthogonal initializer (Qr, MatrixDiagPartV3) has no SIMDEV
  kernel and runs once, at build time, on the CPU.
  Soft placement off does not prove placement here: the nodes of the LSTM
  gradient loop's body that TF builds with no requested device go to
  whichever device has a kernel, without an error. So the partition graphs
  TF ran for the SIMDEV steps (RunMetadata) are read too: the only CPU nodes
  allowed are the step's int32 inputs (_Arg, and their _Send to SIMDEV: a
  device keeps int32 in host memory). The LSTM's while loop gradient
  accumulates TensorLists with ZerosLike and AddN (T=variant): TF's
  DEVICE_DEFAULT kernels have none, so they ran on the CPU until simdev
  registered its own through TF_AddNVariant/TF_ZerosLikeVariant
  (kernels_experimental.h, 2.16-2.18; src/kernels/variables/variant_ops.c):
  now they run on SIMDEV (test_lstm_loop_gradients_variants_on_simdev).
- v1: tf.compat.v1.train.AdamOptimizer in a graph-mode Session (soft
  placement off, every node under tf.device(SIMDEV)): a dense model
  (ResourceApplyAdam) and one with an embedding lookup (ResourceGather, and
  Adam's sparse slot updates ResourceScatterAdd); RunMetadata's step stats
  name the device each node ran on.
- discrete: SIMDEV_DISCRETE=1 (device memory host code cannot touch,
  tests/tf/test_discrete.py): the demo CNN (examples/training.py) trains
  with Adam, its variables and every op on SIMDEV with soft placement off:
  no host access to device memory is reported, the losses are TF CPU's.

Bound: 3-4 steps from identical weights and data differ from TF CPU only by
float32 rounding of reordered sums (simdev's GEMM and reductions block the
sums differently from Eigen): the reductions here are at most 32 terms long
(gamma_32 ~ 2**-19 relative per op), through a few layers and steps.
RTOL = 2**-16 (512 units of float32's roundoff), as tests/tf/test_distribute
uses for the same kind of reordering; measured: at most 2.3e-7 relative.
A wrong kernel or a missed update is off by percents.

Parts that need kernels other helpers add (ResourceApplyAdam,
ResourceGather, ResourceScatterAdd) are marked xfail(strict=True,
raises=MissingKernels): the test raises MissingKernels only when the part
failed and TF's kernel registry lacks a SIMDEV kernel the part names, so
any other failure fails, and once the kernels are merged the test passes
and strict xfail makes that an error: remove the mark then.
"""
import os

import numpy as np
import pytest

from conftest import simdev_variable_kernels, tf_minor

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")

pytestmark = pytest.mark.skipif(
    not simdev_variable_kernels(),
    reason=f"TensorFlow 2.{tf_minor()} exports none of kernels_experimental.h's "
    "variable functions: simdev registers no variable kernels, so models cannot "
    "train with their variables on SIMDEV (test_kernels_variables.py checks that)")

RTOL = 2.0 ** -16
ATOL = 2.0 ** -20  # the weights: components that start at 0 (biases)
STEPS = 3
# Weights whose gradient is zero in exact arithmetic, so that both devices
# train them on rounding noise: attention's key bias (adding q.b to every
# score of a query leaves its softmax unchanged). Adam scales that noise
# (~1e-9) by lr/eps, and the two devices' values (~1e-7) share no digit.
NOISE_ONLY = ("key/bias",)


class MissingKernels(Exception):
    """The part failed because SIMDEV lacks these kernels (another helper's
    ops, not merged yet): the only failure the xfail marks accept."""


# Child side: the SIMDEV kernels a part needs, checked in TF's registry
# (DEVICE_DEFAULT kernels serve SIMDEV too), and where the nodes ran.
COMMON = r'''
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels as _kernels

SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"

def have_kernel(op, **types):
    """Whether SIMDEV has a kernel for op with these type attrs."""
    for k in _kernels.get_registered_kernels_for_op(op).kernel:
        if k.device_type not in ("SIMDEV", "DEFAULT"):
            continue
        allowed = {c.name: {tf.as_dtype(t).name for t in c.allowed_values.list.type}
                   for c in k.constraint}
        if all(t in allowed.get(a, {t}) for a, t in types.items()):
            return True
    return False

def missing(needs):
    """["Op(attr=type,...)"] of the needed kernels SIMDEV lacks."""
    return ["%s(%s)" % (op, ",".join("%s=%s" % kv for kv in sorted(ts.items())))
            for op, ts in needs if not have_kernel(op, **ts)]

def placed(fn):
    """(fn(), [[node, op, device type, [dtypes of its type attrs]]]) of the
    graphs TF ran while fn ran, as partitioned onto devices (RunMetadata)."""
    from tensorflow.python.eager import context
    ctx = context.context()
    ctx.enable_run_metadata()
    ctx.export_run_metadata()  # drops what an earlier run left
    try:
        result = fn()
    finally:
        md = ctx.export_run_metadata()
        ctx.disable_run_metadata()
    nodes = []
    for fg in md.function_graphs:
        for pg in fg.partition_graphs:
            for n in pg.node:
                ts = set()
                for a in n.attr.values():
                    if a.HasField("type"):
                        ts.add(tf.as_dtype(a.type).name)
                    ts.update(tf.as_dtype(t).name for t in a.list.type)
                nodes.append([n.name, n.op, n.device.rsplit("/", 1)[-1].split(":")[1],
                              sorted(ts)])
    return result, nodes

def failure(e):
    return {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e)[:600])}
'''

KERAS = COMMON + r'''
import keras

V, T, B, STEPS = 50, 8, 4, @STEPS@
rng = np.random.default_rng(28)
XS = [rng.integers(0, V, (B, T)).astype("int32") for _ in range(STEPS)]
YS = [rng.integers(0, 3, (B,)).astype("int32") for _ in range(STEPS)]

def build(kind):
    keras.utils.set_random_seed(1)
    inp = keras.Input((T,), dtype="int32")
    x = keras.layers.Embedding(V, 16)(inp)
    if kind == "lstm":
        x = keras.layers.LSTM(8)(x)
    else:
        a = keras.layers.MultiHeadAttention(2, 8)(x, x)
        x = keras.layers.LayerNormalization()(x + a)
        f = keras.layers.Dense(32, activation="gelu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(16)(f))
        x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inp, keras.layers.Dense(3)(x))

def train(kind, opt_name, dev):
    with tf.device(dev):
        # Built with soft placement on: the LSTM's Orthogonal initializer
        # (Qr, MatrixDiagPartV3) has no SIMDEV kernel and runs once here.
        tf.config.set_soft_device_placement(True)
        m = build(kind)
        opt = getattr(keras.optimizers, opt_name)(1e-2)
        opt.build(m.trainable_variables)
        tf.config.set_soft_device_placement(False)
        lf = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = lf(y, m(x, training=True))
            grads = tape.gradient(loss, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables))
            return loss

        batches = [(tf.constant(x), tf.constant(y)) for x, y in zip(XS, YS)]
        losses, nodes = placed(lambda: [float(step(x, y)) for x, y in batches])
    return {"losses": losses, "nodes": nodes,
            "devices": sorted({v.value.device for v in m.trainable_variables + opt.variables}),
            "weights": [[v.path, v.numpy().tolist()] for v in m.trainable_variables],
            "graph_ops": sorted({o.type for o in step.get_concrete_function(
                *batches[0]).graph.get_operations()})}

# The kernels each optimizer's step needs beyond what the model's own ops use.
NEEDS = {"Adam": [], "SGD": [("ResourceScatterSub", {"dtype": "float32", "Tindices": "int32"})]}
LSTM_VARIANT = [("ZerosLike", {"T": "variant"}), ("AddN", {"T": "variant"})]

for kind in ("lstm", "transformer"):
    for opt_name in ("Adam", "SGD"):
        name = kind + "-" + opt_name
        @check(name)
        def _():
            out = {"missing": missing(NEEDS[opt_name])}
            try:
                out["sim"] = train(kind, opt_name, SIM)
            except Exception as e:
                out["sim"] = failure(e)
                return out
            out["cpu"] = train(kind, opt_name, CPU)
            return out

@check("lstm variant kernels")
def _():
    return {"missing": missing(LSTM_VARIANT)}

'''

V1 = COMMON + r'''
def graph(kind, dev):
    g = tf.Graph()
    with g.as_default(), tf.device(dev):
        r = np.random.default_rng(0)
        ids = tf.compat.v1.placeholder(tf.int32, [8, 4], name="ids")
        x = tf.compat.v1.placeholder(tf.float32, [8, 6], name="x")
        y = tf.compat.v1.placeholder(tf.int32, [8], name="y")
        w1 = tf.Variable(r.normal(size=(6, 16)).astype("float32"), name="w1")
        b1 = tf.Variable(np.zeros(16, "float32"), name="b1")
        w2 = tf.Variable((0.3 * r.normal(size=(16, 3))).astype("float32"), name="w2")
        h = x
        if kind == "embedding":
            e = tf.Variable(r.normal(size=(20, 6)).astype("float32"), name="emb")
            h = h + tf.reduce_mean(tf.nn.embedding_lookup(e, ids), axis=1)
        h = tf.nn.relu(tf.matmul(h, w1) + b1)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=tf.matmul(h, w2)))
        train = tf.compat.v1.train.AdamOptimizer(0.05).minimize(loss)
        init = tf.compat.v1.global_variables_initializer()
    return g, (ids, x, y), loss, train, init

def run(kind, dev):
    g, (ids, x, y), loss, train, init = graph(kind, dev)
    cfg = tf.compat.v1.ConfigProto(allow_soft_placement=False)
    r = np.random.default_rng(5)
    out = {"losses": [], "resource_ops": sorted({o.type for o in g.get_operations()
                                                 if o.type.startswith("Resource")})}
    with tf.compat.v1.Session(graph=g, config=cfg) as s:
        s.run(init)
        for i in range(4):
            fd = {ids: r.integers(0, 20, (8, 4)), x: r.normal(size=(8, 6)),
                  y: r.integers(0, 3, 8)}
            md = tf.compat.v1.RunMetadata()
            opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            l, _ = s.run([loss, train], fd, options=opts, run_metadata=md)
            out["losses"].append(float(l))
        # the last step's nodes by the device they ran on
        out["ran"] = {d.device.split("device:")[-1]: sorted({n.node_name.split(":")[0]
                                                           for n in d.node_stats})
                      for d in md.step_stats.dev_stats}
        out["ops_by_node"] = {o.name: o.type for o in g.get_operations()}
    return out

NEEDS = {"dense": [("ResourceApplyAdam", {"T": "float32"})],
         "embedding": [("ResourceApplyAdam", {"T": "float32"}),
                       ("ResourceGather", {"dtype": "float32", "Tindices": "int32"}),
                       ("ResourceScatterAdd", {"dtype": "float32", "Tindices": "int32"})]}
for kind in ("dense", "embedding"):
    @check(kind)
    def _():
        out = {"missing": missing(NEEDS[kind])}
        try:
            out["sim"] = run(kind, SIM)
        except Exception as e:
            out["sim"] = failure(e)
            return out
        out["cpu"] = run(kind, CPU)
        return out
'''

DISCRETE = COMMON + r'''
import sys
sys.path.insert(0, @EXAMPLES@)
import training

xs, ys = training.synthetic_data("cnn", @STEPS@)

def train(dev):
    model, step = training.make_trainer("cnn", dev)
    with tf.device(dev):
        batches = [(tf.constant(x), tf.constant(y)) for x, y in zip(xs, ys)]
        losses, nodes = placed(lambda: [float(step(x, y)) for x, y in batches])
    return {"losses": losses, "nodes": nodes,
            "devices": sorted({v.value.device for v in model.variables}),
            "weights": [[v.path, v.numpy().tolist()] for v in model.trainable_variables]}

tf.config.set_soft_device_placement(False)

@check("cnn")
def _():
    return {"sim": train(SIM), "cpu": train(CPU)}

@check("peak")
def _():
    return {"peak": tf.config.experimental.get_memory_info("SIMDEV:0")["peak"]}
'''


def on_device(sim, must_run):
    """{(node, op, dtypes)} of the CPU nodes of the SIMDEV run's graphs
    (RunMetadata's partition graphs), after checking that the SIMDEV
    partitions ran `must_run` (the step's graphs were recorded at all)."""
    ops = {op for _, op, dev, _ in sim["nodes"] if dev == "SIMDEV"}
    assert set(must_run) <= ops, sorted(ops)
    return {(node, op, tuple(ts)) for node, op, dev, ts in sim["nodes"] if dev == "CPU"}


def close(got, ref, what):
    np.testing.assert_allclose(got["losses"], ref["losses"], rtol=RTOL, atol=0,
                               err_msg=f"{what}: losses")
    # the same model built twice: the same variables in the same order (Keras
    # numbers the second model's layers on)
    assert len(got["weights"]) == len(ref["weights"])
    for (path, a), (_, b) in zip(got["weights"], ref["weights"]):
        if path.endswith(NOISE_ONLY):
            continue
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{what}: {path}")


def trained(d, what):
    """d's SIMDEV run, or MissingKernels if it failed while SIMDEV lacks
    the kernels the part needs (then the xfail holds); a failure with every
    needed kernel present is a plain failure."""
    if not d["sim"].get("ok", True):
        if d["missing"]:
            raise MissingKernels(f"{what}: SIMDEV lacks {d['missing']}: {d['sim']['error']}")
        pytest.fail(f"{what} failed with every kernel it needs registered: "
                    f"{d['sim']['error']}")
    assert not d["missing"], f"{what} ran although SIMDEV lacks {d['missing']}?"
    return d["sim"]


@pytest.fixture(scope="module")
def keras_run(run_tf):
    return run_tf(KERAS.replace("@STEPS@", str(STEPS)), timeout=300)


def _keras_part(keras_run, kind, opt):
    name = f"{kind}-{opt}"
    d = keras_run.data(name)
    sim = trained(d, name)
    assert sim["devices"] == ["/job:localhost/replica:0/task:0/device:SIMDEV:0"], sim["devices"]
    assert len(sim["losses"]) == STEPS and all(0.1 < l < 10 for l in sim["losses"]), sim
    close(sim, d["cpu"], name)
    return sim


def _cpu_nodes(keras_run, name):
    return on_device(keras_run.data(name)["sim"],
                     ("MatMul", "AssignAddVariableOp", "ReadVariableOp"))


# CPU nodes that move data rather than compute: function arguments and
# results, and the transfers between the CPU's and SIMDEV's partitions.
TRANSFER = {"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "_Send", "_Recv",
            "_HostSend", "_HostRecv"}


def _int32_inputs(cpu):
    """The CPU nodes that are the step's int32 inputs x, y and their sends
    to SIMDEV: a device keeps int32 tensors in host memory."""
    return {n for n in cpu if n[1] in TRANSFER and n[2] == ("int32",)}


@pytest.mark.parametrize("kind", ["lstm", "transformer"])
def test_trains_with_adam_like_cpu(keras_run, kind):
    sim = _keras_part(keras_run, kind, "Adam")
    # Adam's dense updates: no resource op beyond the Assign* kernels
    assert not [o for o in sim["graph_ops"] if o.startswith("Resource")], sim["graph_ops"]


def test_transformer_step_all_on_simdev(keras_run):
    cpu = _cpu_nodes(keras_run, "transformer-Adam")
    assert cpu - _int32_inputs(cpu) == set(), sorted(cpu)
    assert {n[0] for n in cpu if n[1] == "_Arg"} == {"x", "y"}, sorted(cpu)


def test_lstm_loop_gradients_variants_on_simdev(keras_run):
    # The while loop gradient's ZerosLike and AddN of TensorLists
    # (T=variant) run on SIMDEV (simdev's variant_ops.c), none on the CPU.
    sim = keras_run.data("lstm-Adam")["sim"]
    assert not keras_run.data("lstm variant kernels")["missing"]
    for op in ("ZerosLike", "AddN"):
        devs = {dev for _, o, dev, ts in sim["nodes"] if o == op and ts == ["variant"]}
        assert devs == {"SIMDEV"}, (op, devs)


def test_lstm_step_all_on_simdev(keras_run):
    cpu = _cpu_nodes(keras_run, "lstm-Adam")
    assert cpu - _int32_inputs(cpu) == set(), sorted(cpu)
    assert {n[0] for n in cpu if n[1] == "_Arg"} == {"x", "y"}, sorted(cpu)


@pytest.mark.parametrize("kind", ["lstm", "transformer"])
def test_trains_with_sgd_sparse_embedding_update(keras_run, kind):
    sim = _keras_part(keras_run, kind, "SGD")
    assert "ResourceScatterSub" in sim["graph_ops"], sim["graph_ops"]


def test_keras_child_exits_cleanly(keras_run):
    keras_run.assert_clean_exit()


@pytest.fixture(scope="module")
def v1_run(run_tf):
    return run_tf(V1, timeout=300)


@pytest.mark.parametrize("kind", ["dense", "embedding"])
def test_compat_v1_adam_trains_on_simdev(v1_run, kind):
    d = v1_run.data(kind)
    sim = trained(d, kind)
    np.testing.assert_allclose(sim["losses"], d["cpu"]["losses"], rtol=RTOL, atol=0)
    assert sim["losses"][-1] < sim["losses"][0], sim["losses"]
    # RunMetadata: every op ran on SIMDEV; the CPU ran only the session's
    # feeds and fetches (_arg_/_retval_) and its _SOURCE.
    ran = sim["ran"]
    cpu = [n for n in ran.get("CPU:0", []) if not n.startswith(("_arg_", "_retval_", "_SOURCE"))]
    assert cpu == [], cpu
    by_node = sim["ops_by_node"]
    on_sim = {by_node.get(n) for n in ran["SIMDEV:0"]}
    assert set(sim["resource_ops"]) <= on_sim, (sim["resource_ops"], sorted(on_sim - {None}))


@pytest.fixture(scope="module")
def discrete_run(run_tf):
    return run_tf(DISCRETE.replace("@STEPS@", str(STEPS)).replace("@EXAMPLES@", repr(EXAMPLES)),
                  env={"SIMDEV_DISCRETE": "1", "SIMDEV_BFC": "1",
                       "PYTHONFAULTHANDLER": "1", "TF_CPP_MIN_LOG_LEVEL": "0"},
                  timeout=300)


def test_discrete_cnn_trains_all_on_simdev(discrete_run):
    # A host read or write of device memory (a host kernel, a host-side
    # copy) would have killed the child with simdev's report.
    assert "host access to device memory" not in discrete_run.stderr, discrete_run.describe()
    discrete_run.assert_clean_exit()
    d = discrete_run.data("cnn")
    sim = d["sim"]
    assert sim["devices"] == ["/job:localhost/replica:0/task:0/device:SIMDEV:0"], sim["devices"]
    close(sim, d["cpu"], "discrete cnn")
    cpu = on_device(sim, ("Conv2DBackpropFilter", "AssignAddVariableOp",
                          "AssignSubVariableOp"))
    # the CPU holds the int32 labels only (the images are float32 on SIMDEV)
    assert {(op, ts) for _, op, ts in cpu} == {("_Arg", ("int32",)),
                                               ("_Send", ("int32",))}, sorted(cpu)
    assert {n[0] for n in cpu if n[1] == "_Arg"} == {"y"}, sorted(cpu)
    assert discrete_run.data("peak")["peak"] > 1 << 20  # the training used SIMDEV's memory
