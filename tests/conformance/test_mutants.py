"""The conformance harness grades each mutant plugin exactly as intended.

Each plugin of tests/conformance/plugins/ (mini, the minimal correct plugin,
and mutants of it that each commit one anti-pattern of a real plugin) is run
through the harness with --json; the results must name the intended rule,
grade and callback, say something useful in "observed", give the intended
run result, and fail nothing else (no collateral failures). Everything the
harness's rule ids decide is in the tables below: adjust them there.

No TensorFlow import: the harness is a C program; it runs in a subprocess.
The harness is $SIMDEV_CONFORMANCE if set, else the build tree's.
"""

import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from harnessrun import PLUGINS, run_json

PER_TEST_TIMEOUT = 20  # --timeout, seconds per harness test


@dataclass(frozen=True)
class Fail:
    """A failure the harness must report."""

    rule: str
    grade: str  # "required" | "recommended"
    callback: str  # one of the callbacks the rule names ("a / b")
    observed: str  # regex, searched (case-insensitive) in "observed"
    test: str = ""  # substring of the reporting test's name ("" = any)


@dataclass(frozen=True)
class Case:
    plugin: str  # file name in PLUGINS
    result: str  # "pass" | "fail"
    fails: tuple = ()  # Fail entries that must all be reported
    # Rule ids that may also fail (at any grade): consequences of the same
    # anti-pattern in checks about something else. Anything not listed here
    # or in `fails` (or in MINI_RECOMMENDED) is a collateral failure.
    collateral: frozenset = frozenset()
    args: tuple = ()
    device_count: int = 1
    devices_tested: int = 1
    # Set: every test outside NON_DEVICE_TESTS is skipped with a reason
    # matching this regex.
    device_tests_skipped: str = ""
    # Set: no test outside NON_DEVICE_TESTS ran (skipped or not listed).
    device_tests_absent: bool = False
    # Otherwise the tests skipped are exactly MINI_SKIPPED and these.
    skipped: frozenset = frozenset()


# Recommended failures the correct plugin has (optional features it leaves
# out on purpose); every mutant may have them too.
MINI_RECOMMENDED = frozenset()

# Tests the correct plugin skips: features it leaves out on purpose.
MINI_SKIPPED = frozenset({"generic.unified_memory", "generic.timer"})

# Tests that do not need a device (registration, the harness's own checks,
# the kernel registrations: mini has no TF_InitKernel, so that one skips).
NON_DEVICE_TESTS = frozenset(
    {"registration", "harness.type_regex", "teardown", "kernels.registrations"})

# host_callback returning false: the tests that hold work at a gate with a
# host callback report host_callback.returns_true and nothing else.
CB_FALSE_COLLATERAL = frozenset()
# Callbacks that never run: host_callback.runs in generic.host_callback;
# the tests that hold work with host callbacks skip, saying why.
CB_NEVER_COLLATERAL = frozenset()
CB_NEVER_SKIPPED = frozenset({
    "generic.stream_dependency", "generic.events",
    "generic.host_callback_error", "generic.callback_enqueues",
    "generic.synchronize_all", "generic.ordering",
    "faults.callback_error",
})
# Events that lie: every test completing work through an event reports
# event.pending_until_work_done itself (events, memcpy_async, ordering,
# concurrent_streams), no other rule.
EVENTS_COLLATERAL = frozenset()



def tf_minor():
    """The minor release of the installed TF (the one the build tree's
    harness loads: CMake takes TF from this Python), read from its
    metadata without importing it; None if it has none."""
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return int(metadata.version(dist).split(".")[1])
        except metadata.PackageNotFoundError:
            pass
    return None


# kernels_experimental.h's functions: exported by libtensorflow_framework
# in TF 2.16-2.18, by no library of 2.19-2.21 (docs/kernel-api.md).
EXPERIMENTAL_EXPORTED = (tf_minor() or 21) <= 18

CASES = {
    "mini": Case("libconf_mini.so", "pass"),
    "mini_require_devices": Case(
        "libconf_mini.so", "pass", args=("--require-devices", "1")
    ),
    "cb_false": Case(
        "libconf_mutant_cb_false.so",
        "fail",
        fails=(
            Fail("host_callback.returns_true", "required", "host_callback",
                 r"false|returned 0"),
        ),
        collateral=CB_FALSE_COLLATERAL,
    ),
    "cb_never": Case(
        "libconf_mutant_cb_never.so",
        "fail",
        fails=(
            Fail("host_callback.runs", "required", "host_callback",
                 r"never|not run|did not run"),
        ),
        collateral=CB_NEVER_COLLATERAL,
        skipped=CB_NEVER_SKIPPED,
    ),
    "events_complete": Case(
        "libconf_mutant_events_complete.so",
        "fail",
        fails=(
            Fail("event.pending_until_work_done", "required",
                 "get_event_status", r"complete"),
        ),
        collateral=EVENTS_COLLATERAL,
    ),
    "memcpy_sync": Case(
        "libconf_mutant_memcpy_sync.so",
        "fail",
        fails=(
            Fail("memcpy.stream_order", "required", "memcpy_dtoh",
                 r"before|ahead"),
        ),
    ),
    "fake_stats": Case(
        "libconf_mutant_fake_stats.so",
        "pass",
        fails=(
            Fail("allocator_stats.tracks_allocations", "recommended",
                 "get_allocator_stats", r"123"),
        ),
    ),
    "no_stats": Case(
        "libconf_mutant_no_stats.so",
        "pass",
        fails=(
            Fail("allocator_stats.available", "recommended",
                 "get_allocator_stats", r"false"),
        ),
    ),
    "leak_stream": Case(
        "libconf_mutant_leak_stream.so",
        "pass",
        fails=(
            Fail("stream.destroy_releases", "recommended", "destroy_stream",
                 r"thread|leak"),
        ),
    ),
    "bad_name": Case(
        "libconf_mutant_bad_name.so",
        "fail",
        fails=(
            Fail("platform.name_valid", "required", "SP_Platform.name",
                 r"my-device"),
        ),
        device_count=None,
        devices_tested=0,
        device_tests_absent=True,
    ),
    "zero_devices": Case(
        "libconf_mutant_zero_devices.so",
        "pass",
        device_count=0,
        devices_tested=0,
        device_tests_skipped=r"\b0 devices?\b",
    ),
    "zero_devices_required": Case(
        "libconf_mutant_zero_devices.so",
        "fail",
        args=("--require-devices", "1"),
        fails=(
            Fail("devices.count_at_least", "required", "get_device_count",
                 r"\b0\b"),
        ),
        device_count=0,
        devices_tested=0,
        device_tests_skipped=r"\b0 devices?\b",
    ),
    "count_untouched": Case(
        "libconf_mutant_count_untouched.so",
        "pass",
        device_count=0,
        devices_tested=0,
        device_tests_skipped=r"\b0 devices?\b",
    ),
    "status_unset": Case(
        "libconf_mutant_status_unset.so",
        "pass",
        fails=(
            Fail("stream_status.reports_callback_error", "recommended",
                 "get_stream_status", r"\bOK\b"),
        ),
        # The same forgotten error, seen by the faults.* error-path test.
        collateral=frozenset({"faults.stream_error_sticky"}),
    ),
    "cb_drop_after_error": Case(
        "libconf_mutant_cb_drop_after_error.so",
        "fail",
        fails=(
            Fail("faults.callbacks_after_error_run", "required",
                 "host_callback", r"ran 0 times"),
        ),
    ),
    # The plugin's own failures (faults.plugin_errors): each mutant fails
    # one call of its own, deterministically (the Nth of the test's
    # process), and mishandles it; the filter keeps that one failure out
    # of the tests that need the call to work.
    "copy_dropped": Case(
        "libconf_mutant_copy_dropped.so",
        "fail",
        args=("--filter", "faults.plugin_errors"),
        fails=(
            Fail("faults.failed_copy_reported", "required", "memcpy_htod",
                 r"buffer 1 came back as the device's zeros.*no status",
                 test="faults.plugin_errors"),
        ),
    ),
    "alloc_size_kept": Case(
        "libconf_mutant_alloc_size_kept.so",
        "fail",
        args=("--filter", "faults.plugin_errors"),
        fails=(
            Fail("faults.failed_allocate_is_null", "required", "allocate",
                 r"opaque NULL with size 4096", test="faults.plugin_errors"),
        ),
    ),
    # The harness's own failing host callback (faults.callback_error, whole
    # run): the events recorded behind it never resolve.
    "event_pending_after_error": Case(
        "libconf_mutant_event_pending_after_error.so",
        "fail",
        fails=(
            Fail("faults.events_resolve", "required", "get_event_status",
                 r"SE_EVENT_PENDING", test="faults.callback_error"),
        ),
    ),
    # TF_AssignVariable (kernels_experimental.h): declared by TF 2.21's
    # headers, exported by none of its libraries. Read from the file before
    # dlopen, which then fails: a verdict (exit 1, JSON), not a set-up
    # error. Against 2.16-2.18 it is mini plus a function TF exports.
    "unexported_import": Case(
        "libconf_mutant_unexported_import.so", "pass"
    ) if EXPERIMENTAL_EXPORTED else Case(
        "libconf_mutant_unexported_import.so",
        "fail",
        fails=(
            Fail("registration.imports", "required", "dlopen",
                 r"lack 1 of the \d+ TF symbols it imports: "
                 r"TF_AssignVariable;.*kernels_experimental\.h.*2\.19-2\.21",
                 test="registration"),
        ),
        device_count=None,
        devices_tested=0,
        device_tests_absent=True,
    ),
    "many_devices": Case(
        "libconf_mutant_many_devices.so",
        "pass",
        device_count=20,
        devices_tested=20,
    ),
}


def run_harness(case, tmp_path):
    """Runs the harness on case's plugin; returns (exit code, JSON, output)."""
    proc, doc = run_json(list(case.args), PLUGINS / case.plugin, tmp_path,
                         PER_TEST_TIMEOUT)
    return proc.returncode, doc, proc.stdout + proc.stderr


def describe(f):
    return (f"{f.get('test')}: {f.get('rule')} ({f.get('grade')}, "
            f"{f.get('callback')}): {f.get('observed')}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_grading(name, tmp_path):
    case = CASES[name]
    rc, res, text = run_harness(case, tmp_path)
    failures = res["failures"]
    report = "\n".join(describe(f) for f in failures) or "(no failures)"
    context = f"{name}: harness output:\n{text}\nfailures:\n{report}"

    assert res["schema"] == 1
    assert Path(res["plugin"]).name == case.plugin
    assert res["result"] == case.result, context
    assert rc == (0 if case.result == "pass" else 1), context
    summary = res["summary"]
    assert (summary["required"]["failed"] > 0) == (case.result == "fail")
    assert summary["simdev"] == {"passed": 0, "failed": 0}  # no --simdev
    assert res["device_count"] == case.device_count, context
    assert res["devices_tested"] == case.devices_tested, context
    if case.device_count is not None:
        assert res["platform"] == {"name": "MINI", "type": "MINI"}

    # Every failure tells the plugin author what, who and where.
    for f in failures:
        for key in ("test", "rule", "grade", "callback", "expected",
                    "observed", "where"):
            assert isinstance(f.get(key), str) and f[key], (key, f)
        assert f["grade"] in ("required", "recommended"), f
        assert f["count"] >= 1, f

    # The intended failures, each with its grade, callback and message.
    for want in case.fails:
        match = [f for f in failures
                 if f["rule"] == want.rule and want.test in f["test"]]
        assert match, f"{name}: rule {want.rule} not reported\n{context}"
        for f in match:
            assert f["grade"] == want.grade, describe(f)
            assert want.callback in f["callback"].split(" / "), describe(f)
            assert re.search(want.observed, f["observed"], re.I), describe(f)

    # Nothing else: no collateral failure at either grade.
    allowed = {w.rule for w in case.fails} | case.collateral
    extra_required = sorted({f["rule"] for f in failures
                             if f["grade"] == "required"} - allowed)
    assert not extra_required, (
        f"{name}: collateral: {extra_required}\n{context}")
    extra_recommended = sorted({f["rule"] for f in failures
                                if f["grade"] == "recommended"}
                               - allowed - MINI_RECOMMENDED)
    assert not extra_recommended, (
        f"{name}: collateral: {extra_recommended}\n{context}")

    # Crashes and hangs are failures of their own ("<test>.finishes").
    for t in res["tests"]:
        if t["status"] in ("crash", "timeout"):
            assert f"{t['name']}.finishes" in allowed, (t, context)

    for t in res["tests"]:
        if t["name"] == "kernels.registrations":
            assert t["status"] == "skip", t
            assert "TF_InitKernel" in t.get("reason", ""), t

    statuses = ("pass", "warn", "fail", "skip", "crash", "timeout")
    assert all(t["status"] in statuses for t in res["tests"]), res["tests"]
    device_tests = [t for t in res["tests"]
                    if t["name"] not in NON_DEVICE_TESTS]
    if case.device_tests_skipped:
        assert device_tests, context
        for t in device_tests:
            assert t["status"] == "skip", t
            assert re.search(case.device_tests_skipped, t.get("reason", "")), t
    elif case.device_tests_absent:
        assert all(t["status"] == "skip" for t in device_tests), context
    else:
        skipped = {t["name"] for t in device_tests if t["status"] == "skip"}
        expect = MINI_SKIPPED | case.skipped
        if "--filter" in case.args:  # only the selected tests are listed
            filters = [a for k, a in zip(case.args, case.args[1:])
                       if k == "--filter"]
            assert all(any(f in t["name"] for f in filters)
                       for t in device_tests), context
            expect = {t for t in expect if any(f in t for f in filters)}
        assert skipped == expect, context
        assert len(device_tests) > len(skipped), context
