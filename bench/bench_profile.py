"""Profiler benchmark group: what recording costs (issue 15).

    .venv/bin/python bench/bench_profile.py [--quick] [--json PATH]
        [--baseline PYTHON] [--control] [--only CASE,...] [--reps N]
        [--build DIR] [--no-recorder]

Three TensorFlow cases, one call each per sample, soft placement off:

    cnn    one training step of examples/training.py's CNN, batch 32, Adam
           (the model of `make demo`, bench_train and bench_graph)
    mlp    the same for the MLP
    chain  a tf.function of 100 dependent MatMuls of f32[4,4]: a hundred
           kernel launches per call and next to no work, the case where a
           cost per work item shows most (MatMul, because simdev's graph
           passes fuse a chain of elementwise ops into one kernel)

Sides, each a worker process of its own that builds every case once and
then times one call per request, so every side keeps its TensorFlow, its
plugin and its environment for the whole run:

    "simdev"    this tree's installed plugin, tracing off (the default)
    "trace_on"  the same plugin with SIMDEV_TRACE=<tmp>/trace.json: the
                recorder on from start-up, the file written at exit
    "baseline"  with --baseline PYTHON only: a second venv's interpreter,
                with the plugin installed there (e.g. a worktree of main
                before the profiler: /work/wt-base/.venv/bin/python)
    "control"   with --control only: a second process exactly like
                "simdev" (an A/A comparison): its ratio is the difference
                two processes of one build show on their own, the noise
                floor for the other ratios

The parent asks the workers in turn, one call each, the order rotating
every round, so a change of machine load (frequent on a shared 2-CPU box)
hits all sides alike; the waiting workers sleep in a read. A worker times
the call itself (time.perf_counter around the call and .numpy() of its
result); the pipe's round trip is not in the figures.

Checks (the run fails if one does not hold): every side's result lives on
a SIMDEV device; after the trace_on worker exits, its SIMDEV_TRACE file is
valid JSON holding kernel events of the last case, of every case (Conv2D
and MatMul op types) unless a ring overflowed, and at least one kernel
record, kept or dropped, per call: the on side did record. Its
event count and dropped count (rings of SIM_TRACE_DEFAULT_RECORDS per
stream; a long run overwrites the oldest) are reported as metrics.

Then build/bench/bench_trace (C, device_sim without TensorFlow: items per
second through one stream with the recorder off and on) runs, and its
cases join this group's (sides "simdev" = off, "trace_on" = on).

The result's "paired_ratios" (printed after the table, kept in the JSON)
gives per case and side the quartiles of the per-round ratios, each call
over simdev's call of the same round.

Ratios follow the harness: median(reference) / median(simdev), so the
trace_on ratio is the cost factor of tracing (1.05: 5 % slower with it)
and the baseline ratio is the old build's time over the new one's
(below 1: the new build is slower with tracing off).

--quick: a few calls per case (a smoke run: the figures mean nothing).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import common  # noqa: E402

GROUP = "profile"
CASES = ["cnn", "mlp", "chain"]
TITLES = {"cnn": "train step CNN b32", "mlp": "train step MLP b32",
          "chain": "tf.function 100 MatMuls f32[4,4]"}
REPS = {"cnn": 200, "mlp": 400, "chain": 500}
QUICK_REPS = {"cnn": 4, "mlp": 6, "chain": 6}
# A part of an op type each case's kernels must show in the SIMDEV_TRACE
# file (simdev's graph passes may fuse: Conv2D -> _FusedConv2D).
TRACE_OPS = {"cnn": "Conv2D", "mlp": "MatMul", "chain": "MatMul"}


# --------------------------------------------------------------- the worker

def worker_main():
    """A side: builds the cases named on the command line, says "ready",
    then answers "run CASE" with one timed call and "quit" by exiting.
    Protocol lines are JSON on the original stdout; everything TensorFlow
    prints goes to stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import bench_train
    import training

    cases = sys.argv[sys.argv.index("--worker") + 1].split(",")
    dev = common.SIM
    calls = {}
    for kind in cases:
        if kind in ("cnn", "mlp"):
            # The train group's step (bench_train.py), built the same way.
            xs, ys = training.synthetic_data(kind, 1)
            call, _ = bench_train.make_step(kind, dev, xs, ys)
        else:
            with tf.device(dev):
                a = tf.constant(np.eye(4, dtype=np.float32))
                b = tf.constant(np.eye(4, dtype=np.float32) * 1.0001)

            @tf.function
            def chain(x, y):
                for _ in range(100):
                    x = tf.linalg.matmul(x, y)
                return x

            def call(chain=chain, a=a, b=b):
                with tf.device(dev):
                    return chain(a, b)
        tf.config.set_soft_device_placement(False)
        out = call()
        common.check_device(out, "SIMDEV", TITLES[kind])
        assert np.all(np.isfinite(out.numpy())), (kind, out)
        calls[kind] = call

    plugin = os.path.join(os.path.dirname(os.path.dirname(tf.__file__)),
                          "tensorflow-plugins", "libsimdev.so")
    proto.write(json.dumps({"ready": True, "tensorflow": tf.__version__,
                            "plugin": plugin,
                            "trace": os.environ.get("SIMDEV_TRACE")}) + "\n")
    for line in sys.stdin:
        cmd = line.split()
        if cmd == ["quit"]:
            break
        if len(cmd) != 2 or cmd[0] != "run" or cmd[1] not in calls:
            proto.write(json.dumps({"error": f"bad request {line!r}"}) + "\n")
            continue
        fn = calls[cmd[1]]
        t0 = time.perf_counter()
        fn().numpy()
        proto.write(json.dumps({"seconds": time.perf_counter() - t0}) + "\n")
    proto.close()


# --------------------------------------------------------------- the parent

class Side:
    """One worker process."""

    def __init__(self, name, python, env, cases):
        self.name = name
        cmd = [python, os.path.abspath(__file__), "--worker", ",".join(cases)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env=env, cwd=ROOT, bufsize=1)
        self.info = self._read()
        if not self.info.get("ready"):
            raise RuntimeError(f"{name}: worker did not start: {self.info}")

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise RuntimeError(f"bench profile: worker {self.name} exited "
                               f"with code {code} (its stderr is above)")
        return json.loads(line)

    def call(self, kind):
        self.proc.stdin.write(f"run {kind}\n")
        self.proc.stdin.flush()
        msg = self._read()
        if "seconds" not in msg:
            raise RuntimeError(f"{self.name}: {msg}")
        return msg["seconds"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        code = self.proc.wait()
        if code != 0:
            raise RuntimeError(f"bench profile: worker {self.name} exited "
                               f"with code {code}")


def git_describe(python):
    """The commit of the tree a venv's interpreter lives in (<tree>/.venv/
    bin/python), or None."""
    tree = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(python))))
    try:
        p = subprocess.run(["git", "-C", tree, "log", "-1",
                            "--format=%h %s"], capture_output=True, text=True)
    except OSError:
        return None
    return p.stdout.strip()[:80] or None if p.returncode == 0 else None


def check_trace(path, cases, calls):
    """The trace_on side's SIMDEV_TRACE file: valid JSON; kernel events of
    the last case (the newest records, never overwritten), of every case
    unless a ring overflowed, and at least one kernel record (kept or
    dropped) per call the side made. Returns (kernel events, all device
    "X" events, dropped)."""
    if not os.path.isfile(path):
        raise RuntimeError(f"bench profile: trace_on wrote no {path}")
    with open(path) as f:
        data = json.load(f)
    events = [e for e in data["traceEvents"] if e.get("ph") == "X"
              and e.get("pid", 0) >= 1000]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    dropped = int(data["otherData"]["simdev_dropped_events"])
    for kind in cases:
        op = TRACE_OPS[kind]
        if (kind == cases[-1] or dropped == 0) and not any(
                op in e.get("args", {}).get("op_type", "") for e in kernels):
            raise RuntimeError(f"bench profile: {path} has no {op} kernel "
                               f"({TITLES[kind]}): tracing did not record")
    if len(kernels) + dropped < calls:
        raise RuntimeError(f"bench profile: {path}: {len(kernels)} kernel "
                           f"events + {dropped} dropped < {calls} calls")
    return len(kernels), len(events), dropped


def paired(samples):
    """Per round, each side's call over simdev's call of the same round
    (they ran back to back): {side: [p25, median, p75]} of those ratios,
    a check on the ratio of medians that does not mix rounds."""
    import statistics
    out = {}
    for side, xs in samples.items():
        if side == "simdev":
            continue
        r = sorted(x / y for x, y in zip(xs, samples["simdev"]))
        q = statistics.quantiles(r, n=4) if len(r) >= 2 else [r[0]] * 3
        out[side] = [round(q[0], 4), round(statistics.median(r), 4),
                     round(q[2], 4)]
    return out


def recorder_cases(build, quick, tmp):
    exe = os.path.join(build, "bench", "bench_trace")
    if not os.access(exe, os.X_OK):
        sys.exit(f"bench profile: {exe} not built (run `make build`)")
    out = os.path.join(tmp, "bench_trace.json")
    common.progress(f"[{GROUP}] recorder micro-benchmark: {exe}")
    p = subprocess.run([exe, "--json", out] + (["--quick"] if quick else []),
                       stdout=subprocess.PIPE, text=True)
    sys.stderr.write(p.stdout)
    if p.returncode != 0:
        sys.exit(f"bench profile: bench_trace failed ({p.returncode})")
    with open(out) as f:
        return json.load(f)


def run(quick=False, baseline=None, only=None, reps=None, build=None,
        recorder=True, control=False):
    cases = only or CASES
    counts = dict(QUICK_REPS if quick else REPS)
    if reps:
        counts = {k: reps for k in counts}
    env = {k: v for k, v in os.environ.items()
           if k not in ("SIMDEV_TRACE", "SIMDEV_TRACE_EVENTS")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    result_cases, metrics, pairs = [], [], {}
    info = {"tensorflow": None, "cpus": os.cpu_count(), "quick": bool(quick)}
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        specs = [("simdev", sys.executable, env),
                 ("trace_on", sys.executable, dict(env, SIMDEV_TRACE=trace))]
        if baseline:
            specs.append(("baseline", baseline, env))
            info["baseline"] = git_describe(baseline) or baseline
        if control:
            specs.append(("control", sys.executable, env))
        sides = []
        try:
            for name, py, e in specs:  # one at a time: start-up is heavy
                common.progress(f"[{GROUP}] starting side {name}")
                sides.append(Side(name, py, e, cases))
            info["tensorflow"] = sides[0].info["tensorflow"]
            for kind in cases:
                n = counts[kind]
                common.progress(f"[{GROUP}] {TITLES[kind]}: {n} calls x "
                                f"{len(sides)} sides")
                for s in sides:  # one untimed call each
                    s.call(kind)
                samples = {s.name: [] for s in sides}
                for r in range(n):
                    k = r % len(sides)
                    for s in sides[k:] + sides[:k]:
                        samples[s.name].append(s.call(kind))
                result_cases.append(common.case(GROUP, TITLES[kind], samples))
                pairs[TITLES[kind]] = paired(samples)
        finally:
            for s in sides:
                s.close()
        nk, nx, dropped = check_trace(trace, cases, sum(
            counts[k] + 2 for k in cases))  # + check and warm-up calls
        metrics += [
            common.metric("SIMDEV_TRACE file: kernel events kept", nk,
                          unit="events"),
            common.metric("SIMDEV_TRACE file: all device events kept", nx,
                          unit="events"),
            common.metric("SIMDEV_TRACE file: events dropped (full rings)",
                          dropped, unit="events"),
            common.metric("SIMDEV_TRACE file size",
                          os.path.getsize(trace), unit="B")]
        if recorder:
            rec = recorder_cases(build or os.path.join(ROOT, "build"), quick,
                                 tmp)
            result_cases += rec["cases"]
            info.update(rec.get("info", {}))
    info.update({"batch": 32, "chain_ops": 100,
                 "sides": [s for s, _, _ in specs]})
    res = common.result(GROUP, result_cases, info, metrics)
    res["paired_ratios"] = pairs
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a few calls per case (a smoke run)")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the result dict as JSON to PATH")
    ap.add_argument("--baseline", metavar="PYTHON",
                    help="a side 'baseline' run by this interpreter (another "
                         "venv with its own plugin installed)")
    ap.add_argument("--control", action="store_true",
                    help="a side 'control': a second process like 'simdev' "
                         "(A/A: the noise floor of the ratios)")
    ap.add_argument("--only", default="",
                    help=f"comma-separated cases (default: {','.join(CASES)})")
    ap.add_argument("--reps", type=int, default=0,
                    help="calls per case and side (default: per case)")
    ap.add_argument("--build", default=None,
                    help="CMake build directory holding bench/bench_trace")
    ap.add_argument("--no-recorder", action="store_true",
                    help="skip the C micro-benchmark (bench_trace)")
    args = ap.parse_args(argv)
    only = [c for c in args.only.split(",") if c]
    for c in only:
        if c not in CASES:
            ap.error(f"unknown case {c!r} (cases: {', '.join(CASES)})")
    t0 = time.perf_counter()
    res = run(args.quick, args.baseline, only or None, args.reps, args.build,
              not args.no_recorder, args.control)
    print(common.table(res), flush=True)
    for title, sides in res["paired_ratios"].items():
        print(f"paired ratios, {title}: " + ", ".join(
            f"{k} {m:.3f} [{lo:.3f}, {hi:.3f}]"
            for k, (lo, m, hi) in sides.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    common.progress(f"[{GROUP}] done in {time.perf_counter() - t0:.1f} s")
    return res


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main()
    else:
        main()
