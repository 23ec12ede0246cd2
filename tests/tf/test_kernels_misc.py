"""The misc kernel family against NumPy and TF's CPU kernels (soft
placement off): Bitcast, Reshape, Identity (aliasing, no copy), Cast, Fill,
ZerosLike, OnesLike, Transpose, Tile, BroadcastTo, Pack, ConcatV2.

One subprocess runs every case. Data movement is compared bit for bit, on
random bit patterns (NaN payloads included), with NumPy's result for the
same operation (view, reshape, transpose, tile, broadcast_to, stack,
concatenate, full, zeros_like, ones_like); TF CPU is held to the same
reference. Cast is compared bit for bit with NumPy's astype where IEEE and
C define the result (any NaN equals any NaN); where they do not (subnormal
inputs and results, which TF's CPU threads flush to zero; out-of-range or
NaN float to integer; Truncate=True narrowing), with TF CPU, except where
TF itself is not deterministic (see cast_ambiguous). Every case checks that
the SIMDEV result really is on SIMDEV. Bad inputs must raise the kernel's
own error (TF CPU's class and wording); a good op runs afterwards.
"""
import pytest

from conftest import assert_error_like_cpu, error_rows

OPS_BY_PREFIX = {"bitcast": "Bitcast", "reshape": "Reshape", "fill": "Fill",
                 "transpose": "Transpose", "tile": "Tile", "broadcast": "BroadcastTo",
                 "pack": "Pack", "concat": "ConcatV2"}

SCRIPT = r'''
import gc
import ml_dtypes
import numpy as np
import tensorflow as tf
from childlib import BF16, CPU, SIM, check_errors, collect, npt, rand, run, same, seed

tf.config.set_soft_device_placement(False)
rng = seed(20240607)
R = tf.raw_ops

MOVE_TYPES = ["float32", "float64", "half", "bfloat16", "int64", "uint8",
              "bool", "int8", "int16", "complex64"]
# Transpose, Tile, BroadcastTo and Pack also serve int32 (host memory).
MOVE32 = MOVE_TYPES + ["int32"]
FILL_TYPES = ["float32", "float64", "int64", "half", "bfloat16"]
CAST_TYPES = ["float32", "float64", "int32", "int64", "uint8", "bool",
              "half", "bfloat16"]
BITCAST_TYPES = ["float32", "float64", "int32", "int64", "uint8", "int8",
                 "int16", "uint16", "uint32", "uint64", "half", "bfloat16",
                 "complex64"]

def np_bitcast(x, name):
    """TF's Bitcast in NumPy: the same bytes; the last dimension grows by
    the size ratio (to a smaller type) or is consumed (to a larger one)."""
    dt = np.dtype(npt(name))
    if dt.itemsize == x.dtype.itemsize:
        return x.view(dt)
    if dt.itemsize < x.dtype.itemsize:
        return x.reshape(x.shape + (1,)).view(dt)
    return x.view(dt).reshape(x.shape[:-1])

def np_shape(shape, dims):
    """TF's Reshape target for an input of `shape`: one -1 is whatever
    makes the element count; when the other target dimensions hold no
    element, TF computes it from the non-zero dimensions on both sides (as
    TF CPU shows: [0] -> [-1, 0] is [1, 0], [2, 0, 3] -> [0, -1] is [0, 6])."""
    dims = list(dims)
    if -1 in dims:
        rest = [d for d in dims if d != -1]
        known = int(np.prod(rest, dtype=np.int64))
        if known:
            dims[dims.index(-1)] = int(np.prod(shape, dtype=np.int64)) // known
        else:
            dims[dims.index(-1)] = int(np.prod([d for d in shape if d], dtype=np.int64)) // \
                int(np.prod([d for d in rest if d], dtype=np.int64))
    return dims

@check("cast soft placement")
def _():
    tf.config.set_soft_device_placement(True)
    try:
        with tf.device("/device:SIMDEV:0"):
            y = tf.cast(tf.constant([1.0, 2.0]), tf.complex64)
        v = y.numpy()
        return {"device": y.device,
                "value": [[float(z.real), float(z.imag)] for z in v]}
    finally:
        tf.config.set_soft_device_placement(False)

@check("registered")
def _():
    """dtypes of the SIMDEV kernels per op ("any" when unconstrained)."""
    from tensorflow.python.framework import kernels
    out = {}
    for op in ("Bitcast", "Reshape", "Identity", "Cast", "Fill", "ZerosLike",
               "OnesLike", "Transpose", "Tile", "BroadcastTo", "Pack", "ConcatV2"):
        types = []
        for k in kernels.get_registered_kernels_for_op(op).kernel:
            if k.device_type != "SIMDEV":
                continue
            cs = [c for c in k.constraint if c.name in ("T", "SrcT")]
            types += [tf.as_dtype(t).name for c in cs
                      for t in c.allowed_values.list.type] or ["any"]
        # Cast registers once per (SrcT, DstT) pair: list each SrcT once.
        out[op] = sorted(set(types)) if op == "Cast" else sorted(types)
    return out

# ---- Bitcast ---------------------------------------------------------------
@check("bitcast pairs")
def _():
    cases = []
    for a in BITCAST_TYPES:
        for b in BITCAST_TYPES:
            sa, sb = np.dtype(npt(a)).itemsize, np.dtype(npt(b)).itemsize
            r = max(sa, sb) // min(sa, sb)
            shapes = [[2, 3], [1, 1]] if sa == sb else [[5], [1]]
            if sa < sb:
                shapes = [[3, r], [1, r], [2, 7, r]]
            if sa >= sb:
                shapes += [[]]
            shapes += [[0, r]] if sa < sb else [[0], [3, 0]]
            for sh in shapes:
                x = rand(a, sh)
                cases.append((f"{a}->{b} {sh}",
                              lambda x, b=b: tf.bitcast(x, tf.as_dtype(b)),
                              (x,), np_bitcast(x, b)))
    x = rand("float32", [1 << 21])
    cases.append(("big float32->uint8", lambda x: tf.bitcast(x, tf.uint8), (x,),
                  np_bitcast(x, "uint8")))
    return collect(cases)

def mem_current():
    return tf.config.experimental.get_memory_info("SIMDEV:0")["current"]

@check("alias no copy")
def _():
    """Bitcast, Reshape, Identity and same-type Cast of a 32 MiB tensor on
    SIMDEV allocate nothing."""
    with tf.device(SIM):
        x = tf.identity(tf.constant(rand("float32", [1 << 23])))
    gc.collect()
    out = {}
    for name, fn in [("bitcast", lambda: tf.bitcast(x, tf.int32)),
                     ("reshape", lambda: tf.reshape(x, [-1, 1024])),
                     ("identity", lambda: tf.identity(x)),
                     ("cast same", lambda: tf.cast(x, tf.float32))]:
        before = mem_current()
        with tf.device(SIM):
            y = fn()
        grew = mem_current() - before
        out[name] = {"grew": grew, "device": y.device,
                     "equal": y.numpy().tobytes() == x.numpy().tobytes()}
        del y
    return out

# ---- Reshape, Identity -----------------------------------------------------
RESHAPES = [([6], [2, 3]), ([6], [-1, 2]), ([2, 3], [-1]), ([1], []),
            ([], [1, 1]), ([1, 1], [-1]), ([0], [-1, 0]), ([0], [-1, 3]),
            ([2, 0, 3], [0, -1]), ([3, 0], [0, 5]), ([7, 11, 13], [13, -1, 7]),
            ([4, 6], [2, 2, 2, 3])]

@check("reshape")
def _():
    cases = []
    for t in MOVE_TYPES:
        for src, dst in RESHAPES:
            for it in (tf.int32, tf.int64):
                x = rand(t, src)
                cases.append((f"{t} {src}->{dst} {it.name}",
                              lambda x, dst=dst, it=it: tf.reshape(x, tf.constant(dst, it)),
                              (x,), x.reshape(np_shape(x.shape, dst))))
    x = rand("float32", [2])
    cases.append(("scalar shape", lambda x: R.Reshape(tensor=x, shape=np.array(2, np.int32)),
                  (x,), x))
    x = rand("float32", [3 * 7 * 200001])
    cases.append(("big", lambda x: tf.reshape(x, [-1, 3, 7]), (x,), x.reshape(-1, 3, 7)))
    return collect(cases)

@check("identity")
def _():
    cases = []
    for t in MOVE_TYPES:
        for sh in ([], [0], [1, 1], [3, 0, 2], [17, 5]):
            x = rand(t, sh)
            cases.append((f"{t} {sh}", tf.identity, (x,), x))
    x = rand("float64", [1 << 21])
    cases.append(("big", tf.identity, (x,), x))
    return collect(cases)

# ---- Cast --------------------------------------------------------------------
SPECIALS = [0.0, -0.0, 1.5, -1.5, 2.5, -2.5, 0.5, 255.9, -0.9, 3e9, -3e9, 1e20,
            -1e20, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 1e-310,
            65504, 65519, 65520, 1e-6, 3e-8, 6e-8, 1.00390625 + 1e-6,
            1 + 2**-11 + 2**-40, 2**31, -2**31, 2**31 - 64, 2**63, -2**63,
            16777217, 2**24 + 2**16 + 1]

def cast_source(name, n):
    if name == "bool":
        return rng.integers(0, 2, n) == 1
    dt = np.dtype(npt(name))
    if name in ("int32", "int64", "uint8"):
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, dtype=np.int64, endpoint=True).astype(dt)
        sp = [0, 1, -1, 255, 256, 300, info.max, info.min, 65504, 65519,
              65520, 16777217, 2**24 + 2**16 + 1]
        v[:len(sp)] = np.array(sp, np.int64).astype(dt)
        return v
    v = rand(name, [n])  # random bits ...
    with np.errstate(all="ignore"):
        k = n - n // 2
        mid = rng.standard_normal(k) * 10.0 ** rng.integers(-12, 12, k)
        v[n // 2:] = mid.astype(dt)  # ... and ordinary magnitudes
        v[:len(SPECIALS)] = np.array(SPECIALS, np.float64).astype(dt)
    return v

def float_bits_equal(a, b):
    """Same bits, except that any NaN equals any NaN (TF's float->bfloat16
    NaN sign depends on vectorisation)."""
    if a.dtype.kind not in "fc" and a.dtype != BF16:
        return np.array_equal(a.view(np.uint8), b.view(np.uint8))
    an, bn = np.isnan(a.astype(np.float64) if a.dtype == BF16 else a), \
             np.isnan(b.astype(np.float64) if b.dtype == BF16 else b)
    if not np.array_equal(an, bn):
        return False
    w = a.dtype.itemsize
    av = a.view(np.uint8).reshape(-1, w)[~an.reshape(-1)]
    bv = b.view(np.uint8).reshape(-1, w)[~bn.reshape(-1)]
    return np.array_equal(av, bv)

FLOATS = ("float32", "float64", "half", "bfloat16")

def f32_to_bf16(f):
    """float32 -> bfloat16 rounded to nearest, ties to even, on the bits (the
    rule of TF's and Eigen's bfloat16 conversion, written out so that no
    library's choice of rounding enters the reference); NaN stays NaN."""
    f = np.asarray(f, np.float32)
    u = f.reshape(-1).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f.reshape(-1))
    r[nan] = (0x7FC0 | (u[nan] >> 16) & 0x8000).astype(np.uint16)
    return r.view(BF16).reshape(f.shape)

def cast_reference(src, dst, trunc, x):
    """TF's result of Cast as rules stated here (not borrowed from NumPy's
    or ml_dtypes' conversions, which changed between ml_dtypes 0.6 and 0.7),
    and the mask of the elements the rules define (the others are compared
    with TF CPU):
      - to bool: x != 0 (NaN is true); from bool: 0 or 1;
      - integer -> integer: modulo 2^bits (two's complement);
      - integer -> float32/float64: one rounding to nearest even (C's
        conversion); integer -> half/bfloat16: through float32, two
        roundings (Eigen's half(int) and bfloat16(int) convert a float:
        2^24 + 2^16 + 1 -> 2^24 + 2^16 -> bfloat16 2^24, not 2^24 + 2^17);
      - float -> float32/float64: the exact value rounded once; float ->
        half/bfloat16: through float32 (exact from half and bfloat16,
        rounded from float64: 1 + 2^-11 + 2^-40 -> 1.0, not IEEE's
        1.000977), then rounded to nearest even;
      - float -> integer: truncation, defined only where the truncated value
        fits: lo <= t < hi + 1, bounds exact in float64 (hi itself, e.g.
        INT64_MAX, is not); outside, C leaves it undefined;
      - not defined: subnormal inputs and results (TF's CPU threads flush
        them to zero) and truncating float narrowing (Truncate=True: TF's
        own rule)."""
    with np.errstate(all="ignore"):
        isfloat = src in FLOATS
        # the value exactly: float64 holds every half, bfloat16 and float32;
        # int64 every integer type here but uint64, which stays itself
        v = x.astype(np.float64) if isfloat else \
            x if x.dtype == np.uint64 else x.astype(np.int64)
        defined = np.ones(x.shape, bool)
        if dst == "bool":
            ref = v != 0
        elif dst in ("half", "bfloat16"):
            f32 = v.astype(np.float32)
            ref = f32.astype(np.float16) if dst == "half" else f32_to_bf16(f32)
        elif dst in FLOATS:
            ref = v.astype(npt(dst))
        elif not isfloat:
            ref = x.astype(npt(dst)) if src != "bool" else v.astype(npt(dst))
        else:
            info = np.iinfo(npt(dst))
            t = np.trunc(v)
            defined &= np.isfinite(v) & (t >= float(info.min)) & (t < float(info.max + 1))
            ref = np.where(defined, t, 0).astype(npt(dst))
        if isfloat:
            # subnormal inputs: TF's CPU threads treat them as zero
            defined &= ~((v != 0) & (np.abs(v) < ml_dtypes.finfo(npt(src)).tiny))
        if dst in FLOATS:
            if isfloat and trunc and \
                    ml_dtypes.finfo(npt(dst)).bits < ml_dtypes.finfo(npt(src)).bits:
                defined &= False        # truncating narrowing: TF's own rule
            r = ref.astype(np.float64)
            # subnormal results: flushed to zero
            defined &= ~((r != 0) & (np.abs(r) < ml_dtypes.finfo(npt(dst)).tiny))
    return ref, defined

def cast_ambiguous(src, dst, x):
    """TF's float -> uint8 saturates in its vector loop and wraps in the
    scalar tail: for truncated values outside [0, 256) (and inside int32)
    the result depends on the element's position."""
    if dst != "uint8" or src in ("int32", "int64", "uint8", "bool"):
        return np.zeros(x.shape, bool)
    with np.errstate(all="ignore"):
        f = x.astype(np.float64)
        return ((f >= 256) & (f < 2**31)) | ((f <= -1) & (f > -2**31 - 1))

def first_diff(a, b):
    """Index of the first element whose bytes differ (NaNs aside)."""
    for i in range(len(a)):
        if not float_bits_equal(a[i:i + 1], b[i:i + 1]):
            return i
    return 0

@check("cast pairs")
def _():
    bad, cpu_bad, count = [], [], 0
    for src in CAST_TYPES:
        x = cast_source(src, 4099)
        for dst in CAST_TYPES:
            for trunc in (False, True):
                for sh in ((4099,), (0, 3), (), (1, 1)):
                    xs = x[:int(np.prod(sh))].reshape(sh)
                    fn = lambda t, dst=dst, trunc=trunc: R.Cast(
                        x=t, DstT=tf.as_dtype(dst), Truncate=trunc)
                    s, c = run(SIM, fn, (xs,)), run(CPU, fn, (xs,))
                    count += 1
                    a, b = s.numpy(), c.numpy()
                    label = f"{src}->{dst} trunc={trunc} {sh}"
                    if "SIMDEV:0" not in s.device:
                        bad.append(f"{label}: on {s.device}")
                        continue
                    if a.dtype != b.dtype or a.shape != b.shape:
                        bad.append(f"{label}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
                        continue
                    ref, defined = cast_reference(src, dst, trunc, xs)
                    defined = defined.reshape(-1)
                    keep = ~cast_ambiguous(src, dst, xs).reshape(-1) & ~defined
                    xf = xs.reshape(-1)
                    for what, want, mask, out in (("NumPy", ref, defined, bad),
                                                  ("TF CPU", b, keep, bad)):
                        a1, w1 = a.reshape(-1)[mask], want.reshape(-1)[mask]
                        if not float_bits_equal(a1, w1):
                            i = first_diff(a1, w1)
                            out.append(f"{label}: SIMDEV differs from {what} (e.g. "
                                       f"x={xf[mask][i]!r} simdev={a1[i]!r} {what}={w1[i]!r})")
                    c1, r1 = b.reshape(-1)[defined], ref.reshape(-1)[defined]
                    if not float_bits_equal(c1, r1):
                        i = first_diff(c1, r1)
                        cpu_bad.append(f"{label}: TF CPU differs from NumPy (e.g. "
                                       f"x={xf[defined][i]!r} cpu={c1[i]!r} numpy={r1[i]!r})")
    return {"count": count, "bad": bad[:20], "nbad": len(bad),
            "cpu_bad": cpu_bad[:20], "ncpu_bad": len(cpu_bad)}

@check("cast big")
def _():
    cases = []
    for src, dst in (("float32", "half"), ("float64", "int32"),
                     ("int64", "float32"), ("bfloat16", "float64"),
                     ("float32", "uint8")):
        n = 3_000_001
        if src in ("float32", "float64", "bfloat16"):
            x = (rng.standard_normal(n) * 100).astype(npt(src))
            if dst == "uint8":
                x = np.abs(x).clip(0, 255.9).astype(npt(src))
        else:
            x = rng.integers(-2**40, 2**40, n).astype(npt(src))
        ref, _ = cast_reference(src, dst, False, x)  # in range by construction
        cases.append((f"{src}->{dst}", lambda t, dst=dst: tf.cast(t, tf.as_dtype(dst)), (x,), ref))
    return collect(cases)

# ---- Fill, ZerosLike, OnesLike ----------------------------------------------
FILL_SHAPES = [[], [0], [1, 1], [3, 5, 7], [2, 0, 3], [1001]]

@check("fill")
def _():
    cases = []
    for t in FILL_TYPES:
        for sh in FILL_SHAPES:
            for it in (tf.int32, tf.int64):
                v = rand(t, [])
                cases.append((f"{t} {sh} {it.name}",
                              lambda v, sh=sh, it=it: R.Fill(dims=tf.constant(sh, it), value=v),
                              (v,), np.full(sh, v, v.dtype)))
        v = rand(t, [1])
        cases.append((f"{t} vector value", lambda v: R.Fill(dims=[2, 3], value=v),
                      (v,), np.full([2, 3], v[0], v.dtype)))
    v = rand("float32", [])
    cases.append(("big", lambda v: tf.fill([2048, 2049], v), (v,), np.full([2048, 2049], v)))
    v = rand("float32", [])
    cases.append(("scalar dims", lambda v: R.Fill(dims=np.array(3, np.int32), value=v),
                  (v,), np.full([3], v)))
    return collect(cases)

@check("zeros ones like")
def _():
    cases = []
    for t in FILL_TYPES:
        for sh in FILL_SHAPES:
            x = rand(t, sh)
            cases.append((f"zeros {t} {sh}", tf.zeros_like, (x,), np.zeros_like(x)))
            cases.append((f"ones {t} {sh}", tf.ones_like, (x,), np.ones_like(x)))
    x = rand("bfloat16", [4_000_037])
    cases.append(("big ones", tf.ones_like, (x,), np.ones_like(x)))
    x = rand("float64", [4_000_037])
    cases.append(("big zeros", tf.zeros_like, (x,), np.zeros_like(x)))
    return collect(cases)

# ---- Transpose ----------------------------------------------------------------
def transposes():
    out = [([], []), ([1, 1], [1, 0]), ([7, 13], [1, 0]), ([3, 1, 5], [2, 0, 1]),
           ([0, 4], [1, 0]), ([2, 3, 4, 5], [3, 1, 0, 2]), ([2, 3, 4, 5], [0, 1, 3, 2]),
           ([4, 5, 6], [0, 1, 2]), ([5, 1, 3], [1, 0, 2]), ([33, 65], [1, 0]),
           ([3, 37, 41], [0, 2, 1]), ([2, 3, 4], [-1, 0, 1])]
    r = np.random.default_rng(5)
    for rank in (5, 8, 16):
        dims = list(r.choice([1, 2, 3], rank)) if rank < 16 else [2] * 10 + [1] * 6
        out.append(([int(d) for d in dims], [int(p) for p in r.permutation(rank)]))
    return out

@check("transpose")
def _():
    cases = []
    for t in MOVE32:
        for sh, perm in transposes():
            for it in (tf.int32, tf.int64):
                x = rand(t, sh)
                cases.append((f"{t} {sh} {perm} {it.name}",
                              lambda x, perm=perm, it=it: tf.transpose(x, tf.constant(perm, it)),
                              (x,), np.transpose(x, perm)))
    return collect(cases)

@check("transpose big")
def _():
    cases = []
    for label, t, sh, perm in [("f32 2-D", "float32", [2001, 3003], None),
                               ("u8 2-D", "uint8", [1999, 2001], None),
                               ("f64 3-D", "float64", [3, 1001, 1000], [1, 2, 0]),
                               ("half batched", "half", [4, 1000, 999], [0, 2, 1]),
                               ("f32 wide", "float32", [3, 1_000_003], None),
                               ("f32 tall", "float32", [1_000_003, 3], None)]:
        x = rand(t, sh)
        cases.append((label, lambda x, perm=perm: tf.transpose(x, perm), (x,),
                      np.ascontiguousarray(np.transpose(x, perm))))
    return collect(cases)

# ---- Tile, BroadcastTo ----------------------------------------------------------
TILES = [([], []), ([1, 1], [3, 2]), ([2, 3], [2, 1]), ([2, 3], [1, 1]),
         ([3, 1, 2], [2, 3, 0]), ([0, 3], [2, 2]), ([5], [7]), ([2, 3, 4], [3, 1, 2]),
         ([1], [1001])]

@check("tile")
def _():
    cases = []
    for t in MOVE32:
        for sh, m in TILES:
            for it in (tf.int32, tf.int64):
                x = rand(t, sh)
                cases.append((f"{t} {sh} x{m} {it.name}",
                              lambda x, m=m, it=it: tf.tile(x, tf.constant(m, it)),
                              (x,), np.tile(x, m) if m else x))
    x = rand("float32", [1000, 1001])
    cases.append(("big", lambda x: tf.tile(x, [2, 3]), (x,), np.tile(x, [2, 3])))
    return collect(cases)

BROADCASTS = [([], [4, 3]), ([3], [2, 3]), ([3, 1], [3, 4]), ([1, 3], [5, 3]),
              ([2, 1, 3], [2, 4, 3]), ([2, 3], [2, 3]), ([0, 3], [2, 0, 3]),
              ([1], [0]), ([1, 1], [1, 1]), ([5, 1, 7], [3, 5, 2, 7])]

@check("broadcast_to")
def _():
    cases = []
    for t in MOVE32:
        for sh, o in BROADCASTS:
            for it in (tf.int32, tf.int64):
                x = rand(t, sh)
                cases.append((f"{t} {sh}->{o} {it.name}",
                              lambda x, o=o, it=it: tf.broadcast_to(x, tf.constant(o, it)),
                              (x,), np.broadcast_to(x, o)))
    for label, t, sh, o in [("big row", "float32", [1, 2048], [2048, 2048]),
                            ("big col", "int64", [2048, 1], [2048, 1001]),
                            ("big scalar", "half", [], [3_000_017])]:
        x = rand(t, sh)
        cases.append((label, lambda x, o=o: tf.broadcast_to(x, o), (x,), np.broadcast_to(x, o)))
    return collect(cases)

# ---- Pack, ConcatV2 ---------------------------------------------------------------
@check("pack")
def _():
    cases = []
    for t in MOVE32:
        for sh in ([], [3], [2, 3], [0, 3], [4, 1, 5]):
            for n in (1, 2, 5):
                for axis in range(-len(sh) - 1, len(sh) + 1):
                    xs = [rand(t, sh) for _ in range(n)]
                    cases.append((f"{t} {n}x{sh} axis={axis}",
                                  lambda *v, axis=axis: tf.stack(list(v), axis=axis), xs,
                                  np.stack(xs, axis=axis)))
    xs = [rand("float32", [1000, 1000]) for _ in range(3)]
    cases.append(("big", lambda *v: tf.stack(list(v), axis=1), xs, np.stack(xs, axis=1)))
    return collect(cases)

CONCATS = [([[2, 3], [2, 5], [2, 0]], 1), ([[2, 3], [2, 5], [2, 0]], -1),
           ([[1, 3], [4, 3]], 0), ([[2, 3, 4], [2, 1, 4], [2, 2, 4]], 1),
           ([[0, 3], [0, 3]], 0), ([[0, 3], [0, 2]], 1), ([[3], [0], [5]], 0),
           ([[1, 1], [1, 1]], -2), ([[2, 3, 4], [2, 3, 1]], 2)]

@check("concat")
def _():
    cases = []
    for t in MOVE_TYPES:
        for shapes, axis in CONCATS:
            for it in (tf.int32, tf.int64):
                xs = [rand(t, sh) for sh in shapes]
                cases.append((f"{t} {shapes} axis={axis} {it.name}",
                              lambda *v, axis=axis, it=it: R.ConcatV2(
                                  values=list(v), axis=tf.constant(axis, it)), xs,
                              np.concatenate(xs, axis=axis)))
    xs = [rand("float32", [2, 3]), rand("float32", [2, 4])]
    cases.append(("axis as [1]", lambda a, b: R.ConcatV2(values=[a, b], axis=[1]), xs,
                  np.concatenate(xs, 1)))
    big = [rand("float32", [2000, 1000]), rand("float32", [2000, 1001])]
    cases.append(("big axis 1", lambda a, b: tf.concat([a, b], 1), big,
                  np.concatenate(big, 1)))
    big = [rand("float32", [2000, 1000]), rand("float32", [1001, 1000])]
    cases.append(("big axis 0", lambda a, b: tf.concat([a, b], 0), big,
                  np.concatenate(big, 0)))
    return collect(cases)

# ---- errors -------------------------------------------------------------------------
f32 = lambda *sh: rand("float32", sh)
ERRORS = [
    ("bitcast f32->f64 [3]", lambda x: tf.bitcast(x, tf.float64), [f32(3)], "Cannot bitcast from 1 to 2"),
    ("bitcast f32->f64 []", lambda x: tf.bitcast(x, tf.float64), [f32()], "Cannot bitcast"),
    ("bitcast f32->f64 [2,0]", lambda x: tf.bitcast(x, tf.float64), [f32(2, 0)], "Cannot bitcast"),
    ("bitcast i8->f32 [4,3]", lambda x: tf.bitcast(x, tf.float32), [rand("int8", [4, 3])], "Cannot bitcast from 6 to 1"),
    ("bitcast i8->f32 [0]", lambda x: tf.bitcast(x, tf.float32), [rand("int8", [0])], "Cannot bitcast"),
    ("reshape count", lambda x: tf.reshape(x, [4, 2]), [f32(6)], "requested shape has 8"),
    ("reshape two -1", lambda x: tf.reshape(x, [-1, -1]), [f32(6)], "Only one input size may be -1"),
    ("reshape -2", lambda x: tf.reshape(x, [-2, -3]), [f32(6)], "must be non-negative"),
    ("reshape multiple", lambda x: tf.reshape(x, [-1, 4]), [f32(6)], "requires a multiple of 4"),
    ("reshape 2-D shape", lambda x: R.Reshape(tensor=x, shape=[[6]]), [f32(6)], "sizes input must be 1-D"),
    ("reshape overflow", lambda x: tf.reshape(x, [2**40, 2**40]), [f32(2)], "has too many elements"),
    ("reshape int64", lambda x: tf.reshape(x, tf.constant([2**33, 1], tf.int64)), [f32(2)], "requested shape has"),
    ("reshape zero", lambda x: tf.reshape(x, [0, -1]), [f32(6)], "requested shape has 0"),
    ("fill dims 2-D", lambda: R.Fill(dims=[[2]], value=1.0), [], "dims must represent a vector"),
    ("fill value", lambda: R.Fill(dims=[2], value=[1.0, 2.0]), [], "value must represent a scalar"),
    ("fill negative", lambda: R.Fill(dims=[2, -1], value=1.0), [], "must be >= 0"),
    ("fill overflow", lambda: R.Fill(dims=[2**40, 2**40], value=1.0), [], "elements"),
    ("transpose perm 2-D", lambda x: R.Transpose(x=x, perm=[[1, 0]]), [f32(2, 3)], "perm must be rank 1"),
    ("transpose perm size", lambda x: R.Transpose(x=x, perm=[1, 0, 2]), [f32(2, 3)], "transpose expects a vector of size 2"),
    ("transpose perm range", lambda x: R.Transpose(x=x, perm=[2, 0]), [f32(2, 3)], "out of range"),
    ("transpose perm -3", lambda x: R.Transpose(x=x, perm=[-3, 0]), [f32(2, 3)], "-1 is out of range"),
    ("transpose perm dup", lambda x: R.Transpose(x=x, perm=[1, 1, 0]), [f32(2, 3, 4)], "2 is missing from {1,1,0}"),
    ("tile length", lambda x: tf.tile(x, [2]), [f32(2, 3)], "vector of length 2 but got length 1"),
    ("tile negative", lambda x: tf.tile(x, [2, -1]), [f32(2, 3)], "Expected multiples[1] >= 0"),
    ("tile 2-D", lambda x: R.Tile(input=x, multiples=[[2, 1]]), [f32(2, 3)], "Expected multiples to be 1-D"),
    ("broadcast incompatible", lambda x: tf.broadcast_to(x, [4, 3]), [f32(2, 3)], "Incompatible shapes: [2,3] vs. [4,3]"),
    ("broadcast rank", lambda x: tf.broadcast_to(x, [3]), [f32(2, 3)], "Rank of input (2) must be no greater"),
    ("broadcast 2-D shape", lambda x: R.BroadcastTo(input=x, shape=[[3]]), [f32(2, 3)], "shape must be a vector"),
    ("broadcast negative", lambda x: tf.broadcast_to(x, [-2, 3]), [f32(1, 3)], "Dimension -2 must be >= 0"),
    ("broadcast shrink", lambda x: tf.broadcast_to(x, [2, 1, 3]), [f32(0, 3)], "Unable to broadcast tensor of shape [0,3]"),
    ("pack shapes", lambda a, b: tf.stack([a, b]), [f32(2), f32(3)], "Shapes of all inputs must match"),
    ("pack axis", lambda a, b: R.Pack(values=[a, b], axis=2), [f32(2), f32(2)], "axis = 2 not in [-2, 2)"),
    ("pack axis-", lambda a, b: R.Pack(values=[a, b], axis=-3), [f32(2), f32(2)], "axis = -3 not in [-2, 2)"),
    ("concat ranks", lambda a, b: tf.concat([a, b], 0), [f32(2, 3), f32(3)], "Ranks of all input tensors should match"),
    ("concat dims", lambda a, b: tf.concat([a, b], 0), [f32(2, 3), f32(2, 4)], "Dimension 1 in both shapes must be equal"),
    ("concat axis", lambda a, b: tf.concat([a, b], 2), [f32(2, 3), f32(2, 4)], "[-2, 2), but got 2"),
    ("concat axis-", lambda a, b: tf.concat([a, b], -3), [f32(2, 3), f32(2, 4)], "but got -3"),
    ("concat scalars", lambda a, b: R.ConcatV2(values=[a, b], axis=0), [f32(), f32()], "Can't concatenate scalars"),
    ("concat scalar axis 1", lambda a, b: R.ConcatV2(values=[a, b], axis=1), [f32(), f32()], "range [0, 0)"),
    ("concat axis vector", lambda a, b: R.ConcatV2(values=[a, b], axis=[0, 1]), [f32(2), f32(2)], "axis tensor should be a scalar integer"),
]

def after():
    x = rand("float32", [37, 41])
    return same(lambda t: tf.reshape(tf.transpose(t), [-1]), (x,),
                np.transpose(x).reshape(-1))[0] == ""

check_errors(ERRORS, after)

@check("cast unsupported")
def _():
    sc, sm = error_class(lambda x: tf.cast(x, tf.complex64), f32(3), device=SIM)
    cc, _ = error_class(lambda x: tf.cast(x, tf.complex64), f32(3), device=CPU)
    return {"sim": sc, "cpu": cc, "msg": sm[:500]}

@check("good op after errors")
def _():
    x = rand("float32", [37, 41])
    return {"problem": same(lambda t: tf.reshape(tf.transpose(t), [-1]), (x,),
                            np.transpose(x).reshape(-1)),
            "concat": same(lambda a, b: tf.concat([a, b], 0), (x, x),
                           np.concatenate([x, x], 0))}

# ---- graph mode: the kernels inside a tf.function ----------------------------------------
@check("tf.function")
def _():
    # The device scope is inside the function: a tf.function called under
    # tf.device(SIMDEV) places nodes that have no SIMDEV kernel on the CPU
    # even with soft placement off; nodes with an explicit device fail.
    def body(x, y):
        z = tf.concat([tf.transpose(x), tf.cast(y, tf.float32)], 0)
        z = tf.tile(tf.reshape(z, [-1, 5]), [1, 2])
        return tf.stack([z, tf.ones_like(z), tf.fill(tf.shape(z), 2.0)], axis=1)

    @tf.function
    def f(x, y):
        with tf.device(SIM):
            return body(x, y)
    x = rand("float32", [5, 6]) .clip(-1e30, 1e30)
    x = np.nan_to_num(x)
    y = rng.integers(-100, 100, [4, 5]).astype(np.int64)
    z = np.concatenate([x.T, y.astype(np.float32)], 0)
    z = np.tile(z.reshape(-1, 5), [1, 2])
    ref = np.stack([z, np.ones_like(z), np.full(z.shape, 2.0, np.float32)], axis=1)
    return {"problem": same(f, (x, y), ref)}
'''


@pytest.fixture(scope="module")
def misc(run_tf):
    return run_tf(SCRIPT, timeout=300)


def assert_all_same(d):
    assert d["count"] > 0
    assert d["nbad"] == 0, f"{d['nbad']} of {d['count']} cases differ: {d['bad']}"
    # No known TF CPU divergences here: TF CPU must agree with NumPy too.
    assert d["ncpu_bad"] == 0, \
        f"TF CPU differs from NumPy on {d['ncpu_bad']} cases: {d['cpu_bad']}"


@pytest.mark.parametrize("name", [
    "bitcast pairs", "reshape", "identity", "cast pairs", "cast big", "fill",
    "zeros ones like", "transpose", "transpose big", "tile", "broadcast_to",
    "pack", "concat"])
def test_matches_reference(misc, name):
    assert_all_same(misc.data(name))


MOVE = ["float32", "float64", "float16", "bfloat16", "int64", "uint8", "bool",
        "int8", "int16", "complex64"]
FILL = ["float32", "float64", "int64", "float16", "bfloat16"]
CAST = ["float32", "float64", "int32", "int64", "uint8", "bool", "float16",
        "bfloat16"]


@pytest.mark.registry
@pytest.mark.parametrize("op,types", [
    ("Bitcast", ["any"]), ("Reshape", []), ("Identity", []), ("Cast", CAST),
    ("Fill", FILL), ("ZerosLike", FILL), ("OnesLike", FILL),
    ("Transpose", sorted(MOVE + ["int32"])), ("Tile", sorted(MOVE + ["int32"])),
    ("BroadcastTo", sorted(MOVE + ["int32"])), ("Pack", sorted(MOVE + ["int32"])),
    ("ConcatV2", MOVE)])
def test_registered_types(misc, op, types):
    """Exactly these SIMDEV kernels (int32 only where TF 2.21 has no
    DEVICE_DEFAULT kernel; the tests above cover each of them). None for
    Reshape and Identity: TF's DEVICE_DEFAULT kernels serve every type on
    SIMDEV, without a copy (test_alias_does_not_copy)."""
    got = misc.data("registered")[op]
    assert got == sorted(types), got


def test_cast_pairs_constrained(misc):
    """Cast is registered per (SrcT, DstT) pair, so a pair simdev cannot do
    (e.g. to complex64) is placed on the CPU under soft placement rather than
    failing on SIMDEV."""
    d = misc.data("cast soft placement")
    assert d["device"].endswith("CPU:0"), d
    assert d["value"] == [[1.0, 0.0], [2.0, 0.0]]


@pytest.mark.parametrize("op", ["bitcast", "reshape", "identity", "cast same"])
def test_alias_does_not_copy(misc, op):
    d = misc.data("alias no copy")[op]
    assert "SIMDEV:0" in d["device"], d
    assert d["equal"], d
    assert d["grew"] < (1 << 20), f"{op} allocated {d['grew']} bytes: {d}"


def error_cases():
    return error_rows(SCRIPT)


@pytest.mark.parametrize("name,key", error_cases())
def test_error_from_kernel(misc, name, key):
    op = OPS_BY_PREFIX[name.split()[0]]
    assert_error_like_cpu(misc.data("error " + name), op, key)


def test_error_names_found():
    assert len(error_cases()) >= 40


def test_cast_unsupported_pair_has_no_simdev_kernel(misc):
    """With soft placement off, TF refuses to place the pair on SIMDEV: a
    placement error, since no SIMDEV kernel is registered for it."""
    d = misc.data("cast unsupported")
    assert d["cpu"] == "", d  # CPU casts float32 -> complex64
    assert d["sim"] == "InvalidArgumentError", d
    assert "Could not satisfy device specification" in d["msg"], d
    assert "[Op:Cast]" in d["msg"], d


def test_good_op_after_errors(misc):
    d = misc.data("good op after errors")
    assert d["problem"] == ["", ""] and d["concat"] == ["", ""], d


def test_graph_mode(misc):
    d = misc.data("tf.function")
    assert d["problem"] == ["", ""], d


def test_clean_exit(misc):
    misc.assert_clean_exit()
