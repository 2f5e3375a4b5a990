#!/usr/bin/env bash
# Speed of `latscope events` (one line per event) and `events --json`, printed as a Markdown
# table in events per second of CPU time (user + system, one core: taskset -c 0; output to
# /dev/null, so the figure is latscope's own work), next to `hist` reading the same trace (the
# fastest view: the cost of reading the file) and to a previous build (BASE) in the same run.
#
# Traces: a recording (as root with BPF: `latscope record` of the whole machine for RECORD_SECS
# while a tight loop of read()/getppid() calls runs, about a million events on this kind of
# machine; TRACE=path uses a trace of your own instead), EVENTS synthetic events of a busy
# server (latscope_trace::synth: paths, several processes, a block request every 20 events), and
# EVENTS/2 of the same laid out as a `record --why` recording (every call with a breakdown and
# a waker: `events --json` writes each call's `why` object).
# As root, also a `record --why` of a shell that runs a paced loop for 10 s (40 k calls/s) and
# then `ls`: its `wait4` for the loop is longer than the window.
# All are printed in the order of their start time with the default 5 s reorder window; the
# peak resident size of each command is printed beside its time (a trace file's blocks say where
# they begin, so little is held unless a call as long as the window is under way).
#
# Environment: LATSCOPE (default target/$PROFILE/latscope), BASE (a previous latscope binary),
# TRACE, RECORD_SECS (default 5), EVENTS (default 2000000), REPS (3), PROFILE (cargo profile of
# the builds, default release; `ci` reuses the test build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
EVENTS=${EVENTS:-2000000}
REPS=${REPS:-3}
RECORD_SECS=${RECORD_SECS:-5}
BASE=${BASE:-}
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "BASE=$BASE: not an executable latscope"; exit 1; }

build_synth
"$SYNTH" "$WORK/synth.lst" "$EVENTS" 20 2>/dev/null
"$SYNTH" "$WORK/why.lst" $((EVENTS / 2)) 20 why 2>/dev/null
traces=("synthetic busy server|$WORK/synth.lst" "synthetic busy server, as recorded with --why|$WORK/why.lst")
if [ -n "${TRACE:-}" ]; then
	traces=("given trace ($TRACE)|$TRACE" "${traces[@]}")
elif [ "$(id -u)" = 0 ]; then
	cc -O2 -o "$WORK/readloop" bench/readloop.c
	"$WORK/readloop" 100000000 300000 mix >/dev/null &
	PIDS+=("$!")
	if "$LS" record -w "$WORK/rec.lst" -d "${RECORD_SECS}s" --quiet 2>"$WORK/rec.err"; then
		traces=("recording of the machine, ${RECORD_SECS} s|$WORK/rec.lst" "${traces[@]}")
	else
		echo "(no recording: $(tail -1 "$WORK/rec.err"); synthetic trace only)"
	fi
	kill "${PIDS[-1]}" 2>/dev/null || true
	if "$LS" record --why -w "$WORK/shell.lst" --quiet -- sh -c "'$WORK/readloop' 400000 40000 mix >/dev/null; ls / >/dev/null" 2>"$WORK/rec.err"; then
		traces+=("record --why of a shell running a paced loop for 10 s|$WORK/shell.lst")
	else
		echo "(no --why recording: $(tail -1 "$WORK/rec.err"))"
	fi
else
	echo "(not root: no recording; synthetic trace only)"
fi

host_line
echo "(one CPU used)"
echo
echo "| trace | command | build | CPU | M events/s per core | speed vs previous build | CPU vs hist | peak RSS |"
echo "|---|---|---|---|---|---|---|---|"
for t in "${traces[@]}"; do
	name=${t%%|*}
	file=${t#*|}
	n=$("$LS" info --json -r "$file" | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])')
	h=$(cpu taskset -c 0 "$LS" hist -r "$file")
	printf '| %s, %.2f M events | hist | this | %.3f s | %.1f | | 1.00x | |\n' "$name" "$(echo "$n / 1000000" | bc -l)" "$h" "$(echo "$n / $h / 1000000" | bc -l)"
	for cmd in "events" "events --json"; do
		# shellcheck disable=SC2206
		args=($cmd -r "$file")
		b=""
		if [ -n "$BASE" ]; then
			b=$(cpu taskset -c 0 "$BASE" "${args[@]}")
			printf '| | %s | previous | %.3f s | %.2f | 1.00x | %.1fx | %s MiB |\n' "$cmd" "$b" "$(echo "$n / $b / 1000000" | bc -l)" "$(echo "$b / $h" | bc -l)" "$(($(peak "$BASE" "${args[@]}") / 1024))"
		fi
		c=$(cpu taskset -c 0 "$LS" "${args[@]}")
		vs=""
		[ -n "$b" ] && vs=$(printf '**%.2fx**' "$(echo "$b / $c" | bc -l)")
		printf '| | %s | this | %.3f s | %.2f | %s | %.1fx | %s MiB |\n' "$cmd" "$c" "$(echo "$n / $c / 1000000" | bc -l)" "$vs" "$(echo "$c / $h" | bc -l)" "$(($(peak "$LS" "${args[@]}") / 1024))"
	done
done
echo
echo "Target: at least 2 M events/s per core for both."
