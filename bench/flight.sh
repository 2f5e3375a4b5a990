#!/usr/bin/env bash
# The flight recorder (`record --ring`) against plain `record` writing every event to a file, in
# the same run:
#  1. CPU added per syscall of a tight read()/getppid() loop (bench/readloop.c), under record,
#     a ring with a manual trigger only, and a ring with a call and a percentile trigger too: in
#     the loop's own time (the probes' programs, which both run alike) and in latscope's process (decoding,
#     encoding, writing or keeping in the ring, testing the triggers), per event, as the sum;
#     rounds interleaved, medians of REPS;
#  2. memory: latscope's peak RSS at paced rates, with rings of MEM_RINGS (4 MiB, 16 MiB, 64 MiB),
#     what each ring held at the end and the bound latscope printed at its start, next to
#     `record`'s;
#  3. from a trigger to the dump: readable at its name (the window before the trigger written) and
#     complete (the window after it has passed, --after 0s), and the dump's size;
#  4. the highest paced rate kept without loss, for both.
# The machine may be shared (other builds, other benchmarks): medians of interleaved rounds, CPU
# time rather than wall time. Prints Markdown tables; run as root: bash bench/flight.sh
#   REPS (3), N (loop calls per round, 2000000), DUR (s per paced run, 5), MEM_DUR (s per memory
#   run, 8: long enough to fill the rings at the higher rates), RATES (events/s), MEM_RATES
#   (events/s of part 2, 20000 500000), MEM_RINGS (rings of part 2), PARTS (which of the four
#   parts to run, 1234: e.g. PARTS=1 for the CPU figures alone).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
need_latscope
need_root "the probes are eBPF programs"
REPS=${REPS:-3}
N=${N:-2000000}
DUR=${DUR:-5}
MEM_DUR=${MEM_DUR:-8}
RATES=${RATES:-250000 500000 1000000 1500000}
MEM_RATES=${MEM_RATES:-20000 500000}
MEM_RINGS=${MEM_RINGS:-4MiB 16MiB 64MiB}
PARTS=${PARTS:-1234}
part() { [[ $PARTS == *$1* ]]; }
TRACER=""
cleanup() {
	[ -n "$TRACER" ] && kill -INT "$TRACER" 2>/dev/null && wait "$TRACER" 2>/dev/null
	bench_cleanup
}
trap cleanup EXIT
cc -O2 -o "$WORK/readloop" bench/readloop.c
mkdir -p "$WORK/dumps"
TRIGGERS=(--trigger 'slow: evt.latency > 1s and proc.name = readloop' --trigger 'p: p99 of (proc.name = readloop) over 10s > 1s' --trigger 'now: manual')
start() { # mode [ring] -> TRACER (latscope recording -c readloop, waited until attached)
	local mode=$1 ring=${2:-64MiB}
	rm -rf "$WORK/t.lst" "$WORK/t.lst.old" "$WORK/dumps"/*
	local trig=("${TRIGGERS[@]}")
	[ "$mode" = ring1 ] && trig=(--trigger 'now: manual')
	case $mode in
	record) "$LS" record -w "$WORK/t.lst" --quiet --json --no-block -c readloop >"$WORK/out.json" 2>"$WORK/err" & ;;
	ring | ring1) "$LS" record -w "$WORK/dumps" --ring "$ring" --json --no-block -c readloop --after 0s --min-gap 0 \
		--socket "$WORK/t.sock" "${trig[@]}" >"$WORK/out.json" 2>"$WORK/err" & ;;
	esac
	TRACER=$!
	wait_attached "$TRACER"
}
wait_attached() { # pid: until its BPF programs are attached (links made; a loaded machine takes seconds), then 1 s
	for _ in $(seq 600); do
		if grep -qs link_type /proc/"$1"/fdinfo/* 2>/dev/null; then
			sleep 1
			return
		fi
		sleep 0.1
	done
	echo "latscope did not attach its probes within 60 s" >&2
	exit 1
}
stop() {
	kill -INT "$TRACER"
	wait "$TRACER" || true
	TRACER=""
}
proc_cpu_ns() { # pid -> user+system ns of all its threads
	awk '{print ($14 + $15) * 10000000}' /proc/"$1"/stat
}
lost() { # the recording's losses, from its JSON summary
	python3 -c "import json; l=[json.loads(x) for x in open('$WORK/out.json') if x.strip()]; print(l[-1]['lost'])"
}

host_line
if part 1; then
echo
echo "### CPU per syscall ($N calls per round, $REPS rounds interleaved, medians)"
echo
declare -A loop_cpu rec_cpu
for r in $(seq "$REPS"); do
	read -r _ c <<<"$("$WORK/readloop" "$N" 0 mix)"
	loop_cpu[none,$r]=$c
	for mode in record ring1 ring; do
		start "$mode"
		before=$(proc_cpu_ns "$TRACER")
		read -r _ c <<<"$("$WORK/readloop" "$N" 0 mix)"
		sleep 1.5 # the last blocks flushed and encoded
		after=$(proc_cpu_ns "$TRACER")
		stop
		loop_cpu[$mode,$r]=$c
		rec_cpu[$mode,$r]=$(awk -v a="$after" -v b="$before" -v n="$N" 'BEGIN {printf "%.1f", (a - b) / n}')
	done
done
med() { # key -> median over rounds of the array named $1
	local -n arr=$1
	local v=()
	for r in $(seq "$REPS"); do v+=("${arr[$2,$r]}"); done
	median "${v[@]}"
}
base=$(med loop_cpu none)
echo "| latscope | loop CPU ns/call | added in the loop (probes) | latscope's process, CPU ns/event | added CPU ns/syscall in all | vs record |"
echo "|---|---|---|---|---|---|"
rec_total=""
for mode in record ring1 ring; do
	lc=$(med loop_cpu "$mode")
	pc=$(med rec_cpu "$mode")
	total=$(awk -v l="$lc" -v b="$base" -v p="$pc" 'BEGIN {printf "%.0f", l - b + p}')
	[ -z "$rec_total" ] && rec_total=$total
	case $mode in
	record) label="record -w FILE" ;;
	ring1) label="record --ring 64MiB, a manual trigger only" ;;
	ring) label="record --ring 64MiB, 3 triggers (call, percentile, manual)" ;;
	esac
	echo "| $label | $lc | $(awk -v l="$lc" -v b="$base" 'BEGIN {printf "%.0f", l - b}') | $pc | $total | $(awk -v t="$total" -v r="$rec_total" 'BEGIN {printf "%.2fx", t / r}') |"
done
echo "(no tracing: $base CPU ns/call)"
fi

rss_at() { # mode ring rate secs -> "peak_rss_MB lost ring_MiB ring_s loop_rate bound_MB"
	start "$1" "$2"
	local w
	read -r w _ <<<"$("$WORK/readloop" $(($3 * $4)) "$3" mix)"
	sleep 1
	local rss
	rss=$(awk '/VmHWM/ {print $2}' /proc/"$TRACER"/status)
	stop
	python3 -c "import json; ls=[json.loads(x) for x in open('$WORK/out.json') if x.strip()]; l=ls[-1]; b=[x['memory_bound_bytes'] for x in ls if 'memory_bound_bytes' in x]; print($rss // 1024, l['lost'], round(l.get('ring_bytes', 0) / 2**20, 1), round(l.get('ring_span_s', 0), 1), round(1e9 / $w), round(b[0] / 1e6) if b else '-')"
}
if part 2; then
echo
echo "### Memory: peak RSS at a paced rate ($MEM_DUR s each: the rings fill)"
echo
hdr="| target events/s | record -w FILE |"
sep="|---|---|"
for ring in $MEM_RINGS; do
	hdr+=" --ring $ring: peak RSS / bound printed (the ring held at the end) |"
	sep+="---|"
done
echo "$hdr"
echo "$sep"
for rate in $MEM_RATES; do
	read -r a la _ <<<"$(rss_at record - "$rate" "$MEM_DUR")"
	row="| $rate | $a MB (lost $la) |"
	for ring in $MEM_RINGS; do
		read -r b lb bb bs _ bd <<<"$(rss_at ring "$ring" "$rate" "$MEM_DUR")"
		row+=" $b MB / $bd MB ($bb MiB, $bs s; lost $lb) |"
	done
	echo "$row"
done
fi

if part 3; then
echo
echo "### From a trigger to the dump (ring 30s, paced at 500000 events/s, --after 0s; 3 dumps)"
echo
echo "| dump | events | size | from the trigger to the file at its name (the window before written) | to the complete file (--after 0s: the 1.3 s a block may take to arrive, then the rest) |"
echo "|---|---|---|---|---|"
start ring 30s
"$WORK/readloop" $((500000 * 20)) 500000 mix >/dev/null &
LOOP=$!
sleep 8
for i in 1 2 3; do
	"$LS" trigger now --socket "$WORK/t.sock" >/dev/null
	sleep 3
done
wait "$LOOP" || true
stop
python3 - "$WORK/out.json" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") == "dumped":
        print(f"| {e['file'].split('/')[-1]} | {e['events']} | {e['bytes'] / 2**20:.1f} MiB | {e['readable_after_s'] * 1000:.0f} ms | {e['complete_after_s'] * 1000:.0f} ms |")
PY
fi

if part 4; then
echo
echo "### Events per second kept without loss ($DUR s each, paced; the loop's own rate is what it reached)"
echo
echo "| target events/s | loop reached | record -w FILE: lost | --ring 64MiB: lost |"
echo "|---|---|---|---|"
for rate in $RATES 2000000; do
	read -r _ la _ _ ra _ <<<"$(rss_at record - "$rate" "$DUR")"
	read -r _ lb _ _ rb _ <<<"$(rss_at ring 64MiB "$rate" "$DUR")"
	echo "| $rate | $ra / $rb | $la | $lb |"
done
fi
