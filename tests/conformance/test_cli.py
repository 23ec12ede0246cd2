"""The conformance harness as its users run it: command line, installed
command, JSON, crashes, the by-hand build of docs/conformance.md.

No TensorFlow is imported here; the harness loads TF's C library itself.
Plugin behaviour per anti-pattern is test_mutants.py's subject.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harnessrun import BUILD, HARNESS, PLUGINS, ROOT

PLUGIN = BUILD / "libsimdev.so"
INSTALLED = Path(sys.executable).parent / "simdev-conformance"


def tf_dir():
    import importlib.util
    spec = importlib.util.find_spec("tensorflow")
    return list(spec.submodule_search_locations)[0]


def run(args, timeout=300, exe=None, **kw):
    cmd = [str(exe or HARNESS)] + [str(a) for a in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return p


def explain(p):
    return "exit %d\n--- stdout\n%s\n--- stderr\n%s" % (p.returncode, p.stdout[-6000:],
                                                       p.stderr[-3000:])


@pytest.fixture(scope="module", autouse=True)
def built():
    if not HARNESS.exists() or not PLUGIN.exists():
        pytest.fail("build the tree first (make setup): %s, %s" % (HARNESS, PLUGIN))


# ---------------------------------------------------------------- options

def test_help_needs_no_plugin_and_no_tf():
    # An empty environment: no LD_LIBRARY_PATH, nothing of TF on the path.
    p = run(["--help"], env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, explain(p)
    for word in ("required", "recommended", "--tf-dir", "--preload", "--json",
                 "--timeout", "--require-devices", "--no-fork", "--filter"):
        assert word in p.stdout


def test_list_names_every_rule_once_with_grade():
    p = run(["--list"])
    assert p.returncode == 0, explain(p)
    rules = re.findall(r"^  (\S+)\s+(required|recommended|simdev)\s+(\S.*)$",
                       p.stdout, re.M)
    ids = [r[0] for r in rules]
    assert len(ids) >= 40, p.stdout
    assert len(ids) == len(set(ids)), "duplicate rule ids"
    assert {r[1] for r in rules} == {"required", "recommended", "simdev"}
    for rid, grade, callback in rules:
        assert re.fullmatch(r"[a-z_]+(\.[a-z0-9_]+)+", rid), rid
        assert callback.strip(), rid
    for rid in ("registration.init_ok", "platform.name_valid", "devices.count",
                "host_callback.returns_true", "host_callback.runs",
                "event.pending_until_work_done", "memcpy.stream_order",
                "allocator_stats.available"):
        assert rid in ids, rid


@pytest.mark.parametrize("args, words", [
    (["--timeout", "abc", "x.so"], "not a valid number"),
    (["--timeout", "0", "x.so"], "not a valid number"),
    (["--require-devices", "-1", "x.so"], "not a valid number"),
    (["--bogus", "x.so"], "unknown option"),
    (["a.so", "b.so"], "one plugin per run"),
    (["--json"], "needs a value"),
    ([], "usage"),
])
def test_bad_command_lines_exit_2(args, words):
    p = run(args)
    assert p.returncode == 2, explain(p)
    assert words in p.stderr, explain(p)


# --faults takes SIMDEV_FAULTS's grammar, strictly, for the one kind the
# harness injects itself (its own host callbacks): each bad rule is a usage
# error quoting the rule and saying what is wrong.
@pytest.mark.parametrize("spec, rule, words", [
    ("callback:nth= 5", "callback:nth= 5", "no spaces"),
    ("callback:nth=5,", "", "empty rule"),
    ("callback:nth=1,,callback:every=2", "", "empty rule"),
    ("callback:nth=+5", "callback:nth=+5", "decimal count"),
    ("callback:nth=5x", "callback:nth=5x", "decimal count"),
    ("callback:every=0x10", "callback:every=0x10", "decimal count"),
    ("callback:nth=99999999999999999999", "callback:nth=99999999999999999999",
     "decimal count"),
    ("callback:every=0", "callback:every=0", "counts start at 1"),
    ("callback:nth=1:every=2", "callback:nth=1:every=2", "one trigger"),
    ("callback:nth=1:", "callback:nth=1:", "empty key=value"),
    ("callback::nth=1", "callback::nth=1", "empty key=value"),
    ("callback", "callback", "no trigger"),
    ("callback:p=0.5", "callback:p=0.5", 'key "p" is not applied'),
    ("seed=3", "seed=3", "does not apply"),
    ("alloc:nth=3", "alloc:nth=3", "the plugin's own"),
    ("memcpy_h2d:every=2", "memcpy_h2d:every=2", "the plugin's own"),
    ("allok:nth=3", "allok:nth=3", 'unknown kind "allok"'),
    (",".join(["callback:nth=1"] * 17), "callback:nth=1", "more than 16 rules"),
])
def test_bad_faults_option_names_the_rule(spec, rule, words):
    p = run(["--faults", spec, "--list"])
    assert p.returncode == 2, explain(p)
    assert '--faults rule "%s"' % rule in p.stderr, explain(p)
    assert words in p.stderr, explain(p)


def test_faults_option_takes_16_rules_and_help_says_which():
    p = run(["--faults", ",".join(["callback:every=3"] * 15 + ["callback:nth=05"]),
             "--list"])
    assert p.returncode == 0, explain(p)
    p = run(["--help"])
    text = " ".join(p.stdout.split())
    assert "callback:nth=N and callback:every=N" in text, p.stdout
    assert "at most 16 rules" in text and "SIMDEV_FAULTS" in text, p.stdout


def test_missing_plugin_is_a_setup_error_with_a_hint(tmp_path):
    p = run([tmp_path / "nope.so"])
    assert p.returncode == 2, explain(p)
    assert "cannot load" in p.stderr and "hint:" in p.stderr


def test_tf_dir_that_is_not_tf_says_what_to_pass(tmp_path):
    p = run(["--tf-dir", tmp_path, PLUGIN])
    assert p.returncode == 2, explain(p)
    assert "libtensorflow_framework.so.2" in p.stderr
    assert "--tf-dir" in p.stderr


def test_library_without_se_init_is_a_required_failure(tmp_path):
    libm = Path("/lib/x86_64-linux-gnu/libm.so.6")
    if not libm.exists():
        pytest.skip("no libm.so.6 at the Debian path")
    out = tmp_path / "r.json"
    p = run(["--json", out, libm])
    assert p.returncode == 1, explain(p)
    doc = json.loads(out.read_text())
    assert doc["result"] == "fail" and doc["platform"] is None
    assert [f["rule"] for f in doc["failures"]] == ["plugin.exports_se_init"]


def elf_offsets(data):
    """(end of the last PT_LOAD segment, e_shoff) of an ELF64 file."""
    import struct
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    end = 0
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            end = max(end, p_offset + p_filesz)
    return end, shoff


def bad_file(kind, data):
    """libconf_mini.so's bytes broken as `kind` says."""
    if kind == "garbage":
        return bytes(range(256)) * 12
    if kind == "empty":
        return b""
    if kind == "header_only":  # the ELF header, program headers cut off
        return data[:70]
    if kind == "segments_cut":  # glibc's dlopen dies of SIGBUS on this one
        return data[:elf_offsets(data)[0] // 2]
    if kind == "32bit":
        return data[:4] + b"\x01" + data[5:]  # EI_CLASS = ELFCLASS32
    raise ValueError(kind)


# registration.imports reads the plugin's file before dlopen: a file dlopen
# cannot load (or would crash on) is the rule's required failure, reported
# with what is wrong, and never loaded.
@pytest.mark.parametrize("kind, words", [
    ("garbage", r"not an ELF file \(3072 bytes, no \\177ELF at the start\)"),
    ("empty", r"not an ELF file \(0 bytes\)"),
    ("header_only", r"program header table .* ends past the file's 70 bytes"),
    ("segments_cut", r"truncated: segment \d+ ends at byte \d+, the file has"),
    ("32bit", r"a 32-bit ELF file"),
])
def test_file_dlopen_cannot_load_fails_imports_rule(tmp_path, kind, words):
    mini = PLUGINS / "libconf_mini.so"
    if not mini.exists():
        pytest.skip("tests/conformance/plugins not built")
    lib = tmp_path / ("lib%s.so" % kind)
    lib.write_bytes(bad_file(kind, mini.read_bytes()))
    out = tmp_path / "r.json"
    p = run(["--json", out, lib], timeout=120)
    assert p.returncode == 1, explain(p)  # a verdict, not a crash
    assert "CRASH" not in p.stdout and "cannot load" not in p.stderr, explain(p)
    doc = json.loads(out.read_text())
    assert doc["result"] == "fail" and doc["platform"] is None
    assert [f["rule"] for f in doc["failures"]] == ["registration.imports"]
    f = doc["failures"][0]
    assert f["grade"] == "required" and f["test"] == "registration", f
    assert f["observed"].startswith(str(lib) + ": "), f
    assert re.search(words, f["observed"]), f
    assert f["observed"].endswith("; not loaded"), f


def test_cut_section_headers_leave_imports_unchecked_not_failed(tmp_path):
    # dlopen needs the segments only; the imports are listed from the
    # section headers, here cut off: the rule is not checked, and says so.
    mini = PLUGINS / "libconf_mini.so"
    if not mini.exists():
        pytest.skip("tests/conformance/plugins not built")
    data = mini.read_bytes()
    end, shoff = elf_offsets(data)
    assert end < shoff < len(data), (end, shoff, len(data))
    lib = tmp_path / "libcut.so"
    lib.write_bytes(data[:shoff + 10])
    out = tmp_path / "r.json"
    p = run(["--filter", "generic.device", "--json", out, lib])
    assert p.returncode == 0, explain(p)
    assert ("registration.imports not checked: its section header table"
            in p.stdout), explain(p)
    doc = json.loads(out.read_text())
    assert doc["result"] == "pass" and doc["failures"] == []
    assert doc["platform"] == {"name": "MINI", "type": "MINI"}


def test_imports_names_the_missing_ones_and_counts_the_rest(tmp_path):
    # 30 TF-style functions no TF exports, kernels_experimental.h's
    # TF_AssignVariable, a weak one (may stay unresolved: not counted) and
    # the plugin's own TF_InitKernel (defined: not an import).
    names = ["TF_NotInTensorFlow%02d" % i for i in range(30)]
    src = tmp_path / "many.c"
    src.write_text("\n".join(
        ["void %s(void);" % n for n in names + ["TF_AssignVariable"]]
        + ["__attribute__((weak)) void TF_WeakNotInTensorFlow(void);",
           "void TF_InitKernel(void) {"]
        + ["  %s();" % n for n in names + ["TF_AssignVariable"]]
        + ["  if (TF_WeakNotInTensorFlow) TF_WeakNotInTensorFlow();", "}"]))
    lib = tmp_path / "libmany.so"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-shared", "-fPIC", str(src), "-o", str(lib)],
                   check=True)
    out = tmp_path / "r.json"
    p = run(["--json", out, lib])
    assert p.returncode == 1, explain(p)
    doc = json.loads(out.read_text())
    assert [f["rule"] for f in doc["failures"]] == ["registration.imports"]
    obs = doc["failures"][0]["observed"]
    m = re.fullmatch(r"TF's libraries lack 31 of the 31 TF symbols it "
                     r"imports: (.+) \((\d+) more\); declared in TF's "
                     r"headers\? kernels_experimental\.h's functions .*"
                     r"; the others: built against another TF release\? "
                     r"--tf-dir \(TF in (.+)\)", obs)
    assert m, obs
    listed = m.group(1).split(", ")
    assert set(listed) <= set(names + ["TF_AssignVariable"]), listed
    assert len(listed) + int(m.group(2)) == 31, obs
    assert os.path.isfile(os.path.join(m.group(3),
                                       "libtensorflow_framework.so.2")), obs
    assert "TF_WeakNotInTensorFlow" not in obs and "TF_InitKernel" not in obs
    assert "undefined symbol: TF_" in p.stderr  # dlopen agrees
    assert "registration.imports lists the TF functions missing" in p.stderr


def test_imports_of_a_correct_plugin_pass(tmp_path):
    out = tmp_path / "r.json"
    p = run(["--filter", "generic.device", "--json", out, PLUGIN])
    assert p.returncode == 0, explain(p)
    m = re.search(r"registration\.imports: all (\d+) TF symbols the plugin "
                  r"imports are exported", p.stdout)
    assert m and int(m.group(1)) > 20, explain(p)


def test_unwritable_json_is_an_error():
    p = run(["--filter", "generic.device", "--json", "/proc/nope/x.json", PLUGIN])
    assert p.returncode == 2, explain(p)
    assert "--json" in p.stderr


# ---------------------------------------------------------------- results

def test_json_document_for_simdev(tmp_path):
    out = tmp_path / "r.json"
    p = run(["--filter", "generic.device", "--filter", "generic.events",
             "--json", out, PLUGIN])
    assert p.returncode == 0, explain(p)
    doc = json.loads(out.read_text())
    assert doc["schema"] == 1
    assert doc["platform"] == {"name": "SIMDEV", "type": "SIMDEV"}
    assert doc["device_count"] == 1 and doc["devices_tested"] == 1
    assert doc["result"] == "pass"
    names = [t["name"] for t in doc["tests"]]
    assert names == ["registration", "teardown", "generic.device",
                     "generic.device_fns", "generic.events"], names
    assert all(t["status"] == "pass" for t in doc["tests"]), doc["tests"]
    assert doc["summary"]["required"]["failed"] == 0
    assert doc["summary"]["required"]["passed"] > 20
    assert doc["failures"] == []
    assert "result: PASS" in p.stdout


def test_exclude_leaves_tests_out(tmp_path):
    out = tmp_path / "r.json"
    p = run(["--filter", "generic.device", "--exclude", "device_fns",
             "--json", out, PLUGIN])
    assert p.returncode == 0, explain(p)
    names = [t["name"] for t in json.loads(out.read_text())["tests"]]
    assert names == ["registration", "teardown", "generic.device"], names


def test_no_fork_gives_the_same_verdict(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    pa = run(["--filter", "generic.memcpy", "--json", a, PLUGIN])
    pb = run(["--no-fork", "--filter", "generic.memcpy", "--json", b, PLUGIN])
    assert pa.returncode == 0 and pb.returncode == 0, explain(pa) + explain(pb)
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    assert da["summary"] == db["summary"]
    assert [t["status"] for t in da["tests"]] == [t["status"] for t in db["tests"]]


WRAPPER = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
/* Wraps a plugin of tests/conformance/plugins (BASE) and breaks one thing. */
static void (*real_create_se)(const SP_Platform*, SE_CreateStreamExecutorParams*,
                              TF_Status*);
static void (*real_create_stream)(const SP_Device*, SP_Stream*, TF_Status*);
%(code)s
static void create_se(const SP_Platform* p, SE_CreateStreamExecutorParams* params,
                      TF_Status* st) {
  real_create_se(p, params, st);
  real_create_stream = params->stream_executor->create_stream;
  params->stream_executor->create_stream = create_stream;
}
__attribute__((visibility("default")))
void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* st) {
  void* h = dlopen(BASE, RTLD_NOW | RTLD_LOCAL);
  void (*init)(SE_PlatformRegistrationParams*, TF_Status*);
  *(void**)&init = dlsym(h, "SE_InitPlugin");
  init(params, st);
  real_create_se = params->platform_fns->create_stream_executor;
  params->platform_fns->create_stream_executor = create_se;
  PLATFORM_FNS_HOOK(params->platform_fns);
}
"""


def build_wrapper(tmp_path, name, code, base="libconf_mini.so", hook=""):
    """A plugin wrapping `base` (from tests/conformance/plugins) whose
    create_stream is `code`'s create_stream; `hook` edits the platform
    functions. Skips if those plugins are not built."""
    base_lib = PLUGINS / base
    if not base_lib.exists():
        pytest.skip("tests/conformance/plugins not built")
    src = tmp_path / (name + ".c")
    src.write_text(WRAPPER % {"code": code})
    lib = tmp_path / ("lib%s.so" % name)
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-std=gnu11", "-shared", "-fPIC", "-O1",
                    "-I", os.path.join(tf_dir(), "include"),
                    '-DBASE="%s"' % base_lib,
                    "-DPLATFORM_FNS_HOOK(p)=%s" % (hook or "(void)(p)"),
                    str(src), "-ldl", "-o", str(lib)], check=True)
    return lib


def build_crashy(tmp_path):
    """libconf_mini.so whose create_stream dereferences NULL."""
    return build_wrapper(tmp_path, "crashy", r"""
static void create_stream(const SP_Device* d, SP_Stream* s, TF_Status* st) {
  (void)d; (void)st;
  *s = *(SP_Stream volatile*)0;
}""")


def test_plugin_output_cannot_hide_a_failure(tmp_path):
    # Text without a newline, a NUL and a forged record on the plugin's own
    # output, before every host callback test: the failures of
    # libconf_mutant_cb_false.so must still be counted, the forgery not.
    lib = build_wrapper(tmp_path, "noisy", r"""
static void create_stream(const SP_Device* d, SP_Stream* s, TF_Status* st) {
  fputs("[plugin] warn: no newline", stderr);
  fflush(stderr);
  ssize_t w = write(1, "x\0y", 3);
  (void)w;
  printf("@@conf\tP\thost_callback.returns_true\n");
  fflush(stdout);
  real_create_stream(d, s, st);
}""", base="libconf_mutant_cb_false.so")
    out = tmp_path / "r.json"
    p = run(["--filter", "generic.host_callback", "--json", out, lib])
    assert p.returncode == 1, explain(p)
    doc = json.loads(out.read_text())
    assert doc["result"] == "fail"
    assert {f["rule"] for f in doc["failures"]} == {"host_callback.returns_true"}
    assert doc["summary"]["required"]["failed"] >= 2


def test_a_hang_in_registration_is_bounded(tmp_path):
    lib = build_wrapper(tmp_path, "hangcount", r"""
static void create_stream(const SP_Device* d, SP_Stream* s, TF_Status* st) {
  real_create_stream(d, s, st);
}
static void count_forever(const SP_Platform* p, int* n, TF_Status* st) {
  (void)p; (void)n; (void)st;
  for (;;) pause();
}""", hook="((p)->get_device_count = count_forever)")
    p = run(["--timeout", "3", lib], timeout=120)
    assert p.returncode == 1, explain(p)
    assert "TIMEOUT: test 'registration' did not finish" in p.stdout, explain(p)
    assert "summary so far:" in p.stdout


def test_a_crash_is_that_tests_failure_and_the_run_goes_on(tmp_path):
    lib = build_crashy(tmp_path)
    out = tmp_path / "r.json"
    p = run(["--filter", "generic.streams", "--filter", "generic.allocate",
             "--json", out, lib])
    assert p.returncode == 1, explain(p)
    doc = json.loads(out.read_text())
    status = {t["name"]: t["status"] for t in doc["tests"]}
    assert status["generic.streams"] == "crash", status
    assert status["generic.allocate"] == "pass", status
    crash = [f for f in doc["failures"] if f["test"] == "generic.streams"]
    assert crash and crash[0]["rule"] == "generic.streams.finishes"
    assert "signal 11" in crash[0]["observed"]
    assert crash[0]["grade"] == "required"


def test_no_fork_crash_prints_the_test_and_the_summary_so_far(tmp_path):
    lib = build_crashy(tmp_path)
    p = run(["--no-fork", "--filter", "generic.streams", lib])
    assert p.returncode != 0
    assert "CRASH: signal 11" in p.stdout, explain(p)
    assert "in test 'generic.streams'" in p.stdout, explain(p)
    assert "summary so far:" in p.stdout and "required:" in p.stdout


# ---------------------------------------------------------------- shipped

def test_installed_command_runs_on_installed_simdev(tmp_path):
    if not INSTALLED.exists():
        pytest.fail("%s missing: `pip install .` installs it" % INSTALLED)
    out = tmp_path / "r.json"
    p = subprocess.run([str(INSTALLED), "--simdev-plugin", "--simdev",
                        "--filter", "simdev.platform", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, explain(p)
    doc = json.loads(out.read_text())
    assert doc["plugin"].endswith("tensorflow-plugins/libsimdev.so")
    assert doc["result"] == "pass"
    assert doc["summary"]["simdev"]["passed"] > 0


def test_python_m_form_prints_help():
    p = subprocess.run([sys.executable, "-m", "simdev.conformance", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, explain(p)
    assert "usage: simdev_conformance" in p.stdout


def by_hand_block():
    doc = (ROOT / "docs/conformance.md").read_text()
    m = re.search(r"<!-- by-hand build: tested by tests/conformance/test_cli.py -->\s*"
                  r"```sh\n(.*?)```", doc, re.S)
    assert m, "docs/conformance.md lost its by-hand build block"
    return m.group(1)


def test_by_hand_build_in_the_docs_compiles_as_written(tmp_path):
    # The block runs from a checkout's root; a copy of the harness sources
    # stands in for it, and `python` is this venv's.
    shutil.copytree(ROOT / "tests/conformance", tmp_path / "tests/conformance",
                    ignore=shutil.ignore_patterns("plugins", "__pycache__", "*.py"))
    # The wire-format reader the kernel checks use lives in src/pbwire.
    shutil.copytree(ROOT / "src/pbwire", tmp_path / "src/pbwire")
    env = dict(os.environ, PATH="%s:%s" % (Path(sys.executable).parent,
                                            os.environ["PATH"]))
    script = "set -eu\n" + by_hand_block()
    p = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, explain(p)
    exe = tmp_path / "simdev_conformance"
    assert exe.exists(), explain(p)
    q = run(["--tf-dir", tf_dir(), "--filter", "generic.device", PLUGIN], exe=exe)
    assert q.returncode == 0, explain(q)
    assert "result: PASS" in q.stdout
