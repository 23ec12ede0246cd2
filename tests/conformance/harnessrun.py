"""Where the harness and its test plugins are, and one way to run it with
--json: shared by the test_*.py files here (pytest puts this directory on
sys.path). The harness is $SIMDEV_CONFORMANCE if set, else the build tree's.
"""

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
HARNESS = Path(os.environ.get("SIMDEV_CONFORMANCE")
               or BUILD / "tests" / "conformance" / "simdev_conformance")
PLUGINS = BUILD / "tests" / "conformance" / "plugins"
RUN_TIMEOUT = 600  # the whole harness run; only a harness bug reaches it


def run_json(args, plugin, tmp_path, per_test_timeout):
    """Runs the harness with `args` and --json on `plugin`; returns the
    finished process and the parsed JSON (asserting it was written)."""
    assert HARNESS.is_file(), f"{HARNESS} not built (make build)"
    assert Path(plugin).is_file(), f"{plugin} not built (make build)"
    out = Path(tmp_path) / "result.json"
    cmd = [str(HARNESS), *args, "--json", str(out),
           "--timeout", str(per_test_timeout), str(plugin)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert out.is_file(), (
        f"{' '.join(cmd)} wrote no JSON:\n{proc.stdout}{proc.stderr}")
    return proc, json.loads(out.read_text())
