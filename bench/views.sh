#!/usr/bin/env bash
# Speed of latscope's views, printed as a Markdown table:
#
# 1. a heat map from 1 M lines of trace2heatmap.pl's two-column text, on all cores and on one,
#    next to trace2heatmap.pl itself when it is installed (it is not packaged in Debian: otherwise
#    the figure measured on this kind of machine, ~2.9 s for 1 M lines, is the reference);
# 2. heat maps, histograms, spectrogram rows and timelines from binary latscope traces of EVENTS
#    synthetic events, on one core (taskset -c 0), in events per second of CPU time (user + sys):
#    a trace with one block request every 20 events (every block mixes kinds) and one of syscalls
#    only (like a recording of syscalls), and cases where the zone-map shortcut cannot apply
#    (columns narrower than a block's time span, a filter) next to ones where it can.
#
# Environment: LATSCOPE (default target/$PROFILE/latscope), EVENTS (default 10000000), REPS (3),
# PROFILE (cargo profile of the builds, default release; `ci` reuses the test build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
host_line
EVENTS=${EVENTS:-10000000}
REPS=${REPS:-3}

build_synth

# 1 M "time latency" lines in microseconds, a header line first (deterministic).
awk 'BEGIN { srand(1); t = 17442020318913; print "time latency";
	for (i = 0; i < 1000000; i++) { t += int(rand() * 120); r = rand();
		if (r < 0.6) l = 200 + int(rand() * 3000); else if (r < 0.9) l = 8000 + int(rand() * 4000); else l = 20000 + int(rand() * 30000);
		printf "%.0f %.0f\n", t, l } }' >"$WORK/lat1m.txt"

# Median wall seconds of REPS runs of a command (hyperfine's when it is installed).
wall() {
	if command -v hyperfine >/dev/null 2>&1; then
		hyperfine -N -w 1 -r "$REPS" --export-json "$WORK/hf.json" -- "$(printf '%q ' "$@")" >/dev/null 2>&1
		python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$WORK/hf.json"
		return
	fi
	local best=()
	for _ in $(seq "$REPS"); do
		local s e
		s=$(date +%s.%N)
		"$@" >/dev/null 2>&1
		e=$(date +%s.%N)
		best+=("$(echo "$e - $s" | bc -l)")
	done
	median "${best[@]}"
}

echo "| view | input | time | rate | vs reference |"
echo "|---|---|---|---|---|"
ref=2.9
ref_note="published figure for this kind of machine; put trace2heatmap.pl (github.com/brendangregg/HeatMap) on PATH to measure it here"
if command -v trace2heatmap.pl >/dev/null 2>&1; then
	ref=$(wall trace2heatmap.pl --unitstime=us --unitslabel=us "$WORK/lat1m.txt")
	ref_note="trace2heatmap.pl measured here"
fi
hm=(heatmap --input text -r "$WORK/lat1m.txt" --unitstime=us --unitslat=us -o "$WORK/lat1m.svg")
t_all=$(wall "$LS" "${hm[@]}")
t_one=$(wall taskset -c 0 "$LS" "${hm[@]}")
for row in "all cores|$t_all" "1 core|$t_one"; do
	what=${row%%|*}
	t=${row#*|}
	printf '| heat map, text (%s) | 1 M lines | %.3f s | %.2f M lines/s | %.1fx faster than %.2f s (%s) |\n' \
		"$what" "$t" "$(echo "1 / $t" | bc -l)" "$(echo "$ref / $t" | bc -l)" "$ref" "$ref_note"
done

# t: syscalls + a block request every 20 events, in blocks by kind as `latscope record` writes;
# m: the same events with both kinds in every block; s: syscalls only.
"$SYNTH" "$WORK/t.lst" "$EVENTS" 2>/dev/null
"$SYNTH" "$WORK/m.lst" "$EVENTS" 20 mixed 2>/dev/null
"$SYNTH" "$WORK/s.lst" "$EVENTS" 0 2>/dev/null
# The filter takes every event but needs per-event fields: no zone-map shortcut.
ALL='evt.latency >= 0'
for v in "heat map (log latency), 1 s columns|t|heatmap --stepsec 1 -o $WORK/t.svg" \
	"heat map (log latency), 1 s columns|m|heatmap --stepsec 1 -o $WORK/t.svg" \
	"heat map (log latency), 1 s columns|s|heatmap --stepsec 1 -o $WORK/t.svg" \
	"heat map (log latency), columns chosen for the data (~200 ms: narrower than a block)|s|heatmap -o $WORK/t.svg" \
	"heat map, 10 ms columns (narrower than a block: no shortcut)|s|heatmap --stepsec 0.01 -o $WORK/t.svg" \
	"heat map, 4 maps (--per proc)|t|heatmap --per proc -o $WORK/tp.svg" \
	"histogram|t|hist" \
	"histogram|s|hist" \
	"histogram, filter '$ALL' (no shortcut)|s|hist|$ALL" \
	"spectrogram rows (--plain --no-pace)|t|spectrogram --plain --no-pace --width 209" \
	"spectrogram rows (--plain --no-pace)|m|spectrogram --plain --no-pace --width 209" \
	"spectrogram rows (--plain --no-pace)|s|spectrogram --plain --no-pace --width 209" \
	"spectrogram rows, 10 ms rows (no shortcut)|s|spectrogram --plain --no-pace --width 209 10" \
	"top --by proc|t|top --by proc" \
	"timeline|t|timeline" \
	"timeline|s|timeline"; do
	IFS='|' read -r name trace cmd filter <<<"$v"
	# shellcheck disable=SC2206
	args=($cmd)
	args=("${args[0]}" -r "$WORK/$trace.lst" "${args[@]:1}")
	[ -n "$filter" ] && args+=("$filter")
	case $trace in
	t) what="syscalls + block requests, blocks by kind" ;;
	m) what="syscalls + block requests, mixed blocks" ;;
	*) what="syscalls only" ;;
	esac
	c=$(cpu taskset -c 0 "$LS" "${args[@]}")
	printf '| %s, binary trace, %s (1 core) | %s M events | %.3f s CPU | %.1f M events/s per core | target 50 M/s |\n' \
		"$name" "$what" "$(echo "$EVENTS / 1000000" | bc)" "$c" "$(echo "$EVENTS / $c / 1000000" | bc -l)"
done
