"""Spec helpers for the registration sweep (tests/sweep/sweep.py).

A spec says how to call one op: its good cases (inputs and attributes for
tf.raw_ops.<Op>), its bad cases (inputs TF CPU rejects), and how to judge
the result. Specs are dtype-agnostic: a case gives NumPy values in a
natural dtype, and the sweep casts each input whose OpDef type attribute is
constrained by the registration under test to that dtype (sweep.cast_to).
So one spec covers every dtype a kernel file adds later.

A case is a Case(name, kwargs): kwargs are tf.raw_ops keyword arguments;
NumPy arrays (or lists of them, for list inputs) become tensors, anything
else is passed as is (attributes, Python lists for shapes).
"""
import dataclasses
import zlib

import numpy as np


@dataclasses.dataclass
class Case:
    name: str
    kwargs: dict
    # The dtype combinations the case is for (None: all): a tuple of dtypes
    # for the combination's first attribute (sorted by name), or {attr:
    # dtypes}. E.g. integer division by zero is bad for integers only.
    only: tuple = None


@dataclasses.dataclass
class Spec:
    op: str
    # cases(quick) -> [Case]; quick: the reduced set make test runs
    cases: object
    # bad(quick) -> [Case] that TF CPU rejects, or [] with no_bad's reason
    bad: object = None
    no_bad: str = ""
    # huge(quick) -> [Case]: bad cases whose sizes overflow int64 element
    # counts (2**62 segments, dims [2**32, 2**32], paddings summing past
    # 2**63) or are representable but enormous (2**40 elements), for an op
    # whose kernel computes a shape from input values or attributes; judged
    # like bad cases (TF CPU's error class). Or no_huge: why the op has none
    # (its outputs have its inputs' shapes; or TF CPU itself aborts on the
    # case: docs/tf-cpu-divergences.md). The sweep fails on a spec of a
    # registered op with neither (sweep.run_op): a kernel that computes a
    # shape must prove it hands TF no unchecked one (src/arith/dims.h).
    huge: object = None
    no_huge: str = ""
    # Comparison with TF CPU: allowed error in units of the dtype's unit
    # roundoff u, relative to |cpu| (+ max|cpu| when `scaled`: results that
    # are sums of terms, whose rounding error is relative to the terms, not
    # to a result that cancelled). See sweep.compare. Integer, bool and
    # data-movement results are compared bit for bit.
    ulps: float = 4.0
    # The dtype TF CPU computes in when it is less precise than the output's
    # (ulps then count its unit roundoff): e.g. "float32" for an op whose
    # float64 output TF CPU accumulates in float.
    compute_dtype: str = ""
    exact: bool = False
    scaled: bool = True
    # Outputs compared with CPU (indices); others: dtype and shape only
    # (implementation-defined outputs such as FusedBatchNorm's reserve
    # spaces, which TF CPU leaves uninitialized in inference mode: they are
    # not required to be deterministic either). None: all.
    compare_outputs: object = None
    # For a spec without a SIMDEV registration: the dtype combinations to
    # try CPU against CPU (list of {attr: dtype}).
    try_types: tuple = ({"T": "float32"}, {"T": "float64"})
    # prop(run, case, combo) -> None or raises: where TF CPU has no kernel
    # or no deterministic answer, the property checked instead (run(dev)
    # returns the outputs as NumPy arrays).
    prop: object = None
    # cpu_op(op_fn, kwargs) -> outputs: what runs on TF CPU in place of the
    # op, for cases where TF CPU's kernel is missing a variant or is no real
    # kernel (e.g. _FusedDepthwiseConv2dNative's no-op CPU registration):
    # the same result through other ops, or op_fn(**kwargs) itself.
    cpu_op: object = None

    def bad_cases(self, quick):
        """Every case TF CPU must reject: bad(quick) then huge(quick). The
        sweep and its CPU reference process (reference.py) both take a
        case from this list, so they find the same one by name."""
        return [*(self.bad(quick) if self.bad else []),
                *(self.huge(quick) if self.huge else [])]


# no_huge reasons shared by many specs.
SAME_SHAPE = "its outputs have an input's shape (or a part of one): no shape is computed"
BROADCAST_EMPTY = ("only empty inputs can broadcast past 2**63 - 1 elements ([2**32,1,0] "
                   "with [1,2**32,0]), and TF CPU aborts on them (docs/tf-cpu-divergences.md); "
                   "SIMDEV's refusal: tests/tf/test_kernels_huge.py")
HUGE = 2 ** 62  # with 2 or more elements: past int64


def rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def vals(shape, lo=-2.0, hi=2.0, key=0, integer=False):
    """float64 values in [lo, hi) (integers if integer=True), deterministic
    per (shape, lo, hi, key)."""
    r = rng_for(tuple(shape), lo, hi, key, integer)
    if integer:
        return r.integers(int(lo), int(hi), size=shape).astype(np.float64)
    return r.uniform(lo, hi, size=shape)


def i32(x):
    return np.asarray(x, dtype=np.int32)


def i64(x):
    return np.asarray(x, dtype=np.int64)


FT = ({"T": "float32"}, {"T": "float64"})
FT_I = FT + ({"T": "int32"}, {"T": "int64"})
FTH = FT + ({"T": "float16"}, {"T": "bfloat16"})
ALLT = FT_I + ({"T": "float16"}, {"T": "bfloat16"})

UNARY_SHAPES = [(2, 3), (0,), (), (3, 1, 4)]
BINARY_SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1), (1, 5)),
                 ((0, 3), (1, 3)), ((), (2, 2))]


def _pick(seq, quick, n=2):
    return list(seq)[:n] if quick else list(seq)


def unary(op, arg="x", lo=-2.0, hi=2.0, ulps=4.0, integer=False, attrs=None,
          try_types=FTH, exact=False):
    def cases(quick):
        return [Case(f"{op}{list(s)}", dict({arg: vals(s, lo, hi, integer=integer)},
                                           **(attrs or {})))
                for s in _pick(UNARY_SHAPES, quick)]
    return Spec(op, cases, no_bad="elementwise over any shape: every input is valid",
                no_huge=SAME_SHAPE, ulps=ulps, try_types=try_types, exact=exact,
                scaled=False)


def grad2(op, a="gradients", b="features", lo=-2.0, hi=2.0, ulps=4.0, attrs=None,
          try_types=FTH):
    """Elementwise gradient ops: two inputs of the same shape."""
    def cases(quick):
        return [Case(f"{op}{list(s)}", dict({a: vals(s, key=1), b: vals(s, lo, hi, key=2)},
                                           **(attrs or {})))
                for s in _pick([(2, 3), (0, 4), (5,)], quick)]

    def bad(quick):
        return [Case("shape mismatch", dict({a: vals((2, 3)), b: vals((2, 2))},
                                           **(attrs or {})))]
    return Spec(op, cases, bad, no_huge=SAME_SHAPE, ulps=ulps, try_types=try_types)


def binary(op, lo=-2.0, hi=2.0, lo_y=None, hi_y=None, ulps=4.0, integer=False,
           try_types=FTH, nonzero_y=False, int_zero_bad=False, exact=False):
    """Broadcasting binary ops (x, y)."""
    def cases(quick):
        out = []
        for sx, sy in _pick(BINARY_SHAPES, quick, 3):
            y = vals(sy, lo if lo_y is None else lo_y, hi if hi_y is None else hi_y,
                     key=2, integer=integer)
            if nonzero_y:
                y = np.where(y == 0, 1.0, y)
            out.append(Case(f"{op}{list(sx)}x{list(sy)}",
                            {"x": vals(sx, lo, hi, key=1, integer=integer), "y": y}))
        return out

    def bad(quick):
        b = [Case("incompatible shapes", {"x": vals((3,)), "y": vals((4,), 1, 2)})]
        if int_zero_bad:
            b.append(Case("integer division by zero",
                          {"x": i64([1, 2]), "y": i64([1, 0])},
                          only=("int8", "int16", "int32", "int64", "uint8",
                                "uint16", "uint32", "uint64")))
        return b
    return Spec(op, cases, bad, no_huge=BROADCAST_EMPTY, ulps=ulps,
                try_types=try_types, exact=exact, scaled=False)


def spec_map(specs):
    out = {}
    for s in specs:
        assert s.op not in out, f"two specs for {s.op}"
        out[s.op] = s
    return out
