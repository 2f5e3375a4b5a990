#!/usr/bin/env bash
# Speed of latscope's views, printed as a Markdown table:
#
# 1. a heat map from 1 M lines of trace2heatmap.pl's two-column text, on all cores and on one,
#    next to trace2heatmap.pl itself when it is installed (it is not packaged in Debian: otherwise
#    the figure measured on this kind of machine, ~2.9 s for 1 M lines, is the reference);
# 2. a heat map and a histogram from a binary latscope trace of EVENTS synthetic events, on one
#    core (taskset -c 0), in events per second of CPU time (user + sys).
#
# Environment: LATSCOPE (default target/release/latscope), EVENTS (default 10000000), REPS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
LS=${LATSCOPE:-target/release/latscope}
EVENTS=${EVENTS:-10000000}
REPS=${REPS:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if [ ! -x "$LS" ]; then
	cargo build --release --locked -p latscope >&2
fi
cargo build --release --locked -p latscope --example synth_trace >&2
SYNTH=target/release/examples/synth_trace

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
	printf '%s\n' "${best[@]}" | sort -n | sed -n "$(((REPS + 1) / 2))p"
}

# Median CPU seconds (user + sys) of REPS runs.
cpu() {
	local all=()
	for _ in $(seq "$REPS"); do
		/usr/bin/time -o "$WORK/time" -f "%U %S" "$@" >/dev/null 2>&1
		all+=("$(awk '{print $1 + $2}' "$WORK/time")")
	done
	printf '%s\n' "${all[@]}" | sort -n | sed -n "$(((REPS + 1) / 2))p"
}

echo "| view | input | time | rate | vs reference |"
echo "|---|---|---|---|---|"
ref=2.9
ref_note="REFERENCE.md figure (trace2heatmap.pl not installed)"
if command -v trace2heatmap.pl >/dev/null 2>&1; then
	ref=$(wall trace2heatmap.pl --unitstime=us --unitslatency=us "$WORK/lat1m.txt")
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

"$SYNTH" "$WORK/t.lst" "$EVENTS" 2>/dev/null
for v in "heat map (log latency)|heatmap -r $WORK/t.lst -o $WORK/t.svg" \
	"heat map, 4 maps (--per proc)|heatmap -r $WORK/t.lst --per proc -o $WORK/tp.svg" \
	"histogram|hist -r $WORK/t.lst" \
	"top --by proc|top -r $WORK/t.lst --by proc" \
	"timeline|timeline -r $WORK/t.lst"; do
	name=${v%%|*}
	# shellcheck disable=SC2206
	args=(${v#*|})
	c=$(cpu taskset -c 0 "$LS" "${args[@]}")
	printf '| %s, binary trace (1 core) | %s M events | %.3f s CPU | %.1f M events/s per core | target 50 M/s |\n' \
		"$name" "$(echo "$EVENTS / 1000000" | bc)" "$c" "$(echo "$EVENTS / $c / 1000000" | bc -l)"
done
