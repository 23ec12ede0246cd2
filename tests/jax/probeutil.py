"""Test-only C probes of tests/jax, built with cc (ffi_probe.c: typed-FFI
handlers answering XLA's metadata request wrongly; legacy_probe.c: targets
in the oldest legacy conventions). Each test module builds the probes it
uses once (a module-scoped fixture calling build_probe), in pytest's
temporary directory: nothing is written into the source tree."""
import os
import shutil
import subprocess

import jax
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def build_probe(tmp_path_factory, source, ffi_header=False):
    """Builds tests/jax/<source> into a shared library and returns its path.
    ffi_header: compile against jaxlib's XLA FFI header
    (jax.ffi.include_dir()). Fails the test (not skips it) without cc: the
    behaviour these probes pin would go unchecked."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail(f"cc not found: tests/jax/{source} is built with it")
    stem = os.path.splitext(source)[0]
    lib = tmp_path_factory.mktemp(stem) / f"lib{stem}.so"
    cmd = [cc, "-std=c11", "-shared", "-fPIC", "-Wall", "-Werror"]
    if ffi_header:
        cmd += ["-I", jax.ffi.include_dir()]
    p = subprocess.run(cmd + ["-o", str(lib), os.path.join(HERE, source)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return str(lib)
