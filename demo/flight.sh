#!/usr/bin/env bash
# The flight recorder: every event kept in a ring in memory, nothing written until a trigger
# fires; then the seconds before it (and after) as a trace, with why each slow call took its time.
# Usage: demo/flight.sh OUTDIR (root; LATSCOPE=path/to/latscope).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/demo/flight}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
REC=""
cleanup() {
	set +e
	[ -n "$REC" ] && kill -INT "$REC" 2>/dev/null && wait "$REC" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
wait_dumps() { # N: until the recorder has written N dumps (a loaded machine takes seconds)
	for _ in $(seq 300); do
		[ "$(grep -c '^latscope: wrote' "$WORK/record.err")" -ge "$1" ] && return
		sleep 0.1
	done
}
DUMPS="$OUT/dumps"
rm -rf "$DUMPS"
mkdir -p "$DUMPS"

# A program named "stall" that sometimes takes 300 ms, under steady background writes and fsyncs.
cp "$(command -v sleep)" "$WORK/stall"
echo "== latscope record -w $DUMPS --ring 20s --why-above 50ms --trigger 'slow: evt.latency > 200ms and proc.name = stall' --trigger 'now: manual' --after 2s"
"$LS" record -w "$DUMPS" --ring 20s --why-above 50ms --after 2s --min-gap 2s --no-block \
	--trigger 'slow: evt.latency > 200ms and proc.name = stall' --trigger 'now: manual' \
	--socket "$WORK/flight.sock" -d 60s 2>"$WORK/record.err" &
REC=$!
for _ in $(seq 150); do [ -S "$WORK/flight.sock" ] && break; sleep 0.2; done
sed 's/^/    /' "$WORK/record.err"
( for _ in $(seq 400); do dd if=/dev/zero of="$WORK/bg" bs=4k count=1 conv=fsync status=none; sleep 0.02; done ) &
BG=$!
sleep 4
echo "== a stall of 300 ms: the trigger fires, the 20 s before it and 2 s after are written"
"$WORK/stall" 0.3
wait_dumps 1
sleep 2.5 # past --min-gap, counted from the start of the last dump
echo "== latscope trigger now --socket ...: a dump by hand"
"$LS" trigger now --socket "$WORK/flight.sock"
wait_dumps 2
kill "$BG" 2>/dev/null || true
wait "$BG" 2>/dev/null || true
kill -INT "$REC"
wait "$REC" || true
REC=""
echo "== what the recorder said"
sed 's/^/    /' "$WORK/record.err"
SLOW=$(ls "$DUMPS"/flight-*-slow.lst | head -1)
echo "== latscope info -r $(basename "$SLOW")"
"$LS" info -r "$SLOW" | head -12
echo "== the stall and why: latscope events -r $(basename "$SLOW") --why 'proc.name = stall and evt.latency > 200ms'"
"$LS" events -r "$SLOW" --why --time rel 'proc.name = stall and evt.latency > 200ms'
echo "== the seconds before it: latscope top -r $(basename "$SLOW") --by proc -n 5"
"$LS" top -r "$SLOW" --by proc -n 5
echo "== every dump: latscope serve --dumps $DUMPS (then open /dumps)"
ls -la "$DUMPS"
