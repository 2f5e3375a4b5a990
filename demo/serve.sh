#!/usr/bin/env bash
# latscope serve in ~30 s: a short `latscope bench` into a store, the dashboard on a free loopback
# port, a headless-Chromium screenshot of each page (overview, a series hour by hour with its
# peaks explained, live with drill-down and a cell's breakdown by cause when run as root), then
# the server is stopped.
# Usage: demo/serve.sh OUTDIR (`make demo` builds first).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/demo}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d /var/tmp/latscope-serve-demo.XXXXXX)
SERVER="" LOAD=""
cleanup() {
	set +e
	[ -n "$LOAD" ] && kill "$LOAD" 2>/dev/null
	[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
rm -f "$OUT/serve.db" "$OUT/serve.db-wal" "$OUT/serve.db-shm"

step "A store: clocks, loops and random reads of a file a quarter in the page cache (latscope bench, ~10 s)"
"$LS" bench clock:monotonic clock:monotonic_coarse call muladd sin -d 3s --report 0 --store "$OUT/serve.db" --flush 1s
"$LS" bench "read:$WORK/data,file_size=64MiB" -d 0 --report 0 >/dev/null
dd if="$WORK/data" iflag=nocache count=0 status=none
dd if="$WORK/data" of=/dev/null bs=1M count=16 status=none
"$LS" bench "read:$WORK/data,name=read-64MiB,every=1ms" -d 5s --report 0 --store "$OUT/serve.db" --flush 1s

step "latscope serve --store serve.db --listen 127.0.0.1:0"
"$LS" serve --store "$OUT/serve.db" --listen 127.0.0.1:0 --live-idle 20s >"$WORK/url" 2>"$WORK/serve.log" &
SERVER=$!
for _ in $(seq 100); do [ -s "$WORK/url" ] && break; sleep 0.1; done
URL=$(head -1 "$WORK/url")
[ -n "$URL" ] || { cat "$WORK/serve.log"; exit 1; }
echo "dashboard at $URL"

shot() { # name url [budget ms]
	timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
		--disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$WORK/chromium-$1" \
		--window-size=1400,${4:-1100} --virtual-time-budget="${3:-5000}" --screenshot="$OUT/serve-$1.png" "$2" \
		>/dev/null 2>&1 || true
	[ -s "$OUT/serve-$1.png" ] && echo "$OUT/serve-$1.png" || echo "no screenshot of $1 (is chromium installed? make deps-test)"
}
step "Screenshots (headless Chromium)"
shot overview "$URL"
shot series "${URL}series?op=read-64MiB&hoursAgo=2&buckets=120" 5000 1300
shot series-linear "${URL}series?op=clock:monotonic_coarse&hoursAgo=2&buckets=60&scale=linear" 5000 900
if [ "$(id -u)" = 0 ] && [ -e /sys/kernel/btf/vmlinux ]; then
	"$LS" load -f "$WORK/load" --op write --rate 300 -d 60s --name demo-writer >/dev/null 2>&1 &
	LOAD=$!
	# Start the live sessions (shared with the browser: same filters), give them seconds of rows.
	warm() { python3 - "${URL}api/live" "$1" <<'PY'
import json, sys, time, urllib.error, urllib.request
for _ in range(100):
    # Live requests start probes: POST only (form-encoded), as the page sends them. Loading the
    # probes of the event stream may take longer than a request waits on a busy machine (503).
    try:
        if json.load(urllib.request.urlopen(sys.argv[1], data=sys.argv[2].encode())).get("state") == "running":
            break
    except urllib.error.HTTPError as e:
        if e.code != 503:
            raise
    time.sleep(0.2)
PY
	}
	warm "stream=1"
	warm "stream=1&filter=proc.name%20%3D%20demo-writer"
	warm "why=1&filter=proc.name%20%3D%20demo-writer%20and%20evt.type%20%3D%20write"
	sleep 6
	shot live "${URL}live?stream=1" 6000 1500
	shot live-drill "${URL}live?stream=1&filter=proc.name%20%3D%20demo-writer" 6000 1500
	# Why the writes of the busiest cell were slow: time by cause, wakers, blocking stacks.
	shot live-why "${URL}live?why=1&filter=proc.name%20%3D%20demo-writer%20and%20evt.type%20%3D%20write&cell=busiest" 8000 2600
else
	echo "(not root or no BTF: no live page screenshot)"
fi

step "The dashboard was at $URL; stopping it"
kill "$SERVER"; wait "$SERVER" || true; SERVER=""
cat "$WORK/serve.log"
ls -la "$OUT"/serve-*.png 2>/dev/null || true
