"""The real viewer: TensorBoard's profile plugin reads what simdev writes.

tensorboard-plugin-profile (at the pinned version a shim over `xprof`; both in
requirements.txt) turns a profile's .xplane.pb into each tool's data with
xprof.convert.raw_to_tool_data.xspace_to_tool_data, the function its HTTP
handler calls. The tools tested:
  "trace_viewer@"  the streaming trace viewer, what the UI opens: events with
                   names and times, no stats (the UI fetches those per click);
  "trace_viewer"   the older one, which still puts each event's stats in its
                   args.

What xprof does with our planes (xprof/convert/xplane_to_trace_container.cc,
read at 2.24): host planes ("/host:CPU") first, then "/device:GPU:*" (or
"/device:TPU:*"), then every "/device:CUSTOM:*" plane, each as a process
named "<host> <plane name>"; each XLine with events becomes a thread named
after its display name; stats not on xprof's internal list become args. A
plane with any other name is not shown at all (test_other_plane_names_*
proves it), which is why simdev names its planes "/device:CUSTOM:<ordinal>".

Part 1 converts hand-made XSpaces (built with the TF wheel's xplane_pb2,
TensorFlow not imported) and checks the viewer's output exactly. Part 2
profiles a known tf.function on SIMDEV:0 with tf.profiler (soft placement
off) and checks the profile TF wrote, through the same converter. Part 3
runs examples/profile_training.py and checks both files it writes.

Conversions run in a subprocess: xprof loads a 40 MB C++ library, and a crash
in it must not take pytest down.
"""
import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

from profutil import assert_ordered_disjoint, ns

# Run as `python - xplane tool options`: prints the tool's data (JSON).
CONVERT = r'''
import json, sys
from xprof.convert import raw_to_tool_data
path, tool, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
data, _ = raw_to_tool_data.xspace_to_tool_data(
    [path], tool, {"trace_viewer_options": options, "use_saved_result": False})
if data is None:
    sys.exit("xprof returned no data for tool " + tool)
sys.stdout.write(data.decode() if isinstance(data, bytes) else data)
'''


def convert(xplane, tool, options=None):
    """The viewer's JSON for one .xplane.pb, as a dict."""
    p = subprocess.run(
        [sys.executable, "-c", CONVERT, str(xplane), tool,
         json.dumps(options or {})],
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, \
        f"xprof failed ({p.returncode}):\n{p.stderr[-3000:]}"
    return json.loads(p.stdout)


class View:
    """A trace viewer document, indexed: process and thread names, and the
    complete ("X") events per thread, ordered by start."""

    def __init__(self, doc):
        events = [e for e in doc["traceEvents"] if e]  # "{}" ends the list
        meta = [e for e in events if e["ph"] == "M"]
        self.process = {e["pid"]: e["args"]["name"] for e in meta
                        if e["name"] == "process_name"}
        self.thread = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
                       if e["name"] == "thread_name"}
        self.runs = collections.defaultdict(list)
        for e in events:
            if e["ph"] == "X":
                self.runs[(e["pid"], e["tid"])].append(e)
        for runs in self.runs.values():
            runs.sort(key=lambda e: e["ts"])

    def pid(self, plane):
        """The one process showing the plane named plane: the streaming
        viewer prefixes the host's name ("vm /device:CUSTOM:0")."""
        pids = [p for p, n in self.process.items()
                if n == plane or n.endswith(" " + plane)]
        assert len(pids) == 1, (plane, self.process)
        return pids[0]

    def threads(self, pid):
        """{thread name: its X events} of one process."""
        out = {}
        for (p, tid), name in self.thread.items():
            if p == pid:
                assert name not in out, f"two threads named {name}"
                out[name] = self.runs.get((p, tid), [])
        return out


@pytest.fixture(scope="module")
def xp(xplane_pb2):
    return xplane_pb2


# ---- part 1: hand-made XSpaces ---------------------------------------------
# Times as TF leaves them after ProfilerSession's post-processing: relative to
# the session's start (absolute CLOCK_REALTIME ns would overflow the viewer's
# uint64 picoseconds: ~1.8e21 ps).
LINE_START_NS = 2_000_000
STATS = ["tf_op", "op_type", "kind", "bytes", "queue_delay_ps",
         "correlation_id", "peer_stream", "status", "inline",
         "dropped_events"]
# Per device and stream: (name, kind, op type, start ns and duration ns from
# the line's start, bytes, peer stream) as simdev's encoder writes them.
WORK = {
    0: {1: [("MemcpyH2D", "memcpy_h2d", "", 0, 800, 4096, ""),
            ("model/dense/MatMul", "kernel", "MatMul", 1000, 5000, 0, ""),
            ("EventRecord", "event_record", "", 6000, 100, 0, "")],
        2: [("EventWait", "event_wait", "", 6200, 300, 0, "simdev0-s1"),
            ("model/dense/Relu", "kernel", "Relu", 6600, 900, 0, ""),
            ("MemcpyD2H", "memcpy_d2h", "", 7600, 700, 128, "")]},
    1: {1: [("model/dense_1/MatMul", "kernel", "MatMul", 500, 2500, 0, "")]},
}


def handmade_space(xp, plane_prefix="/device:CUSTOM:"):
    """An XSpace shaped like TF's with simdev's: a host plane with one
    thread, and a plane per device with a line per stream."""
    space = xp.XSpace()
    space.hostnames.append("viewerhost")
    host = space.planes.add(id=0, name="/host:CPU")
    host.event_metadata[1].id = 1
    host.event_metadata[1].name = "__inference_step_42"
    line = host.lines.add(id=4242, name="tf_Compute",
                          display_name="tf_Compute",
                          timestamp_ns=LINE_START_NS - 1000)
    line.events.add(metadata_id=1, offset_ps=0, duration_ps=20_000_000)
    corr = 0
    for dev, streams in WORK.items():
        plane = space.planes.add(id=dev, name=f"{plane_prefix}{dev}")
        for i, s in enumerate(STATS, 1):
            plane.stat_metadata[i].id = i
            plane.stat_metadata[i].name = s
        stat = {s: i for i, s in enumerate(STATS, 1)}
        plane.stats.add(metadata_id=stat["dropped_events"], int64_value=0)
        names = {}
        for sid, items in streams.items():
            label = f"simdev{dev}-s{sid}"
            line = plane.lines.add(id=sid, name=label, display_name=label,
                                   timestamp_ns=LINE_START_NS)
            for name, kind, op, start, dur, nbytes, peer in items:
                if name not in names:
                    names[name] = len(names) + 1
                    plane.event_metadata[names[name]].id = names[name]
                    plane.event_metadata[names[name]].name = name
                corr += 1
                ev = line.events.add(metadata_id=names[name],
                                     offset_ps=start * 1000,
                                     duration_ps=dur * 1000)
                ev.stats.add(metadata_id=stat["kind"], str_value=kind)
                ev.stats.add(metadata_id=stat["queue_delay_ps"],
                             int64_value=250_000)
                ev.stats.add(metadata_id=stat["correlation_id"],
                             int64_value=corr)
                if op:
                    ev.stats.add(metadata_id=stat["tf_op"],
                                 str_value=f"{name}:{op}")
                    ev.stats.add(metadata_id=stat["op_type"], str_value=op)
                if nbytes:
                    ev.stats.add(metadata_id=stat["bytes"], int64_value=nbytes)
                if peer:
                    ev.stats.add(metadata_id=stat["peer_stream"],
                                 str_value=peer)
    return space


def write_profile(space, root):
    """Lays space out as TF does:
    <logdir>/plugins/profile/<run>/<host>.xplane.pb."""
    run = Path(root, "plugins", "profile", "2026_01_01_00_00_00")
    run.mkdir(parents=True)
    path = run / "viewerhost.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


@pytest.fixture(scope="module")
def handmade(xp, tmp_path_factory):
    path = write_profile(handmade_space(xp), tmp_path_factory.mktemp("hand"))
    return {"streaming": View(convert(path, "trace_viewer@")),
            "legacy": View(convert(path, "trace_viewer"))}


@pytest.mark.parametrize("tool", ["streaming", "legacy"])
def test_handmade_planes_become_processes(handmade, tool):
    v = handmade[tool]
    for dev, streams in WORK.items():
        pid = v.pid(f"/device:CUSTOM:{dev}")
        assert sorted(v.threads(pid)) == sorted(
            f"simdev{dev}-s{sid}" for sid in streams)
    assert v.pid("/host:CPU") not in {v.pid("/device:CUSTOM:0"),
                                      v.pid("/device:CUSTOM:1")}


@pytest.mark.parametrize("tool", ["streaming", "legacy"])
def test_handmade_events_exact(handmade, tool):
    """Every event on its stream's thread with its name and exact times."""
    v = handmade[tool]
    for dev, streams in WORK.items():
        threads = v.threads(v.pid(f"/device:CUSTOM:{dev}"))
        for sid, items in streams.items():
            runs = threads[f"simdev{dev}-s{sid}"]
            got = [(e["name"], ns(e["ts"]), ns(e["dur"])) for e in runs]
            want = [(name, LINE_START_NS + start, dur)
                    for name, _, _, start, dur, _, _ in items]
            assert got == want
            assert_ordered_disjoint(sid, runs)


def test_handmade_stats_are_args(handmade):
    """The older viewer shows every stat simdev writes: none of the names is
    on xprof's internal list (those are dropped)."""
    threads = handmade["legacy"].threads(
        handmade["legacy"].pid("/device:CUSTOM:0"))
    by_name = {e["name"]: e["args"] for runs in threads.values()
               for e in runs}
    mm = by_name["model/dense/MatMul"]
    assert mm["tf_op"] == "model/dense/MatMul:MatMul"
    assert mm["op_type"] == "MatMul"
    assert mm["kind"] == "kernel"
    assert int(mm["queue_delay_ps"]) == 250_000
    assert int(mm["correlation_id"]) == 2
    assert int(by_name["MemcpyH2D"]["bytes"]) == 4096
    assert by_name["EventWait"]["peer_stream"] == "simdev0-s1"


@pytest.mark.parametrize("prefix", ["/device:SIMDEV:", "/device:custom:"])
def test_other_plane_names_are_not_shown(xp, tmp_path, prefix):
    """The same planes under another name: the viewer drops them (only
    "/device:CUSTOM:" works for a plugin's device), the host plane stays."""
    path = write_profile(handmade_space(xp, prefix), tmp_path)
    v = View(convert(path, "trace_viewer@"))
    assert any(n.endswith("/host:CPU") for n in v.process.values())
    assert not any(prefix in n for n in v.process.values()), v.process
    assert not any(n.startswith("simdev") for n in v.thread.values())


# ---- part 2: a profile TensorFlow wrote with simdev ------------------------
PROFILE = """
import glob, os
import numpy as np
import tensorflow as tf
tf.config.set_soft_device_placement(False)
LOGDIR = %(logdir)r

@tf.function
def step(x, w):
    y = tf.matmul(x, w, name="view_mm")
    y = tf.nn.relu(y, name="view_relu")
    # (not Mul(y, y): grappler renames that to ...ReplaceMulWithSquare_...)
    y = tf.math.subtract(y, x, name="view_sub")
    return tf.reduce_sum(y, name="view_total")

with tf.device("/device:SIMDEV:0"):
    x = tf.constant(np.arange(64, dtype=np.float32).reshape(8, 8) / 64)
    w = tf.constant(np.eye(8, dtype=np.float32))
    cf = step.get_concrete_function(x, w)   # traces; nothing runs
    step(x, w).numpy()                       # warm-up, outside the profile
    tf.profiler.experimental.start(LOGDIR)
    # Host events that bound the kernels by cause, not by timing: "calls"
    # starts before the first kernel is enqueued; "fetch" ends after each
    # call's result (which needs all of its kernels) is back.
    with tf.profiler.experimental.Trace("calls"):
        outs = [step(x, w) for _ in range(%(calls)d)]
    with tf.profiler.experimental.Trace("fetch"):
        vals = [float(o.numpy()) for o in outs]
    tf.profiler.experimental.stop()

@check("profiled")
def _():
    return {"device": outs[0].device, "values": vals,
            "nodes": [(n.name, n.op) for n in cf.graph.as_graph_def().node],
            "xplanes": glob.glob(os.path.join(
                LOGDIR, "plugins", "profile", "*", "*.xplane.pb"))}
"""
CALLS = 3
KERNELS = {"view_mm": "MatMul", "view_relu": "Relu", "view_sub": "Sub",
           "view_total": "Sum"}


@pytest.fixture(scope="module")
def tf_profile(run_tf, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("tblog")
    # The graph passes off: the test counts the graph's own kernels (the
    # fused ops of src/graph would replace some of them).
    r = run_tf(PROFILE % {"logdir": str(logdir), "calls": CALLS},
               env={"SIMDEV_GRAPH_PASSES": "none"}, timeout=300)
    d = r.data("profiled")
    r.assert_clean_exit()
    assert d["device"].endswith("/device:SIMDEV:0")
    nodes = dict(map(tuple, d["nodes"]))
    for name, op in KERNELS.items():
        assert nodes.get(name) == op, nodes  # the graph is the one we think
    assert len(d["xplanes"]) == 1, d["xplanes"]
    return d["xplanes"][0]


@pytest.fixture(scope="module")
def tf_view(tf_profile):
    # resolution 0: every event, none merged away for the screen's width.
    return View(convert(tf_profile, "trace_viewer@", {"resolution": 0}))


def simdev_threads(view):
    threads = view.threads(view.pid("/device:CUSTOM:0"))
    assert threads, "the SIMDEV plane has no stream tracks"
    for name in threads:
        assert name.startswith("simdev0-s"), name
    return threads


def test_tf_profile_streams_shown(tf_view):
    threads = simdev_threads(tf_view)
    assert all(threads.values()), {k: len(v) for k, v in threads.items()}
    assert tf_view.pid("/host:CPU") != tf_view.pid("/device:CUSTOM:0")


def test_tf_profile_kernels_once_per_call(tf_view):
    """Each kernel of the graph ran once per profiled call, on SIMDEV."""
    names = collections.Counter(e["name"] for runs in
                                simdev_threads(tf_view).values()
                                for e in runs)
    assert {k: names[k] for k in KERNELS} == {k: CALLS for k in KERNELS}, names


def test_tf_profile_kernel_stats(tf_profile):
    """The older viewer's args: each kernel carries TF's "name:type" and
    its op type, as TensorFlow's own device planes do."""
    v = View(convert(tf_profile, "trace_viewer"))
    runs = [e for runs in simdev_threads(v).values() for e in runs]
    for name, op in KERNELS.items():
        args = [e["args"] for e in runs if e["name"] == name]
        assert len(args) == CALLS, (name, len(args))
        for a in args:
            assert a["tf_op"] == f"{name}:{op}", a
            assert a["op_type"] == op and a["kind"] == "kernel", a


def test_tf_profile_streams_ordered(tf_view):
    for name, runs in simdev_threads(tf_view).items():
        assert_ordered_disjoint(name, runs)


def test_tf_profile_inside_host_window(tf_view):
    """SIMDEV's kernels lie between the host's "calls" start and "fetch"
    end: the device plane and TF's host plane share one clock."""
    host = {e["name"]: e for (pid, _), runs in tf_view.runs.items()
            if pid == tf_view.pid("/host:CPU") for e in runs
            if e["name"] in ("calls", "fetch")}
    assert set(host) == {"calls", "fetch"}, "host events missing"
    lo = ns(host["calls"]["ts"])
    hi = ns(host["fetch"]["ts"]) + ns(host["fetch"]["dur"])
    kernels = [e for runs in simdev_threads(tf_view).values() for e in runs
               if e["name"] in KERNELS]
    assert len(kernels) == CALLS * len(KERNELS)
    for e in kernels:
        assert lo <= ns(e["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= hi, \
            (e, lo, hi)


def test_tf_profile_viewer_drops_nothing(xp, tf_profile, tf_view):
    """The viewer shows exactly the SIMDEV events of the XSpace TF wrote,
    decoded independently with the wheel's xplane_pb2."""
    space = xp.XSpace()
    space.ParseFromString(Path(tf_profile).read_bytes())
    planes = [p for p in space.planes if p.name == "/device:CUSTOM:0"]
    assert len(planes) == 1, [p.name for p in space.planes]
    plane = planes[0]
    want = {}
    for line in plane.lines:
        if line.events:
            want[line.display_name or line.name] = collections.Counter(
                plane.event_metadata[e.metadata_id].name for e in line.events)
    got = {k: collections.Counter(e["name"] for e in v)
           for k, v in simdev_threads(tf_view).items()}
    assert got == want


# ---- examples/profile_training.py ------------------------------------------
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / \
    "profile_training.py"
EXAMPLE_STEPS = 2
# The CNN has two Conv2D layers: two filter gradients per training step.
FILTER_GRADS_PER_STEP = 2


@pytest.fixture(scope="module")
def example(plugin, tmp_path_factory):
    """Runs the example once: its stdout lines, the profile, the trace."""
    from conftest import child_env

    tmp = tmp_path_factory.mktemp("example")
    trace = tmp / "trace.json"
    p = subprocess.run(
        [sys.executable, str(EXAMPLE), "--logdir", str(tmp / "log"),
         "--trace", str(trace), "--steps", str(EXAMPLE_STEPS)],
        env=child_env(plugin), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    profile = [l.split(": ", 1)[1] for l in lines
               if l.startswith("TensorBoard profile: ")]
    assert len(profile) == 1, p.stdout
    assert f"Chrome trace (written when this process exits): {trace}" \
        in lines, p.stdout
    return {"stdout": lines, "profile": Path(profile[0]), "trace": trace,
            "log": tmp / "log"}


def test_example_profile_in_logdir(example):
    """The profile sits where TensorBoard looks for it."""
    prof = example["profile"]
    assert prof.is_file()
    assert prof.parent.parent == example["log"] / "plugins" / "profile"


def test_example_profile_in_viewer(example):
    """The viewer shows the SIMDEV streams, with the profiled steps only:
    the warm-up step ran before the profiler started."""
    v = View(convert(example["profile"], "trace_viewer@", {"resolution": 0}))
    threads = simdev_threads(v)
    for name, runs in threads.items():
        assert_ordered_disjoint(name, runs)
        # The example's summary printed the same count per stream.
        assert f"    {name}: {len(runs)} events" in example["stdout"]
    names = [e["name"] for runs in threads.values() for e in runs]
    grads = [n for n in names if n.endswith("Conv2DBackpropFilter")]
    assert len(grads) == FILTER_GRADS_PER_STEP * EXAMPLE_STEPS, names


def test_example_chrome_trace(example):
    """SIMDEV_TRACE's JSON, written at exit, covers the whole run: the
    warm-up step too."""
    doc = json.loads(example["trace"].read_text())
    events = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert "SIMDEV:0" in procs.values(), procs
    ops = collections.Counter(
        e["args"].get("op_type") for e in events
        if e["ph"] == "X" and procs.get(e["pid"]) == "SIMDEV:0")
    assert ops["Conv2DBackpropFilter"] == \
        FILTER_GRADS_PER_STEP * (EXAMPLE_STEPS + 1), ops
