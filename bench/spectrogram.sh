#!/usr/bin/env bash
# What the spectrogram costs, next to the anchors, measured in the same run:
#  1. added ns per syscall of a tight loop of 1-byte read()s of /dev/zero (bench/spectrogram-loop.c:
#     CPU time of the loop's thread per call, user + system, so that a busy machine does not
#     count) while a live spectrogram runs (in-kernel histograms: no filter, a pushed-down filter; the event stream), next to
#     `latscope record`, libbpf-tools `syscount -L` and bpftrace's per-tid start map + hist();
#  2. the rate at which a trace file is turned into rows (events per second per core of CPU time),
#     next to trace2heatmap.pl's published ~350 k lines/s, and the view's own counting rate.
# Prints Markdown tables. Run as root: bash bench/spectrogram.sh  (N=... REPS=... to change the size;
# BASE=path/to/old/latscope adds a previous build's rows, in the same run)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
host_line
need_latscope
need_root "the live spectrogram loads eBPF programs"
# The loop gets a name of its own (its comm) so that other benchmarks' filters do not pick it up.
# The anchors (syscount, bpftrace) attach classic tracepoints, which need tracefs mounted.
mount_tracefs
LOOP="$WORK/sgloop"
cc -O2 -o "$LOOP" bench/spectrogram-loop.c
N=${N:-3000000}
REPS=${REPS:-5}

# shellcheck source=lib/overhead.sh
. bench/lib/overhead.sh

echo "## Live spectrogram: added cost per syscall (tight read() loop, $N calls, best of $REPS, CPU time)"
echo
base=$(loop_ns)
results=("nothing|$base")
results+=("$(with "latscope spectrogram (all syscalls, in-kernel histograms)" "$LS" spectrogram --plain -d 600s)")
results+=("$(with "latscope spectrogram proc.name=sgloop (in-kernel, comm pushed down)" "$LS" spectrogram --plain -d 600s proc.name=sgloop)")
results+=("$(with "latscope spectrogram --by syscall (in-kernel, per-syscall histograms)" "$LS" spectrogram --plain --by syscall -d 600s)")
results+=("$(with "latscope spectrogram --stream proc.name=sgloop (event stream, user-space counting)" "$LS" spectrogram --plain --stream -d 600s proc.name=sgloop)")
results+=("$(with "latscope record -c sgloop (every event to a file)" "$LS" record -w "$WORK/r.lst" --quiet --no-block -c sgloop)")
# A previous build (BASE=path/to/old/latscope), in the same run.
if [ -n "${BASE:-}" ]; then
	results+=("$(with "previous build: spectrogram (all syscalls, in-kernel histograms)" "$BASE" spectrogram --plain -d 600s)")
	results+=("$(with "previous build: spectrogram proc.name=sgloop (in-kernel, comm pushed down)" "$BASE" spectrogram --plain -d 600s proc.name=sgloop)")
	results+=("$(with "previous build: record -c sgloop (every event to a file)" "$BASE" record -w "$WORK/r0.lst" --quiet --no-block -c sgloop)")
fi
if command -v syscount >/dev/null; then
	results+=("$(with "syscount -L (libbpf-tools, in-kernel counts and latency totals)" syscount -L)")
fi
if command -v bpftrace >/dev/null; then
	results+=("$(with "bpftrace per-tid start + hist()" bpftrace -e 'tracepoint:raw_syscalls:sys_enter { @s[tid] = nsecs; } tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }')")
fi
# The floor (bench/floor): what any raw_syscalls latency tracer pays before doing anything.
if FLOOR=$(bash bench/floor/build.sh "$WORK"); then
	results+=("$(with "floor: two empty programs on sys_enter/sys_exit" "$FLOOR" 0)")
	results+=("$(with "floor: minimal latency histogram (task storage, 2 clock reads, 1 counter)" "$FLOOR" 1)")
fi
sc_added=""
for r in "${results[@]}"; do
	name=${r%|*}
	ns=${r##*|}
	[[ $name == syscount* ]] && sc_added=$(awk -v a="$ns" -v b="$base" 'BEGIN{printf "%.0f", a-b}')
done
echo "| running alongside | ns per syscall | added ns | added / syscount's added |"
echo "|---|---|---|---|"
for r in "${results[@]}"; do
	name=${r%|*}
	ns=${r##*|}
	added=$(awk -v a="$ns" -v b="$base" 'BEGIN{printf "%.0f", a-b}')
	ratio=$(awk -v a="$added" -v s="${sc_added:-0}" 'BEGIN{ if (s>0) printf "%.2f", a/s; else print "-" }')
	echo "| $name | $ns | $added | $ratio |"
done
echo
echo "Target: the default live spectrogram adds < 100 ns per syscall (syscount -L adds ~330 ns here)."
echo

echo "## Trace file to rows"
echo
# A trace of the loop: every read() recorded.
"$LS" record -w "$WORK/t.lst" --quiet --no-block -c sgloop >/dev/null 2>&1 &
rec=$!
PIDS+=("$rec")
sleep "${ATTACH_WAIT:-3}"
"$LOOP" "${FILE_EVENTS:-4000000}" >/dev/null
sleep 1
kill -INT "$rec"
wait "$rec" 2>/dev/null || true
events=$("$LS" info -r "$WORK/t.lst" 2>/dev/null | awk '/^events:/ {print $2}')
echo "| command | events | CPU s (user+sys) | wall s | events/s per core | vs trace2heatmap.pl (350 k lines/s) |"
echo "|---|---|---|---|---|---|"
rate_row() { # label, args...
	local label=$1
	shift
	local best=""
	local bestwall=""
	for _ in 1 2 3; do
		/usr/bin/time -f "%U %S %e" -o "$WORK/time" "$LS" spectrogram -r "$WORK/t.lst" --plain --width 209 "$@" >/dev/null
		read -r u s e <"$WORK/time"
		cpu=$(awk -v u="$u" -v s="$s" 'BEGIN{printf "%.3f", u+s}')
		if [ -z "$best" ] || awk -v a="$cpu" -v b="$best" 'BEGIN{exit !(a<b)}'; then
			best=$cpu
			bestwall=$e
		fi
	done
	local rate
	rate=$(awk -v n="$events" -v c="$best" 'BEGIN{ if (c>0) printf "%.1f M", n/c/1e6; else print "-" }')
	local ratio
	ratio=$(awk -v n="$events" -v c="$best" 'BEGIN{ if (c>0) printf "%.0fx", n/c/350000; else print "-" }')
	echo "| spectrogram -r $label | $events | $best | $bestwall | $rate | $ratio |"
}
rate_row "(no filter: ts, lat columns)"
rate_row "'evt.type=read' (whole events, filter)" "evt.type=read"
rate_row "--by syscall" --by syscall
echo
echo "Target: 50 M events/s per core. The view's own counting (no file reading):"
if command -v cargo >/dev/null; then
	cargo bench -q -p latscope-view --bench spectrogram 2>/dev/null | sed 's/^/    /' || echo "    (cargo bench failed)"
fi
