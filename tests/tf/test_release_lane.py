"""make test's second release: simdev built for TensorFlow 2.18.1, the
newest release whose libtensorflow_framework exports kernels_experimental.h
(docs/tf-releases.md's drift report), so the one where simdev's own
resource-variable kernels register.

The release's venv is make matrix's (scripts/matrix.py): .matrix/tf-2.18.1/,
pinned by tests/matrix/tf-2.18.1.lock, created once per checkout and kept in
step with the lock; simdev goes into it with `pip install .` (pip's build
isolation, as a user runs it: scripts/tf_release.py builds against the
venv's 2.18.1). Then, in that venv:
  - the variable-kernel test files (LANE_FILES) run, and must run, not
    skip: they prove the kernels run on SIMDEV with soft placement off and
    match NumPy and TF CPU;
  - the quick sweep of the variable ops (every dtype vs TF CPU, twice);
and across releases:
  - a plugin built for one release refuses the other with the message of
    src/se (no SIMDEV device), in both directions, and loads on its own.

Why one release and not the matrix's six: make test's budget (20 minutes on
a clean clone); `make matrix` runs them all. This file costs about three
minutes on 2 cores, most of it the venv and the build (one worker).
"""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELEASE = "2.18.1"
# The test files of the variable kernels: a file added for them joins here.
LANE_FILES = ["tests/tf/test_kernels_variables.py", "tests/tf/test_kernels_resource_scatter.py",
              "tests/tf/test_kernels_variant.py", "tests/tf/test_kernels_apply.py",
              "tests/tf/test_variables_models.py"]
# The sweep's ops whose kernels only this release has.
LANE_OPS = ["ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp",
            "AssignSubVariableOp", "ResourceGather", "ResourceGatherNd",
            *(f"ResourceScatter{k}" for k in ("Add", "Sub", "Mul", "Div", "Min", "Max",
                                             "Update")),
            *(f"ResourceScatterNd{k}" for k in ("Update", "Add", "Sub", "Min", "Max")),
            *(f"ResourceApply{k}" for k in (
                "GradientDescent", "Momentum", "KerasMomentum", "Adam", "AdamWithAmsgrad",
                "AdaMax", "RMSProp", "CenteredRMSProp", "Adagrad", "AdagradV2", "Adadelta",
                "ProximalAdagrad", "Ftrl", "FtrlV2", "AddSign", "PowerSign")),
            *(f"ResourceSparseApply{k}" for k in (
                "Adadelta", "Adagrad", "AdagradV2", "ProximalAdagrad", "Ftrl", "FtrlV2",
                "KerasMomentum")),
            "AddN", "ZerosLike"]  # T=variant only here; the other types as on 2.21


def _matrix():
    spec = importlib.util.spec_from_file_location(
        "matrix", os.path.join(ROOT, "scripts", "matrix.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tail(text, n=40):
    return "\n".join(text.splitlines()[-n:])


@pytest.fixture(scope="module")
def lane():
    """The 2.18.1 release of make matrix with this checkout installed."""
    m = _matrix()
    rel = m.Release(RELEASE)
    for step in ("venv", "builds"):
        if not rel.step(step, getattr(rel, step)):
            pytest.fail(f"{RELEASE}: {step} failed:\n{rel.results[step][1]}", pytrace=False)
    return m, rel


def run(rel, args, env=None, timeout=900):
    """args in the lane's venv, from the checkout, with the project venv's
    variables removed (matrix.Release.run's rule); returns the process."""
    full = {k: v for k, v in os.environ.items()
            if k not in ("VIRTUAL_ENV", "PYTHONPATH", "TF_PLUGGABLE_DEVICE_LIBRARY_PATH")}
    full.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=full,
                          timeout=timeout)


def summary(out):
    """{'passed': n, 'skipped': n, ...} of pytest's last line."""
    last = [l for l in out.splitlines() if re.search(r"\d+ (passed|failed|error)", l)]
    return {k: int(n) for n, k in re.findall(r"(\d+) (\w+)", last[-1])} if last else {}


def test_lane_builds_against_its_release(lane):
    m, rel = lane
    p = run(rel, [rel.py, "-c", "from importlib import metadata as m; "
                  "print(m.version('tensorflow-cpu')); "
                  "print(m.requires('simdev'))"])  # the lock's name: tensorflow-cpu
    assert p.returncode == 0, p.stderr
    tf_version, requires = p.stdout.splitlines()[:2]
    # pip's build isolation kept the venv's release and the wheel says so.
    assert tf_version == RELEASE
    assert "tensorflow-cpu==2.18.*" in requires, requires


def test_variable_kernel_tests_run_on_simdev(lane):
    m, rel = lane
    p = run(rel, [rel.py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                  *LANE_FILES])
    counts = summary(p.stdout)
    assert p.returncode == 0 and counts.get("passed", 0) > 0, _tail(p.stdout + p.stderr)
    # A skip here would be a kernel that did not register on its release.
    assert counts.get("skipped", 0) == 0, _tail(p.stdout)


def test_sweep_of_the_variable_ops(lane, tmp_path):
    m, rel = lane
    js = tmp_path / "sweep.json"
    p = run(rel, [rel.py, os.path.join("tests", "sweep", "sweep.py"), "--quick",
                  "--no-docs", "--ops", ",".join(LANE_OPS), "--json", str(js)])
    assert p.returncode == 0, _tail(p.stdout + p.stderr)
    import json
    rep = json.loads(js.read_text())
    # Every op ran on its SIMDEV kernel (a spec without registration is a
    # failure of the sweep, so rc 0 alone would say it; checked directly).
    assert rep["failures"] == [], rep["failures"][:5]
    assert rep["counts"]["property_cases"] > 0, rep["counts"]


def test_plugin_loads_on_its_own_release(lane):
    m, rel = lane
    p = run(rel, [rel.py, "-c", m.LOADS], env=None)
    assert p.returncode == 0, _tail(p.stdout + p.stderr)
    assert RELEASE in p.stdout and "SIMDEV" in p.stdout


def _refused(py, plugin, built, running):
    p = subprocess.run([py, "-c", _matrix().REFUSES], capture_output=True, text=True,
                       cwd="/", env={**{k: v for k, v in os.environ.items()
                                         if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
                                     "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": plugin})
    want = (f"no SIMDEV device: built for TensorFlow {built}, running in "
            f"TensorFlow {running}")
    assert p.returncode == 0, _tail(p.stdout + p.stderr)
    assert want in p.stderr, _tail(p.stderr)


def _plugin_of(py):
    p = subprocess.run([py, "-c", "import simdev; print(simdev.library_path())"],
                       capture_output=True, text=True, cwd="/")
    assert p.returncode == 0 and p.stdout.strip(), p.stderr
    return p.stdout.strip()


def _release_of(py):
    """py's TensorFlow release, under either distribution name."""
    p = subprocess.run([py, "-c", "from importlib import metadata as m\n"
                        "for d in ('tensorflow-cpu', 'tensorflow'):\n"
                        "    try:\n        print(m.version(d)); break\n"
                        "    except m.PackageNotFoundError: pass"],
                       capture_output=True, text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_plugin_of_the_default_release_is_refused_here(lane):
    """This suite's own plugin (the project venv's release), loaded alone by
    2.18.1's TensorFlow (the lane venv's packages without simdev)."""
    m, rel = lane
    here = _release_of(sys.executable)
    if here == RELEASE:
        pytest.skip(f"the project venv is {RELEASE} itself: no other release to refuse")
    _refused(rel.bare_python(), _plugin_of(sys.executable), here, RELEASE)


def test_plugin_of_the_lane_is_refused_by_the_default_release(lane, tmp_path):
    """The lane's plugin, loaded alone by this suite's TensorFlow (the
    project venv's packages without simdev, linked into a bare venv)."""
    m, rel = lane
    if _release_of(sys.executable) == RELEASE:
        pytest.skip(f"the project venv is {RELEASE} itself: no other release to refuse")
    here = m.Release("default")
    here.dir, here.py = str(tmp_path), sys.executable
    _refused(here.bare_python(), _plugin_of(rel.py), RELEASE, _release_of(sys.executable))
