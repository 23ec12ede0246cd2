"""The spec table of the registration sweep: one entry per op simdev
registers (or will register: an entry without a SIMDEV registration is run
CPU against CPU, so it is known good when the kernel lands).

Add a spec when you register an op: the sweep fails while a SIMDEV op has
none ("unaccounted"). Helpers and the meaning of each field:
tests/sweep/specs_core.py.
"""
import numpy as np

from specs_core import (ALLT, FT, FT_I, Case, Spec, binary, grad2, i32, i64,
                        spec_map, unary, vals, _pick)

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
MOVE = FT_I + ({"T": "float16"}, {"T": "bfloat16"}, {"T": "bool"})


def _shapes_case(op, shapes, make, quick, n=2):
    return [Case(f"{op}{list(s)}", make(s)) for s in _pick(shapes, quick, n)]


# ---- elementwise ----------------------------------------------------------
ELEMENTWISE = [
    unary("Abs"), unary("Neg", try_types=ALLT), unary("Square"),
    unary("Sqrt", lo=0.01, hi=4.0), unary("Rsqrt", lo=0.01, hi=4.0),
    unary("Exp", ulps=8), unary("Log", lo=0.01, hi=4.0, ulps=8),
    unary("Tanh", ulps=8), unary("Sigmoid", ulps=8),
    unary("Relu", arg="features", exact=True),
    unary("Reciprocal", lo=0.25, hi=4.0),
    unary("Relu6", arg="features", lo=-2, hi=8, exact=True),
    unary("Elu", arg="features", ulps=8), unary("Selu", arg="features", ulps=8),
    unary("Softplus", arg="features", lo=-20, hi=20, ulps=8),
    unary("Softsign", arg="features", ulps=8),
    unary("LeakyRelu", arg="features", attrs={"alpha": 0.2}),
    unary("Erf", ulps=8), unary("Sign", exact=True, try_types=ALLT),
    unary("Floor", lo=-4, hi=4, exact=True), unary("Ceil", lo=-4, hi=4, exact=True),
    unary("Round", lo=-4, hi=4, exact=True), unary("Log1p", lo=-0.9, hi=4, ulps=8),
    unary("Expm1", ulps=8),
    unary("LogicalNot", try_types=({},)),
    grad2("ReluGrad"), grad2("Relu6Grad", lo=-2, hi=8),
    grad2("EluGrad", b="outputs", lo=-0.9, hi=2),
    grad2("SeluGrad", b="outputs", lo=-1.5, hi=2, ulps=8),
    grad2("LeakyReluGrad", attrs={"alpha": 0.2}),
    grad2("SoftplusGrad", ulps=8), grad2("SoftsignGrad", ulps=8),
    grad2("TanhGrad", a="y", b="dy"), grad2("SigmoidGrad", a="y", b="dy"),
    grad2("SqrtGrad", a="y", b="dy", lo=0.1, hi=2),
    grad2("RsqrtGrad", a="y", b="dy", lo=0.1, hi=2),
    binary("AddV2", try_types=ALLT), binary("Add", try_types=ALLT),
    binary("Sub", try_types=ALLT), binary("Mul", try_types=ALLT),
    binary("RealDiv", nonzero_y=True), binary("DivNoNan"),
    binary("Maximum", try_types=ALLT, exact=True),
    binary("Minimum", try_types=ALLT, exact=True),
    binary("Pow", lo=0.1, hi=3, ulps=16), binary("SquaredDifference"),
    binary("FloorMod", lo=-9, hi=9, lo_y=1, hi_y=5, integer=True,
           try_types=ALLT, int_zero_bad=True, exact=True),
    binary("FloorDiv", lo=-9, hi=9, lo_y=1, hi_y=5, integer=True,
           try_types=ALLT, int_zero_bad=True, exact=True),
] + [binary(op, integer=True, try_types=ALLT, exact=True)
     for op in ("Greater", "GreaterEqual", "Less", "LessEqual", "Equal",
                "NotEqual")] + [
    binary("LogicalAnd", try_types=({},), exact=True),
    binary("LogicalOr", try_types=({},), exact=True),
]


def _addn():
    def cases(quick):
        out = []
        for n in _pick((2, 1, 3, 5), quick):
            for s in _pick([(2, 3), (0, 2), ()], quick, 1 if quick else 3):
                out.append(Case(f"AddN n={n} {list(s)}",
                                {"inputs": [vals(s, key=k) for k in range(n)]}))
        return out

    def bad(quick):
        return [Case("shapes differ", {"inputs": [vals((2, 3)), vals((3, 2))]})]
    return Spec("AddN", cases, bad, ulps=8, try_types=FT_I)


def _select(op):
    x, y = ("x", "y") if op == "Select" else ("t", "e")  # tf.raw_ops' names
    shapes = ([((2, 3),) * 3, ((2,), (2, 3), (2, 3)), ((0, 3),) * 3] if op == "Select"
              else [((2, 3),) * 3, ((3,), (2, 3), (1, 3)), ((2, 1), (), (1, 4)),
                    ((0, 3),) * 3])

    def cases(quick):
        return [Case(f"{op}{[list(s) for s in sh]}",
                     {"condition": vals(sh[0], key=3) > 0, x: vals(sh[1], key=1),
                      y: vals(sh[2], key=2)})
                for sh in _pick(shapes, quick)]

    def bad(quick):
        return [Case("condition shape", {"condition": np.array([True, False, True]),
                                         x: vals((2, 2)), y: vals((2, 2))})]
    return Spec(op, cases, bad, exact=True, try_types=MOVE)


def _bias():
    def cases(quick):
        out = [Case("NHWC", {"value": vals((2, 3, 4)), "bias": vals((4,), key=1)}),
               Case("NCHW", {"value": vals((2, 4, 3, 3)), "bias": vals((4,), key=1),
                             "data_format": "NCHW"}),
               Case("zero batch", {"value": vals((0, 4)), "bias": vals((4,), key=1)})]
        return out[:2] if quick else out

    def bad(quick):
        return [Case("bias length", {"value": vals((2, 3)), "bias": vals((4,))})]

    def gcases(quick):
        return [Case("NHWC", {"out_backprop": vals((2, 3, 4))}),
                Case("NCHW", {"out_backprop": vals((2, 4, 3, 3)), "data_format": "NCHW"})]

    def gbad(quick):
        return [Case("rank 1", {"out_backprop": vals((4,))})]
    return [Spec("BiasAdd", cases, bad), Spec("BiasAddGrad", gcases, gbad, ulps=16)]


# Sums (MatMul, Conv2D and its backprops, Einsum): the cases sum at most
# 27 products of values in [-2, 2]; summed in any order, SIMDEV and TF CPU
# (OpenBLAS, Eigen or oneDNN) each stay within gamma(27) * sum|terms| of
# the exact result, whose scale the sweep's max|cpu| term stands for, so
# 64 unit roundoffs of (|cpu| + max|cpu|) leave room for both while an
# indexing or accumulation error is off by O(1).
def _matmul():
    def cases(quick):
        out = [Case("2x3.3x4", {"a": vals((2, 3)), "b": vals((3, 4), key=1)}),
               Case("transposes", {"a": vals((3, 2)), "b": vals((4, 3), key=1),
                                   "transpose_a": True, "transpose_b": True}),
               Case("k=0", {"a": vals((2, 0)), "b": vals((0, 3), key=1)}),
               Case("33x17.17x9", {"a": vals((33, 17)), "b": vals((17, 9), key=1)})]
        return out[:2] if quick else out

    def bad(quick):
        return [Case("inner dims", {"a": vals((2, 3)), "b": vals((4, 2))}),
                Case("vector", {"a": vals((3,)), "b": vals((3, 2))})]

    def bcases(quick):
        out = [Case("batch", {"x": vals((2, 2, 3)), "y": vals((2, 3, 4), key=1)}),
               Case("broadcast", {"x": vals((3, 1, 2, 3)), "y": vals((2, 3, 2), key=1),
                                  "adj_x": False, "adj_y": False}),
               Case("adjoint", {"x": vals((2, 3, 2)), "y": vals((2, 4, 3), key=1),
                                "adj_x": True, "adj_y": True}),
               Case("empty batch", {"x": vals((0, 2, 3)), "y": vals((0, 3, 1), key=1)})]
        return out[:2] if quick else out

    def bbad(quick):
        return [Case("inner dims", {"x": vals((2, 2, 3)), "y": vals((2, 4, 2))}),
                Case("batch dims", {"x": vals((2, 2, 3)), "y": vals((3, 3, 2))})]
    return [Spec("MatMul", cases, bad, ulps=64), Spec("BatchMatMulV2", bcases, bbad, ulps=64)]


def _conv():
    def fwd(quick):
        out = [Case("SAME s1", {"input": vals((1, 5, 5, 2)), "filter": vals((3, 3, 2, 3), key=1),
                                "strides": [1, 1, 1, 1], "padding": "SAME"}),
               Case("VALID s2", {"input": vals((2, 6, 5, 3)), "filter": vals((2, 2, 3, 2), key=1),
                                 "strides": [1, 2, 2, 1], "padding": "VALID"}),
               Case("dilated", {"input": vals((1, 7, 7, 1)), "filter": vals((2, 2, 1, 2), key=1),
                                "strides": [1, 1, 1, 1], "padding": "SAME",
                                "dilations": [1, 2, 2, 1]}),
               Case("zero batch", {"input": vals((0, 4, 4, 2)), "filter": vals((2, 2, 2, 2), key=1),
                                   "strides": [1, 1, 1, 1], "padding": "VALID"})]
        return out[:2] if quick else out

    def bad(quick):
        return [Case("channels", {"input": vals((1, 4, 4, 2)), "filter": vals((2, 2, 3, 1)),
                                  "strides": [1, 1, 1, 1], "padding": "VALID"}),
                Case("rank 3 input", {"input": vals((4, 4, 2)), "filter": vals((2, 2, 2, 1)),
                                      "strides": [1, 1, 1, 1], "padding": "VALID"})]

    def bpi(quick):
        out = [Case("SAME s1", {"input_sizes": i32([1, 5, 5, 2]),
                                "filter": vals((3, 3, 2, 3), key=1),
                                "out_backprop": vals((1, 5, 5, 3), key=2),
                                "strides": [1, 1, 1, 1], "padding": "SAME"}),
               Case("VALID s2", {"input_sizes": i32([2, 6, 5, 3]),
                                 "filter": vals((2, 2, 3, 2), key=1),
                                 "out_backprop": vals((2, 3, 2, 2), key=2),
                                 "strides": [1, 2, 2, 1], "padding": "VALID"})]
        return out

    def bpi_bad(quick):
        return [Case("out_backprop shape", {"input_sizes": i32([1, 5, 5, 2]),
                                            "filter": vals((3, 3, 2, 3)),
                                            "out_backprop": vals((1, 4, 5, 3)),
                                            "strides": [1, 1, 1, 1], "padding": "SAME"})]

    def bpf(quick):
        return [Case("SAME s1", {"input": vals((1, 5, 5, 2)), "filter_sizes": i32([3, 3, 2, 3]),
                                 "out_backprop": vals((1, 5, 5, 3), key=2),
                                 "strides": [1, 1, 1, 1], "padding": "SAME"}),
                Case("VALID s2", {"input": vals((2, 6, 5, 3)), "filter_sizes": i32([2, 2, 3, 2]),
                                  "out_backprop": vals((2, 3, 2, 2), key=2),
                                  "strides": [1, 2, 2, 1], "padding": "VALID"})]

    def bpf_bad(quick):
        return [Case("out_backprop shape", {"input": vals((1, 5, 5, 2)),
                                            "filter_sizes": i32([3, 3, 2, 3]),
                                            "out_backprop": vals((1, 4, 5, 3)),
                                            "strides": [1, 1, 1, 1], "padding": "SAME"})]

    def dw(quick):
        out = [Case("SAME s1 m1", {"input": vals((1, 5, 5, 2)), "filter": vals((3, 3, 2, 1), key=1),
                                   "strides": [1, 1, 1, 1], "padding": "SAME"}),
               Case("VALID s2 m2", {"input": vals((2, 6, 5, 3)), "filter": vals((2, 2, 3, 2), key=1),
                                    "strides": [1, 2, 2, 1], "padding": "VALID"}),
               Case("zero batch", {"input": vals((0, 4, 4, 2)), "filter": vals((2, 2, 2, 1), key=1),
                                   "strides": [1, 1, 1, 1], "padding": "SAME"})]
        return out[:2] if quick else out

    def dw_bad(quick):
        return [Case("channels", {"input": vals((1, 4, 4, 2)), "filter": vals((2, 2, 3, 1)),
                                  "strides": [1, 1, 1, 1], "padding": "VALID"})]

    def dwi(quick):
        return [Case("SAME s1 m1", {"input_sizes": i32([1, 5, 5, 2]),
                                    "filter": vals((3, 3, 2, 1), key=1),
                                    "out_backprop": vals((1, 5, 5, 2), key=2),
                                    "strides": [1, 1, 1, 1], "padding": "SAME"}),
                Case("VALID s2 m2", {"input_sizes": i32([2, 6, 5, 3]),
                                     "filter": vals((2, 2, 3, 2), key=1),
                                     "out_backprop": vals((2, 3, 2, 6), key=2),
                                     "strides": [1, 2, 2, 1], "padding": "VALID"})]

    def dwi_bad(quick):
        return [Case("out_backprop shape", {"input_sizes": i32([1, 5, 5, 2]),
                                            "filter": vals((3, 3, 2, 1)),
                                            "out_backprop": vals((1, 4, 5, 2)),
                                            "strides": [1, 1, 1, 1], "padding": "SAME"})]

    def dwf(quick):
        return [Case("SAME s1 m1", {"input": vals((1, 5, 5, 2)),
                                    "filter_sizes": i32([3, 3, 2, 1]),
                                    "out_backprop": vals((1, 5, 5, 2), key=2),
                                    "strides": [1, 1, 1, 1], "padding": "SAME"}),
                Case("VALID s2 m2", {"input": vals((2, 6, 5, 3)),
                                     "filter_sizes": i32([2, 2, 3, 2]),
                                     "out_backprop": vals((2, 3, 2, 6), key=2),
                                     "strides": [1, 2, 2, 1], "padding": "VALID"})]

    def dwf_bad(quick):
        return [Case("out_backprop shape", {"input": vals((1, 5, 5, 2)),
                                            "filter_sizes": i32([3, 3, 2, 1]),
                                            "out_backprop": vals((1, 4, 5, 2)),
                                            "strides": [1, 1, 1, 1], "padding": "SAME"})]
    return [Spec("Conv2D", fwd, bad, ulps=64),
            Spec("Conv2DBackpropInput", bpi, bpi_bad, ulps=64),
            Spec("Conv2DBackpropFilter", bpf, bpf_bad, ulps=128),
            Spec("DepthwiseConv2dNative", dw, dw_bad, ulps=64),
            Spec("DepthwiseConv2dNativeBackpropInput", dwi, dwi_bad, ulps=64),
            Spec("DepthwiseConv2dNativeBackpropFilter", dwf, dwf_bad, ulps=128)]


def _pool():
    geo = [dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
           dict(ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")]

    def fwd(op):
        def cases(quick):
            return [Case(f"{op} {g['padding']}", dict({"value": vals((2, 5, 5, 2))}, **g))
                    for g in geo]
        return cases

    def fbad(quick):
        return [Case("rank 3", dict({"value": vals((5, 5, 2))}, **geo[0]))]

    def mpg(quick):
        import tensorflow as tf
        out = []
        for g in geo:
            x = vals((2, 5, 5, 2))
            with tf.device("/device:CPU:0"):
                y = tf.raw_ops.MaxPool(input=x, **g).numpy()
            out.append(Case(f"MaxPoolGrad {g['padding']}",
                            dict({"orig_input": x, "orig_output": y,
                                  "grad": vals(y.shape, key=1)}, **g)))
        return out

    def mpg_bad(quick):
        return [Case("orig_output shape", dict({"orig_input": vals((2, 4, 4, 2)),
                                                "orig_output": vals((2, 3, 3, 2)),
                                                "grad": vals((2, 2, 2, 2))}, **geo[0]))]

    def apg(quick):
        return [Case("AvgPoolGrad VALID", dict({"orig_input_shape": i32([2, 5, 5, 2]),
                                                "grad": vals((2, 2, 2, 2), key=1)}, **geo[0])),
                Case("AvgPoolGrad SAME", dict({"orig_input_shape": i32([2, 5, 5, 2]),
                                               "grad": vals((2, 5, 5, 2), key=1)}, **geo[1]))]

    def apg_bad(quick):
        return [Case("orig_input_shape length", dict({"orig_input_shape": i32([5, 5, 2]),
                                                      "grad": vals((2, 2, 2, 2))}, **geo[0]))]

    def rename(cases):  # MaxPool/AvgPool take `input`
        def f(quick):
            return [Case(c.name, {("input" if k == "value" else k): v
                                  for k, v in c.kwargs.items()}) for c in cases(quick)]
        return f
    return [Spec("MaxPool", rename(fwd("MaxPool")), rename(fbad), exact=True),
            Spec("AvgPool", fwd("AvgPool"), fbad, ulps=16),
            Spec("MaxPoolGrad", mpg, mpg_bad, exact=True),
            Spec("AvgPoolGrad", apg, apg_bad, ulps=16)]


def _reduce(op, ulps, try_types=FT):
    lo, hi = (0.5, 1.5) if op == "Prod" else (-2, 2)

    def cases(quick):
        out = [Case("axis 1", {"input": vals((3, 4), lo, hi), "axis": i32([1])}),
               Case("all keep", {"input": vals((2, 3, 2), lo, hi), "axis": i32([0, 2]),
                                 "keep_dims": True}),
               Case("negative axis", {"input": vals((2, 5), lo, hi), "axis": i32(-1)}),
               Case("empty axes", {"input": vals((2, 3), lo, hi), "axis": i32([])}),
               Case("zero-size kept", {"input": vals((0, 3), lo, hi), "axis": i32([1])})]
        if op in ("Sum", "Prod", "Mean"):
            out.append(Case("zero-size reduced", {"input": vals((2, 0), lo, hi),
                                                  "axis": i32([1])}))
        return out[:2] if quick else out

    def bad(quick):
        return [Case("axis out of range", {"input": vals((2, 3)), "axis": i32([2])})]
    return Spec(op, cases, bad, ulps=ulps, try_types=try_types)


def _softmax():
    def sm(quick):
        return _shapes_case("Softmax", [(2, 5), (3,), (0, 4), (2, 2, 3)],
                            lambda s: {"logits": vals(s, -5, 5)}, quick)

    def sm_bad(quick):
        return [Case("scalar", {"logits": np.array(1.0)})]

    def sparse(quick):
        return [Case("int64 labels", {"features": vals((3, 4), -3, 3),
                                      "labels": i64([0, 3, 1])}),
                Case("int32 labels", {"features": vals((2, 5), -3, 3),
                                      "labels": i32([4, 0])})]

    def sparse_bad(quick):
        return [Case("label out of range", {"features": vals((2, 3)),
                                            "labels": i64([0, 3])})]

    def dense(quick):
        f = vals((3, 4), -3, 3)
        lab = np.abs(vals((3, 4), key=1))
        lab /= lab.sum(1, keepdims=True)
        return [Case("3x4", {"features": f, "labels": lab}),
                Case("broadcast labels", {"features": f, "labels": lab[:1]})]

    def dense_bad(quick):
        return [Case("shapes", {"features": vals((3, 4)), "labels": vals((3, 5))})]
    return [Spec("Softmax", sm, sm_bad, ulps=16),
            Spec("LogSoftmax", lambda q: [Case(c.name, c.kwargs) for c in sm(q)], sm_bad,
                 ulps=16),
            Spec("SparseSoftmaxCrossEntropyWithLogits", sparse, sparse_bad, ulps=16),
            Spec("SoftmaxCrossEntropyWithLogits", dense, dense_bad, ulps=16)]


def _bool_reduce(op):
    def cases(quick):
        x = vals((3, 4), key=5) > 0
        out = [Case("axis 1", {"input": x, "axis": i32([1])}),
               Case("all keep", {"input": x, "axis": i32([0, 1]), "keep_dims": True}),
               Case("zero-size reduced", {"input": np.zeros((2, 0), bool), "axis": i32([1])})]
        return out[:2] if quick else out

    def bad(quick):
        return [Case("axis out of range", {"input": np.ones((2, 3), bool), "axis": i32([2])})]
    return Spec(op, cases, bad, exact=True, try_types=({},))


def _cumsum():
    def cases(quick):
        out = [Case("axis 1", {"x": vals((3, 4)), "axis": i32(1)}),
               Case("exclusive reverse", {"x": vals((3, 4)), "axis": i32(0),
                                          "exclusive": True, "reverse": True}),
               Case("zero", {"x": vals((0, 4)), "axis": i32(1)})]
        return out[:2] if quick else out

    def bad(quick):
        return [Case("axis out of range", {"x": vals((3, 4)), "axis": i32(2)})]
    return Spec("Cumsum", cases, bad, ulps=16, try_types=FT_I)


def _range():
    def cases(quick):
        return [Case("0..10 by 3", {"start": np.array(0.0), "limit": np.array(10.0),
                                    "delta": np.array(3.0)}),
                Case("down", {"start": np.array(5.0), "limit": np.array(-1.0),
                              "delta": np.array(-2.0)}),
                Case("empty", {"start": np.array(2.0), "limit": np.array(2.0),
                               "delta": np.array(1.0)})]

    def bad(quick):
        return [Case("zero delta", {"start": np.array(0.0), "limit": np.array(3.0),
                                    "delta": np.array(0.0)})]
    return Spec("Range", cases, bad, ulps=4, try_types=({"Tidx": "float32"},
                                                         {"Tidx": "int64"}))


OPS = ELEMENTWISE + [_bool_reduce("All"), _bool_reduce("Any"), _cumsum(), _range(),
                     unary("IsFinite", exact=True), unary("Rint", lo=-4, hi=4, exact=True, try_types=FT),
                     binary("TruncateDiv", lo=-9, hi=9, lo_y=1, hi_y=5, integer=True,
                            try_types=FT_I[2:], int_zero_bad=True, exact=True),
                     binary("Xlogy", lo=0, hi=3, lo_y=0.1, hi_y=3, ulps=8),
                     _addn(), _select("Select"), _select("SelectV2")] + _bias() \
    + _matmul() + _conv() + _pool() + _softmax() \
    + [_reduce("Sum", 16, FT_I), _reduce("Mean", 16), _reduce("Max", 0, FT_I),
       _reduce("Min", 0, FT_I), _reduce("Prod", 16)]

from specs_data import OPS as _DATA_OPS  # noqa: E402
from specs_nn import OPS as _NN_OPS  # noqa: E402
from specs_apply import OPS as _APPLY_OPS  # noqa: E402

SPECS = spec_map(OPS + _DATA_OPS + _NN_OPS + _APPLY_OPS)
from specs_ewprog import OPS as _EWPROG_OPS  # noqa: E402
from specs_sparse_var import OPS as _SPARSE_VAR_OPS  # noqa: E402
SPECS = spec_map(list(SPECS.values()) + _EWPROG_OPS + _SPARSE_VAR_OPS)
import specs_huge  # noqa: E402
SPECS = specs_huge.apply(SPECS)
