"""Asynchronous completion: many simdev calls in flight at once, each
completed by the stream through its XLA_FFI_Future. Every result is
checked, and the library's counters show no lost completion: once all
results are ready, every queued work item has completed (and none failed).

Inputs are small integers, so float32 products and sums are exact and the
results are compared for equality with NumPy's."""
import threading

import jax
import numpy as np

from jaxutil import jax_module, sj  # noqa: F401 (fixtures)

N_CALLS = 1000


def test_thousand_async_calls(sj):
    rng = np.random.default_rng(30)
    b = rng.integers(-3, 4, size=(8, 6)).astype(np.float32)
    a_all = rng.integers(-3, 4, size=(N_CALLS, 5, 8)).astype(np.float32)
    f = jax.jit(sj.matmul)
    jax.block_until_ready(f(a_all[0], b))   # compile outside the loop
    enq0, done0, fail0 = sj.counts()
    # dispatch all before waiting for any: XLA:CPU runs them asynchronously
    outs = [f(a_all[i], b) for i in range(N_CALLS)]
    jax.block_until_ready(outs)
    enq, done, fail = sj.counts()
    assert enq - enq0 == N_CALLS
    assert done - done0 == N_CALLS, "lost completions: %d" % (N_CALLS - (done - done0))
    assert fail == fail0
    # nothing in flight: every item ever queued in this process completed
    assert enq == done + fail
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(out), a_all[i] @ b, err_msg="call %d" % i)


def test_dependent_chain(sj):
    """Each call consumes the previous one's result: XLA must wait for each
    future before the next call reads its buffer."""
    x = np.eye(4, dtype=np.float32)
    p = np.roll(np.eye(4, dtype=np.float32), 1, axis=0)   # a cyclic shift
    f = jax.jit(lambda x, p: sj.relu(sj.matmul(x, p)))
    enq0, done0, _ = sj.counts()
    y = x
    for _ in range(301):
        y = f(y, p)
    y = np.asarray(y)
    # 301 = 1 (mod 4) shifts
    np.testing.assert_array_equal(y, x @ p)
    enq, done, _ = sj.counts()
    assert enq - enq0 == 602 and done - done0 == 602


def test_calls_from_threads(sj):
    """Handlers may be called from several threads at once; every call's
    result is its own."""
    rng = np.random.default_rng(31)
    xs = rng.integers(-4, 5, size=(4, 100, 3, 7)).astype(np.float32)
    f = jax.jit(sj.relu)
    jax.block_until_ready(f(xs[0, 0]))
    results = [None] * 4
    errors = []

    def work(t):
        try:
            results[t] = [f(xs[t, i]) for i in range(100)]
            jax.block_until_ready(results[t])
        except BaseException as e:   # reported by the main thread
            errors.append(e)

    enq0, done0, _ = sj.counts()
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for t in range(4):
        for i in range(100):
            np.testing.assert_array_equal(np.asarray(results[t][i]), np.maximum(xs[t, i], 0))
    enq, done, _ = sj.counts()
    assert enq - enq0 == 400 and done - done0 == 400
