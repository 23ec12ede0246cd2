"""SIMDEV_TRACE and the profiler's two outputs, decoded independently.

(a) The C driver (tests/profiler/trace_driver.c: fixed device_sim work, no
    TensorFlow) writes the Chrome JSON through SIMDEV_TRACE's own exit
    handler and an XSpace: both are decoded here, the JSON with `json`, the
    XSpace with the xplane_pb2 of the TensorFlow wheel loaded by file path
    with protobuf only (TensorFlow is not imported), and compared with the
    driver's known work exactly; a second run with tiny rings checks that
    the oldest records are dropped and counted.
(b) SIMDEV_TRACE with real TensorFlow: a known tf.function on SIMDEV:0 with
    soft placement off; every kernel of it in the JSON exactly once, one
    track per stream, per stream ordered and non-overlapping, flows paired,
    the memory counter there.
(c) An unwritable SIMDEV_TRACE: the import fails, naming the variable.
(d) A tiny SIMDEV_TRACE_EVENTS under TensorFlow: oldest dropped, counted.
(e) The conformance harness run with SIMDEV_TRACE writes a valid trace.

The driver and the harness come from the build tree (`make build`), as
tests/conformance does; the plugin is the one under test (conftest.py).
"""
import collections
import importlib.util
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SIMDEV_BUILD_DIR") or ROOT / "build")
DRIVER = BUILD / "tests" / "profiler" / "trace_driver"
HARNESS = BUILD / "tests" / "conformance" / "simdev_conformance"
BUILD_PLUGIN = BUILD / "libsimdev.so"


def load_xplane_pb2():
    """The wheel's xplane_pb2, without importing TensorFlow: find_spec
    locates the package without running it; the _pb2 file only needs
    protobuf."""
    spec = importlib.util.find_spec("tensorflow")
    assert spec and spec.submodule_search_locations, "no tensorflow wheel"
    path = Path(spec.submodule_search_locations[0],
                "tsl/profiler/protobuf/xplane_pb2.py")
    assert path.is_file(), path
    mspec = importlib.util.spec_from_file_location("simdev_test_xplane_pb2",
                                                   path)
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)
    return mod


# ---- reading the Chrome JSON ---------------------------------------------
def ns(us):
    """A JSON time (us with 3 decimals, exact ns) back to integer ns."""
    return round(us * 1000)


class Trace:
    """A Chrome trace, indexed: process and thread names, the runs per
    device track (ordered by ts), flows, counters."""

    def __init__(self, path):
        text = Path(path).read_text(encoding="utf-8")
        self.doc = json.loads(text)  # strict: NaN/garbage would raise
        ev = self.doc["traceEvents"]
        self.events = ev
        self.process = {e["pid"]: e["args"]["name"] for e in ev
                        if e["ph"] == "M" and e["name"] == "process_name"}
        thread_meta = [((e["pid"], e["tid"]), e["args"]["name"]) for e in ev
                       if e["ph"] == "M" and e["name"] == "thread_name"]
        self.thread_meta = thread_meta
        self.thread = dict(thread_meta)
        self.runs = collections.defaultdict(list)  # (pid, tid) -> X events
        self.submits = []
        for e in ev:
            if e["ph"] == "X" and e["pid"] >= 1000:
                self.runs[(e["pid"], e["tid"])].append(e)
            elif e["ph"] == "X" and e["pid"] == 1:
                self.submits.append(e)
        for k in self.runs:
            self.runs[k].sort(key=lambda e: ns(e["ts"]))
        self.flow_s = [e for e in ev if e["ph"] == "s"]
        self.flow_f = [e for e in ev if e["ph"] == "f"]
        self.counters = [e for e in ev if e["ph"] == "C"]
        self.other = self.doc["otherData"]

    def track(self, label):
        """The runs of the stream track named label ("simdev0-s1")."""
        keys = [k for k, v in self.thread.items() if v == label and k[0] >= 1000]
        assert len(keys) == 1, (label, self.thread)
        return self.runs[keys[0]]


def assert_well_formed(t):
    """What every SIMDEV trace must satisfy, whatever ran."""
    assert t.doc["displayTimeUnit"] == "ns"
    assert t.process[1] == "host"
    # One track per stream: each (pid, tid) named once; every run on one.
    keys = [k for k, _ in t.thread_meta]
    assert len(keys) == len(set(keys)), keys
    for key in t.runs:
        assert key in t.thread, f"run on an unnamed track {key}"
        pid, tid = key
        assert t.process[pid] == f"SIMDEV:{pid - 1000}"
        assert t.thread[key] == f"simdev{pid - 1000}-s{tid}"
    # Per stream: ordered, not overlapping (exact ns).
    for key, runs in t.runs.items():
        for a, b in zip(runs, runs[1:]):
            assert ns(a["ts"]) + ns(a["dur"]) <= ns(b["ts"]), (key, a, b)
    # Flows pair up: one start and one end per id; the end sits on the run
    # with that correlation id, at its start; the start on a host thread.
    starts = collections.Counter(e["id"] for e in t.flow_s)
    ends = collections.Counter(e["id"] for e in t.flow_f)
    assert starts == ends
    assert all(n == 1 for n in starts.values())
    by_id = {e["args"]["correlation_id"]: e
             for runs in t.runs.values() for e in runs}
    assert len(by_id) == sum(len(r) for r in t.runs.values()), "ids not unique"
    for f in t.flow_f:
        run = by_id[f["id"]]
        assert (f["pid"], f["tid"], f["ts"]) == (run["pid"], run["tid"], run["ts"])
    for s in t.flow_s:
        assert s["pid"] == 1 and (1, s["tid"]) in t.thread
    assert t.other["simdev_dropped_events"] == (
        sum(t.other["simdev_dropped_by_stream"].values()) +
        sum(t.other["simdev_dropped_by_device"].values()))


# ---- (a) the C driver -----------------------------------------------------
ODD = 'odd "name"\\\t\u00e9'
DRIVER_STREAMS = {
    "simdev0-s0": [("drv/gate", "kernel"), ("MemcpyH2D", "memcpy_h2d"),
                   ("model/dense/MatMul", "kernel"),
                   ("model/dense/BiasAdd", "kernel"),
                   ("EventRecord", "event_record"),
                   ("EventRecord", "event_record"),  # of the StreamWait
                   ("sub/k0", "kernel"), ("sub/k1", "kernel"),
                   ("sub/k2", "kernel")],
    "simdev0-s1": [("EventWait", "event_wait"), (ODD, "kernel"),
                   ("Memset", "memset"), ("MemcpyD2H", "memcpy_d2h"),
                   ("HostCallback", "host_callback"),
                   ("StreamWait", "stream_wait")],
    "simdev1-s0": [("dev1/Mul", "kernel"), ("dev1/fail", "kernel"),
                   ("dev1/drained", "kernel")],
}
OP_TYPES = {"drv/gate": "Gate", "model/dense/MatMul": "MatMul", "model/dense/BiasAdd": "BiasAdd",
            ODD: "Relu", "sub/k0": "Sub", "sub/k1": "Sub", "sub/k2": "Sub",
            "dev1/Mul": "Mul", "dev1/fail": "Fail", "dev1/drained": "Drained"}


def run_driver(tmp_path, *args):
    assert DRIVER.is_file(), f"{DRIVER} not built (make build)"
    js, pb = tmp_path / "trace.json", tmp_path / "trace.xplane.pb"
    p = subprocess.run([str(DRIVER), *args, str(js), str(pb)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return Trace(js), pb.read_bytes()


def test_driver_pid_in_path(tmp_path):
    """"%p" in the path is the process id, "%%" a "%"."""
    assert DRIVER.is_file(), f"{DRIVER} not built (make build)"
    p = subprocess.Popen([str(DRIVER), str(tmp_path / "t-%p-%%.json"),
                          str(tmp_path / "t.xplane.pb")],
                         stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    written = sorted(f.name for f in tmp_path.glob("*.json"))
    assert written == [f"t-{p.pid}-%.json"], written
    assert_well_formed(Trace(tmp_path / written[0]))


@pytest.fixture(scope="module")
def driver_run(tmp_path_factory):
    return run_driver(tmp_path_factory.mktemp("driver"))


@pytest.fixture(scope="module")
def xplane_pb2():
    return load_xplane_pb2()


def test_driver_json_exact(driver_run):
    t, _ = driver_run
    assert_well_formed(t)
    assert t.process == {1: "host", 1000: "SIMDEV:0", 1001: "SIMDEV:1"}
    streams = {v: k for k, v in t.thread.items() if k[0] >= 1000}
    assert sorted(streams) == sorted(DRIVER_STREAMS)
    assert streams["simdev0-s1"] == (1000, 1)
    assert streams["simdev1-s0"] == (1001, 0)
    for label, want in DRIVER_STREAMS.items():
        runs = t.track(label)
        assert [(e["name"], e["cat"]) for e in runs] == want, label
        for e in runs:
            a = e["args"]
            if e["cat"] == "kernel":
                assert a["op_type"] == OP_TYPES[e["name"]]
            else:
                assert "op_type" not in a
            if e["cat"] in ("memcpy_h2d", "memcpy_d2h", "memset"):
                assert a["bytes"] == 4096
            if e["cat"] in ("event_wait", "stream_wait"):
                assert a["peer_stream"] == "simdev0-s0"
            else:
                assert "peer_stream" not in a
            assert ns(a["queue_delay_us"]) >= 0
    fail, drained = t.track("simdev1-s0")[1:]
    assert "status" in fail["args"] and "status" in drained["args"]
    assert fail["args"]["status"] != drained["args"]["status"]
    assert drained["dur"] == 0  # drained: never ran
    assert all("status" not in e["args"] for e in t.track("simdev0-s0"))
    # Host threads by name (read from /proc at exit): the submitters.
    host = {v: k[1] for k, v in t.thread.items() if k[0] == 1}
    assert sorted(host) == ["drv-main", "drv-sub"], host
    flow_tid = {s["id"]: s["tid"] for s in t.flow_s}
    for e in t.track("simdev0-s0"):
        want = "drv-sub" if e["name"].startswith("sub/") else "drv-main"
        assert flow_tid[e["args"]["correlation_id"]] == host[want], e
    # Submit slices: one per run, named after it, never overlapping.
    assert len(t.submits) == sum(len(v) for v in DRIVER_STREAMS.values())
    assert {s["name"] for s in t.submits} == {
        "submit " + n for v in DRIVER_STREAMS.values() for n, _ in v}
    # Correlation ids grow in submit order on one thread.
    main_ids = [e["args"]["correlation_id"] for e in t.track("simdev0-s0")[:6]]
    assert main_ids == sorted(main_ids)
    # Memory: the driver's one 4096-byte allocation and its free.
    mem = [c["args"]["bytes"] for c in t.counters
           if c["pid"] == 1000 and c["name"] == "memory in use"]
    assert mem == [4096, 0], mem
    assert not [c for c in t.counters if c["pid"] == 1001]
    assert t.other["simdev_dropped_events"] == 0
    # Times count from the earliest record (the first submit).
    assert min(ns(e["ts"]) for e in t.events if "ts" in e) == 0


def test_driver_xspace_exact(driver_run, xplane_pb2):
    t, pb = driver_run
    xs = xplane_pb2.XSpace.FromString(pb)
    assert [(p.id, p.name) for p in xs.planes] == [
        (0, "/device:CUSTOM:0"), (1, "/device:CUSTOM:1")]
    runs_by_id = {e["args"]["correlation_id"]: e
                  for runs in t.runs.values() for e in runs}
    for plane in xs.planes:
        smeta = {k: v.name for k, v in plane.stat_metadata.items()}
        assert all(k == v.id for k, v in plane.stat_metadata.items())
        assert all(k == v.id for k, v in plane.event_metadata.items())
        assert min(plane.event_metadata) == 1
        pstats = {smeta[s.metadata_id]: s.int64_value for s in plane.stats}
        assert pstats == {"dropped_events": 0}
        lines = {(l.id, l.name, l.display_name) for l in plane.lines}
        d = plane.id
        want = {(int(k.split("-s")[1]), k, k) for k in DRIVER_STREAMS
                if k.startswith(f"simdev{d}-")}
        assert lines == want
        for line in plane.lines:
            names, prev_end = [], None
            for ev in line.events:
                meta = plane.event_metadata[ev.metadata_id]
                stats = {}
                for s in ev.stats:
                    kind = s.WhichOneof("value")
                    stats[smeta[s.metadata_id]] = getattr(s, kind)
                names.append((meta.name, stats["kind"]))
                start = line.timestamp_ns * 1000 + ev.offset_ps
                if prev_end is not None:
                    assert start >= prev_end
                prev_end = start + ev.duration_ps
                # The same record as in the JSON: same duration, kind, args.
                run = runs_by_id[stats["correlation_id"]]
                assert run["name"] == meta.name
                assert ev.duration_ps == ns(run["dur"]) * 1000
                assert ev.offset_ps % 1000 == 0
                if stats["kind"] == "kernel":
                    assert stats["tf_op"] == f"{meta.name}:{OP_TYPES[meta.name]}"
                    assert stats["op_type"] == OP_TYPES[meta.name]
                assert stats["queue_delay_ps"] == ns(
                    run["args"]["queue_delay_us"]) * 1000
                for key in ("bytes", "peer_stream", "status"):
                    assert (key in stats) == (key in run["args"]), (key, run)
                    if key in stats:
                        assert stats[key] == run["args"][key]
            assert names == DRIVER_STREAMS[line.name]
            # Times on TF's clock: the JSON's relative starts, shifted.
            first = t.track(line.name)[0]
            if line.events:
                assert line.events[0].offset_ps == 0
                assert ns(first["ts"]) >= 0
    # The relative position of the lines agrees with the JSON (same clock).
    l00 = xs.planes[0].lines[0]
    l01 = xs.planes[0].lines[1]
    dj = ns(t.track(l01.name)[0]["ts"]) - ns(t.track(l00.name)[0]["ts"])
    assert l01.timestamp_ns - l00.timestamp_ns == dj


def test_driver_overflow(tmp_path, xplane_pb2):
    """Rings of 1024 records, 1500 kernels: the oldest 476 are gone and
    counted, in both outputs."""
    t, pb = run_driver(tmp_path, "--overflow", "1500")
    assert_well_formed(t)
    runs = t.track("simdev0-s0")
    assert [e["name"] for e in runs] == [f"k{i}" for i in range(476, 1500)]
    assert t.other["simdev_dropped_by_stream"] == {"simdev0-s0": 476}
    assert t.other["simdev_dropped_by_device"] == {}  # no memory records
    assert t.other["simdev_dropped_events"] == 476
    xs = xplane_pb2.XSpace.FromString(pb)
    (plane,) = xs.planes
    (line,) = plane.lines
    assert len(line.events) == 1024
    assert plane.event_metadata[line.events[0].metadata_id].name == "k476"
    smeta = {k: v.name for k, v in plane.stat_metadata.items()}
    pstats = {smeta[s.metadata_id]: s.int64_value for s in plane.stats}
    assert pstats["dropped_events"] == 476


# ---- (b)-(d) SIMDEV_TRACE with TensorFlow -------------------------------
GRAPH = """
import numpy as np
import tensorflow as tf
tf.config.set_soft_device_placement(False)

@tf.function
def step(x, w):
    y = tf.matmul(x, w, name="trace_mm")
    y = tf.nn.relu(y, name="trace_relu")
    y = tf.math.multiply(y, x, name="trace_scale")  # (y * y: Grappler
                                                    # makes it a Square)
    return tf.reduce_sum(y, name="trace_total")

with tf.device("/device:SIMDEV:0"):
    x = tf.constant(np.arange(64, dtype=np.float32).reshape(8, 8) / 64)
    w = tf.constant(np.eye(8, dtype=np.float32))
    cf = step.get_concrete_function(x, w)   # trace only: nothing runs
    out = step(x, w)                          # one run of the graph

@check("ran")
def _():
    ref = np.sum(np.maximum(np.arange(64).reshape(8, 8) / 64, 0) ** 2)
    return {"device": out.device, "value": float(out.numpy()),
            "ref": float(ref),
            "nodes": [(n.name, n.op) for n in cf.graph.as_graph_def().node]}
"""
KERNELS = {"trace_mm": "MatMul", "trace_relu": "Relu", "trace_scale": "Mul",
           "trace_total": "Sum"}


def test_tf_graph_trace(run_tf, tmp_path):
    path = tmp_path / "tf_trace.json"
    # The graph passes off: the test counts the graph's own kernels (the
    # fused ops of src/graph would replace some of them).
    r = run_tf(GRAPH, env={"SIMDEV_TRACE": str(path),
                           "SIMDEV_GRAPH_PASSES": "none"})
    d = r.data("ran")
    r.assert_clean_exit()
    assert d["device"].endswith("/device:SIMDEV:0")
    assert abs(d["value"] - d["ref"]) <= 1e-4 * abs(d["ref"])
    nodes = dict(map(tuple, d["nodes"]))
    for name, op in KERNELS.items():
        assert nodes.get(name) == op, nodes  # the graph is the one we think
    t = Trace(path)
    assert_well_formed(t)
    assert 1000 in t.process and t.process[1000] == "SIMDEV:0"
    kernels = collections.Counter(
        (e["name"], e["args"].get("op_type")) for runs in t.runs.values()
        for e in runs if e["cat"] == "kernel")
    # Exactly the graph's kernels, each once (its one run).
    assert kernels == collections.Counter(KERNELS.items()), kernels
    # Copies of the two inputs to the device, before the graph ran.
    h2d = [e for (pid, _), runs in t.runs.items() if pid == 1000
           for e in runs if e["cat"] == "memcpy_h2d"]
    assert len(h2d) >= 2 and all(e["args"]["bytes"] == 256 for e in h2d), h2d
    assert any(c["name"] == "memory in use" and c["pid"] == 1000
               for c in t.counters)
    assert max(c["args"]["bytes"] for c in t.counters if c["pid"] == 1000) > 0
    assert t.other["simdev_dropped_events"] == 0


def test_tf_unwritable_trace_path(run_tf, tmp_path):
    bad = tmp_path / "no-such-dir" / "trace.json"
    r = run_tf("import tensorflow as tf\nprint('IMPORTED', flush=True)\n",
               env={"SIMDEV_TRACE": str(bad)})
    assert "IMPORTED" not in r.stdout, r.describe()
    assert r.returncode == -signal.SIGABRT, r.describe()
    fatal = [l for l in r.stderr.splitlines() if "Check failed" in l]
    assert fatal, r.describe()
    line = "\n".join(fatal)
    assert "SIMDEV_TRACE" in line, line
    assert str(bad) in line and "No such file or directory" in line, line
    assert not bad.exists()


TINY = """
import tensorflow as tf
tf.config.set_soft_device_placement(False)
with tf.device("/device:SIMDEV:0"):
    x = tf.zeros([4])
    for i in range(1500):
        x = tf.math.add(x, 1.0)
@check("ran")
def _():
    return {"value": float(x.numpy()[0])}
"""


def test_tf_tiny_ring(run_tf, tmp_path):
    path = tmp_path / "tiny.json"
    r = run_tf(TINY, env={"SIMDEV_TRACE": str(path),
                          "SIMDEV_TRACE_EVENTS": "1024"})
    assert r.data("ran")["value"] == 1500.0
    r.assert_clean_exit()
    t = Trace(path)
    assert_well_formed(t)
    # 1500 AddV2 kernels went through one stream: it keeps its last 1024
    # records (the newest), and the trace says how many it dropped.
    (label,) = [lab for lab, n in t.other["simdev_dropped_by_stream"].items()
                if n > 0]
    runs = t.track(label)
    assert len(runs) == 1024
    dropped = t.other["simdev_dropped_by_stream"][label]
    adds = [e for e in runs if e["args"].get("op_type") == "AddV2"]
    assert dropped + len(adds) >= 1500
    assert t.other["simdev_dropped_events"] >= dropped
    # The oldest went: each dropped record took a correlation id (ids are
    # process-wide, from 1, in submit order) before every kept one, so the
    # smallest kept id is above the dropped count. Had the ring kept its
    # first records instead, the stream's first item (id of a few) would
    # be there.
    ids = [e["args"]["correlation_id"] for e in runs]
    assert min(ids) > dropped, (min(ids), dropped)
    # The adds come from one thread, one after the other: run order is
    # their submit order.
    add_ids = [e["args"]["correlation_id"] for e in adds]
    assert add_ids == sorted(add_ids)


# ---- (e) the conformance harness -----------------------------------------
def test_conformance_harness_trace(tmp_path):
    assert HARNESS.is_file(), f"{HARNESS} not built (make build)"
    assert BUILD_PLUGIN.is_file(), f"{BUILD_PLUGIN} not built (make build)"
    path = tmp_path / "harness.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDEV_")}
    env["SIMDEV_TRACE"] = str(path)
    # In one process (--no-fork): the plugin's exit handler writes the file
    # when the harness exits. Two tests that copy and wait between streams.
    p = subprocess.run([str(HARNESS), "--no-fork",
                        "--filter", "generic.memcpy_async",
                        "--filter", "generic.stream_dependency",
                        str(BUILD_PLUGIN)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    t = Trace(path)
    assert_well_formed(t)
    assert t.process.get(1000) == "SIMDEV:0"
    cats = collections.Counter(e["cat"] for r in t.runs.values() for e in r)
    assert cats["memcpy_h2d"] > 0 and cats["memcpy_d2h"] > 0, cats


def test_conformance_harness_trace_per_process(tmp_path):
    """Forked (the default), every test runs in a child process that loads
    the plugin: with "%p" each process writes its own trace."""
    assert HARNESS.is_file(), f"{HARNESS} not built (make build)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDEV_")}
    env["SIMDEV_TRACE"] = str(tmp_path / "harness-%p.json")
    p = subprocess.run([str(HARNESS), "--filter", "generic.memcpy_async",
                        "--filter", "generic.stream_dependency",
                        str(BUILD_PLUGIN)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    files = sorted(tmp_path.glob("harness-*.json"))
    assert len(files) >= 2, files  # one per test's child, at least
    cats = collections.Counter()
    for f in files:
        t = Trace(f)
        assert_well_formed(t)
        cats.update(e["cat"] for r in t.runs.values() for e in r)
    assert cats["memcpy_h2d"] > 0 and cats["memcpy_d2h"] > 0, cats
