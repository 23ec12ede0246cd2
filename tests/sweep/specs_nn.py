"""Sweep specs of batch normalization, Einsum, image resizing and the
stateless random ops."""
import numpy as np

from specs_core import Case, Spec, i32, i64, vals

HALF_FT = ({"T": "float32", "U": "float32"}, {"T": "float16", "U": "float32"})


def _list(*cs):
    return lambda quick: list(cs)[:1] if quick else list(cs)


def _bad(*cs):
    return lambda quick: list(cs)


def _c(name, **kw):
    return Case(name, kw)


def _bn(op):
    x = vals((2, 3, 3, 4))
    sc, off = vals((4,), 0.5, 1.5, key=1), vals((4,), key=2)
    mean, var = vals((4,), key=3), vals((4,), 0.5, 2, key=4)
    cases = _list(
        _c("training", x=x, scale=sc, offset=off, mean=np.zeros(0), variance=np.zeros(0),
           epsilon=0.001, is_training=True),
        _c("inference", x=x, scale=sc, offset=off, mean=mean, variance=var,
           epsilon=0.001, is_training=False),
        _c("NCHW training", x=vals((2, 4, 3, 3)), scale=sc, offset=off, mean=np.zeros(0),
           variance=np.zeros(0), data_format="NCHW", is_training=True))
    bad = _bad(_c("scale length", x=x, scale=vals((3,)), offset=off, mean=np.zeros(0),
                  variance=np.zeros(0), is_training=True))
    # TF's OpDefs allow half, bfloat16 and float only (U: float)
    tt = ({"T": "float32"},) if op == "FusedBatchNorm" else HALF_FT
    # outputs 3.. are reserve space: TF documents them as the kernel's own
    # (CPU: batch mean/var, cuDNN: saved inverse variance...); only shapes
    # and dtypes are compared.
    return Spec(op, cases, bad, ulps=64, compare_outputs=(0, 1, 2), try_types=tt)


def _bn_grad(op):
    v3 = op == "FusedBatchNormGradV3"  # V1/V2 have no reserve_space_3

    def cases(quick):
        import tensorflow as tf
        out = []
        for fmt, shape in (("NHWC", (2, 3, 3, 4)), ("NCHW", (2, 4, 3, 3)))[:1 if quick else 2]:
            # TF CPU's gradient in inference mode supports NHWC only
            for training in ((True, False) if fmt == "NHWC" else (True,)):
                x = vals(shape)
                sc, off = vals((4,), 0.5, 1.5, key=1), vals((4,), key=2)
                with tf.device("/device:CPU:0"):
                    if training:
                        r = tf.raw_ops.FusedBatchNormV3(
                            x=x.astype(np.float32), scale=sc.astype(np.float32),
                            offset=off.astype(np.float32), mean=np.zeros(0, np.float32),
                            variance=np.zeros(0, np.float32), data_format=fmt,
                            is_training=True)
                        r1, r2, r3 = r[3].numpy(), r[4].numpy(), r[5].numpy()
                    else:
                        r1, r2 = vals((4,), key=3), vals((4,), 0.5, 2, key=4)
                        r3 = np.zeros(0)
                extra = {"reserve_space_3": np.asarray(r3, np.float64)} if v3 else {}
                out.append(_c(f"{fmt} {'training' if training else 'inference'}",
                              y_backprop=vals(shape, key=7), x=x, scale=sc,
                              reserve_space_1=r1.astype(np.float64),
                              reserve_space_2=r2.astype(np.float64),
                              data_format=fmt, is_training=training, epsilon=0.001,
                              **extra))
        return out
    bad = _bad(_c("x shape", y_backprop=vals((2, 3, 3, 4)), x=vals((2, 3, 3, 5)),
                  scale=vals((4,)), reserve_space_1=vals((4,)), reserve_space_2=vals((4,), 1, 2),
                  is_training=True, **({"reserve_space_3": np.zeros(0)} if v3 else {})))
    tt = ({"T": "float32"},) if op == "FusedBatchNormGrad" else HALF_FT
    return Spec(op, cases, bad, ulps=128, compare_outputs=(0, 1, 2), try_types=tt)


def _einsum():
    cases = lambda quick: [  # noqa: E731
        _c("matmul", inputs=[vals((2, 3)), vals((3, 4), key=1)], equation="ij,jk->ik"),
        _c("batch", inputs=[vals((2, 2, 3)), vals((2, 3, 4), key=1)], equation="bij,bjk->bik"),
        # One-operand equations ("ij->ji", "ijk->ik") are not here: simdev
        # refuses them with InvalidArgument (tests/tf/test_kernels_einsum.py);
        # TF's Einsum op with one operand is not what Keras layers build.
        _c("outer", inputs=[vals((3,)), vals((4,), key=1)], equation="i,j->ij"),
        _c("attention", inputs=[vals((2, 5, 2, 3)), vals((2, 4, 2, 3), key=1)],
           equation="bqhd,bkhd->bhqk"),
    ][:2 if quick else 6]
    bad = _bad(_c("dims differ", inputs=[vals((2, 3)), vals((4, 4))], equation="ij,jk->ik"))
    return Spec("Einsum", cases, bad, ulps=64)


def _resize():
    img = vals((2, 4, 5, 3))
    modes = [dict(), dict(half_pixel_centers=True), dict(align_corners=True)]

    def fwd(op):
        return lambda quick: [Case(f"{op} {m or 'default'} {sz}",
                                   dict({"images": img, "size": i32(sz)}, **m))
                              for m in modes[:1 if quick else 3]
                              for sz in ([7, 3], [2, 10])[:1 if quick else 2]]
    bad = _bad(_c("size length", images=img, size=i32([3])),
               _c("rank 3", images=vals((4, 5, 3)), size=i32([2, 2])))

    def bl_grad(quick):
        return [Case(f"ResizeBilinearGrad {m or 'default'}",
                     dict({"grads": vals((2, 7, 3, 3), key=1).astype(np.float32),
                           "original_image": img}, **m)) for m in modes[:1 if quick else 3]]

    def nn_grad(quick):
        return [Case(f"ResizeNearestNeighborGrad {m or 'default'}",
                     dict({"grads": vals((2, 7, 3, 3), key=1), "size": i32([4, 5])}, **m))
                for m in modes[:1 if quick else 3]]
    return [Spec("ResizeBilinear", fwd("ResizeBilinear"), bad, ulps=16),
            Spec("ResizeNearestNeighbor", fwd("ResizeNearestNeighbor"), bad, exact=True),
            Spec("ResizeBilinearGrad", bl_grad,
                 _bad(_c("grads rank", grads=vals((7, 3, 3)).astype(np.float32),
                         original_image=img)), ulps=16,
                 # grads is float32 whatever T is, and TF CPU accumulates
                 # the float64 output in float32 (simdev in float64)
                 compute_dtype="float32"),
            Spec("ResizeNearestNeighborGrad", nn_grad,
                 _bad(_c("size length", grads=vals((2, 7, 3, 3)), size=i32([4])),),
                 ulps=8)]


SEED = i64([7, 11])
KEY = np.array([0x1234], np.uint64)
CTR = np.array([5, 0], np.uint64)
RFT = ({"dtype": "float32"}, {"dtype": "float64"}, {"dtype": "float16"},
       {"dtype": "bfloat16"})


def _random():
    def rcases(extra=None):
        def f(quick):
            out = [Case(f"shape {sh}", dict({"shape": i32(sh), "key": KEY, "counter": CTR,
                                             "alg": i32(1)}, **(extra or {})))
                   for sh in ([3, 5], [0], [1001])]
            out.append(Case("alg 3 (auto select)",
                            dict({"shape": i64([4, 4]), "key": KEY, "counter": CTR,
                                  "alg": i32(3)}, **(extra or {}))))
            return out[:2] if quick else out
        return f
    rbad = _bad(_c("bad alg", shape=i32([3]), key=KEY, counter=CTR, alg=i32(9)),
                _c("negative shape", shape=i32([-3]), key=KEY, counter=CTR, alg=i32(1)))

    def v1(quick):
        return [Case(f"shape {sh}", {"shape": i32(sh), "seed": SEED})
                for sh in ([3, 5], [0], [513])][:2 if quick else 3]
    v1bad = _bad(_c("seed shape", shape=i32([3]), seed=i64([1, 2, 3])))
    ints = ({"dtype": "int32"}, {"dtype": "int64"})
    return [
        Spec("StatelessRandomGetKeyCounter",
             _list(_c("int64 seed", seed=SEED), _c("int32 seed", seed=i32([3, 4]))),
             _bad(_c("seed shape", seed=i64([1, 2, 3]))), exact=True,
             try_types=({"Tseed": "int64"},)),
        Spec("StatelessRandomGetKeyCounterAlg", _list(_c("int64 seed", seed=SEED)),
             _bad(_c("seed shape", seed=i64([1, 2, 3]))), exact=True,
             try_types=({"Tseed": "int64"},)),
        Spec("StatelessRandomGetAlg", _list(_c("no inputs")),
             no_bad="the op has no inputs", exact=True, try_types=({},)),
        Spec("StatelessRandomUniformV2", rcases(), rbad, ulps=2, try_types=RFT),
        Spec("StatelessRandomNormalV2", rcases(), rbad, ulps=16, try_types=RFT),
        Spec("StatelessTruncatedNormalV2", rcases(), rbad, ulps=16, try_types=RFT),
        Spec("StatelessRandomUniformIntV2",
             rcases({"minval": i64(-5), "maxval": i64(9)}),
             _bad(_c("minval >= maxval", shape=i32([3]), key=KEY, counter=CTR, alg=i32(1),
                     minval=i64(4), maxval=i64(4))), exact=True, try_types=ints),
        Spec("StatelessRandomUniformFullIntV2", rcases(), rbad, exact=True,
             try_types=ints + ({"dtype": "uint32"}, {"dtype": "uint64"})),
        Spec("StatelessRandomUniformInt",
             lambda quick: [Case(c.name, dict(c.kwargs, minval=i64(-5), maxval=i64(9)))
                            for c in v1(quick)],
             _bad(_c("minval >= maxval", shape=i32([3]), seed=SEED, minval=i64(4),
                     maxval=i64(4))), exact=True, try_types=ints),
        Spec("StatelessRandomUniformFullInt", v1, v1bad, exact=True,
             try_types=ints + ({"dtype": "uint32"}, {"dtype": "uint64"})),
        Spec("StatelessRandomUniform", v1, v1bad, ulps=2, try_types=RFT),
        Spec("StatelessRandomNormal", v1, v1bad, ulps=16, try_types=RFT),
        Spec("StatelessTruncatedNormal", v1, v1bad, ulps=16, try_types=RFT),
    ]


OPS = [_bn("FusedBatchNorm"), _bn("FusedBatchNormV2"), _bn("FusedBatchNormV3"),
       _bn_grad("FusedBatchNormGrad"), _bn_grad("FusedBatchNormGradV2"),
       _bn_grad("FusedBatchNormGradV3"), _einsum()] + _resize() + _random()


# ---- TF's fused ops (src/kernels/framework/fused.h), run by sweep.op_function ---------
# (underscore ops are not in tf.raw_ops). Sums of at most 27 products as
# Conv2D's, then bias and activation: 64 ulps as Conv2D's specs.
def _act_cpu(y, kw):
    """y through fused_ops[1:] on the current device, as the unfused ops."""
    import tensorflow as tf
    y = tf.raw_ops.BiasAdd(value=y, bias=kw["args"][0],
                           data_format=kw.get("data_format", "NHWC"))
    for act in kw["fused_ops"][1:]:
        if act == "LeakyRelu":
            y = tf.raw_ops.LeakyRelu(features=y, alpha=kw.get("leakyrelu_alpha", 0.2))
        elif act in ("Tanh", "Sigmoid"):
            y = getattr(tf.raw_ops, act)(x=y)
        else:
            y = getattr(tf.raw_ops, act)(features=y)
    return y


def _conv_cpu(fn, kw):
    """TF CPU's _FusedConv2D lacks Tanh, Sigmoid and groups: Conv2D,
    BiasAdd, act."""
    import tensorflow as tf
    grouped = kw["input"].shape[-1] != kw["filter"].shape[2]
    if kw["fused_ops"][1:] not in (["Tanh"], ["Sigmoid"]) and not grouped:
        return fn(**kw)
    y = tf.raw_ops.Conv2D(input=kw["input"], filter=kw["filter"], strides=kw["strides"],
                          padding=kw["padding"],
                          explicit_paddings=kw.get("explicit_paddings", []),
                          dilations=kw.get("dilations", [1, 1, 1, 1]))
    return _act_cpu(y, kw)


def _dw_cpu(fn, kw):
    """TF CPU's _FusedDepthwiseConv2dNative is a no-op kernel without oneDNN:
    DepthwiseConv2dNative, BiasAdd, act (NHWC, no dilations: TF CPU's)."""
    import tensorflow as tf
    y = tf.raw_ops.DepthwiseConv2dNative(input=kw["input"], filter=kw["filter"],
                                         strides=kw["strides"], padding=kw["padding"])
    return _act_cpu(y, kw)


def _fused():
    x, f = vals((2, 5, 5, 3)), vals((3, 3, 3, 4), key=1)
    b = [vals((4,), key=2)]
    s1 = [1, 1, 1, 1]

    def conv(quick):
        c = [_c("BiasAdd SAME", input=x, filter=f, args=b, strides=s1, padding="SAME",
                fused_ops=["BiasAdd"], num_args=1),
             _c("Relu VALID stride 2", input=x, filter=f, args=b, strides=[1, 2, 2, 1],
                padding="VALID", fused_ops=["BiasAdd", "Relu"], num_args=1),
             _c("Elu EXPLICIT", input=x, filter=f, args=b, strides=s1, padding="EXPLICIT",
                explicit_paddings=[0, 0, 1, 0, 2, 1, 0, 0], fused_ops=["BiasAdd", "Elu"],
                num_args=1),
             _c("LeakyRelu dilation 2", input=x, filter=f, args=b, strides=s1,
                padding="SAME", dilations=[1, 2, 2, 1], leakyrelu_alpha=0.3,
                fused_ops=["BiasAdd", "LeakyRelu"], num_args=1)]
        c += [_c(f"{a} SAME", input=x, filter=f, args=b, strides=s1, padding="SAME",
                 fused_ops=["BiasAdd", a], num_args=1) for a in ("Relu6", "Tanh", "Sigmoid")]
        c.append(_c("Relu grouped", input=vals((2, 5, 5, 6)), filter=f, args=b, strides=s1,
                    padding="SAME", fused_ops=["BiasAdd", "Relu"], num_args=1))
        return c[:2] if quick else c

    # bad inputs TF CPU rejects with and without oneDNN (which accepts a
    # [1, C] bias, and crashes on a rank-3 input)
    conv_bad = _bad(
        _c("filter larger than input", input=x, filter=vals((7, 7, 3, 4)), args=b,
           strides=s1, padding="VALID", fused_ops=["BiasAdd"], num_args=1),
        _c("input depth", input=vals((2, 5, 5, 4)), filter=f, args=b, strides=s1,
           padding="SAME", fused_ops=["BiasAdd", "Relu"], num_args=1))

    a, w, mb = vals((5, 3)), vals((3, 4), key=1), [vals((4,), key=2)]

    def mm(quick):
        c = [_c(f"{act or 'BiasAdd'}", a=a, b=w, args=mb,
                fused_ops=["BiasAdd"] + ([act] if act else []))
             for act in ("", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid")]
        c.append(_c("transposes", a=vals((3, 5)), b=vals((4, 3), key=1), args=mb,
                    transpose_a=True, transpose_b=True, fused_ops=["BiasAdd", "Relu"]))
        return c[:2] if quick else c

    mm_bad = _bad(_c("inner dims", a=a, b=vals((4, 4)), args=mb, fused_ops=["BiasAdd"]),
                  _c("rank 3", a=vals((2, 5, 3)), b=w, args=mb, fused_ops=["BiasAdd"]))

    df, db = vals((3, 3, 3, 2), key=1), [vals((6,), key=2)]

    def dw(quick):
        c = [_c(f"{act or 'BiasAdd'}", input=x, filter=df, args=db, strides=s1,
                padding="SAME", fused_ops=["BiasAdd"] + ([act] if act else []))
             for act in ("", "Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid")]
        c.append(_c("VALID stride 2", input=x, filter=df, args=db, strides=[1, 2, 2, 1],
                    padding="VALID", fused_ops=["BiasAdd", "Relu"]))
        return c[:2] if quick else c

    dw_bad = _bad(_c("depth", input=x, filter=vals((3, 3, 2, 2)), args=[vals((4,))],
                     strides=s1, padding="SAME", fused_ops=["BiasAdd"]))
    return [Spec("_FusedConv2D", conv, conv_bad, ulps=64, cpu_op=_conv_cpu),
            Spec("_FusedMatMul", mm, mm_bad, ulps=64, try_types=({"T": "float32"},)),
            Spec("_FusedDepthwiseConv2dNative", dw, dw_bad, ulps=64, cpu_op=_dw_cpu)]


OPS += _fused()
