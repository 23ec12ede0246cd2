"""Bad SIMDEV_* settings: SE_InitPlugin returns an error naming the variable
and TensorFlow aborts the import (its TF_CHECK_OK on plugin registration).

The child must die by SIGABRT from TF's check failure, with the variable in
the check's message: a SIGSEGV, or an abort without that message, would mean
simdev crashed instead of reporting the error.
"""
import concurrent.futures
import signal

import pytest

BAD = [
    ("SIMDEV_MEMORY_MB", "abc"),
    ("SIMDEV_MEMORY_MB", "0"),
    ("SIMDEV_DEVICE_COUNT", "0"),
    ("SIMDEV_DEVICE_COUNT", "x"),
    ("SIMDEV_DEVICE_COUNT", "17"),  # above the maximum of 16
    ("SIMDEV_SYNC", "yes"),
    ("SIMDEV_INLINE", "2"),
    ("SIMDEV_UNSAFE_EARLY_COMPLETION", "2"),
    ("SIMDEV_TRACE_EVENTS", "1023"),  # below the minimum of 1024
    ("SIMDEV_TRACE_EVENTS", "64k"),
    ("SIMDEV_TRACE", ""),  # set but empty: no path
]

IMPORT = """
import tensorflow as tf
print("IMPORTED", flush=True)
"""

VALID = """
import tensorflow as tf
@check("devices")
def _():
    return {"names": [d.name for d in tf.config.list_physical_devices("SIMDEV")]}
"""


@pytest.fixture(scope="module")
def runs(run_tf):
    """All children at once: each is mostly TF's import time."""
    jobs = {f"{k}={v}": (IMPORT, {k: v}) for k, v in BAD}
    jobs["valid"] = (VALID, {"SIMDEV_DEVICE_COUNT": "3", "SIMDEV_MEMORY_MB": "64"})
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
        futs = {name: ex.submit(run_tf, code, env) for name, (code, env) in jobs.items()}
        return {name: f.result() for name, f in futs.items()}


@pytest.mark.parametrize("var,value", BAD, ids=[f"{k}={v}" for k, v in BAD])
def test_bad_setting_aborts_import(runs, var, value):
    r = runs[f"{var}={value}"]
    assert "IMPORTED" not in r.stdout, \
        f"import tensorflow succeeded with {var}={value!r}\n{r.describe()}"
    assert r.returncode == -signal.SIGABRT, \
        f"expected TF's abort (SIGABRT) on the failed plugin init\n{r.describe()}"
    fatal = [l for l in r.stderr.splitlines() if "Check failed" in l]
    assert fatal, f"no TF check failure in stderr\n{r.describe()}"
    assert any(var in l for l in fatal), \
        f"TF's check failure does not name {var}: {fatal}"
    assert any(f'"{value}"' in l or f"'{value}'" in l or f"={value}" in l
               for l in fatal), f"TF's check failure does not quote {value!r}: {fatal}"
    assert "RegisterPluggableDevicePlugin" in "\n".join(fatal), fatal
    for crash in ("SIGSEGV", "Segmentation fault", "SIGBUS"):
        assert crash not in r.stderr, r.describe()


def test_valid_settings(runs):
    r = runs["valid"]
    assert r.data("devices")["names"] == [
        f"/physical_device:SIMDEV:{i}" for i in range(3)]
    r.assert_clean_exit()
