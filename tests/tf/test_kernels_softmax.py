"""Softmax, LogSoftmax and the softmax cross-entropy losses on SIMDEV
against NumPy and TF's CPU kernels (soft placement off).

Covered: random logits of many shapes (rank 1..4, zero-size, 1x1, one
class, odd and large rows, a row 1M wide), float32 and float64, int32 and
int64 sparse labels, dense labels with broadcasting, gradients through
tf.GradientTape, and bad inputs (label out of range, wrong ranks,
mismatched batch) raising the kernel's own error (TF CPU's class and
wording) while the process stays usable.

The reference is NumPy in float64 (long double for float64 data), per row:
z = x - max, S = sum exp(z). Its bounds follow the rounding steps, in units
of the dtype's unit roundoff u (conftest): z_j is off by u|z_j|, so exp(z_j)
by u|z_j| + LIBM_ULPS ulps relative; S by the worst of those plus gamma(n)
of the accumulator (SIMDEV: double, softmax.c; TF CPU: the dtype, any
order); a division, a log, a subtraction add their own. So a 1M-wide row
gets a loose bound on TF CPU (float sums) and a tight one on SIMDEV.
"""
import pytest

from conftest import assert_error_like_cpu, assert_sweep, assert_vs_ref

DTYPES = ["float32", "float64"]

SCRIPT = f"DTYPES = {DTYPES!r}\n" + r"""
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(11)
SIMDEV = "/device:SIMDEV:0"
CPU = "/device:CPU:0"

def softmax(x): return tf.raw_ops.Softmax(logits=x)
def log_softmax(x): return tf.raw_ops.LogSoftmax(logits=x)
def sparse_xent(x, y):
    return tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=x, labels=y)
def dense_xent(x, y):
    return tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=x, labels=y)

LD = np.longdouble

def row_parts(x, dt, acc):
    # Softmax quantities of the rows of x (last axis) in float64 (long
    # double for float64 data) and their bounds; acc is the accumulator
    # dtype of the kernel's sum.
    # long double is slow: 4M-element float64 inputs get a float64 reference,
    # whose own error (ref_err below) the bound then includes
    R = LD if dt == "float64" and x.size <= (1 << 20) else np.float64
    xr = x.astype(R)
    n = x.shape[-1]
    u, c = unit_roundoff(dt), LIBM_ULPS
    uref = float(np.finfo(R).eps) / 2
    if x.size == 0:
        z = np.zeros(x.shape, R)
        return {"z": z, "y": z, "ls": z, "lS": z[..., :1] if n else np.zeros(x.shape[:-1] + (1,), R),
                "b_y": 0.0, "b_ls": 0.0, "rS": 0.0}
    m = xr.max(axis=-1, keepdims=True)
    z = xr - m
    e = np.exp(z)
    S = e.sum(axis=-1, keepdims=True)
    y = e / S
    lS = np.log(S)
    ls = z - lS
    zmax = np.abs(z).max(axis=-1, keepdims=True)
    ref_err = 8 * n * uref          # the reference's own, relative
    rS = u * zmax + 2 * c * u + gamma(n, acc) + ref_err
    b_y = y * (u * np.abs(z) + 2 * c * u + rS + 2 * u + ref_err) + 4 * tiny(dt)
    b_ls = (u * np.abs(z) + rS + (2 * c + 1) * u * np.abs(lS) + u * np.abs(ls)
            + ref_err * (1 + np.abs(ls)) + 4 * tiny(dt))
    return {"z": z, "y": y, "ls": ls, "lS": lS, "b_y": b_y, "b_ls": b_ls, "rS": rS}

def softmax_ref(x, log):
    dt = str(x.dtype)
    sim, cpu = row_parts(x, dt, "float64"), row_parts(x, dt, dt)
    k = "ls" if log else "y"
    return sim[k], sim["b" + "_" + k], cpu["b" + "_" + k]

def xent_ref(x, p):
    # (loss, backprop) and bounds for logits x [b, c] and label
    # probabilities p [b, c] (one-hot for sparse labels)
    dt = str(x.dtype)
    u, c = unit_roundoff(dt), LIBM_ULPS
    out = []
    for acc in ("float64", dt):
        P = row_parts(x, dt, acc)
        pr = p.astype(P["z"].dtype)
        if x.shape[-1] == 0:
            z0 = np.zeros(x.shape[:-1], pr.dtype)
            out.append((z0, pr * 0, 0.0, 0.0))
            continue
        t = pr * (P["lS"] - P["z"])                      # the loss terms
        loss = t.sum(axis=-1)
        e_ls = P["rS"] + (2 * c + 1) * u * np.abs(P["lS"])  # error of log S
        b_t = np.abs(pr) * (e_ls + u * np.abs(P["z"]) + u * np.abs(P["lS"] - P["z"])) \
            + u * np.abs(t)
        n = x.shape[-1]
        b_loss = b_t.sum(-1) + gamma(n, acc) * np.abs(t).sum(-1) + u * np.abs(loss) \
            + 4 * tiny(dt)
        back = P["y"] - pr
        b_back = P["b_y"] + u * np.abs(back)
        out.append((loss, back, b_loss, b_back))
    (loss, back, bl, bb), (_, _, cl, cb) = out
    return (loss, back), (bl, bb), (cl, cb)

def run_cases(cases):
    return sweep_report({name: guarded(check_fn) for name, check_fn in cases})

def sm_case(x, log):
    ref, b, cb = softmax_ref(x, log)
    return lambda: versus_ref(log_softmax if log else softmax, x, ref=ref,
                              bound=b, cpu_bound=cb)

def sparse_case(x, lab):
    p = np.zeros(x.shape, x.dtype)
    p[np.arange(x.shape[0]), lab] = 1
    ref, b, cb = xent_ref(x, p)
    return lambda: versus_ref(sparse_xent, x, lab, ref=ref, bound=b, cpu_bound=cb,
                              dtype=x.dtype)

def dense_case(x, p):
    xb, pb = np.broadcast_arrays(x, p)
    xb = np.ascontiguousarray(np.broadcast_to(xb, np.broadcast_shapes(x.shape, p.shape)))
    if xb.ndim == 1:
        xb, pb = xb[None], pb[None]
    ref, b, cb = xent_ref(xb, pb)
    return lambda: versus_ref(dense_xent, x, p, ref=ref, bound=b, cpu_bound=cb)

SM_SHAPES = [(1,), (5,), (1, 1), (3, 4), (2, 3, 7), (2, 1, 3, 5), (0, 3),
             (3, 0), (4, 0, 2), (3, 1), (33, 129), (1000, 1001)]

for dt in DTYPES:
    @check(f"softmax {dt}")
    def _(dt=dt):
        cases = []
        for shape in SM_SHAPES:
            x = (rng.standard_normal(shape) * 5).astype(dt)
            cases += [(f"Softmax {shape}", sm_case(x, False)),
                      (f"LogSoftmax {shape}", sm_case(x, True))]
        # a constant row and huge logits: the max is subtracted first
        x = np.array([[1e4, 1e4 - 1, 0], [7, 7, 7]], dt)
        cases += [("Softmax big logits", sm_case(x, False)),
                  ("LogSoftmax big logits", sm_case(x, True))]
        return run_cases(cases)

    @check(f"xent {dt}")
    def _(dt=dt):
        cases = []
        for b, c in [(1, 1), (3, 4), (0, 5), (7, 13), (64, 1000), (1, 4097)]:
            x = (rng.standard_normal((b, c)) * 3).astype(dt)
            for lt in ("int32", "int64"):
                lab = rng.integers(0, c, b).astype(lt)
                cases.append((f"sparse {b}x{c} {lt}", sparse_case(x, lab)))
            p = rng.random((b, c)).astype(dt)
            p /= np.maximum(p.sum(1, keepdims=True), 1e-30).astype(dt)
            cases.append((f"dense {b}x{c}", dense_case(x, p)))
            if b:
                cases += [
                    (f"dense {b}x{c} labels [1,c]", dense_case(x, p[:1])),
                    (f"dense {b}x{c} logits [1,c]", dense_case(x[:1], p)),
                    (f"dense {b}x{c} labels [b,1]", dense_case(x, p[:, :1])),
                    (f"dense {b}x{c} labels [c]", dense_case(x, p[0])),
                    (f"dense {b}x{c} logits [c]", dense_case(x[0], p))]
        z = np.zeros((3, 0), dt)
        cases.append(("dense 3x0", dense_case(z, z)))
        return run_cases(cases)

    @check(f"large {dt}")
    def _(dt=dt):
        x = (rng.standard_normal((4, 1 << 20)) * 5).astype(dt)
        lab = rng.integers(0, 1 << 20, 4).astype(np.int64)
        return run_cases([("Softmax 4x1M", sm_case(x, False)),
                          ("LogSoftmax 4x1M", sm_case(x, True)),
                          ("Softmax 4096x1024", sm_case(x.reshape(4096, 1024), False)),
                          ("sparse 4x1M", sparse_case(x, lab))])

    @check(f"gradients {dt}")
    def _(dt=dt):
        x = (rng.standard_normal((16, 10)) * 2).astype(dt)
        lab = rng.integers(0, 10, 16).astype(np.int64)
        p = rng.random((16, 10)).astype(dt)
        p /= p.sum(1, keepdims=True)
        up = rng.standard_normal(16).astype(dt)
        up2 = rng.standard_normal((16, 10)).astype(dt)

        # The dense loss goes through the raw op: the tf.nn wrapper also
        # needs int32 Pack on SIMDEV, which is not this file's concern.
        def grads(x, lab, p, up, up2):
            with tf.GradientTape(persistent=True) as t:
                t.watch(x)
                ls = tf.nn.sparse_softmax_cross_entropy_with_logits(lab, x)
                ld = dense_xent(x, p)[0]
                sm = tf.nn.softmax(x)
                lsm = tf.nn.log_softmax(x)
            return (t.gradient(ls, x, output_gradients=up),
                    t.gradient(ld, x, output_gradients=up),
                    t.gradient(sm, x, output_gradients=up2),
                    t.gradient(lsm, x, output_gradients=up2))

        # d loss / dx = backprop * up; softmax: y (up2 - sum(up2 y));
        # log_softmax: up2 - y sum(up2). Bounds: each factor's own bound
        # (relative R), then gamma(n + 3) for the sums and products.
        n, u = x.shape[1], unit_roundoff(dt)
        onehot = np.zeros(x.shape, dt)
        onehot[np.arange(16), lab] = 1
        ups = up.astype(np.float64)[:, None]
        refs, bounds = [], []
        for q in (onehot, p):
            (_, back), (_, bb), _ = xent_ref(x, q)
            refs.append(back * ups)
            bounds.append(bb * np.abs(ups) + u * np.abs(back * ups))
        P = row_parts(x, dt, "float64")
        y, R = P["y"], np.max(P["b_y"] / np.maximum(P["y"], 1e-300))
        u2 = up2.astype(y.dtype)
        s = (u2 * y).sum(1, keepdims=True)
        refs.append(y * (u2 - s))
        bounds.append(y * (np.abs(u2) + (np.abs(u2) * y).sum(1, keepdims=True))
                      * (2 * R + gamma(n + 3, dt)))
        refs.append(u2 - y * u2.sum(1, keepdims=True))
        E = np.max(P["b_ls"])
        bounds.append((np.abs(u2) + y * np.abs(u2).sum(1, keepdims=True))
                      * (E + 2 * LIBM_ULPS * u + gamma(n + 3, dt)))
        return versus_ref(grads, x, lab, p, up, up2, ref=tuple(refs), bound=tuple(bounds))

# ---- bad inputs ------------------------------------------------------------
x34 = rng.standard_normal((3, 4)).astype(np.float32)
ERRORS = {
    "label too large int32": (sparse_xent, (x34, np.array([0, 4, 1], np.int32))),
    "label negative int64": (sparse_xent, (x34, np.array([0, -1, 1], np.int64))),
    "labels 2-D": (sparse_xent, (x34, np.array([[0, 1, 1]], np.int64))),
    "batch mismatch": (sparse_xent, (x34, np.array([0, 1], np.int64))),
    "logits 1-D": (sparse_xent, (x34[0], np.array([0, 1], np.int64))),
    "zero classes": (sparse_xent, (x34[:, :0], np.array([0, 1, 1], np.int64))),
    "dense not broadcastable": (dense_xent, (x34, x34[:2])),
    "dense 1-D": (dense_xent, (x34[0], x34[0])),
    "dense 3-D": (dense_xent, (x34[None], x34[None])),
    # float64: TF's float32 Softmax is oneDNN's, which raises Aborted here
    "softmax scalar": (softmax, (np.array(1.0, np.float64),)),
    "log_softmax scalar": (log_softmax, (np.array(1.0, np.float32),)),
}

def after():
    lab = np.array([3, 0, 2], np.int32)
    ref, b, _ = xent_ref(x34, np.eye(4, dtype=np.float32)[lab])
    r = versus_ref(sparse_xent, x34, lab, ref=ref, bound=b, cpu=False, dtype=np.float32)
    return r["sim_ok"] and r["on_simdev"]

for name, (fn, args) in ERRORS.items():
    @check(f"error {name}")
    def _(fn=fn, args=args):
        return dict(error_pair(fn, *args), after=after_ok(after))
"""


@pytest.fixture(scope="module")
def sm(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("family", ["softmax", "xent"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_vs_reference(sm, family, dtype):
    assert_sweep(sm.data(f"{family} {dtype}"), min_cases=20)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large(sm, dtype):
    assert_sweep(sm.data(f"large {dtype}"), min_cases=4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients(sm, dtype):
    assert_vs_ref(sm.data(f"gradients {dtype}"), f"gradients {dtype}")


SPARSE = "SparseSoftmaxCrossEntropyWithLogits"
DENSE = "SoftmaxCrossEntropyWithLogits"
# error name -> (kernel, key text of its message: TF CPU's wording too)
ERRORS = {
    "label too large int32": (SPARSE, "Received a label value of 4 which is outside the "
                                      "valid range of [0, 4).  Label values: 0 4 1"),
    "label negative int64": (SPARSE, "Received a label value of -1 which is outside the "
                                     "valid range of [0, 4).  Label values: 0 -1 1"),
    "labels 2-D": (SPARSE, "labels must be 1-D, but got shape [1,3]"),
    "batch mismatch": (SPARSE, "logits and labels must have the same first dimension, "
                               "got logits shape [3,4] and labels shape [2]"),
    "logits 1-D": (SPARSE, "logits must be 2-D, but got shape [4]"),
    "zero classes": (SPARSE, "Must have at least one class, but got logits shape [3,0]"),
    "dense not broadcastable": (DENSE, "logits and labels must be broadcastable: "
                                       "logits_size=[3,4] labels_size=[2,4]"),
    "dense 1-D": (DENSE, "logits and labels must be either 2-dimensional, or "
                         "broadcasted to be 2-dimensional"),
    "dense 3-D": (DENSE, "logits and labels must be either 2-dimensional, or "
                         "broadcasted to be 2-dimensional"),
    "softmax scalar": ("Softmax", "logits must have >= 1 dimension, got []"),
    "log_softmax scalar": ("LogSoftmax", "logits must have >= 1 dimension, got []"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(sm, name):
    op, key = ERRORS[name]
    assert_error_like_cpu(sm.data(f"error {name}"), op, key)


def test_clean_exit(sm):
    sm.assert_clean_exit()
