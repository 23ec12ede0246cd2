"""Profile a few training steps of the CNN on /device:SIMDEV:0, two ways.

    .venv/bin/python examples/profile_training.py [--logdir DIR]
        [--trace FILE.json] [--steps N]

1. TensorFlow's profiler (tf.profiler.experimental.start/stop) writes
   DIR/plugins/profile/<run>/<host>.xplane.pb: TF's host threads and, from
   simdev's profiler plugin, a plane "/device:CUSTOM:0" with a track per
   SIMDEV stream and an event per work item (kernels under TF's op names,
   copies, event waits). Open it with
       tensorboard --logdir DIR        (then Profile > trace_viewer)
2. SIMDEV_TRACE=FILE.json: simdev records the whole run itself and writes a
   Chrome trace-event JSON when the process exits (streams as threads, an
   arrow from each kernel's enqueue on TF's thread to its run on the
   stream, the device's memory in use). Open it in Perfetto or
   chrome://tracing. simdev reads SIMDEV_TRACE when TensorFlow loads it, so
   this script sets it before importing TensorFlow: --trace, else the
   SIMDEV_TRACE already in the environment, else DIR/simdev_trace.json.

It prints where both files are and a summary of the SIMDEV plane: events per
stream and the five kernels with the most time in total.
"""
import argparse
import collections
import glob
import os
import sys
import tempfile


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--logdir", help="TensorBoard log directory "
                   "(default: a new temporary directory)")
    p.add_argument("--trace", help="Chrome trace JSON written at exit "
                   "(default: simdev_trace.json in the log directory)")
    p.add_argument("--steps", type=int, default=5,
                   help="training steps profiled (after one warm-up step)")
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be at least 1")
    args.logdir = os.path.abspath(
        args.logdir or tempfile.mkdtemp(prefix="simdev_profile_"))
    return args


def summarize(xplane_path):
    """Per-stream event counts and the five longest kernels of the SIMDEV
    plane, read back with the xplane proto TensorFlow ships."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    planes = [p for p in space.planes if p.name.startswith("/device:CUSTOM:")]
    if not planes:
        sys.exit(f"{xplane_path}: no SIMDEV plane (/device:CUSTOM:N); was "
                 "the profiler plugin loaded?")
    for plane in planes:
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        print(f"  {plane.name}")
        time_ps = collections.Counter()
        for line in sorted(plane.lines, key=lambda l: l.id):
            print(f"    {line.display_name or line.name}: "
                  f"{len(line.events)} events")
            for e in line.events:
                stats = {stat_names.get(s.metadata_id): s for s in e.stats}
                if "tf_op" in stats:  # kernels only
                    time_ps[plane.event_metadata[e.metadata_id].name] += \
                        e.duration_ps
        for name, ps in time_ps.most_common(5):
            print(f"    {ps / 1e6:10.3f} us  {name}")


def main():
    args = parse_args()
    trace = os.path.abspath(
        args.trace or os.environ.get("SIMDEV_TRACE")
        or os.path.join(args.logdir, "simdev_trace.json"))
    os.makedirs(args.logdir, exist_ok=True)
    os.environ["SIMDEV_TRACE"] = trace  # before TensorFlow loads simdev
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import tensorflow as tf

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import training

    if not tf.config.list_physical_devices("SIMDEV"):
        sys.exit("no SIMDEV device: is simdev installed (pip install .)?")
    device = "/device:SIMDEV:0"
    xs, ys = training.synthetic_data("cnn", args.steps + 1)
    _, step = training.make_trainer("cnn", device)
    with tf.device(device):
        batches = [(tf.constant(x), tf.constant(y)) for x, y in zip(xs, ys)]
        step(*batches[0]).numpy()  # traces and compiles: not profiled
        tf.profiler.experimental.start(args.logdir)
        for i in range(args.steps):
            # step_num lets the profile's tools group the events by step.
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                loss = float(step(*batches[i + 1]).numpy())
        tf.profiler.experimental.stop()
    print(f"Profiled {args.steps} training steps of the CNN on {device} "
          f"(last loss {loss:.4f}).")
    runs = sorted(glob.glob(os.path.join(
        args.logdir, "plugins", "profile", "*", "*.xplane.pb")),
        key=os.path.getmtime)
    if not runs:
        sys.exit(f"TensorFlow wrote no profile under {args.logdir}")
    print(f"TensorBoard profile: {runs[-1]}")
    print(f"  view it: tensorboard --logdir {args.logdir}  "
          "(Profile > trace_viewer)")
    summarize(runs[-1])
    print(f"Chrome trace (written when this process exits): {trace}")
    print("  view it: Perfetto's UI or chrome://tracing")


if __name__ == "__main__":
    main()
