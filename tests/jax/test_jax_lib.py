"""libsimdev_xla.so as installed: where it is, what it exports, what it
links. The library of simdev's XLA custom calls (src/xla) must load into a
JAX process without TensorFlow, and show JAX nothing but its handlers and
its runtime calls (src/xla/exports.map).

No test here imports jax or tensorflow; the library is loaded in a child
process, which checks that TensorFlow stayed out of it. The ELF helpers
are tests/tf/test_exports.py's (it imports neither TensorFlow nor tests/tf's
conftest, so importing it here brings no fixture and no side effect).
"""
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPORTS_MAP = os.path.join(ROOT, "src", "xla", "exports.map")

sys.path.insert(0, os.path.join(ROOT, "tests", "tf"))
from test_exports import LINKER_SYMBOLS, dynamic_symbols, run, tool  # noqa: E402

# The plan's ABI (issue 16): every symbol the library exports (src/xla/sx.h),
# the legacy-convention target of src/xla/legacy.c included.
HANDLERS = ["matmul", "matmul_bias_act", "conv2d", "conv2d_backprop_input",
            "conv2d_backprop_filter", "relu", "relu_grad", "empty"]
REQUIRED = {f"simdev_xla_{h}" for h in HANDLERS} | {
    "simdev_xla_init", "simdev_xla_counts", "simdev_xla_shutdown",
    "simdev_xla_legacy_matmul"}
ALLOWED = REQUIRED


@pytest.fixture(scope="module")
def lib():
    """The installed copy: site-packages/simdev/libsimdev_xla.so, found
    without importing the package."""
    spec = importlib.util.find_spec("simdev")
    assert spec is not None, "simdev is not installed in this interpreter"
    path = os.path.join(spec.submodule_search_locations[0], "libsimdev_xla.so")
    assert os.path.isfile(path), f"{path} missing: make install"
    return path


def test_installed_beside_the_package_not_in_tensorflow_plugins(lib):
    site = sysconfig.get_paths()["purelib"]
    assert os.path.realpath(os.path.dirname(lib)) == \
        os.path.realpath(os.path.join(site, "simdev"))
    # TensorFlow dlopens every library in tensorflow-plugins/.
    plugins = os.path.join(site, "tensorflow-plugins")
    if os.path.isdir(plugins):
        assert not [f for f in os.listdir(plugins) if "xla" in f], \
            os.listdir(plugins)


def map_symbols():
    text = open(EXPORTS_MAP, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    glob = text.split("global:")[1].split("local:")[0]
    return {s.strip() for s in glob.split(";") if s.strip()}


def test_exports_are_the_map_and_the_map_is_the_plan(lib):
    syms = dynamic_symbols(lib, "--defined-only")
    exported = set(syms) - LINKER_SYMBOLS
    listed = map_symbols()
    assert exported == listed, (sorted(exported - listed), sorted(listed - exported))
    assert REQUIRED <= listed, sorted(REQUIRED - listed)
    assert listed <= ALLOWED, sorted(listed - ALLOWED)
    for name in listed:
        assert syms[name] == "T", f"{name} is {syms[name]!r}, not a text symbol"


def test_needs_no_tensorflow_nor_jemalloc_nor_build_paths(lib):
    out = run(tool("readelf"), "-d", lib)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    assert needed, out
    bad = [n for n in needed if "tensorflow" in n or "jemalloc" in n
           or "python" in n]
    assert not bad, f"libsimdev_xla.so needs {bad} (all: {needed})"
    # System libraries only: no RPATH/RUNPATH into the build machine.
    assert not re.search(r"\((RPATH|RUNPATH)\)", out), out
    # Every dependency resolves (ldd prints "not found" otherwise).
    ldd = run(tool("ldd"), lib)
    assert "not found" not in ldd, ldd
    assert "tensorflow" not in ldd, ldd


CHILD = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
msg = ctypes.create_string_buffer(256)
rc = lib.simdev_xla_init(msg, ctypes.c_size_t(len(msg)))
assert rc == 0, (rc, msg.value)
e, c, f = (ctypes.c_uint64() for _ in range(3))
lib.simdev_xla_counts(ctypes.byref(e), ctypes.byref(c), ctypes.byref(f))
maps = open("/proc/self/maps").read()
assert "tensorflow" not in maps, "a TensorFlow library is mapped"
assert "tensorflow" not in sys.modules
assert lib.simdev_xla_shutdown() == 0
print("ok", e.value, c.value, f.value)
"""


def test_loads_and_initializes_without_tensorflow(lib):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDEV_")}
    p = subprocess.run([sys.executable, "-c", CHILD, lib], capture_output=True,
                       text=True, env=env, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["ok", "0", "0", "0"], p.stdout


def test_bad_setting_named_by_init(lib):
    child = ("import ctypes, sys\n"
             "lib = ctypes.CDLL(sys.argv[1])\n"
             "msg = ctypes.create_string_buffer(256)\n"
             "rc = lib.simdev_xla_init(msg, ctypes.c_size_t(len(msg)))\n"
             "print(rc); print(msg.value.decode())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDEV_")}
    env["SIMDEV_MEMORY_MB"] = "0"
    p = subprocess.run([sys.executable, "-c", child, lib], capture_output=True,
                       text=True, env=env, cwd="/")
    assert p.returncode == 0, p.stderr
    rc, msg = p.stdout.split("\n", 1)
    assert int(rc) != 0 and "SIMDEV_MEMORY_MB" in msg, p.stdout
