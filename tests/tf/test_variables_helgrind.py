"""simdev's resource-variable kernels (src/kernels/variables/) under helgrind,
used from several threads at once (issue 28).

ONE helgrind process (python -m simdev.valgrind --tool=helgrind, with
simdev's suppressions, XML log) runs a TF script on /device:SIMDEV:0 with
soft placement off: three Python threads, started together by a barrier,
each do AssignAdd/AssignSub/Read on a variable they share and Assign/Read on
one of their own, eagerly, and call a tf.function that updates both (two
independent nodes: TF's executor, 2 inter-op threads, may run them at
once); and, where simdev registers them at run time for float32 (read from
TF's kernel registry, so the script serves before and after they are
added), ResourceApplyGradientDescent on the shared variable,
ResourceApplyMomentum on two variables of the thread's own (a lock of two
mutexes), ResourceScatterAdd on the shared variable and ResourceGather of
it. Every update adds small integers, exact in float32, so the values are
known whatever the interleaving.

What it asserts:
  - the values: no update lost, no read sees one half done (all elements
    equal), each thread's own variables as it set them; all on SIMDEV;
  - helgrind ran to the end and reports no error attributable to simdev.
    Helgrind models only pthreads: TF's absl mutexes, Eigen's queues and
    TF's atomic reference counts are invisible to it, so a TF program shows
    hundreds of reports (docs/debugging.md, "helgrind"). Those without a
    frame of libsimdev*.so are TF's, CPython's or NumPy's and are counted,
    not judged (no suppression was added for them). Those with one must
    each match a pattern of ORDERED_BY_TF below: a mechanism by which TF
    orders the two accesses, matched on the roles of the stacks (racing
    access, allocation of the block), with a comment saying why it is not
    a race; anything else, including every race between two accesses
    helgrind can see are unordered in simdev's own pthread-synchronised
    code (streams, events, launches), lock-order violations and pthread
    misuse, fails the test with its stacks. These patterns live here and
    not in python/simdev/valgrind.supp because they need the allocation
    stack to stay narrow (a suppression sees only one stack) and because
    that file must never match simdev's frames.

Cost: TF's import alone takes minutes under helgrind (the whole run, about
6 minutes on the 2-core machine), so the test runs only with
SIMDEV_SLOW_TESTS=1 (make test leaves it out); `make
test-helgrind-variables` runs it in make matrix's TF 2.18.1 venv, the
release whose kernels these are. Skipped on TF 2.19+ (no variable kernels
of simdev's there: conftest.simdev_variable_kernels()).
"""
import os
import re
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import PRELUDE, TFRun, child_env, parse_checks, simdev_variable_kernels, tf_minor

HELPER = [sys.executable, "-m", "simdev.valgrind", "--tool=helgrind"]
THREADS, STEPS, SIZE = 3, 6, 16

pytestmark = [
    pytest.mark.skipif(not simdev_variable_kernels(),
                       reason=f"TensorFlow 2.{tf_minor()} exports none of kernels_experimental.h's "
                       "variable functions, so simdev registers no variable kernels"),
    pytest.mark.skipif(os.environ.get("SIMDEV_SLOW_TESTS") != "1",
                       reason="one helgrind run of TensorFlow, about 6 minutes: set "
                       "SIMDEV_SLOW_TESTS=1 (make test-helgrind-variables)"),
]

RUN = PRELUDE + textwrap.dedent(r'''
import threading
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import kernels

# Before any op: the executor of the tf.function below runs independent
# nodes on 2 inter-op threads.
tf.config.threading.set_inter_op_parallelism_threads(2)
tf.config.set_soft_device_placement(False)
SIM = "/device:SIMDEV:0"
T, K, N = %(threads)d, %(steps)d, %(size)d

def simdev_float(op):
    """simdev registers op on SIMDEV for float32 (read from TF's registry)."""
    for k in kernels.get_registered_kernels_for_op(op).kernel:
        if k.device_type != "SIMDEV":
            continue
        types = [t for c in k.constraint if c.name in ("T", "dtype")
                 for t in c.allowed_values.list.type]
        if not types or tf.float32.as_datatype_enum in types:
            return True
    return False

CORE = ("ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")
EXTRA = ("ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceScatterAdd",
         "ResourceGather")
have = {op: simdev_float(op) for op in CORE + EXTRA}

@check("registry")
def _():
    return have

with tf.device(SIM):
    shared = tf.Variable(tf.zeros([N], tf.float32))
    own = [tf.Variable(tf.zeros([N], tf.float32)) for _ in range(T)]
    accum = [tf.Variable(tf.zeros([N], tf.float32)) for _ in range(T)]

@tf.function
def graph_step(mine, common, one):
    # No data or control edge between the two updates (automatic control
    # dependencies order ops of one resource only): the executor may run
    # them on two inter-op threads at once.
    mine.assign_add(one)
    common.assign_add(one)

# shared gains this much per step of each thread
PER_STEP = 2 + 1 + have["ResourceApplyGradientDescent"] + have["ResourceScatterAdd"]
barrier = threading.Barrier(T)
errors, torn, wrong = [], [], []

def worker(t):
    try:
        with tf.device(SIM):
            one = tf.ones([N], tf.float32)
            idx = tf.range(N, dtype=tf.int32)
            barrier.wait()
            for i in range(K):
                shared.assign_add(3 * one)
                shared.assign_sub(one)
                s = shared.read_value().numpy()
                if (s != s[0]).any() or s[0] %% 1 or s[0] > T * K * PER_STEP:
                    torn.append(s.tolist())
                base = float(1000 * (t + 1) + i)
                own[t].assign(base * one)
                if (own[t].read_value().numpy() != base).any():
                    wrong.append((t, i, "assign"))
                graph_step(own[t], shared, one)
                if have["ResourceApplyGradientDescent"]:
                    tf.raw_ops.ResourceApplyGradientDescent(
                        var=shared.handle, alpha=tf.constant(1.0), delta=-one)
                if have["ResourceScatterAdd"]:
                    tf.raw_ops.ResourceScatterAdd(resource=shared.handle, indices=idx,
                                                  updates=one)
                if have["ResourceGather"]:
                    g = tf.raw_ops.ResourceGather(resource=shared.handle,
                                                  indices=tf.constant([0, N - 1]),
                                                  dtype=tf.float32).numpy()
                    if g[0] != g[1] or g[0] %% 1:
                        torn.append(g.tolist())
                want = base + 1
                if have["ResourceApplyMomentum"]:
                    # accum = accum * 1 + 1 = i + 1; own -= 1 * accum
                    tf.raw_ops.ResourceApplyMomentum(
                        var=own[t].handle, accum=accum[t].handle, lr=tf.constant(1.0),
                        grad=one, momentum=tf.constant(1.0))
                    want -= i + 1
                if (own[t].read_value().numpy() != want).any():
                    wrong.append((t, i, "update", own[t].read_value().numpy()[0], want))
    except Exception as e:
        errors.append(f"thread {t}: {type(e).__name__}: {e}"[:1000])

@check("threads")
def _():
    ts = [threading.Thread(target=worker, args=(t,)) for t in range(T)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    final = shared.numpy()
    acc = [a.numpy() for a in accum]
    return {"errors": errors[:3], "torn": torn[:3], "wrong": wrong[:5],
            "shared": float(final[0]), "shared_whole": bool((final == final[0]).all()),
            "shared_want": float(T * K * PER_STEP),
            "accum_ok": all((a == (K if have["ResourceApplyMomentum"] else 0)).all()
                            for a in acc),
            "devices": sorted({v.device for v in [shared] + own + accum})}
''') % {"threads": THREADS, "steps": STEPS, "size": SIZE}


# ---- helgrind's XML log ---------------------------------------------------------

def frame_text(f):
    def g(tag):
        e = f.find(tag)
        return e.text if e is not None and e.text else ""
    where = f"{g('file')}:{g('line')}" if g("file") else os.path.basename(g("obj")) or "?"
    return f"{g('fn') or g('ip')} ({where})"


def errors_of(xml_text):
    """[(kind, what, stacks)] of helgrind's XML log: each error's kind (Race,
    LockOrder, UnlockUnlocked, ...), its headline and every stack it shows
    (the access; the conflicting access; where the block was allocated), a
    stack as (heading, [(obj, text)]), innermost frame first. Suppressed
    errors are not in the log."""
    root = ET.fromstring(xml_text)
    out = []
    for err in root.iter("error"):
        what, heading, stacks = "", "", []
        for child in err:
            if child.tag in ("xwhat", "what"):
                what = child.findtext("text") or child.text or ""
                heading = "access"
            elif child.tag in ("auxwhat", "xauxwhat"):
                heading = child.findtext("text") or child.text or ""
            elif child.tag == "stack":
                stacks.append((heading, [(f.findtext("obj") or "", frame_text(f))
                                         for f in child.iter("frame")]))
        out.append((err.findtext("kind"), what, stacks))
    return out


def counts_of(xml_text):
    """(errors reported, suppressed) of the log: sums of its counts."""
    root = ET.fromstring(xml_text)
    reported = sum(int(p.findtext("count")) for p in root.iter("errorcounts")
                   for p in p.iter("pair"))
    suppressed = sum(int(p.findtext("count")) for p in root.iter("suppcounts")
                     for p in p.iter("pair"))
    return reported, suppressed


SIMDEV_OBJ = re.compile(r"/libsimdev[^/]*\.so")
PRELOAD_OBJ = re.compile(r"vgpreload_helgrind")
ALLOCATORS = re.compile(r"^(operator new|malloc|calloc|realloc|memalign|posix_memalign|"
                        r"aligned_alloc)\b")


def _is_simdev(frame):
    return bool(SIMDEV_OBJ.search(frame[0]))


def _fn(frame):
    return frame[1].split(" (")[0]


def _stack(e, prefix):
    """The first stack of error e whose heading starts with prefix ("access",
    "This conflicts", "Address"), or []."""
    return next((st for h, st in e[2] if h.startswith(prefix)), [])


def _innermost(st):
    """The innermost frame that is not helgrind's own (its preloaded
    memcpy/memmove/pthread wrappers), or None."""
    return next((f for f in st if not PRELOAD_OBJ.search(f[0])), None)


def _allocator_caller(st):
    """The frame that called the allocator in an allocation stack."""
    rest = [f for f in st if not PRELOAD_OBJ.search(f[0]) and not ALLOCATORS.match(_fn(f))]
    return rest[0] if rest else None


def _has(st, pattern):
    return any(re.search(pattern, _fn(f)) for f in st)


def _simdev_fns(st):
    return [_fn(f) for f in st if _is_simdev(f)]


# The errors with a simdev frame that are not simdev's races, by how TF
# orders what helgrind reports (helgrind models only pthreads; TF's absl
# mutexes, Eigen's queues and its atomic reference counts are invisible to
# it, docs/debugging.md "helgrind"). Each is matched on the roles of the
# stacks (the racing access, the block's allocation), never on a simdev
# function alone; every other error with a simdev frame fails the test.
ORDERED_BY_TF = {
    "tf-memory":
        # TF's (or NumPy's) own code on TF's threads touching a heap block
        # TF allocated: its kernel/graph/executor state read inside the C
        # API simdev calls during compute (TF_ExpectedOutputDataType,
        # TF_ForwardInputOrAllocateOutput), EventMgr's queues, TF's
        # callbacks and tensors, NumPy reading the host copy. simdev shows
        # up only below TF's frame or in the "conflicting access" stack,
        # which helgrind takes from its access history: for recycled heap
        # memory that is an earlier occupant of the address (a launch, a
        # stream item, a TF_Tensor simdev freed), e.g. sim_stream_submit
        # writing a queue link "into" EventMgr's deque. Also TF's variable
        # (VarHandleOp's) tensor read and replaced by
        # TF_GetInputTensorFromVariable for two threads' updates: under the
        # variable's mutex, which skv_lock takes and which is an
        # absl::Mutex, so helgrind cannot check that contract; the values
        # checked (no update lost, none seen half done) do. Not on simdev's
        # stream workers, and not in memory simdev allocated.
        lambda e: (not _is_simdev(_innermost(_stack(e, "access")) or ("", ""))
                   and not _has(_stack(e, "access"), r"^worker_main$")
                   and _allocator_caller(_stack(e, "Address")) is not None
                   and not _is_simdev(_allocator_caller(_stack(e, "Address")))),
    "kernel-construction":
        # A read, inside an op's compute on TF's thread, of what simdev
        # allocated while TF constructed the kernel (sk_kernel_new's kernel
        # object, the op's attributes from sk_state_new): TF builds a
        # kernel on the thread that instantiates the function and publishes
        # it through its kernel cache (absl::Mutex) before any compute, and
        # the two are read-only afterwards. A write there (state shared by
        # concurrent computes) is not matched.
        lambda e: (e[1].startswith("Possible data race during read ")
                   and _has(_stack(e, "Address"), r"KernelBuilderFactory::Create")
                   and _is_simdev(_allocator_caller(_stack(e, "Address")) or ("", ""))
                   and _has(_stack(e, "access"), r"PluggableDevice::Compute")
                   and not _has(_stack(e, "access"), r"^worker_main$")),
    "event-handed-to-poller":
        # get_event_status reading the SP_Event create_event allocated:
        # TF creates the event on the op's thread and hands it to its
        # EventMgr polling thread through EventMgr's absl::Mutex-protected
        # queue (simdev's own event state is read under the event's pthread
        # mutex, which helgrind sees).
        lambda e: ((_simdev_fns(_stack(e, "access")) or [""])[0] == "get_event_status"
                   and (_simdev_fns(_stack(e, "Address")) or [""])[0] == "create_event"),
    "device-memory-across-streams":
        # Device memory (simdev's arena: no heap block helgrind knows) read
        # or written by two of simdev's stream workers, one of them a copy
        # (run_memcpy) on TF's host-to-device or device-to-host stream: TF
        # orders its copy streams and the compute stream by polling
        # simdev's events on its EventMgr thread and then waking the op's
        # thread with absl (or by the tensor's atomic reference count, for
        # a variable's buffer updated in place after the last reader's copy
        # released it), and the arena hands device memory from one tensor
        # to the next through jemalloc, outside helgrind's heap.
        lambda e: (not _stack(e, "Address")
                   and _has(_stack(e, "access"), r"^worker_main$")
                   and _has(_stack(e, "This conflicts"), r"^worker_main$")
                   and (_has(_stack(e, "access"), r"^run_memcpy$")
                        or _has(_stack(e, "This conflicts"), r"^run_memcpy$"))),
}


def simdev_errors(errors):
    """The errors with a frame of simdev's plugin (libsimdev*.so) in a stack."""
    return [e for e in errors if any(_is_simdev(f) for _, st in e[2] for f in st)]


def classify(errors):
    """({pattern: count} of the errors with a simdev frame that
    ORDERED_BY_TF explains, [the others: attributable to simdev])."""
    known, ours = {k: 0 for k in ORDERED_BY_TF}, []
    for e in simdev_errors(errors):
        why = next((k for k, match in ORDERED_BY_TF.items()
                    if e[0] == "Race" and match(e)), None)
        if why is None:
            ours.append(e)
        else:
            known[why] += 1
    return known, ours


def describe(e, frames=14):
    kind, what, stacks = e
    lines = [f"{kind}: {what}"]
    for heading, st in stacks:
        lines.append("  " + heading)
        lines += ["    " + t for _, t in st[:frames]]
    return "\n".join(lines)


def test_variable_kernels_race_free_under_helgrind(plugin, tmp_path):
    script = tmp_path / "run.py"
    script.write_text(RUN)
    xml = tmp_path / "helgrind.xml"
    env = child_env(plugin)
    env.pop("PYTHONMALLOC", None)
    t0 = time.monotonic()
    p = subprocess.run(HELPER + ["--xml=yes", "--xml-file=" + str(xml), str(script)],
                       capture_output=True, text=True, errors="replace",
                       env=env, cwd=str(tmp_path), timeout=3600)
    wall = time.monotonic() - t0
    text = xml.read_text(errors="replace") if xml.exists() else ""
    run = TFRun(p.returncode, p.stdout, p.stderr, parse_checks(p.stdout))
    what = f"{run.describe()}\n(helgrind run: {wall:.0f} s)"
    assert re.search(r"^simdev\.valgrind: PYTHONMALLOC=malloc SIMDEV_BFC=0 "
                     r"valgrind --tool=helgrind ", p.stderr, re.M), what
    # The script did its work, on SIMDEV, with simdev's kernels.
    reg = run.data("registry")
    assert all(reg[op] for op in ("ReadVariableOp", "AssignVariableOp",
                                  "AssignAddVariableOp", "AssignSubVariableOp")), reg
    d = run.data("threads")
    assert d["errors"] == [] and d["torn"] == [] and d["wrong"] == [], d
    assert d["shared"] == d["shared_want"] and d["shared_whole"] and d["accum_ok"], d
    assert d["devices"] == ["/job:localhost/replica:0/task:0/device:SIMDEV:0"], d
    # helgrind ran to the end (its log closes) and found nothing of simdev's.
    assert text.rstrip().endswith("</valgrindoutput>"), what + "\n" + text[-3000:]
    errors = errors_of(text)
    known, ours = classify(errors)
    assert not ours, f"{len(ours)} helgrind error(s) attributable to simdev:\n\n" + \
        "\n\n".join(describe(e) for e in ours[:10])
    reported, suppressed = counts_of(text)
    # Exit status: the script's own (0) without errors; 99 with any (TF's
    # and CPython's, not judged here: printed with -s).
    assert p.returncode in (0, 99) and (p.returncode == 99) == bool(reported), what
    print(f"helgrind: {wall:.0f} s; {reported} errors from {len(errors)} contexts, "
          f"{suppressed} suppressed; with a simdev frame, ordered by TF: {known}; kernels: "
          f"{sorted(op for op, ok in reg.items() if ok)}")
