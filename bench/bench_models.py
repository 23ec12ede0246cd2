"""Real-model training-step benchmark group: simdev next to TF's CPU device.

    .venv/bin/python bench/bench_models.py [--quick] [--json PATH]

One training step of keras.applications MobileNetV2 and ResNet50
(weights=None, 64x64x3 inputs, batch 4, 10 classes): a tf.function with the
forward pass in training mode (BatchNorm batch statistics), softmax
cross-entropy, gradients and an SGD update, TF's default Grappler
configuration, no XLA. Each side builds the model on its device from the
same seed; the step's loss is fetched (.numpy()) inside the timing, and the
sides alternate call by call. The model is built with soft placement on
(Keras's initializers run a few eager int ops), the steps run with soft
placement off, so every op of a timed SIMDEV step ran on SIMDEV; a kernel
simdev lacks stops the group with its name.

--quick: MobileNetV2 only, 3 repetitions (the harness's smoke run in make
test: building and tracing ResNet50 on both devices cost it half a minute
more and showed nothing the first model does not).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from common import CPU, SIM  # noqa: E402

GROUP = "models"
MODELS = ["MobileNetV2", "ResNet50"]
SHAPE = (64, 64, 3)
BATCH = 4
CLASSES = 10
REPS = {"MobileNetV2": 30, "ResNet50": 20}
QUICK_REPS = {"MobileNetV2": 3}  # the models --quick runs


def make_step(name, dev, x, y):
    import keras

    tf.config.set_soft_device_placement(True)
    try:
        with tf.device(dev):
            keras.utils.set_random_seed(7)
            model = getattr(keras.applications, name)(
                weights=None, input_shape=SHAPE, classes=CLASSES,
                classifier_activation=None)
            opt = keras.optimizers.SGD(learning_rate=0.01)
            opt.build(model.trainable_variables)
            loss_fn = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True)
            tx, ty = tf.constant(x), tf.constant(y)
    finally:
        tf.config.set_soft_device_placement(False)

    @tf.function(jit_compile=False)
    def step(a, b):
        with tf.GradientTape() as tape:
            loss = loss_fn(b, model(a, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def call():
        with tf.device(dev):  # the function runs where its scope says
            return step(tx, ty)

    return call, lambda: call().numpy()


def model_case(name, reps):
    title = f"train step {name} {SHAPE[0]}x{SHAPE[1]} b{BATCH}"
    common.progress(f"[{GROUP}] {title}: {reps} steps x 2 sides")
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, size=(BATCH,) + SHAPE).astype(np.float32)
    y = rng.integers(0, CLASSES, size=BATCH).astype(np.int32)
    fns = {}
    for side, dev, kind in (("simdev", SIM, "SIMDEV"), ("tf_cpu", CPU, "CPU")):
        call, f = make_step(name, dev, x, y)
        try:
            loss = common.check_device(call(), kind, title)  # + tracing
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
            lines = str(e).strip().splitlines()
            why = next((l for l in lines if "No registered" in l
                        or "Could not satisfy" in l), lines[0])
            sys.exit(f"bench {GROUP}: {title} does not run on {kind} with "
                     f"soft placement off: {why.strip()[:400]}")
        assert np.isfinite(loss.numpy()), (title, side, loss)
        fns[side] = f
    samples = common.alternate(fns, reps, rounds=reps, warmup=0)
    return common.case(GROUP, title, samples)


def run(quick=False):
    reps = QUICK_REPS if quick else REPS
    cases = [model_case(name, reps[name]) for name in MODELS if name in reps]
    info = common.base_info(tf, quick)
    info.update({"batch": BATCH, "input": list(SHAPE), "classes": CLASSES,
                 "optimizer": "SGD", "jit_compile": False})
    return common.result(GROUP, cases, info)


def main(argv=None):
    return common.main(run, __doc__, argv)


if __name__ == "__main__":
    main()
