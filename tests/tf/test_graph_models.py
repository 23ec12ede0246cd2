"""Whole training steps with simdev's graph passes on and off.

The Keras CNN and MLP of examples/training.py (Adam) and MobileNetV2 of the
coverage models (tests/tf/test_models.py's keras.applications model,
weights=None, 32x32x3, SGD; batch 2 here, 4 there) train a few steps on SIMDEV twice in one child
process: once with the plugin optimizer on (simdev's passes, the default)
and once with it off (RewriterConfig.use_plugin_optimizers, read when TF
instantiates a function: each run has its own tf.function, instantiated
after the switch; graphutil.plugin_optimizers). Soft placement is off while
stepping, so every op of a SIMDEV step ran on SIMDEV.

Asserted:
- the passes did rewrite the step (a fused op on SIMDEV in the post-
  optimization graph with them, none without): the comparison is not
  vacuous;
- CNN and MLP: losses and final weights with passes on == passes off, bit
  for bit: the fused kernels evaluate the same float operations in the
  same order as the unfused ones (a difference there is a fusion bug, not
  rounding);
- MobileNetV2: on vs off within test_models.py's bound, the sensitivity
  measured on SIMDEV with the passes off. Not bit for bit: from the second
  step on, the losses differ (0.743 vs 0.888 at step 2 on the machine that
  wrote this) with the elementwise pass on and only then (remap alone is
  bit for bit), although every fused program of this step, run directly on
  random inputs, equals its unfused chain bit for bit. The cause is not
  isolated; a candidate: TF's later meta-optimizer iterations (arithmetic
  optimizer) rewrite the fused and the unfused graph differently. At batch
  2 with BatchNorm the model amplifies one rounding difference into such a
  loss change (test_models.py measured it);
- CNN and MLP: the losses and final weights also match TF's CPU within
  test_models.py's bound (its EPS, FACTOR, FLOOR: FACTOR x the measured
  sensitivity of the same steps on the CPU to a perturbation of the
  weights and inputs by EPS, + FLOOR x the scale). MobileNetV2 vs the CPU
  with the passes on (the default) is test_models.py's test already.

One child per model; ResNet50, EfficientNetB0 and DenseNet121 are left out:
each costs minutes of building and tracing three times on 2 CPUs.
"""
import numpy as np
import pytest

from graphutil import IMPORT
from test_models import EPS, FACTOR, FLOOR

STEPS = 3

CHILD = IMPORT + r"""
import os, sys
import numpy as np
import keras

KIND = %(kind)r
STEPS = %(steps)d
EPS = %(eps)r
sys.path.insert(0, os.path.join(%(root)r, "examples"))
import training

SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"


def make(device):
    # Keras' initializers run a few eager int ops without SIMDEV kernels:
    # build with soft placement, step without it.
    tf.config.set_soft_device_placement(True)
    try:
        if KIND in ("cnn", "mlp"):
            model, step = training.make_trainer(KIND, device)
            xs, ys = training.synthetic_data(KIND, STEPS)
            return model, step, xs, ys
        with tf.device(device):
            keras.utils.set_random_seed(11)
            model = getattr(keras.applications, KIND)(
                weights=None, input_shape=(32, 32, 3), classes=3)
            opt = keras.optimizers.SGD(0.01)
            opt.build(model.trainable_variables)
            loss_fn = keras.losses.SparseCategoricalCrossentropy()

            @tf.function(jit_compile=False)
            def step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True))
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss
        rng = np.random.default_rng(2024)
        xs = [rng.uniform(0, 255, size=(2, 32, 32, 3)).astype(np.float32)
              for _ in range(STEPS)]
        ys = [np.array([0, 2], np.int32)] * STEPS
        return model, step, xs, ys
    finally:
        tf.config.set_soft_device_placement(False)


def train(device, passes, weights=None, perturb=None):
    model, step, xs, ys = make(device)
    if weights is not None:
        model.set_weights(weights)
    if perturb is not None:
        xs = [perturb(x) for x in xs]
    graphutil.plugin_optimizers(passes)
    losses, fused, layout = [], [], {}
    try:
        with tf.device(device):
            batches = [(tf.constant(x), tf.constant(y)) for x, y in zip(xs, ys)]
            for i, (x, y) in enumerate(batches):
                if i == 0:  # the first call instantiates: read its graph
                    c = graphutil.collect(step, x, y)
                    loss = c.result
                    fused = sorted({n.op for n in graphutil.nodes(c.post)
                                    if n.op.startswith("_") and "Fused" in n.op
                                    and "SIMDEV" in n.device})
                    layout = {
                        "transposes": len(graphutil.nodes(c.post, "Transpose")),
                        "formats": sorted({
                            f"{n.op}:{graphutil.attr(n, 'data_format')}"
                            for n in graphutil.nodes(c.post, device="SIMDEV")
                            if graphutil.attr(n, "data_format") is not None})}
                else:
                    loss = step(x, y)
                losses.append(float(loss.numpy()))
    finally:
        graphutil.plugin_optimizers(True)
    return {"losses": losses, "w": [np.asarray(w) for w in model.get_weights()],
            "fused": fused, "layout": layout}


def perturber(seed):
    r = np.random.default_rng(seed)
    def perturb(a):
        if a.dtype.kind != "f":
            return a
        return (a * (1 + EPS * r.choice([-1.0, 1.0], a.shape))).astype(a.dtype)
    return perturb


def rows(base, other, pert):
    # Per tensor: |other - base|, the sensitivity |pert - base|, the scale.
    out = []
    def flat(d):
        return [np.array(d["losses"])] + d["w"]
    names = ["losses"] + [f"w{i}" for i in range(len(base["w"]))]
    for name, b, p, s in zip(names, flat(base), flat(pert), flat(other)):
        b, p, s = (np.asarray(v, dtype=np.float64) for v in (b, p, s))
        if b.size == 0:
            continue
        out.append({"name": name, "diff": float(np.max(np.abs(s - b))),
                    "sens": float(np.max(np.abs(p - b))),
                    "scale": float(np.max(np.abs(b)))})
    return out


@check("on_off")
def _():
    on = train(SIM, True)
    off = train(SIM, False)
    diffs = [float(np.max(np.abs(a.astype(np.float64) - b)))
             if a.size else 0.0 for a, b in zip(on["w"], off["w"])]
    res = {"fused_on": on["fused"], "fused_off": off["fused"],
           "layout_on": on["layout"], "layout_off": off["layout"],
           "losses_on": on["losses"], "losses_off": off["losses"],
           "weights": len(diffs), "max_weight_diff": max(diffs),
           "finite": bool(all(np.all(np.isfinite(w)) for w in on["w"]))}
    if KIND not in ("cnn", "mlp"):
        # Not bit for bit (see the module doc): the bound, from the passes-off
        # step's own sensitivity on SIMDEV.
        p = perturber(7)
        w0 = make(SIM)[0].get_weights()
        pert = train(SIM, False, weights=[p(w) for w in w0], perturb=p)
        res["rows"] = rows(off, on, pert)
    return res


if KIND in ("cnn", "mlp"):
    @check("vs_cpu")
    def _():
        # The same initial weights on every side: the SIMDEV model's.
        w0 = make(SIM)[0].get_weights()
        sim = train(SIM, True, weights=w0)
        base = train(CPU, True, weights=w0)
        p = perturber(7)
        pert = train(CPU, True, weights=[p(w) for w in w0], perturb=p)
        return {"rows": rows(base, sim, pert), "losses_sim": sim["losses"],
                "losses_cpu": base["losses"]}
"""

MODELS = ["cnn", "mlp", "MobileNetV2"]
# Passes on == off bit for bit for these; MobileNetV2 within the bound.
BIT_EXACT = {"cnn", "mlp"}
# What the passes must have fused in each model's step (at least).
EXPECT_FUSED = {"cnn": {"_FusedConv2D", "_FusedMatMul"},
                "mlp": {"_FusedMatMul"},
                "MobileNetV2": {"_FusedMatMul"}}


@pytest.fixture(scope="module")
def runs(run_tf):
    import os
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    cache = {}

    def get(kind):
        if kind not in cache:
            cache[kind] = run_tf(CHILD % {"kind": kind, "steps": STEPS,
                                          "eps": EPS, "root": root},
                                 timeout=600)
        return cache[kind]
    return get


def within_bound(rows):
    """test_models.py's rule: max|a - b| <= FACTOR * sensitivity + FLOOR *
    scale, per tensor; returns the failures."""
    assert len(rows) >= 3
    failed = []
    for row in rows:
        bound = FACTOR * row["sens"] + FLOOR * row["scale"]
        if not row["diff"] <= bound:
            failed.append(f"{row['name']}: diff {row['diff']:.3g} > "
                          f"bound {bound:.3g} (sensitivity {row['sens']:.3g}, "
                          f"scale {row['scale']:.3g})")
    return failed


@pytest.mark.parametrize("kind", MODELS)
def test_passes_on_equal_off(runs, kind):
    d = runs(kind).data("on_off")
    # Not vacuous: the passes rewrote the step, and only when on.
    assert EXPECT_FUSED[kind] <= set(d["fused_on"]), d["fused_on"]
    assert d["fused_off"] == [], d["fused_off"]
    assert d["finite"]
    assert len(d["losses_on"]) == STEPS
    assert all(np.isfinite(d["losses_on"])), d["losses_on"]
    assert d["weights"] > 0
    if kind in BIT_EXACT:
        assert d["losses_on"] == d["losses_off"], \
            (d["losses_on"], d["losses_off"])
        assert d["max_weight_diff"] == 0.0, d["max_weight_diff"]
    else:
        failed = within_bound(d["rows"])
        assert not failed, f"{kind}: passes on vs off:\n" + "\n".join(
            failed[:20]) + f"\nlosses on {d['losses_on']} off {d['losses_off']}"


@pytest.mark.parametrize("kind", ["cnn", "MobileNetV2"])
def test_no_layout_transposes_on_simdev(runs, kind):
    """TF's layout optimizer converts only devices of type GPU: it leaves
    SIMDEV's convolutions NHWC and inserts no Transpose, with the passes on
    or off (docs/graph-optimizer.md, "Layout"). If a TF release starts to,
    this fails, and simdev's configs or a layout pass need another look."""
    d = runs(kind).data("on_off")
    for side in ("layout_on", "layout_off"):
        lay = d[side]
        assert lay["transposes"] == 0, (side, lay)
        assert lay["formats"], (side, lay)  # the convolutions were seen
        assert all(f.endswith(":NHWC") for f in lay["formats"]), (side, lay)


@pytest.mark.parametrize("kind", ["cnn", "mlp"])
def test_passes_on_match_cpu(runs, kind):
    d = runs(kind).data("vs_cpu")
    failed = within_bound(d["rows"])
    assert not failed, f"{kind}: SIMDEV vs CPU:\n" + "\n".join(failed) + \
        f"\nlosses SIMDEV {d['losses_sim']} CPU {d['losses_cpu']}"
