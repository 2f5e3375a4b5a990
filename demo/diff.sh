#!/usr/bin/env bash
# Did it get worse? Three short recordings of one workload (reads of a file and 200 us sleeps),
# the third with the sleeps made 400 us: `latscope diff` of the first two (an A/A test: nothing
# changed) and of the first and the third (the sleeps slower, nothing else), with its pictures.
# Usage: demo/diff.sh OUTDIR DIR (a directory for the workload's file; run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/demo/diff}
DIR=${2:-/tmp}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
rec() {
	# $1: the trace; $2: the sleep of each nanosleep.
	"$LS" record -w "$1" --quiet -- sh -c "
		'$LS' load -f '$DIR/diff.dat' --op read --size 4KiB --rate 2000 -d 3s >/dev/null &
		'$LS' load --op nanosleep --sleep $2 --rate 1000 -d 3s >/dev/null
		wait"
}
# The file exists before the first recording, so that no recording fills it.
dd if=/dev/zero of="$DIR/diff.dat" bs=1M count=64 status=none
echo "recording a1.lst, a2.lst (sleeps of 200us) and b.lst (sleeps of 400us), 3 s each"
rec "$OUT/a1.lst" 200us
rec "$OUT/a2.lst" 200us
rec "$OUT/b.lst" 400us
echo
F='proc.name = latscope-load'
# On a busy machine two recordings of one workload differ in their tails (the share of sleeps the
# run queue delayed): what an A/A diff is for, before trusting a one-recording verdict.
echo "\$ latscope diff a1.lst a2.lst '$F' --waits        # A/A: the same workload twice"
"$LS" diff "$OUT/a1.lst" "$OUT/a2.lst" "$F" --waits
echo
echo "\$ latscope diff a1.lst b.lst '$F' --waits --svg diff-hist.svg --heatmap diff-heat.svg"
"$LS" diff "$OUT/a1.lst" "$OUT/b.lst" "$F" --waits --svg "$OUT/diff-hist.svg" --heatmap "$OUT/diff-heat.svg"
