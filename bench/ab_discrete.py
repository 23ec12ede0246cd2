"""The cost of SIMDEV_DISCRETE=1: `make bench` groups run with discrete
device memory off and on, in alternating child processes.

    .venv/bin/python bench/ab_discrete.py [--groups stream,matmul,overhead]
        [--runs N] [--full] [--build DIR] [--json PATH]

Each run starts one process per setting for each group (the group's own
--quick case set unless --full; bench/run.py's command lines), alternating
which setting goes first, so machine drift hits both alike. Only the
"simdev" side of each case is compared. Per case it prints the median over
all samples with discrete off and on and the ratio off / on (below 1:
discrete mode is slower). Groups that train with variables on SIMDEV
(train, graph, models, profile) cannot run in discrete mode (TF 2.21's
DEVICE_DEFAULT AssignAddVariableOp writes device memory with host code:
docs/debugging.md, "Discrete memory"), so they are not offered.

Each child reports, at exit, how many mappings of /memfd:simdev-N its
/proc/self/maps holds (two per discrete device: the PROT_NONE view and the
alias); the comparison stops unless the "on" children had them and the
"off" children none, so a setting that did not take effect cannot pass for
a measurement.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import run as bench_run  # noqa: E402

# Not "stream": bench_stream's reference side memcpy()s the device buffers
# with host code (simdev memory is host-addressable by default), which
# discrete mode forbids.
GROUPS = ("matmul", "conv", "overhead", "dlpack")


# Runs the group's script as __main__ and, at exit, writes the number of
# discrete views (/memfd:simdev-N mappings) in /proc/self/maps to argv[1].
WRAPPER = """
import atexit, runpy, sys
maps_out, script = sys.argv[1], sys.argv[2]
def count():
    with open("/proc/self/maps") as f:
        n = sum("/memfd:simdev-" in line for line in f)
    with open(maps_out, "w") as f:
        f.write(str(n))
atexit.register(count)
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def one(group, discrete, quick, build, tmp, tag):
    out = os.path.join(tmp, f"{group}-{tag}.json")
    maps_out = os.path.join(tmp, f"{group}-{tag}.maps")
    cmd = bench_run.command(group, quick, out, build)
    if cmd[0] != sys.executable:
        sys.exit(f"ab_discrete: {group} is not a Python group")
    cmd = [sys.executable, "-c", WRAPPER, maps_out] + cmd[1:]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               SIMDEV_DISCRETE="1" if discrete else "0")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        sys.exit(f"ab_discrete: {group} (SIMDEV_DISCRETE={int(discrete)}) "
                 f"failed ({p.returncode}):\n{p.stderr[-3000:]}")
    with open(maps_out) as f:
        views = int(f.read())
    if (views > 0) != discrete:
        sys.exit(f"ab_discrete: {group} (SIMDEV_DISCRETE={int(discrete)}) "
                 f"ran with {views} discrete views mapped: the setting did "
                 f"not take effect as asked")
    with open(out) as f:
        data = json.load(f)
    return {c["name"]: c["samples"]["simdev"] for c in data["cases"]
            if "simdev" in c["samples"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", default="matmul,conv,overhead")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--full", action="store_true",
                    help="the groups' full case sets (default: --quick)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    groups = args.groups.split(",")
    for g in groups:
        if g not in GROUPS:
            sys.exit(f"ab_discrete: group {g!r} not one of {GROUPS}")
    samples = {}  # (group, case) -> {0: [...], 1: [...]}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            for g in groups:
                order = (False, True) if r % 2 == 0 else (True, False)
                for d in order:
                    res = one(g, d, not args.full, args.build, tmp,
                              f"{r}-{int(d)}")
                    for name, xs in res.items():
                        samples.setdefault((g, name), {0: [], 1: []})[
                            int(d)].extend(xs)
                print(f"[ab_discrete] run {r + 1}/{args.runs}: {g} done",
                      file=sys.stderr, flush=True)
    print(f"{'group':<9} {'case':<44} {'off (median)':>13} "
          f"{'on (median)':>13} {'off/on':>7}")
    rows = []
    for (g, name), s in samples.items():
        off, on = statistics.median(s[0]), statistics.median(s[1])
        rows.append({"group": g, "case": name, "off": off, "on": on,
                     "ratio": off / on, "n": [len(s[0]), len(s[1])]})
        print(f"{g:<9} {name[:44]:<44} {off * 1e6:11.1f}us "
              f"{on * 1e6:11.1f}us {off / on:7.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
