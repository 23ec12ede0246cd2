"""SIMDEV_TRACE in a JAX process: libsimdev_xla.so records its jobs on
simdev's stream and writes the same Chrome trace JSON as the TF plugin
(src/profiler), at exit. Each run is a child process (the file is written
by an exit handler), with TensorFlow never loaded (run_py checks it).

What is asserted, exactly: one kernel event per simdev call on the track
of the stream "simdev0-s0" of process "SIMDEV:0", named after the target
(op_type the same), in submission order without overlap; a flow from each
submit to its run; the device's memory counter (the convolution's im2col
scratch comes from the device region); no dropped record; and that a path
that cannot be written fails register() naming SIMDEV_TRACE.
"""
import collections
import json

from jaxutil import jax_module, run_py, sj  # noqa: F401 (fixtures)

RUNS = 3

PROGRAM = r'''
import jax, jax.numpy as jnp, numpy as np
import simdev.jax as sj
sj.register()
rng = np.random.default_rng(7)
a = rng.standard_normal((16, 8)).astype(np.float32)
b = rng.standard_normal((8, 4)).astype(np.float32)
x = rng.standard_normal((1, 8, 8, 4)).astype(np.float32)
w = rng.standard_normal((3, 3, 4, 2)).astype(np.float32)

@jax.jit
def f(a, b, x, w):
    return sj.relu(sj.matmul(a, b)), sj.conv2d(x, w, padding="SAME")

@check("ran")
def _():
    before = sj.counts()[0]
    for _ in range(%(runs)d):
        jax.block_until_ready(f(a, b, x, w))
    return sj.counts()[0] - before
'''


def load(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
               if e["ph"] == "M" and e["name"] == "thread_name"}
    return doc, ev, procs, threads


def test_trace_of_jax_calls(tmp_path):
    path = tmp_path / "jax_trace.json"
    r = run_py(PROGRAM % {"runs": RUNS}, env={"SIMDEV_TRACE": str(path)})
    assert r.value("ran") == 3 * RUNS  # three jobs per run, none dropped
    doc, ev, procs, threads = load(path)
    assert procs[1000] == "SIMDEV:0" and procs[1] == "host"
    [track] = [k for k, v in threads.items() if k[0] == 1000 and v == "simdev0-s0"]
    runs = sorted((e for e in ev if e["ph"] == "X" and (e["pid"], e["tid"]) == track),
                  key=lambda e: e["ts"])
    kernels = [e for e in runs if e["cat"] == "kernel"]
    assert collections.Counter(e["name"] for e in kernels) == {
        "simdev_matmul": RUNS, "simdev_relu": RUNS, "simdev_conv2d": RUNS}
    assert all(e["args"]["op_type"] == e["name"] for e in kernels)
    # One worker runs them in order: no two overlap.
    for prev, cur in zip(runs, runs[1:]):
        assert prev["ts"] + prev["dur"] <= cur["ts"] + 1e-3, (prev, cur)
    # Each run has its submit: flow ids pair up, one per kernel.
    starts = [e["id"] for e in ev if e["ph"] == "s"]
    ends = [e["id"] for e in ev if e["ph"] == "f"]
    assert sorted(starts) == sorted(ends) and len(starts) >= len(kernels)
    ids = {e["args"]["correlation_id"] for e in kernels}
    assert ids <= set(starts), (ids, starts)
    # The im2col scratch came from the device region and went back.
    mem = [c for c in ev if c["ph"] == "C" and c["pid"] == 1000
           and c["name"] == "memory in use"]
    assert mem and max(c["args"]["bytes"] for c in mem) > 0, mem
    assert mem[-1]["args"]["bytes"] == 0, mem[-1]
    assert doc["otherData"]["simdev_dropped_events"] == 0


def test_unwritable_trace_path_fails_register(tmp_path):
    bad = tmp_path / "no-such-dir" / "t.json"
    r = run_py('''
        import simdev.jax as sj
        @check("register")
        def _():
            sj.register()
    ''', env={"SIMDEV_TRACE": str(bad)})
    rec = r.checks["register"]
    assert not rec["ok"] and rec["type"] == "ValueError", rec
    assert "SIMDEV_TRACE" in rec["error"] and str(bad) in rec["error"], rec
