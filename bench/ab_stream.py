"""bench_stream (C, the StreamExecutor C API without TensorFlow) against two
builds of the plugin, alternately: the before/after comparison of a change
at the level of single stream operations.

    .venv/bin/python bench/ab_stream.py BASELINE.so [CURRENT.so] [--runs N]
        [--latency-runs N] [--build DIR] [--json PATH]

CURRENT.so defaults to the plugin installed in this interpreter's
site-packages. Each run is one bench_stream process per build (latency of
an empty work item three ways, then 1 KiB and 1 MiB copies: its --quick
copy set, with the latency run count given here); the builds alternate run
by run, the first build swapping each run, so drift hits both alike. Per
case it prints the median over all samples of each build and the ratio
baseline / current (above 1: the current build is faster), and the same
ratio per run pair, so a run spoiled by load stands out.

For issue 15 (the recorder, off): BASELINE.so was main at cc717c1 built
in a worktree (/work/wt-base/.venv/lib/python3.11/site-packages/
tensorflow-plugins/libsimdev.so); both run with the same bench_stream
binary (this tree's), which only needs the SE C API both builds export.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def one_run(exe, so, latency_runs, tmp, tag):
    out = os.path.join(tmp, f"{tag}.json")
    p = subprocess.run([exe, so, str(latency_runs), "--quick", "--json", out],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"ab_stream: bench_stream {so} failed ({p.returncode}):\n"
                 f"{p.stdout[-2000:]}")
    with open(out) as f:
        data = json.load(f)
    return {c["name"]: c["samples"]["simdev"] for c in data["cases"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("baseline", help="the baseline build's libsimdev.so")
    ap.add_argument("current", nargs="?", default=os.path.join(
        sysconfig.get_paths()["platlib"], "tensorflow-plugins",
        "libsimdev.so"), help="default: the installed plugin")
    ap.add_argument("--runs", type=int, default=4,
                    help="bench_stream processes per build (default 4)")
    ap.add_argument("--latency-runs", type=int, default=20000)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", metavar="PATH",
                    help="also write every sample of both builds to PATH")
    args = ap.parse_args()
    exe = os.path.join(args.build, "bench", "bench_stream")
    for path in (exe, args.baseline, args.current):
        if not os.path.exists(path):
            sys.exit(f"ab_stream: {path} does not exist")
    builds = {"baseline": args.baseline, "current": args.current}
    pooled = {b: {} for b in builds}
    pairs = []  # per run: {case: baseline median / current median}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            order = ["baseline", "current"] if r % 2 == 0 else \
                ["current", "baseline"]
            got = {}
            for b in order:
                print(f"[ab_stream] run {r + 1}/{args.runs}: {b}",
                      file=sys.stderr, flush=True)
                got[b] = one_run(exe, builds[b], args.latency_runs, tmp,
                                 f"{b}{r}")
                for case, xs in got[b].items():
                    pooled[b].setdefault(case, []).extend(xs)
            pairs.append({c: statistics.median(got["baseline"][c]) /
                          statistics.median(got["current"][c])
                          for c in got["current"] if c in got["baseline"]})
    print(f"baseline: {args.baseline}\ncurrent:  {args.current}")
    print(f"{'case':<58} {'baseline':>10} {'current':>10} {'ratio':>6}  "
          "per run")
    for case in pooled["current"]:
        if case not in pooled["baseline"]:
            continue
        mb = statistics.median(pooled["baseline"][case])
        mc = statistics.median(pooled["current"][case])
        per = " ".join(f"{p[case]:.2f}" for p in pairs)
        print(f"{case[:58]:<58} {mb * 1e6:8.2f}us {mc * 1e6:8.2f}us "
              f"{mb / mc:6.3f}  {per}")
    print("ratio = median baseline time / median current time (above 1: "
          "the current build is faster); medians over every sample of all "
          "runs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"builds": builds, "samples": pooled,
                       "per_run_ratios": pairs}, f, indent=1)


if __name__ == "__main__":
    main()
