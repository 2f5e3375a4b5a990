#!/usr/bin/env bash
# demo/views.sh TRACEFILE OUTDIR
#
# Draws latscope's views of a recorded trace into OUTDIR: latency, offset, size and subsecond heat
# maps (interactive SVG: open them in a browser and mouse over the cells), histograms with their
# peaks, drill-down tables and load timelines. Uses $LATSCOPE, else target/release/latscope, else
# latscope from PATH.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 TRACEFILE OUTDIR" >&2
    exit 2
fi
trace=$1
out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${LATSCOPE:-}" ]; then
    ls=$LATSCOPE
elif [ -x "$here/target/release/latscope" ]; then
    ls=$here/target/release/latscope
else
    ls=latscope
fi
mkdir -p "$out"

step() {
    # step DESCRIPTION COMMAND...: run, keep going on failure, say what failed.
    local what=$1
    shift
    if ! "$@" 2>>"$out/views.log"; then
        echo "  FAILED: $what (see $out/views.log)" >&2
        failed=1
    fi
}
failed=0
: >"$out/views.log"

# Heat maps (SVG, one JSON matrix for scripts).
step "syscall latency heat map" "$ls" heatmap -r "$trace" -o "$out/syscall-latency.svg"
step "syscall latency heat map (JSON)" "$ls" heatmap -r "$trace" --json -o "$out/syscall-latency.json"
step "syscall latency heat map per process" "$ls" heatmap -r "$trace" --per proc --maps 6 -o "$out/syscall-latency-per-proc.svg"
step "subsecond offset heat map" "$ls" heatmap -r "$trace" --y subsecond -o "$out/syscall-subsecond.svg"
step "block latency heat map per disk" "$ls" heatmap -r "$trace" --block --per disk -o "$out/block-latency-per-disk.svg"
step "block latency heat map per op" "$ls" heatmap -r "$trace" --block --per op -o "$out/block-latency-per-op.svg"
step "block offset heat map" "$ls" heatmap -r "$trace" --block --y offset -o "$out/block-offset.svg"
step "block size heat map" "$ls" heatmap -r "$trace" --block --y size -o "$out/block-size.svg"

# Histograms (text with peaks, and SVG).
step "syscall latency histogram" sh -c '"$0" hist -r "$1" --svg "$2/hist-syscalls.svg" > "$2/hist-syscalls.txt"' "$ls" "$trace" "$out"
step "histograms per syscall" sh -c '"$0" hist -r "$1" --by syscall -n 8 --svg "$2/hist-by-syscall.svg" > "$2/hist-by-syscall.txt"' "$ls" "$trace" "$out"
step "block latency histograms per disk" sh -c '"$0" hist -r "$1" --block --by disk --svg "$2/hist-block-per-disk.svg" > "$2/hist-block-per-disk.txt"' "$ls" "$trace" "$out"

# Drill-down tables.
step "top processes" sh -c '"$0" top -r "$1" --by proc > "$2/top-proc.txt"' "$ls" "$trace" "$out"
step "top syscalls" sh -c '"$0" top -r "$1" --by syscall > "$2/top-syscall.txt"' "$ls" "$trace" "$out"
step "top files" sh -c '"$0" top -r "$1" --by file --sort total > "$2/top-file.txt"' "$ls" "$trace" "$out"
step "top disks" sh -c '"$0" top -r "$1" --block --by disk > "$2/top-disk.txt"' "$ls" "$trace" "$out"

# Load over time: was it load?
step "syscall timeline" "$ls" timeline -r "$trace" -o "$out/timeline-syscalls.svg"
step "block timeline" "$ls" timeline -r "$trace" --block -o "$out/timeline-block.svg"

echo "latscope views of $trace written to $out:"
(cd "$out" && ls -1 | grep -v '^views.log$' | sed 's/^/  /')
echo "open the .svg files in a browser (mouse over heat map cells); the .txt files are terminal views."
exit $failed
