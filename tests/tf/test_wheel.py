"""The wheel as a user builds it, installed as a user installs it.

A clean clone of HEAD (committed work only: uncommitted changes are not in
it), then `pip wheel --no-deps -w dist .` with pip's default build isolation:
the build environment gets tensorflow-cpu at the release this interpreter
has (2.21.0 here) and jaxlib==0.10.2 (for XLA's FFI header,
xla/ffi/api/c_api.h, which libsimdev_xla.so is compiled against) from
scripts/tf_release.py, and CMake fetches and builds jemalloc itself. This is
the slowest test of the suite (a few minutes: TensorFlow's 270 MB wheel into
the build environment, jemalloc, the plugin); it needs the network (PyPI and
deb.debian.org), as `pip install .` does.

The wheel is then installed with pip into a fresh venv. That venv does not get
its own 1.3 GB copy of TensorFlow: every entry of this interpreter's
site-packages is symlinked into the venv's site-packages, except simdev's own
(tensorflow-plugins/, simdev/, simdev-*.dist-info) and .pth files.
tensorflow/__init__.py loads plugins from the tensorflow-plugins/ directory of
each site-packages of the running interpreter (sys.path entries containing
"site-packages", site.getsitepackages(), sysconfig's purelib/platlib), and
those are the new venv's, so the child sees the new wheel's plugin and not
.venv's (two copies of one plugin would abort TF); the test checks that only
that file is mapped into the process.

The wheel's libraries are checked for what another machine of the kind needs:
libtensorflow_framework.so.2 through RUNPATH $ORIGIN/../tensorflow (not
libtensorflow_cc.so.2: the graph optimizer finds its two functions in the
running TF process, src/graph/plugin.c), and the rest from Debian runtime packages (libhwloc15, libopenblas0, libc6, ...).

simdev.jax runs from the wheel too: a child of the venv (whose symlinked
site-packages hold jax and jaxlib) registers the wheel's libsimdev_xla.so
and runs a matmul through it, without TensorFlow in the process.

Last, the failure users must see: a wheel build whose Python has no
TensorFlow stops with CMake's message instead of building a wheel without
the plugin.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import pytest

from conftest import CHECK_MARK, PRELUDE
from test_exports import ENTRY_POINTS, LINKER_SYMBOLS, dynamic_symbols

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_TIMEOUT = 1800  # seconds; a normal build takes 3 to 6 minutes

# Debian packages the wheel's libraries may need at run time, besides
# TensorFlow's own libtensorflow_framework and libtensorflow_cc: what "a machine with only the
# runtime packages" has (libopenblas0 is satisfied by one of the variants).
RUNTIME_PACKAGES = re.compile(
    r"^(libc6|libstdc\+\+6|libgcc-s1|libhwloc15|libopenblas0(-pthread|-openmp|-serial)?)$")


def run(cmd, timeout=600, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                       timeout=timeout, **kw)
    return p


def tail(text, n=60):
    return "\n".join(text.splitlines()[-n:])


def clean_env(**extra):
    """The environment without anything that would change what is built or
    loaded: a developer's plugin path, SIMDEV_* settings, Python paths, and
    pip settings that turn build isolation off."""
    env = dict(os.environ)
    for k in list(env):
        if (k.startswith("SIMDEV_") and k != "SIMDEV_DEBIAN_MIRROR") or k in (
                "TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME",
                "VIRTUAL_ENV", "PIP_NO_BUILD_ISOLATION", "PIP_BUILD_ISOLATION",
                "PIP_NO_INDEX", "PIP_TARGET", "PIP_PREFIX", "PIP_USER",
                "CMAKE_ARGS", "SKBUILD_CMAKE_ARGS", "SKBUILD_CMAKE_DEFINE"):
            del env[k]
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Path of the wheel built from a clean clone of HEAD."""
    if not os.path.isdir(os.path.join(ROOT, ".git")) and \
            not os.path.isfile(os.path.join(ROOT, ".git")):
        pytest.fail(f"{ROOT} is not a git checkout: cannot clone HEAD", pytrace=False)
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    p = run(["git", "clone", "--quiet", ROOT, str(src)])
    assert p.returncode == 0, f"git clone failed: {p.stderr}"
    p = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", "dist", "."],
            cwd=src, env=clean_env(), timeout=BUILD_TIMEOUT)
    log = p.stdout + p.stderr
    if p.returncode != 0:
        pytest.fail(f"pip wheel failed ({p.returncode}):\n{tail(log, 80)}", pytrace=False)
    wheels = glob.glob(str(src / "dist" / "simdev-*.whl"))
    assert len(wheels) == 1, f"expected one simdev wheel, found {wheels}\n{tail(log)}"
    return wheels[0]


def test_wheel_holds_the_plugin_and_the_package(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = z.read(meta_name).decode()
    assert "tensorflow-plugins/libsimdev.so" in names, sorted(names)
    for f in ("simdev/__init__.py", "simdev/dlpack.py", "simdev/jax.py",
              "simdev/libsimdev_xla.so", "simdev/bin/simdev_graph_opt",
              "simdev/valgrind.py", "simdev/valgrind.supp"):
        assert f in names, sorted(names)
    # The deliberate-overrun op of tests/tf/test_valgrind.py is test-only.
    assert not [n for n in names if "overrun" in n], sorted(names)
    assert [n for n in names if re.fullmatch(r"simdev/_dlpack\..*\.so", n)], sorted(names)
    top = {n.split("/")[0] for n in names}
    extra = {t for t in top if not t.endswith(".dist-info")} - {"simdev", "tensorflow-plugins"}
    assert not extra, f"unexpected top-level entries in the wheel: {extra}"
    assert re.search(r"^Requires-Dist: tensorflow-cpu==2\.21", meta, re.M), meta[:800]
    # The README's `pip install '.[jax]'`: the pinned JAX simdev.jax is built for.
    assert re.search(r"^Provides-Extra: jax$", meta, re.M), meta[:1200]
    for pkg in ("jax", "jaxlib"):
        assert re.search(rf'^Requires-Dist: {pkg}==0\.10\.2; extra == "jax"$',
                         meta, re.M), meta[:1200]


def new_venv(root):
    """Creates a venv at root; returns (its python, its site-packages, this
    interpreter's site-packages)."""
    p = run([sys.executable, "-m", "venv", str(root)])
    assert p.returncode == 0, p.stderr
    py = str(root / "bin" / "python")
    site_new = run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
                   ).stdout.strip()
    site_old = sysconfig.get_path("purelib")
    assert site_new and os.path.isdir(site_new) and site_new != site_old
    return py, site_new, site_old


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """(python, site-packages) of a fresh venv with the wheel installed and
    this interpreter's packages (TensorFlow...) symlinked, simdev's excluded."""
    py, site_new, site_old = new_venv(tmp_path_factory.mktemp("venv") / "v")
    own = set(os.listdir(site_new))  # the venv's pip, setuptools: kept
    for name in sorted(os.listdir(site_old)):
        if (name in own or name.split("-")[0] in own
                or name in ("tensorflow-plugins", "simdev", "__pycache__")
                or name.startswith("simdev-") or name.endswith(".pth")):
            continue
        os.symlink(os.path.join(site_old, name), os.path.join(site_new, name))
    # With its dependencies (all present, no index): pip checks the wheel's
    # Requires-Dist against the TensorFlow it finds.
    p = run([py, "-m", "pip", "install", "--no-index", wheel], env=clean_env())
    assert p.returncode == 0, f"pip install of the wheel failed:\n{p.stdout}{p.stderr}"
    return py, site_new


def test_plugin_exports_only_the_entry_points(venv):
    lib = os.path.join(venv[1], "tensorflow-plugins", "libsimdev.so")
    syms = dynamic_symbols(lib, "--defined-only")
    assert set(syms) - LINKER_SYMBOLS == ENTRY_POINTS, sorted(syms)


def test_valgrind_helper_uses_the_wheels_suppressions(venv):
    """python -m simdev.valgrind from the fresh venv names the suppression
    file the wheel installed (--dry-run: valgrind is not run)."""
    py, site_new = venv
    p = run([py, "-m", "simdev.valgrind", "--dry-run", "script.py"], cwd="/",
            env=clean_env(PYTHONNOUSERSITE="1"))
    assert p.returncode == 0, p.stderr
    supp = os.path.join(site_new, "simdev", "valgrind.supp")
    assert os.path.isfile(supp)
    assert f"--suppressions={supp} " in p.stderr, p.stderr


def dynamic_section(lib):
    out = run(["readelf", "-d", lib]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    paths = re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library r\w*path: \[([^\]]*)\]", out)
    return needed, paths, out


def owning_package(path):
    """The Debian package that installed `path` (tries the merged-/usr twins
    and the symlink's target: /lib/x86_64-linux-gnu/libc.so.6 is registered
    under /lib, libopenblas.so.0 is an alternatives link)."""
    cands = []
    for p in (path, os.path.realpath(path)):
        cands += [p, p[4:] if p.startswith("/usr/") else "/usr" + p]
    for c in cands:
        r = run(["dpkg-query", "-S", c])
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def test_libraries_need_only_tensorflow_and_runtime_packages(venv):
    """What the wheel's libraries need on another machine: TensorFlow's
    framework and C API libraries through RUNPATH $ORIGIN/../tensorflow (the
    installed tensorflow package), and libraries of Debian's runtime packages. No path
    of the build machine (pip's build environment, .deps/) is recorded."""
    if not shutil.which("dpkg-query"):
        pytest.fail("dpkg-query not found: this check needs Debian", pytrace=False)
    site_new = venv[1]
    plugin = os.path.join(site_new, "tensorflow-plugins", "libsimdev.so")
    ext = glob.glob(os.path.join(site_new, "simdev", "_dlpack.*.so"))
    assert len(ext) == 1, ext
    needed, paths, out = dynamic_section(plugin)
    assert paths == ["$ORIGIN/../tensorflow"], out
    assert "libtensorflow_framework.so.2" in needed, needed
    assert "libtensorflow_cc.so.2" not in needed, needed
    ext_needed, ext_paths, ext_out = dynamic_section(ext[0])
    assert not ext_paths, ext_out
    # The JAX custom calls' library: no TensorFlow at all (a JAX process
    # must not load it), no path of the build machine.
    xla = os.path.join(site_new, "simdev", "libsimdev_xla.so")
    xla_needed, xla_paths, xla_out = dynamic_section(xla)
    assert not xla_paths, xla_out
    assert not [n for n in xla_needed if "tensorflow" in n], xla_needed
    tf_dir = os.path.realpath(os.path.join(site_new, "tensorflow"))
    for lib, libneeded in ((plugin, needed), (ext[0], ext_needed),
                           (xla, xla_needed)):
        ldd = run(["ldd", lib]).stdout
        resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
        for soname in libneeded:
            if soname.startswith("ld-linux"):
                continue
            where = resolved.get(soname)
            assert where and where != "not", f"{lib}: {soname} not found\n{ldd}"
            if soname in ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2"):
                assert os.path.dirname(os.path.realpath(where)) == tf_dir, ldd
                continue
            pkg = owning_package(where)
            assert pkg and RUNTIME_PACKAGES.match(pkg), \
                f"{lib}: {soname} -> {where} comes from {pkg!r}, not a runtime package"


def test_tensorflow_lists_simdev_from_the_wheel(venv):
    py, site_new = venv
    snippet = PRELUDE + "\n" + textwrap.dedent(r'''
        import tensorflow as tf

        @check("devices")
        def _():
            return {"simdev": [d.name for d in tf.config.list_physical_devices("SIMDEV")]}

        @check("maps")
        def _():
            with open("/proc/self/maps") as f:
                libs = {l.split()[-1] for l in f if l.rstrip().endswith("libsimdev.so")}
            return {"libs": sorted(libs)}

        @check("matmul")
        def _():
            import numpy as np
            tf.config.set_soft_device_placement(False)
            a = np.arange(12, dtype=np.float32).reshape(3, 4)
            with tf.device("/device:SIMDEV:0"):
                y = tf.matmul(tf.constant(a), tf.constant(a.T))
            return {"device": y.device, "equal": bool((y.numpy() == a @ a.T).all())}

        @check("package")
        def _():
            import numpy as np, simdev, simdev.dlpack as sdl
            with tf.device("/device:SIMDEV:0"):
                t = tf.constant([1.0, 2.0, 3.0]) * 2.0
            return {"library_path": simdev.library_path(),
                    "dlpack": np.from_dlpack(sdl.wrap(t)).tolist()}
    ''')
    checks = run_checks(py, snippet, ("devices", "maps", "matmul", "package"))
    plugin = os.path.join(site_new, "tensorflow-plugins", "libsimdev.so")
    assert checks["devices"]["data"]["simdev"] == ["/physical_device:SIMDEV:0"], checks
    assert checks["maps"]["data"]["libs"] == [os.path.realpath(plugin)], \
        f"expected only the wheel's plugin to be loaded: {checks['maps']}"
    assert checks["matmul"]["data"] == {
        "device": "/job:localhost/replica:0/task:0/device:SIMDEV:0", "equal": True}, checks
    assert os.path.realpath(checks["package"]["data"]["library_path"]) == \
        os.path.realpath(plugin), checks["package"]
    assert checks["package"]["data"]["dlpack"] == [2.0, 4.0, 6.0], checks["package"]


def run_checks(py, snippet, names, **env):
    """Runs snippet (PRELUDE's check() records) with the venv's python in a
    clean environment; asserts it exited 0 and that every check in names
    passed; returns the records by name."""
    p = run([py, "-c", snippet], cwd="/", timeout=300,
            env=clean_env(PYTHONUNBUFFERED="1", PYTHONNOUSERSITE="1", **env))
    checks = {}
    for line in p.stdout.splitlines():
        if line.startswith(CHECK_MARK):
            rec = json.loads(line[len(CHECK_MARK):])
            checks[rec["name"]] = rec
    what = f"returncode {p.returncode}\n{tail(p.stderr, 40)}"
    assert p.returncode == 0, what
    for name in names:
        assert checks.get(name, {}).get("ok"), f"{name}: {checks.get(name)}\n{what}"
    return checks


def test_jax_runs_the_wheels_xla_library(venv):
    """simdev.jax from the wheel, in a JAX process of the venv: register()
    loads the wheel's libsimdev_xla.so, a matmul runs on simdev's stream,
    and TensorFlow is never imported nor mapped."""
    py, site_new = venv
    snippet = PRELUDE + "\n" + textwrap.dedent(r'''
        import sys
        import numpy as np
        import simdev.jax as sj

        @check("matmul")
        def _():
            sj.register()
            eye = np.eye(3, dtype=np.float32)
            a = np.arange(6, dtype=np.float32).reshape(2, 3)
            r = np.asarray(sj.matmul(a, eye))
            return {"library_path": sj.library_path(),
                    "equal": bool((r == a).all()), "dtype": str(r.dtype),
                    "queued": sj.counts()[0]}

        @check("no_tensorflow")
        def _():
            with open("/proc/self/maps") as f:
                mapped = any("tensorflow" in l for l in f)
            return {"imported": "tensorflow" in sys.modules, "mapped": mapped}
    ''')
    checks = run_checks(py, snippet, ("matmul", "no_tensorflow"),
                        JAX_PLATFORMS="cpu")
    mm = checks["matmul"]["data"]
    assert os.path.realpath(mm["library_path"]) == \
        os.path.realpath(os.path.join(site_new, "simdev", "libsimdev_xla.so")), mm
    assert mm["equal"] is True and mm["dtype"] == "float32" and mm["queued"] == 1, mm
    assert checks["no_tensorflow"]["data"] == {"imported": False, "mapped": False}, checks


def test_wheel_build_without_tensorflow_is_an_error(tmp_path):
    """`pip wheel --no-build-isolation` with a Python that has scikit-build-core
    but no TensorFlow: the build stops with a message and no wheel is
    written (a wheel without the plugin would install "successfully"). pip
    stops first, at the wheel's metadata (scripts/tf_release.py cannot name
    the TensorFlow release to depend on); CMake run by hand with
    SIMDEV_REQUIRE_TF=ON (as `make` and a wheel build run it) stops at its
    TensorFlow check, before jemalloc is built. A few seconds each."""
    src = tmp_path / "src"
    p = run(["git", "clone", "--quiet", ROOT, str(src)])
    assert p.returncode == 0, f"git clone failed: {p.stderr}"
    py, site_new, site_old = new_venv(tmp_path / "v")
    for name in os.listdir(site_old):  # scikit-build-core and what it needs
        if re.match(r"(scikit_build_core|packaging|pathspec)([-.]|$)", name):
            os.symlink(os.path.join(site_old, name), os.path.join(site_new, name))
    assert run([py, "-c", "import scikit_build_core, tensorflow"]).returncode != 0
    p = run([py, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
             "-w", "dist", "."], cwd=src, env=clean_env())
    log = p.stdout + p.stderr
    assert p.returncode != 0, f"the build succeeded without TensorFlow:\n{tail(log)}"
    # CMake wraps its messages at a line width, so a long temporary path
    # can split a phrase across lines: compare with whitespace collapsed.
    flat = " ".join(log.split())
    assert "no TensorFlow in the build environment" in flat, tail(log)
    assert not glob.glob(str(src / "dist" / "*.whl")), "a wheel was written"
    assert "jemalloc: building" not in log, tail(log)
    p = run(["cmake", "-S", str(src), "-B", str(tmp_path / "b"),
             "-DSIMDEV_REQUIRE_TF=ON", f"-DPython3_EXECUTABLE={py}"],
            env=clean_env())
    log = p.stdout + p.stderr
    flat = " ".join(log.split())
    assert p.returncode != 0, f"CMake configured without TensorFlow:\n{tail(log)}"
    assert "TensorFlow's C headers not found" in flat, tail(log)
    assert "has no tensorflow package" in flat, tail(log)
    assert "jemalloc: building" not in log, tail(log)
