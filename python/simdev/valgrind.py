"""Run a TensorFlow script under valgrind with simdev's suppressions.

    python -m simdev.valgrind [options] [valgrind options] [--] script.py [args]

Options of this helper (everything else that starts with "-" before the
script goes to valgrind as it is, e.g. --track-origins=yes, --num-callers=50,
--gen-suppressions=all, --log-file=vg.%p.log, --suppressions=mine.supp):

  --tool=memcheck|helgrind  valgrind tool (default memcheck)
  --leaks                   memcheck: report definite leaks at exit, as errors
                            (--leak-check=full --show-leak-kinds=definite
                            --errors-for-leak-kinds=definite); off by default
  --bfc                     keep TensorFlow's BFC allocator for SIMDEV (by
                            default SIMDEV_BFC=0: one device allocation per
                            tensor, so memcheck knows each tensor's bounds)
  --valgrind=PATH           the valgrind executable (default: valgrind on PATH)
  --dry-run                 print the command and exit 0 without running it

What it runs (printed on stderr first, then exec'ed, so the exit status is
valgrind's own): valgrind with simdev's suppression file (``SUPPRESSIONS``,
shipped in this package), --error-exitcode=99 and --num-callers=30, running
this interpreter on the script, in the environment of the caller plus
PYTHONMALLOC=malloc (Python's small-object allocator otherwise reads
memory memcheck considers uninitialised, and recycles memory between
threads behind helgrind's back) and SIMDEV_BFC=0. A variable already set in
the caller's environment is kept as it is, and a valgrind option given on
the command line replaces the helper's default for that option.

Exit status: the script's own status when valgrind reported no error; 99
(or the --error-exitcode given) when it reported any; 2 for a usage error of
this helper. A script killed by a signal kills valgrind with the same signal.

Leak checking is off by default: at exit TensorFlow and Python leave their
process-lifetime objects (op and kernel registries, device and thread-pool
singletons, protobuf descriptor pools, interned objects) unfreed on purpose,
and which of them memcheck calls "definitely lost" depends on pointer
layout, so leak reports of a whole TF program are mostly noise. --leaks turns
on the kind that can point to a real bug (definite leaks), with those
singletons suppressed.
"""
import os
import shlex
import shutil
import sys

TOOLS = ("memcheck", "helgrind")

SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "valgrind.supp")

# --error-exitcode unless given: not a status Python itself uses (0, 1, 2,
# 120, 128+signal) nor a common sys.exit() value.
ERROR_EXITCODE = 99

USAGE = ("usage: python -m simdev.valgrind [--tool=memcheck|helgrind] "
         "[--leaks] [--bfc] [--valgrind=PATH] [--dry-run] "
         "[valgrind options] [--] script.py [args]")


class UsageError(ValueError):
    """A bad command line of the helper (exit status 2)."""


def parse(argv):
    """Splits argv (without the program name) into a dict: tool, leaks, bfc,
    valgrind, dry_run, help, vg_opts (list, verbatim), script, script_args.
    Raises UsageError."""
    out = {"tool": "memcheck", "leaks": False, "bfc": False,
           "valgrind": None, "dry_run": False, "help": False,
           "vg_opts": [], "script": None, "script_args": []}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if a in ("-h", "--help"):
            out["help"] = True
        elif a.startswith("--tool="):
            out["tool"] = a.split("=", 1)[1]
            if out["tool"] not in TOOLS:
                raise UsageError("--tool=%s: simdev.valgrind supports %s"
                                 % (out["tool"], ", ".join(TOOLS)))
        elif a == "--tool":
            raise UsageError("--tool needs a value: --tool=memcheck or "
                             "--tool=helgrind")
        elif a == "--leaks":
            out["leaks"] = True
        elif a == "--bfc":
            out["bfc"] = True
        elif a == "--dry-run":
            out["dry_run"] = True
        elif a.startswith("--valgrind="):
            out["valgrind"] = a.split("=", 1)[1]
            if not out["valgrind"]:
                raise UsageError("--valgrind= needs a path")
        else:
            out["vg_opts"].append(a)  # valgrind's; it checks them itself
        i += 1
    if i >= len(argv):
        if out["help"]:
            return out
        raise UsageError("no script given")
    out["script"] = argv[i]
    out["script_args"] = list(argv[i + 1:])
    if out["leaks"] and out["tool"] != "memcheck":
        raise UsageError("--leaks is a memcheck option (--tool=%s)"
                         % out["tool"])
    return out


def _opt_name(opt):
    return opt.split("=", 1)[0]


def build(args, environ=None, python=None):
    """The command and the environment for parsed args: (argv, env,
    env_added), env_added being the variables the helper set (for the
    printed command)."""
    environ = os.environ if environ is None else environ
    python = python or sys.executable
    valgrind = args["valgrind"] or "valgrind"
    defaults = ["--tool=" + args["tool"],
                "--error-exitcode=%d" % ERROR_EXITCODE,
                "--num-callers=30"]
    if args["tool"] == "memcheck":
        if args["leaks"]:
            defaults += ["--leak-check=full", "--show-leak-kinds=definite",
                         "--errors-for-leak-kinds=definite"]
        else:
            defaults += ["--leak-check=no"]
    given = {_opt_name(o) for o in args["vg_opts"]}
    opts = [o for o in defaults if _opt_name(o) not in given]
    opts.append("--suppressions=" + SUPPRESSIONS)
    opts += args["vg_opts"]
    added = {}
    if "PYTHONMALLOC" not in environ:
        added["PYTHONMALLOC"] = "malloc"
    if not args["bfc"] and "SIMDEV_BFC" not in environ:
        added["SIMDEV_BFC"] = "0"
    env = dict(environ)
    env.update(added)
    argv = [valgrind] + opts + [python, args["script"]] + args["script_args"]
    return argv, env, added


def command_line(argv, added):
    """The command as a shell line, with the variables the helper set."""
    pre = ["%s=%s" % (k, shlex.quote(v)) for k, v in sorted(added.items())]
    return " ".join(pre + [shlex.quote(a) for a in argv])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
    except UsageError as e:
        print("simdev.valgrind: %s\n%s" % (e, USAGE), file=sys.stderr)
        return 2
    if args["help"]:
        print(__doc__)
        return 0
    if not os.path.isfile(SUPPRESSIONS):
        print("simdev.valgrind: the suppression file is missing: %s "
              "(broken install?)" % SUPPRESSIONS, file=sys.stderr)
        return 2
    cmd, env, added = build(args)
    print("simdev.valgrind: " + command_line(cmd, added), file=sys.stderr,
          flush=True)
    if args["dry_run"]:
        return 0
    exe = shutil.which(cmd[0])
    if exe is None:
        print("simdev.valgrind: %s not found (Debian: apt-get install "
              "valgrind)" % cmd[0], file=sys.stderr)
        return 2
    if not os.path.isfile(args["script"]):
        print("simdev.valgrind: %s: no such file" % args["script"],
              file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execve(exe, cmd, env)  # does not return


if __name__ == "__main__":
    sys.exit(main())
