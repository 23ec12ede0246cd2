"""Op coverage of real models' training steps on SIMDEV: which ops run on
SIMDEV, which fall back to the CPU, and why.

    .venv/bin/python examples/coverage_report.py                  # every model
    .venv/bin/python examples/coverage_report.py --models ResNet50,gru
    .venv/bin/python examples/coverage_report.py --markdown docs/op-coverage.md

For each model a child process builds it under tf.device("/device:SIMDEV:0")
(keras.applications with weights=None, 32x32x3, batch 2, 3 classes; or one
of the text models below), compiles it with SGD and jit_compile=False, and
runs one train_on_batch step with soft placement on, TF's default Grappler
configuration and the placement log on. This process parses the log
("node: (Op): device" lines: the graph nodes of the step, and the eager ops
run while building the model, which TF runs as one-node functions) and gives
the reason for each CPU op with examples/placement_report.py's why_on_cpu
(TF's kernel registry, the node's dtypes, the cases simdev cannot fix).

Text models: "transformer" (Embedding, a MultiHeadAttention encoder block
with LayerNormalization, GELU feed-forward, Dropout), "gru" and "lstm"
(Embedding + recurrent layer + Dense). Their "...-cpuemb" variants are the
workaround for the Embedding: the Embedding layer is built under
tf.device("/CPU:0") (its variable, lookup and sparse SGD update stay on the
CPU; everything else runs on SIMDEV), and their step is run a second time
with soft placement off (the model built with it on) to show it works.
"mlp" is a three-layer Dense model, the quickest (tests/tf/test_models.py).
"""
import argparse
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import placement_report  # noqa: E402  (LOG_LINE, why_on_cpu)

APPS = ["MobileNetV2", "MobileNetV3Small", "ResNet50", "EfficientNetB0",
        "DenseNet121", "VGG16", "ConvNeXtTiny"]
TEXT = ["transformer", "gru", "lstm",
        "transformer-cpuemb", "gru-cpuemb", "lstm-cpuemb"]
DEFAULT = APPS + TEXT

MARK = "@@COVERAGE@@ "

CHILD = r"""
import json, sys, traceback
import numpy as np
import tensorflow as tf
import keras
from tensorflow.python.eager import context

NAME = sys.argv[1]
base, _, variant = NAME.partition("-")
SIM = "/device:SIMDEV:0"
rng = np.random.default_rng(0)


def text_model():
    inp = keras.Input((8,), dtype="int32")
    if variant == "cpuemb":
        # The workaround: the Embedding's variable lives on the CPU, so its
        # lookup (ResourceGather) and SGD's sparse update
        # (ResourceScatterSub) run there; the rest of the model follows the
        # outer SIMDEV scope.
        with tf.device("/CPU:0"):
            x = keras.layers.Embedding(50, 16)(inp)
    else:
        x = keras.layers.Embedding(50, 16)(inp)
    if base == "transformer":
        a = keras.layers.MultiHeadAttention(2, 8)(x, x)
        x = keras.layers.LayerNormalization()(x + a)
        f = keras.layers.Dense(32, activation="gelu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(16)(f))
        x = keras.layers.GlobalAveragePooling1D()(x)
        x = keras.layers.Dropout(0.1)(x)
    else:
        x = (keras.layers.GRU if base == "gru" else keras.layers.LSTM)(8)(x)
    return keras.Model(inp, keras.layers.Dense(3)(x))


def build():
    keras.utils.set_random_seed(1)
    if base == "mlp":
        m = keras.Sequential([keras.Input((16,)),
                              keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(3)])
        x = rng.normal(size=(2, 16)).astype("float32")
    elif base in ("transformer", "gru", "lstm"):
        m = text_model()
        x = rng.integers(0, 50, size=(2, 8)).astype("int32")
    else:
        m = getattr(keras.applications, base)(
            weights=None, input_shape=(32, 32, 3), classes=3,
            classifier_activation=None)
        x = rng.uniform(0, 255, size=(2, 32, 32, 3)).astype("float32")
    m.compile(optimizer=keras.optimizers.SGD(0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              jit_compile=False)
    return m, x, np.array([0, 2], dtype="int32")


def node_types():
    types = {}
    ctx = context.context()
    for fname in ctx.list_function_names():
        for n in ctx.get_function_def(fname).node_def:
            ts = set()
            for a in n.attr.values():
                if a.HasField("type"):
                    ts.add(tf.dtypes.as_dtype(a.type).name)
                ts.update(tf.dtypes.as_dtype(t).name for t in a.list.type)
            types[n.name] = sorted(ts)
    return types


def report(**kw):
    sys.stdout.flush()
    print(%(mark)r + json.dumps(kw), flush=True)


tf.debugging.set_log_device_placement(True)
try:
    with tf.device(SIM):
        m, x, y = build()
        print("@@BUILT@@", flush=True)
        loss = float(m.train_on_batch(x, y))
    print("@@STEPEND@@", flush=True)
    report(ok=True, loss=loss, types=node_types())
except Exception as e:
    print("@@STEPEND@@", flush=True)
    report(ok=False, error="%%s: %%s" %% (type(e).__name__,
                                        str(e).strip().splitlines()[0][:300]),
           types=node_types())
    sys.exit(0)
if variant == "cpuemb":
    # The same model again, its step with soft placement off. It is built
    # with soft placement on: the recurrent layers' Orthogonal initializer
    # (Qr, MatrixDiagPartV3) has no SIMDEV kernel and runs once on the CPU.
    tf.debugging.set_log_device_placement(False)
    try:
        with tf.device(SIM):
            m, x, y = build()
            tf.config.set_soft_device_placement(False)
            m.train_on_batch(x, y)
        report(strict=True)
    except Exception as e:
        report(strict=False, strict_error="%%s: %%s" %% (
            type(e).__name__, str(e).strip().splitlines()[0][:300]))
""" % {"mark": MARK}


def run_model(name):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0")
    p = subprocess.run([sys.executable, "-c", CHILD, name], env=env,
                       capture_output=True, text=True, errors="replace")
    recs = [json.loads(l[len(MARK):]) for l in p.stdout.splitlines()
            if l.startswith(MARK)]
    if not recs:
        return {"ok": False, "error": "child died (rc %d): %s" % (
            p.returncode, p.stderr.strip().splitlines()[-1:])}
    res = {}
    for r in recs:
        res.update(r)
    types = res.pop("types", {})
    # With the placement log on, TF prints one line per placed node, in
    # order with this child's own prints: graph nodes of the step after the
    # "@@BUILT@@" mark, the model's eager set-up ops (each run as a one-node
    # function: initializers, seed arithmetic) before it.
    # Turning the log off does not stop TF's placer logging later
    # functions (the -cpuemb strict run): "@@STEPEND@@" ends the step.
    built, _, step_out = p.stdout.partition("@@BUILT@@")
    step_out = step_out.partition("@@STEPEND@@")[0]
    res.update(simdev=dict(collections.Counter(
        op for _, op, d in placement_report.LOG_LINE.findall(step_out)
        if d != "CPU")),
        cpu=on_cpu(name, placement_report.LOG_LINE.findall(step_out), types),
        build_cpu=on_cpu(name, placement_report.LOG_LINE.findall(built), {}))
    return res


def on_cpu(name, placed, types):
    """{op: {"count", "reason"}} for the CPU nodes of `placed`."""
    reasons = collections.defaultdict(set)
    counts = collections.Counter()
    for node, op, d in placed:
        if d != "CPU":
            continue
        counts[op] += 1
        if name.endswith("-cpuemb") and "embedding" in node.lower():
            reasons[op].add("the Embedding's variable is on the CPU "
                            "(the workaround's tf.device)")
        else:
            reasons[op].add(placement_report.why_on_cpu(op, types.get(node)))
    return {op: {"count": n, "reason": "; ".join(sorted(reasons[op]))}
            for op, n in sorted(counts.items())}


NOT_COMPUTE = ("function plumbing", "host-side constant", "shape metadata",
               "int32 shape arithmetic", "tf.data")


def markdown(results):
    out = ["| model | ops | on SIMDEV | on CPU | CPU compute ops (count) |",
           "|---|---|---|---|---|"]
    notes = []
    for name, r in results.items():
        nsim = sum(r.get("simdev", {}).values())
        ncpu = sum(v["count"] for v in r.get("cpu", {}).values())
        compute = {op: v for op, v in r.get("cpu", {}).items()
                   if not v["reason"].startswith(NOT_COMPUTE)}
        cell = ", ".join(f"{op} ({v['count']})"
                         for op, v in sorted(compute.items())) or "none"
        if not r["ok"]:
            cell = f"**step fails**: {r['error']}" + (
                f"; before it: {cell}" if compute else "")
        elif "strict" in r:
            cell += ("; step with soft placement off: runs" if r["strict"]
                     else f"; step with soft placement off: {r['strict_error']}")
        built = ", ".join(f"{op} ({v['count']})" for op, v in sorted(
            r.get("build_cpu", {}).items())
            if not v["reason"].startswith(NOT_COMPUTE))
        if built:
            cell += f"; while building: {built}"
        out.append(f"| {name} | {nsim + ncpu} | {nsim} | {ncpu} | {cell} |")
        for op, v in sorted(r.get("cpu", {}).items()):
            notes.append((op, v["reason"]))
        for op, v in r.get("build_cpu", {}).items():
            if not v["reason"].startswith(NOT_COMPUTE):
                notes.append((op + " (while building)", v["reason"]))
    reasons = sorted(set(notes))
    out += ["", "Why each op sits on the CPU:", "",
            "| op | reason |", "|---|---|"]
    out += [f"| {op} | {why} |" for op, why in reasons]
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT),
                    help="comma-separated: %s, mlp" % ", ".join(DEFAULT))
    ap.add_argument("--markdown", help="write the table to this file")
    ap.add_argument("--json", help="write the raw results to this file")
    a = ap.parse_args(argv)
    results = {}
    for name in a.models.split(","):
        r = results[name] = run_model(name)
        print(f"== {name}: " + ("ok" if r["ok"] else r["error"]), flush=True)
        for op, v in sorted(r.get("cpu", {}).items()):
            print(f"     {op:32s} x{v['count']:<4d} {v['reason']}")
        for op, v in r.get("build_cpu", {}).items():
            print(f"     {op:32s} x{v['count']:<4d} (building) {v['reason']}")
        if "strict" in r:
            print("   soft placement off: " +
                  ("runs" if r["strict"] else r["strict_error"]))
    table = markdown(results)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(HEADER + table)
    else:
        print(table)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)


HEADER = """# Op coverage of real models' training steps on SIMDEV

Generated by `examples/coverage_report.py --markdown docs/op-coverage.md`
(do not edit by hand; run it again after adding kernels, about 10 minutes).
Each row: one `train_on_batch` step (SGD, `jit_compile=False`, soft
placement on, TF's default Grappler configuration), 32x32x3 inputs or 8
tokens, batch 2; the graph nodes of the step by device, from TF's placement
log. Function plumbing, host constants, shape metadata and int32 shape
arithmetic on the CPU are counted but are not compute. "(while building)"
ops ran eagerly once, when the model was built (initializers).

With TF 2.19-2.21 (this report ran on 2.21) the Embedding models cannot
train with the embedding variable on SIMDEV:
SGD's sparse update is `ResourceScatterSub` (and the lookup
`ResourceGather`), resource-variable kernels a plugin cannot register in
TF 2.19-2.21 (their binaries lack the kernels_experimental C API), and TF places
them with their variable, so the step fails with a placement error even with
soft placement on. The workaround (the `-cpuemb` rows): build the Embedding
layer under `tf.device("/CPU:0")`:

```python
with tf.device("/device:SIMDEV:0"):
    inp = keras.Input((8,), dtype="int32")
    with tf.device("/CPU:0"):
        x = keras.layers.Embedding(50, 16)(inp)   # variable, lookup, update on CPU
    x = keras.layers.GRU(8)(x)                    # the rest on SIMDEV
```

With TF 2.16-2.18, where simdev registers its own variable kernels
(src/kernels/variables/), the variables can live on SIMDEV:
tests/tf/test_variables_models.py trains an Embedding + LSTM and a
Transformer block (Keras 3, with Adam and with SGD), a
`tf.compat.v1.train.AdamOptimizer` graph (dense, and with
`tf.nn.embedding_lookup`) and, with `SIMDEV_DISCRETE=1`, the demo CNN that
way, soft placement off, against TF CPU's losses; `make test` runs it on
2.18.1 (tests/tf/test_release_lane.py). Measured on 2.18.1, the ops these
models needed beyond the Assign*/ReadVariableOp kernels, all on SIMDEV now:

| model | op (dtypes) | without simdev's kernel | reason TF needs it |
|---|---|---|---|
| Keras SGD with an Embedding | ResourceScatterSub (float32, int32 indices) | placement error (the variable's colocation group) | SGD's sparse update of the Embedding rows |
| `tf.compat.v1.train.AdamOptimizer` | ResourceApplyAdam (float32) | placement error | v1 Adam's fused dense update |
| the same with `tf.nn.embedding_lookup` | ResourceGather, ResourceScatterAdd (float32, int32 indices) | placement error | the lookup, and Adam's sparse slot updates |
| LSTM (Keras 3's `tf.while_loop`), its gradient loop | ZerosLike, AddN (T=variant: TensorLists) | ran on the CPU even with soft placement off (TF builds these gradient nodes with no requested device), adding SIMDEV memory in host code | simdev registers them through TF_AddNVariant/TF_ZerosLikeVariant |

On 2.19-2.21 none of these kernels can be registered: no library of those
wheels exports kernels_experimental.h's functions (the drift report of
docs/tf-releases.md), so the workaround above is the way there.
"""


if __name__ == "__main__":
    main()
