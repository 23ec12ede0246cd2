"""get_memory_info reflects real allocations; running out of device memory
is a Python exception, not a crash, and the process goes on working.

TF puts its BFC allocator on top of the plugin's allocate(); get_memory_info
reports BFC's bytes in use ('current') and its high-water mark ('peak').
BFC keeps the regions it got from the plugin, but 'current' drops when a
tensor is freed.

Out of memory surfaces two ways in TF 2.21, both checked:
  - a kernel on SIMDEV cannot allocate its output: ResourceExhaustedError
    ("OOM when allocating tensor ...");
  - TF's own host->device copy cannot allocate the destination: InternalError
    "Failed copying input tensor ... Dst tensor is not initialized" (TF's
    copy path, the same message users get from GPUs).
"""
import pytest

MIB = 1 << 20
DEVICE_MB = 64
N = 16 * MIB

# One child for everything (TF's import is the expensive part), on a device
# of DEVICE_MB MiB so that running out of memory is cheap.
SCRIPT = """
import gc
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
N = %(n)d
MIB = 1 << 20

def info():
    return dict(tf.config.experimental.get_memory_info("SIMDEV:0"))

def to_simdev(arr):
    with tf.device("/device:CPU:0"):
        x = tf.constant(arr)
    with tf.device("/device:SIMDEV:0"):
        y = tf.identity(x)
    assert y.device.endswith("/device:SIMDEV:0"), y.device
    return y

state = {}

@check("before")
def _():
    # Touch the device once so its allocator exists, then measure.
    to_simdev(np.zeros(16, np.float32))
    gc.collect()
    state["before"] = info()
    return state["before"]

@check("allocated")
def _():
    host = np.ones(N // 4, np.float32)
    state["t"] = to_simdev(host)
    del host
    gc.collect()
    return info()

@check("freed")
def _():
    del state["t"]
    gc.collect()
    return info()

@check("reset_peak")
def _():
    tf.config.experimental.reset_memory_stats("SIMDEV:0")
    return info()

# Out of memory, two ways, in two threads at once: BFC retries a failed
# allocation for 10 s before it gives up, and the waits overlap this way.
# 128 MiB cannot fit in a 64 MiB device.
import threading

def copy_oom():
    # TF's host->device copy allocates the destination itself.
    y = to_simdev(np.ones(128 * MIB // 4, np.float32))
    return {"device": y.device}  # reaching this is the failure

def kernel_oom():
    # A kernel on SIMDEV allocating its output: TemporaryVariable has a
    # DEVICE_DEFAULT kernel that allocates on the device.
    @tf.function
    def alloc():
        with tf.device("/device:SIMDEV:0"):
            v = tf.raw_ops.TemporaryVariable(shape=[128 * MIB // 4],
                                             dtype=tf.float32, var_name="oom")
            return tf.raw_ops.DestroyTemporaryVariable(ref=v, var_name="oom")
    y = alloc()
    return {"device": y.device}  # reaching this is the failure

threads = [threading.Thread(target=check(name), args=(fn,))
           for name, fn in (("copy-oom", copy_oom), ("kernel-oom", kernel_oom))]
for t in threads: t.start()
for t in threads: t.join()

@check("after-oom")
def _():
    gc.collect()
    a = np.arange(1000, dtype=np.float64)
    y = to_simdev(a)
    big = to_simdev(np.full(32 * MIB // 4, 3.0, np.float32))
    out = {"device": y.device, "big_ok": bool((big.numpy() == 3.0).all())}
    out.update(raw_equal(a, y.numpy()))
    del y, big
    gc.collect()
    out["info"] = info()
    return out
""" % {"n": N}


@pytest.fixture(scope="module")
def mem(run_tf):
    return run_tf(SCRIPT, env={"SIMDEV_MEMORY_MB": str(DEVICE_MB)})


def test_memory_info_keys(mem):
    d = mem.data("before")
    assert set(d) >= {"current", "peak"}, d
    assert 0 <= d["current"] <= d["peak"], d


def test_current_grows_by_tensor_size(mem):
    before, after = mem.data("before"), mem.data("allocated")
    assert after["current"] - before["current"] >= N, (before, after)


def test_peak_at_least_current(mem):
    after = mem.data("allocated")
    assert after["peak"] >= after["current"] >= N, after


def test_current_drops_after_delete(mem):
    after, freed = mem.data("allocated"), mem.data("freed")
    assert freed["current"] <= after["current"] - N, (after, freed)
    assert freed["peak"] >= after["current"], \
        f"peak must keep the high-water mark: {after}, {freed}"


def test_reset_peak(mem):
    freed, reset = mem.data("freed"), mem.data("reset_peak")
    assert reset["peak"] == reset["current"] == freed["current"], (freed, reset)


def test_copy_to_full_device_fails_cleanly(mem):
    """A host->device copy that cannot get memory: TF reports it as
    InternalError "Dst tensor is not initialized" (as for GPUs: the copy path
    does not produce ResourceExhausted); BFC must log that the allocation was
    refused."""
    err, msg = mem.error("copy-oom")
    assert err is not None, \
        f"128 MiB on a {DEVICE_MB} MiB device succeeded: {mem.data('copy-oom')}"
    assert err == "ResourceExhaustedError" or (
        err == "InternalError" and "Dst tensor is not initialized" in msg), \
        f"{err}: {msg}"
    refused = mem.stderr.count("ran out of memory trying to allocate 128.00MiB")
    assert refused >= 2, f"BFC logged {refused} refused 128 MiB allocations, " \
        f"expected one per attempt\n{mem.describe()}"


def test_kernel_allocation_raises_resource_exhausted(mem):
    err, msg = mem.error("kernel-oom")
    assert err is not None, \
        f"128 MiB on a {DEVICE_MB} MiB device succeeded: {mem.data('kernel-oom')}"
    assert err == "ResourceExhaustedError", f"{err}: {msg}"
    assert "OOM when allocating" in msg, msg


def test_process_works_after_oom(mem):
    d = mem.data("after-oom")
    assert d["device"].endswith("/device:SIMDEV:0"), d
    assert d["equal"], d
    assert d["big_ok"], f"a 32 MiB tensor no longer fits after the OOMs: {d}"
    mem.assert_clean_exit()


def test_failed_allocations_leak_nothing(mem):
    before, after = mem.data("before"), mem.data("after-oom")
    assert after["info"]["current"] == before["current"], (before, after)
