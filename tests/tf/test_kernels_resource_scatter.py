"""The sparse resource-variable kernels (src/kernels/variables/gather_ops.c,
scatter_ops.c): ResourceGather, ResourceGatherNd, ResourceScatter{Add,Sub,
Mul,Div,Min,Max,Update} and ResourceScatterNd{Update,Add,Sub,Min,Max} on
SIMDEV.

Like the dense variable kernels (test_kernels_variables.py) they exist only
where TF exports kernels_experimental.h's functions (2.16-2.18):
test_registered_where_tf_exports_them checks both sides; everything else is
skipped, saying why, on 2.19 and later.

What the tests hold the kernels to, in TF children with soft placement off
(every result on SIMDEV):
  - values bit for bit against NumPy, eagerly and in a tf.function, TF CPU
    against the same reference: gathers move bytes (random bit patterns);
    scatters apply the rows one after the other in index order (duplicates
    included), the reference computing row by row in the same order (half
    and bfloat16 through float32, rounded after each row), with operands in
    +-[0.25, 8) (no subnormal result whose flushing would differ by mode);
  - TF CPU's errors for bad indices and shapes, from the SIMDEV kernel;
  - a Keras Embedding layer's forward pass (Keras 3 gathers from the read
    value: GatherV2; tf.nn.embedding_lookup beside it: ResourceGather) and
    an SGD step on its IndexedSlices gradient (Keras 3's TF backend:
    ResourceScatterSub) on SIMDEV;
  - where simdev differs from TF CPU (SIMDEV_DIVERGENCES), pinned.
"""

import pytest

from conftest import assert_error_like_cpu, error_rows, simdev_variable_kernels, tf_minor

GATHER_OPS = ("ResourceGather", "ResourceGatherNd")
SCATTER_OPS = ("ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterMul",
               "ResourceScatterDiv", "ResourceScatterMin", "ResourceScatterMax",
               "ResourceScatterUpdate")
ND_OPS = ("ResourceScatterNdUpdate", "ResourceScatterNdAdd", "ResourceScatterNdSub",
          "ResourceScatterNdMin", "ResourceScatterNdMax")
OPS = GATHER_OPS + SCATTER_OPS + ND_OPS
# TF's GPU registrations less int32 (no int32 variable on SIMDEV) and variant.
NUMBERS = ["bfloat16", "float16", "float32", "float64"]
TYPES = {
    "ResourceGather": sorted(NUMBERS + ["bool", "complex128", "complex64", "int64"]),
    "ResourceGatherNd": NUMBERS,
    **{op: NUMBERS for op in SCATTER_OPS},
    "ResourceScatterUpdate": sorted(NUMBERS + ["bool", "int64"]),
    **{op: sorted(NUMBERS + ["complex128", "complex64", "int64"]) for op in ND_OPS[:3]},
    **{op: sorted(NUMBERS + ["int64"]) for op in ND_OPS[3:]},
}

MINOR = tf_minor()
HAVE = simdev_variable_kernels()
NEEDS_KERNELS = pytest.mark.skipif(
    not HAVE, reason=f"TensorFlow 2.{MINOR} exports none of kernels_experimental.h's "
    "variable functions, so simdev registers no variable kernels (TF's DEVICE_DEFAULT "
    "kernels serve variables on SIMDEV); test_registered_where_tf_exports_them checks that")

SIMDEV_DIVERGENCES = {
    "partial": "a bad index fails the op before anything is written; TF CPU's loop has "
               "applied the rows before it (TF's GPU skips bad indices)",
    "rows": "ResourceScatter* updates whose rows are not params.shape[1:] (but whose rank "
            "and prefix are right): refused; TF CPU reads them as [N, size / N] rows of "
            "another length",
    "scalar var": "ResourceScatter* on a scalar variable: refused; TF CPU reads dim 0 of it",
    "nd dtype": "ResourceScatterNd*, ResourceGather(Nd) with another dtype than the "
                "variable's: InvalidArgument; TF CPU CHECK-fails (aborts the process)",
}

REGISTRY = r'''
import tensorflow as tf
from tensorflow.python.framework import kernels

@check("registered")
def _():
    out = {}
    for op in %(ops)r:
        ks = [k for k in kernels.get_registered_kernels_for_op(op).kernel
              if k.device_type == "SIMDEV"]
        out[op] = {"types": sorted({tf.as_dtype(t).name for k in ks for c in k.constraint
                                    if c.name in ("dtype", "T")
                                    for t in c.allowed_values.list.type}),
                   "host_memory": sorted({h for k in ks for h in k.host_memory_arg}),
                   "kernels": len(ks)}
    return out
''' % {"ops": OPS}

SCRIPT = REGISTRY + r'''
import numpy as np
from childlib import CPU, SIM, check_errors, collect, npt, rand, seed

tf.config.set_soft_device_placement(False)
rng = seed(2819)
R = tf.raw_ops
TYPES = %(types)r

def operands(t, shape):
    """Floats in +-[0.25, 8), complex parts too; int64 random bits."""
    if t == "int64":
        return rand(t, shape)
    if t == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    m = rng.uniform(0.25, 8.0, shape) * rng.choice([-1.0, 1.0], shape)
    if t.startswith("complex"):
        m = m + 1j * rng.uniform(0.25, 8.0, shape)
    return m.astype(np.complex128 if t.startswith("complex") else np.float32).astype(npt(t))

def apply(op, a, b):
    """One row's update in NumPy, as the kernels compute it: 16-bit floats
    through float32 (rounded after the row), int64 wrapping."""
    t = a.dtype
    wide = np.float32 if t.itemsize == 2 and t.kind == "f" or str(t) == "bfloat16" else t
    x, u = a.astype(wide), np.asarray(b).astype(wide)
    with np.errstate(over="ignore"):
        r = {"Add": lambda: x + u, "Sub": lambda: x - u, "Mul": lambda: x * u,
             "Div": lambda: x / u, "Min": lambda: np.where(u < x, u, x),
             "Max": lambda: np.where(x < u, u, x),
             "Update": lambda: np.broadcast_to(u, x.shape)}[op]()
    return r.astype(t)

def ref_rows(op, x, idx, upd):
    """ResourceScatter<op>: rows in index order."""
    y = x.copy()
    flat = np.asarray(idx).reshape(-1)
    scalar = np.ndim(upd) == 0
    u = upd if scalar else np.asarray(upd).reshape((flat.size,) + x.shape[1:])
    for r, i in enumerate(flat):
        y[i] = apply(op, y[i], u if scalar else u[r])
    return y

def ref_nd(op, x, idx, upd):
    idx = np.asarray(idx)
    k = idx.shape[-1]
    y = x.copy()
    rows = idx.reshape(-1, k)
    u = np.asarray(upd).reshape((rows.shape[0],) + x.shape[k:])
    for r, i in enumerate(rows):
        y[tuple(i)] = apply(op, y[tuple(i)], u[r])
    return y

def scatter_fn(op):
    f = getattr(R, op)
    def fn(x, i, u):
        v = tf.Variable(x)
        if "Nd" in op:
            f(ref=v.handle, indices=i, updates=u)
        else:
            f(resource=v.handle, indices=i, updates=u)
        return v.read_value()
    return fn

def graph_fn(op):
    """The same in a tf.function: the variable made outside, on the device."""
    f = getattr(R, op)
    def fn(x, i, u):
        v = tf.Variable(x)
        @tf.function
        def g(i, u):
            if "Nd" in op:
                f(ref=v.handle, indices=i, updates=u)
            else:
                f(resource=v.handle, indices=i, updates=u)
            return v.read_value()
        return g(i, u)
    return fn

IDX = ["int32", "int64"]

@check("gathers")
def _():
    cases = []
    for t in TYPES["ResourceGather"]:
        for it in IDX:
            x = rand(t, [7, 3, 2])
            i = rng.integers(0, 7, [4, 5]).astype(it)
            i[0, :2] = 6  # duplicates
            g = lambda x, i: R.ResourceGather(resource=tf.Variable(x).handle, indices=i,
                                              dtype=x.dtype)
            cases.append((f"{t} {it}", g, (x, i), np.take(x, i, axis=0)))
            @tf.function
            def gf(x, i):
                return R.ResourceGather(resource=tf.Variable(x).handle, indices=i, dtype=x.dtype)
            cases.append((f"{t} {it} batch_dims=1",
                          lambda x, i: R.ResourceGather(resource=tf.Variable(x).handle,
                                                        indices=i, dtype=x.dtype, batch_dims=1),
                          (x[:4], np.mod(i[:, :2], 3)),
                          np.stack([x[b][np.mod(i[b, :2], 3)] for b in range(4)])))
            cases.append((f"{t} {it} scalar index",
                          lambda x, i: R.ResourceGather(resource=tf.Variable(x).handle,
                                                        indices=i, dtype=x.dtype),
                          (x, np.array(3, it)), x[3]))
            cases.append((f"{t} {it} empty", lambda x, i: R.ResourceGather(
                resource=tf.Variable(x).handle, indices=i, dtype=x.dtype),
                          (x, np.zeros([0, 2], it)), np.zeros([0, 2, 3, 2], x.dtype)))
    for t in TYPES["ResourceGatherNd"]:
        for it in IDX:
            x = rand(t, [5, 4, 3])
            i = np.stack([rng.integers(0, 5, [6]), rng.integers(0, 4, [6])], -1).astype(it)
            i[1] = i[0]
            gnd = lambda x, i: R.ResourceGatherNd(resource=tf.Variable(x).handle, indices=i,
                                                  dtype=x.dtype)
            cases.append((f"nd {t} {it}", gnd, (x, i), x[i[:, 0], i[:, 1]]))
            cases.append((f"nd {t} {it} k=3", gnd, (x, np.mod(i[:, :1].repeat(3, 1), 3)),
                          x[tuple((np.mod(i[:, :1].repeat(3, 1), 3)).T)]))
            cases.append((f"nd {t} {it} k=0", gnd, (x, np.zeros([2, 0], it)),
                          np.stack([x, x])))
    return collect(cases)

@check("gather tf.function")
def _():
    bad = []
    for t in ("float32", "bfloat16", "int64"):
        x = rand(t, [6, 3])
        i = np.array([5, 0, 5, 2], np.int64)
        for dev in (SIM, CPU):
            with tf.device(dev):
                v = tf.Variable(x)
                @tf.function
                def f(i):
                    return tf.gather(v, i), v.sparse_read(i)
                for o in f(tf.constant(i)):
                    if dev == SIM and "SIMDEV:0" not in o.device:
                        bad.append(f"{t}: on {o.device}")
                    if not raw_equal(o.numpy(), x[i])["equal"]:
                        bad.append(f"{t} {dev}: {raw_equal(o.numpy(), x[i])}")
    return {"bad": bad}

@check("scatters")
def _():
    cases = []
    for op in %(scatter_ops)r:
        name = op[len("ResourceScatter"):]
        for t in TYPES[op]:
            # TF's GPU has Update on bool only with int32 indices, on int64
            # only with int64 ones
            for it in {"bool": ["int32"], "int64": ["int64"]}.get(t, IDX):
                x = operands(t, [6, 3])
                i = rng.integers(0, 6, [2, 4]).astype(it)
                i[0, 0] = i[1, 3] = i[0, 2]  # three rows to one place
                u = operands(t, [2, 4, 3])
                if name == "Div":  # divisors away from 0 anyway (+-[0.25, 8))
                    pass
                ref = ref_rows(name, x, i, u)
                cases.append((f"{op} {t} {it}", scatter_fn(op), (x, i, u), ref))
                cases.append((f"{op} {t} {it} graph", graph_fn(op), (x, i, u), ref))
                s = operands(t, [])
                cases.append((f"{op} {t} {it} scalar update", scatter_fn(op),
                              (x, i, s), ref_rows(name, x, i, s)))
                cases.append((f"{op} {t} {it} scalar index", scatter_fn(op),
                              (x, np.array(2, it), u[0, 0]), ref_rows(name, x, [2], u[0, 0])))
    return collect(cases)

@check("nd scatters")
def _():
    cases = []
    for op in %(nd_ops)r:
        name = op[len("ResourceScatterNd"):]
        for t in TYPES[op]:
            for it in IDX:
                x = operands(t, [4, 3, 2])
                i = np.stack([rng.integers(0, 4, [5]), rng.integers(0, 3, [5])], -1).astype(it)
                i[3] = i[0]  # a duplicate
                u = operands(t, [5, 2])
                ref = ref_nd(name, x, i, u)
                cases.append((f"{op} {t} {it}", scatter_fn(op), (x, i, u), ref))
                cases.append((f"{op} {t} {it} graph", graph_fn(op), (x, i, u), ref))
                i1 = i[:, :1]
                u1 = operands(t, [5, 3, 2])
                cases.append((f"{op} {t} {it} k=1", scatter_fn(op), (x, i1, u1),
                              ref_nd(name, x, i1, u1)))
    return collect(cases)

@check("embedding")
def _():
    """A Keras Embedding's forward pass and one SGD step on its sparse
    gradient, all on SIMDEV; the same on CPU; the ops that ran."""
    import keras
    out = {}
    ids = np.array([[1, 4, 4], [0, 7, 1]], np.int32)
    for dev in (SIM, CPU):
        with tf.device(dev):
            tf.keras.utils.set_random_seed(5)
            emb = keras.layers.Embedding(8, 4, embeddings_initializer="ones")
            emb.build((None, 3))
            opt = keras.optimizers.SGD(0.5)
            @tf.function
            def step(ids):
                with tf.GradientTape() as tape:
                    y = emb(ids)
                    # tf.nn's lookup on the variable: a ResourceGather
                    # (Keras 3's layer reads the variable and gathers)
                    z = tf.nn.embedding_lookup(emb.embeddings.value, ids)
                    loss = tf.reduce_sum(y * y) + tf.reduce_sum(z * 0.0)
                g = tape.gradient(loss, emb.trainable_variables)
                opt.apply_gradients(zip(g, emb.trainable_variables))
                return y, type(g[0]).__name__
            y, gtype = step(tf.constant(ids))
            ops = sorted({n.type for n in step.get_concrete_function(
                tf.constant(ids)).graph.get_operations()})
            out[dev] = {"y": y.numpy().tolist(), "y_dev": y.device,
                        "w": emb.embeddings.numpy().tolist(),
                        "w_dev": emb.embeddings.value.device, "grad": gtype.numpy().decode()
                        if hasattr(gtype, "numpy") else gtype,
                        "ops": [o for o in ops if o.startswith("Resource") or "Gather" in o]}
    return out

# ---- errors: TF CPU's class and wording, from the SIMDEV kernel -------------------------
f32 = lambda *sh: operands("float32", sh)
I = lambda *v: np.array(v, np.int32)
def var(x):
    return tf.Variable(x).handle
ERRORS = [
    ("ResourceGather index", lambda x, i: R.ResourceGather(resource=var(x), indices=i, dtype=tf.float32), [f32(4, 3), np.array([[0, 1], [7, 2]], np.int32)], "indices[1,0] = 7 is not in [0, 4)"),
    ("ResourceGather negative", lambda x, i: R.ResourceGather(resource=var(x), indices=i, dtype=tf.float32), [f32(4, 3), I(-1)], "indices[0] = -1 is not in [0, 4)"),
    ("ResourceGather batch index", lambda x, i: R.ResourceGather(resource=var(x), indices=i, dtype=tf.float32, batch_dims=1), [f32(4, 3), np.array([[0], [1], [2], [3]], np.int64)], "indices[3,0] = 12 is not in [0, 4)"),
    ("ResourceGather batch_dims", lambda x, i: R.ResourceGather(resource=var(x), indices=i, dtype=tf.float32, batch_dims=3), [f32(4, 3), np.zeros([4, 1, 1], np.int32)], "params must have at least 3 (batch_dims) dimensions but it has shape [4,3]"),
    ("ResourceGather scalar", lambda x, i: R.ResourceGather(resource=var(x), indices=i, dtype=tf.float32), [f32(), I(0)], "params must be at least 1 dimensional"),
    ("ResourceGatherNd index", lambda x, i: R.ResourceGatherNd(resource=var(x), indices=i, dtype=tf.float32), [f32(4, 3), np.array([[0, 1], [4, 2]], np.int32)], "indices[1] = [4, 2] does not index into param shape [4,3], node name: ResourceGatherNd"),
    ("ResourceGatherNd depth", lambda x, i: R.ResourceGatherNd(resource=var(x), indices=i, dtype=tf.float32), [f32(4, 3), I(0, 1, 1).reshape(1, 3)], "index innermost dimension length must be <= params rank; saw: 3 vs. 2"),
    ("ResourceScatterAdd index", lambda x, i, u: R.ResourceScatterAdd(resource=var(x), indices=i, updates=u), [f32(4, 3), I(0, 5), f32(2, 3)], "indices[1] = 5 is not in [0, 4)"),
    ("ResourceScatterUpdate index", lambda x, i, u: R.ResourceScatterUpdate(resource=var(x), indices=i, updates=u), [f32(4, 3), np.array([[1], [-2]], np.int64), f32(2, 1, 3)], "indices[1,0] = -2 is not in [0, 4)"),
    ("ResourceScatterMul prefix", lambda x, i, u: R.ResourceScatterMul(resource=var(x), indices=i, updates=u), [f32(4, 3), I(0, 1), f32(3, 2)], "The shape of indices ([2]) must be a prefix of the shape of updates ([3,2])"),
    ("ResourceScatterSub rank", lambda x, i, u: R.ResourceScatterSub(resource=var(x), indices=i, updates=u), [f32(4, 3), I(0, 1), f32(6)], "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], got updates.shape [6], indices.shape [2], params.shape [4,3]"),
    ("ResourceScatterMax dtype", lambda x, i, u: R.ResourceScatterMax(resource=var(x), indices=i, updates=u), [f32(4, 3), I(0), np.ones([1, 3])], "DType of scatter resource and updates does not match."),
    ("ResourceScatterNdAdd index", lambda x, i, u: R.ResourceScatterNdAdd(ref=var(x), indices=i, updates=u), [f32(4, 3), np.array([[0], [9], [1]], np.int64), f32(3, 3)], "indices[1] = [9] does not index into shape [4,3]"),
    ("ResourceScatterNdUpdate index", lambda x, i, u: R.ResourceScatterNdUpdate(ref=var(x), indices=i, updates=u), [f32(4, 3), np.array([[[0, 1]], [[1, 7]]], np.int32), f32(2, 1)], "indices[1,0] = [1, 7] does not index into shape [4,3]"),
    ("ResourceScatterNdSub suffix", lambda x, i, u: R.ResourceScatterNdSub(ref=var(x), indices=i, updates=u), [f32(4, 3), I(0, 1).reshape(2, 1), f32(2, 4)], "Dimensions [1,2) of input[shape=[4,3]] must match dimensions [1,2) of updates[shape=[2,4]]"),
    ("ResourceScatterNdMin prefix", lambda x, i, u: R.ResourceScatterNdMin(ref=var(x), indices=i, updates=u), [f32(4, 3), I(0, 1, 2).reshape(3, 1), f32(2, 3)], "Dimensions [0,1) of indices[shape=[3,1]] = 3 must match dimensions [0,1) of updates[shape=[2,3]] = 2"),
]

def after():
    x = operands("float32", [4, 3])
    with tf.device(SIM):
        v = tf.Variable(x)
        R.ResourceScatterAdd(resource=v.handle, indices=[1, 1], updates=tf.ones([2, 3]))
        return raw_equal(v.numpy(), ref_rows("Add", x, [1, 1], np.ones([2, 3], np.float32)))["equal"]

check_errors(ERRORS, after)

def outcome(fn):
    try:
        r = fn()
        return ["", None if r is None else r.numpy().tolist()]
    except Exception as e:
        return [type(e).__name__, str(e)[:1500]]

@check("divergences")
def _():
    out = {}
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for dev in (SIM, CPU):
        with tf.device(dev):
            v = tf.Variable(x)
            e = outcome(lambda: R.ResourceScatterAdd(resource=v.handle, indices=[0, 5],
                                                     updates=tf.ones([2, 3])))
            out[f"partial {dev}"] = [e[0], v.numpy().tolist()]
            w = tf.Variable(x)
            out[f"rows {dev}"] = outcome(lambda: R.ResourceScatterAdd(
                resource=w.handle, indices=[0, 1], updates=tf.ones([2, 4])))
            s = tf.Variable(3.0)
            out[f"scalar var {dev}"] = outcome(lambda: R.ResourceScatterAdd(
                resource=s.handle, indices=0, updates=1.0))
    with tf.device(SIM):  # TF CPU aborts on these
        v = tf.Variable(x)
        out["nd dtype"] = outcome(lambda: R.ResourceScatterNdAdd(
            ref=v.handle, indices=[[0]], updates=tf.ones([1, 3], tf.float64)))
        out["gather dtype"] = outcome(lambda: R.ResourceGather(
            resource=v.handle, indices=[0], dtype=tf.float64))
        out["gather after"] = outcome(lambda: R.ResourceGather(
            resource=v.handle, indices=[3], dtype=tf.float32))
    return out
''' % {"types": TYPES, "scatter_ops": SCATTER_OPS, "nd_ops": ND_OPS}


@pytest.fixture(scope="module")
def registry(run_tf):
    return run_tf(REGISTRY)


@pytest.mark.registry
def test_registered_where_tf_exports_them(registry):
    reg = registry.data("registered")
    if HAVE:
        for op in OPS:
            assert reg[op]["types"] == TYPES[op], (op, reg[op])
            # the handle and the indices in host memory (gather_ops.c says why)
            assert reg[op]["host_memory"] == sorted(
                ["ref" if "Nd" in op and "Gather" not in op else "resource", "indices"]), reg[op]
    else:
        assert {op: reg[op]["kernels"] for op in OPS} == {op: 0 for op in OPS}, reg
    registry.assert_clean_exit()


@pytest.fixture(scope="module")
def s(run_tf):
    return run_tf(SCRIPT, timeout=900)


@NEEDS_KERNELS
@pytest.mark.parametrize("name", ["gathers", "scatters", "nd scatters"])
def test_matches_numpy(s, name):
    d = s.data(name)
    assert d["count"] > 0
    assert d["nbad"] == 0, f"{d['nbad']} of {d['count']} cases differ: {d['bad']}"
    assert d["ncpu_bad"] == 0, f"TF CPU differs on {d['ncpu_bad']}: {d['cpu_bad']}"


@NEEDS_KERNELS
def test_gather_in_tf_function(s):
    assert s.data("gather tf.function") == {"bad": []}


@NEEDS_KERNELS
def test_keras_embedding(s):
    d = s.data("embedding")
    sim, cpu = d["/device:SIMDEV:0"], d["/device:CPU:0"]
    assert sim["y_dev"].endswith("SIMDEV:0") and sim["w_dev"].endswith("SIMDEV:0"), sim
    # Keras 3's TF backend: the layer gathers from the read value (GatherV2),
    # SGD applies the IndexedSlices gradient with a ResourceScatterSub
    # (assign_sub of IndexedSlices); tf.nn.embedding_lookup is a ResourceGather
    assert sim["grad"] == "IndexedSlices", sim
    assert {"GatherV2", "ResourceGather", "ResourceScatterSub"} <= set(sim["ops"]), sim
    assert sim["y"] == cpu["y"] and sim["w"] == cpu["w"], d
    # ones, loss sum(y^2): each looked-up row moves by lr * 2 * count
    assert sim["w"][4] == [-1.0] * 4 and sim["w"][2] == [1.0] * 4, sim["w"]


def error_cases():
    return error_rows(SCRIPT)


def test_error_names_found():
    assert len(error_cases()) == 16


@NEEDS_KERNELS
@pytest.mark.parametrize("name,key", error_cases())
def test_error_like_cpu(s, name, key):
    assert_error_like_cpu(s.data("error " + name), name.split()[0], key)


@NEEDS_KERNELS
def test_divergences(s):
    d = s.data("divergences")
    sim, cpu = "/device:SIMDEV:0", "/device:CPU:0"
    assert set(SIMDEV_DIVERGENCES) == {"partial", "rows", "scalar var", "nd dtype"}
    # a bad index: nothing written on SIMDEV, row 0 already added on CPU
    x = [[float(3 * r + c) for c in range(3)] for r in range(4)]
    assert d[f"partial {sim}"] == ["InvalidArgumentError", x], d
    assert d[f"partial {cpu}"][0] == "InvalidArgumentError", d
    assert d[f"partial {cpu}"][1][0] == [1.0, 2.0, 3.0], d
    # rows of another length, a scalar variable: CPU accepts, SIMDEV refuses
    assert d[f"rows {cpu}"][0] == "" and d[f"scalar var {cpu}"][0] == "", d
    assert d[f"rows {sim}"][0] == "InvalidArgumentError" and \
        "Must have updates.shape = indices.shape + params.shape[1:]" in d[f"rows {sim}"][1], d
    assert d[f"scalar var {sim}"][0] == "InvalidArgumentError" and \
        "params must be at least 1 dimensional" in d[f"scalar var {sim}"][1], d
    assert d["nd dtype"][0] == "InvalidArgumentError" and \
        "DType of scatter resource and updates does not match." in d["nd dtype"][1], d
    assert d["gather dtype"][0] == "InvalidArgumentError" and \
        "Trying to read variable with wrong dtype. Expected double got float" in \
        d["gather dtype"][1], d
    assert d["gather after"] == ["", [[9.0, 10.0, 11.0]]], d
