#!/usr/bin/env bash
# Redoes docs/img/profile-timeline.png: TensorBoard's trace viewer on a real
# profile of the CNN training on SIMDEV, taken by headless Chromium.
#
#   bash scripts/profile_screenshot.sh [OUT.png]     (from the repo's root)
#
# 1. installs what it needs: Debian's chromium (apt-get, root or sudo) and
#    the dev venv with the pinned tensorboard + profile plugin (make setup);
# 2. profiles 3 training steps with examples/profile_training.py;
# 3. starts TensorBoard on that log directory (a free local port), waits
#    until its profile plugin lists the run, and asks the plugin's trace
#    viewer data for the window of the middle step ("train 1");
# 4. screenshots the plugin's own trace viewer page (trace_viewer_index.html,
#    what TensorBoard's Profile > Trace Viewer shows) zoomed on that step;
# 5. stops TensorBoard. Look at the image before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/img/profile-timeline.png}
WIDTH=1600
HEIGHT=900

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null; then
  echo "apt: installing chromium"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    chromium fonts-dejavu-core >/dev/null
fi
make setup
PY=.venv/bin/python

WORK=$(mktemp -d -t simdev_screenshot_XXXXXX)
TB_PID=""
cleanup() {
  if [ -n "$TB_PID" ] && kill -0 "$TB_PID" 2>/dev/null; then
    # TensorBoard ends on SIGINT (Ctrl+C); SIGKILL if it hangs.
    kill -INT "$TB_PID" 2>/dev/null || true
    for _ in $(seq 20); do
      kill -0 "$TB_PID" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$TB_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

$PY examples/profile_training.py --logdir "$WORK/log" --steps 3

# A free port now (another program could take it before TensorBoard does;
# then TensorBoard fails to start and the script says so).
PORT=$($PY -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.venv/bin/tensorboard --logdir "$WORK/log" --host 127.0.0.1 --port "$PORT" \
  >"$WORK/tensorboard.log" 2>&1 &
TB_PID=$!

# The page's URL, zoomed on step "train 1" of the trace viewer's own data.
URL=$($PY - "$PORT" "$TB_PID" <<'EOF'
import gzip, json, os, sys, time, urllib.parse, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
base = f"http://127.0.0.1:{port}/data/plugin/profile"

def get(path):
    with urllib.request.urlopen(base + path, timeout=300) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return json.loads(body)

runs = []
for _ in range(240):  # TensorBoard imports TensorFlow first: slow to start
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("TensorBoard exited (its log follows)")
    try:
        runs = get("/runs")
        if runs:
            break
    except OSError:
        pass
    time.sleep(0.5)
if not runs:
    sys.exit("TensorBoard's profile plugin lists no run")
run = runs[-1]
host = get(f"/hosts?run={run}&tag=trace_viewer@")[0]["hostname"]
data = f"/data/plugin/profile/data?run={run}&tag=trace_viewer@&host={host}"
doc = get(data[len("/data/plugin/profile"):] + "&resolution=0")
procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
         if e.get("ph") == "M" and e.get("name") == "process_name"}
if not any("/device:CUSTOM:" in n for n in procs.values()):
    sys.exit(f"no SIMDEV plane in the trace viewer's data: {procs}")
step = [e for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("name") == "train 1"]
if len(step) != 1:
    sys.exit(f"expected one 'train 1' step event, found {len(step)}")
start_ms, dur_ms = step[0]["ts"] / 1e3, step[0]["dur"] / 1e3
margin = dur_ms * 0.02
print(f"http://127.0.0.1:{port}/data/plugin/profile/trace_viewer_index.html?"
      + urllib.parse.urlencode({
          "is_streaming": "true", "is_oss": "true", "trace_data_url": data,
          "view_start": f"{start_ms - margin:.3f}",
          "view_end": f"{start_ms + dur_ms + margin:.3f}"}))
EOF
) || { tail -n 20 "$WORK/tensorboard.log" >&2; exit 1; }
echo "trace viewer: $URL"

mkdir -p "$(dirname "$OUT")"
NOSANDBOX=()  # Chromium's sandbox refuses to run as root
[ "$(id -u)" -ne 0 ] || NOSANDBOX=(--no-sandbox)
chromium --headless "${NOSANDBOX[@]}" --disable-gpu --hide-scrollbars \
  --window-size="$WIDTH,$HEIGHT" --virtual-time-budget=30000 \
  --screenshot="$OUT" "$URL" 2>"$WORK/chromium.log" ||
  { cat "$WORK/chromium.log" >&2; exit 1; }
[ -s "$OUT" ] || { echo "no screenshot written" >&2; exit 1; }
echo "wrote $OUT: look at it before committing"
