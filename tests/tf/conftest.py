"""Helpers for simdev's TensorFlow-level tests.

TensorFlow aborts the process when a plugin is loaded twice or when
SE_InitPlugin fails, so no test imports TensorFlow in the pytest process:
every piece of TF code runs in a fresh `python -c` subprocess (`run_tf`).

A snippet reports through `check(name)`: a decorator that runs the function at
once and prints one JSON line with its return value or its exception. Lines
are flushed one by one, so the checks that ran before a crash still report.
One subprocess can serve many tests (import costs seconds), and each test
asserts on its own check, so each fails on its own with a clear message.

Which plugin is tested
  SIMDEV_TEST_PLUGIN=/path/libsimdev.so  that file, passed to the child as
                                         TF_PLUGGABLE_DEVICE_LIBRARY_PATH
  unset                                  the plugin installed in this
                                         interpreter's
                                         site-packages/tensorflow-plugins/
"""
import dataclasses
import glob
import json
import os
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import textwrap

import pytest

CHECK_MARK = "@@SIMDEV_CHECK@@ "

# Prepended to every snippet. Names without a leading underscore are meant
# for snippets: check, raw_equal, versus_cpu, error_class.
PRELUDE = r'''
import json as _json, sys as _sys, threading as _threading
import traceback as _traceback

_out_lock = _threading.Lock()  # checks may report from several threads

def _write(rec):
    with _out_lock:
        _sys.stdout.write(%(mark)r + _json.dumps(rec, default=repr) + "\n")
        _sys.stdout.flush()

def check(name):
    """Decorator: runs fn() now and reports its dict (or its exception)."""
    def run(fn):
        try:
            data = fn()
        except Exception as e:
            rec = {"name": name, "ok": False, "error": type(e).__name__,
                   "message": str(e)[-3000:],
                   "traceback": _traceback.format_exc()[-6000:]}
        else:
            rec = {"name": name, "ok": True, "data": {} if data is None else data}
        _write(rec)
        return fn
    return run

def raw_equal(a, b):
    """Bit-exact comparison of two numpy arrays: dtype, shape and bytes.
    Returns a dict for the report (first differing byte, if any)."""
    import numpy as _np
    a = _np.ascontiguousarray(a); b = _np.ascontiguousarray(b)
    out = {"dtype_a": str(a.dtype), "dtype_b": str(b.dtype),
           "shape_a": list(a.shape), "shape_b": list(b.shape)}
    same = a.dtype == b.dtype and a.shape == b.shape
    if same and a.nbytes:
        ab = a.reshape(-1).view(_np.uint8); bb = b.reshape(-1).view(_np.uint8)
        diff = _np.flatnonzero(ab != bb)
        if diff.size:
            i = int(diff[0])
            out.update(first_diff_byte=i, differing_bytes=int(diff.size),
                       byte_a=int(ab[i]), byte_b=int(bb[i]))
            same = False
    out["equal"] = bool(same)
    return out

def versus_cpu(fn, *args, rtol=1e-5, atol=1e-6, **kw):
    """Runs fn(*args, **kw) on /device:SIMDEV:0 and on /device:CPU:0 with soft
    placement off (so a missing SIMDEV kernel raises instead of falling back)
    and compares. args are NumPy arrays or Python values; NumPy arrays become
    tensors on the device first. Returns a dict for the report: devices of the
    outputs, max abs error, and `close` (np.allclose with rtol/atol, NaNs
    equal, dtypes and shapes equal). fn may return a tensor or a tuple."""
    import numpy as _np
    import tensorflow as _tf
    _tf.config.set_soft_device_placement(False)
    outs = {}
    for dev in ("/device:SIMDEV:0", "/device:CPU:0"):
        with _tf.device(dev):
            targs = [_tf.constant(a) if isinstance(a, _np.ndarray) else a
                     for a in args]
            r = fn(*targs, **kw)
        outs[dev] = r if isinstance(r, (tuple, list)) else (r,)
    rep = {"devices": [t.device for t in outs["/device:SIMDEV:0"]],
           "close": True, "max_abs_err": 0.0, "shapes": []}
    for a, b in zip(outs["/device:SIMDEV:0"], outs["/device:CPU:0"]):
        a = a.numpy(); b = b.numpy()
        rep["shapes"].append(list(a.shape))
        if a.dtype != b.dtype or a.shape != b.shape:
            rep["close"] = False
            rep["mismatch"] = f"{a.dtype}{a.shape} vs {b.dtype}{b.shape}"
            continue
        if a.size:
            af = a.astype(_np.float64) if a.dtype != bool else a
            bf = b.astype(_np.float64) if b.dtype != bool else b
            if a.dtype != bool:
                err = _np.abs(af - bf)
                err = err[~(_np.isnan(af) & _np.isnan(bf))]
                if err.size:
                    rep["max_abs_err"] = max(rep["max_abs_err"], float(_np.nanmax(err)))
            if not _np.allclose(af, bf, rtol=rtol, atol=atol, equal_nan=True):
                rep["close"] = False
    rep["on_simdev"] = all("SIMDEV:0" in d for d in rep["devices"])
    return rep

def error_class(fn, *args, device, **kw):
    """Runs fn on `device` (soft placement off); returns the exception class
    name it raised ("" if none) and the message."""
    import numpy as _np
    import tensorflow as _tf
    _tf.config.set_soft_device_placement(False)
    try:
        with _tf.device(device):
            targs = [_tf.constant(a) if isinstance(a, _np.ndarray) else a
                     for a in args]
            r = fn(*targs, **kw)
            r = r if isinstance(r, (tuple, list)) else (r,)
            for t in r:
                t.numpy()
    except Exception as e:  # the class is what the test compares
        return type(e).__name__, str(e)[:500]
    return "", ""
''' % {"mark": CHECK_MARK}


def _site_dirs():
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.USER_SITE:
        dirs.append(site.USER_SITE)
    for scheme in sysconfig.get_scheme_names():
        for key in ("purelib", "platlib"):
            try:
                dirs.append(sysconfig.get_path(key, scheme))
            except KeyError:
                pass
    return sorted({d for d in dirs if d})


def installed_plugins():
    """libsimdev*.so files TF would load from tensorflow-plugins/ dirs."""
    found = []
    for d in _site_dirs():
        found += glob.glob(os.path.join(d, "tensorflow-plugins", "libsimdev*.so"))
    return sorted({os.path.realpath(p) for p in found})


def assert_error_like_cpu(d):
    """For a check that ran one bad input on SIMDEV and on CPU and then a good
    op on SIMDEV: {"sim": (class, msg), "cpu": (class, msg), "after":
    versus_cpu report}. Same exception class as CPU, raised by SIMDEV, and
    the device still works afterwards."""
    sim_cls, sim_msg = d["sim"]
    cpu_cls, cpu_msg = d["cpu"]
    assert cpu_cls, f"CPU accepted the bad input: {d}"
    assert sim_cls == cpu_cls, f"SIMDEV raised {sim_cls!r} ({sim_msg}), " \
                               f"CPU {cpu_cls!r} ({cpu_msg})"
    assert "SIMDEV" in sim_msg, f"error did not come from SIMDEV: {sim_msg}"
    assert d["after"]["on_simdev"] and d["after"]["close"], d["after"]


@dataclasses.dataclass
class Plugin:
    path: str    # the library under test
    source: str  # how it was found, for messages
    env: dict    # variables the child needs to load it


@pytest.fixture(scope="session")
def plugin():
    """The plugin under test; fails every TF test clearly if there is none."""
    override = os.environ.get("SIMDEV_TEST_PLUGIN")
    installed = installed_plugins()
    if override:
        path = os.path.realpath(override)
        if not os.path.isfile(path):
            pytest.fail(f"SIMDEV_TEST_PLUGIN={override!r} is not a file",
                        pytrace=False)
        if installed:
            # TF would load both and abort on the duplicate platform name.
            pytest.fail(f"SIMDEV_TEST_PLUGIN is set but a simdev plugin is "
                        f"also installed ({installed}); TF would load it twice "
                        f"and abort. Uninstall it or unset SIMDEV_TEST_PLUGIN.",
                        pytrace=False)
        return Plugin(path, "SIMDEV_TEST_PLUGIN",
                      {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": path})
    if not installed:
        pytest.fail(f"no simdev plugin installed for {sys.executable} "
                    f"(no tensorflow-plugins/libsimdev*.so in {_site_dirs()}); "
                    f"run `pip install .` or set SIMDEV_TEST_PLUGIN",
                    pytrace=False)
    if len(installed) > 1:
        pytest.fail(f"several simdev plugins installed: {installed}",
                    pytrace=False)
    return Plugin(installed[0], "installed", {})


@dataclasses.dataclass
class TFRun:
    returncode: int
    stdout: str
    stderr: str
    checks: dict

    def describe(self, lines=40):
        rc = self.returncode
        how = f"returncode {rc}"
        if rc is not None and rc < 0:
            try:
                how += f" ({signal.Signals(-rc).name})"
            except ValueError:
                pass
        err = "\n".join(self.stderr.splitlines()[-lines:])
        out = "\n".join(l for l in self.stdout.splitlines()[-lines:]
                        if not l.startswith(CHECK_MARK))
        return f"subprocess {how}\n--- stderr (tail) ---\n{err}\n" \
               f"--- stdout (tail) ---\n{out}"

    def assert_clean_exit(self):
        """The child ended normally: no crash at teardown (device and stream
        destruction run when TF shuts down)."""
        assert self.returncode == 0, self.describe()

    def data(self, name):
        """The dict check `name` returned; fails the test if it raised or
        never reported (the subprocess died before it)."""
        rec = self.checks.get(name)
        if rec is None:
            pytest.fail(f"check {name!r} did not report\n{self.describe()}",
                        pytrace=False)
        if not rec["ok"]:
            pytest.fail(f"check {name!r} raised {rec['error']}: "
                        f"{rec['message']}\n{rec['traceback']}", pytrace=False)
        return rec["data"]

    def error(self, name):
        """(error type, message) of a check that is expected to raise."""
        rec = self.checks.get(name)
        if rec is None:
            pytest.fail(f"check {name!r} did not report\n{self.describe()}",
                        pytrace=False)
        if rec["ok"]:
            return None, None
        return rec["error"], rec["message"]


def child_env(plugin, extra=None):
    env = dict(os.environ)
    # Only the variables a test sets reach the child: a developer's own
    # SIMDEV_* or plugin path must not change what is tested.
    for k in list(env):
        if k.startswith("SIMDEV_") or k == "TF_PLUGGABLE_DEVICE_LIBRARY_PATH":
            del env[k]
    env["PYTHONUNBUFFERED"] = "1"
    env.update(plugin.env)
    env.update(extra or {})
    return env


@pytest.fixture(scope="session")
def run_tf(plugin, tmp_path_factory):
    """run_tf(snippet, env=None, timeout=180) -> TFRun.

    Runs PRELUDE + snippet with `sys.executable -c` in a fresh process, with
    the plugin under test and `env` added to the environment."""
    cwd = tmp_path_factory.mktemp("tfchild")

    def run(snippet, env=None, timeout=180):
        code = PRELUDE + "\n" + textwrap.dedent(snippet)
        try:
            p = subprocess.run([sys.executable, "-c", code], cwd=cwd,
                               env=child_env(plugin, env), timeout=timeout,
                               capture_output=True, text=True, errors="replace")
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"TF subprocess timed out after {timeout}s\n"
                        f"stderr: {(e.stderr or b'')[-3000:]!r}", pytrace=False)
        checks = {}
        for line in p.stdout.splitlines():
            if line.startswith(CHECK_MARK):
                rec = json.loads(line[len(CHECK_MARK):])
                checks[rec["name"]] = rec
        return TFRun(p.returncode, p.stdout, p.stderr, checks)

    return run
