"""The harness's kernel-registration checks grade each broken registration.

libconf_mutant_kernels.so (plugins/mutant_kernels.c) is mini.c plus a
TF_InitKernel that registers, through TF's kernel C API, a few correct
kernels and one kernel (or pair) per rule of kernels.registrations, each
for an op of its own. The harness must report exactly the intended rule
and grade for each of those ops, nothing for the correct ones, and fail
the run. mini itself, with no TF_InitKernel, must have the test skipped.

The JSON has one entry per failure place (the first observed text), and the
harness prints up to 5 distinct texts per place, so each op's failures are
read from the harness's printed output; the JSON gives the set of rules.

No TensorFlow import: the harness is a C program; it runs in a subprocess.
The harness is $SIMDEV_CONFORMANCE if set, else the build tree's.
"""

import re

from harnessrun import PLUGINS, run_json

PER_TEST_TIMEOUT = 120  # --timeout, seconds per harness test

REQ, REC = "required", "recommended"

# Op -> the (rule, grade) pairs its registrations must fire, and nothing
# else (mutant_kernels.c's first comment says why each one).
BROKEN = {
    "NoSuchOpForConformance": {("kernels.op_exists", REC)},
    "Elu": {("kernels.device_type", REC), ("kernels.no_duplicates", REQ)},
    "MatMul": {("kernels.constraint_attr_exists", REQ)},
    "Cast": {("kernels.constraint_attr_exists", REQ)},
    "Sqrt": {("kernels.constraint_types_allowed", REC)},
    "Identity": {("kernels.host_memory_arg_exists", REQ)},
    "Square": {("kernels.no_duplicates", REQ)},
    "Neg": {("kernels.no_duplicates", REQ)},
    "Tanh": {("kernels.constraint_values", REQ)},
    "Sign": {("kernels.constraint_values", REQ)},
}
CORRECT = ("Relu", "Reshape", "Abs", "Floor")
# Registrations in mutant_kernels.c: its table, then two serialized defs.
N_KERNELS, N_OPS, N_FOREIGN = 18, 14, 1

HEADER = re.compile(r"^  (FAIL|WARN) \[(\w+)\] (\S+)")
TEXT = re.compile(r"^    (?:observed|also): (.*)$")


def run_harness(plugin, tmp_path):
    """Runs the kernel checks on plugin; returns (exit code, JSON, stdout,
    stderr)."""
    proc, doc = run_json(["--filter", "kernels"], PLUGINS / plugin, tmp_path,
                         PER_TEST_TIMEOUT)
    return proc.returncode, doc, proc.stdout, proc.stderr


def printed_failures(stdout):
    """[(rule, grade, text)] for each observed/also line of each printed
    failure."""
    found, current = [], None
    for line in stdout.splitlines():
        m = HEADER.match(line)
        if m:
            current = (m.group(3), m.group(2))
            continue
        m = TEXT.match(line)
        if m and current is not None:
            found.append((*current, m.group(1)))
        elif not line.startswith("    "):
            current = None
    return found


def test_mutant_kernels_graded(tmp_path):
    rc, res, out, err = run_harness("libconf_mutant_kernels.so", tmp_path)
    context = f"harness output:\n{out}{err}"

    # TF accepted every registration (mutant_kernels.c prints refusals).
    assert "mutant_kernels:" not in err, context
    tests = {t["name"]: t for t in res["tests"]}
    assert tests["kernels.registrations"]["status"] == "fail", context
    assert res["result"] == "fail" and rc == 1, context
    assert re.search(
        rf"TF_InitKernel registered {N_KERNELS} kernels for {N_OPS} ops "
        rf"\({N_FOREIGN} for another device type than MINI\)", out), context

    # The JSON's rules and grades are exactly the intended ones, all from
    # this test, and each broken registration counted once.
    failures = res["failures"]
    assert all(f["test"] == "kernels.registrations" for f in failures), context
    want = set().union(*BROKEN.values())
    assert {(f["rule"], f["grade"]) for f in failures} == want, context
    n_cases = sum(len(v) for v in BROKEN.values())
    assert sum(f["count"] for f in failures) == n_cases, context
    assert res["summary"]["required"]["failed"] == len(
        [f for f in failures if f["grade"] == REQ]), context

    # Per op, from the printed texts: exactly its rules, under its grade.
    printed = printed_failures(out)
    assert printed, context
    for op, rules in BROKEN.items():
        fired = {(rule, grade) for rule, grade, text in printed
                 if f"'{op}'" in text}
        assert fired == rules, (op, fired, context)
    for op in CORRECT:
        hits = [text for _, _, text in printed if f"'{op}'" in text]
        assert not hits, (op, hits, context)


def test_mini_kernels_skipped(tmp_path):
    rc, res, out, err = run_harness("libconf_mini.so", tmp_path)
    context = f"harness output:\n{out}{err}"
    tests = {t["name"]: t for t in res["tests"]}
    t = tests["kernels.registrations"]
    assert t["status"] == "skip", context
    assert "TF_InitKernel" in t.get("reason", ""), context
    assert res["failures"] == [] and res["result"] == "pass", context
    assert rc == 0, context
