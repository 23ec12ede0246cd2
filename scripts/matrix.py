"""`make matrix`: simdev on every TensorFlow release it builds against.

For each release of RELEASES (default: all; `--releases 2.18.1,2.21.0`):
  venv    .matrix/tf-<release>/, cached: created once, then kept in step
          with its lock tests/matrix/tf-<release>.lock (scripts/pylock.py
          sync), written from tests/matrix/tf-<release>.txt
  builds  `pip install .` of this checkout into it, as a user does (pip's
          build isolation; scripts/tf_release.py builds against the
          venv's release)
  loads   `import tensorflow` lists a SIMDEV device
  harness simdev-conformance on the installed plugin: no required failure
  sweep   tests/sweep/sweep.py --quick --no-docs (every op vs TF CPU, bad
          inputs, the registry rules; docs/kernels.md is 2.21's)
  demo    examples/demo.py (the CNN's training step, SIMDEV vs CPU)
  model   tests/tf/test_models.py -k MobileNetV2 (Keras applications)
  varkern simdev's variable kernels (src/kernels/variables/) are on SIMDEV
          exactly where the release's libtensorflow_framework exports
          kernels_experimental.h's TF_AssignVariable (2.16-2.18; the drift
          report below lists the releases): AssignVariableOp,
          ResourceApplyAdam, ResourceGather and ResourceScatterAdd checked in
          TF's kernel registry; "SIMDEV" or "not on SIMDEV" in the table
  refuses the plugin built for 2.21.0 (that release's venv), loaded alone
          (TF_PLUGGABLE_DEVICE_LIBRARY_PATH, in a venv of this release's
          packages without simdev) by this release's TensorFlow: no SIMDEV
          device, and "built for TensorFlow 2.21.0, running in TensorFlow
          <release>" on stderr (2.21.0 itself: not run)
Then the C API drift report over all of them (scripts/tf_drift.py), and
docs/tf-releases.md: the table, the reason of every failure (the last lines
of its log, kept in .matrix/tf-<release>/<step>.log) and the drift report.

A progress line per step. Exit status 1 when a step failed. The first run
downloads each release (~300 MB) and builds simdev six times: the better
part of an hour on 2 cores; later runs reuse the venvs.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATRIX = os.path.join(ROOT, ".matrix")
LOCKS = os.path.join(ROOT, "tests", "matrix")
RELEASES = ["2.16.2", "2.17.1", "2.18.1", "2.19.1", "2.20.0", "2.21.0"]
STEPS = ["venv", "builds", "loads", "harness", "sweep", "demo", "model", "varkern",
         "refuses"]
OTHER = "2.21.0"  # the release whose plugin the others must refuse
DOC = os.path.join(ROOT, "docs", "tf-releases.md")
# Every C API function a release's headers declare, with the releases whose
# libraries export it: what test_exports.py checks the plugin's imports
# against (a plugin importing one that a release lacks fails to load there,
# and TF's import then raises).
API = os.path.join(LOCKS, "tf-c-api.txt")

LOADS = """
import tensorflow as tf
d = [x.name for x in tf.config.list_physical_devices()]
print(tf.__version__, d)
assert any("SIMDEV" in x for x in d), "no SIMDEV device"
"""
REFUSES = """
import tensorflow as tf
d = [x.name for x in tf.config.list_physical_devices()]
print(tf.__version__, d)
assert not any("SIMDEV" in x for x in d), "a SIMDEV device from another release's plugin"
"""
VARKERN = """
import ctypes, json, os, tensorflow as tf
from tensorflow.python.framework import kernels
fw = ctypes.CDLL(os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2"))
ops = ["AssignVariableOp", "ResourceApplyAdam", "ResourceGather", "ResourceScatterAdd"]
on = {op: "SIMDEV" in {x.device_type for x in kernels.get_registered_kernels_for_op(op).kernel}
      for op in ops}
print("VARKERN " + json.dumps({"exported": hasattr(fw, "TF_AssignVariable"), "on_simdev": on}))
"""


def log_tail(path, n=12):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
    except FileNotFoundError:
        return ""
    return "\n".join(lines[-n:])


class Release:
    def __init__(self, version):
        self.version = version
        self.dir = os.path.join(MATRIX, f"tf-{version}")
        self.py = os.path.join(self.dir, "bin", "python")
        self.results = {}  # step -> (ok, why)

    def log(self, step):
        return os.path.join(self.dir, f"{step}.log")

    def run(self, step, cmd, timeout=3600, env=None, cwd=ROOT):
        """Runs cmd, its output into the step's log; True if it exited 0."""
        os.makedirs(self.dir, exist_ok=True)
        full = dict(os.environ)
        for k in ("VIRTUAL_ENV", "PYTHONPATH", "TF_PLUGGABLE_DEVICE_LIBRARY_PATH"):
            full.pop(k, None)
        full.update(env or {})
        with open(self.log(step), "a", encoding="utf-8") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            try:
                p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT,
                                   timeout=timeout, env=full, cwd=cwd)
            except subprocess.TimeoutExpired:
                f.write(f"\nmatrix: timed out after {timeout} s\n")
                return False
        return p.returncode == 0

    def step(self, name, fn):
        t0 = time.time()
        if os.path.exists(self.log(name)):
            os.remove(self.log(name))
        try:
            ok, why = fn()
        except Exception as e:  # a bug here must not stop the other releases
            ok, why = False, f"matrix: {type(e).__name__}: {e}"
        self.results[name] = (ok, why)
        print(f"matrix: {self.version:7} {name:8} {'ok' if ok else 'FAILED'} "
              f"({time.time() - t0:.0f} s)"
              f"{'' if ok else ': ' + ((why or '?').splitlines() or ['?'])[-1][:120]}",
              flush=True)
        return ok

    # ---- the steps -------------------------------------------------------

    def venv(self):
        lock = os.path.join(LOCKS, f"tf-{self.version}.lock")
        reqs = os.path.join(LOCKS, f"tf-{self.version}.txt")
        if not os.path.exists(lock):
            return False, f"no lock {os.path.relpath(lock, ROOT)} (scripts/pylock.py write " \
                f"--requirements {os.path.relpath(reqs, ROOT)} --lock ...)"
        if not os.path.exists(self.py):
            if not self.run("venv", [sys.executable, "-m", "venv", self.dir]):
                return False, log_tail(self.log("venv"))
        ok = (self.run("venv", [self.py, "-m", "pip", "install", "-q", "-r", lock]) and
              self.run("venv", [self.py, os.path.join(ROOT, "scripts", "pylock.py"), "sync",
                                "--python", self.py, "--lock", lock, "--requirements", reqs]))
        return ok, log_tail(self.log("venv"))

    def builds(self):
        # A build tree per release: one CMake cache must not see two
        # releases' build environments.
        ok = self.run("builds", [self.py, "-m", "pip", "install", "-q", "--no-deps",
                                 "--force-reinstall", "-C",
                                 f"build-dir={os.path.join(self.dir, 'build')}", "."])
        return ok, log_tail(self.log("builds"))

    def loads(self):
        ok = self.run("loads", [self.py, "-c", LOADS], cwd=self.dir)
        return ok, log_tail(self.log("loads"))

    def harness(self):
        js = os.path.join(self.dir, "harness.json")
        ok = self.run("harness", [self.py, "-m", "simdev.conformance", "--json", js,
                                  "--simdev-plugin"], cwd=self.dir)
        why = log_tail(self.log("harness"), 4)
        return ok, why

    def sweep(self):
        js = os.path.join(self.dir, "sweep.json")
        ok = self.run("sweep", [self.py, os.path.join(ROOT, "tests", "sweep", "sweep.py"),
                                "--quick", "--no-docs", "--json", js])
        return ok, log_tail(self.log("sweep"))

    def demo(self):
        ok = self.run("demo", [self.py, os.path.join(ROOT, "examples", "demo.py")])
        return ok, log_tail(self.log("demo"))

    def model(self):
        ok = self.run("model", [self.py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                os.path.join("tests", "tf", "test_models.py"),
                                "-k", "MobileNetV2"])
        return ok, log_tail(self.log("model"))

    def varkern(self):
        ok = self.run("varkern", [self.py, "-c", VARKERN], cwd=self.dir)
        if not ok:
            return False, log_tail(self.log("varkern"))
        with open(self.log("varkern"), encoding="utf-8", errors="replace") as f:
            line = [l for l in f if l.startswith("VARKERN ")]
        if not line:  # TF writes its own lines into the same log
            return False, "no VARKERN line\n" + log_tail(self.log("varkern"))
        fact = json.loads(line[-1].split(" ", 1)[1])
        on = fact["on_simdev"]
        if fact["exported"] and all(on.values()):
            return True, "SIMDEV"
        if not fact["exported"] and not any(on.values()):
            return True, "not on SIMDEV"
        return False, (f"TF_AssignVariable {'is' if fact['exported'] else 'is not'} exported "
                       f"but SIMDEV has: {on}")

    def bare_python(self):
        """A venv that sees this release's packages but not simdev (its
        site-packages entries symlinked, tensorflow-plugins/ and simdev
        left out), so another plugin can be loaded alone: TF aborts when
        two libraries register one platform."""
        bare = os.path.join(self.dir, "bare")
        py = os.path.join(bare, "bin", "python")
        if not os.path.exists(py):
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], check=True)
        site = lambda p: subprocess.run(  # noqa: E731
            [p, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True).stdout.strip()
        old, new = site(self.py), site(py)
        for name in os.listdir(old):
            link = os.path.join(new, name)
            skip = (name in ("tensorflow-plugins", "simdev", "__pycache__") or
                    name.startswith("simdev-") or name.endswith(".pth"))
            if not skip and not os.path.lexists(link):
                os.symlink(os.path.join(old, name), link)
        return py

    def refuses(self, other):
        if self.version == other.version:
            return True, "-"
        if not other.results.get("builds", (False,))[0]:
            return False, f"not run: {other.version} did not build"
        where = subprocess.run([other.py, "-c", "import simdev; print(simdev.library_path())"],
                               capture_output=True, text=True, cwd=self.dir)
        plugin = where.stdout.strip()
        if where.returncode != 0 or not plugin:
            return False, f"cannot find {other.version}'s plugin: {where.stderr[-300:]}"
        # This release's TensorFlow loads the other release's plugin alone.
        ok = self.run("refuses", [self.bare_python(), "-c", REFUSES], cwd=self.dir,
                      env={"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": plugin})
        want = (f"no SIMDEV device: built for TensorFlow {other.version}, running in "
                f"TensorFlow {self.version}")
        with open(self.log("refuses"), encoding="utf-8", errors="replace") as f:
            seen = want in f.read()
        if ok and seen:
            return True, want
        return False, f"want {want!r} and no SIMDEV device\n" + log_tail(self.log("refuses"))

    def save(self):
        """Results on record (.matrix/tf-<release>/results.json), so a
        later --releases or --doc-only run can show them."""
        with open(os.path.join(self.dir, "results.json"), "w", encoding="utf-8") as f:
            json.dump(self.results, f, indent=1)

    def all(self):
        for name in STEPS:
            if name == "refuses":
                continue  # needs every release built: main() runs it
            if not self.step(name, getattr(self, name)):
                # later steps need the earlier ones (venv, build, load)
                if name in ("venv", "builds", "loads"):
                    for rest in STEPS[STEPS.index(name) + 1:]:
                        self.results[rest] = (False, f"not run: {name} failed")
                    break
        self.results.setdefault("refuses", (False, "not run yet"))
        self.save()


def tfdir(rel):
    out = subprocess.run([rel.py, "-c", "import importlib.util as u; print("
                          "u.find_spec('tensorflow').submodule_search_locations[0])"],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def write_doc(releases, drift):
    lines = [
        "# simdev on each TensorFlow release",
        "",
        "Written by `make matrix` (scripts/matrix.py); do not edit by hand. Each",
        "release in its own venv, pinned by its lock in tests/matrix/, simdev",
        "built into it with `pip install .`; the steps are scripts/matrix.py's",
        "(its docstring says what each checks).",
        "",
        "| release | " + " | ".join(STEPS[1:]) + " |",
        "|---|" + "---|" * (len(STEPS) - 1),
    ]
    for r in releases:
        cells = []
        for s in STEPS[1:]:
            ok, why = r.results.get(s, (False, "not run"))
            if s == "varkern" and ok:
                cells.append(why)
            elif s == "refuses" and ok and why == "-":
                cells.append("-")
            else:
                cells.append("ok" if ok else "**failed**")
        lines.append(f"| {r.version} | " + " | ".join(cells) + " |")
    lines.append("")
    fails = [(r, s, why) for r in releases for s, (ok, why) in r.results.items() if not ok]
    if fails:
        lines += ["## Failures", ""]
        for r, s, why in fails:
            lines += [f"**{r.version} {s}**", "", "```", why, "```", ""]
    lines += ["## C API drift", "",
              "Measured by scripts/tf_drift.py on each release's installed package.", "",
              drift, ""]
    with open(DOC, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def write_api(drift_json):
    """API from tf_drift.py's report: name, then the releases exporting it."""
    with open(drift_json, encoding="utf-8") as f:
        reports = json.load(f)
    exporters = {}
    for r in reports:
        for name in r["functions"]:
            exporters.setdefault(name, [])
            if name not in r["missing"]:
                exporters[name].append(r["release"])
    with open(API, "w", encoding="utf-8") as f:
        f.write("# Written by make matrix (scripts/matrix.py) from scripts/tf_drift.py's\n"
                "# report: each C API function the plugin headers of TensorFlow " +
                ", ".join(r["release"] for r in reports) + "\n"
                "# declare, then the releases whose libraries export it (none: declared,\n"
                "# exported by no release). tests/tf/test_exports.py: the plugin imports\n"
                "# only functions every release exports.\n")
        for name in sorted(exporters):
            f.write(f"{name} {','.join(exporters[name]) or '-'}\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", default=",".join(RELEASES))
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/tf-releases.md")
    ap.add_argument("--doc-only", action="store_true",
                    help="run nothing: rewrite docs/tf-releases.md from the results on "
                         "record in .matrix/ (and the drift report of their venvs)")
    args = ap.parse_args(argv)
    wanted = args.releases.split(",")
    unknown = [v for v in wanted if v not in RELEASES]
    if unknown:
        sys.exit(f"matrix: unknown release(s) {unknown}; known: {RELEASES}")
    releases = [] if args.doc_only else [Release(v) for v in wanted]
    for r in releases:
        r.all()
    other = next((r for r in releases if r.version == OTHER), None)
    if other is None and releases:  # from an earlier run, if on record
        other = Release(OTHER)
        try:
            with open(os.path.join(other.dir, "results.json"), encoding="utf-8") as f:
                other.results = {k: tuple(x) for k, x in json.load(f).items()}
        except FileNotFoundError:
            other = None
    for r in releases:
        if other is None:
            r.results["refuses"] = (False, f"not run: {OTHER} not in --releases")
        elif r.results.get("loads", (False,))[0]:
            r.step("refuses", lambda r=r: r.refuses(other))
    for r in releases:
        r.save()
    # The document covers every release with results on record: those run
    # now and, from .matrix/, those of an earlier --releases run.
    shown = []
    for v in RELEASES:
        r = next((x for x in releases if x.version == v), None)
        if r is None:
            r = Release(v)
            try:
                with open(os.path.join(r.dir, "results.json"), encoding="utf-8") as f:
                    r.results = {k: tuple(x) for k, x in json.load(f).items()}
            except FileNotFoundError:
                continue
        shown.append(r)
    dirs = [d for d in (tfdir(r) for r in shown if r.results.get("venv", (0,))[0]) if d]
    drift = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "tf_drift.py"),
                            "--json", os.path.join(MATRIX, "drift.json"), *dirs],
                           capture_output=True, text=True)
    if drift.returncode != 0:
        print(f"matrix: tf_drift.py failed:\n{drift.stderr[-2000:]}", flush=True)
    if drift.returncode == 0 and not args.no_doc and len(shown) == len(RELEASES):
        write_api(os.path.join(MATRIX, "drift.json"))
        print(f"matrix: wrote {os.path.relpath(API, ROOT)}")
    if not args.no_doc:
        write_doc(shown, drift.stdout if drift.returncode == 0 else
                  f"tf_drift.py failed:\n\n```\n{drift.stderr[-2000:]}\n```")
        print(f"matrix: wrote {os.path.relpath(DOC, ROOT)}")
    failed = any(not ok for r in shown for ok, _ in r.results.values())
    return 1 if failed or drift.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
