"""examples/jax_custom_call.py runs, in a fresh process without any SIMDEV_*
setting, and its output says what the example promises: several simdev
calls in one jitted program, vmap, grad through the custom_vjp (with more
simdev calls in the backward program), a bad call failing with the
handler's message and the next call working, the legacy target next to the
typed one, every result within the bound of its jnp reference, no lost
completion and no TensorFlow."""
import os
import re
import subprocess
import sys

import pytest

from jaxutil import child_env, jax_module, sj  # noqa: F401 (fixtures)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "jax_custom_call.py")


@pytest.fixture(scope="module")
def out():
    # Not jaxutil.run_py: the example is a file, run as a user runs it.
    p = subprocess.run([sys.executable, EXAMPLE], env=child_env(), capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    return p.stdout


def test_every_comparison_ok(out):
    rows = re.findall(r"^(.*?)\s+shape (\(.*?\))\s+rel\. error (\S+)\s+(OK|MISMATCH)$",
                      out, re.M)
    # forward, vmap, 5 gradients, the call after the error, legacy, typed
    assert len(rows) == 10, out
    for what, _, err, verdict in rows:
        assert verdict == "OK" and float(err) <= 1e-4, (what, err)
    assert out.rstrip().endswith("all results match jnp")


def test_jit_holds_several_simdev_calls(out):
    m = re.search(r"^1\. jit: (\d+) simdev custom calls in one program: (.*)$", out, re.M)
    assert m, out
    assert int(m.group(1)) == 5
    assert m.group(2).split(", ") == ["simdev_conv2d", "simdev_matmul",
                                      "simdev_matmul_bias_act", "simdev_relu"]


def test_grad_backward_runs_on_simdev(out):
    m = re.search(r"^3\. grad: (\d+) simdev custom calls", out, re.M)
    # The forward's 5, plus the backprops of two convolutions, two matmuls
    # and relu: more than twice the forward's.
    assert m and int(m.group(1)) > 10, out
    for name in ("b1", "d1", "d2", "w1", "w2"):
        assert re.search(rf"d loss / d {name}\s+shape", out), name


def test_vmap_shape(out):
    assert re.search(r"^2\. vmap\(matmul\) over 6 matrices\s+shape \(6, 20, 10\)", out, re.M)


def test_bad_call_message_then_next_call(out):
    assert ("4. error: JaxRuntimeError: INVALID_ARGUMENT: simdev_matmul: operand a "
            "must be float32 or float64, got s32") in out
    assert re.search(r"^   the next call\s+shape \(20, 10\).*OK$", out, re.M)


def test_legacy_beside_typed(out):
    assert re.search(r"^5\. legacy simdev_legacy_matmul\s+shape \(20, 10\).*OK$", out, re.M)
    assert re.search(r"^   typed  simdev_matmul\s+shape \(20, 10\).*OK$", out, re.M)
    assert "legacy == typed bit for bit: True" in out


def test_counts_and_no_tensorflow(out):
    m = re.search(r"^simdev stream: (\d+) calls queued, (\d+) completed, (\d+) failed$",
                  out, re.M)
    assert m, out
    queued, completed, failed = map(int, m.groups())
    # The int32 call fails validation on XLA's thread: never queued.
    assert queued == completed > 0 and failed == 0
    assert "TensorFlow loaded: False" in out
