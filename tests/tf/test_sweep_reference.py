"""The sweep's TF CPU reference runs in a child process (tests/sweep/
reference.py), so a crash of TF's CPU kernel costs the sweep one case, not
the run.

Two runs of the sweep on one op (--ops AvgPoolGrad, quick), each a few
seconds plus TF's imports:
- a crash on demand: SIMDEV_SWEEP_TEST_ABORT names a case, and the
  reference child calls os.abort() there. Deterministic: it does not
  depend on a TF bug staying around;
- the real one: with --cpu-onednn the oneDNN reference (TF_ENABLE_ONEDNN_OPTS
  =1) CHECK-fails on AvgPoolGrad's bad case "orig_input_shape length"
  (TF 2.21, docs/tf-cpu-divergences.md); the sweep must record it with its
  signal and TF's last words, and still run every case on both references.
Both pass whatever TF_ENABLE_ONEDNN_OPTS the sweep itself runs with.
"""
import json
import os
import subprocess
import sys

import conftest

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.join(os.path.dirname(HERE), "sweep", "sweep.py")
OP = "AvgPoolGrad"
# The op's first good case (tests/sweep/specs.py _pool) in its first
# registered dtype: the cases after it must all still run.
ABORT_AT = "AvgPoolGrad T=float32 [AvgPoolGrad VALID]"
ONEDNN_CRASH = "AvgPoolGrad T=float32 [bad: orig_input_shape length]"


def sweep(plugin, tmp_path, *args, extra=None):
    out = tmp_path / "sweep.json"
    cmd = [sys.executable, SWEEP, "--quick", "--ops", OP, "--json", str(out), *args]
    p = subprocess.run(cmd, env=conftest.child_env(plugin, extra), capture_output=True,
                       text=True, errors="replace", timeout=600)
    tail = f"returncode {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert out.exists(), f"the sweep wrote no report (it died):\n{tail}"
    rep = json.loads(out.read_text())
    return p, rep, tail


def requests(c):
    """Every case the sweep asks the reference about (--ops AvgPoolGrad:
    good and bad cases, no property or spec-only ones)."""
    return c["cases"] + c["bad_cases"]


def test_a_crashing_reference_costs_one_case(plugin, tmp_path):
    p, rep, tail = sweep(plugin, tmp_path,
                         extra={"SIMDEV_SWEEP_TEST_ABORT": ABORT_AT})
    c = rep["counts"]
    # the crash is a failure (of TF CPU, named as such), the only one
    assert p.returncode == 1, tail
    assert rep["failures"] == rep["by_kind"].get("cpu_reference"), tail
    assert len(rep["failures"]) == 1 and rep["failures"][0].startswith(ABORT_AT + ":"), tail
    assert "SIGABRT" in rep["failures"][0], tail
    # one case lost; every other one answered, by a second child
    assert c["cpu_crashes"] == 1, tail
    assert c["cases"] > 1 and c["cpu_references"] == requests(c) - 1, tail
    assert rep["cpu_reference"]["eigen"]["starts"] == 2, tail
    assert rep["cpu_reference"]["eigen"]["onednn"] is False, tail


def test_onednn_crash_is_recorded_and_the_sweep_goes_on(plugin, tmp_path):
    p, rep, tail = sweep(plugin, tmp_path, "--cpu-onednn")
    c = rep["counts"]
    # SIMDEV against Eigen: all good; oneDNN's differences are not failures
    assert p.returncode == 0 and not rep["failures"], tail
    info = rep["cpu_reference"]
    assert info["eigen"]["onednn"] is False and info["onednn"]["onednn"] is True, info
    crashes = [d for d in rep["onednn"] if d["kind"] == "crash"]
    assert [d["case"] for d in crashes] == [ONEDNN_CRASH], rep["onednn"]
    assert crashes[0]["signal"] == "SIGABRT", crashes
    assert "Check failed" in crashes[0]["last"], crashes
    # every case ran on both references, the oneDNN one restarted once
    assert c["cpu_crashes"] == 0 and c["cpu_references"] == requests(c), tail
    assert c["onednn_references"] == requests(c), tail
    assert info["onednn"]["starts"] == 2, info
