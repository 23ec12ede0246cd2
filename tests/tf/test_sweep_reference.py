"""The sweep's TF CPU reference runs in a child process (tests/sweep/
reference.py), so a crash of TF's CPU kernel costs the sweep one case, not
the run.

One run of the sweep on one op (--quick --ops AvgPoolGrad --cpu-onednn),
with two crashes in it (each TF import costs seconds: one run, not two):
- a crash on demand: SIMDEV_SWEEP_TEST_ABORT names a case, on which the
  Eigen reference child calls os.abort(). Deterministic: it does not
  depend on a TF bug staying around;
- the real one: the oneDNN reference (TF_ENABLE_ONEDNN_OPTS=1) CHECK-fails
  on AvgPoolGrad's bad case "orig_input_shape length" (TF 2.21.0,
  docs/tf-cpu-divergences.md); the sweep must record it with its signal
  and TF's last words, and not count it as SIMDEV's failure.
After each crash a new child answers every later case. Both hold whatever
TF_ENABLE_ONEDNN_OPTS the sweep itself runs with.
"""
import json
import os
import subprocess
import sys

import pytest

import conftest

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.join(os.path.dirname(HERE), "sweep", "sweep.py")
OP = "AvgPoolGrad"
# The op's first good case (tests/sweep/specs.py _pool) in its first
# registered dtype: the cases after it must all still run.
ABORT_AT = "AvgPoolGrad T=float32 [AvgPoolGrad VALID]"
ONEDNN_CRASH = "AvgPoolGrad T=float32 [bad: orig_input_shape length]"


@pytest.fixture(scope="module")
def run(plugin, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep_ref") / "sweep.json"
    cmd = [sys.executable, SWEEP, "--quick", "--ops", OP, "--cpu-onednn", "--json", str(out)]
    p = subprocess.run(cmd, env=conftest.child_env(plugin, {"SIMDEV_SWEEP_TEST_ABORT": ABORT_AT}),
                       capture_output=True, text=True, errors="replace", timeout=600)
    tail = f"returncode {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert out.exists(), f"the sweep wrote no report (it died):\n{tail}"
    return p, json.loads(out.read_text()), tail


def requests(c):
    """Every case the sweep asks the references about (--ops AvgPoolGrad:
    its good and bad cases; no property or spec-only ones)."""
    return c["cases"] + c["bad_cases"]


def test_a_crashing_reference_costs_one_case(run):
    p, rep, tail = run
    c = rep["counts"]
    # the crash is a failure (TF CPU's, named as such), the only one
    assert p.returncode == 1, tail
    assert rep["failures"] == rep["by_kind"].get("cpu_reference"), tail
    assert len(rep["failures"]) == 1 and rep["failures"][0].startswith(ABORT_AT + ":"), tail
    assert "SIGABRT" in rep["failures"][0], tail
    # one case lost; every other one answered, by a second child
    assert c["cpu_crashes"] == 1, tail
    assert c["cases"] > 1 and c["cpu_references"] == requests(c) - 1, tail
    assert rep["cpu_reference"]["eigen"]["starts"] == 2, tail
    assert rep["cpu_reference"]["eigen"]["onednn"] is False, tail


def test_onednn_crash_is_recorded_and_the_sweep_goes_on(run):
    p, rep, tail = run
    c = rep["counts"]
    info = rep["cpu_reference"]
    assert info["onednn"]["onednn"] is True, info
    crashes = [d for d in rep["onednn"] if d["kind"] == "crash"]
    assert [d["case"] for d in crashes] == [ONEDNN_CRASH], rep["onednn"]
    assert crashes[0]["signal"] == "SIGABRT", crashes
    assert "Check failed" in crashes[0]["last"], crashes
    # oneDNN's differences are not SIMDEV's failures
    assert not any(f.startswith(ONEDNN_CRASH) for f in rep["failures"]), tail
    # every case ran on the oneDNN reference (the one the Eigen child
    # aborted on too), which restarted once
    assert c["onednn_references"] == requests(c), tail
    assert info["onednn"]["starts"] == 2, info
