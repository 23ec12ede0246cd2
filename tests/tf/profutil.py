"""What the profiler tests share: the TensorFlow wheel's xplane_pb2 without
importing TensorFlow, and the checks of a timeline's times.

test_trace_json.py (SIMDEV_TRACE), test_profiler_tf.py (TF's profiler
sessions) and test_profiler_viewer.py (xprof's converter) read the same two
formats; the conftest fixture `xplane_pb2` hands out one loaded module.
"""
import functools
import importlib.util
from pathlib import Path


def tf_dir():
    """The installed tensorflow package's directory, found without running
    its __init__ (which would load the plugin)."""
    spec = importlib.util.find_spec("tensorflow")
    assert spec and spec.submodule_search_locations, "no tensorflow wheel"
    return Path(spec.submodule_search_locations[0])


@functools.lru_cache(maxsize=None)
def load_xplane_pb2():
    """The wheel's tsl/profiler/protobuf/xplane_pb2.py, loaded by file path:
    it needs protobuf only, so no TensorFlow is imported into pytest."""
    path = tf_dir() / "tsl" / "profiler" / "protobuf" / "xplane_pb2.py"
    assert path.is_file(), path
    spec = importlib.util.spec_from_file_location("simdev_test_xplane_pb2",
                                                  path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ns(us):
    """A trace-event time (microseconds, float) as integer nanoseconds:
    simdev writes exact ns as us with three decimals."""
    return round(us * 1000)


def assert_ordered_disjoint(name, runs):
    """Trace events of one track ("ts", "dur" in us) start in order and do
    not overlap: a stream runs one item at a time."""
    for a, b in zip(runs, runs[1:]):
        assert ns(a["ts"]) + ns(a["dur"]) <= ns(b["ts"]), (name, a, b)


def assert_line_disjoint(line):
    """The same for an XLine's events (offset_ps, duration_ps)."""
    ev = sorted((e.offset_ps, e.duration_ps) for e in line.events)
    for (o1, d1), (o2, _) in zip(ev, ev[1:]):
        assert d1 >= 0 and o1 + d1 <= o2, \
            f"{line.name}: [{o1}, {o1 + d1}] overlaps the next at {o2} ps"
