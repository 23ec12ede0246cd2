"""The quick form of the registration sweep (tests/sweep/sweep.py --quick),
in one TF subprocess with the plugin (SIMDEV, TF_ENABLE_ONEDNN_OPTS as the
environment sets it) and its TF CPU reference in a child of that
(TF_ENABLE_ONEDNN_OPTS=0: Eigen's kernels on any machine; a crash there
costs one case, tests/tf/test_sweep_reference.py): every op simdev
registers, every registered dtype combination, fewer shapes than `make
sweep`; the registry rules; and docs/kernels.md up to date with TF's
registry.

Each test asserts on one kind of failure the sweep reports, so a wrong
kernel, a missing spec, a registry rule and stale docs fail separately.
The full sweep (`make sweep`) runs more shapes, the bad inputs of every
dtype combination, and writes docs/kernel-errors.md.
"""
import json
import os
import subprocess
import sys

import pytest

import conftest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SWEEP = os.path.join(ROOT, "tests", "sweep", "sweep.py")


@pytest.fixture(scope="module")
def report(plugin, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "sweep.json"
    cmd = [sys.executable, SWEEP, "--quick", "--json", str(out)]
    p = subprocess.run(cmd, env=conftest.child_env(plugin), capture_output=True,
                       text=True, errors="replace", timeout=600)
    if not out.exists():
        pytest.fail(f"the sweep wrote no report (returncode {p.returncode}):\n"
                    f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}", pytrace=False)
    rep = json.loads(out.read_text())
    rep["returncode"] = p.returncode
    rep["summary"] = next((l for l in p.stdout.splitlines() if l.startswith("sweep")), "")
    return rep


def _none(rep, kind, what):
    lines = rep["by_kind"].get(kind, [])
    assert not lines, f"{what} ({len(lines)}):\n" + "\n".join(lines[:40]) + \
        f"\n{rep['summary']}\nRun it again: .venv/bin/python tests/sweep/sweep.py --quick"


def test_every_registered_op_has_a_spec(report):
    # a spec-less op would be skipped silently: the sweep counts it instead
    assert report["counts"]["ops"] > 0, report["summary"]
    assert report["counts"]["unaccounted"] == 0, report["unaccounted"]
    _none(report, "unaccounted", "ops registered on SIMDEV without a spec in tests/sweep/")


def test_every_case_matches_cpu_on_simdev_deterministically(report):
    assert report["counts"]["cases"] >= report["counts"]["combos"], report["summary"]
    _none(report, "case", "cases where SIMDEV failed, ran elsewhere, was not "
                          "deterministic or differed from TF CPU")


def test_bad_inputs_raise_like_cpu(report):
    assert report["counts"]["bad_cases"] > 0, report["summary"]
    _none(report, "bad", "bad inputs where SIMDEV did not raise TF CPU's error class")


def test_cpu_reference_ran_eigen_without_crashing(report):
    # the reference is TF's Eigen CPU kernels whatever the machine's default
    info = report["cpu_reference"]["eigen"]
    assert info["onednn"] is False, info
    assert report["counts"]["cpu_references"] >= report["counts"]["bad_cases"] > 0, \
        report["summary"]
    _none(report, "cpu_reference", "cases on which TF CPU's (Eigen) process died")


def test_specs_are_sound(report):
    # specs of ops not registered yet run CPU against CPU: known good when
    # the kernel lands; a bad case CPU accepts is a broken spec
    _none(report, "spec", "broken specs")


@pytest.mark.registry
def test_registry_rules(report):
    _none(report, "registry", "registrations breaking the registry rules")


@pytest.mark.registry
def test_kernels_md_up_to_date(report):
    _none(report, "docs", "docs/kernels.md")


@pytest.mark.registry
def test_kernel_errors_md_lists_every_op():
    # written by the full sweep only; every op has rows once it has run
    path = os.path.join(ROOT, "docs", "kernel-errors.md")
    kernels = os.path.join(ROOT, "docs", "kernels.md")
    with open(path, encoding="utf-8") as f:
        errs = {l.split("|")[1].strip() for l in f if l.startswith("| ") and "---" not in l}
    with open(kernels, encoding="utf-8") as f:
        ops = {l.split("|")[1].strip() for l in f if l.startswith("| ") and "---" not in l}
    ops.discard("op")
    missing = sorted(ops - errs)
    assert not missing, (f"docs/kernel-errors.md has no rows for {missing}; regenerate "
                         f"it with `make sweep SWEEP_ARGS=--write-docs`")
