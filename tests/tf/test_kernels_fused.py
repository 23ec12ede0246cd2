"""TF's fused ops on SIMDEV: _FusedConv2D, _FusedMatMul and
_FusedDepthwiseConv2dNative with fused_ops ["BiasAdd"] and ["BiasAdd", act]
(src/kernels/framework/fused.h). Underscore ops are not in tf.raw_ops: the child runs
them with tensorflow.python.eager.execute.execute, soft placement off.

Each case is held to
  - a NumPy float64 reference: the convolution / product summed in float64
    (bound: sum_bound over its K terms, conftest), plus the bias (one
    rounding), through the activation, whose slope is at most 1 (so the
    error so far carries over) and which adds its own rounding (LIBM_ULPS
    ulps for exp-based ones, one rounding for alpha * x);
  - TF CPU's own fused kernel where it has the fusion (TF_ENABLE_ONEDNN_OPTS=0:
    _FusedConv2D implements BiasAdd [+ Relu, Relu6, Elu, LeakyRelu];
    _FusedMatMul also Tanh and Sigmoid), else the unfused chain on CPU
    (_FusedDepthwiseConv2dNative's CPU registration is a no-op without oneDNN);
  - the unfused chain on SIMDEV (Conv2D / MatMul / DepthwiseConv2dNative,
    BiasAdd, the activation op), bit for bit: the fused kernel runs the same
    GEMM calls and the same scalar functions, bias add first.
Bad inputs and attributes raise the fused SIMDEV kernel's own error with TF
CPU's class and wording where TF CPU rejects them too.
"""
import pytest

from conftest import (assert_divergences_documented, assert_error_like_cpu,
                      assert_kernel_error, assert_vs_ref)

ACTS = ["", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"]
DTYPES = ["float32", "float64"]
# TF CPU's fused kernels (no oneDNN) implement these activations
CPU_ACTS = {"_FusedConv2D": {"", "Relu", "Relu6", "Elu", "LeakyRelu"},
            "_FusedMatMul": set(ACTS), "_FusedDepthwiseConv2dNative": set()}

# name -> (input NHWC, filter HWIO, strides (h, w), padding, dilations,
#          explicit (t, b, l, r) or None)
CONV = {
    "3x3 same": ((2, 7, 8, 3), (3, 3, 3, 5), (1, 1), "SAME", (1, 1), None),
    "valid stride 2": ((2, 9, 8, 4), (3, 2, 4, 6), (2, 2), "VALID", (1, 1), None),
    "explicit": ((1, 6, 7, 3), (3, 3, 3, 4), (1, 2), "EXPLICIT", (1, 1), (1, 2, 0, 1)),
    "dilation 2": ((1, 9, 9, 2), (3, 3, 2, 3), (1, 1), "SAME", (2, 2), None),
    "1x1 direct": ((2, 5, 4, 6), (1, 1, 6, 7), (1, 1), "VALID", (1, 1), None),
    "whole-image direct": ((3, 4, 4, 2), (4, 4, 2, 5), (1, 1), "VALID", (1, 1), None),
    "zero batch": ((0, 5, 5, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1), None),
    "zero out channels": ((1, 5, 5, 3), (3, 3, 3, 0), (1, 1), "SAME", (1, 1), None),
    # 2 groups: TF CPU's fused kernel refuses them, SIMDEV's runs them as
    # Conv2D does (each group's channels take their part of the bias)
    "grouped": ((2, 6, 5, 6), (3, 3, 3, 4), (1, 1), "SAME", (1, 1), None),
    # big enough for sk_gemm to split rows over the pool's threads
    "large": ((4, 16, 16, 32), (3, 3, 32, 64), (1, 1), "SAME", (1, 1), None),
}
# name -> (a shape, b shape, transpose_a, transpose_b)
MATMUL = {
    "33x17x9": ((33, 17), (17, 9), False, False),
    "transposed": ((7, 5), (6, 7), True, True),
    "k=0": ((4, 0), (0, 3), False, False),
    "m=0": ((0, 5), (5, 3), False, False),
    "large": ((256, 128), (128, 96), False, False),
}
# name -> (input, filter HWCM, stride, padding, dilations, nchw)
DW = {
    "3x3 same": ((2, 7, 8, 3), (3, 3, 3, 2), 1, "SAME", (1, 1), False),
    "valid stride 2": ((1, 9, 8, 4), (3, 3, 4, 1), 2, "VALID", (1, 1), False),
    "dilation 2": ((1, 9, 9, 2), (3, 3, 2, 2), 1, "SAME", (2, 2), False),
    "nchw": ((2, 6, 7, 3), (3, 3, 3, 2), 1, "SAME", (1, 1), True),
    "zero batch": ((0, 5, 5, 3), (3, 3, 3, 1), 1, "SAME", (1, 1), False),
}
# TF CPU's _FusedMatMul with K == 0 returns zeros: it skips the epilogue
# (act(0 + bias) is what MatMul, BiasAdd, act give); docs/tf-cpu-divergences.md
TF_CPU_DIVERGENCES = {f"_FusedMatMul float32 k=0 {a}" for a in ("Relu", "LeakyRelu")}
# every activation and dtype for the first case of each op, the other
# geometries with Relu and LeakyRelu (float32)
GEOM_ACTS = ["Relu", "LeakyRelu"]


def case_names():
    out = []
    for table, op in ((CONV, "_FusedConv2D"), (MATMUL, "_FusedMatMul"),
                      (DW, "_FusedDepthwiseConv2dNative")):
        first = next(iter(table))
        dts = ["float32"] if op == "_FusedMatMul" else DTYPES
        for name in table:
            acts = ACTS if name == first else GEOM_ACTS
            for act in acts:
                for dt in (dts if name == first else ["float32"]):
                    out.append(f"{op} {dt} {name} {act or 'BiasAdd'}")
    return out


CASES = case_names()

# name -> (op, inputs (shapes; "bias" entries), attribute overrides, key,
#          class when TF CPU accepts the input or fails otherwise, cpu runs)
# cpu False: inputs TF CPU's kernel would crash or silently accept; the
# check then asserts SIMDEV's error only.
ERRORS = {
    "conv no fused op": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (4,)),
                         {"fused_ops": []}, "Fused Conv2D must have at least one fused op.",
                         None, True),
    "conv unknown act": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (4,)),
                         {"fused_ops": ["BiasAdd", "Foo"]},
                         "Fusion is not implemented: [BiasAdd,Foo]", None, True),
    "conv two args": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (4,), (4,)),
                      {"num_args": 2}, "must have one extra argument: bias", None, True),
    "conv TArgs of 2": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (4,), (4,)),
                        {"TArgs": [1, 1]}, "SIMDEV got 2 extra arguments",
                        "InvalidArgumentError", False),
    "conv batchnorm": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (4,), (4,), (4,), (4,)),
                       {"num_args": 4, "fused_ops": ["FusedBatchNorm"]},
                       "Fusion is not implemented: [FusedBatchNorm]", "UnimplementedError", True),
    "conv nchw": ("_FusedConv2D", ((1, 3, 5, 5), (3, 3, 3, 4), (4,)),
                  {"data_format": "NCHW"},
                  "Fused conv implementation only supports NHWC tensor format for now.",
                  None, True),
    "conv bias rank 2": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (1, 4)), {},
                         "bias must be 1-dimensional[1,4]", None, True),
    "conv input rank 3": ("_FusedConv2D", ((5, 5, 3), (3, 3, 3, 4), (4,)), {},
                          "convolution input must be 4-dimensional: [5,5,3]", None, True),
    "conv depth": ("_FusedConv2D", ((1, 5, 5, 4), (3, 3, 3, 4), (4,)), {},
                   "input depth must be evenly divisible by filter depth: 4 vs 3", None, True),
    "conv bias length": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (5,)), {},
                         "Must provide as many biases as the channel dimension of the "
                         "output: [5] vs. [1,5,5,4]", "InvalidArgumentError", False),
    "conv host args": ("_FusedConv2D", ((1, 5, 5, 3), (3, 3, 3, 4), (4,), "host"),
                       {"num_host_args": 1}, "num_host_args = 1", "UnimplementedError", False),
    "matmul no fused op": ("_FusedMatMul", ((3, 4), (4, 5), (5,)), {"fused_ops": []},
                           "Fused MatMul must have at least one fused op.", None, True),
    "matmul gelu": ("_FusedMatMul", ((3, 4), (4, 5), (5,)),
                    {"fused_ops": ["BiasAdd", "GeluExact"]},
                    "Fusion is not implemented: [BiasAdd,GeluExact]", None, True),
    "matmul two args": ("_FusedMatMul", ((3, 4), (4, 5), (5,), (5,)), {"num_args": 2},
                        "must have one extra argument: bias", None, True),
    "matmul inner dims": ("_FusedMatMul", ((3, 4), (3, 5), (5,)), {},
                          "Matrix size-incompatible: In[0]: [3,4], In[1]: [3,5]", None, True),
    "matmul rank 3": ("_FusedMatMul", ((2, 3, 4), (4, 5), (5,)), {},
                      "In[0] and In[1] has different ndims: [2,3,4] vs. [4,5]", None, True),
    "matmul bias rank 2": ("_FusedMatMul", ((3, 4), (4, 5), (1, 5)), {},
                           "bias must be 1-dimensional[1,5]", None, True),
    "matmul bias length": ("_FusedMatMul", ((3, 4), (4, 5), (4,)), {},
                           "Must provide as many biases as the channel dimension of the "
                           "output: [4] vs. [3,5]", "InvalidArgumentError", False),
    "dw unknown act": ("_FusedDepthwiseConv2dNative", ((1, 5, 5, 3), (3, 3, 3, 2), (6,)),
                       {"fused_ops": ["BiasAdd", "Foo"]},
                       "Fusion is not implemented: [BiasAdd,Foo]", "UnimplementedError", False),
    "dw two args": ("_FusedDepthwiseConv2dNative", ((1, 5, 5, 3), (3, 3, 3, 2), (6,), (6,)),
                    {"num_args": 2}, "must have one extra argument: bias",
                    "InvalidArgumentError", False),
    "dw depth": ("_FusedDepthwiseConv2dNative", ((1, 5, 5, 3), (3, 3, 2, 2), (4,)), {},
                 "input and filter must have the same depth: 3 vs 2",
                 "InvalidArgumentError", False),
    "dw bias length": ("_FusedDepthwiseConv2dNative", ((1, 5, 5, 3), (3, 3, 3, 2), (3,)), {},
                       "Must provide as many biases as the channel dimension of the "
                       "output: [3] vs. [1,5,5,6]", "InvalidArgumentError", False),
}

SCRIPT = (f"CONV = {CONV!r}\nMATMUL = {MATMUL!r}\nDW = {DW!r}\nACTS = {ACTS!r}\n"
          f"DTYPES = {DTYPES!r}\nGEOM_ACTS = {GEOM_ACTS!r}\nCPU_ACTS = {CPU_ACTS!r}\n"
          f"ERRORS = {ERRORS!r}\n") + r"""
import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context, execute
from convref import Geometry, fwd_ref, stuffed

tf.config.set_soft_device_placement(False)
rng = np.random.default_rng(14)
SIMDEV, CPU = "/device:SIMDEV:0", "/device:CPU:0"
ALPHA = 0.2

def enum(dt):
    return tf.as_dtype(dt).as_datatype_enum

def run_op(op, *inputs, attrs):
    # the op once, on the device of the caller's tf.device scope
    return execute.execute(op, 1, inputs=[tf.convert_to_tensor(t) for t in inputs],
                           attrs=attrs, ctx=context.context())[0]

def conv_attrs(dt, act, strides, pad, dil, explicit, over=None):
    kw = {"T": enum(dt), "TArgs": [enum(dt)], "num_args": 1, "num_host_args": 0,
          "strides": [1, strides[0], strides[1], 1], "padding": pad,
          "explicit_paddings": [0, 0, explicit[0], explicit[1], explicit[2], explicit[3], 0, 0]
                               if explicit else [],
          "data_format": "NHWC", "filter_format": "HWIO",
          "dilations": [1, dil[0], dil[1], 1], "use_cudnn_on_gpu": True,
          "fused_ops": ["BiasAdd"] + ([act] if act else []), "epsilon": 1e-4,
          "leakyrelu_alpha": ALPHA}
    kw.update(over or {})
    if "num_args" in (over or {}):
        kw["TArgs"] = [enum(dt)] * kw["num_args"]
    return kw

def mm_attrs(dt, act, ta, tb, over=None):
    kw = {"transpose_a": ta, "transpose_b": tb, "T": enum(dt), "num_args": 1,
          "fused_ops": ["BiasAdd"] + ([act] if act else []), "epsilon": 1e-4,
          "leakyrelu_alpha": ALPHA}
    kw.update(over or {})
    return kw

def dw_attrs(dt, act, stride, pad, dil, nchw, over=None):
    sp = lambda h, w: [1, 1, h, w] if nchw else [1, h, w, 1]
    kw = {"T": enum(dt), "num_args": 1, "strides": sp(stride, stride), "padding": pad,
          "data_format": "NCHW" if nchw else "NHWC", "dilations": sp(*dil),
          "fused_ops": ["BiasAdd"] + ([act] if act else []), "epsilon": 1e-4,
          "leakyrelu_alpha": ALPHA}
    kw.update(over or {})
    return kw

def flat(kw):
    out = []
    for k, v in kw.items():
        out += [k, v]
    return tuple(out)

# ---- references --------------------------------------------------------
def conv_ref(x, w, strides, pad, dil, explicit, depthwise=False):
    # float64 sum over taps of x[n, oh*s + i*d - p, ow*s + j*d - p, c] w[i, j, c, o]
    return fwd_ref(Geometry(x.shape, w.shape, strides, pad, dil, explicit, depthwise), x, w)

def act_ref(act, z):
    if act == "Relu":
        return np.maximum(z, 0)
    if act == "Relu6":
        return np.clip(z, 0, 6)
    if act == "Elu":
        return np.where(z < 0, np.expm1(np.minimum(z, 0)), z)
    if act == "LeakyRelu":  # alpha is a float attribute, then the dtype's
        return np.where(z > 0, z, float(np.float32(ALPHA)) * z)
    if act == "Tanh":
        return np.tanh(z)
    if act == "Sigmoid":
        return 1 / (1 + np.exp(-z))
    return z

def epilogue_ref(act, y, absy, k, b, dt):
    # y, absy: the sum and the sum of |terms| (float64); k terms
    z = y + b
    ref = act_ref(act, z)
    u = unit_roundoff(dt)
    # the sum, the bias add (one rounding, 2u for the perturbed operand),
    # then an activation of slope <= 1 plus its own rounding
    bound = sum_bound(absy, k, dt) + 2 * u * np.abs(z)
    if act in ("Elu", "Tanh", "Sigmoid"):
        bound = bound + 2 * LIBM_ULPS * u * np.abs(ref)
    elif act == "LeakyRelu":
        bound = bound + u * np.abs(ref)
    return ref, bound + 4 * tiny(dt)

# ---- unfused chains (tf ops, on the current device) ---------------------
def apply_act(act, t):
    if act == "LeakyRelu":
        return tf.nn.leaky_relu(t, alpha=ALPHA)
    return {"": tf.identity, "Relu": tf.nn.relu, "Relu6": tf.nn.relu6, "Elu": tf.nn.elu,
            "Tanh": tf.math.tanh, "Sigmoid": tf.math.sigmoid}[act](t)

def chain_conv(act, strides, pad, dil, explicit):
    def fn(x, w, b):
        p = [[0, 0], list(explicit[:2]), list(explicit[2:]), [0, 0]] if explicit else pad
        y = tf.nn.conv2d(x, w, strides=[1, strides[0], strides[1], 1], padding=p,
                         dilations=[1, dil[0], dil[1], 1])
        return apply_act(act, tf.nn.bias_add(y, b))
    return fn

def chain_mm(act, ta, tb):
    return lambda a, b, bias: apply_act(act, tf.nn.bias_add(
        tf.linalg.matmul(a, b, transpose_a=ta, transpose_b=tb), bias))

def chain_dw(act, stride, pad, dil, nchw):
    fmt = "NCHW" if nchw else "NHWC"
    sp = lambda h, w: [1, 1, h, w] if nchw else [1, h, w, 1]
    def fn(x, w, b):
        y = tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, strides=sp(stride, stride),
                                             padding=pad, data_format=fmt,
                                             dilations=sp(*dil))
        return apply_act(act, tf.nn.bias_add(y, b, data_format=fmt))
    return fn

def chain_dw_cpu(act, stride, pad, dil):
    # TF CPU's depthwise kernel lacks NCHW and dilations: NHWC, filter with
    # zeros stuffed between its taps
    def fn(x, w, b, nchw):
        ws = stuffed(w.numpy(), dil)
        xx = tf.transpose(x, [0, 2, 3, 1]) if nchw else x
        y = tf.nn.depthwise_conv2d(xx, ws, [1, stride, stride, 1], pad)
        y = apply_act(act, tf.nn.bias_add(y, b))
        return tf.transpose(y, [0, 3, 1, 2]) if nchw else y
    return fn

def fused_and_chain(op, attrs, chain, args):
    # fused and unfused on SIMDEV, bit for bit
    with tf.device(SIMDEV):
        ts = [tf.constant(a) for a in args]
        f = run_op(op, *ts, attrs=flat(attrs))
        u = chain(*ts)
    return {"fused_device": f.device, "unfused": raw_equal(f.numpy(), u.numpy())}

def run_case(op, name, act, dt):
    label = f"{op} {dt} {name} {act or 'BiasAdd'}"
    if op == "_FusedConv2D":
        xs, fs, strides, pad, dil, explicit = CONV[name]
        x, w = rng.standard_normal(xs).astype(dt), rng.standard_normal(fs).astype(dt)
        b = rng.standard_normal(fs[3]).astype(dt)
        y = conv_ref(x, w, strides, pad, dil, explicit)
        absy = conv_ref(np.abs(x), np.abs(w), strides, pad, dil, explicit)
        ref, bound = epilogue_ref(act, y, absy, fs[0] * fs[1] * fs[2], b.astype(np.float64), dt)
        attrs = conv_attrs(dt, act, strides, pad, dil, explicit)
        chain = chain_conv(act, strides, pad, dil, explicit)
        grouped = xs[3] != fs[2]
        cpu_fn = None if act in CPU_ACTS[op] and not grouped else chain
    elif op == "_FusedMatMul":
        sa, sb, ta, tb = MATMUL[name]
        x, w = rng.standard_normal(sa).astype(dt), rng.standard_normal(sb).astype(dt)
        n = sb[0] if tb else sb[1]
        k = sa[0] if ta else sa[1]
        b = rng.standard_normal(n).astype(dt)
        A = x.T if ta else x
        B = w.T if tb else w
        y = A.astype(np.float64) @ B.astype(np.float64)
        absy = np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64)
        ref, bound = epilogue_ref(act, y, absy, k, b.astype(np.float64), dt)
        attrs = mm_attrs(dt, act, ta, tb)
        chain = chain_mm(act, ta, tb)
        cpu_fn = None if act in CPU_ACTS[op] else chain
    else:
        xs, fs, stride, pad, dil, nchw = DW[name]
        x, w = rng.standard_normal(xs).astype(dt), rng.standard_normal(fs).astype(dt)
        b = rng.standard_normal(fs[2] * fs[3]).astype(dt)
        y = conv_ref(x, w, (stride, stride), pad, dil, None, depthwise=True)
        absy = conv_ref(np.abs(x), np.abs(w), (stride, stride), pad, dil, None, depthwise=True)
        ref, bound = epilogue_ref(act, y, absy, fs[0] * fs[1], b.astype(np.float64), dt)
        if nchw:
            x = x.transpose(0, 3, 1, 2)
            ref, bound = ref.transpose(0, 3, 1, 2), bound.transpose(0, 3, 1, 2)
        attrs = dw_attrs(dt, act, stride, pad, dil, nchw)
        chain = chain_dw(act, stride, pad, dil, nchw)
        cpu_chain = chain_dw_cpu(act, stride, pad, dil)
        cpu_fn = lambda x_, w_, b_: cpu_chain(x_, w_, b_, nchw)
    fused = lambda *t: run_op(op, *t, attrs=flat(attrs))
    check(label)(lambda: dict(versus_ref(fused, x, w, b, ref=ref, bound=bound, dtype=dt,
                                         cpu_fn=cpu_fn),
                              exact=fused_and_chain(op, attrs, chain, (x, w, b))))

for table, op in ((CONV, "_FusedConv2D"), (MATMUL, "_FusedMatMul"),
                  (DW, "_FusedDepthwiseConv2dNative")):
    first = next(iter(table))
    dts = ["float32"] if op == "_FusedMatMul" else DTYPES
    for name in table:
        for act in (ACTS if name == first else GEOM_ACTS):
            for dt in (dts if name == first else ["float32"]):
                run_case(op, name, act, dt)

@check("deterministic")
def _():
    xs, fs, strides, pad, dil, explicit = CONV["large"]
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(fs).astype(np.float32)
    b = rng.standard_normal(fs[3]).astype(np.float32)
    attrs = flat(conv_attrs("float32", "Elu", strides, pad, dil, explicit))
    with tf.device(SIMDEV):
        r = [run_op("_FusedConv2D", x, w, b, attrs=attrs).numpy() for _ in range(2)]
    return raw_equal(r[0], r[1])

# ---- bad inputs -----------------------------------------------------------
def bad_args(op, shapes, over):
    args = [np.ones(s, np.float32) if s != "host" else np.float32(1) for s in shapes]
    if op == "_FusedConv2D":
        kw = conv_attrs("float32", "Relu", (1, 1), "SAME", (1, 1), None, over)
        if over.get("num_host_args"):
            kw["TArgs"] = [enum("float32")]
    elif op == "_FusedMatMul":
        kw = mm_attrs("float32", "Relu", False, False, over)
    else:
        kw = dw_attrs("float32", "Relu", 1, "SAME", (1, 1), False, over)
    return args, flat(kw)

def after():
    x = np.ones((1, 3, 3, 2), np.float32)
    w = np.ones((1, 1, 2, 2), np.float32)
    b = np.full((2,), -1, np.float32)
    with tf.device(SIMDEV):
        y = run_op("_FusedConv2D", x, w, b,
                   attrs=flat(conv_attrs("float32", "Relu", (1, 1), "VALID", (1, 1), None)))
    return "SIMDEV:0" in y.device and bool((y.numpy() == 1).all())

for name, (op, shapes, over, key, cls, cpu) in ERRORS.items():
    args, attrs = bad_args(op, shapes, over)
    fn = lambda *t, op=op, attrs=attrs: run_op(op, *t, attrs=attrs)
    @check(f"error {name}")
    def _():
        if cpu:
            d = error_pair(fn, *args)
        else:
            d = {"sim": list(error_class(fn, *args, device=SIMDEV)), "cpu": ["", ""]}
        return dict(d, after=after_ok(after))
"""

CHILD_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0"}


@pytest.fixture(scope="module")
def fused(run_tf):
    return run_tf(SCRIPT, env=CHILD_ENV, timeout=300)


@pytest.mark.parametrize("case", CASES)
def test_vs_reference(fused, case):
    d = fused.data(case)
    assert_vs_ref(d, case, TF_CPU_DIVERGENCES)


def test_divergences_documented():
    assert_divergences_documented(TF_CPU_DIVERGENCES)


@pytest.mark.parametrize("case", CASES)
def test_equals_unfused_simdev_chain(fused, case):
    e = fused.data(case)["exact"]
    assert "SIMDEV:0" in e["fused_device"], e
    assert e["unfused"]["equal"], f"{case}: fused != unfused SIMDEV chain: {e['unfused']}"


def test_deterministic(fused):
    assert fused.data("deterministic")["equal"]


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_from_kernel(fused, name):
    op, _, _, key, cls, cpu = ERRORS[name]
    d = fused.data(f"error {name}")
    # TF names the wrapped function of an underscore op with one more "_"
    if cpu:
        assert_error_like_cpu(d, "_" + op, key, cls=cls, cpu_key=cls is None)
    else:
        assert_kernel_error(d["sim"], "_" + op, key, cls)
        assert d["after"] is True, d["after"]


def test_clean_exit(fused):
    fused.assert_clean_exit()
