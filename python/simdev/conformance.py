"""simdev-conformance: the StreamExecutor C API conformance harness.

A C program (installed as ``simdev/bin/simdev_conformance``) that loads any
PluggableDevice plugin as TensorFlow does, drives every callback the way
TensorFlow 2.21 does and grades what it finds: ``required`` (TF rejects,
aborts, hangs or corrupts data without it; only these fail the run),
``recommended`` and ``simdev``. See ``simdev-conformance --help`` and
docs/conformance.md.

This wrapper only finds things and then becomes the C program (exec):

* ``--tf-dir``: the installed ``tensorflow`` package directory, found without
  importing TensorFlow, unless given;
* ``--libpython``: replaced by ``--preload <this Python's libpython>``, for
  plugins that link TensorFlow's Python extension (the Python it runs under
  must be the one that plugin's TensorFlow was built for);
* ``--simdev-plugin``: the plugin argument replaced by the installed
  ``libsimdev.so``.

Usage: ``simdev-conformance [options] PLUGIN.so`` or
``python -m simdev.conformance [options] PLUGIN.so``.
"""

import importlib.util
import os
import sys
import sysconfig


def binary_path():
    """Absolute path of the installed harness executable."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "bin", "simdev_conformance")
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(
            "the conformance harness is not installed next to this package "
            "(expected %s)" % path)
    return path


def tensorflow_dir():
    """The installed tensorflow package directory, or None (no import)."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def libpython_path():
    """This interpreter's shared libpython, or None if it is static."""
    libdir = sysconfig.get_config_var("LIBDIR")
    name = sysconfig.get_config_var("INSTSONAME")
    if not libdir or not name:
        return None
    path = os.path.join(libdir, name)
    return path if os.path.exists(path) else None


def build_argv(args):
    """The C program's argv (without argv[0]) for the wrapper's args."""
    out = []
    for a in args:
        if a == "--libpython":
            lib = libpython_path()
            if lib is None:
                raise SystemExit(
                    "simdev-conformance: --libpython: this Python (%s) has no "
                    "shared libpython; pass --preload PATH instead" % sys.executable)
            out += ["--preload", lib]
        elif a == "--simdev-plugin":
            from simdev import library_path  # does not import TensorFlow
            out.append(library_path())
        else:
            out.append(a)
    if "--tf-dir" not in out and not ({"--help", "-h", "--list"} & set(out)):
        tf = tensorflow_dir()
        if tf is not None:
            out = ["--tf-dir", tf] + out
    return out


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    exe = binary_path()
    os.execv(exe, [exe] + build_argv(args))


if __name__ == "__main__":
    main()
