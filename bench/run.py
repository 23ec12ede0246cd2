"""make bench: every simdev benchmark side by side with its reference.

    .venv/bin/python bench/run.py [--quick] [--out DIR] [--only GROUP,...]
                                  [--merge]

Each comparison group runs in a process of its own (a fresh TensorFlow, and
no group's threads left spinning into the next), and inside it the sides
alternate round by round so machine drift hits all of them alike:

    stream    bench_stream (C): work-item latency; h2d/d2h/d2d vs memcpy
    matmul    MatMul f32 256..2048 and f64 1024: TF CPU, raw OpenBLAS, peak
    conv      Conv2D forward and both backprops, two shapes, vs TF CPU
    overhead  eager tiny AddV2, a tf.function of 100 tiny ops, vs TF CPU
    train     one training step of the small CNN and the MLP; memory
    dlpack    DLPack export/import vs the copy paths
    models    one training step of MobileNetV2 and ResNet50, vs TF CPU
    graph     training steps of the CNN, MLP, MobileNetV2: simdev's graph
              passes on vs off vs TF CPU; kernels per step
    profile   CNN/MLP steps and 100 tiny MatMuls with SIMDEV_TRACE off vs
              on; the recorder's cost per work item (bench_trace, C)
    xla       JAX, no TensorFlow: simdev's FFI matmul/conv2d vs jnp.dot /
              lax.conv on XLA:CPU; one empty FFI call vs an empty jit

Writes DIR/benchmarks.md (the table: ratios first, medians and [min, max]
beside them, the machine's CPU and cores), DIR/benchmarks.json (every
sample) and DIR/benchmarks.png (the ratios). DIR defaults to docs/.
--merge keeps the groups of DIR/benchmarks.json that did not run now (the
log is appended to), so one group can be measured again on its own.
A ratio is median(reference time) / median(simdev time): above 1 simdev is
faster, below 1 slower. Nothing here asserts a speed.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import report  # noqa: E402

PY_GROUPS = {
    "matmul": "bench_matmul.py",
    "conv": "bench_conv.py",
    "overhead": "bench_overhead.py",
    "train": "bench_train.py",
    "dlpack": "bench_dlpack.py",
    "models": "bench_models.py",
    "graph": "bench_graph.py",
    "profile": "bench_profile.py",
    "xla": "bench_xla.py",
}
ORDER = ["stream", "matmul", "conv", "overhead", "train", "dlpack", "models",
         "graph", "profile", "xla"]


def plugin_path():
    path = os.path.join(sysconfig.get_paths()["platlib"], "tensorflow-plugins",
                        "libsimdev.so")
    if not os.path.isfile(path):
        sys.exit(f"bench: no installed plugin at {path} (run `make bench`)")
    return path


def command(group, quick, out_json, build):
    if group == "stream":
        exe = os.path.join(build, "bench", "bench_stream")
        if not os.access(exe, os.X_OK):
            sys.exit(f"bench: {exe} not built (run `make bench`)")
        cmd = [exe, plugin_path()]
    else:
        cmd = [sys.executable, os.path.join(HERE, PY_GROUPS[group])]
        if group == "profile":  # it runs build/bench/bench_trace too
            cmd += ["--build", build]
    cmd += ["--json", out_json] + (["--quick"] if quick else [])
    return cmd


def run_group(group, quick, tmp, build, log):
    """Runs one group's process; its progress lines (stderr) pass through,
    its own table (stdout) goes to the log. Returns the group's dict."""
    out_json = os.path.join(tmp, f"{group}.json")
    cmd = command(group, quick, out_json, build)
    print(f"[bench] {group}: {' '.join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)}",
          file=sys.stderr, flush=True)
    t0 = time.monotonic()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    log.write(f"==== {group} ({time.monotonic() - t0:.1f} s)\n{p.stdout}\n")
    if p.returncode != 0:
        sys.stdout.write(p.stdout)
        sys.exit(f"bench: group {group} failed with exit code {p.returncode}")
    with open(out_json) as f:
        data = json.load(f)
    data = report.normalise(group, data)
    data["wall_seconds"] = round(time.monotonic() - t0, 1)
    print(f"[bench] {group}: done in {data['wall_seconds']} s, "
          f"{len(data['cases'])} cases", file=sys.stderr, flush=True)
    return data


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_model": model, "cores": os.cpu_count(),
            "kernel": platform.release(), "python": platform.python_version()}


def merge_previous(out, meta, results):
    """--merge: the groups of out/benchmarks.json that did not run now, in
    ORDER with the new ones; the header keeps the previous run's machine and
    time and names the groups re-run since."""
    path = os.path.join(out, "benchmarks.json")
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"bench: --merge needs a previous {path}: {e}")
    new = {g["group"]: g for g in results}
    groups = {g["group"]: g for g in old["groups"]}
    groups.update(new)
    merged = [groups[g] for g in ORDER if g in groups]
    note = (f"{', '.join(new)} re-run {meta['started']} "
            f"(`bench/run.py --only {','.join(new)} --merge`, "
            f"{meta['wall_seconds']:.0f} s)")
    m = dict(old["meta"])
    # A note whose groups all ran again now is superseded by this one.
    kept = [n for n in m.get("merged", [])
            if not set(n.split(" re-run ")[0].split(", ")) <= set(new)]
    m["merged"] = kept + [note]
    m["quick"] = bool(m.get("quick")) or meta["quick"]
    return m, merged


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="a short pass (about a minute): smoke test, not figures")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs"),
                    help="directory for benchmarks.{md,json,png} (default docs/)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="CMake build directory holding bench/bench_stream")
    ap.add_argument("--only", default="",
                    help="comma-separated groups to run (default: all)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other groups of DIR/benchmarks.json and "
                         "replace (or add) only the groups run now")
    args = ap.parse_args()
    groups = [g for g in args.only.split(",") if g] or ORDER
    for g in groups:
        if g not in ORDER:
            ap.error(f"unknown group {g!r} (groups: {', '.join(ORDER)})")
    os.makedirs(args.out, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    results = []
    log_path = os.path.join(args.out, "benchmarks.log")
    with tempfile.TemporaryDirectory() as tmp, open(log_path, "a" if args.merge else "w") as log:
        for g in groups:
            results.append(run_group(g, args.quick, tmp, args.build, log))
    meta = dict(machine(), started=started.isoformat(timespec="seconds"),
                quick=args.quick, wall_seconds=round(time.monotonic() - t0, 1),
                command="bench/run.py" + (" --quick" if args.quick else ""))
    if args.merge:
        meta, results = merge_previous(args.out, meta, results)
    paths = report.write_all(args.out, meta, results)
    for p in paths:
        print(f"[bench] wrote {os.path.relpath(p, os.getcwd())}", file=sys.stderr)
    print(report.markdown(meta, results))


if __name__ == "__main__":
    main()
