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

Children never inherit SIMDEV_* from the developer's environment (a stray
setting must not change what is tested). The one way to pass the plugin's
test-only switch SIMDEV_TEST_OMIT_KERNELS is explicit, on pytest's command
line:  pytest --simdev-omit-kernels=MatMul,Conv2D ...  then every TF child
gets SIMDEV_TEST_OMIT_KERNELS=MatMul,Conv2D and the plugin leaves those ops
unregistered. test_kernel_coverage.py and kernel_mutation.py use it to
prove that tests need each kernel; tests marked `registry` only read TF's
kernel registry and are left out of that proof.
Likewise `pytest --simdev-discrete` runs every TF child with
SIMDEV_DISCRETE=1 (device memory that host code cannot touch): the suite
in discrete mode (docs/debugging.md, "Discrete memory").

Kernel tests check SIMDEV against an independent reference (NumPy, in
float64 or better) within an error bound derived from the dtype and the
length of each reduction, and TF's CPU kernel against the same reference
(assert_vs_ref, assert_sweep). TF's CPU kernels are sometimes wrong; the
cases where they are, on some machines, are listed in each module's
TF_CPU_DIVERGENCES and in docs/tf-cpu-divergences.md: there TF CPU may
disagree (a warning says so) while SIMDEV is still held to the reference.

Error tests prove the error came from the op's SIMDEV kernel, by its
message (assert_kernel_error): a missing kernel raises the same
InvalidArgumentError class as a bad shape, so the class alone proves
nothing.
"""
import dataclasses
import glob
import itertools
import json
import os
import re
import shlex
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import warnings

import pytest

CHECK_MARK = "@@SIMDEV_CHECK@@ "

# Prepended to every snippet. Names without a leading underscore are meant
# for snippets: check, raw_equal, versus_cpu, error_class, error_pair,
# versus_ref and its bounds (unit_roundoff, gamma, tiny, sum_bound,
# LIBM_ULPS, compare_to_ref), guarded, after_ok, sweep_report.
PRELUDE = r'''
import json as _json, sys as _sys, threading as _threading
import traceback as _traceback

# tests/tf's child-side modules (childlib, convref, layercheck) import by
# name; appended, so they shadow nothing the child would import otherwise.
_sys.path.append(%(here)r)

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
    # not ascontiguousarray: it makes a 0-d array 1-d, and () must not
    # compare equal to (1,)
    a = _np.array(a, order="C", copy=None)
    b = _np.array(b, order="C", copy=None)
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
    except Exception as e:  # assert_kernel_error reads class and message
        return type(e).__name__, str(e)[:2000]
    return "", ""

def error_pair(fn, *args, **kw):
    """fn(*args, **kw) with a bad input on SIMDEV and on CPU (soft placement
    off): {"sim": [class, message], "cpu": [class, message]} for
    assert_error_like_cpu."""
    return {"sim": list(error_class(fn, *args, device="/device:SIMDEV:0", **kw)),
            "cpu": list(error_class(fn, *args, device="/device:CPU:0", **kw))}

# ---- independent references and their error bounds -------------------------
# A reference is computed with NumPy in float64 (or long double), never by
# TF. A kernel's result passes when |got - ref| <= bound elementwise, where
# the bound is a rounding-error bound (Higham, "Accuracy and Stability of
# Numerical Algorithms") in units of the dtype's unit roundoff u:
#   - one correctly rounded operation:            u * |ref|
#   - a sum of n terms, in any order, any
#     blocking, with or without FMA:              gamma(n) * sum |term|
#     (gamma(n) = n u / (1 - n u)); for a product of n factors
#     gamma(n) * |ref|. So the bound does not depend on which OpenBLAS
#     kernels (Haswell, SkylakeX...) or whether oneDNN ran.
#   - a library exp/log/tanh/pow/logistic:        LIBM_ULPS ulps, i.e.
#                                                 2 * LIBM_ULPS * u * |ref|
#     (one ulp of x is at most 2 u |x|)
# plus the reference's own rounding error (the same terms with float64's u)
# and tiny(dtype) for results in the subnormal range (TF's CPU threads
# flush subnormals to zero).

UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8,
                 "float32": 2.0 ** -24, "float64": 2.0 ** -53}
# Accuracy assumed of a math library's exp, log, tanh, pow, logistic, in
# ulps of the result. The worst documented: Eigen's float logistic (TF's CPU
# Sigmoid), 4.5 ulps against S(x) computed in double (its comment in
# Eigen/src/Core/functors/UnaryFunctors.h, shipped in TF's wheel); Eigen's
# pow 3 ulps, tanh "a couple of ulps"; glibc documents <= 2 ulps for these.
# 8 covers them and composites like 1 / (1 + exp(-x)) on SIMDEV, while a
# wrong formula is off by far more.
LIBM_ULPS = 8

def dtype_name(dt):
    import numpy as _np
    if hasattr(dt, "name") and not isinstance(dt, _np.dtype):
        return dt.name
    return _np.dtype(dt).name

def unit_roundoff(dt):
    return UNIT_ROUNDOFF[dtype_name(dt)]

def gamma(n, dt):
    """Higham's gamma_n for dtype dt: bounds the relative error of n
    roundings (a sum of n + 1 terms in any order)."""
    nu = max(n, 0) * unit_roundoff(dt)
    assert nu < 0.5, f"gamma({n}) is meaningless for {dt}"
    return nu / (1 - nu)

def tiny(dt):
    import numpy as _np
    return float(_np.finfo(dtype_name(dt)).tiny)

def sum_bound(abs_sum, n, dt, acc=None, ref_dt="float64"):
    """Bound for a sum of n terms whose absolute values sum to abs_sum
    (array), computed by the kernel in accumulator dtype `acc` (default dt)
    in any order and rounded to dt, against a reference summed in ref_dt."""
    import numpy as _np
    acc = acc or dt
    b = gamma(n, acc) * abs_sum + gamma(n, ref_dt) * abs_sum
    if acc != dt:
        b = b + unit_roundoff(dt) * abs_sum  # the final rounding to dt
    return b + 4 * tiny(dt)

def compare_to_ref(got, ref, bound):
    """got (the device's result) against ref within bound (array or
    scalar). NaN where ref is NaN, the same infinities; shape must match.
    Returns {"ok", "ratio": max |got - ref| / bound, "max_abs_err",
    "worst": index and values of the worst element}."""
    import numpy as _np
    got = _np.asarray(got)
    ref = _np.asarray(ref)
    out = {"ok": True, "ratio": 0.0, "max_abs_err": 0.0}
    if got.shape != ref.shape:
        return {"ok": False, "ratio": float("inf"),
                "mismatch": f"shape {list(got.shape)} vs reference {list(ref.shape)}"}
    if not got.size:
        return out
    if got.dtype.kind in "iub" and ref.dtype.kind in "iub":
        # integers and booleans: exactly equal (bound ignored)
        diff = _np.flatnonzero((got.astype(_np.int64) != ref.astype(_np.int64)).reshape(-1))
        if diff.size:
            i = int(diff[0])
            return {"ok": False, "ratio": float("inf"),
                    "mismatch": f"{diff.size} elements differ, first at flat index {i}: "
                                f"got {got.reshape(-1)[i]!r}, reference {ref.reshape(-1)[i]!r}"}
        return out
    # long double when the reference is (float64 kernels), else float64
    # (exact for float32 and smaller results)
    work = _np.longdouble if ref.dtype == _np.longdouble else _np.float64
    g = got.astype(work)
    r = ref.astype(work)
    gn, rn = _np.isnan(g), _np.isnan(r)
    if (gn != rn).any():
        i = int(_np.flatnonzero((gn != rn).reshape(-1))[0])
        return {"ok": False, "ratio": float("inf"),
                "mismatch": f"NaN at flat index {i}: got {g.reshape(-1)[i]!r}, "
                            f"reference {r.reshape(-1)[i]!r}"}
    gi, ri = _np.isinf(g), _np.isinf(r)
    if (gi != ri).any() or (g[gi] != r[ri]).any():
        return {"ok": False, "ratio": float("inf"), "mismatch": "infinities differ"}
    fin = ~(gn | gi)
    err = _np.zeros(g.shape, work)
    err[fin] = _np.abs(g[fin] - r[fin])
    b = _np.broadcast_to(_np.asarray(bound, work), g.shape)
    with _np.errstate(divide="ignore", invalid="ignore"):
        ratio = _np.where(err == 0, 0, err / b)
    k = int(_np.argmax(ratio.reshape(-1)))
    out["ratio"] = float(ratio.reshape(-1)[k])
    out["max_abs_err"] = float(err.max())
    out["ok"] = bool(out["ratio"] <= 1)
    idx = _np.unravel_index(k, g.shape) if g.ndim else ()
    out["worst"] = {"index": [int(i) for i in idx], "got": float(g.reshape(-1)[k]),
                    "ref": float(r.reshape(-1)[k]), "bound": float(b.reshape(-1)[k])}
    return out

def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)

def versus_ref(fn, *args, ref, bound, cpu_bound=None, cpu=True, dtype=None,
               cpu_fn=None, **kw):
    """fn(*args, **kw) on /device:SIMDEV:0 and on /device:CPU:0 (soft
    placement off), each output compared with the independent reference
    `ref` (array or tuple of arrays) within `bound` (SIMDEV) and `cpu_bound`
    (TF CPU; default: bound). `dtype`: the dtype every output must have
    (default: that of the first NumPy argument). cpu=False skips TF CPU
    (inputs that abort its process); cpu_fn replaces fn on CPU (an
    equivalent computation, where TF CPU lacks the op's variant). A CPU
    exception is a CPU disagreement, not an error of the check. Returns {"devices", "on_simdev", "sim_ok",
    "sim", "cpu_ok", "cpu"} for assert_vs_ref."""
    import numpy as _np
    import tensorflow as _tf
    _tf.config.set_soft_device_placement(False)
    refs = _as_tuple(ref)
    bounds = _as_tuple(bound) if isinstance(bound, (tuple, list)) else (bound,) * len(refs)
    cb = bounds if cpu_bound is None else (
        _as_tuple(cpu_bound) if isinstance(cpu_bound, (tuple, list)) else (cpu_bound,) * len(refs))

    def run(dev, f=fn):
        with _tf.device(dev):
            targs = [_tf.constant(a) if isinstance(a, _np.ndarray) else a for a in args]
            return _as_tuple(f(*targs, **kw))

    want = dtype or next((a.dtype for a in args if isinstance(a, _np.ndarray)), None)

    def judge(outs, bnds):
        reps = []
        for t, r, b in zip(outs, refs, bnds):
            a = t.numpy()
            rep = compare_to_ref(a, r, b)
            if want is not None and a.dtype != _np.dtype(want):
                rep.update(ok=False, mismatch=f"dtype {a.dtype}, want {_np.dtype(want)}")
            reps.append(rep)
        if len(outs) != len(refs):
            reps.append({"ok": False, "mismatch": f"{len(outs)} outputs, {len(refs)} references"})
        return reps

    sim = run("/device:SIMDEV:0")
    out = {"devices": [t.device for t in sim]}
    out["on_simdev"] = all("SIMDEV:0" in d for d in out["devices"])
    out["sim"] = judge(sim, bounds)
    out["sim_ok"] = all(r["ok"] for r in out["sim"])
    out["cpu_ok"] = True
    if cpu:
        try:
            c = run("/device:CPU:0", cpu_fn or fn)
        except Exception as e:
            out["cpu_ok"] = False
            out["cpu"] = [{"ok": False, "raised": f"{type(e).__name__}: {str(e)[:300]}"}]
        else:
            out["cpu"] = judge(c, cb)
            out["cpu_ok"] = all(r["ok"] for r in out["cpu"])
    return out

def guarded(thunk):
    """thunk() (a versus_ref report), or a failed report that carries the
    exception: in a sweep, one case's error does not hide the others'."""
    try:
        return thunk()
    except Exception as e:
        return {"devices": [], "on_simdev": True, "sim_ok": False, "cpu_ok": True,
                "sim": [{"ok": False, "raised": f"{type(e).__name__}: {str(e)[:600]}"}]}

def after_ok(thunk):
    """For error checks: True if thunk() (a good op on SIMDEV) returned a
    true value, else what went wrong (never raises, so that the error's own
    report survives)."""
    try:
        return True if thunk() else "the good op gave a wrong result"
    except Exception as e:
        return f"the good op raised {type(e).__name__}: {str(e)[:600]}"

def sweep_report(reports):
    """{case: versus_ref report} -> {"cases", "sim_bad", "cpu_bad",
    "not_on_simdev", "max_ratio"} for assert_sweep (only the failing cases,
    by name; max_ratio: the largest error / bound seen, for SIMDEV and CPU)."""
    out = {"cases": len(reports), "sim_bad": {}, "cpu_bad": {}, "not_on_simdev": {},
           "max_ratio": {"sim": 0.0, "cpu": 0.0}}
    for case, rep in reports.items():
        for who in ("sim", "cpu"):
            for r in rep.get(who, []):
                out["max_ratio"][who] = max(out["max_ratio"][who], r.get("ratio", 0.0))
        if not rep["on_simdev"]:
            out["not_on_simdev"][case] = rep["devices"]
        if not rep["sim_ok"]:
            out["sim_bad"][case] = rep["sim"]
        if not rep["cpu_ok"]:
            out["cpu_bad"][case] = rep["cpu"]
    return out
''' % {"mark": CHECK_MARK, "here": os.path.dirname(os.path.abspath(__file__))}


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


# Texts of TF's placement and registration errors: an error test that gets
# one of these proves only that the kernel is missing.
PLACEMENT_ERRORS = ("Could not satisfy", "No registered", "no supported kernel",
                    "Could not find device for node", "Cannot assign a device",
                    "not registered")

SIMDEV_NODE = "_device_/job:localhost/replica:0/task:0/device:SIMDEV:0"


def assert_kernel_error(sim, op, key, cls=None):
    """sim = (class, message) of an exception raised by an eager op `op` on
    SIMDEV. Passes only if the error came from that op's SIMDEV kernel:
    an exception of class `cls` (any if None), no placement or registration
    error, TF's marker for op `op` executed on SIMDEV in the message
    ("{{function_node __wrapped__<op>_device_/.../device:SIMDEV:0}}"; TF
    adds it to errors raised while the op runs, never to placement
    errors), and the kernel's own text `key` in it."""
    sim_cls, msg = sim[0], sim[1] or ""
    assert sim_cls, f"SIMDEV accepted the bad input ({op}, expected {key!r})"
    bad = [p for p in PLACEMENT_ERRORS if p in msg]
    assert not bad, f"{op}: a placement/registration error, not the kernel's: {msg}"
    if cls is not None:
        assert sim_cls == cls, f"{op}: SIMDEV raised {sim_cls} ({msg}), expected {cls}"
    # TF names the wrapped function after the op and its list attributes
    # (__wrapped__Pack_N_2_device_...)
    assert re.search(r"\{\{function_node __wrapped__" + op + r"(_\w+)?" +
                     re.escape(SIMDEV_NODE) + r"\}\}", msg), \
        f"error did not come from {op} running on SIMDEV: {msg}"
    assert key in msg, f"{op}: expected {key!r} in SIMDEV's message: {msg}"


def assert_error_like_cpu(d, op, key, cpu_key=True, cls=None):
    """For a check that ran one bad input on SIMDEV and on CPU (error_pair)
    and then a good op on SIMDEV: {"sim": (class, msg), "cpu": (class, msg),
    "after": bool}. The error comes from `op`'s SIMDEV kernel with `key` in
    its message (assert_kernel_error), CPU raised the same class (`cls` if
    given: for inputs CPU accepts, cpu is not compared), with `key` in its
    message too unless cpu_key is False (TF CPU's wording depends on oneDNN
    there), and the device still works afterwards."""
    cpu_cls, cpu_msg = d["cpu"][0], d["cpu"][1] or ""
    if cls is None:
        assert cpu_cls, f"CPU accepted the bad input: {d}"
        cls = cpu_cls
    assert_kernel_error(d["sim"], op, key, cls)
    if cpu_key and cpu_cls:
        assert key in cpu_msg, f"{op}: {key!r} is not TF CPU's wording: {cpu_msg}"
    assert d["after"] is True or (isinstance(d["after"], dict) and d["after"].get("ok")), \
        f"a good op on SIMDEV failed after the error: {d['after']}"


def error_rows(script):
    """(name, key) of every check_errors row of a child script, one per line
    as `    ("<name>", lambda ..., "<key>"),`: the parametrization of a kernel
    module's test_error_like_cpu (its test_error_names_found counts them, so
    a row this pattern misses fails there)."""
    return re.findall(r'^    \("([^"]+)", lambda.*, "([^"]+)"\),$', script, re.M)


def tf_minor():
    """The installed TensorFlow's minor release (2.<minor>), read from its
    metadata without importing it into pytest's process; None without TF."""
    from importlib import metadata
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return int(metadata.version(dist).split(".")[1])
        except metadata.PackageNotFoundError:
            pass
    return None


def simdev_variable_kernels():
    """Whether simdev registers its own resource-variable kernels with the
    installed TF: where libtensorflow_framework exports
    kernels_experimental.h's functions, 2.16-2.18 (src/kernels/variables/;
    test_kernels_variables.py checks both sides)."""
    m = tf_minor()
    return m is not None and m <= 18


class TFCPUDivergence(UserWarning):
    """TF's CPU kernel disagreed with the reference on a known case."""


def _fail_cpu(case, detail, divergences):
    if case in divergences:
        warnings.warn(TFCPUDivergence(f"TF CPU diverges from the reference on "
                                      f"{case!r} (known: docs/tf-cpu-divergences.md): "
                                      f"{str(detail)[:400]}"))
        return
    pytest.fail(f"TF CPU differs from the independent reference on {case!r} "
                f"while SIMDEV agrees: {detail}\nIf TF's CPU kernel is wrong "
                f"here, list the case in the module's TF_CPU_DIVERGENCES and in "
                f"docs/tf-cpu-divergences.md.", pytrace=False)


def assert_vs_ref(rep, case, divergences=()):
    """A versus_ref report: SIMDEV ran on SIMDEV and is within its bound of
    the reference; TF CPU is within its bound unless `case` is a known
    divergence."""
    assert rep["on_simdev"], f"{case}: result not on SIMDEV: {rep['devices']}"
    assert rep["sim_ok"], f"{case}: SIMDEV differs from the reference: {rep['sim']}"
    if not rep["cpu_ok"]:
        _fail_cpu(case, rep.get("cpu"), divergences)


def assert_sweep(d, divergences=(), min_cases=1):
    """A sweep_report: every case on SIMDEV and within bound; TF CPU within
    bound except on known divergences."""
    assert d["cases"] >= min_cases, d
    assert not d["not_on_simdev"], f"not on SIMDEV: {d['not_on_simdev']}"
    assert not d["sim_bad"], f"SIMDEV differs from the reference: {d['sim_bad']}"
    unknown = {c: v for c, v in d["cpu_bad"].items() if c not in divergences}
    if unknown:
        _fail_cpu(next(iter(unknown)), unknown, divergences)
    for case, detail in d["cpu_bad"].items():  # known ones: warnings
        _fail_cpu(case, detail, divergences)


DIVERGENCE_DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                              "tf-cpu-divergences.md")


def assert_divergences_documented(divergences):
    """Every known TF CPU divergence a module tolerates is written up, by
    its exact case name, in docs/tf-cpu-divergences.md."""
    with open(DIVERGENCE_DOC, encoding="utf-8") as f:
        doc = f.read()
    missing = [c for c in divergences if f"`{c}`" not in doc]
    assert not missing, f"not in docs/tf-cpu-divergences.md: {missing}"


@dataclasses.dataclass
class Plugin:
    path: str    # the library under test
    source: str  # how it was found, for messages
    env: dict    # variables the child needs to load it


class NoPlugin(Exception):
    """No usable plugin to test; the message says why."""


def find_plugin():
    """The plugin under test (SIMDEV_TEST_PLUGIN, or the one installed for
    this interpreter); raises NoPlugin with the reason otherwise."""
    override = os.environ.get("SIMDEV_TEST_PLUGIN")
    installed = installed_plugins()
    if override:
        path = os.path.realpath(override)
        if not os.path.isfile(path):
            raise NoPlugin(f"SIMDEV_TEST_PLUGIN={override!r} is not a file")
        if installed:
            # TF would load both and abort on the duplicate platform name.
            raise NoPlugin(f"SIMDEV_TEST_PLUGIN is set but a simdev plugin is "
                           f"also installed ({installed}); TF would load it twice "
                           f"and abort. Uninstall it or unset SIMDEV_TEST_PLUGIN.")
        return Plugin(path, "SIMDEV_TEST_PLUGIN",
                      {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": path})
    if not installed:
        raise NoPlugin(f"no simdev plugin installed for {sys.executable} "
                       f"(no tensorflow-plugins/libsimdev*.so in {_site_dirs()}); "
                       f"run `pip install .` or set SIMDEV_TEST_PLUGIN")
    if len(installed) > 1:
        raise NoPlugin(f"several simdev plugins installed: {installed}")
    return Plugin(installed[0], "installed", {})


@pytest.fixture(scope="session")
def plugin():
    """The plugin under test; fails every TF test clearly if there is none."""
    try:
        return find_plugin()
    except NoPlugin as e:
        pytest.fail(str(e), pytrace=False)


def parse_checks(stdout):
    """{name: record} of the CHECK_MARK lines a child printed (PRELUDE's
    check())."""
    checks = {}
    for line in stdout.splitlines():
        if line.startswith(CHECK_MARK):
            rec = json.loads(line[len(CHECK_MARK):])
            checks[rec["name"]] = rec
    return checks


@dataclasses.dataclass
class TFRun:
    returncode: int
    stdout: str
    stderr: str
    checks: dict
    rerun: str = ""  # a shell script that runs this child again (see run_tf)

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
        again = (f"\n--- run it again: bash {self.rerun}   (under gdb: "
                 f"GDB=1 bash {self.rerun}) ---") if self.rerun else ""
        return f"subprocess {how}\n--- stderr (tail) ---\n{err}\n" \
               f"--- stdout (tail) ---\n{out}{again}"

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


# Set from --simdev-omit-kernels (pytest_configure); empty: omit nothing.
_OMIT_KERNELS = ""
# Set from --simdev-discrete: every TF child runs with SIMDEV_DISCRETE=1.
_DISCRETE = False


def pytest_addoption(parser):
    parser.addoption(
        "--simdev-omit-kernels", default="", metavar="OP1,OP2",
        help="pass SIMDEV_TEST_OMIT_KERNELS=OP1,OP2 to every TF child: the "
             "plugin leaves those ops unregistered (test_kernel_coverage.py)")
    parser.addoption(
        "--simdev-discrete", action="store_true",
        help="run every TF child with SIMDEV_DISCRETE=1 (device memory not "
             "host-accessible; docs/debugging.md, \"Discrete memory\"), "
             "unless the test sets SIMDEV_DISCRETE itself")


def pytest_configure(config):
    global _OMIT_KERNELS, _DISCRETE
    _OMIT_KERNELS = config.getoption("--simdev-omit-kernels", default="") or ""
    _DISCRETE = bool(config.getoption("--simdev-discrete", default=False))
    config.addinivalue_line(
        "markers", "registry: reads TF's kernel registry only; left out when "
                   "proving that tests need each kernel")


def child_env(plugin, extra=None):
    env = dict(os.environ)
    # Only the variables a test sets reach the child: a developer's own
    # SIMDEV_* or plugin path must not change what is tested.
    for k in list(env):
        if k.startswith("SIMDEV_") or k == "TF_PLUGGABLE_DEVICE_LIBRARY_PATH":
            del env[k]
    env["PYTHONUNBUFFERED"] = "1"
    env.update(plugin.env)
    if _OMIT_KERNELS:  # explicit, from pytest's command line only
        env["SIMDEV_TEST_OMIT_KERNELS"] = _OMIT_KERNELS
        # A run without kernels attributes each failure to the op TF names
        # as missing. With the graph passes on, a tf.function's Sub or
        # Conv2D + BiasAdd would be rewritten into a fused op first and the
        # failure would name that instead: the passes stay off here (a
        # test that wants them sets SIMDEV_GRAPH_PASSES itself).
        env["SIMDEV_GRAPH_PASSES"] = "none"
    if _DISCRETE:  # explicit, from pytest's command line only
        env["SIMDEV_DISCRETE"] = "1"
    env.update(extra or {})
    return env


@pytest.fixture(scope="session")
def run_tf(plugin, tmp_path_factory):
    """run_tf(snippet, env=None, timeout=180) -> TFRun.

    Runs PRELUDE + snippet in a fresh `sys.executable` process, with the
    plugin under test and `env` added to the environment. The script is
    written to child_<n>.py in a pytest temporary directory, next to
    child_<n>.sh, which runs it again by hand with the same variables
    (`GDB=1 bash child_<n>.sh` under gdb); a failure's describe() names
    it."""
    cwd = tmp_path_factory.mktemp("tfchild")
    count = itertools.count()
    count_lock = threading.Lock()  # tests may run children from threads

    def run(snippet, env=None, timeout=180):
        code = PRELUDE + "\n" + textwrap.dedent(snippet)
        with count_lock:
            n = next(count)
        script = cwd / f"child_{n}.py"
        script.write_text(code)
        child = child_env(plugin, env)
        # The variables the child gets that this process does not have.
        diff = {k: v for k, v in child.items() if os.environ.get(k) != v}
        unset = [k for k in os.environ if k not in child]
        rerun = cwd / f"child_{n}.sh"
        rerun.write_text(
            "#!/bin/sh\n# Runs a tests/tf child again, as pytest ran it.\n"
            f"cd {shlex.quote(str(cwd))}\n"
            + "".join(f"unset {k}\n" for k in unset)
            + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in diff.items())
            + f'exec ${{GDB:+gdb --args}} {shlex.quote(sys.executable)} '
              f'{shlex.quote(str(script))}\n')
        try:
            p = subprocess.run([sys.executable, str(script)], cwd=cwd,
                               env=child, timeout=timeout,
                               capture_output=True, text=True, errors="replace")
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"TF subprocess timed out after {timeout}s "
                        f"(run it again: bash {rerun})\n"
                        f"stderr: {(e.stderr or b'')[-3000:]!r}", pytrace=False)
        return TFRun(p.returncode, p.stdout, p.stderr, parse_checks(p.stdout),
                     str(rerun))

    return run


@pytest.fixture(scope="session")
def xplane_pb2():
    """The TF wheel's xplane_pb2 (profutil.load_xplane_pb2: no TF import)."""
    import profutil
    return profutil.load_xplane_pb2()
