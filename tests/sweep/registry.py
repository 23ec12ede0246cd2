"""simdev's registrations as TF's registry holds them, and the checks on
them. Needs TensorFlow imported with the plugin loaded (TF loads the plugin
when it is imported).

read() -> {"simdev": {op: [kernel]}, "default": {op: [kernel]}} where a
kernel is {"constraints": {attr: [dtype names]}, "host_memory": [names],
"priority": int}.
"""
import itertools


def _kernel(k):
    from tensorflow.python.framework import dtypes
    return {"constraints": {c.name: [dtypes.as_dtype(t).name
                                     for t in c.allowed_values.list.type]
                            for c in k.constraint},
            "host_memory": list(k.host_memory_arg), "priority": k.priority}


def read():
    from tensorflow.python.framework import kernels
    out = {"simdev": {}, "default": {}}
    for k in kernels.get_all_registered_kernels().kernel:
        key = {"SIMDEV": "simdev", "DEFAULT": "default"}.get(k.device_type)
        if key:
            out[key].setdefault(k.op, []).append(_kernel(k))
    return out


def kernel_combos(k):
    """The dtype combinations one kernel covers: [{attr: dtype}]."""
    names = sorted(k["constraints"])
    return [dict(zip(names, vals)) for vals in
            itertools.product(*(k["constraints"][n] for n in names))]


def combos(kernels_of_op):
    """Every dtype combination registered for an op, sorted, once each."""
    seen, out = set(), []
    for k in kernels_of_op:
        for c in kernel_combos(k):
            key = tuple(sorted(c.items()))
            if key not in seen:
                seen.add(key)
                out.append(c)
    return sorted(out, key=lambda c: tuple(sorted(c.items())))


def _covers(kernel, combo):
    """Whether `kernel` (a DEFAULT or SIMDEV kernel) would be chosen for an
    op with the attribute types of `combo`: every constraint of the kernel
    allows the combo's type (an attribute the combo leaves free matches)."""
    return all(combo.get(a) is None or combo[a] in allowed
               for a, allowed in kernel["constraints"].items())


# SIMDEV kernels that replace TF's DEFAULT ones on purpose, and why.
_VARIABLES = ("TF's DEVICE_DEFAULT AssignAdd/SubVariableOp update the variable's device "
              "memory with host code (docs/kernel-api.md, \"Variables\"); where TF exports "
              "kernels_experimental.h's functions (2.16-2.18) simdev registers its own "
              "variable kernels (src/kernels/variables/), which queue every copy and "
              "update on the stream")
OVERRIDES = {op: _VARIABLES for op in ("ReadVariableOp", "AssignVariableOp",
                                       "AssignAddVariableOp", "AssignSubVariableOp")}


def check(reg):
    """Messages for every broken rule (empty: all good):
    - an op + dtype combination registered twice for SIMDEV (overlapping
      constraints: TF picks one by priority, or refuses both);
    - a SIMDEV kernel for an op and types TF already has a DEFAULT kernel
      for (TF's DEFAULT kernel serves SIMDEV too; the two conflict), unless
      OVERRIDES says why simdev replaces it;
    - a type constraint on an attribute the op's OpDef lacks;
    - a host-memory argument the OpDef has no input or output of."""
    from tensorflow.python.framework import op_def_registry
    msgs = []
    for op, ks in sorted(reg["simdev"].items()):
        opdef = op_def_registry.get(op)
        if opdef is None:
            msgs.append(f"{op}: registered on SIMDEV but TF has no OpDef for it")
            continue
        attrs = {a.name for a in opdef.attr}
        args = {a.name for a in opdef.input_arg} | {a.name for a in opdef.output_arg}
        seen = {}
        for i, k in enumerate(ks):
            for a in k["constraints"]:
                if a not in attrs:
                    msgs.append(f"{op}: type constraint on {a!r}, which the OpDef "
                                f"lacks (attributes: {sorted(attrs)})")
            for h in k["host_memory"]:
                if h not in args:
                    msgs.append(f"{op}: host-memory argument {h!r} is not an input "
                                f"or output of the OpDef ({sorted(args)})")
            for c in kernel_combos(k):
                key = tuple(sorted(c.items()))
                if key in seen:
                    msgs.append(f"{op}: {dict(key)} registered twice for SIMDEV "
                                f"(kernels {seen[key]} and {i})")
                seen[key] = i
                for d in reg["default"].get(op, []) if op not in OVERRIDES else []:
                    if _covers(d, c):
                        msgs.append(f"{op}: SIMDEV kernel for {dict(key)} duplicates "
                                    f"TF's DEFAULT kernel {d['constraints']} (host "
                                    f"memory {d['host_memory']}); drop the SIMDEV one")
                        break
    return msgs
