"""The registration sweep: every op simdev registers, for every registered
dtype combination, through TF's own dispatch on SIMDEV and on CPU.

    .venv/bin/python tests/sweep/sweep.py            # full (make sweep)
    .venv/bin/python tests/sweep/sweep.py --quick    # fewer shapes (make test)
    .venv/bin/python tests/sweep/sweep.py --write-docs   # also rewrite
                              docs/kernels.md and docs/kernel-errors.md
    .venv/bin/python tests/sweep/sweep.py --cpu-onednn   # also list where
                              oneDNN's CPU kernels differ from Eigen's

Two processes. This one has the plugin loaded (TF loads it at import) and
TF_ENABLE_ONEDNN_OPTS as the environment sets it, so simdev is tested in
the TF its users get; it runs SIMDEV. TF CPU, the reference, runs in a
child (reference.py) with TF_ENABLE_ONEDNN_OPTS=0: TF's Eigen kernels on
every machine, as oneDNN's (TF's default on AVX-512 machines) crash on
some bad inputs and differ on others. The child rebuilds each case from
its name; if it dies, that case is reported ("cpu_reference": TF CPU
crashed, with the signal) and the next case gets a new child. TF CPU
still runs here only to make inputs (tf.constant; MaxPoolGrad's spec runs
MaxPool for its orig_output) and in Spec.prop checks (the fused
elementwise op's unfused CPU chain). What it does:
  - reads simdev's registrations from TF's registry
    (kernels.get_all_registered_kernels(), device_type SIMDEV) and checks
    them (registry.py): no op+dtypes registered twice, none duplicating a
    DEFAULT kernel, constraints and host-memory args named in the OpDef;
  - for every registered op and dtype combination, runs each case of the
    op's spec (specs.py) with tf.raw_ops in eager mode, soft placement off,
    on /device:SIMDEV:0 twice and on /device:CPU:0 once (in the reference
    process), on the same input values; every output must be on SIMDEV,
    the two SIMDEV runs must agree bit for bit, and SIMDEV must match CPU
    (bit for bit for integers, bools and data movement; within `ulps` unit
    roundoffs of the dtype for floats) or, where CPU has no kernel, satisfy
    the spec's property (which runs in this process);
  - full sweep only: runs each case once more inside a tf.function on
    SIMDEV (graph dispatch) and compares it with the eager run;
  - runs each bad case on SIMDEV and on CPU: both must raise, the same class;
  - runs specs of ops not (yet) registered CPU against CPU, so they are
    known good when the kernel lands ("spec without registration");
  - an op registered with no spec is "unaccounted" and fails the sweep;
  - --cpu-onednn: a second reference process with TF_ENABLE_ONEDNN_OPTS=1
    runs every CPU case too, and each difference from Eigen's (a crash,
    another error class, an error where the other gives outputs, outputs
    beyond the spec's bound) is listed ("ONEDNN" lines, the report's
    "onednn"); these are TF's, not failures (docs/tf-cpu-divergences.md).
Prints a summary and one line per failure; exit status 1 on any failure.
--json FILE writes the whole report (tests/tf/test_sweep.py reads it).
"""
import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import docs  # noqa: E402
import reference  # noqa: E402
import registry  # noqa: E402
from specs import SPECS  # noqa: E402

UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8,
                 "float32": 2.0 ** -24, "float64": 2.0 ** -53,
                 "complex64": 2.0 ** -24, "complex128": 2.0 ** -53}
# The smallest normal number: TF's CPU threads flush subnormals to zero.
TINY = {"float16": 2.0 ** -14, "bfloat16": 2.0 ** -126, "float32": 2.0 ** -126,
        "float64": 2.0 ** -1022, "complex64": 2.0 ** -126, "complex128": 2.0 ** -1022}
# The texts of TF's placement/registration errors (as in
# tests/tf/conftest.py's PLACEMENT_ERRORS): a kernel TF does not have.
PLACEMENT_ERRORS = ("Could not satisfy", "No registered", "no supported kernel",
                    "Could not find device for node", "Cannot assign a device",
                    "not registered")
SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"


def np_dtype(name):
    import tensorflow as tf
    return np.dtype(tf.as_dtype(name).as_numpy_dtype)


def cast_to(a, name):
    """NumPy values (a spec's natural dtype) as dtype `name`: integers are
    rounded, bools are a > 0, unsigned types take |a|."""
    a = np.asarray(a)
    dt = np_dtype(name)
    if a.dtype == dt:
        return a
    if dt == np.bool_:
        return a > 0
    if dt.kind in "iu":
        v = np.rint(a.astype(np.float64)) if a.dtype.kind in "fc" else a
        if dt.kind == "u":
            v = np.abs(v)
        return v.astype(dt)
    if a.dtype == np.bool_:
        return a.astype(np.float32).astype(dt)
    return a.astype(np.float64).astype(dt) if a.dtype.kind != "c" else a.astype(dt)


def _attr_default(value):
    """An OpDef attribute's default (AttrValue) as a Python value."""
    kind = value.WhichOneof("value")
    if kind == "list":
        for field in ("s", "i", "f", "b", "type"):
            if len(getattr(value.list, field)):
                return list(getattr(value.list, field))
        return []
    return getattr(value, kind) if kind else None


def op_function(op, opdef):
    """A tf.raw_ops-like function for an op tf.raw_ops leaves out (names with
    a leading underscore: _SimdevFusedElementwise, TF's _Fused* ops): keyword
    arguments named after the OpDef's inputs and attributes. Eager: runs
    execute.execute, with type and number attributes taken from the inputs
    (attributes not given keep their OpDef defaults); inside a tf.function:
    adds the node with op_def_library. Returns the output tensor, or a list
    of them. `params`: the OpDef's input names, in order (for Call)."""
    import tensorflow as tf
    from tensorflow.python.eager import context, execute
    from tensorflow.python.framework import op_def_library

    def fn(**kw):
        for a in opdef.input_arg:  # a list input left out is empty
            if (a.number_attr or a.type_list_attr) and a.name not in kw:
                kw[a.name] = []   # (_FusedConv2D's host_args)
        if not tf.executing_eagerly():
            # the helper wants every attribute the inputs do not give
            # (_FusedMatMul's transpose_a ...): the OpDef's defaults
            given = {x for a in opdef.input_arg
                     for x in (a.type_attr, a.number_attr, a.type_list_attr) if x}
            for at in opdef.attr:
                if at.name not in kw and at.name not in given and \
                        at.HasField("default_value"):
                    kw[at.name] = _attr_default(at.default_value)
            _, _, node, _ = op_def_library._apply_op_helper(
                op, name=op.lstrip("_"), **kw)
            outs = list(node.outputs)
            return outs[0] if len(outs) == 1 else outs
        inputs, inferred = [], {}
        for a in opdef.input_arg:
            v = kw[a.name]
            many = bool(a.number_attr or a.type_list_attr)
            ts = [tf.convert_to_tensor(x) for x in (v if many else [v])]
            if a.number_attr:
                inferred[a.number_attr] = len(ts)
            if a.type_attr:
                inferred[a.type_attr] = ts[0].dtype.as_datatype_enum if ts else None
            if a.type_list_attr:
                inferred[a.type_list_attr] = [t.dtype.as_datatype_enum for t in ts]
            inputs += ts
        attrs = []
        for at in opdef.attr:
            if at.name in inferred and inferred[at.name] is not None:
                val = inferred[at.name]
            elif at.name in kw:
                val = kw[at.name]
                if isinstance(val, tf.DType):
                    val = val.as_datatype_enum
            else:
                continue
            attrs += [at.name, val]
        values = dict(zip(attrs[::2], attrs[1::2]))
        nout = 0
        for a in opdef.output_arg:
            if a.number_attr:
                nout += values[a.number_attr]
            elif a.type_list_attr:
                nout += len(values[a.type_list_attr])
            else:
                nout += 1
        outs = execute.execute(op, nout, inputs, tuple(attrs), context.context())
        return outs[0] if len(outs) == 1 else list(outs)

    fn.params = [a.name for a in opdef.input_arg]
    return fn


class Call:
    """One case of one op with one dtype combination, made into tensors."""

    def __init__(self, op, opdef, combo, case):
        import tensorflow as tf
        self.op, self.case = op, case
        self.fn = getattr(tf.raw_ops, op, None)
        if self.fn is None:  # not in tf.raw_ops: an op with a leading _
            self.fn = op_function(op, opdef)
        # tf.raw_ops takes the OpDef's inputs first, in order, under names
        # that are sometimes Python's own (Select's t, e are x, y).
        import inspect
        params = getattr(self.fn, "params", None) or \
            list(inspect.signature(self.fn).parameters)
        args = {params[i]: a for i, a in enumerate(opdef.input_arg)}
        op_attrs = {a.name for a in opdef.attr}
        bad = [a for a in combo if a not in op_attrs]
        if bad:
            raise ValueError(f"combination names {bad}, not attributes of {op}")
        attr_default = {a.name: a.default_value.type for a in opdef.attr
                        if a.type == "type" and a.default_value.HasField("type")}
        inferred = set()
        for a in opdef.input_arg:
            if a.type_attr:
                inferred.add(a.type_attr)
        kw = {}
        with tf.device(CPU):
            for k, v in case.kwargs.items():
                arg = args.get(k)
                if arg is None:
                    kw[k] = v
                    continue
                want = None
                if arg.type_attr and arg.type_attr in combo:
                    want = combo[arg.type_attr]
                elif arg.type:
                    want = tf.as_dtype(arg.type).name
                elif arg.type_list_attr and len(combo) == 1:
                    # _FusedConv2D's args (TArgs): of the one type under test
                    want = next(iter(combo.values()))
                elif arg.type_attr:
                    want = self._unconstrained(v, arg.type_attr, attr_default)
                conv = (lambda x: tf.constant(cast_to(x, want) if want else np.asarray(x)))
                kw[k] = [conv(x) for x in v] if isinstance(v, list) else conv(v)
        for attr, dt in combo.items():
            if attr not in inferred and attr not in kw:
                kw[attr] = tf.as_dtype(dt)
        self.kw = kw

    @staticmethod
    def _unconstrained(v, attr, defaults):
        """An input type the registration leaves open: the OpDef's default
        for generic float values, else the spec's own dtype."""
        import tensorflow as tf
        x = np.asarray(v[0] if isinstance(v, list) else v)
        if x.dtype == np.float64:
            if attr in defaults:
                return tf.as_dtype(defaults[attr]).name
            if attr == "U":  # FusedBatchNorm's statistics: float32
                return "float32"
        return None

    def run(self, dev, fn=None):
        """[(numpy output, device)] of one run on `dev` (of fn instead of the
        op when given: Spec.cpu_op)."""
        import tensorflow as tf
        with tf.device(dev):
            out = (fn or self.fn)(**self.kw)
        flat = []

        def walk(x):
            if isinstance(x, (list, tuple)):
                for y in x:
                    walk(y)
            else:
                flat.append(x)
        walk(out)
        return [(t.numpy(), t.device) for t in flat]


def bits_equal(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def compare(a, b, spec):
    """SIMDEV output a against CPU output b: None when they agree, else why.
    Floats: |a - b| <= ulps * u * (|b| + max|b|) + 4 tiny elementwise (u:
    the dtype's unit roundoff; the max|b| term only for spec.scaled: sums
    whose terms are of the output's size and may cancel; tiny: the smallest
    normal, as TF CPU flushes subnormals), NaNs in the same places, the
    same infinities."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{list(a.shape)} vs CPU {b.dtype}{list(b.shape)}"
    if not a.size:
        return None
    name = a.dtype.name if a.dtype.name in UNIT_ROUNDOFF else None
    if spec.exact or name is None or spec.ulps == 0:
        if bits_equal(a, b):
            return None
        if name is not None:  # -0.0 vs 0.0 and different NaN payloads
            fa, fb = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), \
                b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
            if np.array_equal(fa, fb, equal_nan=True):
                return None
        i = int(np.flatnonzero((a != b).reshape(-1))[0]) if a.shape else 0
        return f"not bit-equal: first at flat {i}: {a.reshape(-1)[i]!r} vs CPU {b.reshape(-1)[i]!r}"
    fa = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    fb = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    na, nb = np.isnan(fa), np.isnan(fb)
    if (na != nb).any():
        return "NaNs in different places"
    ia, ib = np.isinf(fa), np.isinf(fb)
    if (ia != ib).any() or (fa[ia] != fb[ib]).any():
        return "infinities differ"
    fin = ~(na | ia)
    if not fin.any():
        return None
    u = max(UNIT_ROUNDOFF[name], UNIT_ROUNDOFF.get(spec.compute_dtype, 0.0))
    scale = np.abs(fb[fin]).max() if spec.scaled else 0.0
    bound = spec.ulps * u * (np.abs(fb[fin]) + scale) + 4 * TINY[name]
    err = np.abs(fa[fin] - fb[fin])
    if (err <= bound).all():
        return None
    k = int(np.argmax(err / bound))
    return (f"|SIMDEV - CPU| = {err[k]:.3g} > {bound[k]:.3g} ({spec.ulps} ulps) at "
            f"{fa[fin][k]!r} vs CPU {fb[fin][k]!r}")


def placement_error(msg):
    return any(p in msg for p in PLACEMENT_ERRORS)


def short(msg):
    """An error message for the table: without TF's function-node prefix,
    the [Op:...] suffix and line breaks."""
    msg = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", msg or "")
    msg = re.sub(r"\s*\[Op:[^\]]*\].*$", "", msg, flags=re.S)
    msg = " ".join(msg.split())
    return msg[:160]


def applies(case, combo):
    """Whether a case is meant for this dtype combination (Case.only)."""
    if case.only is None:
        return True
    if isinstance(case.only, dict):
        return all(combo.get(a) in ok for a, ok in case.only.items() if a in combo)
    return next(iter(combo.values()), None) in case.only


def case_what(op, combo, case, bad=False):
    """How the sweep names a case in its failures (and reference.py's
    SIMDEV_SWEEP_TEST_ABORT names one)."""
    return f"{op} {docs.combo_str(combo)} [{'bad: ' if bad else ''}{case.name}]"


def err_name(e):
    """An error's class name: TF CPU's (reference.CpuError) or a local one."""
    return e.name if isinstance(e, reference.CpuError) else type(e).__name__


def try_run(call, dev, fn=None):
    try:
        return call.run(dev, fn), None
    except Exception as e:  # the class and text are what is compared
        return None, e


def dlpack_roundtrip(case, combo):
    """SimdevFromDlpack + SimdevToDlpack (no CPU kernel): a tensor imported
    from a TF CPU tensor, exported and imported again, keeps its bits and
    lives on SIMDEV."""
    import tensorflow as tf
    from simdev import dlpack as sdl
    dt = combo.get("T") or combo.get("dtype")
    x = cast_to(case.kwargs["x"], dt)
    with tf.device(CPU):
        src = tf.constant(x)
    runs = []
    for _ in range(2):
        t = sdl.from_dlpack(src, copy=True)
        t2 = sdl.from_dlpack(sdl.to_dlpack(t))
        runs.append((t2.numpy(), t2.device))
    return runs, x


def variable_run(op, case, combo, dev):
    """A resource-variable op (Spec.prop "variable"): a tf.Variable of
    case.kwargs["x"] made on dev, the op on its handle (with "value" for the
    assignments; "indices", "updates" for the sparse ops), then the gather's
    output or the variable read back: [(numpy output, device)]."""
    import tensorflow as tf
    dt = combo.get("dtype") or combo["T"]
    kw = case.kwargs
    with tf.device(dev):
        v = tf.Variable(cast_to(kw["x"], dt))
        fn = getattr(tf.raw_ops, op)
        if op == "ReadVariableOp":
            out = fn(resource=v.handle, dtype=tf.as_dtype(dt))
        elif "indices" in kw:  # the sparse ops (tests/sweep/specs_sparse_var.py)
            idx = tf.constant(np.asarray(kw["indices"]).astype(combo["Tindices"]))
            if "Gather" in op:
                extra = {"batch_dims": kw["batch_dims"]} if "batch_dims" in kw else {}
                out = fn(resource=v.handle, indices=idx, dtype=tf.as_dtype(dt), **extra)
            else:
                key = "ref" if op.startswith("ResourceScatterNd") else "resource"
                fn(**{key: v.handle}, indices=idx,
                   updates=tf.constant(cast_to(kw["updates"], dt)))
                out = v.read_value()
        else:
            fn(resource=v.handle, value=tf.constant(cast_to(case.kwargs["value"], dt)))
            out = v.read_value()
    return [(out.numpy(), out.device)]


def variant_run(op, case, dev):
    """AddN / ZerosLike for T=variant (src/kernels/variables/variant_ops.c,
    TF 2.16-2.18): each array input of the case (float32) wrapped as a
    one-element TensorList made on dev, the op on the lists, its result
    stacked back: [(numpy output, the op's device)]."""
    import tensorflow as tf
    es = tf.constant(-1, tf.int32)  # elements of any shape
    with tf.device(dev):
        def wrap(a):
            return tf.raw_ops.TensorListFromTensor(
                tensor=tf.constant(np.asarray(a, np.float32)[None]), element_shape=es)
        kw = case.kwargs
        if op == "AddN":
            out = tf.raw_ops.AddN(inputs=[wrap(a) for a in kw["inputs"]])
        else:
            out = getattr(tf.raw_ops, op)(x=wrap(kw["x"]))
        got = tf.raw_ops.TensorListStack(input_handle=out, element_dtype=tf.float32,
                                         element_shape=es)
    return [(got.numpy(), out.device)]


def apply_run(op, case, combo, dev):
    """A training op (Spec.prop "apply", specs_apply.py): a tf.Variable of
    each of case.kwargs["vars"] made on dev, the op on their handles with
    the case's scalars, gradient and (sparse) indices, then every variable
    read back: [(numpy value, device)]."""
    import tensorflow as tf
    dt = combo["T"]
    kw = case.kwargs
    with tf.device(dev):
        vs = {n: tf.Variable(cast_to(x, dt)) for n, x in kw["vars"].items()}
        args = {n: v.handle for n, v in vs.items()}
        args.update({n: tf.constant(cast_to(x, dt)) for n, x in kw["scalars"].items()})
        gname, g = kw["grad"]
        args[gname] = tf.constant(cast_to(g, dt))
        if "indices" in kw:
            args["indices"] = tf.constant(kw["indices"], tf.as_dtype(combo.get("Tindices",
                                                                               "int32")))
        getattr(tf.raw_ops, op)(**args)
        return [(v.numpy(), v.device) for v in vs.values()]


class Sweep:
    def __init__(self, quick, onednn=False):
        self.quick = quick
        # TF CPU runs in child processes only (reference.py): the reference
        # SIMDEV is judged against, TF's Eigen kernels; with --cpu-onednn
        # also oneDNN's, compared with Eigen's (self.onednn, not failures).
        self.cpu = reference.Reference(onednn=False)
        self.cpu_onednn = reference.Reference(onednn=True) if onednn else None
        self.onednn = []    # {"case", "kind", "detail"}: oneDNN differs from Eigen
        self.failures = []  # "what: why" lines
        self.by_kind = {}   # kind -> [line]: registry, unaccounted, case, bad, spec, docs
        self.counts = dict(ops=0, combos=0, cases=0, bad_cases=0, unaccounted=0,
                           spec_only=0, spec_only_cases=0, property_cases=0,
                           graph_cases=0, cpu_references=0, cpu_crashes=0,
                           onednn_references=0)
        self.errors = []  # rows of docs/kernel-errors.md
        self.unaccounted = []
        self.spec_only = []

    def fail(self, what, why, kind="case"):
        line = f"{what}: {why}"
        self.failures.append(line)
        self.by_kind.setdefault(kind, []).append(line)

    def good(self, op, spec, opdef, combo, case, cpu_ref=True):
        if not cpu_ref:  # a spec without registration: its failures are the spec's
            fail = self.fail
            # (a crash of TF CPU stays one: it is not the spec's)
            self.fail = lambda w, y, kind="spec": fail(
                w, y, kind if kind == "cpu_reference" else "spec")
            try:
                return self._good(op, spec, opdef, combo, case, cpu_ref)
            finally:
                self.fail = fail
        return self._good(op, spec, opdef, combo, case, cpu_ref)

    def _good(self, op, spec, opdef, combo, case, cpu_ref):
        what = case_what(op, combo, case)
        try:
            call = Call(op, opdef, combo, case)
        except Exception as e:
            self.fail(what, f"spec could not build its inputs: {type(e).__name__}: {e}",
                      "spec")
            return
        # TF CPU's runs (one, or two for a spec without registration) go to
        # the reference process; SIMDEV runs here meanwhile.
        self.submit(op, combo, case, False, runs=1 if cpu_ref else 2)
        r1 = self.twice(what, spec, SIM, lambda i: try_run(call, SIM)) if cpu_ref else None
        if r1 is not None and not self.quick:
            self.graph(what, spec, call, r1)
        cpu = self.collect(what, spec)
        if cpu is None:
            return
        if not cpu_ref:  # CPU against CPU
            self.twice(what, spec, CPU, lambda i: cpu[i])
            return
        if r1 is None:
            return
        rc, ec = cpu[0]
        if ec is not None:
            if placement_error(str(ec)) and spec.prop is None:
                self.fail(what, "TF CPU has no kernel for this case and the spec "
                                "checks no property")
            elif placement_error(str(ec)) and callable(spec.prop):
                # no CPU kernel: the spec's property instead (Spec.prop)
                self.counts["property_cases"] += 1
                try:
                    spec.prop(lambda d: [a for a, _ in call.run(d)], case, combo)
                except Exception as e:
                    self.fail(what, f"property: {type(e).__name__}: {short(str(e))}")
            elif not placement_error(str(ec)):
                self.fail(what, f"CPU raised {ec.name} where SIMDEV did not: "
                                f"{short(str(ec))}")
            return
        if len(rc) != len(r1):
            self.fail(what, f"{len(r1)} outputs, CPU {len(rc)}")
            return
        for i, ((a, _), (b, _)) in enumerate(zip(r1, rc)):
            if spec.compare_outputs is not None and i not in spec.compare_outputs:
                if a.dtype != b.dtype or a.shape != b.shape:
                    self.fail(what, f"output {i}: {a.dtype}{list(a.shape)} vs CPU "
                                    f"{b.dtype}{list(b.shape)}")
                continue
            why = compare(a, b, spec)
            if why:
                self.fail(what, f"output {i}: {why}")

    def twice(self, what, spec, dev, run):
        """A case's two runs on `dev` (run(i) -> (outputs, error)): the first
        run's outputs when both ran, gave the same bits and, on SIMDEV, stayed
        on SIMDEV; else None, the failure recorded."""
        r1, e1 = run(0)
        if e1 is not None:
            self.fail(what, f"{dev} raised {err_name(e1)}: {short(str(e1))}")
            return None
        r2, e2 = run(1)
        if e2 is not None:
            self.fail(what, f"second run raised {err_name(e2)}: {short(str(e2))}")
            return None
        for i, ((a, d), (b, _)) in enumerate(zip(r1, r2)):
            if dev == SIM and "SIMDEV:0" not in d:
                self.fail(what, f"output {i} on {d!r}, not SIMDEV")
            if spec.compare_outputs is not None and i not in spec.compare_outputs:
                continue  # implementation-defined output (Spec.compare_outputs)
            if not bits_equal(a, b):
                self.fail(what, f"output {i}: two runs differ (not deterministic)")
        return r1

    def submit(self, op, combo, case, bad, runs=1):
        """Sends a case to the CPU reference process(es); collect() waits."""
        req = (op, combo, bad, case.name, self.quick, runs)
        self.cpu.submit(req)
        if self.cpu_onednn is not None:
            self.cpu_onednn.submit(req)

    def collect(self, what, spec):
        """The reference's runs of the submitted case [(outputs, CpuError)],
        or None when there are none (a crash of TF CPU's process, recorded:
        the case is lost, the sweep goes on with a new process)."""
        got = self.cpu.result()
        if self.cpu_onednn is not None:
            self.vs_onednn(what, spec, got, self.cpu_onednn.result())
        if isinstance(got, reference.Crash):
            self.counts["cpu_crashes"] += 1
            self.fail(what, f"TF CPU (Eigen) crashed: {got}. Record it in "
                            f"docs/tf-cpu-divergences.md with its reproduction and judge "
                            f"the case otherwise (Spec.cpu_op)", "cpu_reference")
            return None
        if isinstance(got, reference.NotRebuilt):
            self.fail(what, f"the CPU reference process could not rebuild the case "
                            f"(specs must be deterministic, case names unique): {got}",
                      "spec")
            return None
        self.counts["cpu_references"] += 1
        return got

    def vs_onednn(self, what, spec, eigen, onednn):
        """--cpu-onednn: where oneDNN's CPU kernel (first run) differs from
        Eigen's: a crash, an error where the other gives outputs, another
        error class, outputs beyond the spec's bound (sweep.compare)."""
        self.counts["onednn_references"] += 1

        def note(kind, detail, **more):
            self.onednn.append(dict(case=what, kind=kind, detail=detail, **more))
        if isinstance(onednn, reference.Crash):
            note("crash", str(onednn), signal=onednn.how, last=onednn.last)
            return
        if not isinstance(eigen, list) or not isinstance(onednn, list):
            return  # nothing to compare with (reported as the sweep's failure)
        (re_, ee), (ro, eo) = eigen[0], onednn[0]
        if ee is not None and eo is not None:
            if ee.name != eo.name:
                note("error class", f"oneDNN raised {eo.name} ({short(str(eo))}), Eigen "
                                    f"{ee.name} ({short(str(ee))})")
        elif ee is not None:
            note("accepts", f"oneDNN gave outputs, Eigen raised {ee.name} ({short(str(ee))})")
        elif eo is not None:
            note("raises", f"oneDNN raised {eo.name} ({short(str(eo))}), Eigen gave outputs")
        elif len(ro) != len(re_):
            note("outputs", f"{len(ro)} outputs, Eigen {len(re_)}")
        else:
            for i, ((a, _), (b, _)) in enumerate(zip(ro, re_)):
                if spec.compare_outputs is not None and i not in spec.compare_outputs:
                    why = None if (a.dtype, a.shape) == (b.dtype, b.shape) else \
                        f"{a.dtype}{list(a.shape)} vs CPU {b.dtype}{list(b.shape)}"
                else:
                    why = compare(a, b, spec)
                if why:  # (compare's "CPU" is Eigen here)
                    note("outputs", f"output {i}: oneDNN vs Eigen: "
                                    f"{why.replace('vs CPU', 'vs Eigen')}")

    def close(self):
        for ref in (self.cpu, self.cpu_onednn):
            if ref is not None:
                ref.close()

    def graph(self, what, spec, call, eager):
        """The case once more inside a tf.function (TF's graph dispatch:
        placement, Grappler, the executor), on SIMDEV: the same outputs as
        the eager run, on SIMDEV."""
        import tensorflow as tf
        fn = tf.function(lambda: call.fn(**call.kw), jit_compile=False)
        try:
            with tf.device(SIM):
                out = fn()
        except Exception as e:
            self.fail(what, f"inside tf.function: {type(e).__name__}: {short(str(e))}")
            return
        flat = tf.nest.flatten(out)
        if len(flat) != len(eager):
            self.fail(what, f"tf.function gave {len(flat)} outputs, eager {len(eager)}")
            return
        self.counts["graph_cases"] += 1
        for i, (t, (a, _)) in enumerate(zip(flat, eager)):
            if "SIMDEV:0" not in t.device:
                self.fail(what, f"inside tf.function: output {i} on {t.device!r}")
            if spec.compare_outputs is not None and i not in spec.compare_outputs:
                continue
            why = compare(t.numpy(), a, spec)
            if why:
                self.fail(what, f"inside tf.function, output {i} vs eager: {why}")

    def bad(self, op, opdef, combo, case, cpu_only=False):
        what = case_what(op, combo, case, bad=True)
        try:
            call = Call(op, opdef, combo, case)
        except Exception as e:
            # TF refused the inputs before any kernel ran (e.g. a Python-side
            # type check): same for both devices, nothing to compare.
            self.fail(what, f"spec could not build its inputs: {type(e).__name__}: {e}",
                      "spec")
            return None
        spec = SPECS.get(op)
        self.submit(op, combo, case, True)
        es = None if cpu_only else try_run(call, SIM)[1]
        cpu = self.collect(what, spec)
        if cpu is None:
            return None
        ec = cpu[0][1]
        if ec is None:
            self.fail(what, "TF CPU accepted the bad input (fix the spec)", "spec")
            return None
        if cpu_only:
            return None
        row = {"op": op, "case": case.name, "combo": docs.combo_str(combo),
               "cpu": [ec.name, short(str(ec))],
               "sim": [type(es).__name__ if es else "", short(str(es)) if es else ""]}
        row["same"] = bool(es) and type(es).__name__ == ec.name and \
            not placement_error(str(es))
        if es is None:
            self.fail(what, f"SIMDEV accepted the bad input; CPU raised "
                            f"{ec.name}: {short(str(ec))}", "bad")
        elif placement_error(str(es)):
            self.fail(what, f"SIMDEV raised a placement error: {short(str(es))}", "bad")
        elif type(es).__name__ != ec.name:
            self.fail(what, f"SIMDEV raised {type(es).__name__} ({short(str(es))}), CPU "
                            f"{ec.name} ({short(str(ec))})", "bad")
        # that the device still works after the error is shown by the cases
        # that run after this one
        return row

    def run_op(self, op, kernels_of_op):
        from tensorflow.python.framework import op_def_registry
        spec = SPECS.get(op)
        combos = registry.combos(kernels_of_op)
        self.counts["ops"] += 1
        self.counts["combos"] += len(combos)
        if spec is None:
            self.unaccounted.append(op)
            self.fail(op, "registered on SIMDEV but has no spec in tests/sweep/specs*.py "
                          "(unaccounted)", "unaccounted")
            return
        opdef = op_def_registry.get(op)
        cases = spec.cases(self.quick)
        has_bad = bool(spec.bad and spec.bad(self.quick))
        if not has_bad and not spec.no_bad:
            self.fail(op, "spec has no bad case and no reason why (no_bad)", "spec")
        # Huge dims (Spec.huge): judged as bad cases, required of every op
        # whose kernel computes a shape, or its reason why not (no_huge).
        if not (spec.huge and spec.huge(self.quick)) and not spec.no_huge:
            self.fail(op, "spec has no huge-dims case and no reason why (no_huge)", "spec")
        bads = spec.bad_cases(self.quick)
        first_rows = {}
        for ci, combo in enumerate(combos):
            for case in cases:
                if not applies(case, combo):
                    continue
                self.counts["cases"] += 1
                if spec.prop == "dlpack":
                    self.counts["property_cases"] += 1
                    self.dlpack(op, combo, case)
                elif spec.prop == "variable":
                    self.counts["property_cases"] += 1
                    self.variable(op, combo, case)
                elif combo.get("T") == "variant":
                    self.counts["property_cases"] += 1
                    self.variable(op, combo, case, run=variant_run)
                elif spec.prop == "apply":
                    self.counts["property_cases"] += 1
                    self.apply(op, spec, combo, case)
                else:
                    self.good(op, spec, opdef, combo, case)
            if self.quick and ci > 0:
                continue  # quick: bad inputs for the first combination only
            for case in bads:
                # T=variant: the bad cases are of arrays, not lists; the
                # variant kernels' errors are tests/tf/test_kernels_variant.py's
                if not applies(case, combo) or combo.get("T") == "variant":
                    continue
                self.counts["bad_cases"] += 1
                row = self.bad(op, opdef, combo, case)
                if row is not None:
                    prev = first_rows.get(case.name)
                    if prev is None:
                        row["combos"] = 1
                        row["all_same"] = row["same"]
                        first_rows[case.name] = row
                    else:
                        prev["combos"] += 1
                        prev["all_same"] = prev["all_same"] and row["same"]
        self.errors += list(first_rows.values())
        if spec.no_bad and not has_bad:
            self.errors.append({"op": op, "case": "-", "no_bad": spec.no_bad})

    def dlpack(self, op, combo, case):
        what = case_what(op, combo, case)
        try:
            runs, x = dlpack_roundtrip(case, combo)
        except Exception as e:
            self.fail(what, f"round trip raised {type(e).__name__}: {short(str(e))}")
            return
        for out, dev in runs:
            if "SIMDEV:0" not in dev:
                self.fail(what, f"result on {dev!r}")
            if not bits_equal(out, x):
                self.fail(what, "round trip changed the bits")

    def variable(self, op, combo, case, devs=(SIM, SIM, CPU), kind="case",
                 run=None):
        """A variable op's case (or, with run=variant_run, a variant op's):
        every run in devs bit-equal to the first and on its device (failures
        of `kind`: "spec" for a spec without registration). TF CPU runs
        here, not in the reference process: these ops have no oneDNN
        kernels to keep away from."""
        what = case_what(op, combo, case)
        first = None
        for dev in devs:
            try:
                if run is None:
                    (out, where), = variable_run(op, case, combo, dev)
                else:
                    (out, where), = run(op, case, dev)
            except Exception as e:
                self.fail(what, f"on {dev}: {type(e).__name__}: {short(str(e))}", kind)
                return
            if dev.split("/")[-1] not in where:
                self.fail(what, f"result on {where!r}, not {dev}", kind)
            if first is None:
                first = out
            elif not bits_equal(out, first):
                self.fail(what, f"{dev}'s bits differ from {devs[0]}'s", kind)

    def apply(self, op, spec, combo, case, devs=(SIM, SIM, CPU), kind="case"):
        """A training op's case: every variable after the op, in every run
        of devs, on its device and bit-equal to the first run's (to TF CPU
        within spec.ulps units of roundoff of max(|x|, 2**-6) where the
        spec is not exact: Eigen's vectorized rsqrt / pow / exp)."""
        what = case_what(op, combo, case)
        first = None
        for dev in devs:
            try:
                outs = apply_run(op, case, combo, dev)
            except Exception as e:
                if dev == CPU and "no supported kernel for CPU devices" in str(e):
                    return  # TF CPU lacks the dtype (half ProximalAdagrad)
                self.fail(what, f"on {dev}: {type(e).__name__}: {short(str(e))}", kind)
                return
            for out, where in outs:
                if dev.split("/")[-1] not in where:
                    self.fail(what, f"result on {where!r}, not {dev}", kind)
            if first is None:
                first = [o for o, _ in outs]
                continue
            for a, b in zip((o for o, _ in outs), first):
                if dev == CPU and not spec.exact:
                    u = float(np.finfo(b.dtype).eps) / 2
                    scale = np.maximum(np.abs(b.astype(np.float64)), 2.0 ** -6)
                    if (np.abs(a.astype(np.float64) - b) > spec.ulps * u * scale).any():
                        self.fail(what, f"{dev} differs from {devs[0]} by more than "
                                        f"{spec.ulps} units of roundoff", kind)
                elif not bits_equal(a, b):
                    self.fail(what, f"{dev}'s bits differ from {devs[0]}'s", kind)

    def run_spec_only(self, op, spec):
        """A spec whose op simdev does not register (yet): CPU against CPU,
        so that the spec is known good when the kernel lands."""
        from tensorflow.python.framework import op_def_registry
        opdef = op_def_registry.get(op)
        self.spec_only.append(op)
        self.counts["spec_only"] += 1
        if opdef is None:
            self.fail(op, "spec for an op TF does not define", "spec")
            return
        for combo in spec.try_types[:1] if self.quick else spec.try_types:
            for case in spec.cases(self.quick):
                if not applies(case, combo):
                    continue
                self.counts["spec_only_cases"] += 1
                if spec.prop == "variable":
                    self.variable(op, combo, case, devs=(CPU, CPU), kind="spec")
                    continue
                if spec.prop == "apply":
                    self.apply(op, spec, combo, case, devs=(CPU, CPU), kind="spec")
                    continue
                self.good(op, spec, opdef, combo, case, cpu_ref=False)
            for case in spec.bad_cases(self.quick):
                if applies(case, combo):
                    self.bad(op, opdef, combo, case, cpu_only=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer shapes (make test)")
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--write-docs", action="store_true",
                    help="rewrite docs/kernels.md and docs/kernel-errors.md")
    ap.add_argument("--ops", help="only these ops (comma-separated), for debugging")
    ap.add_argument("--no-docs", action="store_true",
                    help="do not compare docs/kernels.md (TF 2.21's registry) with this "
                         "TF's (make matrix, on the other releases)")
    ap.add_argument("--cpu-onednn", action="store_true",
                    help="also run every CPU reference with oneDNN's kernels "
                         "(TF_ENABLE_ONEDNN_OPTS=1) and list where they differ from "
                         "Eigen's (docs/tf-cpu-divergences.md); not failures")
    args = ap.parse_args()
    t0 = time.time()
    sweep = Sweep(args.quick, onednn=args.cpu_onednn)
    try:
        return run(args, sweep, t0)
    finally:
        sweep.close()


def run(args, sweep, t0):
    # the reference processes import TF while this one does
    sweep.cpu.start()
    if sweep.cpu_onednn is not None:
        sweep.cpu_onednn.start()
    import tensorflow as tf
    tf.config.set_soft_device_placement(False)
    reg = registry.read()
    for msg in registry.check(reg):
        sweep.fail("registry", msg, "registry")
    only = set(args.ops.split(",")) if args.ops else None
    for op in sorted(reg["simdev"]):
        if only is None or op in only:
            sweep.run_op(op, reg["simdev"][op])
    for op in sorted(SPECS):
        if op not in reg["simdev"] and (only is None or op in only):
            sweep.run_spec_only(op, SPECS[op])
    kernels_md = docs.render_kernels(reg)
    path = os.path.join(ROOT, "docs", "kernels.md")
    committed = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    if args.write_docs:
        with open(path, "w", encoding="utf-8") as f:
            f.write(kernels_md)
        if not args.quick and only is None:
            with open(os.path.join(ROOT, "docs", "kernel-errors.md"), "w",
                      encoding="utf-8") as f:
                f.write(docs.render_errors(sweep.errors))
    elif committed != kernels_md and not args.no_docs:
        sweep.fail("docs/kernels.md", "differs from TF's registry; regenerate it with "
                   "`.venv/bin/python tests/sweep/sweep.py --write-docs` (or `make sweep "
                   "SWEEP_ARGS=--write-docs`) and commit it", "docs")
    c = sweep.counts
    c["unaccounted"] = len(sweep.unaccounted)
    c["failures"] = len(sweep.failures)
    c["seconds"] = round(time.time() - t0, 1)
    refs = {"eigen": sweep.cpu, "onednn": sweep.cpu_onednn}
    ref_info = {k: dict(r.info or {}, starts=r.starts) for k, r in refs.items() if r}
    if ref_info["eigen"].get("onednn"):
        sweep.fail("CPU reference", "oneDNN is on in the Eigen reference process "
                   "(TF_ENABLE_ONEDNN_OPTS=0 did not turn it off)", "cpu_reference")
        c["failures"] = len(sweep.failures)
    print(f"sweep ({'quick' if args.quick else 'full'}): {c['ops']} ops, {c['combos']} dtype "
          f"combinations, {c['cases']} cases ({c['property_cases']} by property), "
          f"{c['graph_cases']} also in tf.function, {c['bad_cases']} bad-input cases; unaccounted {c['unaccounted']} (must be 0); "
          f"{c['spec_only']} specs without registration ({c['spec_only_cases']} CPU-vs-CPU "
          f"cases); {c['failures']} failures; {c['seconds']} s")
    done = {"eigen": f"{c['cpu_references']} cases answered, {c['cpu_crashes']} crashes",
            "onednn": f"{c['onednn_references']} cases, {len(sweep.onednn)} differ from Eigen"}
    for k, info in ref_info.items():
        print(f"CPU reference ({k}): TF {info.get('tf', '?')} in a child process, oneDNN "
              f"{'on' if info.get('onednn') else 'off'}, started {info['starts']} time(s); "
              f"{done[k]}")
    if sweep.unaccounted:
        print("unaccounted:", ", ".join(sweep.unaccounted))
    print("specs without registration:", ", ".join(sweep.spec_only) or "none")
    for d in sweep.onednn:
        print(f"ONEDNN {d['case']}: {d['kind']}: {d['detail']}")
    for f in sweep.failures:
        print("FAIL", f)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"counts": c, "failures": sweep.failures, "by_kind": sweep.by_kind,
                       "unaccounted": sweep.unaccounted, "spec_only": sweep.spec_only,
                       "errors": sweep.errors, "cpu_reference": ref_info,
                       "onednn": sweep.onednn}, f, indent=1)
    sys.stdout.flush()
    return 1 if sweep.failures else 0


if __name__ == "__main__":
    sys.exit(main())
