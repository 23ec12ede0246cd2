"""Slice, StridedSlice, StridedSliceGrad, Pad, PadV2, MirrorPad and
MirrorPadGrad on SIMDEV against NumPy and TF's CPU kernels (soft placement
off), in one subprocess.

Data movement is compared bit for bit (random bit patterns, NaN payloads
included) with NumPy's result for the same operation: basic indexing for
StridedSlice (every mask: begin/end via omitted bounds, ellipsis, new axis,
shrink via integer indices, negative strides, out-of-range clamping),
np.pad for Pad/PadV2/MirrorPad (REFLECT and SYMMETRIC are NumPy's
"reflect" and "symmetric"). StridedSliceGrad is the zero tensor with dy
written at the slice; MirrorPadGrad sums the gradient of every padded
position into its source (np.add.at), within a rounding bound. TF CPU is
held to the same references. Bad inputs raise the kernel's own error with
TF CPU's class and wording.
"""

import pytest

from conftest import assert_error_like_cpu, error_rows

SCRIPT = r'''
import ml_dtypes
import numpy as np
import tensorflow as tf
from childlib import SIM, check_errors, collect, rand, same, seed

tf.config.set_soft_device_placement(False)
rng = seed(1313)
R = tf.raw_ops
TYPES = ["float32", "float64", "half", "bfloat16", "int64", "uint8", "bool",
         "int8", "int16", "complex64", "int32"]

@check("registered")
def _():
    from tensorflow.python.framework import kernels
    out = {}
    for op in ("Slice", "StridedSlice", "StridedSliceGrad", "Pad", "PadV2",
               "MirrorPad", "MirrorPadGrad"):
        types = []
        for k in kernels.get_registered_kernels_for_op(op).kernel:
            if k.device_type != "SIMDEV":
                continue
            types += [tf.as_dtype(t).name for c in k.constraint if c.name == "T"
                      for t in c.allowed_values.list.type]
        out[op] = sorted(types)
    return out

# ---- Slice --------------------------------------------------------------------
SLICES = [([5], [1], [3]), ([5], [0], [-1]), ([4, 6], [1, 2], [2, 3]),
          ([4, 6], [0, 0], [4, 6]), ([4, 6], [3, 0], [1, -1]), ([0, 3], [0, 1], [0, 2]),
          ([3, 4, 5], [1, 0, 2], [2, 4, 0]), ([2, 3, 4, 5], [1, 1, 1, 1], [1, 2, 3, 4]),
          ([], [], []), ([3, 1, 7], [2, 0, 6], [-1, 1, 1])]

@check("slice")
def _():
    cases = []
    for t in TYPES:
        if t == "int32":  # TF serves int32 Slice with its own DEFAULT kernel
            continue
        for sh, b, s in SLICES:
            for it in (np.int32, np.int64):
                x = rand(t, sh)
                idx = tuple(slice(bb, None if ss == -1 else bb + ss) for bb, ss in zip(b, s))
                cases.append((f"{t} {sh} {b} {s} {it.__name__}",
                              lambda x, b=b, s=s, it=it: tf.slice(x, np.array(b, it), np.array(s, it)),
                              (x,), x[idx]))
    x = rand("float32", [700, 900])
    cases.append(("big", lambda x: tf.slice(x, [3, 5], [600, 801]), (x,), x[3:603, 5:806]))
    return collect(cases)

# ---- StridedSlice: every mask through Python indexing ------------------------
E, N = Ellipsis, None
INDEXES = [
    ([6], (slice(1, 4),)), ([6], (slice(None, None, -1),)), ([6], (slice(None, None, 2),)),
    ([6], (slice(4, 0, -2),)), ([6], (slice(-2, None),)), ([6], (slice(-100, 100),)),
    ([6], (slice(100, -100, -1),)), ([6], (slice(3, 3),)), ([6], (slice(4, 1),)),
    ([6], (2,)), ([6], (-1,)), ([6], (N,)), ([6], (E,)), ([6], (N, slice(1, 3), N)),
    ([4, 5], (1, slice(None, None, -2))), ([4, 5], (E, 3)), ([4, 5], (slice(1, 3), E)),
    ([4, 5], (E, N)), ([4, 5], (N, E, N)), ([4, 5], (slice(None, None, -1), slice(None, None, -1))),
    ([4, 5], (-1, -1)), ([4, 5], (slice(None), 2)), ([4, 5], (2, N, slice(None, None, 3))),
    ([2, 3, 4, 5], (E, 1, slice(None, None, 2))), ([2, 3, 4, 5], (1, E, -1)),
    ([2, 3, 4, 5], (slice(None), N, E, N, slice(1, None, -1))),
    ([2, 3, 4, 5], (0, 1, 2, 3)), ([2, 3, 4, 5], (slice(0, 2), slice(2, 0, -1), E)),
    ([0, 3], (slice(None), 1)), ([3, 0], (slice(1, 2), slice(None))), ([], (E,)), ([], (N,)),
    ([3, 1, 4], (slice(None, None, 5), 0, slice(3, None, -3))),
]

@check("strided_slice")
def _():
    cases = []
    for t in TYPES:
        for sh, idx in INDEXES:
            x = rand(t, sh)
            cases.append((f"{t} {sh} {idx}", lambda x, idx=idx: x[idx], (x,), x[idx]))
    x = rand("float32", [300, 500])
    cases.append(("big", lambda x: x[::-3, 7::2], (x,), x[::-3, 7::2]))
    x = rand("half", [64, 64, 3])
    # begin/end/strides as int64 tensors
    cases.append(("int64 spec", lambda x: R.StridedSlice(
        input=x, begin=np.array([60, 1, 0], np.int64), end=np.array([2, 50, 3], np.int64),
        strides=np.array([-5, 7, 1], np.int64)), (x,), x[60:2:-5, 1:50:7, 0:3]))
    # masks given directly: begin_mask ignores begin, end_mask ignores end
    x = rand("float64", [5, 6])
    cases.append(("masks", lambda x: R.StridedSlice(
        input=x, begin=[3, 4], end=[1, 2], strides=[-1, 1], begin_mask=1, end_mask=2),
        (x,), x[:1:-1, 4:]))
    cases.append(("shrink+new", lambda x: R.StridedSlice(
        input=x, begin=[0, 2, 0], end=[0, 3, 0], strides=[1, 1, 1], new_axis_mask=1,
        shrink_axis_mask=2, end_mask=4), (x,), x[None, 2, :]))
    cases.append(("ellipsis+new same bit", lambda x: R.StridedSlice(
        input=x, begin=[0, 1], end=[0, 3], strides=[1, 1], ellipsis_mask=1, new_axis_mask=1),
        (x,), x[..., 1:3]))
    return collect(cases)

# ---- StridedSliceGrad ----------------------------------------------------------
def grad_ref(x, idx, dy):
    z = np.zeros_like(x)
    z[idx] = dy
    return z

@check("strided_slice_grad")
def _():
    cases = []
    for t in ("float32", "float64"):  # other dtypes: the raw cases below
        for sh, idx in INDEXES:
            x = rand(t, sh)
            dy = rand(t, np.shape(x[idx]))
            def f(x, dy, idx=idx):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = x[idx]
                return tape.gradient(y, x, output_gradients=dy)
            cases.append((f"{t} {sh} {idx}", f, (x, dy), grad_ref(x, idx, dy)))
    for t in TYPES:
        x = rand(t, [4, 7])
        dy = rand(t, [2, 3])
        cases.append((f"raw {t}", lambda dy: R.StridedSliceGrad(
            shape=[4, 7], begin=[3, 1], end=[0, 7], strides=[-2, 2], dy=dy),
            (dy,), grad_ref(x, (slice(3, 0, -2), slice(1, 7, 2)), dy)))
        dy = rand(t, [7])
        cases.append((f"raw shrink {t}", lambda dy: R.StridedSliceGrad(
            shape=np.array([4, 7], np.int64), begin=np.array([-1, 0], np.int64),
            end=np.array([0, 0], np.int64), strides=np.array([1, 1], np.int64), dy=dy,
            shrink_axis_mask=1, end_mask=2), (dy,), grad_ref(x, (-1, slice(None)), dy)))
    return collect(cases)

# ---- Pad, PadV2, MirrorPad ------------------------------------------------------
PADS = [([3], [[1, 2]]), ([3], [[0, 0]]), ([2, 3], [[1, 0], [2, 2]]),
        ([2, 3, 4], [[0, 1], [1, 1], [2, 0]]), ([0, 2], [[1, 1], [0, 1]]),
        ([], []), ([1, 1], [[1, 1], [1, 1]]), ([2, 1, 3, 4], [[0, 0], [1, 1], [1, 1], [0, 0]])]

def const_of(t):
    v = rand(t, [])
    return v

@check("pad")
def _():
    cases = []
    for t in TYPES:
        for sh, p in PADS:
            for it in ((np.int32, np.int64) if t == "float32" else (np.int64,)):
                x = rand(t, sh)
                pp = np.array(p, it).reshape(len(sh), 2)
                cases.append((f"Pad {t} {sh} {p} {it.__name__}",
                              lambda x, pp=pp: R.Pad(input=x, paddings=pp), (x,),
                              np.pad(x, pp.reshape(-1, 2).tolist() or 0)))
                c = const_of(t)
                cases.append((f"PadV2 {t} {sh} {p} {it.__name__}",
                              lambda x, c, pp=pp: R.PadV2(input=x, paddings=pp, constant_values=c),
                              (x, c), np.pad(x, pp.reshape(-1, 2).tolist() or 0, constant_values=c)))
    x = rand("float32", [300, 400])
    cases.append(("big", lambda x: tf.pad(x, [[3, 1], [2, 5]]), (x,), np.pad(x, [[3, 1], [2, 5]])))
    return collect(cases)

MIRRORS = [([3], [[2, 2]], "REFLECT"), ([3], [[3, 3]], "SYMMETRIC"),
           ([4, 5], [[1, 3], [4, 0]], "REFLECT"), ([4, 5], [[4, 4], [0, 5]], "SYMMETRIC"),
           ([2, 3, 4], [[1, 1], [2, 1], [0, 3]], "REFLECT"),
           ([2, 3, 4], [[2, 0], [3, 3], [1, 1]], "SYMMETRIC"), ([0, 3], [[0, 0], [1, 1]], "SYMMETRIC"),
           ([1, 2], [[0, 0], [1, 1]], "REFLECT"), ([1, 2], [[1, 1], [2, 0]], "SYMMETRIC"),
           ([2, 5], [[0, 0], [0, 0]], "REFLECT")]

@check("mirror_pad")
def _():
    cases = []
    for t in TYPES:
        if t == "int32":
            continue
        for sh, p, mode in MIRRORS:
            for it in (np.int32, np.int64):
                x = rand(t, sh)
                cases.append((f"{t} {sh} {p} {mode} {it.__name__}",
                              lambda x, p=p, mode=mode, it=it: R.MirrorPad(
                                  input=x, paddings=np.array(p, it), mode=mode),
                              (x,), np.pad(x, p, mode=mode.lower())))
    x = rand("float32", [200, 300])
    cases.append(("big", lambda x: tf.pad(x, [[3, 1], [2, 5]], "REFLECT"), (x,),
                  np.pad(x, [[3, 1], [2, 5]], mode="reflect")))
    return collect(cases)

def mirror_maps(sh, p, mode):
    off = 1 if mode == "REFLECT" else 0
    maps = []
    for d, (b, a) in zip(sh, p):
        j = np.arange(-b, d + a)
        j = np.where(j < 0, -j - 1 + off, j)
        j = np.where(j >= d, 2 * d - 1 - off - j, j)
        maps.append(j)
    return maps

@check("mirror_pad_grad")
def _():
    reps = {}
    for t in ("float32", "float64"):
        for sh, p, mode in MIRRORS:
            if 0 in sh:  # TF rejects any empty dimension (total padding >= 0)
                continue
            padded = [d + b + a for d, (b, a) in zip(sh, p)]
            g = rng.standard_normal(padded).astype(t)
            maps = mirror_maps(sh, p, mode)
            ref = np.zeros(sh, np.float64)
            absr = np.zeros(sh, np.float64)
            np.add.at(ref, np.ix_(*maps), g.astype(np.float64))
            np.add.at(absr, np.ix_(*maps), np.abs(g.astype(np.float64)))
            bound = gamma(3 ** len(sh), t) * absr + tiny(t)
            rep = guarded(lambda g=g, p=p, mode=mode, ref=ref, bound=bound: versus_ref(
                lambda g: R.MirrorPadGrad(input=g, paddings=np.array(p, np.int32), mode=mode),
                g, ref=ref, bound=bound))
            reps[f"{t} {sh} {p} {mode}"] = rep
    return sweep_report(reps)

# ---- errors ------------------------------------------------------------------------
f32 = lambda *sh: rand("float32", sh)
ERRORS = [
    ("Slice sizes", lambda x: tf.slice(x, [0], [1, 1]), [f32(2, 3)], "Expected begin and size arguments to be 1-D tensors of size 2"),
    ("Slice begin", lambda x: tf.slice(x, [0, 4], [1, 0]), [f32(2, 3)], "Expected begin[1] in [0, 3], but got 4"),
    ("Slice size", lambda x: tf.slice(x, [1, 1], [1, 3]), [f32(2, 3)], "Expected size[1] in [0, 2], but got 3"),
    ("Slice zero dim", lambda x: tf.slice(x, [1, 0], [0, 1]), [f32(0, 3)], "Expected begin[0] == 0 (got 1) and size[0] == 0 (got 0) when input.dim_size(0) == 0"),
    ("StridedSlice lengths", lambda x: R.StridedSlice(input=x, begin=[0], end=[1, 1], strides=[1]), [f32(2, 3)], "Expected begin, end, and strides to be 1D equal size tensors"),
    ("StridedSlice ellipses", lambda x: R.StridedSlice(input=x, begin=[0, 0], end=[1, 1], strides=[1, 1], ellipsis_mask=3), [f32(2, 3)], "Multiple ellipses in slice spec not allowed"),
    ("StridedSlice stride", lambda x: R.StridedSlice(input=x, begin=[0, 0], end=[1, 1], strides=[1, 0]), [f32(2, 3)], "strides[1] must be non-zero"),
    ("StridedSlice shrink", lambda x: R.StridedSlice(input=x, begin=[-4], end=[0], strides=[1], shrink_axis_mask=1), [f32(2, 3)], "slice index -2 of dimension 0 out of bounds."),
    ("StridedSlice shrink stride", lambda x: R.StridedSlice(input=x, begin=[1], end=[0], strides=[-1], shrink_axis_mask=1), [f32(2, 3)], "only stride 1 allowed on non-range indexing."),
    ("StridedSlice rank", lambda x: R.StridedSlice(input=x, begin=[0, 0, 0], end=[1, 1, 1], strides=[1, 1, 1]), [f32(2, 3)], "Index out of range using input dim 2; input has only 2 dims"),
    ("StridedSliceGrad dy", lambda dy: R.StridedSliceGrad(shape=[4, 7], begin=[0, 0], end=[2, 2], strides=[1, 1], dy=dy), [f32(2, 3)], "shape of dy was [2,3] instead of [2,2]"),
    ("Pad matrix", lambda x: R.Pad(input=x, paddings=[1, 1]), [f32(3)], "paddings must be a matrix with 2 columns"),
    ("Pad rank", lambda x: R.Pad(input=x, paddings=[[1, 1]]), [f32(2, 3)], "The first dimension of paddings must be the rank of inputs"),
    ("Pad negative", lambda x: R.Pad(input=x, paddings=[[1, -1]]), [f32(3)], "Paddings must be non-negative: 1 -1"),
    ("PadV2 constant", lambda x: R.PadV2(input=x, paddings=[[1, 1]], constant_values=[1.0]), [f32(3)], "constant_values must be a scalar"),
    ("MirrorPad reflect", lambda x: R.MirrorPad(input=x, paddings=[[3, 0]], mode="REFLECT"), [f32(3)], "paddings must be less than the dimension size: 3, 0 not less than 3"),
    ("MirrorPad symmetric", lambda x: R.MirrorPad(input=x, paddings=[[0, 4]], mode="SYMMETRIC"), [f32(3)], "paddings must be no greater than the dimension size: 0, 4 greater than 3"),
    ("MirrorPad negative", lambda x: R.MirrorPad(input=x, paddings=[[0, -1]], mode="SYMMETRIC"), [f32(3)], "paddings must be non-negative: 0 -1"),
    ("MirrorPadGrad total", lambda g: R.MirrorPadGrad(input=g, paddings=[[2, 2]], mode="SYMMETRIC"), [f32(4)], "Total paddings must be less than the input dimension size: 4 was not less than 4"),
    ("MirrorPadGrad reflect", lambda g: R.MirrorPadGrad(input=g, paddings=[[2, 2]], mode="REFLECT"), [f32(5)], "paddings must be less than the output dimension size: 2, 2 not less than 1"),
    ("MirrorPadGrad symmetric", lambda g: R.MirrorPadGrad(input=g, paddings=[[0, 3]], mode="SYMMETRIC"), [f32(5)], "paddings must be no greater than the output dimension size: 0, 3 greater than 2"),
    ("MirrorPadGrad negative", lambda g: R.MirrorPadGrad(input=g, paddings=[[-1, 0]], mode="SYMMETRIC"), [f32(5)], "Paddings must be non-negative: -1, 0"),
]

def after():
    x = rand("float32", [5, 7])
    return same(lambda t: tf.pad(t[1:, ::-2], [[1, 1], [0, 2]]), (x,),
                np.pad(x[1:, ::-2], [[1, 1], [0, 2]]))[0] == ""

check_errors(ERRORS, after)

@check("tf.function")
def _():
    @tf.function
    def f(x):
        with tf.device(SIM):
            y = tf.pad(x[:, 1:-1], [[1, 1], [2, 2]], "SYMMETRIC")
            return tf.slice(y, [1, 0], [2, -1])[..., ::-1]
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    ref = np.pad(x[:, 1:-1], [[1, 1], [2, 2]], mode="symmetric")[1:3, :][..., ::-1]
    return {"problem": same(f, (x,), ref)}
'''


@pytest.fixture(scope="module")
def sl(run_tf):
    return run_tf(SCRIPT, timeout=300)


def assert_all_same(d):
    assert d["count"] > 0
    assert d["nbad"] == 0, f"{d['nbad']} of {d['count']} cases differ: {d['bad']}"
    assert d["ncpu_bad"] == 0, \
        f"TF CPU differs from NumPy on {d['ncpu_bad']} cases: {d['cpu_bad']}"


@pytest.mark.parametrize("name", ["slice", "strided_slice", "strided_slice_grad",
                                  "pad", "mirror_pad"])
def test_matches_reference(sl, name):
    assert_all_same(sl.data(name))


def test_mirror_pad_grad(sl):
    from conftest import assert_sweep
    assert_sweep(sl.data("mirror_pad_grad"), min_cases=18)


BYTES = ["bfloat16", "bool", "complex64", "float16", "float32", "float64",
         "int16", "int64", "int8", "uint8"]


@pytest.mark.registry
@pytest.mark.parametrize("op,types", [
    ("Slice", BYTES), ("StridedSlice", sorted(BYTES + ["int32"])),
    ("StridedSliceGrad", sorted(BYTES + ["int32"])), ("Pad", sorted(BYTES + ["int32"])),
    ("PadV2", sorted(BYTES + ["int32"])), ("MirrorPad", BYTES),
    ("MirrorPadGrad", ["float32", "float64"])])
def test_registered_types(sl, op, types):
    """No int32 Slice: TF 2.21 has a host-memory DEVICE_DEFAULT kernel."""
    assert sl.data("registered")[op] == types


def error_cases():
    return error_rows(SCRIPT)


@pytest.mark.parametrize("name,key", error_cases())
def test_error_from_kernel(sl, name, key):
    assert_error_like_cpu(sl.data("error " + name), name.split()[0], key)


def test_error_names_found():
    assert len(error_cases()) == 22


def test_graph_mode(sl):
    assert sl.data("tf.function")["problem"] == ["", ""]


def test_clean_exit(sl):
    sl.assert_clean_exit()
