"""Conv2D benchmark group: simdev next to TF's CPU device.

    .venv/bin/python bench/bench_conv.py [--quick] [--json PATH]

Conv2D forward, Conv2DBackpropInput and Conv2DBackpropFilter (tf.raw_ops,
eager), NHWC float32, 3x3 filters, SAME padding, stride 1, on two ResNet-like
shapes:

    8x56x56x64  -> 64    (a first-stage block)
    8x28x28x128 -> 128   (a second-stage block)

The CPU side is TF's CPU device as TF ships it (oneDNN on x86;
TF_ENABLE_ONEDNN_OPTS is left alone). Sides alternate call by call. Work is
2*N*Ho*Wo*Cout*KH*KW*Cin FLOP for all three ops.

--quick: the first shape, forward only, few repetitions.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import CPU, SIM  # noqa: E402

tf.config.set_soft_device_placement(False)

GROUP = "conv"
FWD_TARGET = {"vs": "tf_cpu", "min_ratio": 0.8}
# (N, H, W, Cin, KH, KW, Cout, stride); SAME padding.
SHAPES = ((8, 56, 56, 64, 3, 3, 64, 1), (8, 28, 28, 128, 3, 3, 128, 1))
OPS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")
REPS, QUICK_REPS = 40, 5


def shape_tag(s):
    n, h, w, ci, kh, kw, co, st = s
    return f"{n}x{h}x{w}x{ci} {kh}x{kw}->{co} SAME s{st}"


def make_op(op, dev, x, w, dy, s):
    n, h, wd, ci, kh, kw, co, st = s
    strides = [1, st, st, 1]

    def f():
        with tf.device(dev):
            if op == "Conv2D":
                return tf.raw_ops.Conv2D(input=x, filter=w, strides=strides,
                                         padding="SAME")
            if op == "Conv2DBackpropInput":
                return tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=[n, h, wd, ci], filter=w, out_backprop=dy,
                    strides=strides, padding="SAME")
            return tf.raw_ops.Conv2DBackpropFilter(
                input=x, filter_sizes=[kh, kw, ci, co], out_backprop=dy,
                strides=strides, padding="SAME")
    return f


def conv_cases(s, ops, reps, rng):
    n, h, w, ci, kh, kw, co, st = s
    ho, wo = -(-h // st), -(-w // st)
    xa = rng.standard_normal((n, h, w, ci), dtype=np.float32)
    wa = rng.standard_normal((kh, kw, ci, co), dtype=np.float32) * 0.1
    da = rng.standard_normal((n, ho, wo, co), dtype=np.float32)
    flop = 2 * n * ho * wo * co * kh * kw * ci
    t = {}
    for dev in (SIM, CPU):
        with tf.device(dev):
            t[dev] = (tf.constant(xa), tf.constant(wa), tf.constant(da))
    out = []
    for op in ops:
        name = f"{op} {shape_tag(s)}"
        common.progress(f"[{GROUP}] {name}: {reps} reps x 2 sides")
        sim = make_op(op, SIM, *t[SIM], s)
        cpu = make_op(op, CPU, *t[CPU], s)
        # Outside the timing: placement and agreement with the CPU device.
        rs = common.check_device(sim(), "SIMDEV", name)
        rc = common.check_device(cpu(), "CPU", name)
        common.check_close(rs.numpy(), rc.numpy(), name)
        samples = common.alternate({"simdev": sim, "tf_cpu": cpu}, reps,
                                   rounds=reps, warmup=0)
        out.append(common.case(GROUP, name, samples, work=flop,
                               work_unit="FLOP",
                               target=FWD_TARGET if op == "Conv2D" else None))
    return out


def run(quick=False):
    rng = np.random.default_rng(1)
    cases = []
    if quick:
        cases += conv_cases(SHAPES[0], OPS[:1], QUICK_REPS, rng)
    else:
        for s in SHAPES:
            cases += conv_cases(s, OPS, REPS, rng)
    info = common.base_info(tf, quick)
    info["layout"] = "NHWC"
    return common.result(GROUP, cases, info)


def main(argv=None):
    return common.main(run, __doc__, argv)


if __name__ == "__main__":
    main()
