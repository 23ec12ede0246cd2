"""The resource-variable kernels (src/kernels/variables/): ReadVariableOp,
AssignVariableOp, AssignAddVariableOp and AssignSubVariableOp on SIMDEV.

simdev registers them only where TensorFlow's libtensorflow_framework.so.2
exports kernels_experimental.h's functions: 2.16-2.18. 2.19-2.21 export
none of them, so there simdev registers nothing and TF's DEVICE_DEFAULT
kernels serve variables on SIMDEV (docs/kernel-api.md, "Variables").
test_registered_where_tf_exports_them checks both halves of that on the
installed TF; every other test needs the kernels and is skipped, saying
why, on 2.19 and later.

What the tests hold the kernels to, in TF children with soft placement off:
  - values: tf.Variable creation, assign, assign_add, assign_sub and reads,
    eagerly and in a tf.function, bit for bit against NumPy, and TF CPU
    against the same reference. Assign and read move bytes (random bit
    patterns, NaNs included). An update is one IEEE addition per element
    (for half and bfloat16: in float32, then rounded to nearest even, as
    both Eigen and NumPy/ml_dtypes do); on the same operands it has one
    correctly rounded result, so the comparison is exact. The update
    operands lie in +-[0.25, 8): no subnormal operand or result, whose
    flushing (TF's threads and simdev's workers flush them, NumPy does not)
    would be a difference of mode, not of arithmetic;
  - copy-on-write: a read taken before an update keeps the old value (TF's
    helpers copy the shared buffer inside the update, and simdev queues the
    copy before the update, under the variable's mutex); concurrent updates
    and reads from four threads lose no update and never see a half-done one;
  - SIMDEV_DISCRETE=1 (device memory that host code cannot touch): the whole
    script again, and a Keras model.fit whose SGD updates run as simdev's
    AssignSubVariableOp on SIMDEV's stream (the trace) - TF's DEFAULT
    kernels fault there (tests/tf/test_discrete.py);
  - bad inputs: the error TF CPU gives, from the SIMDEV kernel; and the
    differences the C API forces, pinned (SIMDEV_DIVERGENCES below).
"""
import json
import os

import numpy as np
import pytest

from conftest import (assert_error_like_cpu, error_rows, assert_kernel_error,
                      simdev_variable_kernels, tf_minor)

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")
OPS = ("ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp",
       "AssignSubVariableOp")
FUNCTIONS = ("TF_AssignVariable", "TF_MaybeLockVariableInputMutexesInOrder",
             "TF_ReleaseVariableInputLockHolder", "TF_GetInputTensorFromVariable")
# No int32: TF makes no int32 variable on SIMDEV (its DEVICE_DEFAULT
# VarHandleOp leaves int32 out, as its GPU kernels do: int32 variables live
# on the host); test_registered_types checks the lists against it.
MOVE = ["bfloat16", "bool", "complex128", "complex64", "float16", "float32",
        "float64", "int16", "int64", "int8", "uint8"]
UPDATE = ["bfloat16", "float16", "float32", "float64", "int16", "int64", "int8",
          "uint8"]


MINOR = tf_minor()
HAVE = simdev_variable_kernels()
NEEDS_KERNELS = pytest.mark.skipif(
    not HAVE, reason=f"TensorFlow 2.{MINOR} exports none of kernels_experimental.h's "
    "variable functions, so simdev registers no variable kernels (TF's DEVICE_DEFAULT "
    "kernels serve variables on SIMDEV); test_registered_where_tf_exports_them checks that")

# Where simdev's kernels cannot do what TF's own do (the C API's limits;
# src/kernels/variables/resource_ops.c and docs/kernel-api.md, "Variables").
SIMDEV_DIVERGENCES = {
    "read missing": "a handle naming no variable: TF_MaybeLockVariableInputMutexesInOrder "
                    "reports Internal \"Invalid variable reference.\" into the op before "
                    "any lookup could say FailedPrecondition (TF CPU's ReadVariableOp)",
    "update missing": "the same for AssignAdd/Sub (TF CPU: NotFound); TF_AssignUpdateVariable, "
                      "which would look it up itself, abort()s the process instead",
    "assign dtype": "TF_AssignVariable does not compare the variable's dtype with the "
                    "value's, and no C call can read a variable without failing the op when "
                    "it does not exist yet (AssignVariableOp must create it then): an eager "
                    "raw AssignVariableOp of another dtype retypes the variable, and the next "
                    "read of the old dtype fails. tf.Variable.assign converts the value and "
                    "a tf.function refuses the node when tracing, on CPU and SIMDEV alike",
}

REGISTRY = r'''
import ctypes, os
import tensorflow as tf
from tensorflow.python.framework import kernels

@check("exports")
def _():
    lib = ctypes.CDLL(os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2"))
    return {f: hasattr(lib, f) for f in %(functions)r}

@check("registered")
def _():
    out = {}
    for op in %(ops)r:
        ks = [k for k in kernels.get_registered_kernels_for_op(op).kernel
              if k.device_type == "SIMDEV"]
        out[op] = {"types": sorted(tf.as_dtype(t).name for k in ks for c in k.constraint
                                   if c.name == "dtype" for t in c.allowed_values.list.type),
                   "host_memory": sorted({h for k in ks for h in k.host_memory_arg}),
                   "kernels": len(ks)}
    # the dtypes a variable on SIMDEV can have: those of the VarHandleOp
    # kernel TF's DEVICE_DEFAULT gives it
    out["VarHandleOp DEFAULT"] = sorted(
        tf.as_dtype(t).name for k in kernels.get_registered_kernels_for_op("VarHandleOp").kernel
        if k.device_type == "DEFAULT" for c in k.constraint if c.name == "dtype"
        for t in c.allowed_values.list.type)
    return out
''' % {"functions": FUNCTIONS, "ops": OPS}

SCRIPT = REGISTRY + r'''
import threading
import numpy as np
from tensorflow.python.ops import resource_variable_ops as rvo
from childlib import CPU, SIM, check_errors, collect, npt, rand, same, seed

tf.config.set_soft_device_placement(False)
rng = seed(2818)
R = tf.raw_ops
MOVE = %(move)r
UPDATE = %(update)r

def operands(t, shape):
    """Update operands: floats in +-[0.25, 8) (no subnormal operand or
    result), integers as random bits (the sums wrap)."""
    if np.dtype(npt(t)).kind in "iu":
        return rand(t, shape)
    m = rng.uniform(0.25, 8.0, shape) * rng.choice([-1.0, 1.0], shape)
    return m.astype(np.float32).astype(npt(t))

def life(x0, x1, d, e):
    """A variable's life on the current device: its reads after creation,
    assign, assign_add and assign_sub."""
    v = tf.Variable(x0)
    out = [v.read_value()]
    v.assign(x1)
    out.append(v.read_value())
    if d is not None:
        v.assign_add(d)
        out.append(v.read_value())
        v.assign_sub(e)
        out.append(v.read_value())
    return out

SHAPES = [[2, 3], [7], [], [0, 4], [3, 1, 2, 2], [300000]]

@check("moves")
def _():
    cases = []
    for t in MOVE:
        for sh in SHAPES:
            x0, x1 = rand(t, sh), rand(t, sh)
            cases.append((f"{t} {sh}", lambda a, b: life(a, b, None, None), (x0, x1), [x0, x1]))
    return collect(cases)

@check("updates")
def _():
    cases = []
    for t in UPDATE:
        for sh in SHAPES:
            x0, x1, d, e = (operands(t, sh) for _ in range(4))
            with np.errstate(over="ignore"):  # the integers wrap
                s = x1 + d
                cases.append((f"{t} {sh}", life, (x0, x1, d, e), [x0, x1, s, s - e]))
    return collect(cases)

@check("graph")
def _():
    """The same ops in a tf.function, on a variable made on the device."""
    bad = []
    for t in UPDATE:
        x0, d, e = (operands(t, [5, 3]) for _ in range(3))
        with np.errstate(over="ignore"):
            ref = [x0 + d, x0 + d - e]
        for dev in (SIM, CPU):
            with tf.device(dev):
                v = tf.Variable(x0)
                @tf.function
                def f(d, e):
                    v.assign_add(d)
                    a = v.read_value()
                    v.assign_sub(e)
                    return a, v.read_value()
                outs = f(tf.constant(d), tf.constant(e))
            for o, r in zip(outs, ref):
                if dev == SIM and "SIMDEV:0" not in o.device:
                    bad.append(f"{t}: result on {o.device}")
                if not raw_equal(o.numpy(), r)["equal"]:
                    bad.append(f"{t} on {dev}: {raw_equal(o.numpy(), r)}")
    return {"bad": bad}

@check("copy_on_write")
def _():
    """Reads taken before updates keep their values: TF copies the shared
    buffer inside the update (the copy queued first, under the mutex)."""
    bad = []
    for t in UPDATE:
        for sh in ([4, 5], [200000]):
            x0, d = operands(t, sh), operands(t, sh)
            with np.errstate(over="ignore"):
                ref = [x0, x0, x0 + d, x0 + d - d]
            with tf.device(SIM):
                v = tf.Variable(x0)
                r1 = v.read_value()
                r2 = v.read_value()   # the buffer is r1's too: copied for r2
                v.assign_add(d)       # shared with r1: copied, then updated
                r3 = v.read_value()
                v.assign_sub(d)       # shared with r3: the same
                got = [r1, r2, r3, v.read_value()]
            for i, (g, r) in enumerate(zip(got, ref)):
                e = raw_equal(g.numpy(), r)
                if not e["equal"]:
                    bad.append(f"{t} {sh} read {i}: {e}")
    return {"bad": bad}

@check("threads")
def _():
    """Four threads add ones to one variable while two read it: no update
    is lost, no read sees one half done (every element equal), and each
    reader's values only grow (stream order follows the mutex's order)."""
    n_up, n_rd, steps, size = 4, 2, 100, 4096
    with tf.device(SIM):
        v = tf.Variable(tf.zeros([size], tf.int64))
        one = tf.ones([size], tf.int64)
    errors, torn, backwards = [], [], []
    def update():
        try:
            with tf.device(SIM):
                for _ in range(steps):
                    v.assign_add(one)
        except Exception as e:
            errors.append(repr(e))
    def read():
        last = 0
        try:
            with tf.device(SIM):
                for _ in range(steps):
                    r = v.read_value().numpy()
                    if (r != r[0]).any():
                        torn.append(int(r[0]))
                    if r[0] < last:
                        backwards.append((last, int(r[0])))
                    last = int(r[0])
        except Exception as e:
            errors.append(repr(e))
    ts = [threading.Thread(target=update) for _ in range(n_up)] + \
         [threading.Thread(target=read) for _ in range(n_rd)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    final = v.numpy()
    return {"errors": errors[:3], "torn": torn[:5], "backwards": backwards[:5],
            "final_ok": bool((final == n_up * steps).all()), "final0": int(final[0]),
            "device": v.device}

# ---- errors: TF CPU's class and wording, from the SIMDEV kernel -------------------------
f32 = lambda *sh: operands("float32", sh)
f64 = lambda *sh: operands("float64", sh)
ERRORS = [
    ("ReadVariableOp dtype", lambda x: R.ReadVariableOp(resource=tf.Variable(x).handle, dtype=tf.int32), [f32(2, 3)], "Trying to read variable with wrong dtype. Expected int32 got float"),
    ("AssignAddVariableOp dtype", lambda x, y: R.AssignAddVariableOp(resource=tf.Variable(x).handle, value=y), [f32(3), f64(3)], "DType of variable handle and value does not match."),
    ("AssignSubVariableOp dtype", lambda x, y: R.AssignSubVariableOp(resource=tf.Variable(x).handle, value=y), [f64(3), f32(3)], "DType of variable handle and value does not match."),
    ("AssignAddVariableOp shape", lambda x, y: R.AssignAddVariableOp(resource=tf.Variable(x).handle, value=y), [f32(2, 3), f32(3)], "Cannot update variable with shape [2,3] using a Tensor with shape [3], shapes must be equal."),
    ("AssignSubVariableOp shape", lambda x, y: R.AssignSubVariableOp(resource=tf.Variable(x).handle, value=y), [f32(2, 3), f32(3, 2)], "Cannot update variable with shape [2,3] using a Tensor with shape [3,2], shapes must be equal."),
    ("AssignVariableOp validate_shape", lambda x, y: R.AssignVariableOp(resource=tf.Variable(x).handle, value=y, validate_shape=True), [f32(2, 3), f32(3, 2)], "Trying to assign to variable with tensor with wrong shape. Expected [2,3] got [3,2]"),
]

def after():
    x, d = operands("float32", [3]), operands("float32", [3])
    return same(lambda a, b: life(a, a, b, b), (x, d), [x, x, x + d, x + d - d])[0] == ""

check_errors(ERRORS, after)

@check("validate_shape off")
def _():
    """Without validate_shape an assign may change the shape (on both)."""
    out = {}
    for dev in (SIM, CPU):
        with tf.device(dev):
            v = tf.Variable(tf.zeros([2, 3]))
            R.AssignVariableOp(resource=v.handle, value=tf.ones([3]), validate_shape=False)
            r = v.read_value()
        out[dev] = [r.numpy().tolist(), r.device.split("/")[-1]]
    return out

def named_handle(dev, name):
    """A handle naming a variable nobody made (TF1's VarHandleOp before its
    initializer ran)."""
    with tf.device(dev):
        return R.VarHandleOp(dtype=tf.float32, shape=[2], shared_name=f"{name}_{dev[-8:]}")

def outcome(fn):
    try:
        r = fn()
        return ["", r.numpy().tolist() if r is not None else None]
    except Exception as e:
        return [type(e).__name__, str(e)[:1500]]

@check("uninitialized")
def _():
    out = {}
    for dev in (SIM, CPU):
        with tf.device(dev):
            h = named_handle(dev, "read_me")
            out[f"read missing {dev}"] = outcome(lambda: R.ReadVariableOp(resource=h, dtype=tf.float32))
            h2 = named_handle(dev, "add_me")
            out[f"update missing {dev}"] = outcome(lambda: R.AssignAddVariableOp(resource=h2, value=tf.ones([2])))
            # TF2's uninitialized variable: an anonymous handle, its Var made
            # by VarHandleOp, no value yet; reading gives an empty tensor.
            u = rvo.UninitializedVariable(shape=[2], dtype=tf.float32)
            out[f"read uninitialized {dev}"] = outcome(lambda: u.read_value())
            # the named variable's initializer (AssignVariableOp) makes it
            R.AssignVariableOp(resource=h, value=tf.constant([1.5, -2.0]))
            out[f"read after init {dev}"] = outcome(lambda: R.ReadVariableOp(resource=h, dtype=tf.float32))
    out["after"] = after_ok(after)
    return out

@check("assign dtype")
def _():
    out = {}
    for dev in (SIM, CPU):
        with tf.device(dev):
            # a float64 value: a dtype simdev's AssignVariableOp has (int32
            # would go to TF's DEFAULT kernel, which checks)
            v = tf.Variable(tf.zeros([2]))
            out[f"assign {dev}"] = outcome(lambda: R.AssignVariableOp(
                resource=v.handle, value=tf.constant([1.0, 2.0], tf.float64)))
            out[f"read {dev}"] = outcome(lambda: R.ReadVariableOp(resource=v.handle, dtype=tf.float32))
            w = tf.Variable(tf.zeros([2]))
            @tf.function
            def g():
                R.AssignVariableOp(resource=w.handle, value=tf.constant([1.0, 2.0], tf.float64))
            out[f"graph {dev}"] = outcome(g)
    return out
''' % {"move": MOVE, "update": UPDATE}

FIT = r'''
import sys
import numpy as np
import tensorflow as tf
import keras
sys.path.insert(0, %(examples)r)
import distribute  # examples/distribute.py: its data, model and SGD settings

tf.config.set_soft_device_placement(False)
x, y, w = distribute.data()

class Losses(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(float(logs["loss"]))

def fit(dev):
    """distribute.fit's model.fit with every variable and the whole train
    step on `dev`. Keras' loop around the step runs eager Optional ops
    (OptionalHasValue) on the default device, which have no SIMDEV kernel
    (TF's GPU has host-memory ones): the loop runs under /CPU:0, and
    train_step, where the forward pass, the gradients and SGD's assign_sub
    are, under `dev`."""
    class OnDevice(keras.Sequential):
        def train_step(self, data):
            with tf.device(dev):
                return super().train_step(data)
    with tf.device(dev):
        m = OnDevice([keras.Input((8,)),
                      keras.layers.Dense(16, activation="relu", kernel_initializer="zeros"),
                      keras.layers.Dense(1, kernel_initializer="zeros")])
        m.set_weights(w)
        m.compile(optimizer=keras.optimizers.SGD(distribute.LR), loss="mse",
                  jit_compile=False)
    cb = Losses()
    cb.seen = []
    with tf.device("/CPU:0"):
        m.fit(x, y, batch_size=distribute.GLOBAL_BATCH, epochs=distribute.EPOCHS,
              shuffle=False, verbose=0, callbacks=[cb])
    return {"losses": cb.seen, "weights": [a.tolist() for a in m.get_weights()],
            "devices": sorted({v.value.device.split("/")[-1] for v in m.trainable_variables})}

@check("fit")
def _():
    return {"sim": fit("/device:SIMDEV:0"), "cpu": fit("/device:CPU:0")}
''' % {"examples": EXAMPLES}


# ---- the registrations, on every release --------------------------------------------

@pytest.fixture(scope="module")
def registry(run_tf):
    return run_tf(REGISTRY)


@pytest.mark.registry
def test_registered_where_tf_exports_them(registry):
    exports, reg = registry.data("exports"), registry.data("registered")
    if HAVE:
        assert exports == {f: True for f in FUNCTIONS}, exports
        assert all(reg[op]["kernels"] > 0 for op in OPS), reg
    else:
        # The reason (docs/kernel-api.md): no library of 2.19-2.21 defines
        # them; and so simdev registers none of the four ops.
        assert exports == {f: False for f in FUNCTIONS}, exports
        assert {op: reg[op] for op in OPS} == \
            {op: {"types": [], "host_memory": [], "kernels": 0} for op in OPS}, reg
    # No int32 VarHandleOp on SIMDEV: why MOVE and UPDATE have no int32.
    assert "int32" not in reg["VarHandleOp DEFAULT"]
    assert set(MOVE) <= set(reg["VarHandleOp DEFAULT"]), reg["VarHandleOp DEFAULT"]
    registry.assert_clean_exit()


# ---- 2.16-2.18: the kernels ----------------------------------------------------------

@pytest.fixture(scope="module")
def v(run_tf):
    return run_tf(SCRIPT, timeout=600)


@pytest.fixture(scope="module")
def discrete(run_tf):
    return run_tf(SCRIPT, env={"SIMDEV_DISCRETE": "1"}, timeout=600)


@pytest.fixture(scope="module")
def fit(run_tf, tmp_path_factory):
    trace = str(tmp_path_factory.mktemp("variables") / "fit_trace.json")
    run = run_tf(FIT, env={"SIMDEV_DISCRETE": "1", "SIMDEV_TRACE": trace,
                           "SIMDEV_TRACE_EVENTS": str(1 << 16)}, timeout=600)
    return run, trace


@NEEDS_KERNELS
@pytest.mark.registry
@pytest.mark.parametrize("op,types", [
    ("ReadVariableOp", MOVE), ("AssignVariableOp", MOVE),
    ("AssignAddVariableOp", UPDATE), ("AssignSubVariableOp", UPDATE)])
def test_registered_types(v, op, types):
    # One kernel per dtype, the handle in host memory (TF's GPU kernels too).
    assert v.data("registered")[op] == {"types": types, "host_memory": ["resource"],
                                        "kernels": len(types)}


@NEEDS_KERNELS
@pytest.mark.parametrize("mode", ["plain", "discrete"])
@pytest.mark.parametrize("name", ["moves", "updates"])
def test_matches_numpy(v, discrete, mode, name):
    d = (v if mode == "plain" else discrete).data(name)
    assert d["count"] == len(MOVE if name == "moves" else UPDATE) * 6
    assert d["nbad"] == 0, f"{d['nbad']} of {d['count']} cases differ: {d['bad']}"
    assert d["ncpu_bad"] == 0, f"TF CPU differs on {d['ncpu_bad']}: {d['cpu_bad']}"


@NEEDS_KERNELS
@pytest.mark.parametrize("mode", ["plain", "discrete"])
@pytest.mark.parametrize("name", ["graph", "copy_on_write"])
def test_graph_and_copy_on_write(v, discrete, mode, name):
    assert (v if mode == "plain" else discrete).data(name) == {"bad": []}


@NEEDS_KERNELS
@pytest.mark.parametrize("mode", ["plain", "discrete"])
def test_threads(v, discrete, mode):
    d = (v if mode == "plain" else discrete).data("threads")
    assert d["errors"] == [] and d["torn"] == [] and d["backwards"] == [], d
    assert d["final_ok"] and d["final0"] == 400, d
    assert d["device"].endswith("device:SIMDEV:0")


def error_cases():
    return error_rows(SCRIPT)


@NEEDS_KERNELS
@pytest.mark.parametrize("name,key", error_cases())
def test_error_like_cpu(v, name, key):
    assert_error_like_cpu(v.data("error " + name), name.split()[0], key)


def test_error_names_found():
    assert len(error_cases()) == 6


@NEEDS_KERNELS
def test_validate_shape_off(v):
    d = v.data("validate_shape off")
    sim, cpu = d["/device:SIMDEV:0"], d["/device:CPU:0"]
    assert sim == [[1.0, 1.0, 1.0], "device:SIMDEV:0"], d
    assert cpu[0] == sim[0], d


@NEEDS_KERNELS
def test_uninitialized(v):
    d = v.data("uninitialized")
    sim, cpu = "/device:SIMDEV:0", "/device:CPU:0"
    # TF2's uninitialized variable reads as an empty tensor on both.
    assert d[f"read uninitialized {sim}"] == d[f"read uninitialized {cpu}"] == ["", []], d
    # A named handle's variable is made by its first AssignVariableOp.
    assert d[f"read after init {sim}"] == d[f"read after init {cpu}"] == ["", [1.5, -2.0]], d
    # A handle naming no variable: TF CPU's classes, and simdev's Internal
    # from the SIMDEV kernel, the process alive (SIMDEV_DIVERGENCES).
    assert d[f"read missing {cpu}"][0] == "FailedPreconditionError", d
    assert "Could not find variable read_me" in d[f"read missing {cpu}"][1], d
    assert d[f"update missing {cpu}"][0] == "NotFoundError", d
    assert "read missing" in SIMDEV_DIVERGENCES and "update missing" in SIMDEV_DIVERGENCES
    assert_kernel_error(d[f"read missing {sim}"], "ReadVariableOp",
                        "Invalid variable reference.", "InternalError")
    assert_kernel_error(d[f"update missing {sim}"], "AssignAddVariableOp",
                        "Invalid variable reference.", "InternalError")
    assert d["after"] is True, d


@NEEDS_KERNELS
def test_assign_of_another_dtype(v):
    d = v.data("assign dtype")
    sim, cpu = "/device:SIMDEV:0", "/device:CPU:0"
    assert d[f"assign {cpu}"][0] == "InvalidArgumentError", d
    assert "Trying to assign variable with wrong dtype. Expected float got double" in \
        d[f"assign {cpu}"][1], d
    assert d[f"read {cpu}"] == ["", [0.0, 0.0]], d
    # SIMDEV_DIVERGENCES["assign dtype"]: accepted, the next read refuses.
    assert "assign dtype" in SIMDEV_DIVERGENCES
    assert d[f"assign {sim}"] == ["", None], d
    assert_kernel_error(d[f"read {sim}"], "ReadVariableOp",
                        "Trying to read variable with wrong dtype. Expected float got double",
                        "InvalidArgumentError")
    # In a tf.function the node is refused while tracing, on both devices.
    for dev in (sim, cpu):
        assert d[f"graph {dev}"][0] == "ValueError", d
        assert "Trying to read variable with wrong dtype. Expected float got double" in \
            d[f"graph {dev}"][1], d


@NEEDS_KERNELS
@pytest.mark.parametrize("mode", ["plain", "discrete"])
def test_clean_exit(v, discrete, mode):
    run = v if mode == "plain" else discrete
    run.assert_clean_exit()
    assert "host access to device memory" not in run.stderr, run.describe()


# ---- Keras model.fit, discrete memory ---------------------------------------------------

# The two devices sum the model's products in other orders: the losses of
# the 8 SGD steps agree to float32 rounding, not bits (tests/tf/
# test_distribute.py's bounds for the same model and data: 2**-16 relative,
# 512 units of float32's roundoff, plus 2**-20 absolute near zero).
RTOL, ATOL = 2.0 ** -16, 2.0 ** -20


def trace_kernels(path):
    """{op type: number of kernel items} on SIMDEV:0's streams."""
    with open(path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    sim = {e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
           and e["args"]["name"] == "SIMDEV:0"}
    out = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel" and e["pid"] in sim:
            t = e.get("args", {}).get("op_type", "")
            out[t] = out.get(t, 0) + 1
    return out


@NEEDS_KERNELS
def test_keras_fit_updates_on_simdev(fit):
    run, trace = fit
    d = run.data("fit")
    run.assert_clean_exit()
    assert "host access to device memory" not in run.stderr, run.describe()
    assert d["sim"]["devices"] == ["device:SIMDEV:0"], d["sim"]
    assert d["cpu"]["devices"] == ["device:CPU:0"], d["cpu"]
    assert len(d["sim"]["losses"]) == len(d["cpu"]["losses"]) == 8, d
    np.testing.assert_allclose(d["sim"]["losses"], d["cpu"]["losses"], rtol=RTOL, atol=ATOL)
    for a, b in zip(d["sim"]["weights"], d["cpu"]["weights"]):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=RTOL, atol=ATOL)
    k = trace_kernels(trace)
    # Every SGD update of the 4 trainable variables in the 8 steps was
    # simdev's AssignSubVariableOp, on SIMDEV's stream; the step itself ran
    # there too.
    assert k.get("AssignSubVariableOp") == 4 * 8, k
    assert k.get("MatMul", 0) >= 8 * 2, k
