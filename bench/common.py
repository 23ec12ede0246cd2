"""Shared helpers of the benchmark groups (bench_matmul, bench_conv,
bench_overhead, bench_train) and their common output.

Every group module has `run(quick) -> dict` and a `main()` built on
`main()` here. The dict is

    {"group": "matmul", "info": {...}, "cases": [case, ...], "metrics": [...]}

where a case (see `case()`) holds raw samples, in SECONDS per operation
(lower is better), for each side that ran it:

    "simdev"    the op on /device:SIMDEV:0
    "passes_off" the same on SIMDEV without simdev's graph passes
                (bench_graph)
    "tf_cpu"    the same op on TF's own CPU device (oneDNN as TF ships it)
    "openblas"  the raw BLAS call (cblas_?gemm through ctypes)
    "peak"      a measurement of the machine itself (a long raw sgemm)
    "trace_on"  simdev with its recorder on (SIMDEV_TRACE; bench_profile,
                bench_trace): "simdev" is then the same with it off
    "baseline"  simdev built from an older commit, in another venv
                (bench_profile --baseline)
    "control"   simdev again, in a second process (bench_profile --control:
                an A/A comparison)
    "xla"       the same computation in jnp / lax on JAX's XLA:CPU, next
                to simdev's JAX FFI targets (bench_xla)

Ratio convention: ratio = median(reference seconds) / median(simdev
seconds), so > 1 means simdev is faster. A case's optional target
{"vs": side, "min_ratio": r} asks for that ratio to be at least r.
A metric is {"name": ..., "unit": "B", "value": int}.

This module does not import TensorFlow.
"""
import argparse
import json
import os
import statistics
import sys
import time

SIDES = ("simdev", "passes_off", "tf_cpu", "openblas", "peak", "trace_on",
         "baseline", "control", "xla")
SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"


def timeit(fn, reps, warmup=1):
    """Wall times in seconds of `reps` calls of fn, after `warmup` untimed
    calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def alternate(cases, reps, rounds=5, warmup=1):
    """cases: {side: fn}. Runs the sides round-robin so machine drift hits
    all alike: each side gets one untimed call first, then `rounds` rounds
    in which every side makes `warmup` untimed calls and its share of the
    `reps` timed calls. Returns {side: [seconds...]}, `reps` samples each.
    The defaults are bench_kernels.py's; the groups pass rounds=reps,
    warmup=0: one call per side in turn, so a change of machine load
    between samples (frequent on a shared 2-CPU box) splits evenly."""
    rounds = max(1, min(rounds, reps))
    for fn in cases.values():
        fn()
    res = {k: [] for k in cases}
    for r in range(rounds):
        n = reps // rounds + (1 if r < reps % rounds else 0)
        for k, fn in cases.items():
            res[k] += timeit(fn, n, warmup)
    return res


def progress(msg):
    """One line to stderr (stdout is the table)."""
    print(msg, file=sys.stderr, flush=True)


def case(group, name, samples, work=None, work_unit=None, target=None):
    """One benchmark case. samples: {side: [seconds per op, ...]};
    work: amount of work of one op (e.g. FLOP), for rates; target:
    {"vs": side, "min_ratio": r}."""
    bad = set(samples) - set(SIDES)
    if bad:
        raise ValueError(f"{name}: unknown sides {sorted(bad)}")
    for side, xs in samples.items():
        if not xs or not all(isinstance(x, (int, float)) and x > 0
                             for x in xs):
            raise ValueError(f"{name}: bad samples for {side}: {xs!r}")
    targets = [] if target is None else \
        [target] if isinstance(target, dict) else list(target)
    for t in targets:
        if t.get("vs") not in samples or "simdev" not in samples:
            raise ValueError(f"{name}: target {t} needs simdev and "
                             f"{t.get('vs')} samples")
    out = {"group": group, "name": name, "unit": "s",
           "samples": {k: [float(x) for x in v] for k, v in samples.items()}}
    if work is not None:
        out["work"] = work
        out["work_unit"] = work_unit
    if targets:
        out["targets"] = [dict(t) for t in targets]
    return out


def metric(name, value, unit="B"):
    return {"name": name, "unit": unit, "value": int(value)}


def result(group, cases, info=None, metrics=None):
    return {"group": group, "info": dict(info or {}), "cases": list(cases),
            "metrics": list(metrics or [])}


def base_info(tf, quick):
    """Info every group records."""
    return {"tensorflow": tf.__version__, "cpus": os.cpu_count(),
            "quick": bool(quick),
            "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}


def check_device(t, kind, what):
    """Asserts (outside any timing) that tensor t lives on a `kind` device
    ("SIMDEV" or "CPU"); returns t."""
    assert kind in t.device, f"{what}: result is on {t.device!r}, not {kind}"
    return t


def check_close(got, want, what, rtol=1e-3):
    """Loose check that a simdev result matches the reference (NumPy
    arrays): max |got - want| <= rtol * max |want|."""
    import numpy as np
    err = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want))) or 1.0
    assert err <= rtol * scale, f"{what}: max error {err:g} vs scale {scale:g}"


def median(xs):
    return statistics.median(xs)


def ratio(c, ref):
    """median(ref seconds) / median(simdev seconds): > 1 is simdev faster."""
    return median(c["samples"][ref]) / median(c["samples"]["simdev"])


def fmt_time(s, width=8, micro="us"):
    """Seconds in s, ms or µs; `width` pads the number (0: no padding)."""
    for scale, unit in ((1.0, "s "), (1e-3, "ms"), (0.0, micro)):
        if s >= scale:
            v = s / (scale or 1e-6)
            return f"{v:{width}.{3 if width else 2}f} {unit}".rstrip()


def fmt_rate(work, seconds, unit):
    r = work / seconds
    for p, f in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if r >= f:
            return f"{r / f:7.1f} {p}{unit}/s"
    return f"{r:7.1f} {unit}/s"


def table(res):
    """Human table of medians: time per op for each side, the simdev (or
    only side's) work rate, ratios ref/simdev and the target verdict."""
    cases = res["cases"]
    sides = [s for s in SIDES if any(s in c["samples"] for c in cases)]
    w = max([len(c["name"]) for c in cases] + [4])
    head = (f"{'case':<{w}} " + " ".join(f"{s:>11}" for s in sides) +
            f" {'rate':>17}  ratio ref/simdev (>1: simdev faster)")
    lines = [f"[{res['group']}] median seconds per op", head]
    for c in cases:
        sm = c["samples"]
        row = f"{c['name']:<{w}} " + " ".join(
            fmt_time(median(sm[s])) if s in sm else f"{'-':>11}"
            for s in sides)
        if "work" in c:
            s0 = "simdev" if "simdev" in sm else next(iter(sm))
            row += " " + fmt_rate(c["work"], median(sm[s0]), c["work_unit"])
        else:
            row += " " * 18
        if "simdev" in sm:
            rs = [f"{s} {ratio(c, s):.2f}" for s in sides
                  if s in sm and s != "simdev"]
            row += "  " + ", ".join(rs)
        for t in c.get("targets", []):
            r = ratio(c, t["vs"])
            ok = "ok" if r >= t["min_ratio"] else "BELOW"
            row += f"  [target vs {t['vs']} >= {t['min_ratio']}: {ok}]"
        lines.append(row)
    for m in res.get("metrics", []):
        v = m["value"]
        extra = f" ({v / 2**20:.1f} MiB)" if m["unit"] == "B" else ""
        lines.append(f"{m['name']}: {v} {m['unit']}{extra}")
    if res.get("info"):
        lines.append("info: " + json.dumps(res["info"], sort_keys=True))
    return "\n".join(lines)


def main(run, doc=None, argv=None):
    """Command line of a group module: --quick, --json PATH; prints the
    table to stdout and the wall time to stderr."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="fewer sizes and repetitions (a smoke run)")
    ap.add_argument("--json", metavar="PATH",
                    help="also write the result dict as JSON to PATH")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    res = run(args.quick)
    print(table(res), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    progress(f"[{res['group']}] done in {time.perf_counter() - t0:.1f} s")
    return res

