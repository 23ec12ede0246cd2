"""Softmax, LogSoftmax and the softmax cross-entropy losses on SIMDEV
against TF's CPU kernels (soft placement off).

Covered: random logits of many shapes (rank 1..4, zero-size, 1x1, odd and
large rows), float32 and float64, int32 and int64 sparse labels, dense
labels with broadcasting, gradients through tf.GradientTape, and bad inputs
(label out of range, wrong ranks, mismatched batch) raising the CPU's
exception class while the process stays usable.

TF's CPU float32 Softmax goes through oneDNN, which loses ~1e-5 relative
accuracy on million-wide rows; the large cases therefore also compare with
a float64 NumPy reference at a tight tolerance.
"""
import pytest

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

def run_cases(cases):
    bad, off = [], []
    for name, fn, args, tol in cases:
        rep = versus_cpu(fn, *args, rtol=tol, atol=tol / 10)
        if not rep["close"]:
            bad.append(f"{name}: {rep}")
        if not rep["on_simdev"]:
            off.append(f"{name}: {rep['devices']}")
    return {"cases": len(cases), "bad": bad[:10], "not_on_simdev": off[:10]}

SM_SHAPES = [(1,), (5,), (1, 1), (3, 4), (2, 3, 7), (2, 1, 3, 5), (0, 3),
             (3, 0), (4, 0, 2), (33, 129), (1000, 1001)]

for dt in DTYPES:
    @check(f"softmax {dt}")
    def _(dt=dt):
        cases = []
        for shape in SM_SHAPES:
            x = (rng.standard_normal(shape) * 5).astype(dt)
            cases += [(f"Softmax {shape}", softmax, (x,), 1e-5),
                      (f"LogSoftmax {shape}", log_softmax, (x,), 1e-5)]
        # a constant row and huge logits: the max is subtracted first
        x = np.array([[1e4, 1e4 - 1, 0], [7, 7, 7]], dt)
        cases += [("Softmax big logits", softmax, (x,), 1e-5),
                  ("LogSoftmax big logits", log_softmax, (x,), 1e-5)]
        return run_cases(cases)

    @check(f"xent {dt}")
    def _(dt=dt):
        cases = []
        for b, c in [(1, 1), (3, 4), (0, 5), (7, 13), (64, 1000), (1, 4097)]:
            x = (rng.standard_normal((b, c)) * 3).astype(dt)
            for lt in ("int32", "int64"):
                lab = rng.integers(0, c, b).astype(lt)
                cases.append((f"sparse {b}x{c} {lt}", sparse_xent, (x, lab), 1e-5))
            p = rng.random((b, c)).astype(dt)
            p /= np.maximum(p.sum(1, keepdims=True), 1e-30).astype(dt)
            cases.append((f"dense {b}x{c}", dense_xent, (x, p), 1e-5))
            if b:
                cases += [
                    (f"dense {b}x{c} labels [1,c]", dense_xent, (x, p[:1]), 1e-5),
                    (f"dense {b}x{c} logits [1,c]", dense_xent, (x[:1], p), 1e-5),
                    (f"dense {b}x{c} labels [b,1]", dense_xent, (x, p[:, :1]), 1e-5),
                    (f"dense {b}x{c} labels [c]", dense_xent, (x, p[0]), 1e-5),
                    (f"dense {b}x{c} logits [c]", dense_xent, (x[0], p), 1e-5)]
        z = np.zeros((3, 0), dt)
        cases.append(("dense 3x0", dense_xent, (z, z), 1e-5))
        return run_cases(cases)

    @check(f"large {dt}")
    def _(dt=dt):
        x = (rng.standard_normal((4, 1 << 20)) * 5).astype(dt)
        cases = [("Softmax 4x1M", softmax, (x,), 1e-4),
                 ("LogSoftmax 4x1M", log_softmax, (x,), 1e-4),
                 ("Softmax 4096x1024", softmax, (x.reshape(4096, 1024),), 1e-4)]
        lab = rng.integers(0, 1 << 20, 4).astype(np.int64)
        cases.append(("sparse 4x1M", sparse_xent, (x, lab), 1e-4))
        out = run_cases(cases)
        # tight check of the wide rows against float64
        xd = x.astype(np.float64)
        e = np.exp(xd - xd.max(1, keepdims=True))
        ref = e / e.sum(1, keepdims=True)
        with tf.device(SIMDEV):
            got = softmax(tf.constant(x)).numpy()
        rel = float(np.max(np.abs(got - ref) / np.maximum(ref, 1e-30)))
        out["softmax_rel_err_vs_f64"] = rel
        return out

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
        return versus_cpu(grads, x, lab, p, up, up2, rtol=1e-5, atol=1e-6)

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
for name, (fn, args) in ERRORS.items():
    @check(f"error {name}")
    def _(fn=fn, args=args):
        sim = error_class(fn, *args, device=SIMDEV)
        cpu = error_class(fn, *args, device=CPU)
        good = versus_cpu(sparse_xent, x34, np.array([3, 0, 2], np.int32))
        return {"simdev": sim[0], "cpu": cpu[0], "msg": sim[1][:300],
                "after": good["close"] and good["on_simdev"]}
"""


@pytest.fixture(scope="module")
def sm(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.parametrize("family", ["softmax", "xent"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_vs_cpu(sm, family, dtype):
    d = sm.data(f"{family} {dtype}")
    assert d["cases"] >= 20
    assert not d["bad"], d["bad"]
    assert not d["not_on_simdev"], d["not_on_simdev"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_large(sm, dtype):
    d = sm.data(f"large {dtype}")
    assert not d["bad"], d["bad"]
    assert not d["not_on_simdev"], d["not_on_simdev"]
    limit = 1e-5 if dtype == "float32" else 1e-12
    assert d["softmax_rel_err_vs_f64"] < limit, d


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients(sm, dtype):
    d = sm.data(f"gradients {dtype}")
    assert d["on_simdev"], d["devices"]
    assert d["close"], d


@pytest.mark.parametrize("name", [
    "label too large int32", "label negative int64", "labels 2-D",
    "batch mismatch", "logits 1-D", "zero classes", "dense not broadcastable",
    "dense 1-D", "dense 3-D", "softmax scalar", "log_softmax scalar"])
def test_errors(sm, name):
    d = sm.data(f"error {name}")
    assert d["cpu"], f"CPU accepted {name}"
    assert d["simdev"] == d["cpu"], d
    assert d["after"], "a good op on SIMDEV failed after the error"


def test_label_error_message(sm):
    d = sm.data("error label too large int32")
    assert "Received a label value of 4" in d["msg"], d
    assert "[0, 4)" in d["msg"], d


def test_clean_exit(sm):
    sm.assert_clean_exit()
