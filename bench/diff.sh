#!/usr/bin/env bash
# Speed of `latscope diff` against two `latscope hist` runs, printed as a Markdown table: two
# synthetic traces of EVENTS events each (a busy server, BusyServer in latscope_trace::synth: one
# with a block request every 20 events, one every 25), compared with the default groupings
# (syscall, disk), with every grouping (--by all: syscall, proc, file, disk), and drawn (--svg,
# --heatmap); next to `hist -r A` plus `hist -r B` (the anchor: the same files read twice by the
# fastest view). Wall seconds (median of REPS runs) and CPU seconds (user + system, all threads).
#
# With BASE (a previous latscope binary), the same runs of it follow, each against this build's
# two `hist` runs: the change measured in the same run.
#
# Environment: LATSCOPE (default target/$PROFILE/latscope), BASE (a previous latscope binary),
# EVENTS (default 5000000), REPS (3), PROFILE (cargo profile of the builds, default release;
# `ci` reuses the test build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
EVENTS=${EVENTS:-5000000}
REPS=${REPS:-3}
BASE=${BASE:-}
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "BASE=$BASE: not an executable latscope"; exit 1; }

build_synth
"$SYNTH" "$WORK/a.lst" "$EVENTS" 20 2>/dev/null
"$SYNTH" "$WORK/b.lst" "$EVENTS" 25 2>/dev/null

# Median wall seconds of REPS runs of a command.
wall() {
	local all=()
	for _ in $(seq "$REPS"); do
		local s e
		s=$(date +%s.%N)
		"$@" >/dev/null 2>&1
		e=$(date +%s.%N)
		all+=("$(echo "$e - $s" | bc -l)")
	done
	median "${all[@]}"
}

host_line
echo
echo "| command | wall | CPU | vs two hist runs (wall, CPU) |"
echo "|---|---|---|---|"
# The anchor and the diffs of one binary ($1), named with $2; the anchor is this build's.
rows() {
	local bin=$1 who=$2
	local hw hc
	hw=$(echo "$(wall "$bin" hist -r "$WORK/a.lst") + $(wall "$bin" hist -r "$WORK/b.lst")" | bc -l)
	hc=$(echo "$(cpu "$bin" hist -r "$WORK/a.lst") + $(cpu "$bin" hist -r "$WORK/b.lst")" | bc -l)
	if [ -z "${h_wall:-}" ]; then
		h_wall=$hw
		h_cpu=$hc
	fi
	printf '| %shist -r A; hist -r B (%s M events each) | %.3f s | %.3f s | %.2fx, %.2fx |\n' "$who" "$(echo "$EVENTS / 1000000" | bc)" \
		"$hw" "$hc" "$(echo "$hw / $h_wall" | bc -l)" "$(echo "$hc / $h_cpu" | bc -l)"
	for v in "diff A B (syscall, disk)|" "diff A B --by all (syscall, proc, file, disk)|--by all" \
		"diff A B --svg --heatmap|--svg $WORK/h.svg --heatmap $WORK/m.svg"; do
		IFS='|' read -r name extra <<<"$v"
		# shellcheck disable=SC2206
		args=(diff "$WORK/a.lst" "$WORK/b.lst" $extra)
		w=$(wall "$bin" "${args[@]}")
		c=$(cpu "$bin" "${args[@]}")
		printf '| %s%s | %.3f s | %.3f s | %.2fx, %.2fx |\n' "$who" "$name" "$w" "$c" "$(echo "$w / $h_wall" | bc -l)" "$(echo "$c / $h_cpu" | bc -l)"
	done
}
rows "$LS" ""
if [ -n "$BASE" ]; then
	rows "$BASE" "previous build: "
fi
