"""python -m simdev.valgrind: its command line, its suppression file, and one
real memcheck run of a TensorFlow script.

The command-line tests are fast: they call the installed helper's parse()
and build(), or run it with --dry-run (no valgrind).

The real run (test_memcheck_reports_only_the_overrun) is ONE valgrind
process, minutes long (TensorFlow's import under memcheck), so it does two
things at once: a clean MatMul + Relu on SIMDEV, then a deliberate one-
element overrun of a device buffer by a test-only custom op
(tests/overrun/overrun_op.c, built by CMake into build/tests/overrun/,
loaded with tf.load_op_library). The run must report exactly one error, the
overrun, with the op's kernel in the stack and the block allocated by
simdev's allocator: the clean part and TensorFlow's own noise report none.
"""
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import PRELUDE, TFRun, child_env, parse_checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OVERRUN_LIB = os.path.join(ROOT, "build", "tests", "overrun",
                           "libsimdev_test_overrun.so")
REPO_SUPP = os.path.join(ROOT, "python", "simdev", "valgrind.supp")
HELPER = [sys.executable, "-m", "simdev.valgrind"]
N_OVERRUN = 1000  # floats: 4000 bytes asked, 4096 in jemalloc's size class


@pytest.fixture(scope="module")
def vg():
    """The installed simdev.valgrind (importing it does not import TF)."""
    import simdev.valgrind as v
    return v


def run_helper(args, env=None, timeout=60):
    e = dict(os.environ)
    for k in ("PYTHONMALLOC", "SIMDEV_BFC"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run(HELPER + args, capture_output=True, text=True,
                          errors="replace", env=e, timeout=timeout, cwd="/")


# ---- command line (no valgrind) --------------------------------------------

def test_parse_splits_helper_valgrind_and_script_arguments(vg):
    a = vg.parse(["--tool=helgrind", "--bfc", "--track-origins=yes", "s.py",
                  "--tool=x", "-v"])
    assert (a["tool"], a["bfc"], a["vg_opts"], a["script"], a["script_args"]) \
        == ("helgrind", True, ["--track-origins=yes"], "s.py", ["--tool=x", "-v"])
    # After "--", the next word is the script even if it starts with "-".
    a = vg.parse(["--leaks", "--", "-odd.py", "x"])
    assert (a["leaks"], a["script"], a["script_args"]) == (True, "-odd.py", ["x"])
    for bad, why in ((["--tool=cachegrind", "s.py"], "supports memcheck"),
                     (["--tool", "helgrind", "s.py"], "needs a value"),
                     (["--tool=helgrind", "--leaks", "s.py"], "memcheck option"),
                     (["--valgrind=", "s.py"], "needs a path"),
                     (["--dry-run"], "no script")):
        with pytest.raises(vg.UsageError, match=why):
            vg.parse(bad)


def test_build_sets_defaults_that_the_caller_can_override(vg):
    argv, env, added = vg.build(vg.parse(["s.py", "a b"]),
                                environ={"PATH": "/bin"}, python="/py")
    assert argv[0] == "valgrind" and argv[-3:] == ["/py", "s.py", "a b"], argv
    for opt in ("--tool=memcheck", "--error-exitcode=99", "--leak-check=no",
                "--num-callers=30", "--suppressions=" + vg.SUPPRESSIONS):
        assert opt in argv, (opt, argv)
    assert added == {"PYTHONMALLOC": "malloc", "SIMDEV_BFC": "0"}
    assert env == {"PATH": "/bin", **added}
    assert vg.command_line(argv, added).startswith(
        "PYTHONMALLOC=malloc SIMDEV_BFC=0 valgrind --tool=memcheck ")
    assert vg.command_line(argv, added).endswith(" /py s.py 'a b'")

    # Options given replace the defaults of the same name; the caller's
    # environment wins; --leaks turns on definite leaks as errors.
    argv, env, added = vg.build(
        vg.parse(["--error-exitcode=1", "--leaks", "--valgrind=/vg",
                  "--suppressions=mine.supp", "s.py"]),
        environ={"SIMDEV_BFC": "1", "PYTHONMALLOC": "debug"}, python="/py")
    assert argv[0] == "/vg"
    assert [o for o in argv if o.startswith("--error-exitcode")] == ["--error-exitcode=1"]
    for opt in ("--leak-check=full", "--show-leak-kinds=definite",
                "--errors-for-leak-kinds=definite", "--suppressions=mine.supp",
                "--suppressions=" + vg.SUPPRESSIONS):
        assert opt in argv, (opt, argv)
    assert added == {} and env["SIMDEV_BFC"] == "1" and env["PYTHONMALLOC"] == "debug"

    # helgrind: no leak options; --bfc leaves SIMDEV_BFC alone.
    argv, env, added = vg.build(vg.parse(["--tool=helgrind", "--bfc", "s.py"]),
                                environ={}, python="/py")
    assert "--tool=helgrind" in argv and not [o for o in argv if "leak" in o], argv
    assert added == {"PYTHONMALLOC": "malloc"}


def test_dry_run_prints_the_command_and_usage_errors_exit_2(vg):
    p = run_helper(["--dry-run", "--tool=helgrind", "s.py", "arg"])
    assert p.returncode == 0, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("simdev.valgrind: PYTHONMALLOC=malloc SIMDEV_BFC=0 "
                           "valgrind --tool=helgrind "), line
    assert ("--suppressions=" + vg.SUPPRESSIONS) in line, line
    assert line.endswith(f"{sys.executable} s.py arg"), line
    p = run_helper(["--tool=massif", "s.py"])
    assert p.returncode == 2 and "--tool=massif" in p.stderr, p.stderr
    assert "usage: python -m simdev.valgrind" in p.stderr, p.stderr
    p = run_helper(["--help"])
    assert p.returncode == 0 and "--leaks" in p.stdout and "Exit status" in p.stdout


# ---- the suppression file ---------------------------------------------------

def suppressions(text):
    """[(name, kind, frames, comment)] of a valgrind suppression file; the
    comment is the block of '#' lines right before the entry (or before the
    group of entries it heads)."""
    out, comment, last_comment = [], [], ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("#"):
            comment.append(s)
        elif s == "{":
            j = lines.index("}", i)
            body = [l.strip() for l in lines[i + 1:j]]
            if comment:
                last_comment = "\n".join(comment)
            out.append((body[0], body[1], body[2:], last_comment))
            comment = []
            i = j
        elif s == "" and comment and i + 1 < len(lines) and \
                lines[i + 1].strip() != "{" and not lines[i + 1].startswith("#"):
            comment = []
        i += 1
    return out


def test_suppressions_are_narrowed_commented_and_installed(vg):
    with open(REPO_SUPP) as f:
        text = f.read()
    with open(vg.SUPPRESSIONS) as f:
        assert f.read() == text, f"installed {vg.SUPPRESSIONS} differs from " \
                                 f"{REPO_SUPP}: run make install"
    entries = suppressions(text)
    assert len(entries) >= 5, entries
    names = [e[0] for e in entries]
    assert len(set(names)) == len(names), "duplicate suppression names"
    for name, kind, frames, comment in entries:
        assert re.fullmatch(r"(Memcheck|Helgrind):\w+", kind), (name, kind)
        # Narrowed: some frame names a library or a function; nothing of
        # simdev's own is suppressed.
        named = [f for f in frames if f.startswith(("obj:", "fun:"))]
        assert named, f"{name}: no library or function frame"
        assert not [f for f in named if re.search(r"simdev|fun:sim_|fun:sk_|fun:se_", f)], \
            f"{name} suppresses simdev's own code: {frames}"
        assert not [f for f in named if f in ("obj:*", "fun:*")], (name, frames)
        assert len(comment) > 40, f"{name}: no comment saying why"


# ---- one real run ------------------------------------------------------------

RUN = PRELUDE + textwrap.dedent(r'''
import numpy as np
import tensorflow as tf
tf.config.set_soft_device_placement(False)

@check("matmul_relu")
def _():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    with tf.device("/device:SIMDEV:0"):
        y = tf.nn.relu(tf.matmul(tf.constant(a), tf.constant(a.T)))
    return {"device": y.device,
            "equal": bool((y.numpy() == np.maximum(a @ a.T, 0)).all())}

@check("overrun")
def _():
    lib = tf.load_op_library(%(lib)r)
    with tf.device("/device:SIMDEV:0"):
        y = lib.simdev_test_overrun(tf.constant(np.zeros(%(n)d, np.float32)))
    v = y.numpy()
    return {"device": y.device, "n": int(v.size), "ones": bool((v == 1).all())}
''') % {"lib": OVERRUN_LIB, "n": N_OVERRUN}


ERROR_START = re.compile(r"(Invalid (read|write|free)|Conditional jump|Use of "
                         r"uninitialised|Syscall param|Mismatched free|"
                         r"Source and destination overlap|Argument|"
                         r"Possible data race|Thread #\d+: lock order)")


def error_blocks(log):
    """The error reports of a valgrind log: lists of lines (without the
    ==pid== prefix), one per error, from its header line to the next blank
    line (valgrind's own warnings, such as "set address range perms", may
    come right before a header without a blank line)."""
    blocks, cur = [], None
    for line in log.splitlines():
        m = re.match(r"==\d+== ?(.*)$", line)
        if not m:
            continue
        s = m.group(1)
        if ERROR_START.match(s):
            cur = [s]
            blocks.append(cur)
        elif not s.strip():
            cur = None
        elif cur is not None:
            cur.append(s)
    return blocks


def assert_only_the_overrun(text):
    """The memcheck log holds exactly one error: the overrun, in the op's
    kernel, of a block simdev allocated for that op's output."""
    m = re.search(r"ERROR SUMMARY: (\d+) errors from (\d+) contexts", text)
    assert m and (m.group(1), m.group(2)) == ("1", "1"), text[-6000:]
    blocks = error_blocks(text)
    assert len(blocks) == 1, blocks
    err = "\n".join(blocks[0])
    assert blocks[0][0] == "Invalid write of size 4", err
    # The bad store, in the op's kernel, and the block: simdev's allocation
    # made for that op's output.
    write, _, block = err.partition("Address 0x")
    assert re.search(r"at 0x[0-9A-F]+: SimdevTestOverrun_Compute "
                     r"\(overrun_op\.c:\d+\)", write), err
    assert re.match(r"[0-9a-f]+ is 0 bytes after a block of size 4,000 "
                    r"alloc'd", block), err
    alloc = block.split("\n")
    assert re.search(r"at 0x[0-9A-F]+: sim_mem_alloc \(arena\.c:\d+\)", alloc[1]), err
    assert [l for l in alloc if "TF_AllocateOutput" in l], err
    assert [l for l in alloc if "SimdevTestOverrun_Compute" in l], err


def test_memcheck_reports_only_the_overrun_with_the_op(plugin, tmp_path):
    if not os.path.isfile(OVERRUN_LIB):
        pytest.fail(f"{OVERRUN_LIB} not built (make build)", pytrace=False)
    script = tmp_path / "run.py"
    script.write_text(RUN)
    log = tmp_path / "memcheck.log"
    env = child_env(plugin)
    env.pop("PYTHONMALLOC", None)
    p = subprocess.run(HELPER + ["--log-file=" + str(log), str(script)],
                       capture_output=True, text=True, errors="replace",
                       env=env, cwd=str(tmp_path), timeout=1800)
    text = log.read_text(errors="replace") if log.exists() else ""
    what = (f"returncode {p.returncode}\n--- stderr ---\n{p.stderr[-3000:]}\n"
            f"--- valgrind log (tail) ---\n{text[-6000:]}")
    run = TFRun(p.returncode, p.stdout, p.stderr, parse_checks(p.stdout))
    # The helper printed its command; the script ran and both parts did
    # their work on SIMDEV.
    assert re.search(r"^simdev\.valgrind: PYTHONMALLOC=malloc SIMDEV_BFC=0 "
                     r"valgrind --tool=memcheck ", p.stderr, re.M), what
    mm, ov = run.data("matmul_relu"), run.data("overrun")
    assert mm["device"].endswith("device:SIMDEV:0") and mm["equal"], mm
    assert ov == {"device": "/job:localhost/replica:0/task:0/device:SIMDEV:0",
                  "n": N_OVERRUN, "ones": True}, ov
    # Exactly one error: the overrun (errors make valgrind exit 99).
    assert p.returncode == 99, what
    assert_only_the_overrun(text)
