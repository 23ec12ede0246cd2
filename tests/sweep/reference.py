"""The TF CPU reference of the registration sweep, in a child process.

TF's CPU kernels can kill their process: with oneDNN on, some of them
CHECK-fail on bad input (SIGABRT) where TF's own (Eigen) kernels raise.
So the sweep (sweep.py) never runs a CPU reference in its own process:
it sends each case to a long-lived child running this file, which
rebuilds the case from (op, dtype combination, good or bad, case name,
quick) -- specs are deterministic: their values come from
specs_core.rng_for, keyed by shape and name -- runs it on /device:CPU:0
and sends back the outputs (NumPy) or the error (class name, message). If
the child dies, that one case is reported as a crash of TF CPU (its
signal and the last line TF wrote to stderr, e.g. the failed CHECK), and
a new child is started at once for the cases after it.

The child's environment is the sweep's with TF_ENABLE_ONEDNN_OPTS forced:
0 for the reference SIMDEV is judged against (TF's Eigen kernels on any
machine: the reference does not depend on whether the CPU has AVX-512),
1 for `sweep.py --cpu-onednn`, which compares oneDNN's kernels with
Eigen's. The plugin is not needed there: TF_PLUGGABLE_DEVICE_LIBRARY_PATH
and the SIMDEV_* variables are dropped (an installed plugin is still loaded
by TF's import, harmlessly). An op TF does not define without the plugin
(_SimdevFusedElementwise) comes back as "not registered", a placement
error, as TF CPU's kernel lookup would give.

Protocol, over two pipes: frames of an 8-byte length and a pickle. The
child sends ("ready", info) once TF is imported, then one reply per
request: ("runs", [run]) where a run is ("ok", [(array, device)]) or
("err", class name, message); or ("build", class name, message) when the
case could not be rebuilt. A request None ends the child.

SIMDEV_SWEEP_TEST_ABORT (tests only): a case, as the sweep names it
("AvgPoolGrad T=float32 [AvgPoolGrad VALID]"), on which the Eigen
reference child (the one SIMDEV is judged against; not --cpu-onednn's)
calls os.abort() instead of running it: a crash on demand that no TF
release can fix (tests/tf/test_sweep_reference.py).
"""
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ABORT_ENV = "SIMDEV_SWEEP_TEST_ABORT"
# A safety net for a hung kernel, not a measurement: far above any case
# (the whole full sweep took 82 s on machine A of docs/tf-cpu-divergences.md),
# and above TF's import, which the first case waits for. A reference still
# running after this is reported as hung and killed.
TIMEOUT_S = 600.0
# How long a child that closed its pipe (dead or exiting) may take to end
# before it is killed: a hang guard, TF's exit takes well under a second.
REAP_S = 60.0
_LEN = struct.Struct("<Q")


def _send(fd, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = _LEN.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd, n, deadline=None):
    """n bytes from fd; None at end of file; raises TimeoutError."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv(fd, deadline=None):
    head = _read_exact(fd, _LEN.size, deadline)
    if head is None:
        return None
    body = _read_exact(fd, _LEN.unpack(head)[0], deadline)
    return None if body is None else pickle.loads(body)


class CpuError(Exception):
    """An error TF CPU raised in the reference process: `name` is its class
    name (InvalidArgumentError ...), str() its message."""

    def __init__(self, name, msg):
        super().__init__(msg)
        self.name = name


class Crash:
    """A reference process that died (or hung) on one case."""

    def __init__(self, how, last):
        self.how = how    # "SIGABRT", "exit status 3", "hung (killed after 600 s)"
        self.last = last  # the last line it wrote to stderr ("Check failed: ...")

    def __str__(self):
        return f"the TF CPU reference process died: {self.how}" + \
            (f"; its last words: {self.last}" if self.last else "")


class NotRebuilt(str):
    """The child could not rebuild a case the sweep built (a spec that is
    not deterministic, or a case name used twice): the message."""


def _last_words(f, signalled):
    """The line of the child's stderr that says why it died: the last
    fatal-log line (F0000 ... Check failed ...); for an exit without a
    signal (a Python exception) the last line; else "" (an abort that said
    nothing: the last line would be an unrelated log line)."""
    f.seek(0)
    lines = [l.strip() for l in f.read().decode("utf-8", "replace").splitlines()
             if l.strip()]
    fatal = [l for l in lines if l.startswith("F0") or "Check failed" in l]
    return (fatal or ([] if signalled else lines) or [""])[-1][:300]


class Reference:
    """One reference child (started by the sweep at its start, again right
    after a crash).
    submit() sends a case; result() waits for its reply: a list of runs,
    each (outputs, None) or (None, CpuError) like sweep.try_run's, or a
    Crash, or NotRebuilt. One case at a time: the sweep runs SIMDEV between
    the two calls, while the child runs TF CPU."""

    def __init__(self, onednn):
        self.onednn = onednn
        self.proc = None
        self.info = None      # what the child says about its TF (ready)
        self.pending = None   # the request submitted and not yet answered
        self.starts = 0

    def _env(self):
        env = {k: v for k, v in os.environ.items()
               if not (k.startswith("SIMDEV_") or k == "TF_PLUGGABLE_DEVICE_LIBRARY_PATH")}
        if ABORT_ENV in os.environ and not self.onednn:
            env[ABORT_ENV] = os.environ[ABORT_ENV]
        env["TF_ENABLE_ONEDNN_OPTS"] = "1" if self.onednn else "0"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self):
        """Starts the child (it imports TF while the caller goes on)."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), str(req_r), str(rep_w)],
            env=self._env(), pass_fds=(req_r, rep_w), stdin=subprocess.DEVNULL,
            stdout=self.stderr, stderr=self.stderr, cwd=HERE)
        os.close(req_r)
        os.close(rep_w)
        self.req, self.rep = req_w, rep_r
        self.ready = False
        self.used = False  # a request sent to this child
        self.starts += 1

    def _stop(self, restart):
        """Forgets a child that has exited; with `restart`, starts the next
        one now, so that it imports TF while the sweep runs SIMDEV."""
        for fd in (self.req, self.rep):
            os.close(fd)
        self.stderr.close()
        self.proc = None
        if restart:
            self.start()

    def submit(self, request):
        if self.pending is not None:
            raise RuntimeError("a reference case is still outstanding")
        if self.proc is None:
            self.start()
        try:
            _send(self.req, request)
        except BrokenPipeError:
            pass  # died already: result() reports it
        self.pending = request
        self.used = True

    def result(self):
        assert self.pending is not None
        self.pending = None
        deadline = time.monotonic() + TIMEOUT_S
        try:
            if not self.ready:
                msg = _recv(self.rep, deadline)
                if msg is None or msg[0] != "ready":
                    how = self._death()
                    raise SystemExit(
                        f"the TF CPU reference process (TF_ENABLE_ONEDNN_OPTS="
                        f"{int(self.onednn)}) died before TF was imported: {how}: "
                        f"{_last_words(self.stderr, self.proc.returncode < 0)}")
                self.info, self.ready = msg[1], True
            reply = _recv(self.rep, deadline)
        except TimeoutError:
            self.proc.kill()  # our own child, by its handle
            self.proc.wait()
            crash = Crash(f"hung (killed after {TIMEOUT_S:.0f} s)",
                          _last_words(self.stderr, True))
            self._stop(restart=True)
            return crash
        if reply is None:
            how = self._death()
            crash = Crash(how, _last_words(self.stderr, self.proc.returncode < 0))
            self._stop(restart=True)
            return crash
        if reply[0] == "build":
            return NotRebuilt(f"{reply[1]}: {reply[2]}")
        return [(r[1], None) if r[0] == "ok" else (None, CpuError(r[1], r[2]))
                for r in reply[1]]

    def _reap(self):
        """Waits for our child to end; one stuck in TF's exit (its pipe
        closed, its process not gone) is killed after REAP_S, so the sweep
        never hangs on it. Returns its exit status."""
        try:
            return self.proc.wait(timeout=REAP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child, by its handle
            return self.proc.wait()

    def _death(self):
        rc = self._reap()
        if rc < 0:
            try:
                return signal.Signals(-rc).name
            except ValueError:
                return f"signal {-rc}"
        return f"exit status {rc}"

    def close(self):
        if self.proc is None:
            return
        if self.pending is not None:
            self.result()
        if not self.used:  # restarted after the last case's crash: not needed
            self.proc.kill()  # our own child, by its handle
        else:
            try:
                _send(self.req, None)
            except BrokenPipeError:
                pass
        self._reap()
        self._stop(restart=False)


def _serve(fd_in, fd_out):
    """The child: answers requests until None (or end of file)."""
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry
    from tensorflow.python.util import _pywrap_util_port
    import sweep
    from specs import SPECS
    tf.config.set_soft_device_placement(False)
    _send(fd_out, ("ready", {"onednn": bool(_pywrap_util_port.IsMklEnabled()),
                             "tf": tf.__version__, "pid": os.getpid()}))
    abort_at = os.environ.get(ABORT_ENV)
    built = {}  # (op, bad, quick) -> the spec's cases: built once, as the sweep does
    while True:
        req = _recv(fd_in)
        if req is None:
            return
        op, combo, bad, name, quick, runs = req
        spec = SPECS[op]
        if (op, bad, quick) not in built:
            built[op, bad, quick] = spec.bad_cases(quick) if bad else spec.cases(quick)
        cases = [c for c in built[op, bad, quick] if c.name == name]
        if len(cases) != 1:
            _send(fd_out, ("build", "LookupError",
                           f"{len(cases)} cases named {name!r} in the spec"))
            continue
        case = cases[0]
        if abort_at == sweep.case_what(op, combo, case, bad):
            os.abort()
        opdef = op_def_registry.get(op)
        if opdef is None:  # an op of the plugin's: TF CPU has no kernel
            msg = f"Op type not registered '{op}' in the TF CPU reference process"
            _send(fd_out, ("runs", [("err", "NotFoundError", msg)] * runs))
            continue
        try:
            call = sweep.Call(op, opdef, combo, case)
        except Exception as e:
            _send(fd_out, ("build", type(e).__name__, str(e)))
            continue
        fn = spec.cpu_op and (lambda **kw: spec.cpu_op(call.fn, kw))
        out = []
        for _ in range(runs):
            r, e = sweep.try_run(call, sweep.CPU, fn)
            out.append(("ok", r) if e is None else ("err", type(e).__name__, str(e)))
        _send(fd_out, ("runs", out))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    _serve(int(sys.argv[1]), int(sys.argv[2]))
