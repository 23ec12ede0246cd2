"""The C API drift report: what TensorFlow's plugin C API is in each release,
measured on the release's own package, and what changed from the one before.

For each TensorFlow package directory given (site-packages/tensorflow of a
venv, or an unpacked wheel), on the headers it ships and the libraries it
ships, with nothing assumed:
- the functions the plugin API's headers declare (clang's AST of one file
  that includes them: SEEDS and every header they include from TF's tree),
  and which of them no shared library of the package exports (`nm -D
  --defined-only` on every .so in it). A declared function nobody exports
  is one a plugin links against and then fails to load with "undefined
  symbol" (kernels_experimental.h's, from 2.19 on);
- every *_STRUCT_SIZE macro and the SE_/GO_/TP_ API versions, every
  enumerator of the headers' enums, and sizeof and field offsets of every
  struct they define, each printed by a C program compiled against the
  headers;
- between consecutive releases: functions added, removed or retyped,
  macros, enumerators and layouts that changed.

Usage:
  python3 scripts/tf_drift.py [--json OUT.json] TFDIR...   markdown on stdout
Each TFDIR's release comes from the tensorflow*/tensorflow_cpu* dist-info
beside it. `make matrix` runs it on every release's venv and puts the
markdown into docs/tf-releases.md. Needs clang, cc and nm (binutils).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

# The plugin C API: what SE_InitPlugin, TF_InitKernel, TF_InitGraph and
# TF_InitProfiler plugins include.
SEEDS = [
    "tensorflow/c/experimental/stream_executor/stream_executor.h",
    "tensorflow/c/kernels.h",
    "tensorflow/c/kernels_experimental.h",
    "tensorflow/c/experimental/grappler/grappler.h",
    "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h",
    "tensorflow/c/tf_datatype.h",
    "tensorflow/c/tf_status.h",
    "tensorflow/c/tf_tensor.h",
    "tensorflow/c/tf_buffer.h",
    "tensorflow/c/c_api.h",
    "tensorflow/c/c_api_experimental.h",
    "tensorflow/c/ops.h",  # last: it uses c_api.h's typedefs without including it
]
# ops.h declares these as bare structs and uses them without `struct`, which
# only compiles as C++ (src/kernels/math/fused_elementwise.c does the same).
OPS_H_TYPEDEFS = "".join(f"typedef struct {t} {t};\n" for t in (
    "TF_DimensionHandle", "TF_OpDefinitionBuilder", "TF_ShapeHandle",
    "TF_ShapeInferenceContext"))
# Defined by the plugin, looked up by TF: never exported by TF itself.
PLUGIN_SIDE = {"SE_InitPlugin", "TF_InitKernel", "TF_InitGraph",
               "TF_InitProfiler", "TF_InitPluginInternal"}
MACRO = re.compile(r"^#define ((?:SE|SP|TP|TF|GO)_\w*STRUCT_SIZE|(?:SE|GO|TP)_(?:MAJOR|MINOR|PATCH))\b")


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed:\n{p.stderr[-2000:]}")
    return p.stdout


def release_of(tfdir):
    metas = glob.glob(os.path.join(tfdir, "..", "tensorflow-*.dist-info", "METADATA")) + \
        glob.glob(os.path.join(tfdir, "..", "tensorflow_cpu-*.dist-info", "METADATA"))
    versions = set()
    for m in metas:
        with open(m, encoding="utf-8") as f:
            versions.update(l.split(":", 1)[1].strip() for l in f if l.startswith("Version:"))
    if len(versions) != 1:
        raise RuntimeError(f"{tfdir}: cannot tell its release (dist-infos: {sorted(versions)})")
    return versions.pop()


def seeds_present(inc):
    return [s for s in SEEDS if os.path.exists(os.path.join(inc, s))]


def ast_decls(inc, tu):
    """Functions (name -> (type, header)), records (name -> [(field)]) and
    enums ([names of enumerators]) the TU's TF headers declare."""
    out = run(["clang", "-x", "c", "-fsyntax-only", "-Xclang", "-ast-dump=json",
               "-I", inc, tu])
    root = json.loads(out)
    funcs, records, enumerators = {}, {}, []
    cur = [None]  # clang's JSON names a location's file only when it changes

    def file_of(node):
        for key in ("loc", "range"):
            loc = node.get(key) or {}
            if key == "range":
                loc = loc.get("begin", {})
            # in a macro (TF_CAPI_EXPORT): where it is used, not defined
            loc = loc.get("expansionLoc", loc.get("spellingLoc", loc))
            if "file" in loc:
                cur[0] = loc["file"]
        f = cur[0] or ""
        return os.path.relpath(f, inc) if f.startswith(inc) else None

    def walk(node):
        f = file_of(node)
        kind = node.get("kind")
        if f is not None:
            if kind == "FunctionDecl" and node.get("storageClass") != "static" \
                    and not node.get("inline") and not node["name"].startswith("__"):
                funcs.setdefault(node["name"], (node["type"]["qualType"], f))
            elif kind == "RecordDecl" and node.get("completeDefinition") \
                    and node.get("name") and node.get("tagUsed") == "struct":
                fields = [c["name"] for c in node.get("inner", [])
                          if c.get("kind") == "FieldDecl" and c.get("name")]
                records[node["name"]] = fields
            elif kind == "EnumConstantDecl":
                enumerators.append(node["name"])
        for child in node.get("inner", []):
            walk(child)

    walk(root)
    return funcs, records, enumerators


def printed_values(inc, tu, macros, records, enumerators, work):
    """{name: value} of the macros and enumerators, {struct: [size, {field:
    offset}]}, from one C program compiled against the headers."""
    lines = [f'#include "{tu}"', "#include <stddef.h>", "#include <stdio.h>",
             "int main(void) {"]
    for m in macros:
        lines.append(f'  printf("M %s %%lld\\n", (long long)({m}));' % m)
    for e in enumerators:
        lines.append(f'  printf("E %s %%lld\\n", (long long)({e}));' % e)
    for r, fields in sorted(records.items()):
        lines.append(f'  printf("S {r} %zu\\n", sizeof(struct {r}));')
        for fld in fields:
            lines.append(f'  printf("F {r} {fld} %zu\\n", offsetof(struct {r}, {fld}));')
    lines += ["  return 0;", "}"]
    src = os.path.join(work, "values.c")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    exe = os.path.join(work, "values")
    run(["cc", "-w", "-I", inc, "-o", exe, src])
    values, layouts = {}, {}
    for line in run([exe]).splitlines():
        kind, *rest = line.split()
        if kind in ("M", "E"):
            values[rest[0]] = int(rest[1])
        elif kind == "S":
            layouts[rest[0]] = [int(rest[1]), {}]
        elif kind == "F":
            layouts[rest[0]][1][rest[1]] = int(rest[2])
    return values, layouts


def exported(tfdir):
    names = set()
    for so in glob.glob(os.path.join(tfdir, "**", "*.so*"), recursive=True):
        if not os.path.isfile(so):
            continue
        p = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True)
        for line in p.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                names.add(parts[2].split("@")[0])
    return names


def measure(tfdir):
    inc = os.path.join(os.path.realpath(tfdir), "include")
    seeds = seeds_present(inc)
    with tempfile.TemporaryDirectory() as work:
        tu = os.path.join(work, "api.c")
        with open(tu, "w") as f:
            for s in seeds:
                if s.endswith("/ops.h"):
                    f.write(OPS_H_TYPEDEFS)
                f.write(f'#include "{s}"\n')
        funcs, records, enumerators = ast_decls(inc, tu)
        defines = run(["clang", "-x", "c", "-dM", "-E", "-I", inc, tu])
        macros = sorted({m.group(1) for l in defines.splitlines() if (m := MACRO.match(l))})
        values, layouts = printed_values(inc, tu, macros, records, enumerators, work)
    have = exported(tfdir)
    missing = sorted(n for n, (_, h) in funcs.items()
                     if n not in have and n not in PLUGIN_SIDE)
    return {"release": release_of(tfdir), "seeds": seeds,
            "functions": {n: list(v) for n, v in funcs.items()},
            "missing": {n: funcs[n][1] for n in missing},
            "values": values, "layouts": layouts}


def changes(a, b):
    """What b changed from a, as markdown bullet lines."""
    out = []
    fa, fb = a["functions"], b["functions"]
    added = sorted(set(fb) - set(fa))
    removed = sorted(set(fa) - set(fb))
    retyped = sorted(n for n in set(fa) & set(fb) if fa[n][0] != fb[n][0])
    if added:
        out.append("functions declared: " + ", ".join(f"`{n}`" for n in added))
    if removed:
        out.append("functions no longer declared: " + ", ".join(f"`{n}`" for n in removed))
    for n in retyped:
        out.append(f"`{n}` retyped: `{fa[n][0]}` -> `{fb[n][0]}`")
    now_missing = sorted(set(b["missing"]) - set(a["missing"]))
    back = sorted(set(a["missing"]) - set(b["missing"]))
    if now_missing:
        out.append("**declared but no longer exported**: " +
                   ", ".join(f"`{n}`" for n in now_missing))
    if back:
        out.append("exported again: " + ", ".join(f"`{n}`" for n in back))
    va, vb = a["values"], b["values"]
    for n in sorted(set(va) | set(vb)):
        if va.get(n) != vb.get(n):
            out.append(f"`{n}`: {va.get(n, '-')} -> {vb.get(n, '-')}")
    la, lb = a["layouts"], b["layouts"]
    for r in sorted(set(la) | set(lb)):
        if la.get(r) != lb.get(r):
            sa = la[r][0] if r in la else "-"
            sb = lb[r][0] if r in lb else "-"
            out.append(f"`struct {r}`: layout changed (size {sa} -> {sb})")
    return out or ["nothing in the plugin C API"]


def markdown(reports):
    lines = ["| release | headers | functions declared | exported by no library | "
             "*_STRUCT_SIZE macros | structs |", "|---|---|---|---|---|---|"]
    for r in reports:
        nmac = sum(1 for k in r["values"] if k.endswith("STRUCT_SIZE"))
        lines.append(f"| {r['release']} | {len(r['seeds'])} | {len(r['functions'])} | "
                     f"{len(r['missing'])} | {nmac} | {len(r['layouts'])} |")
    lines.append("")
    for r in reports:
        if r["missing"]:
            by_header = {}
            for n, h in r["missing"].items():
                by_header.setdefault(h, []).append(n)
            for h, names in sorted(by_header.items()):
                lines.append(f"- {r['release']}: `{h}` declares {len(names)} "
                             f"function(s) no library exports: " +
                             ", ".join(f"`{n}`" for n in sorted(names)))
    lines.append("")
    for a, b in zip(reports, reports[1:]):
        lines.append(f"**{a['release']} -> {b['release']}**")
        lines.append("")
        lines += [f"- {c}" for c in changes(a, b)]
        lines.append("")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="also write the measurements here")
    ap.add_argument("tfdirs", nargs="+")
    args = ap.parse_args(argv)
    reports = [measure(d) for d in args.tfdirs]
    reports.sort(key=lambda r: [int(x) for x in re.findall(r"\d+", r["release"])[:3]])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1, sort_keys=True)
    print(markdown(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
