#!/usr/bin/env bash
# latscope's end-to-end demo on a built-in workload: record it with eBPF, then look at it every way
# latscope can. Usage: demo/demo.sh OUTDIR (run as root; `make demo` builds first).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/demo}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
LOOPDEV=""
cleanup() {
	set +e
	mountpoint -q "$WORK/mnt" && umount "$WORK/mnt"
	[ -n "$LOOPDEV" ] && losetup -d "$LOOPDEV"
	rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "A file system on a loop device (ext4) for the workload"
truncate -s 256M "$WORK/disk.img"
LOOPDEV=$(losetup -f --show "$WORK/disk.img")
mkfs.ext4 -q -F "$LOOPDEV"
mkdir -p "$WORK/mnt"
mount "$LOOPDEV" "$WORK/mnt"
echo "$LOOPDEV mounted on $WORK/mnt"

step "The built-in workload: file writes and reads, fsyncs, O_DIRECT writes, sleeps, a TCP server and its clients"
# A local TCP server answering 3 clients (20 requests each), so that sockets show their addresses.
cat >"$WORK/net.py" <<'PY'
import socket, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
def serve():
    for _ in range(3):
        c, _ = srv.accept()
        while True:
            d = c.recv(64)
            if not d:
                break
            c.sendall(d.upper())
        c.close()
t = threading.Thread(target=serve); t.start()
for _ in range(3):
    s = socket.create_connection(srv.getsockname())
    for _ in range(20):
        s.sendall(b"ping"); s.recv(64)
    s.close()
t.join()
PY
cat >"$WORK/workload.sh" <<WL
set -e
d=$WORK/mnt/files
mkdir -p \$d
for i in \$(seq 1 200); do
	dd if=/dev/urandom of=\$d/f\$i bs=4k count=4 conv=fsync status=none
done
for i in \$(seq 1 200); do cat \$d/f\$i >/dev/null; done
dd if=/dev/zero of=$WORK/mnt/direct bs=64k count=200 oflag=direct status=none
for i in \$(seq 1 20); do sleep 0.01; done
mv \$d/f1 \$d/moved
rm -rf \$d
python3 $WORK/net.py
WL
echo "see $WORK/workload.sh"

step "What this kernel gives the probes, feature by feature: latscope check"
"$LS" check || true

step "latscope record --why --stacks -w $OUT/trace.lst -- sh workload.sh (each call's latency split into causes)"
"$LS" record --why --stacks -w "$OUT/trace.lst" --quiet -- sh "$WORK/workload.sh"

step "latscope info -r trace.lst"
"$LS" info -r "$OUT/trace.lst" | head -40

step "Writes and fsyncs of the workload's files: latscope events -r trace.lst 'evt.type in (write, fsync) and fd.name contains /files/' (first 10)"
"$LS" events -r "$OUT/trace.lst" -n 10 --time rel 'evt.type in (write, fsync) and fd.name contains /files/'

step "Slow calls: latscope events -r trace.lst 'evt.latency > 5ms' (first 10)"
"$LS" events -r "$OUT/trace.lst" -n 10 --time rel 'evt.latency > 5ms'

step "Every thread over time, as a Perfetto trace: latscope export -r trace.lst --perfetto trace.pftrace (open it at https://ui.perfetto.dev)"
"$LS" export -r "$OUT/trace.lst" --perfetto "$OUT/trace.pftrace"

step "The same story without Perfetto: latscope timeline -r trace.lst --threads (the threads of the TCP test, then as HTML)"
"$LS" timeline -r "$OUT/trace.lst" --threads --rows 8 --width 110 'proc.name = python3'
"$LS" timeline -r "$OUT/trace.lst" --threads --rows 20 -o "$OUT/threads.html"

step "Why was it slow: latscope why -r trace.lst (slowest work, each with its causes)"
"$LS" why -r "$OUT/trace.lst"

step "Each thread's whole time, in and outside its calls: latscope why -r trace.lst --threads -n 6"
"$LS" why -r "$OUT/trace.lst" --threads -n 6

step "Each slow call with its breakdown, its parts in time order and its waker: latscope events --why -r trace.lst 'evt.latency > 5ms' (first 6)"
"$LS" events --why -r "$OUT/trace.lst" -n 6 --time rel 'evt.latency > 5ms'

step "Where the blocked time went, by stack and drawn: latscope why -r trace.lst --stacks -n 2 --svg why.svg --flame blocked.svg --folded blocked.folded"
"$LS" why -r "$OUT/trace.lst" --stacks -n 2 --svg "$OUT/why.svg" --flame "$OUT/blocked.svg" --folded "$OUT/blocked.folded" > "$WORK/stacks.txt"
head -40 "$WORK/stacks.txt"
echo "(blocked.folded is flamegraph.pl's, inferno's and speedscope's input; why.svg is time by cause and by waker)"

step "Where the CPU time went: latscope record --profile 199 -- python3 (busy); why --on-cpu -n 2; why --hot-cold --flame hotcold.svg"
"$LS" record --profile 199 -w "$OUT/prof.lst" --quiet --no-block -- python3 -c 'import time; t = time.time() + 1
while time.time() < t: sum(i * i for i in range(10000))'
"$LS" why -r "$OUT/prof.lst" --on-cpu -n 2 'proc.name = python3' | head -30
"$LS" why -r "$OUT/prof.lst" --hot-cold --flame "$OUT/hotcold.svg" --folded "$OUT/hotcold.folded"
echo "(hotcold.svg: on-CPU samples and blocked time in one flame graph)"

step "Time by cause, by waker, by operation: latscope top -r trace.lst --by cause"
"$LS" top -r "$OUT/trace.lst" --by cause > "$WORK/cause.txt"
head -30 "$WORK/cause.txt"

step "Block requests on $(basename "$LOOPDEV"): latscope events -r trace.lst 'blk.disk = $(basename "$LOOPDEV")' (first 10)"
"$LS" events -r "$OUT/trace.lst" -n 10 --time rel "blk.disk = $(basename "$LOOPDEV")"

step "Sockets are named by their addresses: latscope events -r trace.lst 'evt.type in (connect, accept4)'"
"$LS" events -r "$OUT/trace.lst" -n 6 --time rel 'evt.type in (connect, accept, accept4)'

step "The server's work by client: latscope top -r trace.lst --by client 'fd.type = ipv4 and evt.type = recvfrom'"
"$LS" top -r "$OUT/trace.lst" --by client 'fd.type = ipv4 and evt.type = recvfrom'
echo "(all clients are on 127.0.0.1 here; each connection, by its addresses:)"
"$LS" top -r "$OUT/trace.lst" --by file 'fd.type = ipv4 and evt.type = recvfrom'

step "The whole trace as a spectrogram: latscope spectrogram -r trace.lst --no-pace 100"
COLUMNS=${COLUMNS:-120} "$LS" spectrogram -r "$OUT/trace.lst" --no-pace 100 --svg "$OUT/spectrogram.svg" | tail -25 || true

step "Catching rare latency: a flight recorder keeps the last 20 s in memory and writes them when a stall fires its trigger: demo/flight.sh"
bash demo/flight.sh "$OUT/flight"

step "Heat maps, histograms, tables and timelines: demo/views.sh"
bash demo/views.sh "$OUT/trace.lst" "$OUT/views"

step "Did it get worse? Two recordings compared, with intervals and verdicts: demo/diff.sh"
bash demo/diff.sh "$OUT/diff" "$WORK/mnt"

step "The spectrogram write-up's storage tests on ext4 (loop device) and tmpfs: demo/spectrogram.sh"
DURATION=${DURATION:-3} bash demo/spectrogram.sh "$OUT/storage"

step "Continuous micro-benchmarks into the store of hourly histograms: demo/bench.sh"
bash demo/bench.sh "$OUT/bench"

step "The dashboard over the store, and its live page: demo/serve.sh"
bash demo/serve.sh "$OUT"

step "Replaying recorded I/O in a sandbox: demo/replay.sh"
bash demo/replay.sh "$OUT/replay"

step "For a fleet: Parquet for SQL engines, the agent for Prometheus and OpenTelemetry, the Debian package: demo/fleet.sh"
bash demo/fleet.sh "$OUT/trace.lst" "$OUT/fleet"

step "Every picture rendered in headless Chromium: screenshots next to each SVG (*.svg.png)"
find "$OUT" -name '*.svg' | sort | while read -r svg; do
	timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
		--disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$WORK/chromium" \
		--window-size=1400,1000 --screenshot="$svg.png" "file://$svg" >/dev/null 2>&1 || true
	[ -s "$svg.png" ] && echo "$svg.png" || echo "no screenshot of $svg (is chromium installed? make deps-test)"
done

step "Done: the trace and every picture are in $OUT"
ls -la "$OUT"
