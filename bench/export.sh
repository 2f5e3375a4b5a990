#!/usr/bin/env bash
# Speed of `latscope export --parquet`, printed as a Markdown table, next to anchors run on the
# same trace in the same run:
#
# - reading the trace: `latscope info` (decodes and checks every column, as the export must) and
#   `latscope hist` (reads the latency column only);
# - pyarrow converting the same trace to Parquet (read the Arrow stream, write zstd Parquet: the
#   trace's own 23 columns, no names or wall-clock times added), and DuckDB writing it
#   (`COPY ... (FORMAT parquet, COMPRESSION zstd)`, from the table pyarrow read), when they are
#   installed.
#
# Rates are events per second of CPU time of all threads (perf's task-clock when perf is
# installed, else user + system time): "per core". The wall-clock column shows what the second
# thread (latscope) or DuckDB's threads buy on this machine.
#
# `latscope export --perfetto` on the same trace, and on one laid out as a `record --why`
# recording (every call woken by another thread: the links the export holds slices for), each
# compared with `latscope export --parquet` of that same trace, with
# the peak resident size of the Perfetto export of traces of EVENTS and EVENTS/5 events (memory
# must not grow with the trace).
#
# As root, a real `record --why` recording of rsync and tar too (REAL=0 skips it), its Perfetto
# export compared with its Parquet export.
#
# Environment: LATSCOPE (default target/$PROFILE/latscope), EVENTS (default 5000000), REPS (3),
# BASE (a previous latscope binary: its Parquet and Perfetto exports in the same run), PROFILE (cargo profile of the
# builds, default release; `ci` reuses the test build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
host_line
EVENTS=${EVENTS:-5000000}
REPS=${REPS:-3}

build_synth
"$SYNTH" "$WORK/t.lst" "$EVENTS" 2>/dev/null

# Median of REPS runs: "cpu_seconds wall_seconds".
measure() {
	local all=()
	for _ in $(seq "$REPS"); do
		rm -rf "$WORK/out" "$WORK"/out.*
		local s e c
		s=$(date +%s.%N)
		c=$(cpu_once "$@") || { cat "$WORK/err" >&2; exit 1; }
		e=$(date +%s.%N)
		all+=("$c $(echo "$e - $s" | bc -l)")
	done
	median "${all[@]}"
}

size_of() { du -cb "$@" 2>/dev/null | tail -1 | cut -f1; }

row() { # name, "cpu wall", output bytes (or empty), reference cpu (or empty)
	local name=$1 cpu=${2% *} wall=${2#* } bytes=$3 ref=$4
	local per=""
	[ -n "$bytes" ] && per=$(printf '%.1f' "$(echo "$bytes / $EVENTS" | bc -l)")
	local vs=""
	[ -n "$ref" ] && vs=$(printf '%.2fx' "$(echo "$ref / $cpu" | bc -l)")
	printf '| %s | %.2f s | %.1f M/s | %.2f s | %.1f M/s | %s | %s |\n' "$name" "$cpu" \
		"$(echo "$EVENTS / $cpu / 1000000" | bc -l)" "$wall" "$(echo "$EVENTS / $wall / 1000000" | bc -l)" "$per" "$vs"
}

# The Parquet and the Perfetto export of a trace, and the previous build's Perfetto export when
# BASE is given, each compared with that Parquet export: perfetto_rows TRACE LABEL.
perfetto_rows() {
	local trace=$1 label=$2 pq
	pq=$(measure "$LS" export -q -r "$trace" --parquet "$WORK/out.parquet")
	row "latscope export --parquet, $label" "$pq" "$(size_of "$WORK/out.parquet")" "${pq% *}"
	row "latscope export --perfetto, $label" \
		"$(measure "$LS" export -q -r "$trace" --perfetto "$WORK/out.pftrace" --max-size 64GiB)" \
		"$(size_of "$WORK/out.pftrace")" "${pq% *}"
	if [ -n "${BASE:-}" ]; then
		row "previous version ($BASE) --perfetto, $label" \
			"$(measure "$BASE" export -q -r "$trace" --perfetto "$WORK/out.pftrace" --max-size 64GiB)" \
			"$(size_of "$WORK/out.pftrace")" "${pq% *}"
	fi
}

echo "Trace: $EVENTS synthetic events (syscalls and block requests, as latscope record lays them out), $(size_of "$WORK/t.lst") bytes."
echo
echo "| what | CPU | events/s per core | wall | events/s wall | bytes/event | speed per core vs latscope export (one file) |"
echo "|---|---|---|---|---|---|---|"
one=$(measure "$LS" export -q -r "$WORK/t.lst" --parquet "$WORK/out.parquet")
bytes=$(size_of "$WORK/out.parquet")
row "latscope export, one file" "$one" "$bytes" "${one% *}"
part=$(measure "$LS" export -q -r "$WORK/t.lst" --parquet "$WORK/out")
row "latscope export, partitioned" "$part" "$(size_of "$WORK/out/events")" "${one% *}"
if [ -n "${BASE:-}" ]; then
	row "previous version ($BASE), one file" "$(measure "$BASE" export -q -r "$WORK/t.lst" --parquet "$WORK/out.parquet")" \
		"$(size_of "$WORK/out.parquet")" "${one% *}"
fi
row "read the trace, every column (latscope info)" "$(measure "$LS" info -r "$WORK/t.lst")" "" "${one% *}"
row "read the trace, latency only (latscope hist)" "$(measure "$LS" hist -r "$WORK/t.lst")" "" "${one% *}"

if python3 -c 'import pyarrow' 2>/dev/null; then
	cat >"$WORK/pa.py" <<'EOF'
import sys, pyarrow.ipc as ipc, pyarrow.parquet as pq
t = ipc.open_stream(sys.argv[1]).read_all()
pq.write_table(t, sys.argv[2], compression="zstd", compression_level=1, row_group_size=1 << 20)
EOF
	pa=$(measure python3 "$WORK/pa.py" "$WORK/t.lst" "$WORK/out.pa.parquet")
	row "pyarrow: trace to Parquet (zstd 1, trace's own columns)" "$pa" "$(size_of "$WORK/out.pa.parquet")" "${one% *}"
	if python3 -c 'import duckdb' 2>/dev/null; then
		cat >"$WORK/duck.py" <<'EOF'
import sys, duckdb, pyarrow.ipc as ipc
events = ipc.open_stream(sys.argv[1]).read_all()
duckdb.sql(f"COPY (SELECT * FROM events) TO '{sys.argv[2]}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1048576)")
EOF
		dk=$(measure python3 "$WORK/duck.py" "$WORK/t.lst" "$WORK/out.duck.parquet")
		row "DuckDB: trace (via pyarrow) to Parquet (zstd, trace's own columns)" "$dk" "$(size_of "$WORK/out.duck.parquet")" "${one% *}"
	fi
else
	echo
	echo "(pyarrow not installed: no pyarrow or DuckDB anchor)"
fi

echo
echo "Perfetto export (\`latscope export --perfetto\`), same trace and a --why layout of it, each compared with"
echo "the Parquet export of the same trace, measured in this run:"
echo
echo "| what | CPU | events/s per core | wall | events/s wall | bytes/event | speed per core vs latscope export --parquet of the same trace |"
echo "|---|---|---|---|---|---|---|"
perfetto_rows "$WORK/t.lst" "synthetic server"
"$SYNTH" "$WORK/why.lst" "$EVENTS" 20 why 2>/dev/null
# The --why layout's columns (the breakdown, the waker) are more to read and write in either
# format: its Perfetto export is compared with its own Parquet export.
perfetto_rows "$WORK/why.lst" "--why layout (flows)"
if [ -n "${BASE:-}" ]; then
	# The speed of the --why layout is only comparable on the same output.
	"$LS" export -q -r "$WORK/why.lst" --perfetto "$WORK/new.pftrace" --max-size 64GiB >/dev/null
	"$BASE" export -q -r "$WORK/why.lst" --perfetto "$WORK/old.pftrace" --max-size 64GiB >/dev/null
	cmp -s "$WORK/new.pftrace" "$WORK/old.pftrace" && echo "(--why layout: byte-identical to the previous version's file)" ||
		echo "(--why layout: the file differs from the previous version's)"
	rm -f "$WORK/new.pftrace" "$WORK/old.pftrace"
fi
rm -f "$WORK/t.lst" "$WORK/out.pftrace"

# A real `record --why` recording: rsync copying /usr/share, tar piping a library directory to
# cat. Its calls are woken by other threads and by block requests as programs are (far fewer
# than in the --why layout above, where every call is), and carry their intervals off the CPU
# (the part slices the Perfetto export writes inside each call).
if [ "$(id -u)" = 0 ] && [ "${REAL:-1}" = 1 ] && command -v rsync >/dev/null; then
	mkdir -p "$WORK/rs"
	if "$LS" record --why -w "$WORK/real.lst" -- sh -c "rsync -a /usr/share/ '$WORK/rs/'; tar cf - /usr/lib/x86_64-linux-gnu /usr/lib64 2>/dev/null | cat >/dev/null" \
		>/dev/null 2>"$WORK/err"; then
		saved=$EVENTS
		EVENTS=$("$LS" info -r "$WORK/real.lst" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])')
		echo
		echo "A real \`record --why\` recording (rsync -a /usr/share, tar | cat): $EVENTS events, $(size_of "$WORK/real.lst") bytes."
		echo
		echo "| what | CPU | events/s per core | wall | events/s wall | bytes/event | speed per core vs latscope export --parquet of the same trace |"
		echo "|---|---|---|---|---|---|---|"
		perfetto_rows "$WORK/real.lst" "real --why recording"
		"$LS" export -r "$WORK/real.lst" --perfetto "$WORK/out.pftrace" --max-size 64GiB 2>&1 | grep -E '^(flows|parts):' || true
		EVENTS=$saved
	else
		echo
		echo "(no real recording: latscope record --why failed: $(tail -1 "$WORK/err"))"
	fi
	rm -rf "$WORK/rs" "$WORK/real.lst" "$WORK/out.pftrace" "$WORK/out.parquet"
else
	echo
	echo "(no real recording: needs root and rsync; REAL=0 skips it)"
fi

small=$((EVENTS / 5))
"$SYNTH" "$WORK/small.lst" "$small" 20 why 2>/dev/null
rs=$(peak "$LS" export -q -r "$WORK/small.lst" --perfetto "$WORK/s.pftrace" --max-size 64GiB)
rb=$(peak "$LS" export -q -r "$WORK/why.lst" --perfetto "$WORK/b.pftrace" --max-size 64GiB)
echo
echo "Peak resident size of the Perfetto export (--why layout): $small events $((rs / 1024)) MiB, $EVENTS events $((rb / 1024)) MiB."
