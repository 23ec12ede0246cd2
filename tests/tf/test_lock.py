"""The venv the suite runs in is the locked one: every distribution at
requirements.lock's version, none missing, none extra (scripts/pylock.py).
A dependency's new release could otherwise change a reference under the
tests between two machines (ml_dtypes 0.7.0 did, issue 26). No TensorFlow
here: the check reads package metadata only.

It also checks the checker: differences() must name an extra package, a
missing one, another version and a requirements.txt pin the lock
contradicts, or a clean result would prove nothing."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import pylock  # noqa: E402



def test_installed_packages_match_the_lock():
    diff = pylock.differences(pylock.read_pins(pylock.LOCK),
                              pylock.installed(sys.executable),
                              pylock.read_pins(pylock.REQS))
    assert not diff, ("the venv differs from requirements.lock (`make setup` "
                      "reinstalls it):\n" + "\n".join(diff))


def test_every_direct_pin_is_in_the_lock():
    lock, reqs = pylock.read_pins(pylock.LOCK), pylock.read_pins(pylock.REQS)
    assert reqs and set(reqs) <= set(lock)
    # what the issue found unpinned, and what pip itself installs with
    for name in ("ml-dtypes", "pip", "setuptools", "keras", "protobuf"):
        assert name in lock, name


def test_differences_names_each_kind():
    lock = {"a": "1.0", "b-c": "2.0", "d": "3.0"}
    have = {"a": "1.0", "b-c": "2.1", "e": "4.0", "simdev": "0.1.0"}
    diff = pylock.differences(lock, have, {"a": "1.1"})
    assert diff == ["b-c: installed 2.1, requirements.lock pins 2.0",
                    "d==3.0 is in requirements.lock but not installed",
                    "e==4.0 is installed but not in requirements.lock",
                    "a: requirements.txt pins 1.1, requirements.lock 1.0"]
    assert pylock.differences(lock, dict(lock, simdev="9")) == []


def test_names_are_compared_normalised(tmp_path):
    f = tmp_path / "pins.txt"
    f.write_text("# c\nML_Dtypes==0.7.0  # why\n\njaraco.functools==4.6.0\n")
    assert pylock.read_pins(str(f)) == {"ml-dtypes": "0.7.0", "jaraco-functools": "4.6.0"}
    f.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match="not a name==version pin"):
        pylock.read_pins(str(f))
    f.write_text("numpy==2.0\nNumPy==2.1\n")
    with pytest.raises(ValueError, match="pinned twice"):
        pylock.read_pins(str(f))
