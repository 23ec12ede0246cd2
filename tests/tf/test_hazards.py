"""TF's DEVICE_DEFAULT variable kernels vs simdev's queued work.

TensorFlow 2.21 runs AssignVariableOp / AssignAddVariableOp /
AssignSubVariableOp on SIMDEV with its DEVICE_DEFAULT kernels: host code
(Eigen on the CPU) reading and writing the device buffers directly, outside
every stream. simdev's kernels are asynchronous, so two hazards exist:

  RAW  AssignAdd reads the value a simdev kernel has not written yet.
  WAR  AssignSub updates the variable's buffer in place while a queued simdev
       kernel has yet to read it.

(With TF 2.16-2.18 simdev registers its own variable kernels, which do the
updates on the stream: the hazards below are then TF 2.19-2.21's.)

simdev avoids both by completing a kernel (TF's async `done`) only after its
stream item ran, and by holding its input and output tensors until then (see
src/kernels/framework/sk.h). Each scenario queues a backlog of large Relu ops first, so
the work under test is still queued when TF's host code runs.

The same scenarios run again with SIMDEV_UNSAFE_EARLY_COMPLETION=1, the naive
design (kernels report completion as soon as they are queued): there the
checks must find corrupted results, which proves they can fail. The naive
mode also runs each kernel as late as its stream allows (device_sim's
SIM_WORK_LAZY: only when something else is queued behind it or the stream
is synchronized), so TF's host code always runs before the kernel it races:
the naive design loses in every iteration, deterministically, instead of
whenever the backlog happens to be slow enough.
"""
import pytest

from conftest import simdev_variable_kernels

SCRIPT = r"""
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
N = 1 << 22
ITERS = 10

with tf.device("/device:SIMDEV:0"):
    big = tf.constant(np.random.default_rng(0).random(N, dtype=np.float32))
    x = tf.constant(np.full(1024, 3.0, np.float32))

    @check("raw_eager")
    def _():
        v = tf.Variable(np.zeros(1024, np.float32))
        bad = 0
        want = 0.0
        for it in range(ITERS):
            # A new value each time: a reused stale buffer must not hold
            # the answer by chance.
            xi = tf.constant(np.full(1024, it + 1.0, np.float32))
            backlog = [tf.nn.relu(big) for _ in range(20)]
            v.assign_add(tf.nn.relu(xi))  # host code reads relu's output
            want += it + 1.0
            if not np.all(v.numpy() == want):
                bad += 1
                v.assign(np.full(1024, want, np.float32))
        return {"bad": bad, "device": v.device}

    @check("raw_graph")
    def _():
        v = tf.Variable(np.zeros(N, np.float32))

        @tf.function
        def step(big):
            b = big
            for _ in range(20):   # a chain: each Relu waits for the last
                b = tf.nn.relu(b)
            v.assign_add(b)       # host code reads the end of the chain
            return b

        bad = 0
        want = np.zeros(N, np.float32)
        rng = np.random.default_rng(1)
        for it in range(ITERS):
            # A new input each time: a stale buffer must not hold the answer.
            host_in = rng.random(N, dtype=np.float32)
            step(tf.constant(host_in))
            want += host_in
            if not np.array_equal(v.numpy(), want):
                bad += 1
                v.assign(want)
        return {"bad": bad}

    @check("war_graph")
    def _():
        w = tf.Variable(np.full(1024, 50.0, np.float32))
        one = tf.constant(np.ones(1024, np.float32))

        @tf.function
        def step(big):
            backlog = [tf.nn.relu(big) for _ in range(20)]
            r = tf.nn.relu(w)    # reads the variable's buffer on the stream
            w.assign_sub(one)    # host code; in place if nobody holds it
            return r, backlog

        bad = 0
        for it in range(ITERS):
            r, _ = step(big)
            if not np.all(r.numpy() == 50.0 - it):
                bad += 1
        return {"bad": bad}

    @check("iters")
    def _():
        return {"n": ITERS}

    @check("usable_after")
    def _():
        return {"ok": bool(np.all(tf.nn.relu(x).numpy() == 3.0))}
"""

SCENARIOS = ["raw_eager", "raw_graph", "war_graph"]


@pytest.fixture(scope="module")
def safe(run_tf):
    return run_tf(SCRIPT)


@pytest.fixture(scope="module")
def naive(run_tf):
    return run_tf(SCRIPT, env={"SIMDEV_UNSAFE_EARLY_COMPLETION": "1"})


@pytest.fixture(scope="module")
def inline(run_tf):
    return run_tf(SCRIPT, env={"SIMDEV_INLINE": "1"})


@pytest.mark.parametrize("name", SCENARIOS)
def test_simdev_design_is_correct(safe, name):
    assert safe.data(name)["bad"] == 0


@pytest.mark.parametrize("name", SCENARIOS)
def test_inline_runs_keep_the_order(inline, name):
    """SIMDEV_INLINE=1 runs small kernels on TF's thread when the stream is
    idle: the same hazards must stay closed (done only after the
    arithmetic, stream order kept)."""
    assert inline.data(name)["bad"] == 0
    inline.assert_clean_exit()


def test_variable_lives_on_simdev(safe):
    assert safe.data("raw_eager")["device"].endswith("SIMDEV:0")


@pytest.mark.skipif(simdev_variable_kernels(), reason=(
    "this TensorFlow (2.16-2.18) exports kernels_experimental.h's functions: simdev's "
    "own variable kernels (src/kernels/variables/) replace TF's DEFAULT ones, so no host "
    "code races the queued kernels and there is nothing for the naive design to lose"))
@pytest.mark.parametrize("name", SCENARIOS)
def test_naive_design_is_caught(naive, name):
    """Under early completion the same check sees stale or updated data, in
    every iteration (the kernel never runs before the host code)."""
    assert naive.data(name)["bad"] == naive.data("iters")["n"]


def test_clean_exit(safe):
    assert safe.data("usable_after")["ok"]
    safe.assert_clean_exit()
