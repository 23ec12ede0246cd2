"""The report of `make bench` (bench/run.py): Markdown table, JSON with every
sample, PNG of the ratios.

A group's dict (what each bench_*.py / bench_stream writes with --json):
    {"group": str, "info": {...}, "metrics": [{"name", "unit", "value"}],
     "cases": [{"name", "unit": "s", "samples": {side: [seconds...]},
                "work": optional FLOP or bytes per call, "work_unit",
                "targets": optional [{"vs": side, "min_ratio": float}]}]}
Sides: "simdev" and its references ("tf_cpu", "openblas", "memcpy",
"peak", "copy", ...). Samples are seconds per operation.
"""
import json
import math
import os

import common

SIM = "simdev"
NAMES = {"tf_cpu": "TF CPU", "passes_off": "simdev, graph passes off", "openblas": "raw OpenBLAS", "memcpy": "memcpy",
         "peak": "machine peak", SIM: "simdev", "numpy": ".numpy() copy",
         "copy": "copy import", "tf_constant": "tf.constant copy",
         "trace_on": "simdev, tracing on", "baseline": "baseline build",
         "control": "simdev, second process",
         "xla": "XLA:CPU (jnp/lax)"}


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def dlpack_cases(rows):
    """bench_dlpack's flat samples ({"case", "size_bytes", "seconds"}) as
    comparisons: zero-copy export vs .numpy(), zero-copy import vs a copy
    import and vs tf.constant on SIMDEV, one pair per size."""
    by = {(r["case"], r["size_bytes"]): r["seconds"] for r in rows}
    cases = []
    for size in sorted({r["size_bytes"] for r in rows}):
        pairs = [("DLPack export", "export_zero_copy",
                  {"numpy": "numpy_copy"}),
                 ("DLPack import", "import_zero_copy",
                  {"copy": "import_copy", "tf_constant": "tf_constant_copy"})]
        for title, sim, refs in pairs:
            samples = {"simdev": by[(sim, size)]}
            samples.update({k: by[(v, size)] for k, v in refs.items()
                            if (v, size) in by})
            cases.append({"name": f"{title} {size_name(size)} float32",
                          "unit": "s",
                          "samples": samples})
    return cases


def normalise(group, data):
    """Accepts a group dict, or bench_dlpack's flat list of samples, and
    returns a group dict."""
    if isinstance(data, list):
        data = {"group": group, "cases": dlpack_cases(data)}
    data.setdefault("group", group)
    data.setdefault("info", {})
    data.setdefault("metrics", [])
    for c in data["cases"]:
        if not c.get("samples"):
            raise ValueError(f"{group}: case {c.get('name')!r} has no samples")
        for side, xs in c["samples"].items():
            if not xs or any(not isinstance(x, (int, float)) or x <= 0 or
                             math.isnan(x) for x in xs):
                raise ValueError(f"{group}: {c['name']}: bad samples for {side}")
    return data


def ratios(case):
    """{reference side: median(ref) / median(simdev)}; above 1 simdev is
    faster. Empty when the case has no simdev side or no reference."""
    s = case["samples"]
    if SIM not in s:
        return {}
    m = common.median(s[SIM])
    return {k: common.median(v) / m for k, v in s.items() if k != SIM}


def targets(case):
    """The case's targets whose reference ran ("target" is the older,
    single form)."""
    ts = case.get("targets") or ([case["target"]] if case.get("target") else [])
    r = ratios(case)
    return [t for t in ts if t.get("vs") in r]


def primary(case):
    """The reference a case is judged against: its first target's, else TF
    CPU, else the first one."""
    r = ratios(case)
    if not r:
        return None
    ts = targets(case)
    if ts:
        return ts[0]["vs"]
    return "tf_cpu" if "tf_cpu" in r else sorted(r)[0]


def fmt_time(sec):
    return common.fmt_time(sec, width=0, micro="µs")


def fmt_rate(work, unit, sec):
    v = work / sec
    if unit == "FLOP":
        return f"{v / 1e9:.1f} GFLOP/s"
    if unit == "B":
        return f"{v / 1e9:.2f} GB/s"
    return f"{v:.3g} {unit}/s"


def fmt_side(case, side):
    xs = case["samples"][side]
    lo, m, hi = min(xs), common.median(xs), max(xs)
    if case.get("work"):
        # A rate: min time is the max rate.
        w, u = case["work"], case.get("work_unit", "")
        return f"{fmt_rate(w, u, m)} [{fmt_rate(w, u, hi).split()[0]}, " \
               f"{fmt_rate(w, u, lo).split()[0]}]"
    return f"{fmt_time(m)} [{fmt_time(lo)}, {fmt_time(hi)}]"


def target_rows(case):
    """[(target, ratio reached, score = ratio / target, text)]."""
    r = ratios(case)
    out = []
    for t in targets(case):
        got = r[t["vs"]]
        ok = got >= t["min_ratio"]
        out.append((t, got, got / t["min_ratio"],
                    f"≥ {t['min_ratio']:.2f} vs {NAMES.get(t['vs'], t['vs'])} "
                    f"{'met' if ok else 'missed'}"))
    return out


def target_status(case):
    rows = target_rows(case)
    if not rows:
        return "", None
    return "; ".join(x[3] for x in rows), min(x[2] for x in rows)


def summary(results):
    """One row per case, for the JSON and the plot."""
    rows = []
    for g in results:
        for c in g["cases"]:
            r = ratios(c)
            status, score = target_status(c)
            rows.append({
                "group": g["group"], "case": c["name"],
                "ratios": {k: round(v, 4) for k, v in r.items()},
                "primary": primary(c),
                "medians_s": {k: common.median(v) for k, v in c["samples"].items()},
                "min_s": {k: min(v) for k, v in c["samples"].items()},
                "max_s": {k: max(v) for k, v in c["samples"].items()},
                "samples": {k: len(v) for k, v in c["samples"].items()},
                "targets": targets(c), "target_status": status,
                "target_score": score})
    return rows


def markdown(meta, results):
    out = ["# simdev benchmarks", ""]
    out.append(f"Machine: {meta['cpu_model']}, {meta['cores']} cores "
               f"(Linux {meta['kernel']}, Python {meta['python']}). "
               f"Run {meta['started']}, `{meta['command']}`, "
               f"{meta['wall_seconds']:.0f} s in all.")
    for note in meta.get("merged", []):
        out.append(f"Since then {note}; the other groups are from the run "
                   "above.")
    infos = []
    for g in results:
        for k, v in g.get("info", {}).items():
            if k not in ("quick", "cpus") and f"{k}: {v}" not in infos:
                infos.append(f"{k}: {v}")
    if infos:
        out.append("")
        out.append("; ".join(infos) + ".")
    if meta.get("quick"):
        out += ["", "**Quick pass** (`--quick`): few repetitions; a smoke "
                "test of the harness, not figures to quote."]
    out += ["",
            "Ratio = median time of the reference / median time of simdev: "
            "above 1 simdev is faster. Every group ran in its own process, "
            "its sides alternating round by round. Absolute figures are "
            "medians with [min, max]; rates where the work per call is "
            "known.", ""]
    rows = [(c, t) for g in results for c in g["cases"] for t in target_rows(c)]
    if rows:
        out += ["## Furthest from target", "",
                "Every target of the kernel issue, worst first "
                "(score = ratio / target).", "",
                "| case | ratio | target | score |", "|---|---|---|---|"]
        for c, (t, got, score, text) in sorted(rows, key=lambda x: x[1][2]):
            out.append(f"| {c['name']} | {got:.2f} | {text} | {score:.2f} |")
        out.append("")
    for g in results:
        out += [f"## {g['group']}", ""]
        out += ["| case | ratio (simdev vs reference) | target | simdev | "
                "references |", "|---|---|---|---|---|"]
        for c in g["cases"]:
            r = ratios(c)
            p = primary(c)
            order = ([p] if p else []) + sorted(k for k in r if k != p)
            rtxt = ", ".join(f"**{r[k]:.2f}** vs {NAMES.get(k, k)}" if k == p
                             else f"{r[k]:.2f} vs {NAMES.get(k, k)}"
                             for k in order) or "—"
            status, _ = target_status(c)
            sim = fmt_side(c, SIM) if SIM in c["samples"] else "—"
            refs = "; ".join(f"{NAMES.get(k, k)} {fmt_side(c, k)}"
                             for k in c["samples"] if k != SIM) or "—"
            out.append(f"| {c['name']} | {rtxt} | {status} | {sim} | {refs} |")
        for m in g.get("metrics", []):
            v = m["value"]
            txt = f"{v / 2**20:.1f} MiB" if m.get("unit") == "B" else f"{v} {m.get('unit', '')}"
            out.append(f"| {m['name']} | | | {txt} | |")
        out.append("")
    out.append("![ratios](benchmarks.png)")
    return "\n".join(out) + "\n"


def plot(path, meta, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in summary(results) if r["primary"]]
    fig_h = max(3.0, 0.28 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(9, fig_h))
    groups = sorted({r["group"] for r in rows}, key=[g["group"] for g in results].index)
    colours = dict(zip(groups, plt.cm.tab10.colors))
    ys = list(range(len(rows)))[::-1]
    vals = [r["ratios"][r["primary"]] for r in rows]
    ax.barh(ys, [math.log2(v) for v in vals],
            color=[colours[r["group"]] for r in rows])
    for y, r, v in zip(ys, rows, vals):
        for t in r["targets"]:
            if t.get("vs") == r["primary"]:
                ax.plot([math.log2(t["min_ratio"])], [y], marker="|",
                        color="k", markersize=12)
        ax.text(math.log2(v), y, f" {v:.2f}", va="center",
                ha="left" if v >= 1 else "right", fontsize=7)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r['case']} (vs {NAMES.get(r['primary'], r['primary'])})"
                        for r in rows], fontsize=7)
    ax.axvline(0, color="k", linewidth=0.8)
    logs = [math.log2(v) for v in vals] + [0.0]
    lo, hi = math.floor(min(logs)) - 1, math.ceil(max(logs)) + 1
    ax.set_xlim(lo, hi)
    ticks = list(range(lo, hi + 1))
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{2 ** t}" if t >= 0 else f"1/{2 ** -t}"
                        for t in ticks], fontsize=8)
    ax.set_xlabel("speed ratio, simdev / reference (log scale; | = target)")
    ax.set_title(f"simdev vs references on {meta['cpu_model']}, "
                 f"{meta['cores']} cores" + (" (quick)" if meta.get("quick") else ""),
                 fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[g]) for g in groups]
    ax.legend(handles, groups, fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(out_dir, meta, results):
    md = os.path.join(out_dir, "benchmarks.md")
    js = os.path.join(out_dir, "benchmarks.json")
    png = os.path.join(out_dir, "benchmarks.png")
    with open(md, "w") as f:
        f.write(markdown(meta, results))
    with open(js, "w") as f:
        json.dump({"meta": meta, "summary": summary(results),
                   "groups": results}, f, indent=1)
        f.write("\n")
    plot(png, meta, results)
    return [md, js, png]
