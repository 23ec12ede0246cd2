"""The plugin's ELF interface: only the four entry points TF looks up with
dlsym are exported (SE_InitPlugin, TF_InitKernel, TF_InitGraph,
TF_InitProfiler), and
jemalloc is linked in privately (no libjemalloc dependency, none of its
symbols visible to TF or to other plugins).

These tests do not import TensorFlow.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

import conftest

ENTRY_POINTS = {"SE_InitPlugin", "TF_InitKernel", "TF_InitGraph",
                "TF_InitProfiler"}
# Symbols the linker itself may define in a shared object.
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start",
                  "__bss_start__", "__bss_end__", "_bss_end__", "__end__"}


def tool(name):
    path = shutil.which(name)
    if not path:
        pytest.fail(f"{name} not found (binutils / libc-bin)")
    return path


def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{cmd} failed: {p.stderr}"
    return p.stdout


def simdev_package():
    """(library_path(), __version__) from the installed simdev package, in a
    subprocess in case the package imports TensorFlow."""
    p = subprocess.run(
        [sys.executable, "-c",
         "import simdev; print(simdev.library_path()); print(simdev.__version__)"],
        capture_output=True, text=True, cwd="/")
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1:] or [p.returncode]
    lines = p.stdout.strip().splitlines()
    return lines[-2], lines[-1]


@pytest.fixture(scope="module")
def lib(plugin):
    """SIMDEV_TEST_PLUGIN, or the libsimdev*.so in tensorflow-plugins/."""
    return plugin.path


def dynamic_symbols(lib, *flags):
    """{name: nm type letter} of the dynamic symbol table."""
    out = run(tool("nm"), "-D", *flags, lib)
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            name = parts[-1].split("@")[0]
            syms[name] = parts[-2]
    return syms


def test_simdev_package_points_at_installed_plugin(plugin):
    if plugin.source != "installed":
        pytest.skip("SIMDEV_TEST_PLUGIN set: testing a library outside the venv")
    path, version = simdev_package()
    assert path, f"import simdev failed: {version}"
    assert os.path.isfile(path), path
    assert os.path.realpath(path) == plugin.path, \
        f"simdev.library_path()={path} is not what TF loads: {plugin.path}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version), version


def test_only_entry_points_exported(lib):
    syms = dynamic_symbols(lib, "--defined-only")
    missing = ENTRY_POINTS - set(syms)
    assert not missing, f"entry points not exported: {missing}"
    for name in ENTRY_POINTS:
        assert syms[name] == "T", f"{name} is {syms[name]!r}, not a text symbol"
    extra = sorted(set(syms) - ENTRY_POINTS - LINKER_SYMBOLS)
    assert not extra, f"{len(extra)} unexpected exported symbols: {extra[:40]}"


API = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "matrix", "tf-c-api.txt")


def test_imports_only_what_every_release_exports(lib):
    """A TF function the plugin imports must be exported by every release
    simdev builds against (tests/matrix/tf-c-api.txt, written by make
    matrix from each wheel): else the plugin fails to load in the others
    with "undefined symbol", which TF's Python import raises, where it must
    offer no device and say why (found so with TF_TensorDefaultAlignment, which 2.16
    lacks). Optional functions are looked up at run time (src/tfcompat)."""
    with open(API, encoding="utf-8") as f:
        rows = [l.split() for l in f if l.strip() and not l.startswith("#")]
    releases = set(rows[0][1].split(","))  # SE_InitPlugin: every release
    exporters = {name: set() if rel == "-" else set(rel.split(",")) for name, rel in rows}
    undefined = dynamic_symbols(lib, "--undefined-only")
    bad = {name: sorted(releases - exporters[name]) for name in undefined
           if name in exporters and exporters[name] != releases}
    assert not bad, f"imported, but not exported by these releases: {bad}"
    # The check sees the plugin's TF imports at all (it links TF's C API).
    assert sum(name in exporters for name in undefined) > 20


def test_python_extension_exports_only_its_init(plugin):
    """simdev._dlpack (the capsule half of simdev.dlpack) exports nothing
    but the module's init function."""
    p = subprocess.run([sys.executable, "-c",
                        "import simdev._dlpack as m; print(m.__file__)"],
                       capture_output=True, text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    syms = dynamic_symbols(p.stdout.strip(), "--defined-only")
    extra = sorted(set(syms) - {"PyInit__dlpack"} - LINKER_SYMBOLS)
    assert syms.get("PyInit__dlpack") == "T" and not extra, syms


def test_no_jemalloc_symbols_undefined_or_defined(lib):
    syms = dynamic_symbols(lib)  # defined and undefined
    jem = sorted(s for s in syms if "je_" in s or "jemalloc" in s
                 or s in ("mallocx", "rallocx", "sdallocx", "mallctl"))
    assert not jem, f"jemalloc symbols in the dynamic table: {jem}"


def test_needed_has_no_jemalloc(lib):
    out = run(tool("readelf"), "-d", lib)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    assert needed, f"no DT_NEEDED entries parsed from readelf:\n{out}"
    assert not [n for n in needed if "jemalloc" in n], needed


def test_needed_has_no_libtensorflow_cc(lib):
    """TF_InitGraph and TF_InitProfiler live beside code of
    libtensorflow_cc.so.2 but the plugin does not link it: TF_SetStatus and
    the kernel API come from libtensorflow_framework.so.2, and
    src/graph/plugin.c looks its two libtensorflow_cc functions up at run
    time."""
    out = run(tool("readelf"), "-d", lib)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    assert "libtensorflow_framework.so.2" in needed, needed
    assert not [n for n in needed if "tensorflow_cc" in n], needed


def test_ldd_has_no_jemalloc(lib):
    out = run(tool("ldd"), lib)
    assert "jemalloc" not in out, out


def test_ldd_resolves_every_dependency(lib):
    """RPATH/RUNPATH finds libtensorflow_framework where the library sits."""
    out = run(tool("ldd"), lib)
    assert "not found" not in out, out


# The variable-access functions of tensorflow/c/kernels_experimental.h. A
# plugin needs them to register its own AssignVariableOp / AssignAdd /
# ResourceApply* kernels; TF 2.21 declares them but no shipped library
# defines them, which is why simdev relies on TF's DEVICE_DEFAULT variable
# kernels (see src/kernels/framework/sk.h). If this test starts failing, TF ships them
# now and simdev should register its own variable kernels.
KERNELS_EXPERIMENTAL = [
    "TF_AssignVariable", "TF_AssignUpdateVariable",
    "TF_GetInputTensorFromVariable", "TF_MaybeLockVariableInputMutexesInOrder",
    "TF_TemporaryVariable", "TF_AddNVariant", "TF_ZerosLikeVariant",
]


def tf_libraries():
    import importlib.util
    spec = importlib.util.find_spec("tensorflow")
    assert spec is not None, "tensorflow is not installed"
    root = os.path.dirname(spec.origin)
    libs = []
    for dirpath, _, files in os.walk(root):
        libs += [os.path.join(dirpath, f) for f in files
                 if re.search(r"\.so(\.\d+)*$", f)]
    return libs


def test_tf_ships_no_variable_c_api():
    """TF 2.19 on: kernels_experimental.h's functions are in no library (on
    2.16-2.18 they are all there: test_kernels_variables.py checks that)."""
    if conftest.tf_minor() is not None and conftest.tf_minor() <= 18:
        pytest.skip("TF 2.16-2.18 export kernels_experimental.h's functions")
    libs = tf_libraries()
    assert any(l.endswith("libtensorflow_framework.so.2") for l in libs)
    found = {}
    for lib in libs:
        defined = dynamic_symbols(lib, "--defined-only")
        for name in KERNELS_EXPERIMENTAL:
            if name in defined:
                found.setdefault(name, []).append(lib)
    assert not found, f"TF now defines {found}"


def test_tf_defines_the_kernel_api_simdev_uses():
    """The functions simdev's kernels do call are there."""
    fw = [l for l in tf_libraries() if l.endswith("libtensorflow_framework.so.2")][0]
    defined = dynamic_symbols(fw, "--defined-only")
    for name in ["TF_NewAsyncKernelBuilder", "TF_RunAsyncOpKernelDoneCallback",
                 "TF_GetStream", "TF_AllocateOutput", "TF_AllocateTemp",
                 "TF_TensorBitcastFrom", "TF_ForwardInputOrAllocateOutput",
                 "TF_NewOpDefinitionBuilder", "TF_RegisterOpDefinition",
                 "TF_NewTensor", "TF_SetOutput"]:
        assert name in defined, name
