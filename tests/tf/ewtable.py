"""The rows of src/arith/ewops.h: THE list of simdev's pure float elementwise
ops, from which cwise.c and cwise_binary.c generate the unfused SIMDEV
kernels and ewprog.c the fusable-op table of _SimdevFusedElementwise.

Read from the source text (no TF, no build), so a test that iterates over
ROWS or TABLE covers a new row without being edited. The parser is strict:
every line of the SA_EWOPS macro must be one well-formed row, so a row it
cannot read is an error here, never a row silently left out.
"""
import collections
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
EWOPS_H = os.path.join(HERE, "..", "..", "src", "arith", "ewops.h")

# kind: "U" unary, "B" broadcasting binary, "G" gradient (no broadcasting);
# i64: the unfused op also has an int64 kernel; same_shape (G only): TF
# requires equal shapes (else equal element counts); operands (G only): the
# OpDef's input names in operand order.
Row = collections.namedtuple(
    "Row", "name kind arity stem i64 same_shape operands")

_ROW = re.compile(r"^\s*([UBG])\(([^()]*)\)\s*\\?\s*$")


def _rows():
    with open(EWOPS_H, encoding="utf-8") as f:
        text = f.read()
    head = "#define SA_EWOPS(U, B, G)"
    body = text[text.index(head) + len(head):]
    body = body[:body.index("// clang-format on")]
    lines = [l for l in body.splitlines() if l.strip() not in ("", "\\")]
    rows = []
    for line in lines:
        m = _ROW.match(line)
        if m is None:
            raise ValueError(f"ewops.h: not a row of SA_EWOPS: {line!r}")
        kind = m.group(1)
        args = [a.strip() for a in m.group(2).split(",")]
        if kind in "UB":
            name, stem, ints = args
            shape, operands = None, None
        else:
            name, stem, shape, in0, in1 = args
            if shape not in ("SHAPE", "COUNT"):
                raise ValueError(f"ewops.h: {name}: shape {shape!r}")
            ints, shape, operands = "FLT", shape == "SHAPE", (in0, in1)
        if ints not in ("I64", "FLT"):
            raise ValueError(f"ewops.h: {name}: ints {ints!r}")
        rows.append(Row(name, kind, 1 if kind == "U" else 2, stem,
                        ints == "I64", shape, operands))
    names = [r.name for r in rows]
    if len(set(names)) != len(names):
        raise ValueError(f"ewops.h: an op listed twice: {names}")
    return rows


ROWS = _rows()
# {op name: arity}: the fusable-op table as sa_ewprog_arity sees it
TABLE = {r.name: r.arity for r in ROWS}
