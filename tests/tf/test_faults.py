"""SIMDEV_FAULTS through real TensorFlow: one test per fault kind shows the
Python exception a user sees, whether the process stays usable or how it
ends, that nothing hangs (every child runs under a timeout: a hang fails
the test), and, where the process lives on, that simdev's device memory is
back to its baseline.

What TF 2.21 does with each kind (docs/debugging.md, "Fault injection"):
  alloc       ResourceExhaustedError ("OOM when allocating tensor") from a
              kernel's output, InternalError ("Dst tensor is not
              initialized") from TF's host->device copy; the process goes
              on and later steps run.
  launch      InternalError naming the rule; the stream stays in error, so
              every later kernel on the device fails the same way (a sticky
              device error, as on CUDA); the CPU still works, tensors made
              before the failure can still be read.
  memcpy_*    TF aborts the process: its EventMgr polls the event recorded
  stream      after the failed copy, finds it in error and LOG(FATAL)s
              ("Unexpected Event status: 1", device_event_mgr.cc). Clean
              in the sense that it is an abort with a message, at once,
              not a hang or a segfault.
  event       TF ignores record_event's error (EventMgr::ThenExecute drops
              the status): no exception; the copy's completion callback
              runs without waiting for the copy (see the docs: a finding).
  callback    nothing: TF 2.21 never calls a PluggableDevice's
              host_callback in these workloads (eager ops, tf.function
              training steps); tests/conformance checks the contract.

Memory: simdev's own bytes in use are read from its trace (SIMDEV_TRACE's
"memory in use" counter, written at exit): every child that lives
allocates a 3 MiB marker tensor at its baseline and again at its end; the
counter's step of exactly +3 MiB gives the bytes in use just before each
marker. SIMDEV_BFC=0 throughout (but in the two alloc_bfc_* jobs), so each
tensor is one simdev allocation (with TF's BFC allocator on, TF would hold
simdev memory in large chunks, and alloc faults would hit few, large
allocations: an alloc rule with SIMDEV_BFC unset turns BFC off for the run,
with a line on stderr).
"""
import concurrent.futures
import json
import signal

import pytest

MARK_BYTES = 3 << 20  # a jemalloc size class: usable size == requested

# Helpers every living child uses (after the PRELUDE).
COMMON = r"""
import gc, sys
import numpy as np
import tensorflow as tf
tf.config.set_soft_device_placement(False)
SIM = "/device:SIMDEV:0"

def to_sim(arr):
    with tf.device("/device:CPU:0"):
        x = tf.constant(arr)
    with tf.device(SIM):
        return tf.identity(x)

def marker():
    # A 3 MiB tensor made and dropped on SIMDEV: its allocation marks this
    # point in the trace's memory counter (the test reads the trace).
    gc.collect()
    for _ in range(3):  # an injected alloc fault may refuse it once
        try:
            with tf.device(SIM):
                t = tf.zeros([%(mark)d // 4], tf.float32)
            tf.test.experimental.sync_devices()
            del t
            return
        except tf.errors.ResourceExhaustedError:
            pass  # refused by an alloc rule: try again
        except tf.errors.InternalError:
            return  # allocated, then not run (the stream is in error)
    raise RuntimeError("marker never allocated")

def outcome(fn):
    try:
        r = fn()
        return {"ok": True, "value": r}
    except Exception as e:
        return {"ok": False, "error": type(e).__name__, "message": str(e)[:3000]}
""" % {"mark": MARK_BYTES}

# alloc: a small CNN's training steps with every 50th allocation refused.
CNN = COMMON + r"""
import keras
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 12, 12, 3)).astype(np.float32)
y = rng.integers(0, 4, 8).astype(np.int64)
with tf.device(SIM):
    model = keras.Sequential([
        keras.Input((12, 12, 3)), keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Flatten(),
        keras.layers.Dense(4)])
    opt = keras.optimizers.SGD(0.01)
    lossf = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = lossf(y, model(x, training=True))
        g = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(g, model.trainable_variables))
        return loss

def one_step():
    with tf.device(SIM):
        return float(step(tf.constant(x), tf.constant(y)).numpy())

state = {}

@check("steps")
def _():
    for _ in range(3):  # build the model and optimizer slots
        if outcome(one_step)["ok"]:
            break
    marker()
    outs = [outcome(one_step) for _ in range(20)]
    return {"outs": outs}

@check("after")
def _():
    # Still usable: each step needs fewer than 50 allocations, so a step
    # refused by the plan succeeds when run again.
    for _ in range(3):
        o = outcome(one_step)
        if o["ok"]:
            break
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    with tf.device(SIM):
        m = outcome(lambda: tf.matmul(to_sim(a), to_sim(a)).numpy().tolist())
    if not m["ok"]:
        with tf.device(SIM):
            m = outcome(lambda: tf.matmul(to_sim(a), to_sim(a)).numpy().tolist())
    marker()
    return {"step": o, "matmul": m, "want": (a @ a).tolist()}
"""

# event (the first record_event is refused), callback (never called by
# TF), then launch (the second MatMul fails; the stream stays in error): in
# one child, in that order, each with its own counter.
USABLE = COMMON + r"""
a = np.arange(4096, dtype=np.float32)
m = np.arange(16, dtype=np.float32).reshape(4, 4)

def twice():
    with tf.device(SIM):
        return (tf.identity(to_sim(a)) * 2.0).numpy().tolist()

@check("event")
def _():
    with tf.device("/device:CPU:0"):
        x_cpu = tf.constant(a)
    with tf.device(SIM):
        first = outcome(lambda: tf.identity(x_cpu))
    tf.test.experimental.sync_devices()  # every stream done: now it is safe
    y = first.pop("value", None)
    got = y.numpy().tolist() if y is not None else None
    del y
    twice()  # whatever TF caches for it is there before the baseline
    marker()
    later = [outcome(twice) for _ in range(3)]
    marker()
    return {"first": first, "got": got, "later": later,
            "want": a.tolist(), "want2": (a * 2).tolist()}

@check("launch")
def _():
    marker()
    A = to_sim(m)
    with tf.device(SIM):
        first = tf.matmul(A, A)
        r1 = first.numpy().tolist()
        second = outcome(lambda: tf.matmul(A, A).numpy())
        relu = outcome(lambda: tf.nn.relu(A).numpy())
    # A tensor made before the failure: its copy to the host is on another
    # stream, which is not in error.
    earlier = outcome(lambda: first.numpy().tolist())
    with tf.device("/device:CPU:0"):
        cpu = tf.matmul(m, m).numpy().tolist()
    del A, first
    marker()
    return {"first": r1, "second": second, "relu": relu, "earlier": earlier,
            "cpu": cpu, "want": (m @ m).tolist()}
"""

# memcpy_* and stream: TF aborts at the first failed copy.
COPY = COMMON + r"""
print("BEFORE", flush=True)
with tf.device("/device:SIMDEV:0"):
    t = to_sim(np.arange(64, dtype=np.float32))
    tf.test.experimental.sync_devices()
if %(d2d)s:
    with tf.device("/device:SIMDEV:1"):
        u = tf.identity(t)
    tf.test.experimental.sync_devices()
print("VALUE", t.numpy().sum(), flush=True)
print("AFTER", flush=True)
"""

STREAM = COMMON + r"""
@check("stream")
def _():
    A = to_sim(np.ones((4, 4), np.float32))  # 1 item on the copy stream
    outs = []
    with tf.device(SIM):
        for _ in range(6):  # kernels 1..6 on the compute stream
            outs.append(outcome(lambda: tf.nn.relu(A).numpy().tolist()))
    return {"outs": outs}
"""

IMPORT = """
import tensorflow as tf
print("IMPORTED", flush=True)
"""

# alloc with TF's BFC allocator as the user left it: ten small ops, each
# its own outcome (one of them meets the third allocation).
SMALL_OPS = COMMON + r"""
@check("ops")
def _():
    a = np.arange(256, dtype=np.float32)
    outs = []
    for i in range(10):
        with tf.device(SIM):
            outs.append(outcome(lambda: (tf.nn.relu(to_sim(a)) + float(i)).numpy().tolist()))
    return {"outs": outs, "want": [(np.maximum(a, 0) + i).tolist() for i in range(10)]}
"""

# SIMDEV_BFC=0 in every job but the two that show what happens without it
# (None: the variable unset in the child).
BASE = {"SIMDEV_BFC": "0"}
JOBS = {
    "alloc_bfc_unset": (SMALL_OPS, {"SIMDEV_FAULTS": "alloc:nth=3",
                                    "SIMDEV_BFC": None}, False),
    "alloc_bfc_kept": (SMALL_OPS, {"SIMDEV_FAULTS": "alloc:nth=3",
                                   "SIMDEV_BFC": "1"}, False),
    "cnn": (CNN, {"SIMDEV_FAULTS": "alloc:every=50"}, True),
    "usable": (USABLE, {"SIMDEV_FAULTS": "event:nth=1,callback:every=1,"
                                         "launch:op=MatMul:nth=2"}, True),
    "h2d": (COPY % {"d2d": "False"}, {"SIMDEV_FAULTS": "memcpy_h2d:nth=1"}, False),
    "d2h": (COPY % {"d2d": "False"}, {"SIMDEV_FAULTS": "memcpy_d2h:nth=1"}, False),
    "d2d": (COPY % {"d2d": "True"}, {"SIMDEV_FAULTS": "memcpy_d2d:nth=1",
                                     "SIMDEV_DEVICE_COUNT": "2"}, False),
    "stream": (STREAM, {"SIMDEV_FAULTS": "stream:fail_at=4"}, False),
    "bad_kind": (IMPORT, {"SIMDEV_FAULTS": "alloc:nth=1,allok:nth=2"}, False),
}
TIMEOUT = 120  # a hang fails the test (run_tf's timeout), never CI


@pytest.fixture(scope="module")
def runs(run_tf, tmp_path_factory):
    """Every child at once (each is mostly TF's import time)."""
    tmp = tmp_path_factory.mktemp("faults")
    out = {}
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        futs = {}
        for name, (code, env, traced) in JOBS.items():
            env = {k: v for k, v in dict(BASE, **env).items() if v is not None}
            if traced:
                env["SIMDEV_TRACE"] = str(tmp / f"{name}.json")
            futs[name] = ex.submit(run_tf, code, env, TIMEOUT)
        for name, f in futs.items():
            r = f.result()
            r.trace = tmp / f"{name}.json" if JOBS[name][2] else None
            out[name] = r
    return out


def injected_lines(r):
    return [l for l in r.stderr.splitlines()
            if l.startswith("simdev: injected by SIMDEV_FAULTS")]


def baselines(r):
    """simdev's bytes in use on device 0 just before each marker allocation,
    from the trace's memory counter."""
    doc = json.loads(r.trace.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    # One device in these children: every counter is device 0's.
    vals = [e["args"]["bytes"] for e in events
            if e.get("ph") == "C" and e.get("name") == "memory in use"]
    return [vals[i - 1] for i in range(1, len(vals))
            if vals[i] - vals[i - 1] == MARK_BYTES]


def assert_back_to_baseline(r, first=0, last=1):
    """The bytes in use at marker `last` equal those at marker `first`."""
    assert r.trace.exists(), f"no trace written\n{r.describe()}"
    marks = baselines(r)
    assert len(marks) > last, f"markers not found in the trace: {marks}"
    assert marks[last] == marks[first], \
        f"simdev bytes in use: {marks[first]} at the baseline, " \
        f"{marks[last]} after the faults"


def assert_no_crash(r):
    for crash in ("SIGSEGV", "Segmentation fault", "SIGBUS"):
        assert crash not in r.stderr, r.describe()
    assert r.returncode in (0, -signal.SIGABRT), r.describe()


def test_alloc_every_50_cnn_training(runs):
    """A CNN's training steps with every 50th allocation refused: each
    refused step raises (ResourceExhausted from a kernel's output, Internal
    from TF's copy of the batch), the others train; the process goes on
    and its device memory is back to the baseline."""
    r = runs["cnn"]
    outs = r.data("steps")["outs"]
    errors = [o for o in outs if not o["ok"]]
    assert errors, "no step failed with every 50th allocation refused"
    assert any(o["ok"] for o in outs), outs
    for o in errors:
        ok = (o["error"] == "ResourceExhaustedError"
              and "OOM when allocating tensor" in o["message"]) or \
             (o["error"] == "InternalError"
              and "Dst tensor is not initialized" in o["message"])
        assert ok, o
    lines = injected_lines(r)
    assert lines and all("(alloc:every=50): allocation of" in l for l in lines)
    after = r.data("after")
    assert after["step"]["ok"], after
    assert after["matmul"]["ok"] and after["matmul"]["value"] == after["want"]
    r.assert_clean_exit()
    assert_back_to_baseline(r)


def test_alloc_rule_turns_bfc_off_when_unset(runs):
    """The documented rule as a user first tries it, SIMDEV_BFC left unset:
    TF's BFC allocator would take device memory in a few large chunks and
    the third allocation would come late or never, silently. simdev turns
    BFC off for the run, says so, and the third tensor's allocation fails;
    the ops around it give the right values."""
    r = runs["alloc_bfc_unset"]
    assert any("SIMDEV_FAULTS has an alloc rule, so TensorFlow's BFC allocator "
               "is off for this run" in l for l in r.stderr.splitlines()), r.describe()
    d = r.data("ops")
    failed = [o for o in d["outs"] if not o["ok"]]
    assert len(failed) == 1, d["outs"]
    assert failed[0]["error"] in ("ResourceExhaustedError", "InternalError"), failed
    for o, want in zip(d["outs"], d["want"]):
        assert not o["ok"] or o["value"] == want
    lines = injected_lines(r)
    assert len(lines) == 1 and "(alloc:nth=3): allocation of" in lines[0], lines
    r.assert_clean_exit()


def test_alloc_rule_with_bfc_kept(runs):
    """SIMDEV_BFC=1 given: obeyed, with a line saying the rule counts BFC's
    chunks; every op gives its value or a clean error (no crash)."""
    r = runs["alloc_bfc_kept"]
    assert any("SIMDEV_BFC=1: the rule counts the BFC allocator's chunk "
               "allocations" in l for l in r.stderr.splitlines()), r.describe()
    assert not any("is off for this run" in l for l in r.stderr.splitlines())
    d = r.data("ops")
    for o, want in zip(d["outs"], d["want"]):
        assert not o["ok"] or o["value"] == want, o
    r.assert_clean_exit()


def test_launch_fault_is_sticky(runs):
    r = runs["usable"]
    d = r.data("launch")
    assert d["first"] == d["want"]
    s = d["second"]
    assert not s["ok"] and s["error"] == "InternalError", s
    assert "injected by SIMDEV_FAULTS (launch:op=MatMul:nth=2): kernel MatMul" \
        in s["message"], s
    # Later kernels on the device fail too (sticky), naming the first error.
    relu = d["relu"]
    assert not relu["ok"] and relu["error"] == "InternalError", relu
    assert "SIMDEV stream failed earlier: injected by SIMDEV_FAULTS" \
        in relu["message"], relu
    assert d["earlier"]["ok"] and d["earlier"]["value"] == d["want"]
    assert d["cpu"] == d["want"]
    lines = [l for l in injected_lines(r) if "(launch:" in l]
    assert len(lines) == 1, injected_lines(r)
    r.assert_clean_exit()
    assert_back_to_baseline(r, 2, 3)


def test_event_fault_is_ignored_by_tf(runs):
    """record_event fails (the status names the rule), and TF drops that
    status: no exception. Values read after a device-wide sync are right,
    later copies and kernels work. The callback rule never fires: TF 2.21
    does not call host_callback here."""
    r = runs["usable"]
    d = r.data("event")
    assert d["first"]["ok"], d["first"]
    assert d["got"] == d["want"]
    for o in d["later"]:
        assert o["ok"] and o["value"] == d["want2"], o
    lines = [l for l in injected_lines(r) if "(launch:" not in l]
    assert lines == ["simdev: injected by SIMDEV_FAULTS (event:nth=1): "
                     "event record refused"], lines
    r.assert_clean_exit()
    assert_back_to_baseline(r, 0, 1)


@pytest.mark.parametrize("kind", ["h2d", "d2h", "d2d"])
def test_memcpy_fault_aborts_in_tf_event_mgr(runs, kind):
    r = runs[kind]
    lines = injected_lines(r)
    assert len(lines) == 1 and f"(memcpy_{kind}:nth=1): memcpy_{kind}" in lines[0], \
        r.describe()
    assert "AFTER" not in r.stdout
    assert r.returncode == -signal.SIGABRT, r.describe()
    assert "Unexpected Event status: 1" in r.stderr, r.describe()
    assert_no_crash(r)


def test_stream_fail_at(runs):
    """stream:fail_at=4: the compute stream's 4th kernel fails (Internal,
    naming the rule and the stream), every later one on it too; the copy
    stream (one item) is untouched."""
    r = runs["stream"]
    outs = r.data("stream")["outs"]
    assert [o["ok"] for o in outs] == [True] * 3 + [False] * 3, outs
    assert "injected by SIMDEV_FAULTS (stream:fail_at=4): item 4 of stream " \
        "simdev0-s" in outs[3]["message"], outs[3]
    for o in outs[3:]:
        assert o["error"] == "InternalError", o
    r.assert_clean_exit()


def test_bad_setting_aborts_import(runs):
    """Like every SIMDEV_* setting: the plugin refuses to load, naming the
    variable, the rule and the problem (tests/unit/test_faults.c checks
    every error of the grammar)."""
    r = runs["bad_kind"]
    value, what = "alloc:nth=1,allok:nth=2", 'rule "allok:nth=2": unknown kind'
    assert "IMPORTED" not in r.stdout, r.describe()
    assert r.returncode == -signal.SIGABRT, r.describe()
    fatal = [l for l in r.stderr.splitlines() if "Check failed" in l]
    assert fatal and "SIMDEV_FAULTS" in fatal[0] and value in fatal[0] \
        and what in fatal[0], r.describe()
