"""Small Keras 3 models and a training loop, shared by the demo, the
placement report, the training tests and the benchmarks.

Everything lives on one device: `train(kind, device, steps)` builds the model,
the optimizer state and the data under `tf.device(device)`, from a fixed seed,
so SIMDEV and CPU runs start from identical weights and see identical batches.
The step is one tf.function (forward, softmax cross-entropy, gradients, Adam),
which is what `model.fit` runs too; a hand-written loop just gives exact
per-step losses to compare.
"""
import time

import numpy as np

BATCH = 32
CLASSES = 10


def synthetic_data(kind, batches, seed=1234):
    """Learnable synthetic data: class-dependent means plus noise."""
    rng = np.random.default_rng(seed)
    shape = (28, 28, 1) if kind == "cnn" else (64,)
    centers = rng.normal(size=(CLASSES,) + shape).astype(np.float32)
    noise = 1.0 if kind == "cnn" else 2.0
    xs, ys = [], []
    for _ in range(batches):
        y = rng.integers(0, CLASSES, size=BATCH).astype(np.int32)
        x = centers[y] + rng.normal(scale=noise, size=(BATCH,) + shape)
        xs.append(x.astype(np.float32))
        ys.append(y)
    return xs, ys


def build_model(kind, seed=7):
    import keras

    keras.utils.set_random_seed(seed)
    layers = keras.layers
    if kind == "mlp":
        return keras.Sequential([
            keras.Input((64,)),
            layers.Dense(128, activation="relu"),
            layers.Dense(64, activation="tanh"),
            layers.Dense(CLASSES),
        ])
    if kind == "cnn":
        return keras.Sequential([
            keras.Input((28, 28, 1)),
            layers.Conv2D(8, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(32, activation="relu"),
            layers.Dense(CLASSES),
        ])
    raise ValueError(f"unknown model kind {kind!r}")


def make_trainer(kind, device, lr=1e-3):
    """(model, step) with every variable created on `device`."""
    import keras
    import tensorflow as tf

    with tf.device(device):
        model = build_model(kind)
        opt = keras.optimizers.Adam(learning_rate=lr)
        opt.build(model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

    return model, step


def train(kind, device, steps=50, data=None):
    """Trains `steps` steps on `device`; returns (losses, seconds per step
    after the first, which includes tracing)."""
    import tensorflow as tf

    xs, ys = data if data is not None else synthetic_data(kind, steps)
    model, step = make_trainer(kind, device)
    losses, times = [], []
    with tf.device(device):
        batches = [(tf.constant(x), tf.constant(y)) for x, y in zip(xs, ys)]
        for i in range(steps):
            x, y = batches[i % len(batches)]
            t0 = time.perf_counter()
            loss = float(step(x, y).numpy())
            times.append(time.perf_counter() - t0)
            losses.append(loss)
    per_step = float(np.median(times[1:])) if len(times) > 1 else times[0]
    return losses, per_step
