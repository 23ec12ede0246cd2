"""The stateless random kernels on SIMDEV (src/kernels/random/) against
TF's CPU kernels, bit for bit, with soft placement off.

Covered: every registered op and dtype (float32/float64/float16/bfloat16,
int32/int64, uint32/uint64 for the full-range ints), several seeds (zero,
negative, above 2**32) and shapes (scalar, 1, 3, 4, 5, 7: the edges of the
4- and 2-element output groups; 0 and [4, 0]; 1000 and [3, 257]: many
groups over the thread pool), algorithm 3 (auto-select = Philox) and an
empty output with an unsupported algorithm (TF returns it); the key and
counter TF derives from a seed (StatelessRandomGetKeyCounter*); prefix
stability (the first elements of a long draw are a short draw: each output
group has its own counter, so how the work is split cannot matter); the
distributions against analytic moments (uniform, normal, truncated normal
on (-2, 2), integers in [lo, hi)), with bounds of 6 standard errors of
the estimators for fixed seeds, so the test is deterministic; bad inputs
raising the kernel's own error with TF CPU's class and wording.

Equality is the reference here: TF defines these numbers (its Philox
stream and conversions), so an independent NumPy reference would be a copy
of the same algorithm; the moment checks are the independent part.
"""
import math

import pytest

from conftest import assert_error_like_cpu, assert_kernel_error

REAL = ["float32", "float64", "float16", "bfloat16"]
FULL_INT = ["int32", "int64", "uint32", "uint64"]
SHAPES = [[], [1], [3], [4], [5], [7], [0], [4, 0], [1000], [3, 257]]
SEEDS = [(1, 2), (0, 0), (-7, 2**40 + 3)]

SCRIPT = f"REAL = {REAL!r}\nFULL_INT = {FULL_INT!r}\nSHAPES = {SHAPES!r}\n" \
         f"SEEDS = {SEEDS!r}\n" + r"""
import math
import numpy as np
import tensorflow as tf

tf.config.set_soft_device_placement(False)
R = tf.raw_ops
SIMDEV = "/device:SIMDEV:0"
CPU = "/device:CPU:0"

def both(fn):
    outs = {}
    for dev in (SIMDEV, CPU):
        with tf.device(dev):
            r = fn()
        outs[dev] = r if isinstance(r, (tuple, list)) else (r,)
    return outs

def bits(t):
    a = t.numpy()
    if a.dtype.kind == "V" or str(t.dtype) == "<dtype: 'bfloat16'>":
        a = a.view(np.uint16)
    return a

def compare(fn):
    # {"equal", "devices", ...}: every output equal bit for bit
    o = both(fn)
    rep = {"devices": [t.device for t in o[SIMDEV]], "equal": True}
    for a, b in zip(o[SIMDEV], o[CPU]):
        r = raw_equal(bits(a), bits(b))
        if not r["equal"]:
            rep["equal"] = False
            rep["diff"] = r
    rep["on_simdev"] = all("SIMDEV:0" in d for d in rep["devices"])
    return rep

def key_counter(seed):
    with tf.device(CPU):
        return R.StatelessRandomGetKeyCounter(seed=tf.constant(seed, tf.int64))

def sweep(make):
    # make(seed, shape, key, counter) -> thunk; every case compared
    out = {}
    for seed in SEEDS:
        k, c = key_counter(seed)
        for shape in SHAPES:
            case = f"seed={seed} shape={shape}"
            try:
                out[case] = compare(make(seed, shape, k, c))
            except Exception as e:
                out[case] = {"equal": False, "on_simdev": False,
                             "raised": f"{type(e).__name__}: {str(e)[:600]}"}
    return out

V2 = {"StatelessRandomUniformV2": R.StatelessRandomUniformV2,
      "StatelessRandomNormalV2": R.StatelessRandomNormalV2,
      "StatelessTruncatedNormalV2": R.StatelessTruncatedNormalV2}
V1 = {"StatelessRandomUniform": R.StatelessRandomUniform,
      "StatelessRandomNormal": R.StatelessRandomNormal,
      "StatelessTruncatedNormal": R.StatelessTruncatedNormal}

for name, op in V2.items():
    for dt in REAL:
        @check(f"{name} {dt}")
        def _(op=op, dt=dt):
            return sweep(lambda seed, shape, k, c: lambda: op(
                shape=tf.constant(shape, tf.int32), key=k, counter=c,
                alg=tf.constant(1), dtype=tf.as_dtype(dt)))

for name, op in V1.items():
    for dt in REAL:
        @check(f"{name} {dt}")
        def _(op=op, dt=dt):
            return sweep(lambda seed, shape, k, c: lambda: op(
                shape=tf.constant(shape, tf.int64),
                seed=tf.constant(seed, tf.int64), dtype=tf.as_dtype(dt)))

for dt in FULL_INT:
    @check(f"StatelessRandomUniformFullIntV2 {dt}")
    def _(dt=dt):
        return sweep(lambda seed, shape, k, c: lambda:
            R.StatelessRandomUniformFullIntV2(shape=tf.constant(shape, tf.int32), key=k, counter=c,
                                              alg=tf.constant(1),
                                              dtype=tf.as_dtype(dt)))
    @check(f"StatelessRandomUniformFullInt {dt}")
    def _(dt=dt):
        return sweep(lambda seed, shape, k, c: lambda:
            R.StatelessRandomUniformFullInt(shape=tf.constant(shape, tf.int32),
                                            seed=tf.constant(seed, tf.int32),
                                            dtype=tf.as_dtype(dt)))

# bounds: small, negative, the whole int32 range but one, a range over 2**63
BOUNDS = {"int32": [(-5, 17), (0, 1), (-2**31, 2**31 - 1)],
          "int64": [(-5, 17), (-2**62, 2**62 + 12345), (3, 2**40)]}
for dt, bounds in BOUNDS.items():
    @check(f"StatelessRandomUniformIntV2 {dt}")
    def _(dt=dt, bounds=bounds):
        out = {}
        for lo, hi in bounds:
            r = sweep(lambda seed, shape, k, c: lambda:
                R.StatelessRandomUniformIntV2(shape=tf.constant(shape, tf.int32), key=k, counter=c,
                                              alg=tf.constant(1),
                                              minval=tf.constant(lo, dt),
                                              maxval=tf.constant(hi, dt)))
            out.update({f"[{lo}, {hi}) {c}": v for c, v in r.items()})
        return out
    @check(f"StatelessRandomUniformInt {dt}")
    def _(dt=dt, bounds=bounds):
        out = {}
        for lo, hi in bounds:
            r = sweep(lambda seed, shape, k, c: lambda:
                R.StatelessRandomUniformInt(shape=tf.constant(shape, tf.int32),
                                            seed=tf.constant(seed, tf.int64),
                                            minval=tf.constant(lo, dt),
                                            maxval=tf.constant(hi, dt)))
            out.update({f"[{lo}, {hi}) {c}": v for c, v in r.items()})
        return out

@check("get key counter")
def _():
    out = {}
    for seed in SEEDS + [(2**31 - 1, -2**31)]:
        for sdt in (tf.int32, tf.int64):
            if sdt == tf.int32 and max(abs(s) for s in seed) > 2**31:
                continue
            s = tf.constant(seed, sdt)
            out[f"kc {seed} {sdt.name}"] = compare(
                lambda: R.StatelessRandomGetKeyCounter(seed=s))
            out[f"kca {seed} {sdt.name}"] = compare(
                lambda: R.StatelessRandomGetKeyCounterAlg(seed=s))
    return out

# a check of its own: an earlier op's failure must not hide GetAlg's
@check("get alg")
def _():
    out = {"alg": compare(lambda: R.StatelessRandomGetAlg())}
    with tf.device(SIMDEV):
        a = R.StatelessRandomGetAlg()
    out["alg value"] = {"equal": int(a) == 1, "on_simdev": "SIMDEV:0" in a.device}
    return out

@check("alg variants")
def _():
    k, c = key_counter((5, 6))
    c3 = tf.constant([7, 8, 9], tf.uint64)
    return {
        # 3 = auto-select: Philox
        "auto": compare(lambda: R.StatelessRandomNormalV2(
            shape=[9], key=k, counter=c, alg=tf.constant(3))),
        # a longer counter: the first two words count
        "counter 3": compare(lambda: R.StatelessRandomUniformV2(
            shape=[9], key=k, counter=c3, alg=tf.constant(1))),
        # TF checks the algorithm only for a non-empty output
        "empty alg 2": compare(lambda: R.StatelessRandomUniformV2(
            shape=[0], key=k, counter=c, alg=tf.constant(2))),
        "empty min>=max": compare(lambda: R.StatelessRandomUniformIntV2(
            shape=[2, 0], key=k, counter=c, alg=tf.constant(1), minval=5,
            maxval=5)),
    }

@check("prefix")
def _():
    # one draw's first elements equal a shorter draw (fixed and variable
    # samples per element)
    k, c = key_counter((11, 12))
    out = {}
    with tf.device(SIMDEV):
        for name, op in V2.items():
            for dt in ("float32", "float64"):
                long_ = op(shape=[40003], key=k, counter=c, alg=1, dtype=dt)
                short = op(shape=[1001], key=k, counter=c, alg=1, dtype=dt)
                out[f"{name} {dt}"] = {"equal": raw_equal(
                    long_.numpy()[:1001], short.numpy())["equal"],
                    "on_simdev": "SIMDEV:0" in long_.device}
    return out

@check("moments")
def _():
    # mean and variance of 200000 draws against the distribution's, within
    # 6 standard errors (the estimators' own spread, from the 4th moments)
    n = 200000
    k, c = key_counter((2024, 7))
    out = {}
    def add(name, x, mean, var, mu4, lo=None, hi=None, on=""):
        x = x.astype(np.float64)
        m, v = float(x.mean()), float(x.var())
        se_m, se_v = math.sqrt(var / n), math.sqrt((mu4 - var * var) / n)
        out[name] = {"mean": m, "var": v, "mean_ref": mean, "var_ref": var,
                     "mean_ok": abs(m - mean) <= 6 * se_m,
                     "var_ok": abs(v - var) <= 6 * se_v,
                     "range_ok": bool((lo is None or x.min() >= lo) and
                                      (hi is None or x.max() < hi)),
                     "on_simdev": "SIMDEV:0" in on}
    # truncated standard normal on (-2, 2): Z = P(|X| < 2), phi = pdf(2)
    Z = math.erf(2 / math.sqrt(2))
    phi = math.exp(-2) / math.sqrt(2 * math.pi)
    tvar = 1 - 4 * phi / Z
    # E X^4 = 3 - (2^3 + 3*2) * 2 phi / Z for the truncated normal
    t4 = 3 - (8 + 6) * 2 * phi / Z
    with tf.device(SIMDEV):
        for dt in ("float32", "float64"):
            u = R.StatelessRandomUniformV2(shape=[n], key=k, counter=c, alg=1, dtype=dt)
            add(f"uniform {dt}", u.numpy(), 0.5, 1 / 12, 1 / 80, 0.0, 1.0, u.device)
            g = R.StatelessRandomNormalV2(shape=[n], key=k, counter=c, alg=1, dtype=dt)
            add(f"normal {dt}", g.numpy(), 0.0, 1.0, 3.0, on=g.device)
            t = R.StatelessTruncatedNormalV2(shape=[n], key=k, counter=c, alg=1, dtype=dt)
            add(f"truncated {dt}", t.numpy(), 0.0, tvar, t4, -2.0, 2.0, t.device)
            # the range: strictly inside (-2, 2)
            out[f"truncated {dt}"]["range_ok"] &= bool(np.abs(t.numpy()).max() < 2)
        lo, hi = -3, 10  # uniform on 13 integers
        w = hi - lo
        i = R.StatelessRandomUniformIntV2(shape=[n], key=k, counter=c, alg=1,
                                          minval=lo, maxval=hi)
        iv = (w * w - 1) / 12
        i4 = (w * w - 1) * (3 * w * w - 7) / 240
        add("int32 [-3, 10)", i.numpy(), (lo + hi - 1) / 2, iv, i4, lo, hi, i.device)
    return out

def after():
    with tf.device(SIMDEV):
        r = R.StatelessRandomUniformV2(shape=[5], key=[1], counter=[2, 3], alg=1)
    with tf.device(CPU):
        e = R.StatelessRandomUniformV2(shape=[5], key=[1], counter=[2, 3], alg=1)
    return raw_equal(r.numpy(), e.numpy())["equal"]

K = tf.constant([1], tf.uint64)
C = tf.constant([2, 3], tf.uint64)
def uv2(shape=[3], key=K, counter=C, alg=1):
    return R.StatelessRandomUniformV2(shape=tf.constant(shape, tf.int32), key=key, counter=counter, alg=alg)
ERRORS = {
    "shape 2-D": lambda: uv2(shape=tf.constant([[2, 2]])),
    "shape scalar": lambda: uv2(shape=tf.constant(3)),
    "negative dim": lambda: R.StatelessRandomNormalV2(shape=[2, -1], key=K, counter=C, alg=1),
    "too many elements": lambda: uv2(shape=[2**20] * 4),
    "alg 2": lambda: uv2(alg=2),
    "alg 7": lambda: R.StatelessTruncatedNormalV2(shape=[3], key=K, counter=C, alg=7),
    "alg not scalar": lambda: uv2(alg=[1]),
    "key [2]": lambda: uv2(key=tf.constant([1, 2], tf.uint64)),
    "counter [1] alg 2": lambda: uv2(counter=tf.constant([1], tf.uint64), alg=2),
    "int min >= max": lambda: R.StatelessRandomUniformIntV2(
        shape=[3], key=K, counter=C, alg=1, minval=5, maxval=5),
    "int min not scalar": lambda: R.StatelessRandomUniformIntV2(
        shape=[3], key=K, counter=C, alg=1, minval=[1], maxval=5),
    "int64 max not scalar": lambda: R.StatelessRandomUniformIntV2(
        shape=[3], key=K, counter=C, alg=1, minval=tf.constant(1, tf.int64),
        maxval=tf.constant([5], tf.int64)),
    "full int alg 2": lambda: R.StatelessRandomUniformFullIntV2(
        shape=[3], key=K, counter=C, alg=2, dtype=tf.int64),
    "v1 seed [3]": lambda: R.StatelessRandomUniform(shape=[3], seed=[1, 2, 3]),
    "v1 seed [3] empty": lambda: R.StatelessRandomNormal(shape=[0], seed=[1, 2, 3]),
    "v1 shape 2-D": lambda: R.StatelessTruncatedNormal(shape=[[3]], seed=[1, 2]),
    "v1 int min >= max": lambda: R.StatelessRandomUniformInt(
        shape=[3], seed=[1, 2], minval=7, maxval=-1),
    "v1 full int seed": lambda: R.StatelessRandomUniformFullInt(
        shape=[3], seed=[[1, 2]], dtype=tf.int32),
    "get key counter seed [3]": lambda: R.StatelessRandomGetKeyCounter(seed=[1, 2, 3]),
    "get key counter alg seed [1,2]": lambda: R.StatelessRandomGetKeyCounterAlg(seed=[[1, 2]]),
}
for name, fn in ERRORS.items():
    @check(f"error {name}")
    def _(fn=fn):
        return dict(error_pair(fn), after=after_ok(after))

# TF CPU accepts a one-element counter for Philox and reads past it
# (docs/tf-cpu-divergences.md): SIMDEV only
@check("error counter [1] alg 1")
def _():
    return {"sim": list(error_class(lambda: uv2(counter=tf.constant([1], tf.uint64)),
                                    device=SIMDEV)),
            "after": after_ok(after)}
"""


@pytest.fixture(scope="module")
def rnd(run_tf):
    return run_tf(SCRIPT, timeout=300)


def assert_all_equal(d, min_cases):
    assert len(d) >= min_cases, f"only {len(d)} cases: {list(d)}"
    bad = {c: r for c, r in d.items() if not (r.get("equal") and r.get("on_simdev"))}
    assert not bad, f"{len(bad)} of {len(d)} cases differ from TF CPU or ran " \
                    f"elsewhere: {dict(list(bad.items())[:4])}"


OPS_REAL = ["StatelessRandomUniformV2", "StatelessRandomNormalV2",
            "StatelessTruncatedNormalV2", "StatelessRandomUniform",
            "StatelessRandomNormal", "StatelessTruncatedNormal"]


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("op", OPS_REAL)
def test_real_equal_to_cpu(rnd, op, dtype):
    assert_all_equal(rnd.data(f"{op} {dtype}"), len(SEEDS) * len(SHAPES))


@pytest.mark.parametrize("dtype", FULL_INT)
@pytest.mark.parametrize("op", ["StatelessRandomUniformFullIntV2",
                                "StatelessRandomUniformFullInt"])
def test_full_int_equal_to_cpu(rnd, op, dtype):
    assert_all_equal(rnd.data(f"{op} {dtype}"), len(SEEDS) * len(SHAPES))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["StatelessRandomUniformIntV2",
                                "StatelessRandomUniformInt"])
def test_int_equal_to_cpu(rnd, op, dtype):
    assert_all_equal(rnd.data(f"{op} {dtype}"), 3 * len(SEEDS) * len(SHAPES))


def test_get_key_counter(rnd):
    assert_all_equal(rnd.data("get key counter"), 10)


def test_get_alg(rnd):
    assert_all_equal(rnd.data("get alg"), 2)


def test_alg_variants(rnd):
    assert_all_equal(rnd.data("alg variants"), 4)


def test_prefix_stable(rnd):
    assert_all_equal(rnd.data("prefix"), 6)


def test_moments(rnd):
    d = rnd.data("moments")
    assert len(d) == 7, list(d)
    for name, r in d.items():
        assert r["on_simdev"], name
        assert r["mean_ok"], f"{name}: mean {r['mean']} vs {r['mean_ref']}"
        assert r["var_ok"], f"{name}: variance {r['var']} vs {r['var_ref']}"
        assert r["range_ok"], f"{name}: a value out of range"


# error name -> (kernel, key text of its message: TF CPU's wording too)
U2 = "StatelessRandomUniformV2"
I2 = "StatelessRandomUniformIntV2"
ERRORS = {
    "shape 2-D": (U2, "shape must be a vector of {int32,int64}, got shape [1,2]"),
    "shape scalar": (U2, "shape must be a vector of {int32,int64}, got shape []"),
    "negative dim": ("StatelessRandomNormalV2", "Dimension -1 must be >= 0"),
    "too many elements": (U2, "Shape [1048576,1048576,1048576,1048576] would "
                              "have more than 2**63 - 1 elements"),
    "alg 2": (U2, "Unsupported algorithm id: 2"),
    "alg 7": ("StatelessTruncatedNormalV2", "counter must be a vector with length "
              "at least 7; got shape: [2]. (Note that batched counters are not "
              "supported yet.)"),
    "alg not scalar": (U2, "input 3 (0-based) must have shape [], not [1]"),
    "key [2]": (U2, "key must have shape [1], not [2]. (Note that batched keys "
                    "are not supported yet.)"),
    "counter [1] alg 2": (U2, "counter must be a vector with length at least 2; "
                              "got shape: [1]"),
    "int min >= max": (I2, "Need minval < maxval, got 5 >= 5"),
    "int min not scalar": (I2, "minval must be 0-D, got shape [1]"),
    "int64 max not scalar": (I2, "maxval must be 0-D, got shape [1]"),
    "full int alg 2": ("StatelessRandomUniformFullIntV2", "Unsupported algorithm id: 2"),
    "v1 seed [3]": ("StatelessRandomUniform", "seed must have shape [2], not [3]"),
    "v1 seed [3] empty": ("StatelessRandomNormal", "seed must have shape [2], not [3]"),
    "v1 shape 2-D": ("StatelessTruncatedNormal",
                     "shape must be a vector of {int32,int64}, got shape [1,1]"),
    "v1 int min >= max": ("StatelessRandomUniformInt", "Need minval < maxval, got 7 >= -1"),
    "v1 full int seed": ("StatelessRandomUniformFullInt",
                         "seed must have shape [2], not [1,2]"),
    "get key counter seed [3]": ("StatelessRandomGetKeyCounter",
                                 "seed must have shape [2], not [3]"),
    "get key counter alg seed [1,2]": ("StatelessRandomGetKeyCounterAlg",
                                       "seed must have shape [2], not [1,2]"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(rnd, name):
    op, key = ERRORS[name]
    assert_error_like_cpu(rnd.data(f"error {name}"), op, key)


def test_short_counter_refused(rnd):
    # TF CPU 2.21 accepts it and reads a word past the tensor
    d = rnd.data("error counter [1] alg 1")
    assert_kernel_error(d["sim"], U2, "counter must be a vector with length at "
                        "least 2; got shape: [1]", "InvalidArgumentError")
    assert d["after"] is True, d["after"]


def test_clean_exit(rnd):
    rnd.assert_clean_exit()
