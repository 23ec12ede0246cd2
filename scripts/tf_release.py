"""Which TensorFlow a simdev wheel is built against: a dynamic-metadata
provider (pyproject.toml's [[tool.dynamic-metadata]], the 0.3 protocol
scikit-build-core implements).

The plugin runs only in the TensorFlow release whose headers it was built
with (CMakeLists.txt, SIMDEV_TF_RELEASES). So `pip install .` builds
against the release already in the environment it installs into, and the
wheel depends on that release, never pulling in another one:

- build requirements (get_requires_for_dynamic_metadata, run by pip before
  it fills the isolated build environment): `<dist>==<release>`, where the
  release is SIMDEV_TF_VERSION if set (for `pip wheel` aimed at a
  release), else the tensorflow-cpu or tensorflow the target environment
  has (pip runs this hook with the target's interpreter, so sys.prefix is
  that environment), else DEFAULT; and dist is the one the target has
  (tensorflow-cpu without any), so that a venv of `tensorflow` does not
  get tensorflow-cpu installed over it. jaxlib (the XLA FFI header of
  libsimdev_xla.so) joins them where it can be installed beside that
  TensorFlow: jaxlib 0.10.2 needs numpy >= 2, which 2.16 and 2.17 refuse.
- `dependencies` (dynamic_metadata, run in the build environment):
  `<dist>==<major>.<minor>.*` of the TensorFlow the build found, under the
  name it was installed as.

A release outside SIMDEV_TF_RELEASES is an error naming the known ones.
"""
import glob
import importlib.metadata
import os
import re
import sys
import sysconfig

DEFAULT = "2.21.0"
JAXLIB = "jaxlib==0.10.2"
JAXLIB_FROM_MINOR = 18  # jaxlib 0.10.2's numpy>=2: TF 2.18 is the first to allow it
HERE = os.path.dirname(os.path.abspath(__file__))


def known_releases():
    """SIMDEV_TF_RELEASES of CMakeLists.txt: the one list."""
    with open(os.path.join(HERE, "..", "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"^set\(SIMDEV_TF_RELEASES ([0-9. ]+)\)", f.read(), re.M)
    if m is None:
        raise RuntimeError("CMakeLists.txt has no set(SIMDEV_TF_RELEASES ...)")
    return m.group(1).split()


def _release(version):
    m = re.match(r"^(\d+)\.(\d+)", version)
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def target_tf(prefix=None):
    """(distribution, version) of the tensorflow-cpu or tensorflow installed
    in the environment at prefix (default: this interpreter's), or None."""
    prefix = sys.prefix if prefix is None else prefix
    purelib = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})["purelib"]
    found = set()
    for name in ("tensorflow_cpu", "tensorflow"):
        for meta in glob.glob(os.path.join(purelib, f"{name}-*.dist-info", "METADATA")):
            with open(meta, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        found.add((name.replace("_", "-"), line.split(":", 1)[1].strip()))
                        break
    if len(found) > 1:
        raise RuntimeError(f"several TensorFlow distributions in {purelib}: "
                           f"{sorted(f'{d}=={v}' for d, v in found)}; set SIMDEV_TF_VERSION "
                           "to the release to build against, and keep one of them")
    return found.pop() if found else None


def target_tf_version(prefix=None):
    """The version of target_tf(prefix), or None."""
    t = target_tf(prefix)
    return t[1] if t else None


def build_tf_version():
    """The release to build against (see the module's docstring)."""
    v = os.environ.get("SIMDEV_TF_VERSION") or target_tf_version() or DEFAULT
    known = known_releases()
    if _release(v) not in known:
        raise RuntimeError(f"TensorFlow {v}: simdev builds against TensorFlow "
                           f"{', '.join(known)} (set SIMDEV_TF_VERSION, or install one)")
    return v


def get_requires_for_dynamic_metadata(settings=None):
    v = build_tf_version()
    # The distribution the target has; with SIMDEV_TF_VERSION set, a target
    # holding both names (refused by target_tf) builds with tensorflow-cpu.
    try:
        t = target_tf()
    except RuntimeError:
        if not os.environ.get("SIMDEV_TF_VERSION"):
            raise
        t = None
    reqs = [f"{t[0] if t else 'tensorflow-cpu'}=={v}"]
    if int(_release(v).split(".")[1]) >= JAXLIB_FROM_MINOR:
        reqs.append(JAXLIB)
    return reqs


def dynamic_metadata(settings=None, project=None):
    """The [project] fragment: dependencies (dynamic-metadata 0.3's hook)."""
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            v = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        return {"dependencies": [f"{dist}=={_release(v)}.*"]}
    raise RuntimeError("no TensorFlow in the build environment (pip's isolated "
                       "build installs it; with --no-build-isolation install it first)")


if __name__ == "__main__":
    # `python scripts/tf_release.py`: what a build here would use.
    print(build_tf_version(), get_requires_for_dynamic_metadata())
