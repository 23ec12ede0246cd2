"""AddN and ZerosLike of variants (T=variant: TensorLists, what a while
loop's gradient and a TensorArray's accumulate) on SIMDEV
(src/kernels/variables/variant_ops.c, through kernels_experimental.h's
TF_AddNVariant and TF_ZerosLikeVariant).

simdev registers them only where TF exports those functions (2.16-2.18,
conftest's simdev_variable_kernels); on 2.19 and later the kernel tests are
skipped with the reason and test_registered_where_tf_exports_them asserts
that nothing is registered (then TF's CPU kernels serve them, adding the
elements of lists that live in SIMDEV memory with host code).

In TF children with soft placement off:
  - a tf.while_loop writing a TensorArray read three times (stack, two
    reads): its gradient accumulates the array's gradient lists with a
    variant AddN, which now runs on SIMDEV (RunMetadata's partition graphs:
    the AddN T=variant node on SIMDEV, no compute node on the CPU); the
    gradient equals NumPy's exactly (small integers in float32);
  - AddN of three lists and ZerosLike of a list, eagerly, for each element
    dtype SIMDEV's list kernels take (float32, float64, float16, bfloat16,
    int32, int64), against NumPy exactly (small integers);
  - where the elements are: the kernels check every element tensor TF hands
    them with sim_mem_contains and refuse host memory (Unimplemented, "in
    host memory"), so each passing value above is evidence that those
    elements, int32 ones included, were SIMDEV memory; lists built by
    TensorListFromTensor, TensorListSetItem (an int32 item from tf.shape,
    whose output is host memory, included) and TensorListPushBack;
  - errors: element dtypes without an add (bool, complex64) fail with
    Unimplemented naming the dtype, elements of different shapes with
    InvalidArgument, from the SIMDEV kernel; ZerosLike of a bool list works
    (a zero fill needs no arithmetic).
Keras LSTM's gradient (a while loop over TensorLists) is
tests/tf/test_variables_models.py's test_lstm_step_all_on_simdev.
"""
import pytest

from conftest import assert_kernel_error, simdev_variable_kernels, tf_minor

HAVE = simdev_variable_kernels()
NEEDS_KERNELS = pytest.mark.skipif(
    not HAVE, reason=f"TensorFlow 2.{tf_minor()} exports neither TF_AddNVariant nor "
    "TF_ZerosLikeVariant (kernels_experimental.h): simdev registers no variant "
    "AddN/ZerosLike (test_registered_where_tf_exports_them checks that)")
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64"]

REGISTRY = r'''
import tensorflow as tf
from tensorflow.python.framework import kernels as _kernels

@check("registered")
def _():
    import ctypes, glob, os
    out = {}
    for op in ("AddN", "ZerosLike"):
        ks = [k for k in _kernels.get_registered_kernels_for_op(op).kernel
              if k.device_type in ("SIMDEV", "DEFAULT") and
              any(21 in c.allowed_values.list.type for c in k.constraint)]
        out[op] = [[k.device_type, list(k.host_memory_arg)] for k in ks]
    lib = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(tf.__file__),
                                             "libtensorflow_framework.so.2"))[0])
    out["exports"] = {f: hasattr(lib, f) for f in ("TF_AddNVariant", "TF_ZerosLikeVariant")}
    return out
'''

SCRIPT = r'''
import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
tf.config.set_soft_device_placement(False)
SIM, CPU = "/device:SIMDEV:0", "/device:CPU:0"
ES = tf.constant([-1], tf.int32)

def placed(fn):
    """(fn(), [[op, device type, T]]) of the partition graphs TF ran."""
    ctx = context.context()
    ctx.enable_run_metadata()
    ctx.export_run_metadata()
    try:
        r = fn()
    finally:
        md = ctx.export_run_metadata()
        ctx.disable_run_metadata()
    nodes = []
    for fg in md.function_graphs:
        for pg in fg.partition_graphs:
            for n in pg.node:
                t = tf.as_dtype(n.attr["T"].type).name if "T" in n.attr else None
                nodes.append([n.op, n.device.rsplit("/", 1)[-1].split(":")[1], t])
    return r, nodes

def err(fn):
    try:
        fn()
    except Exception as e:
        return [type(e).__name__, str(e)]
    return [None, None]

def stack(l, dt):
    return tf.raw_ops.TensorListStack(input_handle=l, element_dtype=dt,
                                      element_shape=ES).numpy()

@check("while_grad")
def _():
    x0 = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    with tf.device(SIM):
        x = tf.Variable(x0)
        @tf.function
        def f():
            with tf.GradientTape() as t:
                ta = tf.TensorArray(tf.float32, size=4)
                def body(i, ta):
                    return i + 1, ta.write(i, x[i] * x[i])
                _, ta = tf.while_loop(lambda i, _: i < 4, body, [0, ta])
                y = (tf.reduce_sum(ta.stack()) + tf.reduce_sum(ta.read(1) * 2.0) +
                     tf.reduce_sum(ta.read(2) * 3.0))
            return t.gradient(y, x)
        g, nodes = placed(f)
    w = np.array([1, 3, 4, 1], np.float32)[:, None]
    return {"got": g.numpy().tolist(), "want": (2 * x0 * w).tolist(), "nodes": nodes}

for dt in DTYPES:
    @check("values " + dt)
    def _():
        d = tf.as_dtype(dt)
        a = np.arange(6).reshape(2, 3)
        with tf.device(SIM):
            la = tf.raw_ops.TensorListFromTensor(tensor=tf.constant(a, d), element_shape=ES)
            lb = tf.raw_ops.TensorListReserve(element_shape=ES, num_elements=2, element_dtype=d)
            lb = tf.raw_ops.TensorListSetItem(input_handle=lb, index=0, item=tf.constant([1, 2, 3], d))
            lb = tf.raw_ops.TensorListSetItem(input_handle=lb, index=1, item=tf.constant([4, 5, 6], d))
            s = tf.raw_ops.AddN(inputs=[la, lb, la])
            z = tf.raw_ops.ZerosLike(x=lb)
            return {"sum": stack(s, d).astype("float64").tolist(), "sum_dev": s.device,
                    "zeros": stack(z, d).astype("float64").tolist(), "zeros_dev": z.device,
                    "want": (2 * a + np.arange(1, 7).reshape(2, 3)).tolist()}

@check("int32 host item")
def _():
    # tf.shape's int32 output is host memory on SIMDEV; the list kernel
    # takes its item in device memory (TF copies it), which the AddN then
    # adds on the stream.
    with tf.device(SIM):
        @tf.function
        def f(x):
            l = tf.raw_ops.TensorListReserve(element_shape=ES, num_elements=1,
                                             element_dtype=tf.int32)
            l = tf.raw_ops.TensorListSetItem(input_handle=l, index=0, item=tf.shape(x))
            l = tf.raw_ops.AddN(inputs=[l, l])
            return tf.raw_ops.TensorListGetItem(input_handle=l, index=0, element_shape=ES,
                                                element_dtype=tf.int32)
        r, nodes = placed(lambda: f(tf.zeros([2, 3])))
    return {"got": r.numpy().tolist(), "nodes": nodes}

@check("errors")
def _():
    out = {}
    with tf.device(SIM):
        for dt, v in (("bool", [True, False]), ("complex64", [1 + 2j, 3])):
            l = tf.raw_ops.EmptyTensorList(element_shape=ES, max_num_elements=-1,
                                           element_dtype=tf.as_dtype(dt))
            l = tf.raw_ops.TensorListPushBack(input_handle=l, tensor=tf.constant(v, tf.as_dtype(dt)))
            out["addn " + dt] = err(lambda: tf.raw_ops.AddN(inputs=[l, l]))
            z = tf.raw_ops.ZerosLike(x=l)
            with tf.device(CPU):
                arr = stack(z, tf.as_dtype(dt))
                out["zeros " + dt] = [list(arr.shape), int(np.count_nonzero(arr))]
        a = tf.raw_ops.TensorListFromTensor(tensor=tf.constant([[1., 2.]]), element_shape=ES)
        b = tf.raw_ops.TensorListFromTensor(tensor=tf.constant([[1., 2., 3.]]), element_shape=ES)
        out["shapes"] = err(lambda: tf.raw_ops.AddN(inputs=[a, b]))
    return out
'''.replace("DTYPES", repr(DTYPES))


@pytest.fixture(scope="module")
def registry(run_tf):
    return run_tf(REGISTRY)


@pytest.fixture(scope="module")
def v(run_tf):
    return run_tf(SCRIPT, timeout=300)


@pytest.mark.registry
def test_registered_where_tf_exports_them(registry):
    reg = registry.data("registered")
    if HAVE:
        assert reg["exports"] == {"TF_AddNVariant": True, "TF_ZerosLikeVariant": True}, reg
        # simdev's own kernels, no host-memory arguments (variant_ops.c's
        # kOps says why)
        assert reg["AddN"] == [["SIMDEV", []]], reg
        assert reg["ZerosLike"] == [["SIMDEV", []]], reg
    else:
        assert reg["exports"] == {"TF_AddNVariant": False, "TF_ZerosLikeVariant": False}, reg
        assert reg["AddN"] == [] and reg["ZerosLike"] == [], reg
    registry.assert_clean_exit()


def _on(nodes, op, t):
    return {dev for o, dev, ty in nodes if o == op and ty == t}


# The nodes allowed on the CPU: function arguments/results and loop control.
CPU_OK = {"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv", "Const",
          "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"}


@NEEDS_KERNELS
def test_while_loop_tensorarray_gradient_on_simdev(v):
    d = v.data("while_grad")
    assert d["got"] == d["want"]
    assert _on(d["nodes"], "AddN", "variant") == {"SIMDEV"}, d["nodes"]
    cpu = sorted({o for o, dev, _ in d["nodes"] if dev == "CPU"} - CPU_OK)
    assert cpu == [], cpu


@NEEDS_KERNELS
@pytest.mark.parametrize("dt", DTYPES)
def test_values(v, dt):
    d = v.data("values " + dt)
    assert d["sum_dev"].endswith("SIMDEV:0") and d["zeros_dev"].endswith("SIMDEV:0"), d
    assert d["sum"] == [[float(x) for x in r] for r in d["want"]], d
    assert d["zeros"] == [[0.0] * 3] * 2, d


@NEEDS_KERNELS
def test_int32_item_from_host_memory(v):
    d = v.data("int32 host item")
    assert d["got"] == [4, 6]
    assert _on(d["nodes"], "AddN", "variant") == {"SIMDEV"}, d["nodes"]


@NEEDS_KERNELS
@pytest.mark.parametrize("dt", ["bool", "complex64"])
def test_element_dtype_without_add(v, dt):
    d = v.data("errors")
    assert_kernel_error(d["addn " + dt], "AddN", f"with {dt} elements is not supported",
                        cls="UnimplementedError")
    # the zero fill has no arithmetic: every fixed-size dtype
    assert d["zeros " + dt] == [[1, 2], 0], d


@NEEDS_KERNELS
def test_element_shapes_differ(v):
    assert_kernel_error(v.data("errors")["shapes"], "AddN",
                        "elements of incompatible shapes [2] and [3]",
                        cls="InvalidArgumentError")


@NEEDS_KERNELS
def test_child_exits_cleanly(v):
    v.assert_clean_exit()
