"""TF_InitProfiler end to end: TensorFlow's own profiler writes simdev's
streams (src/profiler/plugin.c, docs/profiling.md).

- Sessions through tf.profiler.experimental.start/stop and .Profile on a
  known tf.function (soft placement off): the .xplane.pb TF writes has the
  "/device:CUSTOM:0" plane beside TF's "/host:CPU" plane, one line per
  stream, every kernel of the graph exactly once per run, ordered and
  non-overlapping per line, inside the session's window and on the host's
  clock (each kernel starts after TF's executor began launching it and
  holds the executor's "done" of that node). Two sessions in a row each get
  their own window. ProfilerOptions do not reach TF 2.21's C++ (pinned).
- SIMDEV_TRACE and a session at once: recording nests.
- The callbacks called directly (ctypes), as TF never does: collect with no
  start, stop with no start, a second start, the two-call size protocol
  with a buffer too small.
- What TF itself does with a profiler plugin, shown with
  tests/tf/profiler_probe.c (a test-only plugin built here with cc): which
  thread calls what, the two calls of collect, the destroy calls at load,
  and what happens to an XSpace that does not parse (dropped without a
  word), a truncated one (partial planes), a failed collect or start
  (logged, the session carries on).

The .xplane.pb files are decoded in this process with the wheel's
xplane_pb2, loaded by file path (protobuf only, no TensorFlow import).
"""
import collections
import glob
import os
import re
import shutil
import subprocess

import pytest

from profutil import assert_line_disjoint, tf_dir

# Node name -> op type of the known graph (SIMDEV_GRAPH_PASSES=none keeps
# simdev's fusions from renaming them; TF's remapper fuses only for CPU and
# GPU).
KERNELS = {
    "l1_matmul": "MatMul",
    "l1_bias": "BiasAdd",
    "l1_relu": "Relu",
    "l2_matmul": "MatMul",
    "out_tanh": "Tanh",
}

# Cross-clock comparisons (host events against simdev's, converted from
# CLOCK_MONOTONIC with one CLOCK_REALTIME offset read at stop) allow this
# much: the conversion's own error is well under a microsecond; a wrong
# clock is off by seconds or by 50 years.
CLOCK_SLACK_NS = 50_000

STREAM_LINE = re.compile(r"simdev0-s(\d+)")




def read_space(pb2, logdir):
    """The XSpace of the one .xplane.pb TF wrote under logdir."""
    files = glob.glob(os.path.join(logdir, "plugins", "profile", "*",
                                   "*.xplane.pb"))
    assert len(files) == 1, f"expected one .xplane.pb under {logdir}: {files}"
    space = pb2.XSpace()
    with open(files[0], "rb") as f:
        space.ParseFromString(f.read())
    return space


def plane(space, name):
    found = [p for p in space.planes if p.name == name]
    assert len(found) == 1, \
        f"{len(found)} planes named {name!r} in {[p.name for p in space.planes]}"
    return found[0]


def stat_value(pl, stat):
    """A stat's value; ref_value resolved to the referenced string."""
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return pl.stat_metadata[stat.ref_value].name
    return getattr(stat, kind) if kind else None


def stats(pl, holder):
    return {pl.stat_metadata[s.metadata_id].name: stat_value(pl, s)
            for s in holder.stats}


Event = collections.namedtuple("Event", "line name begin_ns end_ns stats")


def events(pl):
    """Every event of the plane, times in ns from the session's start (TF
    writes line timestamps relative to it)."""
    out = []
    for line in pl.lines:
        for e in line.events:
            begin = line.timestamp_ns + e.offset_ps / 1000.0
            out.append(Event(line.name, pl.event_metadata[e.metadata_id].name,
                             begin, begin + e.duration_ps / 1000.0,
                             stats(pl, e)))
    return out


def session_window_ns(space):
    env = stats_of_plane(plane(space, "Task Environment"))
    return env["profile_stop_time"] - env["profile_start_time"]


def stats_of_plane(pl):
    return stats(pl, pl)


# --------------------------------------------------------------------------
# Sessions through TensorFlow's API

GRAPH = r'''
import os
import numpy as np
import tensorflow as tf
tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(5)
with tf.device("/device:SIMDEV:0"):
    x = tf.constant(rng.standard_normal((32, 64)), tf.float32)
    w1 = tf.constant(rng.standard_normal((64, 48)), tf.float32)
    b1 = tf.constant(rng.standard_normal((48,)), tf.float32)
    w2 = tf.constant(rng.standard_normal((48, 16)), tf.float32)

@tf.function
def step(x, w1, b1, w2):
    with tf.device("/device:SIMDEV:0"):
        h = tf.linalg.matmul(x, w1, name="l1_matmul")
        h = tf.nn.bias_add(h, b1, name="l1_bias")
        h = tf.nn.relu(h, name="l1_relu")
        y = tf.linalg.matmul(h, w2, name="l2_matmul")
        return tf.math.tanh(y, name="out_tanh")

def run(n):
    for _ in range(n):
        y = step(x, w1, b1, w2)
        assert y.device.endswith("SIMDEV:0"), y.device
        y.numpy()  # the device work has ended before the session stops

run(1)  # traced, optimized, placed: the sessions see only the runs
LOG = os.environ["PROFILE_LOGDIR"]
'''

SESSIONS = GRAPH + r'''
@check("start_stop")
def _():
    tf.profiler.experimental.start(LOG + "/a")
    run(1)
    tf.profiler.experimental.stop()

@check("profile_context")
def _():
    with tf.profiler.experimental.Profile(LOG + "/b"):
        run(2)

@check("device_tracer_level_0")
def _():
    opts = tf.profiler.experimental.ProfilerOptions(device_tracer_level=0)
    tf.profiler.experimental.start(LOG + "/c", options=opts)
    run(1)
    tf.profiler.experimental.stop()
'''


@pytest.fixture(scope="module")
def sessions(run_tf, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("profiles")
    r = run_tf(SESSIONS, env={"PROFILE_LOGDIR": str(logdir),
                              "SIMDEV_GRAPH_PASSES": "none"})
    r.assert_clean_exit()
    return r, logdir


def device_plane_checks(space, runs):
    """The checks every session with SIMDEV work passes; returns the
    kernel events of the SIMDEV plane."""
    names = [p.name for p in space.planes]
    assert "/host:CPU" in names, names
    dev = plane(space, "/device:CUSTOM:0")
    assert dev.id == 0
    assert stats_of_plane(dev).get("dropped_events") == 0, stats_of_plane(dev)
    # One line per stream, named after the stream's worker thread.
    assert dev.lines, "the SIMDEV plane has no line"
    ids = [l.id for l in dev.lines]
    assert len(ids) == len(set(ids)), ids
    for line in dev.lines:
        m = STREAM_LINE.fullmatch(line.name)
        assert m, f"line {line.name!r} is not simdev0-s<n>"
        assert line.id == int(m.group(1)), (line.id, line.name)
        assert line.display_name == line.name
        assert line.events, f"line {line.name} has no event"
    # Per line: ordered, not overlapping (a stream runs one item at a time).
    for line in dev.lines:
        assert_line_disjoint(line)
    evs = events(dev)
    # Inside the session's window (TF wrote times relative to its start).
    window = session_window_ns(space)
    for e in evs:
        assert -CLOCK_SLACK_NS <= e.begin_ns <= e.end_ns <= window + CLOCK_SLACK_NS, \
            f"{e.name} at [{e.begin_ns}, {e.end_ns}] ns, session 0..{window} ns"
    kernels = [e for e in evs if e.stats.get("kind") == "kernel"]
    got = collections.Counter(e.name for e in kernels)
    for name, op_type in KERNELS.items():
        assert got[name] == runs, \
            f"{name}: {got[name]} kernel events for {runs} runs; all: {dict(got)}"
    for e in kernels:
        if e.name in KERNELS:
            assert e.stats["op_type"] == KERNELS[e.name], e
            assert e.stats["tf_op"] == f"{e.name}:{KERNELS[e.name]}", e
            assert e.stats["correlation_id"] > 0, e
            assert e.stats["queue_delay_ps"] >= 0, e
            assert STREAM_LINE.fullmatch(e.line), e
    return kernels


def host_async(space):
    """{node name: [(kind, begin_ns, end_ns)]} of TF's executor events for
    asynchronous kernels (every simdev kernel is one)."""
    host = plane(space, "/host:CPU")
    out = collections.defaultdict(list)
    for e in events(host):
        if e.name.startswith("ExecutorState::ProcessAsync::"):
            out[e.stats.get("name")].append(
                (e.name.rsplit("::", 1)[1], e.begin_ns, e.end_ns))
    return out


def test_start_stop_writes_simdev_plane(sessions, xplane_pb2):
    r, logdir = sessions
    r.data("start_stop")
    space = read_space(xplane_pb2, str(logdir / "a"))
    kernels = device_plane_checks(space, runs=1)
    # Every kernel TF's executor launched (its host events) is on the
    # device plane, and nothing else is.
    launched = host_async(space)
    assert set(launched) == {e.name for e in kernels}, \
        (sorted(launched), sorted(e.name for e in kernels))


def test_same_clock_as_host(sessions, xplane_pb2):
    """Each kernel runs after TF began launching it (ProcessAsync::Start on
    TF's thread) and before TF's done callback of it (ProcessAsync::Done,
    which simdev calls once the kernel's run returned: a record ends when
    run returns, before done). A clock off in either direction breaks one
    of the two bounds."""
    r, logdir = sessions
    r.data("start_stop")
    space = read_space(xplane_pb2, str(logdir / "a"))
    launched = host_async(space)
    kernels = [e for e in events(plane(space, "/device:CUSTOM:0"))
               if e.stats.get("kind") == "kernel"]
    for k in kernels:
        starts = [b for kind, b, _ in launched[k.name] if kind == "Start"]
        dones = [(b, e) for kind, b, e in launched[k.name] if kind == "Done"]
        assert len(starts) == 1 and len(dones) == 1, (k, launched[k.name])
        assert starts[0] <= k.begin_ns + CLOCK_SLACK_NS, \
            f"{k.name} ran at {k.begin_ns} ns, before TF launched it at {starts[0]}"
        d0, _ = dones[0]
        assert k.end_ns <= d0 + CLOCK_SLACK_NS, \
            f"{k.name} [{k.begin_ns}, {k.end_ns}] ends after its done at {d0}"


def test_profile_context_second_session(sessions, xplane_pb2):
    """A second session in a row: its own window (two runs, not three)."""
    r, logdir = sessions
    r.data("profile_context")
    space = read_space(xplane_pb2, str(logdir / "b"))
    device_plane_checks(space, runs=2)


def test_profiler_options_do_not_reach_tf_2_21(sessions, xplane_pb2):
    """TF 2.21 drops every field of tf.profiler.experimental.ProfilerOptions
    on the way to C++ (its pybind layer does not see Python ints as ints)
    and logs a warning per field: device_tracer_level=0 does not switch
    device profilers off from Python, so the SIMDEV plane is still there.
    If this fails, TF passes the options now: the plane must then be
    absent (TF creates no pluggable profiler at level 0) and
    docs/profiling.md must say so."""
    r, logdir = sessions
    r.data("device_tracer_level_0")
    assert "device_tracer_level expects an" in r.stderr, r.describe()
    space = read_space(xplane_pb2, str(logdir / "c"))
    device_plane_checks(space, runs=1)


# --------------------------------------------------------------------------
# SIMDEV_TRACE and a TF session at once

NESTED = GRAPH + r'''
@check("nested")
def _():
    tf.profiler.experimental.start(LOG + "/n")
    run(1)
    tf.profiler.experimental.stop()
    run(1)  # after the session: SIMDEV_TRACE still records
'''


def test_session_nests_with_simdev_trace(run_tf, tmp_path, xplane_pb2):
    import json
    trace = tmp_path / "trace.json"
    r = run_tf(NESTED, env={"PROFILE_LOGDIR": str(tmp_path),
                            "SIMDEV_GRAPH_PASSES": "none",
                            "SIMDEV_TRACE": str(trace)})
    r.data("nested")
    r.assert_clean_exit()
    # The session saw its own run only ...
    device_plane_checks(read_space(xplane_pb2, str(tmp_path / "n")), runs=1)
    # ... and the whole-run trace all three: the session's start did not
    # clear what SIMDEV_TRACE had, its stop did not end SIMDEV_TRACE.
    doc = json.loads(trace.read_text())
    got = collections.Counter(e["name"] for e in doc["traceEvents"]
                              if e.get("ph") == "X" and e.get("cat") == "kernel")
    for name in KERNELS:
        assert got[name] == 3, (name, dict(got))


# --------------------------------------------------------------------------
# The callbacks called directly

DIRECT = r'''
import ctypes, os
import tensorflow as tf
tf.config.set_soft_device_placement(False)

fw = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__),
                              "libtensorflow_framework.so.2"))
fw.TF_NewStatus.restype = ctypes.c_void_p
fw.TF_GetCode.argtypes = [ctypes.c_void_p]
fw.TF_Message.argtypes = [ctypes.c_void_p]
fw.TF_Message.restype = ctypes.c_char_p
fw.TF_DeleteStatus.argtypes = [ctypes.c_void_p]

# The layout of pluggable_profiler.h's structs (TF 2.21).
class Profiler(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("device_type", ctypes.c_char_p)]
RunFn = ctypes.CFUNCTYPE(None, ctypes.POINTER(Profiler), ctypes.c_void_p)
CollectFn = ctypes.CFUNCTYPE(None, ctypes.POINTER(Profiler), ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p)
class Fns(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("start", RunFn), ("stop", RunFn),
                ("collect_data_xspace", CollectFn)]
class Params(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("major_version", ctypes.c_int32),
                ("minor_version", ctypes.c_int32),
                ("patch_version", ctypes.c_int32),
                ("profiler", ctypes.POINTER(Profiler)),
                ("profiler_fns", ctypes.POINTER(Fns)),
                ("destroy_profiler", ctypes.c_void_p),
                ("destroy_profiler_fns", ctypes.c_void_p)]

# The library TF loaded (dlopen hands back the same one).
lib = ctypes.CDLL(os.environ["SIMDEV_PLUGIN_LIB"])
lib.TF_InitProfiler.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.TF_InitProfiler.restype = None
prof, fns = Profiler(), Fns()
params = Params(struct_size=ctypes.sizeof(Params), major_version=0,
                minor_version=0, patch_version=1,
                profiler=ctypes.pointer(prof), profiler_fns=ctypes.pointer(fns))

def call(fn, *args):
    st = fw.TF_NewStatus()
    try:
        fn(*args, ctypes.c_void_p(st))
        return fw.TF_GetCode(st), fw.TF_Message(st).decode()
    finally:
        fw.TF_DeleteStatus(st)

code, msg = call(lib.TF_InitProfiler, ctypes.byref(params))
assert code == 0, msg
P = ctypes.pointer(prof)

def collect(buf_len):
    size = ctypes.c_size_t(buf_len if buf_len is not None else 12345)
    buf = None if buf_len is None else (ctypes.c_uint8 * max(buf_len, 1))()
    code, msg = call(fns.collect_data_xspace, P,
                     None if buf is None else ctypes.cast(buf, ctypes.c_void_p),
                     ctypes.byref(size))
    data = None if buf is None else bytes(buf)[:size.value]
    return code, msg, size.value, data

def work():
    with tf.device("/device:SIMDEV:0"):
        a = tf.ones([16, 16])
        tf.linalg.matmul(a, a).numpy()

@check("init")
def _():
    return {"device_type": prof.device_type.decode(),
            "sizes": [params.struct_size, prof.struct_size, fns.struct_size],
            "destroy_set": bool(params.destroy_profiler)
                           and bool(params.destroy_profiler_fns)}

@check("collect_without_start")
def _():
    code, msg, size, _ = collect(None)
    return {"code": code, "msg": msg, "size": size}

@check("stop_without_start")
def _():
    code, msg = call(fns.stop, P)
    return {"code": code, "msg": msg}

@check("session")
def _():
    out = {"start": call(fns.start, P)}
    out["second_start"] = call(fns.start, P)
    out["collect_running"] = collect(None)[:3]
    work()
    out["stop"] = call(fns.stop, P)
    code, msg, size, _ = collect(None)
    out["size_query"] = [code, msg, size]
    out["too_small"] = collect(size - 1)[:3]
    code, msg, got, data = collect(size)
    out["fill"] = [code, msg, got]
    out["xspace_hex"] = data.hex()
    out["again"] = collect(None)[:3]
    return out

@check("direct_start_during_tf_session")
def _():
    log = os.environ["PROFILE_LOGDIR"]
    tf.profiler.experimental.start(log)
    try:
        during = call(fns.start, P)
        work()
    finally:
        tf.profiler.experimental.stop()
    return {"during": during}
'''

TF_OK, TF_INVALID_ARGUMENT, TF_FAILED_PRECONDITION = 0, 3, 9


@pytest.fixture(scope="module")
def direct(run_tf, plugin, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("direct")
    r = run_tf(DIRECT, env={"SIMDEV_PLUGIN_LIB": plugin.path,
                            "PROFILE_LOGDIR": str(logdir)})
    r.assert_clean_exit()
    return r, logdir


def test_init_fills_the_structs(direct):
    d = direct[0].data("init")
    assert d["device_type"] == "SIMDEV"
    # TF_PROFILER_REGISTRATION_PARAMS, TP_PROFILER, TP_PROFILER_FNS sizes:
    # the offset of the end of the last field, on LP64.
    assert d["sizes"] == [64, 24, 40], d
    assert d["destroy_set"]


def test_collect_without_start_is_an_error(direct):
    d = direct[0].data("collect_without_start")
    assert d["code"] == TF_FAILED_PRECONDITION, d
    assert d["size"] == 0, "the size must be set (TF reads it) and be 0"
    assert "start" in d["msg"] and "simdev profiler" in d["msg"], d


def test_stop_without_start_is_an_error(direct):
    d = direct[0].data("stop_without_start")
    assert d["code"] == TF_FAILED_PRECONDITION and "no session" in d["msg"], d


def test_two_call_protocol(direct, xplane_pb2):
    d = direct[0].data("session")
    assert d["start"] == [TF_OK, ""], d
    assert d["second_start"][0] == TF_FAILED_PRECONDITION, d
    assert "already running" in d["second_start"][1], d
    assert d["collect_running"][0] == TF_FAILED_PRECONDITION, d
    assert d["collect_running"][2] == 0, d
    assert d["stop"] == [TF_OK, ""], d
    code, msg, size = d["size_query"]
    assert code == TF_OK and size > 0, d["size_query"]
    # A buffer one byte short: refused, the size told again, data kept ...
    code, msg, told = d["too_small"]
    assert code == TF_INVALID_ARGUMENT and told == size, d["too_small"]
    assert f"{size - 1} bytes" in msg, msg
    # ... so the right buffer still gets it.
    assert d["fill"] == [TF_OK, "", size], d["fill"]
    space = xplane_pb2.XSpace()
    data = bytes.fromhex(d["xspace_hex"])
    assert len(data) == size
    assert space.ParseFromString(data) == size  # all of it parses
    dev = plane(space, "/device:CUSTOM:0")
    names = {dev.event_metadata[e.metadata_id].name
             for l in dev.lines for e in l.events}
    assert "MatMul" in names, names
    # Handed over once.
    assert d["again"][0] == TF_FAILED_PRECONDITION and d["again"][2] == 0, d


def test_one_session_at_a_time(direct, xplane_pb2):
    r, logdir = direct
    d = r.data("direct_start_during_tf_session")
    assert d["during"][0] == TF_FAILED_PRECONDITION, d
    # TF's own session was not disturbed by the refused start.
    space = read_space(xplane_pb2, str(logdir))
    dev = plane(space, "/device:CUSTOM:0")
    assert any(dev.event_metadata[e.metadata_id].name == "MatMul"
               for l in dev.lines for e in l.events)


# --------------------------------------------------------------------------
# What TensorFlow does with a profiler plugin (tests/tf/profiler_probe.c)

PROBE = r'''
import glob, os, threading
import tensorflow as tf
from tensorflow.python.framework import load_library
import sys
print("MAIN tid=%d" % threading.get_native_id(), file=sys.stderr, flush=True)
load_library.load_pluggable_device_library(os.environ["PROBE_LIB"])
print("LOADED", file=sys.stderr, flush=True)
LOG = os.environ["PROFILE_LOGDIR"]

def session(mode):
    os.environ["PROBE_MODE"] = mode  # the probe reads it at start and collect
    print("SESSION %s" % mode, file=sys.stderr, flush=True)
    # Started on a thread of its own, stopped on this one.
    t = threading.Thread(target=tf.profiler.experimental.start,
                         args=(LOG + "/" + mode,))
    t.start()
    t.join()
    print("STARTER tid=%d" % t.native_id, file=sys.stderr, flush=True)
    with tf.device("/device:SIMDEV:0"):
        a = tf.ones([8, 8])
        tf.linalg.matmul(a, a).numpy()
    tf.profiler.experimental.stop()

for mode in ("ok", "garbage", "padded", "truncated", "error", "start_error"):
    @check(mode)
    def _():
        session(mode)
print("END", file=sys.stderr, flush=True)
'''

PROBE_MODES = ("ok", "garbage", "padded", "truncated", "error", "start_error")


@pytest.fixture(scope="module")
def probe_lib(tmp_path_factory):
    """tests/tf/profiler_probe.c built against the wheel's headers."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("cc not found: the probe plugin is built with it")
    lib = tmp_path_factory.mktemp("probe_lib") / "libsimdev_profiler_probe.so"
    src = os.path.join(os.path.dirname(__file__), "profiler_probe.c")
    tfd = tf_dir()
    p = subprocess.run(
        [cc, "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Werror",
         "-Wno-unused-parameter", "-I", os.path.join(tfd, "include"), "-o",
         str(lib), src, os.path.join(tfd, "libtensorflow_framework.so.2"),
         "-Wl,--no-undefined"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return lib


@pytest.fixture(scope="module")
def probe(run_tf, probe_lib, tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    r = run_tf(PROBE, env={"PROBE_LIB": str(probe_lib),
                           "PROFILE_LOGDIR": str(out)})
    r.assert_clean_exit()
    return r, out


def probe_log(r):
    """stderr split at the SESSION markers: {"load": [...], mode: [...]}."""
    parts, cur = {"load": []}, "load"
    for line in r.stderr.splitlines():
        if line.startswith("SESSION "):
            cur = line.split()[1]
            parts[cur] = []
        elif line.startswith("END"):
            cur = "end"
            parts[cur] = []
        else:
            parts[cur].append(line)
    return parts


def calls(lines):
    return [l.split()[1] for l in lines if l.startswith("PROBE ")]


def tid_of(lines, prefix):
    for l in lines:
        if l.startswith(prefix):
            return int(re.search(r"tid=(\d+)", l).group(1))
    raise AssertionError(f"no {prefix!r} line in {lines}")


def test_tf_load_calls_init_then_destroys_copies(probe):
    r, _ = probe
    log = probe_log(r)
    main = tid_of(log["load"], "MAIN")
    # TF_InitProfiler on the loading thread; then both destroy functions,
    # twice, at once: TF's factory holds the structs by value and its
    # temporaries are destroyed. The profiler stays registered (below).
    assert calls(log["load"]) == ["init", "destroy_profiler",
                                  "destroy_profiler_fns", "destroy_profiler",
                                  "destroy_profiler_fns"], log["load"]
    assert tid_of(log["load"], "PROBE init") == main
    assert "struct_size=64 version=0.0.1" in \
        [l for l in log["load"] if l.startswith("PROBE init")][0]
    # Nor at exit: the factory is never destroyed.
    assert calls(log["end"]) == [], log["end"]


INIT_ERROR = r'''
import os
import tensorflow as tf
from tensorflow.python.framework import load_library
load_library.load_pluggable_device_library(os.environ["PROBE_LIB"])
print("NOT REACHED", flush=True)
'''


def test_tf_aborts_on_a_failed_init(run_tf, probe_lib):
    """An error from TF_InitProfiler is a CHECK failure in TF's plugin
    loader: the process aborts (at `import tensorflow` for a plugin in
    tensorflow-plugins/)."""
    r = run_tf(INIT_ERROR, env={"PROBE_LIB": str(probe_lib),
                                "PROBE_MODE": "init_error"})
    assert r.returncode == -6, r.describe()  # SIGABRT
    assert "NOT REACHED" not in r.stdout
    assert "Check failed" in r.stderr, r.describe()
    assert "probe: TF_InitProfiler failed on purpose" in r.stderr, r.describe()


def test_tf_drives_start_stop_collect(probe, xplane_pb2):
    r, out = probe
    r.data("ok")
    log = probe_log(r)["ok"]
    main = tid_of(probe_log(r)["load"], "MAIN")
    assert calls(log) == ["start", "stop", "collect", "collect"], log
    # start on the thread that started the session, the rest on the one
    # that stopped it.
    assert tid_of(log, "PROBE start") == tid_of(log, "STARTER")
    assert tid_of(log, "STARTER") != main
    assert tid_of(log, "PROBE stop") == main
    coll = [l for l in log if l.startswith("PROBE collect")]
    assert "buffer=null" in coll[0] and "buffer=set size_in=37" in coll[1], coll
    space = read_space(xplane_pb2, str(out / "ok"))
    names = [p.name for p in space.planes]
    assert "/device:CUSTOM:77" in names and "/device:CUSTOM:0" in names, names


def test_tf_drops_an_xspace_that_does_not_parse(probe, xplane_pb2):
    """The silent drop: no plane, no error, no log line; the other
    plugin's planes are unaffected."""
    r, out = probe
    r.data("garbage")  # the session "succeeds"
    log = probe_log(r)["garbage"]
    assert calls(log) == ["start", "stop", "collect", "collect"], log
    assert not [l for l in log if re.match(r"[EF]\d{4} ", l)], log
    space = read_space(xplane_pb2, str(out / "garbage"))
    names = [p.name for p in space.planes]
    assert "/device:CUSTOM:77" not in names, names
    assert "/device:CUSTOM:0" in names, names


def test_tf_keeps_partial_planes_of_a_truncated_xspace(probe, xplane_pb2):
    r, out = probe
    r.data("truncated")
    space = read_space(xplane_pb2, str(out / "truncated"))
    probe_plane = plane(space, "/device:CUSTOM:77")
    # The plane is there, its line's name is not what the plugin meant.
    assert [l.name for l in probe_plane.lines] != ["probe-s0"]


def test_tf_parses_the_whole_buffer_it_allocated(probe, xplane_pb2):
    """The second call's size is ignored: TF parses the buffer of the first
    call's size; zero padding happens to parse (a 0 tag ends the parse)."""
    r, out = probe
    r.data("padded")
    log = probe_log(r)["padded"]
    coll = [l for l in log if l.startswith("PROBE collect")]
    assert "size_in=45" in coll[1], coll
    space = read_space(xplane_pb2, str(out / "padded"))
    assert [l.name for l in plane(space, "/device:CUSTOM:77").lines] == ["probe-s0"]


def test_tf_logs_a_failed_collect_and_carries_on(probe, xplane_pb2):
    r, out = probe
    r.data("error")
    log = probe_log(r)["error"]
    # Size 0: no second call.
    assert calls(log) == ["start", "stop", "collect"], log
    assert any(l.startswith("E") and "probe: collect failed on purpose" in l
               for l in log), log
    names = [p.name for p in read_space(xplane_pb2, str(out / "error")).planes]
    assert "/device:CUSTOM:77" not in names and "/device:CUSTOM:0" in names


def test_tf_skips_stop_and_collect_after_a_failed_start(probe, xplane_pb2):
    r, out = probe
    r.data("start_error")  # the session itself raises nothing
    log = probe_log(r)["start_error"]
    assert calls(log) == ["start"], log
    assert any("probe: start failed on purpose" in l for l in log), log
    names = [p.name for p in
             read_space(xplane_pb2, str(out / "start_error")).planes]
    assert "/device:CUSTOM:77" not in names and "/device:CUSTOM:0" in names
