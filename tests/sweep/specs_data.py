"""Sweep specs of the data-movement ops (fill_cast.c, shape_ops.c, slices, pads,
gathers and scatters, casts, DLPack). Results are compared bit for bit."""
import numpy as np

from specs_core import FT_I, Case, Spec, i32, i64, vals

MOVE = FT_I + ({"T": "float16"}, {"T": "bfloat16"}, {"T": "bool"})


def S(op, cases, bad=None, no_bad="", try_types=MOVE, exact=True, **kw):
    return Spec(op, cases, bad, no_bad=no_bad, exact=exact, try_types=try_types, **kw)


def _c(name, **kw):
    return Case(name, kw)


def _list(*cs):
    return lambda quick: list(cs)[:2] if quick else list(cs)


def _bad(*cs):
    return lambda quick: list(cs)


X23 = vals((2, 3))
X234 = vals((2, 3, 4), key=1)

OPS = [
    S("Identity", _list(_c("2x3", input=X23), _c("zero", input=vals((0, 2))),
                        _c("scalar", input=np.array(1.5))),
      no_bad="any tensor is valid"),
    S("Reshape", _list(_c("to 3x2", tensor=X23, shape=i32([3, 2])),
                       _c("inferred", tensor=X234, shape=i32([-1, 4])),
                       _c("zero", tensor=vals((0, 3)), shape=i32([3, 0])),
                       _c("int64 shape", tensor=X23, shape=i64([6]))),
      _bad(_c("size mismatch", tensor=X23, shape=i32([4, 2])),
           _c("two -1", tensor=X23, shape=i32([-1, -1])))),
    S("Fill", _list(_c("2x3", dims=i32([2, 3]), value=np.array(1.5)),
                    _c("zero", dims=i32([0, 3]), value=np.array(2.0)),
                    _c("scalar", dims=i32([]), value=np.array(-1.0))),
      _bad(_c("negative dim", dims=i32([2, -1]), value=np.array(1.0)),
           _c("value not scalar", dims=i32([2]), value=vals((2,))))),
    S("ZerosLike", _list(_c("2x3", x=X23), _c("zero", x=vals((0,)))),
      no_bad="any tensor is valid"),
    S("OnesLike", _list(_c("2x3", x=X23), _c("zero", x=vals((0,)))),
      no_bad="any tensor is valid"),
    # Out-of-range float -> integer conversions are undefined in C and C++
    # (TF CPU wraps on x86): values stay in every destination's range, and
    # negative values go to signed destinations only.
    S("Cast", _list(_c("2x3", x=vals((2, 3), 0, 3) * 7.3),
                    _c("zero", x=vals((0, 2))),
                    Case("negative", {"x": vals((2, 3), -3, 0) * 7.3},
                         only={"DstT": ("int8", "int16", "int32", "int64", "float16",
                                        "bfloat16", "float32", "float64", "bool",
                                        "complex64", "complex128")}),
                    _c("integers", x=vals((4,), 0, 50, integer=True))),
      no_bad="every value of every source type converts",
      try_types=({"SrcT": "float32", "DstT": "int32"}, {"SrcT": "int64", "DstT": "float64"}),
      ulps=1),
    S("Bitcast", _list(_c("f32->i32", input=np.float32([1.5, -2.0]), type="int32"),
                       _c("f64->u8", input=np.float64([1.5]), type="uint8"),
                       _c("i8x4->f32", input=np.int8([[1, 2, 3, 4]]), type="float32"),
                       _c("zero", input=np.zeros((0, 2), np.float32), type="int32")),
      _bad(_c("size not divisible", input=np.int8([1, 2, 3]), type="float32")),
      try_types=({},)),
    S("Transpose", _list(_c("2x3", x=X23, perm=i32([1, 0])),
                         _c("3d", x=X234, perm=i32([2, 0, 1])),
                         _c("zero", x=vals((0, 3)), perm=i32([1, 0])),
                         _c("int64 perm", x=X234, perm=i64([1, 2, 0]))),
      _bad(_c("perm length", x=X23, perm=i32([0])),
           _c("perm repeats", x=X23, perm=i32([0, 0])))),
    S("Tile", _list(_c("2x3 by 2,1", input=X23, multiples=i32([2, 1])),
                    _c("3d", input=X234, multiples=i32([1, 2, 3])),
                    _c("zero", input=X23, multiples=i32([0, 2]))),
      _bad(_c("negative", input=X23, multiples=i32([-1, 1])),
           _c("length", input=X23, multiples=i32([2])))),
    S("BroadcastTo", _list(_c("row", input=vals((3,)), shape=i32([2, 3])),
                           _c("col", input=vals((2, 1)), shape=i32([2, 4])),
                           _c("zero", input=vals((1, 3)), shape=i32([0, 3]))),
      _bad(_c("incompatible", input=vals((3,)), shape=i32([2, 4])))),
    S("Pack", _list(_c("axis 0", values=[X23, vals((2, 3), key=5)]),
                    _c("axis -1", values=[X23, X23, vals((2, 3), key=6)], axis=-1),
                    _c("one zero", values=[vals((0, 2))], axis=1)),
      _bad(_c("shapes differ", values=[X23, vals((3, 2))]),
           _c("axis out of range", values=[X23, X23], axis=3))),
    S("ConcatV2", _list(_c("axis 0", values=[X23, vals((1, 3), key=5)], axis=i32(0)),
                        _c("axis -1", values=[X23, vals((2, 1), key=5)], axis=i32(-1)),
                        _c("zero part", values=[X23, vals((0, 3))], axis=i32(0)),
                        _c("int64 axis", values=[X23, X23], axis=i64(1))),
      _bad(_c("shapes differ", values=[X23, vals((2, 4))], axis=i32(0)),
           _c("axis out of range", values=[X23, X23], axis=i32(2)))),
    S("Pad", _list(_c("2x3", input=X23, paddings=i32([[1, 0], [2, 1]])),
                   _c("zero", input=vals((0, 2)), paddings=i32([[1, 1], [0, 0]])),
                   _c("int64 pads", input=X234, paddings=i64([[0, 1], [1, 0], [0, 0]]))),
      _bad(_c("negative", input=X23, paddings=i32([[-1, 0], [0, 0]])),
           _c("paddings shape", input=X23, paddings=i32([[1, 1]])))),
    S("PadV2", _list(_c("2x3", input=X23, paddings=i32([[1, 0], [2, 1]]),
                        constant_values=np.array(1.0)),
                     _c("zero", input=vals((0, 2)), paddings=i32([[1, 1], [0, 0]]),
                        constant_values=np.array(2.0))),
      _bad(_c("paddings shape", input=X23, paddings=i32([[1, 1]]),
              constant_values=np.array(1.0)))),
    S("MirrorPad", _list(_c("REFLECT", input=X234, paddings=i32([[1, 1], [2, 0], [0, 3]]),
                            mode="REFLECT"),
                         _c("SYMMETRIC", input=X234, paddings=i32([[2, 1], [0, 3], [1, 1]]),
                            mode="SYMMETRIC")),
      _bad(_c("too wide", input=X23, paddings=i32([[2, 0], [0, 0]]), mode="REFLECT"))),
    S("MirrorPadGrad", _list(_c("REFLECT", input=vals((4, 5, 7)),
                                paddings=i32([[1, 1], [2, 0], [0, 3]]), mode="REFLECT"),
                             _c("SYMMETRIC", input=vals((5, 6, 6)),
                                paddings=i32([[2, 1], [0, 3], [1, 1]]), mode="SYMMETRIC")),
      _bad(_c("too wide", input=vals((3, 3)), paddings=i32([[2, 2], [0, 0]]),
              mode="REFLECT")),
      try_types=({"T": "float32"}, {"T": "float64"}), exact=False),
    S("Slice", _list(_c("2x3", input=X23, begin=i32([0, 1]), size=i32([2, 2])),
                     _c("size -1", input=X234, begin=i32([1, 0, 2]), size=i32([-1, 2, -1])),
                     _c("empty", input=X23, begin=i32([1, 1]), size=i32([0, 2])),
                     _c("int64", input=X23, begin=i64([1, 0]), size=i64([1, 3]))),
      _bad(_c("out of bounds", input=X23, begin=i32([1, 2]), size=i32([2, 2])),
           _c("rank", input=X23, begin=i32([0]), size=i32([1])))),
    S("StridedSlice", _list(
        _c("basic", input=X234, begin=i32([0, 1, 0]), end=i32([2, 3, 4]),
           strides=i32([1, 1, 2])),
        _c("negative stride", input=X234, begin=i32([1, -1, 3]), end=i32([0, 0, 0]),
           strides=i32([-1, -1, -2]), end_mask=1),
        _c("shrink+new axis", input=X234, begin=i32([1, 0, 0]), end=i32([2, 0, 0]),
           strides=i32([1, 1, 1]), shrink_axis_mask=1, new_axis_mask=2),
        _c("ellipsis", input=X234, begin=i32([0, 1]), end=i32([0, 3]),
           strides=i32([1, 1]), ellipsis_mask=1),
        _c("empty", input=X23, begin=i32([1, 2]), end=i32([1, 3]), strides=i32([1, 1]))),
      _bad(_c("zero stride", input=X23, begin=i32([0, 0]), end=i32([1, 1]),
              strides=i32([1, 0])),
           _c("shrink out of range", input=X23, begin=i32([5, 0]), end=i32([6, 1]),
              strides=i32([1, 1]), shrink_axis_mask=1))),
    S("StridedSliceGrad", _list(
        _c("basic", shape=i32([2, 3, 4]), begin=i32([0, 1, 0]), end=i32([2, 3, 4]),
           strides=i32([1, 1, 2]), dy=vals((2, 2, 2))),
        _c("negative stride", shape=i32([2, 3, 4]), begin=i32([1, -1, 3]),
           end=i32([0, 0, 0]), strides=i32([-1, -1, -2]), end_mask=1, dy=vals((2, 2, 2)))),
      _bad(_c("dy shape", shape=i32([2, 3, 4]), begin=i32([0, 1, 0]), end=i32([2, 3, 4]),
              strides=i32([1, 1, 2]), dy=vals((2, 2, 3))))),
    S("Squeeze", _list(_c("all", input=vals((1, 3, 1))),
                       _c("axis", input=vals((1, 3, 1)), axis=[-1]),
                       _c("zero", input=vals((0, 1)), axis=[1])),
      _bad(_c("not size 1", input=X23, axis=[0]))),
    S("ExpandDims", _list(_c("axis 0", input=X23, axis=i32(0)),
                          _c("axis -1", input=X23, axis=i32(-1)),
                          _c("zero", input=vals((0,)), axis=i64(1))),
      _bad(_c("axis out of range", input=X23, axis=i32(4)))),
    S("GatherV2", _list(_c("axis 0", params=vals((5, 3)), indices=i32([4, 0, 2, 2]),
                           axis=i32(0)),
                        _c("axis 1 int64", params=X234, indices=i64([[2, 0], [1, 1]]),
                           axis=i64(1)),
                        _c("batch_dims", params=X234, indices=i32([[1, 0], [2, 2]]),
                           axis=i32(1), batch_dims=1),
                        _c("empty indices", params=vals((5, 3)), indices=i32([]),
                           axis=i32(0))),
      _bad(_c("index out of range", params=vals((5, 3)), indices=i32([5]), axis=i32(0)),
           _c("axis out of range", params=vals((5, 3)), indices=i32([0]), axis=i32(2))),
      try_types=tuple({"Tparams": t["T"]} for t in MOVE)),
    S("UnsortedSegmentSum", _list(
        _c("1d ids", data=vals((5, 2), -4, 4, integer=True), segment_ids=i32([0, 2, 0, 1, 2]),
           num_segments=i32(4)),
        _c("negative id dropped", data=vals((4,), -4, 4, integer=True),
           segment_ids=i64([1, -1, 1, 0]), num_segments=i64(2)),
        _c("empty", data=vals((0, 3)), segment_ids=i32([]), num_segments=i32(2))),
      _bad(_c("id out of range", data=vals((3,)), segment_ids=i32([0, 3, 1]),
              num_segments=i32(3)),
           _c("ids shape", data=vals((3, 2)), segment_ids=i32([0, 1]), num_segments=i32(3))),
      try_types=FT_I, exact=False, ulps=4),
    S("OneHot", _list(_c("depth 4", indices=i64([0, 3, -1, 5]), depth=i32(4),
                         on_value=np.array(1.0), off_value=np.array(0.0)),
                      _c("axis 0", indices=i32([[1, 2], [0, 0]]), depth=i32(3),
                         on_value=np.array(5.0), off_value=np.array(-1.0), axis=0)),
      _bad(_c("negative depth", indices=i32([1]), depth=i32(-1),
              on_value=np.array(1.0), off_value=np.array(0.0)))),
    S("ArgMax", _list(_c("axis 1", input=vals((3, 4)), dimension=i32(1)),
                      _c("axis 0 int32 out", input=vals((3, 4)), dimension=i64(0),
                         output_type="int32"),
                      _c("ties", input=np.float64([1, 3, 3, 0]), dimension=i32(0))),
      _bad(_c("axis out of range", input=vals((3, 4)), dimension=i32(2)),
           _c("empty reduced", input=vals((3, 0)), dimension=i32(1))),
      try_types=FT_I),
    S("ArgMin", _list(_c("axis 1", input=vals((3, 4)), dimension=i32(1)),
                      _c("ties", input=np.float64([1, 0, 0, 3]), dimension=i32(0))),
      _bad(_c("axis out of range", input=vals((3, 4)), dimension=i32(2))),
      try_types=FT_I),
    S("Unpack", _list(_c("axis 0", value=X234, num=2),
                      _c("axis -1", value=X234, num=4, axis=-1),
                      _c("zero", value=vals((3, 0)), num=3)),
      _bad(_c("num mismatch", value=X23, num=3))),
    S("Split", _list(_c("axis 1", axis=i32(1), value=vals((2, 6)), num_split=3),
                     _c("axis -1", axis=i32(-1), value=X234, num_split=2)),
      _bad(_c("not divisible", axis=i32(1), value=X23, num_split=2))),
    S("SplitV", _list(_c("sizes", value=vals((2, 6)), size_splits=i32([1, 3, 2]),
                         axis=i32(1), num_split=3),
                      _c("inferred", value=X234, size_splits=i64([1, -1]), axis=i32(2),
                         num_split=2)),
      _bad(_c("sizes sum", value=vals((2, 6)), size_splits=i32([1, 2]), axis=i32(1),
              num_split=2))),
    S("ScatterNd", _list(_c("rows", indices=i32([[0], [2]]), updates=vals((2, 3)),
                            shape=i32([4, 3])),
                         _c("elements int64", indices=i64([[0, 1], [3, 2]]),
                            updates=vals((2,)), shape=i64([4, 3]))),
      _bad(_c("index out of range", indices=i32([[5]]), updates=vals((1, 3)),
              shape=i32([4, 3])),
           _c("shape not a vector", indices=i32([[0]]), updates=vals((1, 2)),
              shape=i32([[1], [2]]))),
      try_types=FT_I, exact=False, ulps=4),
    S("TensorScatterUpdate", _list(_c("rows", tensor=vals((4, 3)), indices=i32([[0], [2]]),
                                      updates=vals((2, 3), key=3))),
      _bad(_c("index out of range", tensor=vals((4, 3)), indices=i32([[4]]),
              updates=vals((1, 3))))),
    S("TensorScatterAdd", _list(_c("rows", tensor=vals((4, 3)), indices=i32([[0], [2]]),
                                   updates=vals((2, 3), key=3))),
      _bad(_c("index out of range", tensor=vals((4, 3)), indices=i32([[4]]),
              updates=vals((1, 3)))),
      try_types=FT_I, exact=False, ulps=4),
]


# SimdevToDlpack/SimdevFromDlpack have no CPU kernel: the property checked
# is the round trip through simdev.dlpack (sweep.dlpack_roundtrip).
OPS += [S("SimdevToDlpack", _list(_c("2x3", x=X23), _c("zero", x=vals((0, 3)))),
          no_bad="the op takes any SIMDEV tensor of a DLPack dtype", try_types=(),
          prop="dlpack"),
        S("SimdevFromDlpack", _list(_c("2x3", x=X23), _c("zero", x=vals((0, 3)))),
          no_bad="bad capsules are refused in simdev.dlpack's Python and fuzzed by "
                 "tests/fuzz; the op's address input cannot be chosen safely here",
          try_types=(), prop="dlpack")]


# The resource-variable ops (src/kernels/variables/, registered on TF
# 2.16-2.18): their resource input cannot come from NumPy arguments, so the
# property runs them on a tf.Variable of x (sweep.variable_run) and compares
# the read-back bits with TF CPU's. Values in [0.25, 2): no sum or
# difference is subnormal (whose flushing is a mode, not arithmetic).
def _variable(op, types):
    xs = vals((2, 3), 0.25, 2.0)
    return S(op, _list(_c("2x3", x=xs, value=vals((2, 3), 0.25, 2.0, key=1)),
                       _c("zero", x=vals((0, 3)), value=vals((0, 3), key=1)),
                       _c("scalar", x=np.array(1.5), value=np.array(0.75))),
             no_bad="the resource input cannot be made from the sweep's NumPy arguments: "
                    "the bad inputs (dtypes, shapes, missing variables) are tests/tf/"
                    "test_kernels_variables.py's, against TF CPU",
             no_huge="no shape is computed: the variable keeps its shape or takes the value's",
             try_types=types, prop="variable")


_VMOVE = tuple({"dtype": t} for t in ("float32", "float64", "float16", "bfloat16", "int64",
                                      "bool", "complex64"))
_VNUM = tuple({"dtype": t} for t in ("float32", "float64", "float16", "bfloat16", "int64"))
OPS += [_variable("ReadVariableOp", _VMOVE), _variable("AssignVariableOp", _VMOVE),
        _variable("AssignAddVariableOp", _VNUM), _variable("AssignSubVariableOp", _VNUM)]
