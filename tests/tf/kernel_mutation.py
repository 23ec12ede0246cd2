"""Mutation check of the TF test suite: for every op simdev registers,
leave that one kernel out and show that some test fails.

    .venv/bin/python tests/tf/kernel_mutation.py             # every op
    .venv/bin/python tests/tf/kernel_mutation.py MatMul Relu # some ops
    .venv/bin/python tests/tf/kernel_mutation.py --list      # the ops

The plugin's test-only switch SIMDEV_TEST_OMIT_KERNELS=Op leaves Op
unregistered (src/kernels/framework/launch.c); pytest's --simdev-omit-kernels=Op
passes it to every TF child (tests/tf/conftest.py). For each op this script
runs pytest over tests/tf with that op omitted and -x, the modules that name
the op first, leaving out tests marked `registry` (they only read TF's
kernel registry, so they fail by construction); the first failure is the
op's witness. Then it runs every witness with nothing omitted: each must
pass, or the witness proves nothing. An op without a witness is reported;
if TF's own DEVICE_DEFAULT kernel serves all the op's types (TF runs it on
SIMDEV when simdev's is missing, with the same behaviour), a failing
`registry` test is accepted instead, and the op is listed as shadowed.

One pytest run per op (two for a shadowed op): 36 minutes on a 2-core
AMD EPYC shared with other work, too slow for `make test`; test_kernel_coverage.py runs the cheaper check that fits there
(one run with every kernel omitted, failures attributed by TF's message).
This file also holds what both share. Exit status: 0 when every op has a
witness, 1 otherwise.
"""
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))

# TF's words when an op has no kernel for the requested device, and where
# they name the op: eager ops ("... [Op:MatMul]"), nodes of a tf.function
# ("... no supported kernel for SIMDEV devices ... Op: MatMul"), ops with no
# kernel anywhere ("Could not find device for node: {{node X}} = Op[...]").
MISSING_KERNEL = [
    re.compile(r"Could not satisfy device specification '[^']*SIMDEV:\d+'\. "
               r"enable_soft_placement=0\..{0,800}?\[Op:(\w+)\]", re.S),
    re.compile(r"Could not satisfy explicit device specification '[^']*SIMDEV[^']*' "
               r"because no supported kernel for SIMDEV devices is available\."
               r".{0,2000}?\nOp: (\w+)", re.S),
    re.compile(r"Could not find device for node: \{\{node [^}]*\}\} = (\w+)\["),
]

# Run in a TF child: SIMDEV's kernels by op, and whether a DEVICE_DEFAULT
# kernel of TF's covers every type simdev registers the op for.
REGISTRY_SNIPPET = r"""
import collections
import tensorflow as tf
from tensorflow.python.framework import kernels

def types(k):
    return {c.name: {tf.as_dtype(t).name for t in c.allowed_values.list.type}
            for c in k.constraint}

@check("registry")
def _():
    sim, default = collections.defaultdict(list), collections.defaultdict(list)
    for k in kernels.get_all_registered_kernels().kernel:
        if k.device_type == "SIMDEV":
            sim[k.op].append(types(k))
        elif k.device_type == "DEFAULT":
            default[k.op].append(types(k))
    out = {}
    for op in sorted(sim):
        # Shadowed: for each type attribute of each SIMDEV kernel, TF's
        # DEVICE_DEFAULT kernels of the op accept every type it does (per
        # attribute; TF's DEFAULT kernels come one per type).
        union = collections.defaultdict(set)
        for d in default.get(op, []):
            for n, v in d.items():
                union[n] |= v
        shadowed = bool(default.get(op)) and all(
            all(v <= union[n] for n, v in c.items()) and c for c in sim[op])
        out[op] = {"kernels": len(sim[op]), "shadowed": shadowed}
    return out
"""


def registry_from(run):
    """{op: {"kernels", "shadowed"}} from a TFRun of REGISTRY_SNIPPET."""
    return run.data("registry")


def attribute(junit_xml):
    """Failed tests of a pytest run (its --junitxml) attributed to ops:
    ({op: [ids of failed tests whose failure text names op's kernel as
    missing]}, {id: failure text} of every failed test)."""
    by_op = collections.defaultdict(list)
    failed = {}
    for tc in ET.parse(junit_xml).iter("testcase"):
        f = tc.find("failure")
        if f is None:
            f = tc.find("error")
        if f is None:
            continue
        tid = f"{tc.get('classname')}::{tc.get('name')}"
        text = f"{f.get('message') or ''}\n{f.text or ''}"
        failed[tid] = text
        ops = set()
        for rx in MISSING_KERNEL:
            ops.update(rx.findall(text))
        for op in ops:
            by_op[op].append(tid)
    return dict(by_op), failed


def pytest_cmd(targets, omit, junit_xml=None, extra=()):
    cmd = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider",
           f"--simdev-omit-kernels={omit}", "-o", "junit_family=xunit1", *extra]
    if junit_xml:
        cmd.append(f"--junitxml={junit_xml}")
    return cmd


def test_modules():
    """Every test module but the coverage check itself."""
    mods = sorted(glob.glob(os.path.join(HERE, "test_*.py")))
    return [m for m in mods if not m.endswith("test_kernel_coverage.py")]


def ordered_modules(op, mods):
    """Modules that name `op` first (most mentions first), then the rest."""
    def mentions(m):
        with open(m, encoding="utf-8") as f:
            return len(re.findall(rf"\b{re.escape(op)}\b", f.read()))
    return sorted(mods, key=lambda m: -mentions(m))


def _registry_run():
    """REGISTRY_SNIPPET in a TF child, outside pytest (conftest's helpers)."""
    sys.path.insert(0, HERE)
    import conftest
    plugin = conftest.find_plugin()
    code = conftest.PRELUDE + "\n" + REGISTRY_SNIPPET
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=conftest.child_env(plugin), timeout=300)
    for line in p.stdout.splitlines():
        if line.startswith(conftest.CHECK_MARK):
            rec = json.loads(line[len(conftest.CHECK_MARK):])
            if rec["ok"]:
                return rec["data"]
            sys.exit(f"registry listing raised: {rec['message']}")
    sys.exit(f"registry listing failed:\n{p.stderr[-3000:]}")


def first_failure(junit_xml):
    """The node id (HERE/module.py::test) of the first failed test."""
    for tc in ET.parse(junit_xml).iter("testcase"):
        if tc.find("failure") is not None or tc.find("error") is not None:
            module = tc.get("classname").split(".")[-1]
            return f"{os.path.join(HERE, module)}.py::{tc.get('name')}"
    return None


def main(argv):
    reg = _registry_run()
    if "--list" in argv:
        for op, r in reg.items():
            print(op, "(shadowed by a TF DEVICE_DEFAULT kernel)" if r["shadowed"] else "")
        return 0
    ops = [a for a in argv if not a.startswith("-")] or list(reg)
    unknown = [op for op in ops if op not in reg]
    if unknown:
        sys.exit(f"not registered for SIMDEV: {unknown}")
    mods = test_modules()
    witness, shadowed_only, missing = {}, [], []
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "run.xml")

        def first_failing(targets, op, marks):
            p = subprocess.run(pytest_cmd(targets, op, xml, ["-x", "-m", marks]),
                               capture_output=True, text=True, cwd=HERE)
            return first_failure(xml) if p.returncode != 0 else None

        for op in ops:
            w = first_failing(ordered_modules(op, mods), op, "not registry")
            if w is None and reg[op]["shadowed"]:
                w = first_failing(mods, op, "registry")
                if w:
                    shadowed_only.append(op)
            print(f"{op:40s} {w or 'NO TEST FAILS WITHOUT IT'}", flush=True)
            if w:
                witness[op] = w
            else:
                missing.append(op)
        # The witnesses must pass with every kernel present.
        baseline = subprocess.run(
            [sys.executable, "-m", "pytest", *sorted(set(witness.values())), "-q",
             "-p", "no:cacheprovider"], capture_output=True, text=True, cwd=HERE)
    print()
    print(f"{len(witness)} of {len(ops)} ops have a witness test")
    if shadowed_only:
        print(f"witnessed only by a registry test (TF's DEVICE_DEFAULT kernel does "
              f"the same on SIMDEV): {shadowed_only}")
    if missing:
        print(f"NO TEST FAILS WITHOUT: {missing}")
    if baseline.returncode != 0:
        print("some witnesses fail with every kernel present (they prove nothing):")
        print(baseline.stdout[-3000:])
    return 0 if not missing and baseline.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
