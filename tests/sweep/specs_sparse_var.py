"""Sweep specs of the sparse resource-variable ops (src/kernels/variables/
gather_ops.c, scatter_ops.c; registered on TF 2.16-2.18): run by property
"variable" (sweep.variable_run: a tf.Variable of x on the device, the op on
its handle with indices (and updates), the gather's output or the variable
read back), bit for bit against TF CPU. Indices repeat (duplicates
accumulate in row order on both); values in [0.25, 2) keep every result
normal. Bad inputs are tests/tf/test_kernels_resource_scatter.py's."""
import numpy as np

from specs_core import Case, Spec, vals

NO_BAD = ("the resource input cannot be made from the sweep's NumPy arguments: the bad "
          "indices, shapes and dtypes are tests/tf/test_kernels_resource_scatter.py's, "
          "against TF CPU")
NO_HUGE = "no shape is computed from a value: the output is the variable's or indices'"

IDX = np.array([3, 0, 3, 1, 3])           # duplicates
IDX2 = np.array([[1, 2], [0, 0], [1, 2]])  # N-d, a duplicate
NUM = ("float32", "float64", "float16", "bfloat16")


def _combos(types, attr="dtype", index=("int32", "int64")):
    return tuple({attr: t, "Tindices": i} for t in types for i in index)


def _cases(*cs):
    return lambda quick: list(cs)[:2] if quick else list(cs)


def _spec(op, cases, combos):
    return Spec(op, cases, None, no_bad=NO_BAD, no_huge=NO_HUGE, exact=True,
                try_types=combos, prop="variable")


def _scatter(op, types, scalar=True, combos=None):
    cs = [Case("rows", dict(x=vals((4, 3), 0.25, 2.0), indices=IDX,
                            updates=vals((5, 3), 0.25, 2.0, key=1))),
          Case("2d indices", dict(x=vals((4, 3), 0.25, 2.0), indices=IDX[:4].reshape(2, 2),
                                  updates=vals((2, 2, 3), 0.25, 2.0, key=2)))]
    if scalar:
        cs.append(Case("scalar update", dict(x=vals((4, 3), 0.25, 2.0), indices=IDX,
                                             updates=np.array(0.75))))
    return _spec(op, _cases(*cs), combos or _combos(types))


def _scatter_nd(op, types):
    return _spec(op, _cases(
        Case("elements", dict(x=vals((2, 3), 0.25, 2.0), indices=IDX2,
                              updates=vals((3,), 0.25, 2.0, key=1))),
        Case("rows", dict(x=vals((4, 3), 0.25, 2.0), indices=IDX.reshape(5, 1),
                          updates=vals((5, 3), 0.25, 2.0, key=1)))), _combos(types, "T"))


GATHER_T = NUM + ("int64", "bool", "complex64", "complex128")
OPS = [
    _spec("ResourceGather", _cases(
        Case("rows", dict(x=vals((4, 3)), indices=IDX)),
        Case("batch_dims", dict(x=vals((2, 3, 2)), indices=np.array([[2, 0], [1, 1]]),
                                batch_dims=1)),
        Case("empty", dict(x=vals((4, 3)), indices=np.zeros((0, 2))))), _combos(GATHER_T)),
    _spec("ResourceGatherNd", _cases(
        Case("elements", dict(x=vals((2, 3)), indices=IDX2)),
        Case("rows", dict(x=vals((4, 3)), indices=IDX.reshape(5, 1)))), _combos(NUM)),
]
OPS += [_scatter("ResourceScatter" + n, NUM) for n in ("Add", "Sub", "Mul", "Div", "Min", "Max")]
OPS += [_scatter("ResourceScatterUpdate", NUM, combos=_combos(NUM) + (
    {"dtype": "bool", "Tindices": "int32"}, {"dtype": "int64", "Tindices": "int64"}))]
_ND_ALL = NUM + ("int64", "complex64", "complex128")
OPS += [_scatter_nd("ResourceScatterNd" + n, _ND_ALL) for n in ("Update", "Add", "Sub")]
OPS += [_scatter_nd("ResourceScatterNd" + n, NUM + ("int64",)) for n in ("Min", "Max")]
