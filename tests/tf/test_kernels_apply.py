"""The training kernels (src/kernels/variables/apply.c): the ResourceApply*
and ResourceSparseApply* ops TF 2.18.1's GPU registers, on SIMDEV.

Registered only where TF exports kernels_experimental.h's variable
functions (2.16-2.18, as the other variable kernels:
test_kernels_variables.py); on 2.19+ test_registered_where_tf_exports_them
asserts that none is, and the rest skip, saying why.

What the tests hold the kernels to, in TF children with soft placement off
(an op on a SIMDEV variable can only run there; the results' and the
variables' devices are checked too):
  - values: three steps of every op, every dtype (float16, float32,
    float64) and every attribute that changes the update, eager and in a
    tf.function, against a NumPy reference that computes TF CPU's formula
    (training_ops.cc) operation for operation at the dtype (NumPy rounds
    each float16/32 operation as Eigen does). simdev must be bit-equal to
    it (its pow and exp being
    libm's pow and exp, as TF's scalar code calls them). TF CPU is
    bit-equal to simdev where the update has no rsqrt, pow or exp, and
    within CPU_ULPS where it has (Eigen's vectorized functions);
  - the sparse ops: rows at int32 and int64 indices, duplicates applied in
    order (the reference loops over the indices), against the same
    reference and TF CPU;
  - SIMDEV_DISCRETE=1 (device memory host code cannot touch): the same;
  - bad inputs: TF CPU's class and message, from the SIMDEV kernel; the
    differences the C API or TF's own bugs force are pinned
    (SIMDEV_DIVERGENCES);
  - tf.compat.v1's GradientDescent, Momentum and Adam optimizers training a
    small model in a graph Session with every variable and the update ops
    on SIMDEV: the losses match TF CPU's (LOSS_RTOL; the models' matmuls sum
    in another order) and the partition graphs place ResourceApply* on
    SIMDEV.
"""

import numpy as np
import pytest

from conftest import assert_error_like_cpu, error_rows, assert_kernel_error, simdev_variable_kernels, tf_minor

MINOR = tf_minor()
HAVE = simdev_variable_kernels()
NEEDS_KERNELS = pytest.mark.skipif(
    not HAVE, reason=f"TensorFlow 2.{MINOR} exports none of kernels_experimental.h's "
    "variable functions, so simdev registers no training kernels (TF places "
    "ResourceApply* with its variables on the CPU or fails placement); "
    "test_registered_where_tf_exports_them checks that")

DENSE = ["ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyKerasMomentum",
         "ResourceApplyAdam", "ResourceApplyAdamWithAmsgrad", "ResourceApplyAdaMax",
         "ResourceApplyRMSProp", "ResourceApplyCenteredRMSProp", "ResourceApplyAdagrad",
         "ResourceApplyAdagradV2", "ResourceApplyAdadelta", "ResourceApplyProximalAdagrad",
         "ResourceApplyFtrl", "ResourceApplyFtrlV2", "ResourceApplyAddSign",
         "ResourceApplyPowerSign"]
SPARSE = ["ResourceSparseApplyAdadelta", "ResourceSparseApplyAdagrad",
          "ResourceSparseApplyAdagradV2", "ResourceSparseApplyProximalAdagrad",
          "ResourceSparseApplyFtrl", "ResourceSparseApplyFtrlV2",
          "ResourceSparseApplyKerasMomentum"]
# TF 2.18.1's GPU registers none of these (measured with the tensorflow
# 2.18.1 wheel's kernel registry), and simdev neither: TF places them with
# their variable on the CPU, or fails placement.
NOT_ON_GPU = ["ResourceApplyProximalGradientDescent", "ResourceApplyAdagradDA",
              "ResourceSparseApplyMomentum", "ResourceSparseApplyRMSProp",
              "ResourceSparseApplyCenteredRMSProp", "ResourceSparseApplyAdagradDA",
              "ResourceSparseApplyProximalGradientDescent"]
TYPES = ["float16", "float32", "float64"]
# simdev is bit-equal to the NumPy reference in every case (libm's powf /
# expf / pow / exp, as TF's scalar code). TF CPU is bit-equal to simdev
# where the update is + - * / and sqrt only; where Eigen's vectorized
# rsqrt, pow or exp enter (and the sparse ops' own loop for rows of one
# element, which uses pow for Ftrl's lr_power -0.5), TF CPU may be off by
# CPU_ULPS ulps of max(|value|, 2**-6) (the child script's ulps()), and by
# up to CPU_ULPS_POW for Ftrl's lr_power -0.75, whose pow(accum + g*g) -
# pow(accum) cancels most digits.
TRANSCENDENTAL = ("Adagrad ", "Adadelta", "ProximalAdagrad", "PowerSign", "lr_power")
CPU_ULPS = 64
CPU_ULPS_POW = 1024
LOSS_RTOL = 2.0 ** -16

SIMDEV_DIVERGENCES = {
    "complex": "no complex64/complex128 kernels (TF's GPU registers ten of these ops for "
               "them): those variables' ops are placed as without simdev",
    "dtype": "a variable whose dtype is not the op's T: InvalidArgument (TF CPU CHECK-fails, "
             "the process aborts)",
    "values": "the hyperparameters' values are not checked (ProximalAdagrad's 'lr is not a "
              "positive scalar', the sparse Ftrl's 'lr_power is not a non-positive scalar': "
              "their shapes are): they stay in device memory, read on the stream, as TF's GPU "
              "kernels keep them and skip those checks",
    "locking": "the variables are locked whatever use_locking says "
               "(TF_GetInputTensorFromVariable may replace the buffer: variables.h)",
}

REGISTRY = r'''
import ctypes, os
import tensorflow as tf
from tensorflow.python.framework import kernels

@check("registered")
def _():
    out = {}
    for op in %(ops)r:
        ks = [k for k in kernels.get_registered_kernels_for_op(op).kernel
              if k.device_type == "SIMDEV"]
        out[op] = {"kernels": len(ks),
                   "types": sorted({tf.as_dtype(t).name for k in ks for c in k.constraint
                                    if c.name == "T" for t in c.allowed_values.list.type}),
                   "index": sorted({tf.as_dtype(t).name for k in ks for c in k.constraint
                                    if c.name == "Tindices" for t in c.allowed_values.list.type}),
                   "host_memory": sorted({h for k in ks for h in k.host_memory_arg})}
    return out
''' % {"ops": DENSE + SPARSE + NOT_ON_GPU}

SCRIPT = REGISTRY + r'''
import numpy as np
from childlib import CPU, SIM, check_errors, seed

tf.config.set_soft_device_placement(False)
rng = seed(2518)
R = tf.raw_ops
# float32 first: with the kernels omitted (test_kernel_coverage.py) the
# first failure is then the placement error naming the op; half
# ProximalAdagrad has no kernel anywhere then, whose message does not.
TYPES = %(types)r

# ---- the NumPy references: TF CPU's formulas, operation for operation -------------------
import ctypes
LIBM = ctypes.CDLL("libm.so.6")
for _f, _t in (("powf", ctypes.c_float), ("expf", ctypes.c_float), ("pow", ctypes.c_double),
               ("exp", ctypes.c_double)):
    getattr(LIBM, _f).restype = _t
    getattr(LIBM, _f).argtypes = [_t] * (2 if _f.startswith("pow") else 1)

def libm(name, t, *xs):
    """libm's pow / exp elementwise, as TF's scalar code calls them (powf /
    expf for float32 and float16, which Eigen widens to float): NumPy's own
    (SIMD) pow and exp round differently."""
    f = getattr(LIBM, name if t == np.float64 else name + "f")
    xs = np.broadcast_arrays(*[np.asarray(x, np.float64) for x in xs])
    out = np.array([f(*(float(x.flat[i]) for x in xs)) for i in range(xs[0].size)], np.float64)
    return out.reshape(xs[0].shape).astype(t)

def sq(x):
    return np.sqrt(x)

def ref_update(op, attrs, x, g, s, t):
    """One step of op on the variables x (a list: var, slots...), at dtype t."""
    one, two = t(1), t(2)
    n = attrs.get("use_nesterov", False)
    if op == "GradientDescent":
        x[0] = x[0] - g * s["alpha"]
    elif op == "Momentum":
        lr, mo = s["lr"], s["momentum"]
        x[1] = x[1] * mo + g
        x[0] = x[0] - (g * lr + x[1] * mo * lr) if n else x[0] - x[1] * lr
    elif op == "KerasMomentum":
        lr, mo = s["lr"], s["momentum"]
        x[1] = x[1] * mo - g * lr
        x[0] = x[0] + (x[1] * mo - g * lr) if n else x[0] + x[1]
    elif op in ("Adam", "AdamWithAmsgrad"):
        b1p, b2p, lr, b1, b2, eps = (s[k] for k in ("beta1_power", "beta2_power", "lr",
                                                    "beta1", "beta2", "epsilon"))
        alpha = lr * sq(one - b2p) / (one - b1p)
        x[1] = x[1] + (g - x[1]) * (one - b1)
        x[2] = x[2] + (g * g - x[2]) * (one - b2)
        if op == "AdamWithAmsgrad":
            x[3] = np.maximum(x[3], x[2])
            x[0] = x[0] - (x[1] * alpha) / (sq(x[3]) + eps)
        elif n:
            x[0] = x[0] - ((g * (one - b1) + b1 * x[1]) * alpha) / (sq(x[2]) + eps)
        else:
            x[0] = x[0] - (x[1] * alpha) / (sq(x[2]) + eps)
    elif op == "AdaMax":
        b1p, lr, b1, b2, eps = (s[k] for k in ("beta1_power", "lr", "beta1", "beta2", "epsilon"))
        x[1] = x[1] + (g - x[1]) * (one - b1)
        x[2] = np.maximum(b2 * x[2], np.abs(g))
        x[0] = x[0] - (lr / (one - b1p)) * (x[1] / (x[2] + eps))
    elif op in ("RMSProp", "CenteredRMSProp"):
        lr, rho, mo, eps = (s[k] for k in ("lr", "rho", "momentum", "epsilon"))
        if op == "RMSProp":
            x[1] = x[1] + (g * g - x[1]) * (one - rho)
            x[2] = x[2] * mo + (g * lr) / sq(x[1] + eps)
            x[0] = x[0] - x[2]
        else:  # var, mg, ms, mom
            x[2] = x[2] + (g * g - x[2]) * (one - rho)
            x[1] = x[1] + (g - x[1]) * (one - rho)
            den = (x[2] - x[1] * x[1]) + eps
            x[3] = x[3] * mo + (g * lr) / sq(den)
            x[0] = x[0] - x[3]
    elif op == "Adagrad":
        if attrs.get("update_slots", True):
            x[1] = x[1] + g * g
        x[0] = x[0] - (g * s["lr"]) * (one / sq(x[1]))
    elif op == "AdagradV2":
        if attrs.get("update_slots", True):
            x[1] = x[1] + g * g
        x[0] = x[0] - (g * s["lr"]) / (sq(x[1]) + s["epsilon"])
    elif op == "Adadelta":
        lr, rho, eps = s["lr"], s["rho"], s["epsilon"]
        x[1] = x[1] * rho + (g * g) * (one - rho)
        u = (sq(x[2] + eps) * (one / sq(x[1] + eps))) * g
        x[0] = x[0] - u * lr
        x[2] = x[2] * rho + (u * u) * (one - rho)
    elif op == "ProximalAdagrad":
        lr, l1, l2 = s["lr"], s["l1"], s["l2"]
        x[1] = x[1] + g * g
        lrt = lr * (one / sq(x[1]))
        p = x[0] - g * lrt
        den = one + l2 * lrt
        if l1 > 0:
            x[0] = np.sign(p) * np.maximum(np.abs(p) - lrt * l1, t(0)) / den
        else:
            x[0] = p / den
    elif op in ("Ftrl", "FtrlV2"):
        lr, l1, l2, lrp = s["lr"], s["l1"], s["l2"], s["lr_power"]
        gs = g + (two * s["l2_shrinkage"]) * x[0] if op == "FtrlV2" else g
        na = x[1] + g * g
        if lrp == t(-0.5):
            pa, pb = sq(na), sq(x[1])
        else:
            pa, pb = libm("pow", t, na, -lrp), libm("pow", t, x[1], -lrp)
        d = pa - pb
        if attrs.get("multiply_linear_by_lr", False):
            x[2] = x[2] + (gs * lr - d * x[0])
            thr = l1 * lr
            xx = thr * np.sign(x[2]) - x[2]
            y = pa + (two * l2) * lr
        else:
            x[2] = x[2] + (gs - (d / lr) * x[0])
            thr = l1
            xx = l1 * np.sign(x[2]) - x[2]
            y = pa / lr + two * l2
        with np.errstate(divide="ignore", invalid="ignore"):
            x[0] = np.where(np.abs(x[2]) > thr, xx / y, t(0)).astype(t)
        x[1] = na
    elif op in ("AddSign", "PowerSign"):
        lr, sd, beta = s["lr"], s["sign_decay"], s["beta"]
        x[1] = x[1] * beta + g * (one - beta)
        sgm = np.sign(g) * np.sign(x[1])
        if op == "AddSign":
            x[0] = x[0] - (lr * (s["alpha"] + sd * sgm)) * g
        else:
            x[0] = x[0] - (lr * libm("exp", t, (s["logbase"] * sd) * sgm)) * g
    else:
        raise ValueError(op)
    return [np.asarray(v, t) for v in x]

# ---- the ops: variables (name, positive?), scalars, attribute variants --------------
POS, ANY = True, False
SPECS = {
    "GradientDescent": ([("var", ANY)], ["alpha"], [{}]),
    "Momentum": ([("var", ANY), ("accum", ANY)], ["lr", "momentum"],
                 [{"use_nesterov": False}, {"use_nesterov": True}]),
    "KerasMomentum": ([("var", ANY), ("accum", ANY)], ["lr", "momentum"],
                      [{"use_nesterov": False}, {"use_nesterov": True}]),
    "Adam": ([("var", ANY), ("m", ANY), ("v", POS)],
             ["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"],
             [{"use_nesterov": False}, {"use_nesterov": True}]),
    "AdamWithAmsgrad": ([("var", ANY), ("m", ANY), ("v", POS), ("vhat", POS)],
                        ["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"], [{}]),
    "AdaMax": ([("var", ANY), ("m", ANY), ("v", POS)],
               ["beta1_power", "lr", "beta1", "beta2", "epsilon"], [{}]),
    "RMSProp": ([("var", ANY), ("ms", POS), ("mom", ANY)], ["lr", "rho", "momentum", "epsilon"],
                [{}]),
    "CenteredRMSProp": ([("var", ANY), ("mg", ANY), ("ms", POS), ("mom", ANY)],
                        ["lr", "rho", "momentum", "epsilon"], [{}]),
    "Adagrad": ([("var", ANY), ("accum", POS)], ["lr"],
                [{"update_slots": True}, {"update_slots": False}]),
    "AdagradV2": ([("var", ANY), ("accum", POS)], ["lr", "epsilon"],
                  [{"update_slots": True}, {"update_slots": False}]),
    "Adadelta": ([("var", ANY), ("accum", POS), ("accum_update", POS)], ["lr", "rho", "epsilon"],
                 [{}]),
    "ProximalAdagrad": ([("var", ANY), ("accum", POS)], ["lr", "l1", "l2"], [{}, {"l1": 0.0}]),
    "Ftrl": ([("var", ANY), ("accum", POS), ("linear", ANY)], ["lr", "l1", "l2", "lr_power"],
             [{"multiply_linear_by_lr": False}, {"multiply_linear_by_lr": True},
              {"lr_power": -0.75}]),
    "FtrlV2": ([("var", ANY), ("accum", POS), ("linear", ANY)],
               ["lr", "l1", "l2", "l2_shrinkage", "lr_power"],
               [{"multiply_linear_by_lr": False}, {"multiply_linear_by_lr": True}]),
    "AddSign": ([("var", ANY), ("m", ANY)], ["lr", "alpha", "sign_decay", "beta"], [{}]),
    "PowerSign": ([("var", ANY), ("m", ANY)], ["lr", "logbase", "sign_decay", "beta"], [{}]),
}
SCALARS = {"alpha": 0.25, "lr": 0.0625, "momentum": 0.875, "beta1": 0.9, "beta2": 0.999,
           "epsilon": 1e-3, "rho": 0.9, "l1": 0.03, "l2": 0.02, "l2_shrinkage": 0.01,
           "lr_power": -0.5, "logbase": 0.7, "sign_decay": 0.5, "beta": 0.875}
EXP = {"PowerSign"}
SCALAR_NAMES = set(SCALARS) | {"beta1_power", "beta2_power"}

def scalars(name, variant, step, t):
    out = {}
    for k in SPECS[name][1]:
        if k == "beta1_power":
            out[k] = t(0.9 ** (step + 1))
        elif k == "beta2_power":
            out[k] = t(0.999 ** (step + 1))
        else:
            out[k] = t(variant.get(k, SCALARS[k]))
    if name == "ProximalAdagrad" and "l1" in variant:
        out["l1"] = t(variant["l1"])
    return out

def attrs_of(variant):
    return {k: v for k, v in variant.items() if k not in SCALAR_NAMES}

def init(varspec, shape, t):
    out = []
    for _, pos in varspec:
        if pos:
            out.append(rng.uniform(0.1, 1.0, shape).astype(t))
        else:
            out.append((rng.uniform(0.1, 1.0, shape) * rng.choice([-1, 1], shape)).astype(t))
    return out

def grads(shape, t, steps):
    return [(rng.uniform(0.05, 1.0, shape) * rng.choice([-1, 1], shape)).astype(t)
            for _ in range(steps)]

FLOOR = 2.0 ** -6

def ulps(a, b):
    """max |a - b| in units of the dtype's ulp at max(|b|, FLOOR): an
    update x - d of a var near 0 (cancellation) would otherwise turn one
    ulp of d into thousands of x's; the variables here are of order 0.1-1
    (init) and their updates of order 0.01-0.1."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return 1 << 60
    if a.size == 0:
        return 0
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    if (np.isnan(fa) != np.isnan(fb)).any():
        return 1 << 60
    ok = ~np.isnan(fa)
    if not ok.any():
        return 0
    unit = np.spacing(np.maximum(np.abs(b), b.dtype.type(FLOOR))).astype(np.float64)
    return float((np.abs(fa - fb)[ok] / unit[ok]).max())

def run_dense(dev, name, variant, x0, gs, t, graph=False):
    """The op's steps on variables made on dev: their final values and devices."""
    varspec, names, _ = SPECS[name]
    fn = getattr(R, "ResourceApply" + name)
    at = attrs_of(variant)
    with tf.device(dev):
        vs = [tf.Variable(x) for x in x0]
        def step(g, sc):
            kw = {n: v.handle for (n, _), v in zip(varspec, vs)}
            kw.update(sc)
            fn(grad=g, **kw, **at) if name != "GradientDescent" else fn(delta=g, **kw, **at)
        if graph:
            f = tf.function(step)
            for i, g in enumerate(gs):
                f(tf.constant(g), {k: tf.constant(v) for k, v in scalars(name, variant, i, t).items()})
        else:
            for i, g in enumerate(gs):
                step(g, scalars(name, variant, i, t))
        return [v.numpy() for v in vs], sorted({v.device.split("/")[-1] for v in vs})

def run_sparse(dev, name, variant, x0, gs, idx, t):
    varspec, names, _ = SPECS[name]
    fn = getattr(R, "ResourceSparseApply" + name)
    at = attrs_of(variant)
    with tf.device(dev):
        vs = [tf.Variable(x) for x in x0]
        for i, g in enumerate(gs):
            kw = {n: v.handle for (n, _), v in zip(varspec, vs)}
            kw.update(scalars(name, variant, i, t))
            fn(grad=g, indices=idx, **kw, **at)
        return [v.numpy() for v in vs], sorted({v.device.split("/")[-1] for v in vs})

def on_cpu(run, *args):
    """TF CPU's values, or None where TF CPU has no kernel for the dtype
    (half ProximalAdagrad: TF's CPU registers float and double only)."""
    try:
        return run(CPU, *args)[0]
    except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as e:
        if "no supported kernel for CPU devices" in str(e):
            return None
        raise

def compare(name, got, ref, cpu, devices):
    return {"ref_ulps": max(ulps(a, b) for a, b in zip(got, ref)),
            "cpu_ulps": None if cpu is None else max(ulps(a, b) for a, b in zip(cpu, got)),
            "devices": devices}

def dense_cases(name):
    varspec, _, variants = SPECS[name]
    out = {}
    for vi, variant in enumerate(variants):
        for t in TYPES:
            tt = np.dtype(t).type
            for shape in ([5, 7], [40000]) if t == "float32" else ([5, 7],):
                x0, gs = init(varspec, shape, tt), grads(shape, tt, 3)
                ref = [x.copy() for x in x0]
                with np.errstate(over="ignore"):
                    for i, g in enumerate(gs):
                        ref = ref_update(name, attrs_of(variant), ref, g,
                                         scalars(name, variant, i, tt), tt)
                got, devs = run_dense(SIM, name, variant, x0, gs, tt)
                cpu = on_cpu(run_dense, name, variant, x0, gs, tt)
                key = f"{name} {variant} {t} {shape}"
                out[key] = compare(name, got, ref, cpu, devs)
                if shape == [5, 7]:
                    gr, gdevs = run_dense(SIM, name, variant, x0, gs, tt, graph=True)
                    out[key]["graph_ulps"] = max(ulps(a, b) for a, b in zip(gr, got))
                    out[key]["graph_devices"] = gdevs
    return out

# One check per op: a missing kernel fails that op's test, naming it.
for _name in SPECS:
    check("dense " + _name)(lambda n=_name: dense_cases(n))

SPARSE_SPECS = ["Adadelta", "Adagrad", "AdagradV2", "ProximalAdagrad", "Ftrl", "FtrlV2",
                "KerasMomentum"]

def sparse_cases(name):
    varspec, _, variants = SPECS[name]
    out = {}
    for variant in variants:
        if name == "ProximalAdagrad" and variant:
            continue
        for t in TYPES:
            tt = np.dtype(t).type
            for shape, idx in (([6, 3], [4, 0, 4, 2]), ([5], [1, 1, 3]), ([4, 2, 3], [3, 0])):
                for it in ("int32", "int64"):
                    ind = np.array(idx, it)
                    x0 = init(varspec, shape, tt)
                    gs = grads([len(idx)] + shape[1:], tt, 3)
                    ref = [x.copy() for x in x0]
                    with np.errstate(over="ignore"):
                        for i, g in enumerate(gs):
                            sc = scalars(name, variant, i, tt)
                            for j, k in enumerate(idx):  # in order: duplicates twice
                                rows = [r[k].copy() for r in ref]
                                rows = ref_update(name, attrs_of(variant), rows, g[j], sc, tt)
                                for r, row in zip(ref, rows):
                                    r[k] = row
                    got, devs = run_sparse(SIM, name, variant, x0, gs, ind, tt)
                    cpu = on_cpu(run_sparse, name, variant, x0, gs, ind, tt)
                    out[f"{name} {variant} {t} {shape} {idx} {it}"] = compare(
                        name, got, ref, cpu, devs)
    return out

for _name in SPARSE_SPECS:
    check("sparse " + _name)(lambda n=_name: sparse_cases(n))

@check("empty")
def _():
    """No elements, no indices: nothing to do, on both devices."""
    out = {}
    for dev in (SIM, CPU):
        with tf.device(dev):
            v, a = tf.Variable(tf.zeros([0, 3])), tf.Variable(tf.zeros([0, 3]))
            R.ResourceApplyMomentum(var=v.handle, accum=a.handle, lr=0.5, grad=tf.zeros([0, 3]),
                                    momentum=0.5)
            w, b = tf.Variable(tf.ones([2, 3])), tf.Variable(tf.ones([2, 3]))
            R.ResourceSparseApplyAdagrad(var=w.handle, accum=b.handle, lr=0.5,
                                         grad=tf.zeros([0, 3]), indices=tf.zeros([0], tf.int32))
            out[dev] = [v.numpy().shape, w.numpy().tolist()]
    return out

# ---- errors: TF CPU's class and message, from the SIMDEV kernel --------------------------
f = lambda *sh: rng.uniform(0.1, 1.0, sh).astype(np.float32)
V = lambda x: tf.Variable(x).handle
Z = lambda: tf.zeros([])

ERRORS = [
    ("ResourceApplyGradientDescent alpha", lambda x, a, g: [R.ResourceApplyGradientDescent(var=V(x), alpha=a, delta=g), Z()][1], [f(2, 3), f(2), f(2, 3)], "alpha is not a scalar: [2]"),
    ("ResourceApplyGradientDescent delta", lambda x, g: [R.ResourceApplyGradientDescent(var=V(x), alpha=0.5, delta=g), Z()][1], [f(2, 3), f(3)], "var and delta do not have the same shape[2,3] [3]"),
    ("ResourceApplyMomentum accum", lambda x, a, g: [R.ResourceApplyMomentum(var=V(x), accum=V(a), lr=0.5, grad=g, momentum=0.5), Z()][1], [f(2, 3), f(3, 2), f(2, 3)], "var and accum do not have the same shape[2,3] [3,2]"),
    ("ResourceApplyMomentum momentum", lambda x, a, g, m: [R.ResourceApplyMomentum(var=V(x), accum=V(a), lr=0.5, grad=g, momentum=m), Z()][1], [f(2, 3), f(2, 3), f(2, 3), f(1)], "momentum is not a scalar: [1]"),
    ("ResourceApplyKerasMomentum grad", lambda x, a, g: [R.ResourceApplyKerasMomentum(var=V(x), accum=V(a), lr=0.5, grad=g, momentum=0.5), Z()][1], [f(2, 3), f(2, 3), f(2)], "var and grad do not have the same shape[2,3] [2]"),
    ("ResourceApplyAdam lr", lambda x, m, v, lr: [R.ResourceApplyAdam(var=V(x), m=V(m), v=V(v), beta1_power=0.9, beta2_power=0.99, lr=lr, beta1=0.9, beta2=0.99, epsilon=1e-3, grad=x), Z()][1], [f(2, 3), f(2, 3), f(2, 3), f(1)], "lr is not a scalar : [1]"),
    ("ResourceApplyAdam v", lambda x, m, v: [R.ResourceApplyAdam(var=V(x), m=V(m), v=V(v), beta1_power=0.9, beta2_power=0.99, lr=0.1, beta1=0.9, beta2=0.99, epsilon=1e-3, grad=x), Z()][1], [f(2, 3), f(2, 3), f(3)], "var and v do not have the same shape[2,3] [3]"),
    ("ResourceApplyCenteredRMSProp mg", lambda x, mg, ms: [R.ResourceApplyCenteredRMSProp(var=V(x), mg=V(mg), ms=V(ms), mom=V(x), lr=0.1, rho=0.9, momentum=0.5, epsilon=1e-3, grad=x), Z()][1], [f(2, 3), f(3), f(4)], "var and mg do not have the same shape[2,3] [4]"),
    ("ResourceApplyFtrl lr_power", lambda x, p: [R.ResourceApplyFtrl(var=V(x), accum=V(x), linear=V(x), grad=x, lr=0.1, l1=0.1, l2=0.1, lr_power=p), Z()][1], [f(2, 3), f(2)], "lr_power is not a scalar[2]"),
    ("ResourceApplyFtrlV2 l2_shrinkage", lambda x, s: [R.ResourceApplyFtrlV2(var=V(x), accum=V(x), linear=V(x), grad=x, lr=0.1, l1=0.1, l2=0.1, l2_shrinkage=s, lr_power=-0.5), Z()][1], [f(2, 3), f(2)], "l2 shrinkage regularization strength is not a scalar: [2]"),
    ("ResourceApplyProximalAdagrad lr", lambda x, lr: [R.ResourceApplyProximalAdagrad(var=V(x), accum=V(x), lr=lr, l1=0.1, l2=0.1, grad=x), Z()][1], [f(2, 3), f(2)], "lr is not a positive scalar: [2]"),
    ("ResourceSparseApplyAdagrad index", lambda x, g, i: [R.ResourceSparseApplyAdagrad(var=V(x), accum=V(x), lr=0.1, grad=g, indices=i), Z()][1], [f(4, 3), f(2, 3), np.array([1, 9], np.int32)], "Index 9 at offset 1 in indices is out of range"),
    ("ResourceSparseApplyFtrl index", lambda x, g, i: [R.ResourceSparseApplyFtrl(var=V(x), accum=V(x), linear=V(x), grad=g, indices=i, lr=0.1, l1=0.1, l2=0.1, lr_power=-0.5), Z()][1], [f(4, 3), f(2, 3), np.array([-1, 0], np.int64)], "Index -1 at offset 0 in indices is out of range"),
    ("ResourceSparseApplyKerasMomentum index", lambda x, g, i: [R.ResourceSparseApplyKerasMomentum(var=V(x), accum=V(x), lr=0.1, grad=g, indices=i, momentum=0.5), Z()][1], [f(4, 3), f(2, 3), np.array([1, 4], np.int64)], "indices[1] = 4 is not in [0, 4)"),
    ("ResourceSparseApplyAdagradV2 indices", lambda x, g, i: [R.ResourceSparseApplyAdagradV2(var=V(x), accum=V(x), lr=0.1, epsilon=0.1, grad=g, indices=i), Z()][1], [f(4, 3), f(2, 3), np.array([[1, 2]], np.int32)], "indices must be one-dimensional"),
    ("ResourceSparseApplyProximalAdagrad dims", lambda x, g, i: [R.ResourceSparseApplyProximalAdagrad(var=V(x), accum=V(x), lr=0.1, l1=0.1, l2=0.1, grad=g, indices=i), Z()][1], [f(4, 3), f(2, 2), np.array([1, 2], np.int32)], "var and grad must match in dimension 1"),
    ("ResourceSparseApplyAdadelta first", lambda x, g, i: [R.ResourceSparseApplyAdadelta(var=V(x), accum=V(x), accum_update=V(x), lr=0.1, rho=0.9, epsilon=0.1, grad=g, indices=i), Z()][1], [f(4, 3), f(3, 3), np.array([1, 2], np.int32)], "grad must be the same size as indices in the first dimension."),
    ("ResourceSparseApplyFtrlV2 rank", lambda x, g, i: [R.ResourceSparseApplyFtrlV2(var=V(x), accum=V(x), linear=V(x), grad=g, indices=i, lr=0.1, l1=0.1, l2=0.1, l2_shrinkage=0.1, lr_power=-0.5), Z()][1], [np.float32(1.5), f(1), np.array([0], np.int32)], "var must be at least 1 dimensional"),
]

def after():
    with tf.device(SIM):
        v = tf.Variable(tf.ones([3]))
        R.ResourceApplyGradientDescent(var=v.handle, alpha=0.5, delta=tf.ones([3]))
        return v.numpy().tolist() == [0.5, 0.5, 0.5]

check_errors(ERRORS, after)

@check("simdev only")
def _():
    """Inputs TF CPU aborts on (SIMDEV_DIVERGENCES), and values it checks
    and simdev (as TF's GPU) does not: SIMDEV only."""
    out = {}
    out["dtype"] = list(error_class(lambda x: [R.ResourceApplyGradientDescent(
        var=V(x), alpha=np.float64(0.5), delta=np.ones([2, 3])), Z()][1], f(2, 3), device=SIM))
    def prox():
        with tf.device(SIM):
            v, a = tf.Variable([1.0, 2.0]), tf.Variable([1.0, 1.0])
            R.ResourceApplyProximalAdagrad(var=v.handle, accum=a.handle, lr=-0.5, l1=0.0, l2=0.0,
                                           grad=tf.constant([1.0, 1.0]))
            return v.numpy().tolist()
    out["negative lr"] = prox()
    out["cpu negative lr"] = list(error_class(lambda: [R.ResourceApplyProximalAdagrad(
        var=V(np.ones(2, np.float32)), accum=V(np.ones(2, np.float32)), lr=np.float32(-0.5),
        l1=np.float32(0), l2=np.float32(0), grad=np.ones(2, np.float32)), Z()][1], device=CPU))
    def twice(sparse):
        with tf.device(SIM):
            h = tf.Variable([1.0, 2.0])
            if sparse:
                R.ResourceSparseApplyAdagrad(var=h.handle, accum=h.handle, lr=0.5,
                                             grad=tf.constant([[1.0]]),
                                             indices=tf.constant([0]))
            else:
                R.ResourceApplyMomentum(var=h.handle, accum=h.handle, lr=0.5,
                                        grad=tf.constant([1.0, 1.0]), momentum=0.9)
            return h.read_value()
    out["twice dense"] = list(error_class(lambda: twice(False), device=SIM))
    out["twice sparse"] = list(error_class(lambda: twice(True), device=SIM))
    out["after"] = after_ok(after)
    return out
''' % {"types": ["float32", "float64", "float16"]}

SESSION = r'''
import numpy as np
import tensorflow as tf
from childlib import CPU, SIM

tf1 = tf.compat.v1
tf1.disable_eager_execution()
rs = np.random.RandomState(7)
X = rs.uniform(-1, 1, (64, 4)).astype(np.float32)
Y = (X @ np.array([[0.5], [-1.0], [0.25], [2.0]], np.float32) + 0.3).astype(np.float32)
W1 = rs.uniform(-0.5, 0.5, (4, 8)).astype(np.float32)
W2 = rs.uniform(-0.5, 0.5, (8, 1)).astype(np.float32)

def train(dev, make_opt, steps=12):
    g = tf.Graph()
    with g.as_default(), tf.device(dev):
        w1 = tf1.get_variable("w1", initializer=W1, use_resource=True)
        b1 = tf1.get_variable("b1", initializer=np.zeros(8, np.float32), use_resource=True)
        w2 = tf1.get_variable("w2", initializer=W2, use_resource=True)
        x, y = tf.constant(X), tf.constant(Y)
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w2) - y))
        train_op = make_opt().minimize(loss)
        init = tf1.global_variables_initializer()
    cfg = tf1.ConfigProto(allow_soft_placement=False)
    losses, placed = [], set()
    with tf1.Session(graph=g, config=cfg) as s:
        s.run(init)
        opts = tf1.RunOptions(output_partition_graphs=True)
        for i in range(steps):
            md = tf1.RunMetadata()
            l, _ = s.run([loss, train_op], options=opts, run_metadata=md)
            losses.append(float(l))
            for pg in md.partition_graphs:
                for n in pg.node:
                    if n.op.startswith("ResourceApply"):
                        placed.add((n.op, n.device.split("/")[-1]))
        final = s.run(w1)
    return {"losses": losses, "placed": sorted(placed), "w1": final.tolist()}

OPTS = {"GradientDescent": lambda: tf1.train.GradientDescentOptimizer(0.1),
        "Momentum": lambda: tf1.train.MomentumOptimizer(0.05, 0.9),
        "Nesterov": lambda: tf1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
        "Adam": lambda: tf1.train.AdamOptimizer(0.01),
        "RMSProp": lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5),
        "Adagrad": lambda: tf1.train.AdagradOptimizer(0.1)}

for name, make in OPTS.items():
    @check("session " + name)
    def _(make=make):
        return {"sim": train(SIM, make), "cpu": train(CPU, make)}
'''


@pytest.fixture(scope="module")
def v(run_tf):
    return run_tf(SCRIPT if HAVE else REGISTRY, timeout=900)


@pytest.fixture(scope="module")
def discrete(run_tf):
    return run_tf(SCRIPT if HAVE else REGISTRY, env={"SIMDEV_DISCRETE": "1"}, timeout=900)


@pytest.fixture(scope="module")
def session(run_tf):
    return run_tf(SESSION, timeout=600)


@pytest.mark.registry
def test_registered_where_tf_exports_them(v):
    reg = v.data("registered")
    for op in NOT_ON_GPU:
        assert reg[op]["kernels"] == 0, (op, reg[op])
    for op in DENSE + SPARSE:
        if not HAVE:  # 2.19+: none (the variable functions are missing)
            assert reg[op]["kernels"] == 0, (op, reg[op])
            continue
        sparse = op in SPARSE
        assert reg[op]["types"] == TYPES, (op, reg[op])
        assert reg[op]["index"] == (["int32", "int64"] if sparse else []), (op, reg[op])
        assert reg[op]["kernels"] == len(TYPES) * (2 if sparse else 1), (op, reg[op])
        # the variables in host memory (resource handles), and a sparse
        # op's indices (apply.c says why)
        assert "var" in reg[op]["host_memory"], (op, reg[op])
        assert ("indices" in reg[op]["host_memory"]) == sparse, (op, reg[op])


def _assert_cases(d, what):
    assert d, what
    for key, r in d.items():
        assert r["devices"] == ["device:SIMDEV:0"], (key, r)
        assert r["ref_ulps"] == 0, (key, r)
        sparse_row = what == "sparse" and "Ftrl" in key and " [5] " in key
        bound = (CPU_ULPS_POW if "lr_power" in key else
                 CPU_ULPS if sparse_row or any(k in key for k in TRANSCENDENTAL) else 0)
        # TF CPU has every case but half ProximalAdagrad (float, double only)
        if r["cpu_ulps"] is None:
            assert "ProximalAdagrad" in key and "float16" in key, (key, r)
        else:
            assert r["cpu_ulps"] <= bound, (key, r)
        if "graph_ulps" in r:
            assert r["graph_ulps"] == 0 and r["graph_devices"] == ["device:SIMDEV:0"], (key, r)


@NEEDS_KERNELS
@pytest.mark.parametrize("op", DENSE)
def test_dense_matches_reference_and_cpu(v, op):
    name = op[len("ResourceApply"):]
    d = v.data("dense " + name)
    assert {k.split()[0] for k in d} == {name}
    _assert_cases(d, "dense")


@NEEDS_KERNELS
@pytest.mark.parametrize("op", SPARSE)
def test_sparse_matches_reference_and_cpu(v, op):
    name = op[len("ResourceSparseApply"):]
    d = v.data("sparse " + name)
    assert {k.split()[0] for k in d} == {name}
    _assert_cases(d, "sparse")


@NEEDS_KERNELS
def test_discrete_memory(discrete):
    """SIMDEV_DISCRETE=1 (device memory host code cannot touch): every case
    again, the same bounds; no host access to device memory."""
    for op in DENSE:
        _assert_cases(discrete.data("dense " + op[len("ResourceApply"):]), "dense")
    for op in SPARSE:
        _assert_cases(discrete.data("sparse " + op[len("ResourceSparseApply"):]), "sparse")
    discrete.assert_clean_exit()
    assert "host access to device memory" not in discrete.stderr, discrete.describe()


@NEEDS_KERNELS
def test_empty(v):
    d = v.data("empty")
    for dev in ("/device:SIMDEV:0", "/device:CPU:0"):
        assert d[dev] == [[0, 3], [[1.0] * 3] * 2], d


def error_cases():
    return error_rows(SCRIPT)


@NEEDS_KERNELS
@pytest.mark.parametrize("name,key", error_cases())
def test_error_like_cpu(v, name, key):
    assert_error_like_cpu(v.data("error " + name), name.split()[0], key)


def test_error_names_found():
    assert len(error_cases()) == 18


@NEEDS_KERNELS
def test_simdev_only_differences(v):
    d = v.data("simdev only")
    assert set(SIMDEV_DIVERGENCES) == {"complex", "dtype", "values", "locking"}
    assert_kernel_error(d["dtype"], "ResourceApplyGradientDescent",
                        "Trying to update variable with wrong dtype. Expected double got float",
                        "InvalidArgumentError")
    # TF CPU refuses a negative lr; simdev (as TF's GPU) applies it:
    # var - g * lr / sqrt(accum + g*g) with lr = -0.5, accum 1, g 1.
    assert d["cpu negative lr"][0] == "InvalidArgumentError", d
    assert "lr is not a positive scalar" in d["cpu negative lr"][1], d
    expect = (np.float32([1.0, 2.0]) + np.float32(0.5) / np.sqrt(np.float32(2.0))).tolist()
    assert d["negative lr"] == pytest.approx(expect, rel=1e-6), d
    # One variable as var and accum: refused (TF CPU updates one buffer
    # twice; docs/kernel-api.md), dense (TF's copy-on-write would split it)
    # and sparse (one buffer).
    for k in ("twice dense", "twice sparse"):
        assert d[k][0] == "InvalidArgumentError", (k, d[k])
        assert "variable inputs 0 and 1 are one variable" in d[k][1], (k, d[k])
    assert d["after"] is True, d


@NEEDS_KERNELS
def test_clean_exit(v):
    v.assert_clean_exit()


@NEEDS_KERNELS
@pytest.mark.parametrize("name", ["GradientDescent", "Momentum", "Nesterov", "Adam", "RMSProp",
                                  "Adagrad"])
def test_compat_v1_session_training(session, name):
    d = session.data("session " + name)
    sim, cpu = d["sim"], d["cpu"]
    assert len(sim["losses"]) == len(cpu["losses"]) == 12, d
    np.testing.assert_allclose(sim["losses"], cpu["losses"], rtol=LOSS_RTOL)
    np.testing.assert_allclose(sim["w1"], cpu["w1"], rtol=LOSS_RTOL, atol=2.0 ** -20)
    assert sim["losses"][-1] < sim["losses"][0], d  # it trains
    ops = {op for op, _ in sim["placed"]}
    assert ops and all(dev == "device:SIMDEV:0" for _, dev in sim["placed"]), sim["placed"]
    assert all(dev == "device:CPU:0" for _, dev in cpu["placed"]), cpu["placed"]
