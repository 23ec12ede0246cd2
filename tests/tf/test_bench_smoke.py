"""`make bench`'s harness, in its quick pass: every group runs and the three
outputs (docs/benchmarks.md, .json, .png) are produced and well formed.
No speed is asserted (speed is measured by `make bench`, never in tests).
"""
import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUPS = ["stream", "matmul", "conv", "overhead", "train", "dlpack", "models",
          "graph", "profile", "xla"]


@pytest.fixture(scope="module")
def quick(plugin, tmp_path_factory):
    if plugin.source != "installed":
        pytest.skip("bench/run.py measures the installed plugin")
    exe = os.path.join(ROOT, "build", "bench", "bench_stream")
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} is not built (make test builds it)")
    out = tmp_path_factory.mktemp("bench")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"),
                        "--quick", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, f"bench/run.py --quick failed:\n{p.stderr[-4000:]}"
    return out, p


def test_progress_line_per_group(quick):
    _, p = quick
    for g in GROUPS:
        assert f"[bench] {g}: done" in p.stderr, p.stderr[-2000:]


def test_json_has_every_sample(quick):
    out, _ = quick
    with open(out / "benchmarks.json") as f:
        data = json.load(f)
    meta = data["meta"]
    assert meta["cores"] == os.cpu_count() and meta["cpu_model"]
    assert meta["quick"] is True
    assert [g["group"] for g in data["groups"]] == GROUPS
    for g in data["groups"]:
        assert g["cases"], g["group"]
        for c in g["cases"]:
            assert c["samples"], c["name"]
            for side, xs in c["samples"].items():
                assert xs and all(isinstance(x, (int, float)) and x > 0 and
                                  math.isfinite(x) for x in xs), (c["name"], side)
    names = {(r["group"], r["case"]) for r in data["summary"]}
    assert len(names) == sum(len(g["cases"]) for g in data["groups"])
    # Every comparison has simdev and at least one reference.
    compared = [r for r in data["summary"] if r["ratios"]]
    assert len(compared) >= 10
    assert all(v > 0 for r in compared for v in r["ratios"].values())


def test_markdown_table(quick):
    out, _ = quick
    text = (out / "benchmarks.md").read_text()
    with open(out / "benchmarks.json") as f:
        data = json.load(f)
    assert data["meta"]["cpu_model"] in text
    for g in GROUPS:
        assert f"## {g}" in text
    for r in data["summary"]:
        assert f"| {r['case']} |" in text, r["case"]
    assert "![ratios](benchmarks.png)" in text


def test_png_plot(quick):
    out, _ = quick
    raw = (out / "benchmarks.png").read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 5000
    import struct
    width, height = struct.unpack(">II", raw[16:24])  # the IHDR chunk
    assert width >= 600 and height >= 300
