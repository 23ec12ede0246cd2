"""DLPack exchange benchmark: simdev's zero-copy export and import next to
the copies they replace, in one process, cases alternating so machine drift
hits every side alike.

    .venv/bin/python bench/bench_dlpack.py [--quick] [--json PATH]

For float32 tensors of 1 KiB, 64 KiB, 1 MiB, 16 MiB and 256 MiB, the wall
time of one call (its result dropped inside the timing) of:

  export   np.from_dlpack(sdl.wrap(t))          zero-copy, SIMDEV -> NumPy
  numpy    t.numpy()                            copy, SIMDEV -> NumPy
  import   sdl.from_dlpack(arr, copy=False)     zero-copy, NumPy -> SIMDEV
  import   sdl.from_dlpack(arr, copy=True)      copy, NumPy -> SIMDEV
  const    tf.constant(arr) on SIMDEV           TF's own host -> device copy

`arr` is a 64-byte-aligned NumPy array (TF's alignment; NumPy's allocator
gives 16), so the zero-copy import applies. TF caches the host copy of a
device tensor on its handle after the first .numpy(), so the numpy case
reads a fresh handle over t's buffer each call (tf.identity, made outside
the timing); otherwise it would time NumPy's .copy() of the cached mirror.
Once per size, outside the timing, the zero-copy paths are checked to share
memory (equal data pointers, a write seen on the other side) and the copy
paths to copy; the run stops with a message if not.
Reports medians with [min, max] in microseconds and copy/zero-copy ratios;
nothing here is a test. --quick: 1 KiB and 1 MiB, few repetitions.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

import simdev.dlpack as sdl

SIM = "/device:SIMDEV:0"
KiB, MiB = 1 << 10, 1 << 20
SIZES = (1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB)
QUICK_SIZES = (1 * KiB, 1 * MiB)
ALIGN = 64  # TF_TensorDefaultAlignment(): below it, imports must copy
W = 34  # width of a "median [min, max]" column

# Case names as they appear in the JSON output, in timing order.
EXPORT, NUMPY = "export_zero_copy", "numpy_copy"
IMPORT, IMPORT_COPY, CONSTANT = ("import_zero_copy", "import_copy",
                                 "tf_constant_copy")
CASES = (EXPORT, NUMPY, IMPORT, IMPORT_COPY, CONSTANT)


class NotZeroCopy(RuntimeError):
    """A path that should share memory copied (or one that should copy
    shared): the numbers would not measure what they claim."""


# ---- timing -------------------------------------------------------------

def timeit(fn, reps, setup=None):
    """Wall times of `reps` calls of fn (after one warm-up). With `setup`,
    each call is fn(setup()), setup untimed. The garbage collector is off
    meanwhile so a collection does not land in one sample."""
    def once():
        arg = setup() if setup is not None else None
        t0 = time.perf_counter()
        if setup is not None:
            fn(arg)
        else:
            fn()
        dt = time.perf_counter() - t0
        del arg  # a fresh handle (and TF's host mirror) dies untimed
        return dt
    once()
    out = []
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(reps):
            out.append(once())
    finally:
        if was_enabled:
            gc.enable()
    return out


def alternate(cases, reps, rounds=5):
    """cases: {name: (fn, setup)}, reps: {name: count}. Runs the cases
    round-robin `rounds` times, reps/rounds calls each time; returns
    {name: [seconds...]}."""
    res = {k: [] for k in cases}
    for _ in range(rounds):
        for k, (fn, setup) in cases.items():
            res[k] += timeit(fn, max(1, reps[k] // rounds), setup)
    return res


def calibrate(fn, setup, budget, lo, hi):
    """Repetitions so that one case spends about `budget` seconds, clamped
    to [lo, hi]; also returns the estimate of one call (the best of 3)."""
    est = min(timeit(fn, 3, setup))
    return max(lo, min(hi, int(budget / max(est, 1e-9)))), est


# ---- buffers and checks -------------------------------------------------

def aligned_array(nbytes, dtype=np.float32, align=ALIGN):
    """A writable, compact NumPy array whose data is `align`-byte aligned:
    a slice of an over-allocated uint8 buffer, viewed as dtype."""
    raw = np.empty(nbytes + align, np.uint8)
    off = (-raw.ctypes.data) % align
    a = raw[off:off + nbytes].view(dtype)
    assert a.ctypes.data % align == 0 and a.flags.c_contiguous
    return a


def ptr_of(t):
    """Data pointer of SIMDEV tensor t, read through the zero-copy export."""
    return np.from_dlpack(sdl.wrap(t)).ctypes.data


def fresh(t):
    """A new eager handle over t's buffer (no copy on SIMDEV): no host copy
    cached on it yet, so .numpy() really copies from the device."""
    with tf.device(SIM):
        return tf.identity(t)


def write_seen(array, t, probe):
    """Writes probe into array[0] and tells whether SIMDEV tensor t reads
    it (array restored after)."""
    old = array[0]
    array[0] = probe
    seen = fresh(t).numpy()[0]
    array[0] = old
    return seen == probe


def check(size, t, arr):
    """Once per size, untimed: zero-copy paths share, copy paths copy."""
    def fail(what):
        raise NotZeroCopy(f"{fmt_size(size)}: {what}")
    probe = np.float32(-7.25)

    # export: two exports see one buffer, and a write through it reaches t.
    a = np.from_dlpack(sdl.wrap(t))
    b = np.from_dlpack(sdl.wrap(t))
    if a.ctypes.data != b.ctypes.data:
        fail(f"export is not zero-copy: two exports of one tensor give "
             f"{a.ctypes.data:#x} and {b.ctypes.data:#x}")
    if not write_seen(a, t, probe):
        fail("export is not zero-copy: a write through the exported array "
             "is not seen in the SIMDEV tensor")
    if fresh(t).numpy().ctypes.data == a.ctypes.data:
        fail("t.numpy() shares the device buffer; it is not a copy")

    # import: the SIMDEV tensor's buffer is arr's, and writes cross over.
    s = sdl.from_dlpack(arr, copy=False)
    p = ptr_of(s)
    if p != arr.ctypes.data:
        fail(f"import copy=False is not zero-copy: SIMDEV buffer {p:#x}, "
             f"NumPy array {arr.ctypes.data:#x} (t's buffer: "
             f"{ptr_of(t):#x}, again: {ptr_of(s):#x})")
    if not write_seen(arr, s, probe):
        fail("import copy=False is not zero-copy: a write to the NumPy "
             "array is not seen in the SIMDEV tensor")
    del s
    for name, fn in (("sdl.from_dlpack(arr, copy=True)",
                      lambda: sdl.from_dlpack(arr, copy=True)),
                     ("tf.constant(arr) on SIMDEV", lambda: tf.constant(arr))):
        with tf.device(SIM):
            c = fn()
        if SIM[1:] not in c.device or ptr_of(c) == arr.ctypes.data:
            fail(f"{name} did not copy onto SIMDEV (device {c.device})")
        if not np.array_equal(np.from_dlpack(sdl.wrap(c)), arr):
            fail(f"{name} copied wrong values")


# ---- the benchmark ------------------------------------------------------

def cases_for(t, arr):
    """{name: (fn, setup)} for one size; every fn drops its result."""
    def export():
        np.from_dlpack(sdl.wrap(t))

    def numpy_copy(h):
        h.numpy()

    def import_zero():
        sdl.from_dlpack(arr, copy=False)

    def import_copy():
        sdl.from_dlpack(arr, copy=True)

    def constant():
        with tf.device(SIM):
            tf.constant(arr)
    return {EXPORT: (export, None), NUMPY: (numpy_copy, lambda: fresh(t)),
            IMPORT: (import_zero, None), IMPORT_COPY: (import_copy, None),
            CONSTANT: (constant, None)}


def run(quick: bool = False) -> list:
    """Times every case at every size. Returns the raw samples as a list of
    {"case", "size_bytes", "seconds": [...]} (see CASES). Raises NotZeroCopy
    if a zero-copy path copies."""
    tf.config.set_soft_device_placement(False)
    sizes = QUICK_SIZES if quick else SIZES
    # Per case and size: about `budget` seconds, [lo, hi] repetitions.
    rounds, budget, lo, hi = (3, 0.4, 6, 300) if quick else (5, 2.5, 10, 500)
    results = []
    for size in sizes:
        t0 = time.perf_counter()
        n = size // 4
        with tf.device(SIM):
            t = tf.fill([n], 1.0)
        arr = aligned_array(size)
        arr[:] = 2.0
        check(size, t, arr)
        cases = cases_for(t, arr)
        reps = {}
        for name, (fn, setup) in cases.items():
            reps[name], est = calibrate(fn, setup, budget, lo, hi)
            print(f"bench_dlpack: {fmt_size(size):>7} {name:<17} "
                  f"{reps[name]:4d} reps, ~{est * 1e6:10.1f} us/call",
                  file=sys.stderr, flush=True)
        res = alternate(cases, reps, rounds)
        for name in CASES:
            results.append({"case": name, "size_bytes": size,
                            "seconds": res[name]})
        print(f"bench_dlpack: {fmt_size(size):>7} done in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        del t, arr, cases
        gc.collect()
    return results


# ---- output -------------------------------------------------------------

def fmt_size(nbytes):
    return f"{nbytes // MiB} MiB" if nbytes >= MiB else f"{nbytes // KiB} KiB"


def med(xs):
    return statistics.median(xs)


def fmt_us(xs):
    """median [min, max] in microseconds, fixed width."""
    m, a, b = (v * 1e6 for v in (med(xs), min(xs), max(xs)))
    return f"{m:9.1f} [{a:.1f}, {b:.1f}]".ljust(W)


def print_table(results):
    """Three tables, one row per size: export and import, median [min, max]
    in microseconds per call with copy/zero-copy ratios of the medians; then
    the bandwidth of the copies (size / median)."""
    by = {(r["case"], r["size_bytes"]): r["seconds"] for r in results}
    sizes = sorted({r["size_bytes"] for r in results})

    def ratio(case, zero, s):
        return med(by[case, s]) / med(by[zero, s])

    print("SIMDEV -> NumPy, float32, microseconds per call: median [min, max]")
    print(f"  {'size':>7}  {'zero-copy np.from_dlpack(wrap(t))':<{W}}"
          f" {'copy t.numpy()':<{W}} {'copy/zero':>9}")
    for s in sizes:
        print(f"  {fmt_size(s):>7}  {fmt_us(by[EXPORT, s])} "
              f"{fmt_us(by[NUMPY, s])} {ratio(NUMPY, EXPORT, s):9.2f}")

    print("\nNumPy -> SIMDEV, float32, microseconds per call: median [min, max]")
    print(f"  {'size':>7}  {'zero-copy from_dlpack(copy=False)':<{W}}"
          f" {'copy from_dlpack(copy=True)':<{W}} {'copy tf.constant(arr)':<{W}}"
          f" {'copy=True/zero':>14} {'constant/zero':>13}")
    for s in sizes:
        print(f"  {fmt_size(s):>7}  {fmt_us(by[IMPORT, s])} "
              f"{fmt_us(by[IMPORT_COPY, s])} {fmt_us(by[CONSTANT, s])} "
              f"{ratio(IMPORT_COPY, IMPORT, s):14.2f} "
              f"{ratio(CONSTANT, IMPORT, s):13.2f}")

    print("\nCopies, GB/s (size / median time)")
    print(f"  {'size':>7} {'t.numpy()':>10} {'copy=True':>10} "
          f"{'tf.constant':>12}   samples per case")
    for s in sizes:
        g = [s / med(by[c, s]) / 1e9 for c in (NUMPY, IMPORT_COPY, CONSTANT)]
        n = [len(by[c, s]) for c in CASES]
        print(f"  {fmt_size(s):>7} {g[0]:10.3f} {g[1]:10.3f} {g[2]:12.3f}"
              f"   {min(n)}-{max(n)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 KiB and 1 MiB only, few repetitions")
    ap.add_argument("--json", metavar="PATH",
                    help="write every raw sample: a list of "
                         '{"case", "size_bytes", "seconds": [...]}')
    args = ap.parse_args()
    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs\n")
    t0 = time.perf_counter()
    try:
        results = run(args.quick)
    except NotZeroCopy as e:
        sys.exit(f"bench_dlpack: FAILED, not measuring what it claims: {e}")
    print_table(results)
    print(f"\n  ({time.perf_counter() - t0:.1f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)
        print(f"  raw samples written to {args.json}")


if __name__ == "__main__":
    main()
