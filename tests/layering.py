"""The layering rules of src/, checked on the sources and the built objects.

1. A module (a folder of src/; each subfolder of src/kernels/ is one)
   includes another module's code only through that module's public
   header(s) (PUBLIC below): never an *_internal.h or a
   kernel family header of another folder.
2. A module includes only the modules DEPENDS lists for it (the layers
   below it, and profiler beside se and xla; no circle, checked), and only
   TF_USERS include TensorFlow's headers directly (the kernel families
   get them through the framework's sk.h).
3. No two files of one module call each other in a circle (a strongly
   connected component of the file-level call graph with more than one
   file), unless ALLOWED_CIRCLES lists it with the reason. The call graph
   comes from `nm` on the object files CMake built: a file uses a symbol
   another file of the same folder defines.

Includes are read in both forms, "..." and <...>; a path names simdev's
module when the file exists under src/ (else it is another project's, e.g.
TF's "dlpack/dlpack.h"), and a bare name must be a header of the
includer's own folder (not another module's, found through an include
path).

Usage: python3 tests/layering.py SOURCE_DIR BUILD_DIR   (ctest: layering)
       python3 tests/layering.py --selftest   (ctest: layering.selftest:
       rules 1 and 2 report each kind of forbidden include of a made-up
       tree, with the rule's own message, and pass the allowed ones)
Exit status 0 when the three rules hold; the report lists every violation.
"""
import collections
import glob
import os
import re
import subprocess
import sys

PUBLIC = {
    "device_sim": "device_sim/sim.h",
    # TF-free arithmetic: sa.h (GEMM, convolution, epilogue); scalar.h (the
    # element-wise scalar functions, header-only); ewprog.h (element-wise
    # programs and the table of fusable ops, read by the kernels and the
    # graph optimizer); ewops.h (THE list of pure float elementwise ops, an
    # X-macro the cwise kernels and ewprog.c expand); dims.h (checked shape
    # arithmetic); gather.h (index checks, gathers, the scatter walk)
    "arith": ("arith/sa.h", "arith/scalar.h", "arith/ewprog.h",
              "arith/ewops.h", "arith/dims.h", "arith/gather.h"),
    # the XLA FFI handlers (libsimdev_xla.so); jaxlib's c_api.h is included
    # with <>, as a system header
    "xla": "xla/sx.h",
    "se": "se/se.h",
    # The kernel framework: what every op family may use. sk_tf.h is sk.h's
    # own (TF's kernel headers), families.def its list of families.
    "kernels/framework": ("kernels/framework/sk.h", "kernels/framework/f16.h",
                          "kernels/framework/fused.h"),
    # Op families: their headers (cwise.h, conv.h, array.h, random.h) are
    # for the family's own files; no other folder includes them.
    "kernels/math": (),
    "kernels/nn": (),
    "kernels/linalg": (),
    "kernels/image": (),
    "kernels/array": (),
    "kernels/random": (),
    "kernels/interop": (),
    # resource variables through kernels_experimental.h, found at run time
    # (variables.h is the folder's own)
    "kernels/variables": (),
    "dlpack": "dlpack/dlp.h",
    "pbwire": "pbwire/pbwire.h",
    "graph": "graph/graph.h",
    "profiler": "profiler/sp.h",
    # what differs between TF releases, and TF functions found at run time
    "tfcompat": "tfcompat/tfc.h",
}
_FAMILY = ("kernels/framework", "arith")
# Rule 2: module -> the modules it may include (the layers below it).
DEPENDS = {
    "device_sim": (),
    "pbwire": (),
    "dlpack": (),
    "arith": ("device_sim",),  # sim_err codes only (sim.h)
    "tfcompat": (),
    "profiler": ("device_sim", "pbwire", "tfcompat"),
    "se": ("device_sim", "profiler", "tfcompat"),
    "graph": ("arith", "pbwire", "tfcompat"),
    "xla": ("arith", "device_sim", "profiler"),
    "kernels/framework": ("arith", "device_sim", "pbwire", "se", "tfcompat"),
    "kernels/math": _FAMILY,
    "kernels/nn": _FAMILY,
    "kernels/linalg": _FAMILY,
    "kernels/image": _FAMILY,
    "kernels/array": _FAMILY,
    "kernels/random": _FAMILY,
    "kernels/interop": _FAMILY + ("dlpack", "se", "tfcompat"),
    "kernels/variables": _FAMILY + ("tfcompat",),
}
# Rule 2: who may include "tensorflow/...": the TF boundaries. A module
# name admits all its files; a path admits one file.
TF_USERS = ("tfcompat", "se", "kernels/framework", "kernels/math",
            "kernels/interop", "kernels/variables",
            "graph/plugin.c", "profiler/plugin.c")

# Rule 3: frozenset of files -> why the circle must be. Empty: none is needed.
ALLOWED_CIRCLES = {}


def include_violations(src):
    bad = []
    for path in sorted(glob.glob(os.path.join(src, "src", "**", "*.*"), recursive=True)):
        if not path.endswith((".c", ".h", ".cc")):
            continue
        mod = os.path.relpath(os.path.dirname(path), os.path.join(src, "src"))
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if mod not in PUBLIC or mod not in DEPENDS:
            bad.append(f"{os.path.relpath(path, src)}: folder {mod} is not "
                       "in tests/layering.py's PUBLIC and DEPENDS (add it "
                       "with its public headers and the modules it uses)")
        where = os.path.relpath(path, src)
        for inc in re.findall(r'^\s*#\s*include\s+["<]([^">]+)[">]', text, re.M):
            if inc.startswith("."):
                # "../math/cwise.h" would slip past the rules below: name
                # the header as every other include does, from src/.
                bad.append(f"{where} includes {inc} (a relative path: include "
                           "from src/, e.g. \"kernels/framework/sk.h\")")
                continue
            if inc.startswith("tensorflow/"):
                rel = os.path.relpath(path, os.path.join(src, "src"))
                if mod not in TF_USERS and rel not in TF_USERS:
                    bad.append(f"{where} includes {inc}: only "
                               f"{', '.join(TF_USERS)} may (TF_USERS)")
                continue
            if "/" not in inc:
                if os.path.exists(os.path.join(os.path.dirname(path), inc)):
                    continue  # its own folder's header
                owners = sorted(m for m in PUBLIC
                                if os.path.exists(os.path.join(src, "src", m, inc)))
                if owners:
                    bad.append(f"{where} includes {inc} by its bare name: it is "
                               f"{owners[0]}'s; include \"{owners[0]}/{inc}\"")
                continue  # a system header
            if not os.path.exists(os.path.join(src, "src", inc)):
                continue  # another project's header (TF's dlpack, jaxlib's FFI)
            other = os.path.dirname(inc)
            if (other != mod and other in PUBLIC and mod in DEPENDS and
                    other not in DEPENDS[mod]):
                bad.append(f"{where} includes {inc}: {mod} may use only "
                           f"{', '.join(DEPENDS[mod]) or 'no other module'} "
                           "(DEPENDS: a layer uses the layers below it)")
                continue
            allowed = PUBLIC.get(other, ())
            allowed = (allowed,) if isinstance(allowed, str) else allowed
            if other != mod and other in PUBLIC and inc not in allowed:
                use = (f"use {' or '.join(allowed)}" if allowed else
                       f"{other}'s headers are for its own files")
                bad.append(f"{os.path.relpath(path, src)} includes {inc} "
                           f"({use})")
    return bad


def call_graph(build):
    objs = glob.glob(os.path.join(build, "CMakeFiles", "*", "src", "**", "*.o"),
                     recursive=True)
    defined, used = {}, collections.defaultdict(set)
    for o in objs:
        # .../CMakeFiles/<target>.dir/src/<module>/<file>.c.o -> src/<module>/<file>.c
        rel = "src/" + o.split(os.sep + "src" + os.sep, 1)[1][:-2]
        out = subprocess.run(["nm", o], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBRC":
                defined[parts[2]] = rel
            elif len(parts) == 2 and parts[0] == "U":
                used[rel].add(parts[1])
    graph = collections.defaultdict(set)
    for f, syms in used.items():
        for s in syms:
            g = defined.get(s)
            if g and g != f and os.path.dirname(g) == os.path.dirname(f):
                graph[f].add(g)
    return objs, graph


def circles(graph):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, found, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main(src, build):
    problems = include_violations(src)
    for comp in circles({m: set(d) for m, d in DEPENDS.items()}):
        problems.append("DEPENDS has a circle: " + ", ".join(comp))
    objs, graph = call_graph(build)
    if len(objs) < 10:
        problems.append(f"only {len(objs)} object files under {build}: build first")
    for comp in circles(graph):
        if frozenset(comp) not in ALLOWED_CIRCLES:
            problems.append("files call each other in a circle: " + ", ".join(comp))
    print(f"layering: {len(objs)} objects, "
          f"{sum(len(v) for v in graph.values())} file-to-file call edges")
    for p in problems:
        print("  " + p)
    print("layering: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


def selftest():
    """Rules 1 and 2 on a made-up tree in a temporary folder
    (include_violations): each forbidden include must be reported with its
    rule's message, each allowed one not at all (ctest: layering.selftest)."""
    import tempfile
    headers = ["src/device_sim/sim.h", "src/device_sim/sim_internal.h",
               "src/se/se.h", "src/se/se_internal.h", "src/dlpack/dlp.h",
               "src/graph/graph.h", "src/kernels/math/cwise.h",
               "src/kernels/framework/sk.h", "src/kernels/framework/sk_internal.h"]
    # file -> (its text, the message fragment it must get; None: allowed)
    files = {
        "src/se/ok.c": ('#include "se_internal.h"\n#include "device_sim/sim.h"\n'
                        '#include <stdio.h>\n#include "dlpack/dlpack.h"\n', None),
        "src/kernels/math/ok.c": ('#include "kernels/math/cwise.h"\n'
                                  '#include <kernels/framework/sk.h>\n', None),
        "src/graph/plugin.c": ('#include "tensorflow/c/tf_status.h"\n'
                               '#include "graph/graph.h"\n', None),
        "src/kernels/interop/ok.c": ('#include "dlpack/dlp.h"\n'
                                     '#include "tensorflow/c/ops.h"\n', None),
        # rule 1: another module's private headers
        "src/se/bad_internal.c": ('#include "device_sim/sim_internal.h"\n',
                                  "use device_sim/sim.h"),
        "src/kernels/interop/bad_internal.c": ('#include "se/se_internal.h"\n',
                                               "use se/se.h"),
        "src/kernels/nn/bad_framework.c": ('#include "kernels/framework/sk_internal.h"\n',
                                           "use kernels/framework/sk.h"),
        "src/kernels/nn/bad_relative.c": ('#include "../math/cwise.h"\n', "relative path"),
        "src/se/bad_bare.c": ('#include "sim_internal.h"\n', "by its bare name"),
        "src/newmod/x.c": ("int x;\n", "not in tests/layering.py's PUBLIC"),
        # rule 2: upward, sideways, another family, TF outside its boundaries
        "src/device_sim/bad_up.c": ('#include "se/se.h"\n', "DEPENDS"),
        "src/graph/bad_side.c": ('#include "device_sim/sim.h"\n', "DEPENDS"),
        "src/kernels/nn/bad_family.c": ('#include "kernels/math/cwise.h"\n', "DEPENDS"),
        "src/kernels/nn/bad_angle.c": ('#include <kernels/math/cwise.h>\n', "DEPENDS"),
        "src/arith/bad_tf.c": ('#include "tensorflow/c/tf_tensor.h"\n', "TF_USERS"),
        "src/arith/bad_angle_tf.c": ('#include <tensorflow/c/tf_tensor.h>\n', "TF_USERS"),
        "src/graph/bad_tf.c": ('#include "tensorflow/c/tf_status.h"\n', "TF_USERS"),
    }
    with tempfile.TemporaryDirectory() as d:
        for rel, text in [(h, "") for h in headers] + [(f, t) for f, (t, _) in files.items()]:
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                f.write(text)
        found = include_violations(d)
    failed = 0
    for rel, (_, want) in files.items():
        hits = [b for b in found if b.startswith(rel.replace("/", os.sep))]
        if want is None and hits:
            failed += 1
            print(f"selftest: {rel}: allowed, but reported: {hits}")
        elif want is not None and not any(want in h for h in hits):
            failed += 1
            print(f"selftest: {rel}: want a report with {want!r}, got {hits}")
    print("layering selftest: " + ("FAILED" if failed else
                                   f"ok ({len(found)} violations found)"))
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        sys.exit(selftest())
    sys.exit(main(sys.argv[1], sys.argv[2]))
