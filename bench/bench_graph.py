"""Graph-optimizer benchmark group: what simdev's TF_InitGraph passes do to a
training step, next to the same step without them and on TF's CPU.

    .venv/bin/python bench/bench_graph.py [--quick] [--json PATH]

Three models, one training step each (a tf.function: forward in training
mode, softmax cross-entropy, gradients, optimizer update; soft placement off
while stepping, so every op of a SIMDEV step ran on SIMDEV):

    CNN, MLP     examples/training.py's models, batch 32, Adam
    MobileNetV2  keras.applications, weights=None, 32x32x3, batch 4, SGD

Sides, alternating call by call in one process:

    "simdev"      on /device:SIMDEV:0 with simdev's graph passes (default)
    "passes_off"  on /device:SIMDEV:0, plugin optimizers off
    "tf_cpu"      on TF's CPU device

Passes on/off in one process: TF asks plugin optimizers to run only while
RewriterConfig.use_plugin_optimizers is not OFF
(tf.config.optimizer.set_experimental_options), and it reads that when it
instantiates (first calls) a function; each side has its own tf.function,
instantiated right after the switch is set for it, and keeps the graph it
was optimized with.

Kernels per step are counted, not estimated: the partition graphs TF
records for the step's function (eager graph collection, on its first call)
list the nodes each device executes once per step (these steps have no
control flow). Counted per side: every node that runs an op kernel (all but
_Arg, _Retval, _Send, _Recv, NoOp, Const); for SIMDEV sides also the
launches through simdev's kernels (nodes whose op has a SIMDEV kernel
registration; the others are TF's DEFAULT kernels on the device:
ReadVariableOp, Assign*VariableOp, Identity...).

--quick: the CNN and the MLP only, a few steps each (a smoke run: building
and tracing MobileNetV2 three times takes a minute or two on 2 CPUs).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import common  # noqa: E402
import training  # noqa: E402
from common import CPU, SIM  # noqa: E402

GROUP = "graph"
MODELS = ["cnn", "mlp", "mobilenetv2"]
TITLES = {"cnn": "train step CNN b32", "mlp": "train step MLP b32",
          "mobilenetv2": "train step MobileNetV2 32x32 b4"}
REPS = {"cnn": 60, "mlp": 200, "mobilenetv2": 12}
QUICK_REPS = {"cnn": 4, "mlp": 8}
# The target for the MLP step (issue 14).
TARGETS = {"mlp": {"vs": "tf_cpu", "min_ratio": 0.8}}
MNV2_SHAPE, MNV2_BATCH, CLASSES = (32, 32, 3), 4, 10
SIDES = (("simdev", SIM, "SIMDEV", True), ("passes_off", SIM, "SIMDEV", False),
         ("tf_cpu", CPU, "CPU", True))
NOT_KERNELS = {"_Arg", "_Retval", "_Send", "_Recv", "NoOp", "Const"}


def plugin_optimizers(on):
    tf.config.optimizer.set_experimental_options(
        {"use_plugin_optimizers": bool(on)})


def build(kind, dev):
    """(step tf.function, x, y) with the model and optimizer built on dev."""
    if kind in ("cnn", "mlp"):
        _, step = training.make_trainer(kind, dev)
        xs, ys = training.synthetic_data(kind, 1)
        with tf.device(dev):
            return step, tf.constant(xs[0]), tf.constant(ys[0])
    import keras
    with tf.device(dev):
        keras.utils.set_random_seed(7)
        model = keras.applications.MobileNetV2(
            weights=None, input_shape=MNV2_SHAPE, classes=CLASSES,
            classifier_activation=None)
        opt = keras.optimizers.SGD(learning_rate=0.01)
        opt.build(model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        rng = np.random.default_rng(3)
        x = tf.constant(rng.uniform(0, 1, size=(MNV2_BATCH,) + MNV2_SHAPE)
                        .astype(np.float32))
        y = tf.constant(rng.integers(0, CLASSES, size=MNV2_BATCH)
                        .astype(np.int32))

    @tf.function(jit_compile=False)
    def step(a, b):
        with tf.GradientTape() as tape:
            loss = loss_fn(b, model(a, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step, x, y


_simdev_ops = {}


def has_simdev_kernel(op):
    from tensorflow.python.framework import kernels
    if op not in _simdev_ops:
        _simdev_ops[op] = any(
            k.device_type == "SIMDEV"
            for k in kernels.get_registered_kernels_for_op(op).kernel)
    return _simdev_ops[op]


def first_call_counting(call, dev_kind):
    """Runs the step's first call (instantiation) with graph collection on;
    returns (loss, kernels per step, simdev launches per step, fused op
    types seen on the device)."""
    from tensorflow.python.eager import context
    ctx = context.context()
    ctx.enable_graph_collection()
    ctx.export_run_metadata()  # drop anything collected before
    try:
        loss = call()
        loss.numpy()
        md = ctx.export_run_metadata()
    finally:
        ctx.disable_graph_collection()
    nodes = [n for fg in md.function_graphs for pg in fg.partition_graphs
             for n in pg.node]
    if not nodes:
        raise RuntimeError("bench graph: TF recorded no partition graph for "
                           "the step's first call")
    kernels = [n for n in nodes if n.op not in NOT_KERNELS]
    launches = [n for n in kernels
                if "SIMDEV" in n.device and has_simdev_kernel(n.op)]
    fused = sorted({n.op for n in kernels if "Fused" in n.op
                    and dev_kind in n.device and n.op.startswith("_")})
    return loss, len(kernels), len(launches), fused


def model_case(kind, reps):
    title = TITLES[kind]
    common.progress(f"[{GROUP}] {title}: {reps} steps x {len(SIDES)} sides")
    fns, counts = {}, {}
    for side, dev, dev_kind, passes in SIDES:
        # Keras' initializers run a few eager int ops (seed FloorMod) that
        # have no SIMDEV kernel: build with soft placement, step without.
        tf.config.set_soft_device_placement(True)
        try:
            step, x, y = build(kind, dev)
        finally:
            tf.config.set_soft_device_placement(False)

        def call(step=step, x=x, y=y, dev=dev):
            with tf.device(dev):  # the function runs where its scope says
                return step(x, y)
        plugin_optimizers(passes)
        try:
            loss, nk, nl, fused = first_call_counting(call, dev_kind)
        finally:
            plugin_optimizers(True)
        common.check_device(loss, dev_kind, f"{title} ({side})")
        assert np.isfinite(loss.numpy()), (title, side, loss)
        counts[side] = {"kernels": nk, "launches": nl, "fused_ops": fused}
        fns[side] = lambda call=call: call().numpy()
    samples = common.alternate(fns, reps, rounds=reps, warmup=0)
    case = common.case(GROUP, title, samples, target=TARGETS.get(kind))
    metrics = []
    label = {"simdev": "SIMDEV passes on", "passes_off": "SIMDEV passes off",
             "tf_cpu": "TF CPU"}
    for side, _, _, _ in SIDES:
        metrics.append(common.metric(
            f"{title}: kernels per step, {label[side]}",
            counts[side]["kernels"], unit="kernels"))
    for side in ("simdev", "passes_off"):
        metrics.append(common.metric(
            f"{title}: simdev kernel launches per step, {label[side]}",
            counts[side]["launches"], unit="launches"))
    return case, metrics, counts


def run(quick=False):
    reps = QUICK_REPS if quick else REPS
    cases, metrics, counts = [], [], {}
    for kind in [k for k in MODELS if k in reps]:
        c, m, n = model_case(kind, reps[kind])
        cases.append(c)
        metrics += m
        counts[kind] = n
    info = common.base_info(tf, quick)
    info.update({"batch": training.BATCH, "mobilenetv2_input": list(MNV2_SHAPE),
                 "mobilenetv2_batch": MNV2_BATCH,
                 "simdev_graph_passes": os.environ.get("SIMDEV_GRAPH_PASSES"),
                 "fused_ops": {k: v["simdev"]["fused_ops"]
                               for k, v in counts.items()}})
    return common.result(GROUP, cases, info, metrics)


def main(argv=None):
    return common.main(run, __doc__, argv)


if __name__ == "__main__":
    main()
