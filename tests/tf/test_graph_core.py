"""The graph optimizer's frame (src/graph/plugin.c, sg_optimize, the codec,
simdev_graph_opt), independent of any fusion pass:

- TF 2.21 loads TF_InitGraph and calls optimize_func on graphs holding
  SIMDEV nodes, once per meta-optimizer iteration (even 3-node ones), and
  never on a graph with no SIMDEV node; RewriterConfig.use_plugin_optimizers
  (tf.config.optimizer.set_experimental_options) switches it off and on per
  function instantiation. Proved with SIMDEV_GRAPH_LOG's line per call,
  which needs no pass to rewrite anything.
- optimize_func, called straight through ctypes (TF_InitGraph, then the
  optimize_func it registered), answers garbage GraphDefs and a NULL
  TF_GrapplerItem with InvalidArgument, writes no output, and never crashes.
- Bad SIMDEV_GRAPH_PASSES / SIMDEV_GRAPH_LOG make `import tensorflow`
  abort with a message naming the variable (as every bad SIMDEV_* does);
  SIMDEV_GRAPH_PASSES=none leaves every graph to TF.
- simdev_graph_opt on real GraphDefs (tests/fuzz/seeds_graph): a graph fed
  twice is unchanged the second time; untouched graphs come back byte for
  byte; bad input and bad settings fail with clear messages.
"""
import concurrent.futures
import glob
import os
import re
import signal
import subprocess

import pytest

import graphutil
from graphutil import IMPORT

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = sorted(glob.glob(os.path.join(ROOT, "tests/fuzz/seeds_graph/*.pb")))
LOG_RE = re.compile(r"^simdev graph optimizer: (\d+) nodes, (\d+) on SIMDEV, "
                    r"passes (\S+): (\d+) rewrites", re.M)

# Captures the plugin's stderr lines between steps: fd 2 goes to a file.
CALLS = IMPORT + r'''
import os, re, tempfile
_log = tempfile.TemporaryFile()
os.dup2(_log.fileno(), 2)
_seen = [0]
def new_calls():
    """The optimizer's log lines since the last call: [(nodes, on_simdev)]."""
    _log.seek(0)
    lines = [l for l in _log.read().decode(errors="replace").splitlines()
             if l.startswith("simdev graph optimizer:")]
    fresh = lines[_seen[0]:]
    _seen[0] = len(lines)
    out = []
    for l in fresh:
        m = re.match(r"simdev graph optimizer: (\d+) nodes, (\d+) on SIMDEV, "
                     r"passes (\S+): (\d+) rewrites", l)
        out.append([int(m.group(1)), int(m.group(2)), m.group(3)] if m else [l])
    return out
tf.config.set_soft_device_placement(False)

def body(x, b):
    return tf.nn.relu(tf.nn.bias_add(x, b)) * 2.0 + 1.0

def inputs(dev):
    with tf.device(dev):
        return tf.ones([2, 3]), tf.ones([3])
'''

FRAME = CALLS + r'''
@check("simdev_function")
def _():
    x, b = inputs("/device:SIMDEV:0")
    new_calls()
    with tf.device("/device:SIMDEV:0"):
        c = graphutil.collect(tf.function(body), x, b)
    return {"calls": new_calls(), "device": c.result.device,
            "post_ops": graphutil.ops(c.post, device="SIMDEV")}

@check("cpu_function")
def _():
    x, b = inputs("/CPU:0")
    new_calls()
    with tf.device("/CPU:0"):
        y = tf.function(body)(x, b)
    return {"calls": new_calls(), "device": y.device}

@check("tiny_function")
def _():
    x, b = inputs("/device:SIMDEV:0")
    new_calls()
    with tf.device("/device:SIMDEV:0"):
        y = tf.function(lambda x: tf.nn.relu(x))(x)  # _Arg, Relu, _Retval
    return {"calls": new_calls(), "device": y.device}

@check("plugin_optimizers_off")
def _():
    x, b = inputs("/device:SIMDEV:0")
    new_calls()
    graphutil.plugin_optimizers(False)
    with tf.device("/device:SIMDEV:0"):
        off = tf.function(body)(x, b).numpy().tolist()
    calls_off = new_calls()
    graphutil.plugin_optimizers(True)
    with tf.device("/device:SIMDEV:0"):
        on = tf.function(body)(x, b).numpy().tolist()
    return {"off": calls_off, "on": new_calls(), "same": off == on}
'''


@pytest.fixture(scope="module")
def runs(run_tf):
    jobs = {
        "frame": (FRAME, {"SIMDEV_GRAPH_LOG": "1"}),
        "none": (FRAME, {"SIMDEV_GRAPH_LOG": "1", "SIMDEV_GRAPH_PASSES": "none"}),
        "quiet": (FRAME, {}),
    }
    for var, value in BAD:
        jobs[f"{var}={value}"] = ("import tensorflow as tf\nprint('IMPORTED', flush=True)\n",
                                  {var: value})
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        futs = {k: ex.submit(run_tf, code, env) for k, (code, env) in jobs.items()}
        return {k: f.result() for k, f in futs.items()}


def test_optimizer_runs_on_simdev_function_each_iteration(runs):
    r = runs["frame"]
    d = r.data("simdev_function")
    assert "SIMDEV:0" in d["device"], d
    # relu(bias_add(x, b)) * 2 + 1 with every pass on: remap has no
    # contraction to fuse; elementwise makes one node of Relu, Mul, AddV2.
    # TF ran the graph the plugin returned (optimize_func's OK path).
    assert "_SimdevFusedElementwise" in d["post_ops"], d
    assert "BiasAdd" in d["post_ops"] and "Relu" not in d["post_ops"], d
    # TF's meta-optimizer runs plugin optimizers on every iteration (two by
    # default), each time on the graph the previous step produced.
    assert len(d["calls"]) >= 2, f"optimize_func called {len(d['calls'])} times: {d}"
    for call in d["calls"]:
        assert len(call) == 3, f"unparsed log line {call}"
        nodes, on_simdev, _ = call
        assert nodes >= 4 and on_simdev >= 4 and on_simdev <= nodes, call
    r.assert_clean_exit()


def test_optimizer_not_called_without_simdev_nodes(runs):
    cpu = runs["frame"].data("cpu_function")
    assert "CPU:0" in cpu["device"] and cpu["calls"] == [], cpu


def test_tiny_simdev_function_still_reaches_the_optimizer(runs):
    """Grappler's min_graph_nodes (4) does not keep eager functions from
    the plugin in TF 2.21: a 3-node function graph is handed over (once).
    Passes must cope with graphs of any size."""
    tiny = runs["frame"].data("tiny_function")
    assert "SIMDEV:0" in tiny["device"], tiny
    assert len(tiny["calls"]) >= 1 and tiny["calls"][0][0] == 3, tiny


def test_use_plugin_optimizers_switches_it_per_function(runs):
    d = runs["frame"].data("plugin_optimizers_off")
    assert d["off"] == [], f"optimizer called with use_plugin_optimizers off: {d}"
    assert len(d["on"]) >= 2, d
    assert d["same"], d


def test_log_off_by_default(runs):
    r = runs["quiet"]
    assert r.data("simdev_function")["calls"] == []
    assert not LOG_RE.search(r.stderr), r.describe()
    r.assert_clean_exit()


def test_passes_none_leaves_graphs_to_tf(runs):
    r = runs["none"]
    d = r.data("simdev_function")
    assert len(d["calls"]) >= 2, d
    for nodes, on_simdev, passes in d["calls"]:
        assert passes == "none", d
    assert "SIMDEV:0" in d["device"]
    assert "Relu" in d["post_ops"] and "_SimdevFusedElementwise" not in d["post_ops"], d
    r.assert_clean_exit()


# ---- bad settings ------------------------------------------------------------

BAD = [
    ("SIMDEV_GRAPH_PASSES", "bogus"),
    ("SIMDEV_GRAPH_PASSES", ""),
    ("SIMDEV_GRAPH_PASSES", "all,"),
    ("SIMDEV_GRAPH_LOG", "yes"),
]


@pytest.mark.parametrize("var,value", BAD, ids=[f"{k}={v}" for k, v in BAD])
def test_bad_setting_aborts_import(runs, var, value):
    r = runs[f"{var}={value}"]
    assert "IMPORTED" not in r.stdout, \
        f"import tensorflow succeeded with {var}={value!r}\n{r.describe()}"
    assert r.returncode == -signal.SIGABRT, r.describe()
    fatal = [l for l in r.stderr.splitlines() if "Check failed" in l]
    assert fatal, f"no TF check failure in stderr\n{r.describe()}"
    assert any(var in l and f'"{value}"' in l for l in fatal), fatal
    for crash in ("SIGSEGV", "Segmentation fault", "SIGBUS"):
        assert crash not in r.stderr, r.describe()


# ---- optimize_func called directly ------------------------------------------

CTYPES = r'''
import ctypes, importlib.util, os
TF_DIR = os.path.dirname(importlib.util.find_spec("tensorflow").origin)
fw = ctypes.CDLL(os.path.join(TF_DIR, "libtensorflow_framework.so.2"),
                 mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(PLUGIN)
fw.TF_NewStatus.restype = ctypes.c_void_p
fw.TF_GetCode.argtypes = [ctypes.c_void_p]
fw.TF_Message.argtypes = [ctypes.c_void_p]
fw.TF_Message.restype = ctypes.c_char_p
fw.TF_DeleteStatus.argtypes = [ctypes.c_void_p]

class Buffer(ctypes.Structure):      # TF_Buffer
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t),
                ("data_deallocator", ctypes.c_void_p)]

OPTIMIZE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Buffer),
                            ctypes.c_void_p, ctypes.POINTER(Buffer),
                            ctypes.c_void_p)

class Optimizer(ctypes.Structure):   # TP_Optimizer
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("create_func", ctypes.c_void_p),
                ("optimize_func", OPTIMIZE),
                ("destroy_func", ctypes.c_void_p)]

class Configs(ctypes.Structure):     # TP_OptimizerConfigs (2.21: 19 toggles)
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p)] + \
               [(f"t{i}", ctypes.c_int) for i in range(19)]

class Params(ctypes.Structure):      # TP_OptimizerRegistrationParams
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("major", ctypes.c_int32), ("minor", ctypes.c_int32),
                ("patch", ctypes.c_int32), ("device_type", ctypes.c_char_p),
                ("configs", ctypes.POINTER(Configs)),
                ("optimizer", ctypes.POINTER(Optimizer))]

opt, cfg = Optimizer(), Configs()
params = Params(ctypes.sizeof(Params), None, 0, 0, 1, None,
                ctypes.pointer(cfg), ctypes.pointer(opt))
st = fw.TF_NewStatus()
lib.TF_InitGraph(ctypes.byref(params), ctypes.c_void_p(st))

@check("init")
def _():
    return {"code": fw.TF_GetCode(st), "device_type": params.device_type.decode(),
            "configs": [getattr(cfg, f"t{i}") for i in range(19)],
            "has_optimize": bool(opt.optimize_func),
            "create": opt.create_func, "destroy": opt.destroy_func}

def call(data, item=None, null_data=False):
    keep = ctypes.create_string_buffer(data, len(data)) if data else None
    src = Buffer(None if null_data or keep is None else ctypes.cast(keep, ctypes.c_void_p),
                 len(data), None)
    out = Buffer(None, 0, None)
    s = fw.TF_NewStatus()
    opt.optimize_func(None, ctypes.byref(src), item, ctypes.byref(out), ctypes.c_void_p(s))
    r = {"code": fw.TF_GetCode(s), "message": fw.TF_Message(s).decode(),
         "out_data": bool(out.data), "out_length": out.length}
    fw.TF_DeleteStatus(s)
    return r

with open(SEED, "rb") as f:
    good = f.read()
CASES = {
    "garbage": bytes(range(256)) * 4,
    "truncated": good[: len(good) // 2],
    "length_past_end": b"\x0a\xff\x01" + good[:40],
    "bad_wire_type": b"\x0f" + good,
    "nul_in_name": b"\x0a\x04\x0a\x02a\x00",
    "valid_graph_null_item": good,
    "empty_graph_null_item": b"",
}
for name, data in CASES.items():
    check(name)(lambda data=data: call(data))
check("null_data")(lambda: call(b"xyz", null_data=True))
print("DONE", flush=True)
'''


def test_corrupted_graphdef_straight_to_optimize_func(run_tf, plugin):
    code = (f"PLUGIN = {plugin.path!r}\nSEED = {SEEDS[0]!r}\n") + CTYPES
    r = run_tf(code)
    init = r.data("init")
    assert init["code"] == 0 and init["device_type"] == "SIMDEV", init
    assert init["has_optimize"] and init["create"] is None and init["destroy"] is None
    assert init["configs"] == [0] * 19, "every config must stay TF_TriState_Default"
    INVALID_ARGUMENT = 3
    for name, needle in [("garbage", "malformed GraphDef"),
                         ("truncated", "malformed GraphDef"),
                         ("length_past_end", "length runs past the end"),
                         ("bad_wire_type", "malformed GraphDef"),
                         ("nul_in_name", "NUL byte"),
                         ("valid_graph_null_item", "no TF_GrapplerItem"),
                         ("empty_graph_null_item", "no TF_GrapplerItem"),
                         ("null_data", "no input GraphDef")]:
        d = r.data(name)
        assert d["code"] == INVALID_ARGUMENT, (name, d)
        assert d["message"].startswith("simdev graph optimizer: "), (name, d)
        assert needle in d["message"], (name, d)
        assert not d["out_data"] and d["out_length"] == 0, (name, d)
    assert "DONE" in r.stdout, r.describe()
    r.assert_clean_exit()


# ---- simdev_graph_opt ----------------------------------------------------------

def tool(*args, env=None, input_bytes=None, tmp_path=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SIMDEV_")}
    e.update(env or {})
    return subprocess.run([graphutil.tool_path(), *args], capture_output=True,
                          text=True, env=e, timeout=120)


def test_seeds_exist():
    assert len(SEEDS) >= 3, "tests/fuzz/seeds_graph/*.pb (make_graph_seeds.py)"


@pytest.mark.parametrize("seed", SEEDS, ids=[os.path.basename(s) for s in SEEDS])
def test_tool_fed_twice_is_unchanged_the_second_time(seed, tmp_path):
    data = open(seed, "rb").read()
    once, info1 = graphutil.optimize_bytes(data, tmpdir=tmp_path)
    twice, info2 = graphutil.optimize_bytes(once, tmpdir=tmp_path)
    assert info2["rewrites"] == 0, info2
    assert twice == once
    assert info1["nodes"] > 0 and info1["simdev_nodes"] > 0, info1
    if info1["rewrites"] == 0:
        assert once == data  # untouched: the input's bytes exactly


@pytest.mark.parametrize("seed", SEEDS, ids=[os.path.basename(s) for s in SEEDS])
def test_tool_passes_none_returns_the_input_bytes(seed, tmp_path):
    data = open(seed, "rb").read()
    out, info = graphutil.optimize_bytes(data, passes="none", tmpdir=tmp_path)
    assert out == data and info["rewrites"] == 0 and info["passes"] == "none"


def test_tool_preserve_names_accepted(tmp_path):
    data = open(SEEDS[0], "rb").read()
    out, info = graphutil.optimize_bytes(data, preserve=["a", "b"], tmpdir=tmp_path)
    twice, info2 = graphutil.optimize_bytes(out, preserve=["a", "b"], tmpdir=tmp_path)
    assert info2["rewrites"] == 0 and twice == out


def test_tool_rejects_malformed_input(tmp_path):
    bad = tmp_path / "bad.pb"
    # A node field whose length runs past the end of the file.
    bad.write_bytes(open(SEEDS[0], "rb").read() + b"\x0a\x05ab")
    out = tmp_path / "out.pb"
    p = tool(str(bad), str(out))
    assert p.returncode == 1, p
    assert "malformed GraphDef" in p.stderr and "byte" in p.stderr, p.stderr
    assert not out.exists()
    p = tool(str(tmp_path / "missing.pb"), str(out))
    assert p.returncode == 1 and "missing.pb" in p.stderr, p


def test_tool_bad_setting_and_usage(tmp_path):
    out = tmp_path / "out.pb"
    p = tool(SEEDS[0], str(out), env={"SIMDEV_GRAPH_PASSES": "nope"})
    assert p.returncode == 2, p
    assert 'SIMDEV_GRAPH_PASSES="nope"' in p.stderr, p.stderr
    assert not out.exists()
    p = tool(SEEDS[0])
    assert p.returncode == 2 and "usage: simdev_graph_opt" in p.stderr, p
