"""Every layer of a Keras model on SIMDEV against float64 (child side).

Imported by test_models.py's TF child (which runs conftest's PRELUDE as
__main__: its error-bound helpers are reused from there). For each layer,
its float32 inputs are the ones SIMDEV computed in a training-mode forward
pass of the whole model; the layer then runs once more on SIMDEV (training
mode, soft placement off), with a fixed random upstream gradient g, giving
its output y, its input gradients dx and its weight gradients dw. The
reference is the same layer rebuilt in float64 on TF's CPU, from the same
float32 inputs and weights cast exactly to float64: float64 kernels are
Eigen's on every machine (oneDNN has none), and their own rounding error,
~2^-53 per operation, is in each bound (sum_bound's ref_dt term).

A result passes when |float32 - reference| <= bound elementwise, a
rounding-error bound (Higham) for the computation in float32 in ANY order,
blocking, with or without FMA, so it does not depend on the machine, on
which OpenBLAS kernel simdev calls, or on oneDNN:
- sums and products (Conv2D, DepthwiseConv2D, Dense, Add, Multiply, the
  poolings, Rescaling): gamma_K * sum|terms|, K the reduction length of
  that result (reduction_lengths), sum|terms| computed exactly by the same
  layer in float64 with |weights| on |inputs| and |g| (for a layer linear
  in each argument that is precisely sum |a| |b| over the products), plus
  flush_floor for kernels that flush subnormals to zero (TF CPU does);
- data movement (Concatenate, ZeroPadding2D, Reshape, relu, relu6): exact;
- library functions (sigmoid, silu, softmax): LIBM_ULPS ulps per call,
  propagated through the formula (act_bounds);
- BatchNormalization in training mode (bn_bounds): the batch mean's and
  variance's rounding errors divided by the variance, so its bound grows
  as a channel's values get close together (the ill-conditioning of a
  2-value BatchNorm); a layer where that analysis breaks down (relative
  error of var + epsilon above BN_MAX_T) is reported as ill-conditioned;
- MaxPooling2D's gradient on ties and Dropout's random mask: see
  maxpool_check and dropout_check.
A layer with a built-in activation (Conv2D(activation="silu"), the final
Dense's softmax) is checked as its two stages, the linear one and the
activation applied to SIMDEV's own pre-activation, and its real output must
equal that composition bit for bit.

TF's CPU runs the same per-layer computation in float32 and is held to the
same bounds, as information only (`cpu` in each row; test_models.py
records it, as TF CPU may run oneDNN's kernels there).
"""
import numpy as np
import tensorflow as tf
import keras

from __main__ import LIBM_ULPS, compare_to_ref, gamma, sum_bound, tiny, \
    unit_roundoff

SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"
F32, F64 = "float32", "float64"
U = unit_roundoff(F32)
L = LIBM_ULPS
TINY = 4 * tiny(F32)
# BatchNorm's bound is first order in t, the relative error of the computed
# var + epsilon; above BN_MAX_T the dropped terms are no longer negligible
# (they are <= t times the kept ones: SECOND_ORDER covers t <= 0.01).
BN_MAX_T = 0.01
SECOND_ORDER = 1.1

def flush_floor(k, factor):
    """Subnormals: TF's CPU threads flush subnormal inputs and results to
    zero (FTZ/DAZ), other kernels need not. Each flush moves a product by
    at most tiny x its other factor (<= `factor`, the largest magnitude of
    the layer's inputs, weights and g) or a partial sum by tiny; a result
    of k terms has at most 2k of them."""
    return (2 * k + 4) * tiny(F32) * (1 + factor)


def largest(*arrays):
    return max(float(np.max(np.abs(a))) if np.size(a) else 0.0
               for a in arrays)


LINEAR = {"Conv2D", "DepthwiseConv2D", "Dense", "Add", "Multiply",
          "AveragePooling2D", "GlobalAveragePooling2D", "Rescaling"}
EXACT = {"Concatenate", "ZeroPadding2D", "Reshape"}


def act_name(layer):
    """The activation a layer applies after its linear part ("linear" if
    none); Activation and ReLU layers are all activation."""
    kind = type(layer).__name__
    if kind == "ReLU":
        assert layer.negative_slope == 0 and layer.threshold == 0, kind
        return "relu6" if layer.max_value == 6 else "relu"
    a = getattr(layer, "activation", None)
    return "linear" if a is None else a.__name__


def layer_inputs(model, x):
    """[(layer, [float32 inputs])] for every layer but the InputLayer: the
    values SIMDEV computed for them in one training-mode forward pass."""
    layers, wanted = [], {}
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        assert len(layer._inbound_nodes) == 1, layer.name  # called once
        ts = layer._inbound_nodes[0].input_tensors
        layers.append((layer, ts))
        for t in ts:
            wanted[id(t)] = t
    probe = keras.Model(model.inputs, list(wanted.values()))
    with tf.device(SIM):
        vals = probe(tf.constant(x), training=True)
    got = {k: v.numpy() for k, v in zip(wanted, vals)}
    return [(layer, [got[id(t)] for t in ts]) for layer, ts in layers]


def clone(layer, shapes, dtype, device, weights, **override):
    """`layer` rebuilt in `dtype` on `device` for inputs of `shapes`, with
    `weights` (cast) and config entries `override`."""
    cfg = dict(layer.get_config(), dtype=dtype, **override)
    with tf.device(device):
        c = type(layer).from_config(cfg)
        c.build(shapes[0] if len(shapes) == 1 else list(shapes))
        c.set_weights([np.asarray(w, dtype) for w in weights])
    return c


def run(fn, xs, variables, g, device):
    """fn(inputs) on `device` and the gradients of sum(g * output) with
    respect to the inputs and `variables`: (y, [dx], [dw], devices), NumPy.
    g: an array, or a function of the output's shape giving one."""
    with tf.device(device):
        ts = [tf.constant(a) for a in xs]
        with tf.GradientTape() as tape:
            tape.watch(ts)
            y = fn(ts)
        if callable(g):
            g = g(tuple(y.shape))
        grads = tape.gradient(y, ts + list(variables),
                              output_gradients=tf.constant(g, y.dtype))
    devs = [y.device] + [t.device for t in grads if t is not None]
    out = [t if t is None else t.numpy() for t in grads]
    return y.numpy(), out[:len(xs)], out[len(xs):], devs


def call(layer):
    return lambda ts: layer(ts if len(ts) > 1 else ts[0], training=True)


def reduction_lengths(layer, xs, y):
    """K (number of terms) of each result: (forward, [per input],
    [per trainable weight]); a K bounds the roundings of that sum in any
    order (gamma_K), a bias adding one term."""
    kind = type(layer).__name__
    nw = len(layer.trainable_weights)
    if kind in ("Conv2D", "DepthwiseConv2D"):
        assert tuple(layer.dilation_rate) == (1, 1), layer.name
        kh, kw = layer.kernel_size
        pos = int(np.prod(y.shape[:-1]))  # N * Hout * Wout
        if kind == "Conv2D":
            assert layer.groups == 1, layer.name
            k = (kh * kw * xs[0].shape[-1], kh * kw * layer.filters)
        else:
            k = (kh * kw, kh * kw * layer.depth_multiplier)
        return k[0] + 1, [k[1]], [pos] * nw
    if kind == "Dense":
        rows = int(np.prod(xs[0].shape[:-1]))
        return xs[0].shape[-1] + 1, [layer.units], [rows] * nw
    if kind in ("Add", "Multiply"):
        # a broadcast input's gradient sums over the broadcast elements
        return len(xs), [y.size // a.size + len(xs) for a in xs], []
    if kind == "AveragePooling2D":
        (ph, pw), (sh, sw) = layer.pool_size, layer.strides
        return ph * pw + 1, [-(-ph // sh) * -(-pw // sw) + 2], []
    if kind == "GlobalAveragePooling2D":
        return xs[0].shape[1] * xs[0].shape[2] + 1, [2], []
    if kind == "Rescaling":
        # x * scale + offset, scale and offset rounded to float32 first
        return 4, [2], []
    raise AssertionError(f"no reduction lengths for {kind}")


def act_bounds(name, z, g, y_ref):
    """Bounds for activation `name` applied in float32 to z (float32, as
    given) with upstream g: (forward, input gradient), elementwise.
    First order in u; each library call (exp, sigmoid) is within L ulps
    (2 L u relative), each arithmetic operation one rounding."""
    z = z.astype(np.float64)
    g = np.abs(g.astype(np.float64))
    if name in ("linear", "relu", "relu6"):  # selection: exact
        return np.full(z.shape, TINY), np.full(z.shape, TINY)
    s = 1 / (1 + np.exp(-z))
    if name == "sigmoid":
        # y = s; dx = g * s * (1 - s) from the rounded s: its error moves
        # s (1 - s) by at most 2 L u s, plus 3 roundings
        return 2 * L * U * s + TINY, (2 * L + 4) * U * g * s + TINY
    if name in ("silu", "swish"):
        # y = z * s; dx = g * s * (1 + z (1 - s)) (TF's closed form) or
        # g * s + (g z) * s (1 - s) (autodiff of z * sigmoid(z)): both within
        # (2 L + 6) u g s (1 + 2 |z|)
        return ((2 * L + 2) * U * np.abs(z) * s + TINY,
                (2 * L + 6) * U * g * s * (1 + 2 * np.abs(z)) + TINY)
    if name == "softmax":
        # y_i = exp(z_i - max) / sum_j exp(z_j - max): the subtraction moves
        # the exponent by u |z_i - max| (a relative error of exp), each exp
        # L ulps, the sum gamma_C, the division u
        c = z.shape[-1]
        spread = np.max(z, -1, keepdims=True) - np.min(z, -1, keepdims=True)
        rel = (4 * L + c + 4 + 2 * spread) * U
        gy = np.sum(g * y_ref, -1, keepdims=True)
        # dx = y (g - sum(g y)): the rounded y's error, the sum's, 2 roundings
        dx = y_ref * ((rel + 2 * U) * (g + gy) + (rel + gamma(c, F32)) * gy)
        return rel * y_ref + TINY, dx + TINY
    raise AssertionError(f"no bound for activation {name}")


def bn_bounds(layer, x, g, weights):
    """Bounds for Keras's training-mode BatchNormalization in float32:
    (forward, dx, [dgamma, dbeta]) and t, per channel over n values.

    Keras computes mean = reduce_mean(x), var = mean((x - mean)^2)
    (tf.nn.moments), y = x * inv + (beta - mean * inv), inv = gamma *
    rsqrt(var + eps), and differentiates that; a fused kernel computes
    gamma * (x - mean) * inv + beta and gamma r (g - mean(g) - xhat
    mean(g xhat)). The bound covers both forms: magnitudes |x| + |mean|
    stand for |x - mean|, and var's error also covers E[x^2] - mean^2.
    With the exact mean mu, variance v, r = 1 / sqrt(v + eps):
      e_mu = gamma_{n+1} mean|x|        (the sum and the division)
      e_v  = gamma_{n+4} (mean x^2 + mu^2) + 2 |mu| e_mu + 2 e_mu^2
      t    = e_v / (v + eps) + 2 u      (the computed var + eps, relative;
                                         eps itself rounded to float32)
      rho  = t + (2 L + 2) u            (rsqrt: |(1+t)^-1/2 - 1| <= |t|,
                                         L ulps, times gamma)
    and every result's error is what these errors and its own roundings
    contribute, to first order (SECOND_ORDER for the rest: t <= BN_MAX_T).
    The variance enters through r and t: values close together (small v
    against |mu| and eps) give a large bound, as they should."""
    f = np.float64
    x = x.astype(f); gs = g.astype(f); g = np.abs(gs)
    ax = tuple(range(x.ndim - 1))
    n = x.size // x.shape[-1]
    names = [w.name for w in layer.trainable_weights]
    w = dict(zip([v.name for v in layer.weights], weights))
    gam = np.abs(np.asarray(w.get("gamma", 1.0), f))
    beta = np.abs(np.asarray(w.get("beta", 0.0), f))
    mu = x.mean(ax); v = x.var(ax); r = 1 / np.sqrt(v + layer.epsilon)
    amu = np.abs(mu)
    e_mu = gamma(n + 1, F32) * np.abs(x).mean(ax)
    e_v = (gamma(n + 4, F32) * ((x * x).mean(ax) + mu * mu)
           + 2 * amu * e_mu + 2 * e_mu ** 2)
    t = e_v / (v + layer.epsilon) + 2 * U  # + eps, eps rounded to float32
    rho = t + (2 * L + 2) * U
    a = np.abs(x) + amu
    fwd = gam * r * (e_mu + a * (rho + 4 * U)) + 2 * U * beta
    G = g.sum(ax); T = (g * a).sum(ax)
    e_dinv = gamma(n + 2, F32) * T + e_mu * G  # sum g (x - mu), computed
    d = np.abs(x - mu) + e_mu
    dx = gam * r * ((rho + 3 * U) * g
                    + (gamma(n + 2, F32) + rho + 2 * U) * G / n
                    + r * r / n * (e_dinv * d + T * (e_mu + d * (3 * rho + 4 * U))))
    dw = {"gamma": r * (e_dinv + rho * T), "beta": sum_bound(G, n, F32)}
    # flushed subnormals (flush_floor), carried through r and the var path
    fl = flush_floor(n, largest(x, gs, gam, beta)) * (1 + gam * r) * \
        (1 + r * r * largest(x, gs))
    k = SECOND_ORDER
    return (k * fwd + fl, k * dx + fl,
            [k * dw[nm] + fl for nm in names], float(t.max()))


def normalization_bounds(layer, x, g):
    """Keras Normalization: y = (x - mean) / max(sqrt(var), epsilon): a
    subtraction, a correctly rounded sqrt and a division, 3 roundings
    (4 u with the reference's own); dx = g / sd, 2 roundings."""
    mean = np.asarray(keras.ops.convert_to_numpy(layer.mean), np.float64)
    var = np.asarray(keras.ops.convert_to_numpy(layer.variance), np.float64)
    sd = np.maximum(np.sqrt(var), keras.config.epsilon())
    x = np.abs(x.astype(np.float64)); g = np.abs(g.astype(np.float64))
    return 4 * U * (x + np.abs(mean)) / sd + TINY, 3 * U * g / sd + TINY


def maxpool_check(layer, x, g, y, dx):
    """MaxPooling2D (VALID): the forward is a selection, exact. Its gradient
    sends each window's g to the window's maximum; on a tie TF documents no
    rule (kernels differ), so it is held to what any tie rule gives: dx is
    the float64 sum of the g of the windows with a unique maximum, plus on
    each tied maximum at most the |g| of the tied windows it belongs to,
    and the tied windows' g all arrive somewhere (their total)."""
    assert layer.padding == "valid", layer.name
    (ph, pw), (sh, sw) = layer.pool_size, layer.strides
    x = x.astype(np.float64); g = g.astype(np.float64)
    ho, wo = g.shape[1], g.shape[2]
    sls = [(slice(None), slice(i, i + sh * (ho - 1) + 1, sh),
            slice(j, j + sw * (wo - 1) + 1, sw), slice(None))
           for i in range(ph) for j in range(pw)]
    m = np.max([x[s] for s in sls], axis=0)
    cnt = np.sum([x[s] == m for s in sls], axis=0)
    uniq, cap, mag = (np.zeros_like(x) for _ in range(3))
    for s in sls:
        top = x[s] == m
        uniq[s] += np.where(top & (cnt == 1), g, 0)
        cap[s] += np.where(top & (cnt > 1), np.abs(g), 0)
        mag[s] += np.where(top, np.abs(g), 0)
    k = -(-ph // sh) * -(-pw // sw)  # windows sharing one input element
    res = dx.astype(np.float64) - uniq
    elem = compare_to_ref(res, np.zeros_like(res),
                          cap + sum_bound(mag, k, F32))
    tied = float(np.sum(np.where(cnt > 1, g, 0)))
    total = compare_to_ref(np.sum(res), tied, float(
        (gamma(k, F32) + gamma(x.size, F64)) * np.sum(mag)) + TINY)
    worst = max((elem, total), key=lambda r: r["ratio"])
    return {"y": compare_to_ref(y, m, TINY), "dx0": dict(
        worst, ties=int(np.sum(cnt > 1)), ok=elem["ok"] and total["ok"])}


def dropout_check(layer, x, g, y, dx):
    """Dropout in training mode draws a random mask: the one this run drew
    is read from dx (g has no zeros, so dx != 0 exactly where an element
    was kept); with a noise_shape it must be constant along the broadcast
    axes. Then y = x / (1 - rate) on it and 0 elsewhere, dx likewise from g:
    1 / (1 - rate) and the product rounded, 3 u with the reference's."""
    assert np.all(g != 0)
    keep = dx != 0
    out = {}
    if layer.noise_shape is not None:
        axes = tuple(i for i, s in enumerate(layer.noise_shape) if s == 1)
        ok = np.all(keep.all(axes) == keep.any(axes))
        out["mask"] = {"ok": bool(ok), "ratio": 0.0 if ok else float("inf"),
                       "mismatch": "" if ok else "mask not per noise_shape"}
    scale = 1 / (1 - np.float64(layer.rate))
    for key, a, b in (("y", y, x), ("dx0", dx, g)):
        ref = np.where(keep, b.astype(np.float64) * scale, 0)
        out[key] = compare_to_ref(a, ref, 3 * U * np.abs(ref) + TINY)
    return out


def judge(out, results, refs, bounds, who):
    for key, ref in refs.items():
        got = results[key]
        rep = compare_to_ref(got, ref, bounds[key])
        if got.dtype != np.float32:
            rep.update(ok=False, mismatch=f"dtype {got.dtype}")
        out[who][key] = rep


def check_layer(layer, xs, rng):
    """One layer: {"layer", "kind", "sim": {result: report}, "cpu": {...},
    "devices": SIMDEV's result devices, "t": BatchNorm's t}."""
    kind = type(layer).__name__
    act = act_name(layer)
    weights = layer.get_weights()
    shp = [a.shape for a in xs]
    row = {"layer": layer.name, "kind": kind, "sim": {}, "cpu": {},
           "devices": []}
    drawn = []

    def upstream(shape):  # one fixed random g per layer, drawn once
        if not drawn:
            g = rng.standard_normal(shape).astype(np.float32)
            g[g == 0] = 1.0  # dropout_check reads the mask from dx != 0
            drawn.append(g)
        return drawn[0]

    def both(fn_sim, fn_cpu, ins, vs_sim, vs_cpu, up):
        s = run(fn_sim, ins, vs_sim, up, SIM)
        row["devices"] += s[3]
        return s, run(fn_cpu, ins, vs_cpu, up, CPU)

    def pack(r, wnames, fwd="y"):
        # y: the output, dx<i>: gradient of input i, d<weight>: of a weight
        d = {fwd: r[0]}
        d.update({f"dx{i}": a for i, a in enumerate(r[1])})
        d.update({"d" + nm: a for nm, a in zip(wnames, r[2])})
        return d

    if kind in ("Dropout", "MaxPooling2D"):
        s, c = both(call(layer), call(clone(layer, shp, F32, CPU, [])), xs,
                    [], [], upstream)
        chk = dropout_check if kind == "Dropout" else maxpool_check
        g = upstream(None)
        row["sim"] = chk(layer, xs[0], g, s[0], s[1][0])
        row["cpu"] = chk(layer, xs[0], g, c[0], c[1][0])
        return row
    wnames = [v.name for v in layer.trainable_weights]
    split = act != "linear" and kind not in ("Activation", "ReLU")
    if split:  # the activation stage first, on SIMDEV's own pre-activation
        row["kind"] += ":" + act
        with tf.device(SIM):  # the layer's real output
            y_real = layer(xs[0], training=True).numpy()
        lin = clone(layer, shp, F32, SIM, weights, activation="linear")
        with tf.device(SIM):
            z = lin(xs[0], training=True).numpy()
        fn = keras.activations.get(act)
        sa, ca = both(lambda ts: fn(ts[0]), lambda ts: fn(ts[0]), [z],
                      [], [], upstream)
        g = upstream(None)
        ra = run(lambda ts: fn(ts[0]), [z.astype(F64)], [], g.astype(F64),
                 CPU)
        fb, db = act_bounds(act, z, g, ra[0])
        stage = lambda r: {"y": r[0], "dz": r[1][0]}  # noqa: E731
        judge(row, stage(sa), stage(ra), {"y": fb, "dz": db}, "sim")
        judge(row, stage(ca), stage(ra), {"y": fb, "dz": db}, "cpu")
        same = np.array_equal(sa[0], y_real)
        row["sim"]["split"] = {"ok": bool(same), "ratio": 0.0 if same else
                               float("inf"), "mismatch": "" if same else
                               "layer output != activation(linear part)"}
        # the linear stage: output z, upstream SIMDEV's own dz
        g, fwd, extra = sa[1][0], "z", {"activation": "linear"}
    else:
        lin, fwd, extra, g = layer, "y", {}, upstream
    cpu = clone(layer, shp, F32, CPU, weights, **extra)
    ref = clone(layer, shp, F64, CPU, weights, **extra)
    s, c = both(call(lin), call(cpu), xs, lin.trainable_weights,
                cpu.trainable_weights, g)
    g = upstream(None) if callable(g) else g
    r = run(call(ref), [a.astype(F64) for a in xs], ref.trainable_weights,
            g.astype(F64), CPU)
    refs = pack(r, wnames, fwd)
    if kind == "BatchNormalization":
        fb, db, wb, row["t"] = bn_bounds(layer, xs[0], g, weights)
        bounds = pack((fb, [db], wb), wnames)
    elif kind == "Normalization":
        fb, db = normalization_bounds(layer, xs[0], g)
        bounds = {"y": fb, "dx0": db}
    elif kind in ("Activation", "ReLU"):
        fb, db = act_bounds(act, xs[0], g, r[0])
        bounds = {"y": fb, "dx0": db}
    elif kind in EXACT:
        bounds = {k: TINY for k in refs}
    else:
        assert kind in LINEAR, f"no bound for layer {kind} ({layer.name})"
        ov = dict(extra)
        if kind == "Rescaling":
            ov.update(scale=np.abs(layer.scale).tolist(),
                      offset=np.abs(layer.offset).tolist())
        mag = clone(layer, shp, F64, CPU, [np.abs(w) for w in weights], **ov)
        m = run(call(mag), [np.abs(a).astype(F64) for a in xs],
                mag.trainable_weights, np.abs(g).astype(F64), CPU)
        kf, kx, kw = reduction_lengths(layer, xs, s[0])
        big = largest(g, *xs, *weights)

        def b(a, k):
            return sum_bound(a, k, F32) + flush_floor(k, big)
        bounds = pack((b(m[0], kf), [b(a, k) for a, k in zip(m[1], kx)],
                       [b(a, k) for a, k in zip(m[2], kw)]), wnames, fwd)
    judge(row, pack(s, wnames, fwd), refs, bounds, "sim")
    judge(row, pack(c, wnames, fwd), refs, bounds, "cpu")
    return row


def check_model(model, x, seed=5):
    """check_layer for every layer of `model` (on SIMDEV, its current
    weights) on SIMDEV's own layer inputs for the batch x."""
    rng = np.random.default_rng(seed)
    return [check_layer(layer, xs, rng) for layer, xs in layer_inputs(model, x)]
