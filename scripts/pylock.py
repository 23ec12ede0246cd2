#!/usr/bin/env python3
"""The Python lock of simdev's development venv (.venv): requirements.lock.

requirements.txt names what simdev's build and tests use directly, pinned;
requirements.lock pins every distribution the venv holds, transitive ones
included (pip, setuptools and wheel too), so that a new release of any of
them (ml_dtypes 0.7.0 changed a cast reference under the tests once) cannot
change a result between two machines. simdev itself, installed into the
venv by `make install`, is the one distribution not in the lock.

    scripts/pylock.py check [--python PY]   installed == lock, or exit 1
                                            with every difference listed
    scripts/pylock.py sync  [--python PY]   uninstall what the lock does not
                                            name (left by an older lock),
                                            then check
    scripts/pylock.py write                 re-resolve requirements.txt in a
                                            scratch venv with pip's defaults
                                            and rewrite requirements.lock

--requirements FILE --lock FILE name another pair: `make matrix`'s venvs
(one per TensorFlow release, tests/matrix/tf-<release>.txt and .lock) are
locked the same way.

The Makefile's venv step runs `pip install -r requirements.lock` and then
`sync`; tests/tf/test_lock.py runs `check` on the interpreter pytest runs in.
After editing requirements.txt, run `write`, review the diff, commit both.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = os.path.join(ROOT, "requirements.lock")
REQS = os.path.join(ROOT, "requirements.txt")
OWN = {"simdev"}  # the project itself: installed by `make install`
HEADER = """\
# Every Python distribution of simdev's .venv, transitive ones included:
# written by `scripts/pylock.py write` from requirements.txt (which names
# the direct ones); installed by the Makefile; tests/tf/test_lock.py fails
# when the venv differs from it. Do not edit by hand.
"""


def canon(name):
    """PEP 503's normalised name: ml_dtypes, ml-dtypes and ML.Dtypes are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path):
    """{canonical name: version} of the name==version lines of a file
    (comments and blank lines skipped; any other line is an error)."""
    pins = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)", line)
            if m is None:
                raise ValueError(f"{path}:{n}: not a name==version pin: {line!r}")
            key = canon(m.group(1))
            if key in pins:
                raise ValueError(f"{path}:{n}: {m.group(1)} pinned twice")
            pins[key] = m.group(2)
    return pins


def installed(python):
    """{canonical name: version} of every distribution `python` sees in its
    environment (importlib.metadata, as pip does)."""
    code = ("import importlib.metadata as m, json; print(json.dumps("
            "[[d.metadata['Name'], d.version] for d in m.distributions()]))")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    dists = {}
    for name, version in json.loads(out):
        if name:  # a broken .dist-info has no name: reported as a difference
            dists[canon(name)] = version
    return dists


def differences(lock, have, reqs=None):
    """Lines naming every way `have` differs from `lock` (and a direct pin of
    requirements.txt the lock contradicts); [] when they agree."""
    out = []
    for name in sorted(set(lock) | set(have)):
        if name in OWN:
            continue
        want, got = lock.get(name), have.get(name)
        if want is None:
            out.append(f"{name}=={got} is installed but not in requirements.lock")
        elif got is None:
            out.append(f"{name}=={want} is in requirements.lock but not installed")
        elif want != got:
            out.append(f"{name}: installed {got}, requirements.lock pins {want}")
    for name, want in sorted((reqs or {}).items()):
        if lock.get(name) != want:
            out.append(f"{name}: requirements.txt pins {want}, requirements.lock "
                       f"{lock.get(name, 'nothing')}")
    return out


def check(python, lock=LOCK, reqs=REQS):
    diff = differences(read_pins(lock), installed(python), read_pins(reqs))
    for line in diff:
        print(f"pylock: {line}", file=sys.stderr)
    if diff:
        print("pylock: the venv differs from requirements.lock; `make setup` "
              "reinstalls it (or rm -rf .venv)", file=sys.stderr)
    return 1 if diff else 0


def sync(python, lock=LOCK, reqs=REQS):
    pins = read_pins(lock)
    extra = sorted(n for n in installed(python) if n not in pins and n not in OWN)
    if extra:
        print(f"pylock: uninstalling what requirements.lock does not name: "
              f"{' '.join(extra)}")
        subprocess.run([python, "-m", "pip", "uninstall", "-q", "-y", *extra],
                       check=True)
    return check(python, lock, reqs)


def write(lock=LOCK, reqs=REQS):
    with tempfile.TemporaryDirectory(prefix="pylock-") as tmp:
        py = os.path.join(tmp, "bin", "python")
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"],
                       check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "-r", reqs], check=True)
        have = installed(py)
    lines = [f"{name}=={have[name]}" for name in sorted(have) if name not in OWN]
    header = HEADER if lock == LOCK else HEADER.replace(
        "simdev's .venv", f"the venv of {os.path.relpath(reqs, ROOT)}").replace(
        "from requirements.txt", f"from {os.path.relpath(reqs, ROOT)}")
    with open(lock, "w", encoding="utf-8") as f:
        f.write(header + "\n".join(lines) + "\n")
    print(f"pylock: wrote {len(lines)} pins to {lock}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["check", "sync", "write"])
    ap.add_argument("--python", default=sys.executable,
                    help="the venv's interpreter (default: this one)")
    ap.add_argument("--requirements", default=REQS,
                    help="the direct pins (default: requirements.txt)")
    ap.add_argument("--lock", default=LOCK,
                    help="the full lock (default: requirements.lock)")
    args = ap.parse_args()
    lock, reqs = os.path.abspath(args.lock), os.path.abspath(args.requirements)
    if args.command == "write":
        return write(lock, reqs)
    fn = check if args.command == "check" else sync
    return fn(args.python, lock, reqs)


if __name__ == "__main__":
    sys.exit(main())
