"""Every kernel simdev registers is needed by some test (a mutation check).

A test that passes without the kernel it is about proves nothing: with
soft placement off a missing kernel raises, but a tf.function quietly runs
kernel-less nodes on the CPU, a comparison can be too loose, an error test
can accept a placement error. So the suite is run against a plugin that
registers no kernel at all (the plugin's test-only switch
SIMDEV_TEST_OMIT_KERNELS, passed by pytest's --simdev-omit-kernels), and
each failure is attributed to the op whose kernel TF's message says is
missing. Every registered op must have a failed test attributed to it.

Why one run with everything omitted and not one run per op: the faithful
check (tests/tf/kernel_mutation.py: one op omitted per run, -x, then the
witnesses re-run with every kernel present) takes one pytest run per op,
36 minutes here, too slow for `make test`; it found a witness for all 59
ops of TF 2.21's build, the same ones this check credits. This check costs one run
of the kernel modules (about 3 minutes). What it gives up: a test is
credited to every op whose missing kernel its failure text names. That is
what the per-op run would see as long as each named failure fails the test
on its own, which the kernel modules ensure: sweeps record every case
(conftest.guarded), error checks never let the good op afterwards hide the
error (conftest.after_ok), and an op reached only after another SIMDEV op
has failed is not credited at all. Run kernel_mutation.py after changing
what tests the kernels (it is `make`-able separately).

Modules run: the kernel modules (test_kernels_*.py) and test_dlpack.py
(the DLPack ops). Tests marked `registry` read TF's kernel registry and
fail without any kernel by construction; they count only for ops that TF's
own DEVICE_DEFAULT kernels would serve with the same behaviour on SIMDEV,
where nothing else can observe simdev's kernel (none since simdev stopped
registering Identity and Reshape, which TF 2.21's DEFAULT kernels serve).
"""
import glob
import os
import subprocess
import sys

import pytest

import conftest
import kernel_mutation as km

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = sorted(glob.glob(os.path.join(HERE, "test_kernels_*.py"))) + \
    [os.path.join(HERE, "test_dlpack.py")]

pytestmark = pytest.mark.skipif(
    bool(conftest._OMIT_KERNELS),
    reason="this run already omits kernels (--simdev-omit-kernels)")


@pytest.fixture(scope="module")
def registry(run_tf):
    return km.registry_from(run_tf(km.REGISTRY_SNIPPET))


@pytest.fixture(scope="module")
def omitted_registry(run_tf, registry):
    run = run_tf(km.REGISTRY_SNIPPET,
                 env={"SIMDEV_TEST_OMIT_KERNELS": ",".join(registry)})
    return run, km.registry_from(run)


@pytest.fixture(scope="module")
def all_omitted(registry, tmp_path_factory):
    xml = str(tmp_path_factory.mktemp("coverage") / "run.xml")
    cmd = km.pytest_cmd(MODULES, ",".join(registry), xml)
    try:
        # A hang guard, not a speed check: about 3 minutes on an idle
        # 2-core machine, 15 on one loaded 5x over (seen); a timeout fails
        # only a run that is stuck.
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE,
                           timeout=2400)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the run without kernels timed out: {(e.stdout or '')[-2000:]}",
                    pytrace=False)
    if not os.path.exists(xml):
        pytest.fail(f"pytest wrote no report:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}",
                    pytrace=False)
    by_op, failed = km.attribute(xml)
    return {"by_op": by_op, "failed": failed, "stdout": p.stdout}


def test_plugin_registers_kernels(registry):
    assert len(registry) >= 50, registry


def test_switch_reaches_the_plugin(omitted_registry):
    """SIMDEV_TEST_OMIT_KERNELS reaches the child and empties the registry
    (else the check below would measure nothing)."""
    run, reg = omitted_registry
    assert reg == {}, f"still registered: {sorted(reg)}"
    assert "not registered (SIMDEV_TEST_OMIT_KERNELS)" in run.stderr, run.describe()


def test_every_kernel_is_needed(registry, all_omitted):
    by_op, failed = all_omitted["by_op"], all_omitted["failed"]
    registry_failed = set(failed) - {t for ts in by_op.values() for t in ts}
    uncovered, shadowed = [], []
    for op, r in registry.items():
        if by_op.get(op):
            continue
        # a failed `registry` test about op: its id names the op
        if r["shadowed"] and any(f"[{op}-" in t for t in registry_failed):
            shadowed.append(op)
            continue
        uncovered.append(op)
    assert not uncovered, (
        f"no test fails for want of these SIMDEV kernels: {uncovered}\n"
        f"(failed tests: {len(failed)}; pytest's summary:\n"
        f"{all_omitted['stdout'][-2000:]})")
    # The ops only a registry test notices are the ones TF serves itself.
    assert set(shadowed) <= {op for op, r in registry.items() if r["shadowed"]}


# The messages TF gave on this machine (TF 2.21), trimmed: a missing kernel
# and a kernel's own error for the same bad MatMul.
PLACEMENT = ("InvalidArgumentError",
             "Could not satisfy device specification '/job:localhost/replica:0/"
             "task:0/device:SIMDEV:0'. enable_soft_placement=0. Supported device "
             "types [CPU]. All available devices [/job:localhost/replica:0/task:0/"
             "device:SIMDEV:0, /job:localhost/replica:0/task:0/device:CPU:0]. "
             "[Op:MatMul] name: ")
KERNEL = ("InvalidArgumentError",
          "{{function_node __wrapped__MatMul_device_/job:localhost/replica:0/task:0/"
          "device:SIMDEV:0}} Matrix size-incompatible: In[0]: [2,3], In[1]: [4,5] "
          "[Op:MatMul] name: ")
ON_CPU = ("InvalidArgumentError", KERNEL[1].replace("SIMDEV:0", "CPU:0"))


def test_error_helper_needs_the_kernel():
    """assert_kernel_error accepts the kernel's own error and nothing that
    a missing kernel or another device could produce."""
    conftest.assert_kernel_error(KERNEL, "MatMul", "Matrix size-incompatible",
                                 "InvalidArgumentError")
    for sim, op, key in [(PLACEMENT, "MatMul", "SIMDEV"),           # placement
                         (ON_CPU, "MatMul", "Matrix size-incompatible"),  # CPU ran it
                         (KERNEL, "BatchMatMulV2", "Matrix"),         # another op
                         (KERNEL, "MatMul", "In[0] is not a matrix"),  # other text
                         (("", ""), "MatMul", "Matrix")]:              # no error
        with pytest.raises(AssertionError):
            conftest.assert_kernel_error(sim, op, key)
