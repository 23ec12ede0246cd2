"""Reading back the graphs TensorFlow really ran, for the graph-optimizer
tests (and the bench): the GraphDef after Grappler, simdev's optimizer
included, of each function a tf.function call instantiates.

Used INSIDE a TF child (conftest.run_tf), never in the pytest process:

    from graphutil import IMPORT           # in the test module
    r = run_tf(IMPORT + '''
    @tf.function
    def f(x): ...
    with tf.device("/device:SIMDEV:0"):
        x = tf.ones([4, 8])                # inputs made BEFORE collect()
        c = graphutil.collect(f, x)
    @check("fused")
    def _():
        return {"ops": graphutil.ops(c.post), "nodes": graphutil.describe(c.post)}
    ''')

How (checked against TF 2.21): eager run metadata. With
context().enable_graph_collection() on, each function TF instantiates adds
a FunctionGraphs record to context().export_run_metadata()
(.function_graphs[i]): pre_optimization_graph (placed, before Grappler),
post_optimization_graph (after Grappler: TF's passes and the plugin's
TF_InitGraph optimizer) and partition_graphs (what each device executes).
Two rules follow from how TF records them:
  - A function is recorded when it is INSTANTIATED, i.e. on the first call
    for an input signature. A call of a tf.function already run with the
    same signature records nothing: collect() raises then. Use a fresh
    tf.function (or new shapes) per collect().
  - Every eager op run while collecting is a function too (tf.ones: Fill),
    so make the inputs before collect(). export_run_metadata() clears what
    was collected; collect() exports before and after.

The post-optimization graph shows the rewrites of TF_InitGraph; TF may run
the plugin optimizer more than once per function (meta-optimizer
iterations), each time on the output of the last.
"""
import os
import sys

# Prepend to a run_tf snippet: makes `graphutil` importable in the child
# (which runs in a temporary directory) and imports TF and it.
IMPORT = (f"import sys as _s; _s.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
          "import tensorflow as tf\nimport graphutil\n")


class Collected:
    """What one collect() saw: result (fn's return value), pre / post /
    partitions: lists of GraphDef, one entry per function instantiated
    (partitions: a list of lists, one GraphDef per device)."""

    def __init__(self, result, metadata):
        self.result = result
        fgs = list(metadata.function_graphs)
        self.pre = [f.pre_optimization_graph for f in fgs]
        self.post = [f.post_optimization_graph for f in fgs]
        self.partitions = [list(f.partition_graphs) for f in fgs]


def collect(fn, *args, **kwargs):
    """Runs fn(*args, **kwargs) (normally a tf.function) with graph
    collection on; returns a Collected. Raises RuntimeError if TF
    instantiated no function (fn was already traced for these inputs)."""
    from tensorflow.python.eager import context
    ctx = context.context()
    ctx.enable_graph_collection()
    ctx.export_run_metadata()  # drop anything collected before
    try:
        result = fn(*args, **kwargs)
        _sync(result)
        md = ctx.export_run_metadata()
    finally:
        ctx.disable_graph_collection()
    if not md.function_graphs:
        raise RuntimeError(
            "graphutil.collect: TF instantiated no function; a tf.function "
            "is recorded only on its first call for an input signature "
            "(use a fresh tf.function), and eager ops must not be what "
            "you collect")
    return Collected(result, md)


def _sync(result):
    """Waits for the values (an async error surfaces here, not later)."""
    import tensorflow as tf
    for t in tf.nest.flatten(result):
        if hasattr(t, "numpy"):
            t.numpy()


def nodes(graphs, op=None, device=None):
    """NodeDefs of every graph in `graphs` (a GraphDef or a list), optionally
    only those of op type `op` and/or whose device contains `device`
    (e.g. "SIMDEV")."""
    if not isinstance(graphs, (list, tuple)):
        graphs = [graphs]
    return [n for g in graphs for n in g.node
            if (op is None or n.op == op)
            and (device is None or device in n.device)]


def ops(graphs, device=None):
    """Sorted op types present (on `device` if given)."""
    return sorted({n.op for n in nodes(graphs, device=device)})


def attr(node, name):
    """A NodeDef attribute as a Python value (None if missing): int, float,
    bool, str, a dtype name, or a list of those."""
    from tensorflow.core.framework import types_pb2
    if name not in node.attr:
        return None
    v = node.attr[name]
    kind = v.WhichOneof("value")
    if kind == "list":
        lv = v.list
        for f in ("s", "i", "f", "b", "type"):
            vals = list(getattr(lv, f))
            if vals:
                if f == "s":
                    return [x.decode() for x in vals]
                if f == "type":
                    return [types_pb2.DataType.Name(x) for x in vals]
                return vals
        return []
    if kind == "s":
        return v.s.decode()
    if kind == "type":
        return types_pb2.DataType.Name(v.type)
    if kind in ("i", "f", "b"):
        return getattr(v, kind)
    return str(getattr(v, kind)) if kind else None


def describe(graphs, op=None, device=None):
    """JSON-able summary of the nodes (for check() reports): name, op,
    device, inputs, attribute names."""
    return [{"name": n.name, "op": n.op, "device": n.device,
             "inputs": list(n.input), "attrs": sorted(n.attr.keys())}
            for n in nodes(graphs, op=op, device=device)]


def plugin_optimizers(on):
    """Switches plugin graph optimizers (simdev's TF_InitGraph passes) on or
    off for the functions this process instantiates FROM NOW ON, through
    RewriterConfig.use_plugin_optimizers (Python:
    tf.config.optimizer.set_experimental_options). Functions already
    instantiated keep the graph they were optimized with."""
    import tensorflow as tf
    tf.config.optimizer.set_experimental_options({"use_plugin_optimizers": bool(on)})


# ---- simdev_graph_opt (src/graph/tool.c), usable with or without TF -------

def tool_path():
    """The simdev_graph_opt installed with the plugin (site-packages/simdev/
    bin/), found without importing simdev or TF."""
    import importlib.util
    spec = importlib.util.find_spec("simdev")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the simdev package is not installed (pip install .)")
    path = os.path.join(list(spec.submodule_search_locations)[0], "bin",
                        "simdev_graph_opt")
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} missing: `make install` installs it")
    return path


def optimize_bytes(graph, preserve=(), passes=None, tool=None, tmpdir=None):
    """Runs simdev's passes on a GraphDef (bytes or a GraphDef message) with
    simdev_graph_opt, as TF_InitGraph would with `preserve` as TF's
    nodes-to-preserve list and SIMDEV_GRAPH_PASSES=passes (None: the
    default, all). Returns (out_bytes, info): info is the tool's JSON line
    {"nodes", "simdev_nodes", "passes", "rewrites"}; out_bytes are the input
    bytes when nothing was rewritten. Raises RuntimeError with the tool's
    message if it fails."""
    import json
    import subprocess
    import tempfile
    data = graph if isinstance(graph, (bytes, bytearray)) else graph.SerializeToString()
    env = {k: v for k, v in os.environ.items() if k != "SIMDEV_GRAPH_PASSES"}
    if passes is not None:
        env["SIMDEV_GRAPH_PASSES"] = passes
    with tempfile.TemporaryDirectory(dir=tmpdir) as d:
        src, dst = os.path.join(d, "in.pb"), os.path.join(d, "out.pb")
        with open(src, "wb") as f:
            f.write(data)
        cmd = [tool or tool_path()]
        for name in preserve:
            cmd += ["--preserve", name]
        p = subprocess.run(cmd + [src, dst], capture_output=True, text=True,
                           env=env, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"simdev_graph_opt exit {p.returncode}: {p.stderr.strip()}")
        with open(dst, "rb") as f:
            return f.read(), json.loads(p.stdout)


if __name__ == "__main__":
    sys.exit("graphutil is imported by TF children (see its docstring)")
