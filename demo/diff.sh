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
echo "recording a1.lst, a2.lst (sleeps of 200us) and b.lst (sleeps of 400us), 3 s each"
rec "$OUT/a1.lst" 200us
rec "$OUT/a2.lst" 200us
rec "$OUT/b.lst" 400us
echo
echo "\$ latscope diff a1.lst a2.lst --waits        # A/A: the same workload twice"
"$LS" diff "$OUT/a1.lst" "$OUT/a2.lst" --waits
echo
echo "\$ latscope diff a1.lst b.lst --waits --svg diff-hist.svg --heatmap diff-heat.svg"
"$LS" diff "$OUT/a1.lst" "$OUT/b.lst" --waits --svg "$OUT/diff-hist.svg" --heatmap "$OUT/diff-heat.svg"
