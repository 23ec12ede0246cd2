"""The docs name only what exists: every repository path (src/..., tests/...,
docs/..., ...) and every simdev identifier with a module prefix (sim_, sk_,
sa_, ...) written in CONTRIBUTING.md, README.md and docs/*.md must be in the
tree. A rename that leaves a chapter behind fails here (ctest: docrefs).

An identifier ending in "_" (`sim_mutex_*`) names a family: some identifier
must start with it; a path with `*`, `<name>` or `{a,b}` is a pattern some
file must match. Names a recipe invents for its example, and removed files
a recorded run names, are listed in EXAMPLES with the place that names them.
Line numbers (`stream.c:112`) are not checked. Every graph pass of
src/graph/passes.def must be named in README.md and docs/graph-optimizer.md.

Usage: python3 tests/docrefs.py SOURCE_DIR    exit 1 and a list when stale.
"""
import glob
import os
import re
import sys

PREFIXES = ("sim", "sk", "ska", "skc", "skf", "skr", "skh", "sk_cw", "sa", "sg", "se", "sp",
            "sx", "dlp", "pbw")
IDENT = re.compile(r"\b((?:%s)_[a-z0-9_]*)" % "|".join(PREFIXES))
PATH = re.compile(r"(?<![\w/.-])((?:src|tests|bench|scripts|examples|docs|"
                  r"python/simdev)/[\w./-]*\w)")
CODE_DIRS = ("src", "tests", "bench", "scripts", "examples", "python", "cmake")
EXAMPLES = {
    # CONTRIBUTING.md, "Add a graph pass": the example pass
    "sg_pass_drop_identity", "src/graph/drop_identity.c",
    "tests/unit/test_graph_*.c",  # (the file a growing pass test moves to)
    # docs/debugging.md, valgrind: the removed file a recorded run used
    "tests/valgrind.supp",
}


def code_text(root):
    parts = []
    for d in CODE_DIRS:
        for p in glob.glob(os.path.join(root, d, "**", "*"), recursive=True):
            if os.path.isfile(p) and not p.endswith((".o", ".so", ".a")):
                with open(p, encoding="utf-8", errors="ignore") as f:
                    parts.append(f.read())
    for p in ("CMakeLists.txt", "Makefile"):
        with open(os.path.join(root, p), encoding="utf-8") as f:
            parts.append(f.read())
    return "\n".join(parts)


def stale(root):
    code = code_text(root)
    idents = set(re.findall(r"\b[A-Za-z_]\w*", code))
    docs = ["CONTRIBUTING.md", "README.md"] + sorted(
        glob.glob(os.path.join(root, "docs", "*.md")))
    bad = []
    for doc in docs:
        rel = os.path.relpath(os.path.join(root, doc), root)
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"`([^`\n]+)`", text):
            line = text.count("\n", 0, m.start()) + 1
            for ident in IDENT.findall(m.group(1)):
                if ident in EXAMPLES:
                    continue
                ok = (any(i.startswith(ident) for i in idents)
                      if ident.endswith("_") else ident in idents)
                if not ok:
                    bad.append(f"{rel}:{line}: `{ident}` is not in the code")
        for m in PATH.finditer(text):
            p = m.group(1).rstrip(".")
            if p in EXAMPLES:
                continue
            # `tests/tf/test_kernels_<family>.py`, `specs*.py`,
            # `docs/benchmarks.*`, `test_{a,b}.py`: a pattern, some file
            # must match it
            nxt = text[m.end():m.end() + 2]
            if nxt[:1] in ("*", "<", "{") or nxt in (".*", "-<", ".<"):
                tail = re.match(r"[^\s`'\"()|\]]*", text[m.end():]).group(0)
                pat = re.sub(r"<[^>]*>|\{[^}]*\}", "*", m.group(1) + tail)
                if pat not in EXAMPLES and not glob.glob(os.path.join(root, pat)):
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append(f"{rel}:{line}: nothing matches {pat}")
                continue
            if not os.path.exists(os.path.join(root, p)):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{rel}:{line}: {p} does not exist")
    return bad


def passes_named(root):
    """Every pass of src/graph/passes.def is named where users choose
    passes: README.md's SIMDEV_GRAPH_PASSES row and pass list, and
    docs/graph-optimizer.md (its run order and its section)."""
    with open(os.path.join(root, "src", "graph", "passes.def"),
              encoding="utf-8") as f:
        names = re.findall(r"^SG_PASS\((\w+),", f.read(), re.M)
    bad = [] if names else ["src/graph/passes.def: no SG_PASS line read"]
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    row = next((l for l in readme.splitlines()
                if l.startswith("| `SIMDEV_GRAPH_PASSES`")), "")
    with open(os.path.join(root, "docs", "graph-optimizer.md"),
              encoding="utf-8") as f:
        chapter = f.read()
    order = re.search(r"order of\s+`src/graph/passes.def`:([^(]*)", chapter)
    if order is None or re.findall(r"`(\w+)`", order.group(1)) != names:
        bad.append("docs/graph-optimizer.md: the run order after "
                   f"\"order of `src/graph/passes.def`:\" is not {names}")
    for n in names:
        if f"`{n}`" not in row:
            bad.append(f"README.md: the SIMDEV_GRAPH_PASSES row misses `{n}`")
        if f"- `{n}`:" not in readme:
            bad.append(f"README.md: the pass list misses \"- `{n}`:\"")
        if f"`{n}`" not in chapter.split("order of", 1)[-1].split("\n", 3)[-1]:
            bad.append(f"docs/graph-optimizer.md: no section names `{n}`")
    return bad


# gdb: "fn (args) at src/x.c:N"; ASan: "#3 0x... in fn src/x.c:N"
FRAME = re.compile(r"\b(\w+) \([^\n]*?\) at (src/[\w/]+\.(?:c|cc|h)):\d+"
                   r"|#\d+ 0x[0-9a-f]+ in (\w+) (src/[\w/]+\.(?:c|cc|h)):\d+")


def frames_in_place(root):
    """A recorded backtrace frame `fn (...) at src/x.c:N` names a function
    x.c still defines (or a macro there expands to): a function that moved
    to another file means the transcript is stale and must be re-recorded
    (the line N itself drifts with any edit and is not checked)."""
    bad, seen = [], 0
    for doc in sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for m in FRAME.finditer(text):
            fn, path = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            seen += 1
            full = os.path.join(root, path)
            if not os.path.exists(full):
                continue  # stale() reports it
            with open(full, encoding="utf-8") as f:
                src = f.read()
            # a definition: the name at a line's start after its return
            # type, or generated by a macro given a proper stem of it as
            # its first argument (RED_DEFINE(sum_f32, ...) defines
            # sum_f32_row); never the whole name, which this tree's
            # comments write as "(fn, file.c)"
            parts = fn.split("_")
            stems = ["_".join(parts[:k]) for k in range(2, len(parts))]
            if not (re.search(r"^[^\s#/][^;=\n]*\b%s\(" % fn, src, re.M) or
                    any(re.search(r"\(%s[,)]" % s, src) for s in stems)):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{os.path.relpath(doc, root)}:{line}: frame "
                           f"{fn} is not defined in {path}: re-record it")
    if seen == 0:  # docs/debugging.md records dozens: the pattern broke
        bad.append("docs/*.md: no recorded backtrace frame read (FRAME)")
    return bad


def main(root):
    bad = stale(root) + passes_named(root) + frames_in_place(root)
    for b in bad:
        print(b)
    print("docrefs: " + (f"{len(bad)} stale references" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
