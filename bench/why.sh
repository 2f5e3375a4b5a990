#!/usr/bin/env bash
# What per-call attribution (`record --why`) costs, against `record` without it and next to the
# tools that measure the same thing (libbpf-tools `offcputime`, `perf sched record`), in the
# same run. Two workloads (bench/whyloop.c): short calls that never block (1-byte read()s of
# /dev/zero), and two threads on one CPU passing a byte through pipes, where every read blocks
# (sched_switch and sched_waking fire for each call). With --stacks, user stacks are unwound from
# copies of the stack (--call-graph dwarf, the default) or walked by frame pointers (fp).
#
# The machine may be shared: the variants run round-robin, REPS rounds, and each figure is the
# median over the rounds, as wall-clock and CPU time (the workload's user + system, which
# includes what the programs do in its syscalls and switches). Then, with the kernel's BPF
# run-time statistics on (sysctl kernel.bpf_stats_enabled=1), the tracer's programs' run time
# (run_time_ns from /proc/PID/fdinfo of its program fds) per workload syscall: much steadier,
# but it counts the programs' bodies only (not the tracepoints' dispatch), and other tasks'
# switches during the run count too. perf sched runs no BPF program: no row there.
#
# Prints Markdown tables; run as root: bash bench/why.sh
#   REPS (rounds, 5), SHORT_N (reads, 1000000), BLOCK_N (round trips, 100000), ATTACH_WAIT (s, 2),
#   BASE=path/to/old/latscope adds a previous build's `record`, `record --why` and `record --why-above 1ms`
#   (with that build's defaults), in the same run; BASE_STACKS=1 its `record --why --stacks` too.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
host_line
# shellcheck source=bench/bpfstats.sh
. bench/bpfstats.sh
need_latscope
need_root "the tracers load eBPF programs"
BASE=${BASE:-}
REPS=${REPS:-5}
SHORT_N=${SHORT_N:-1000000}
BLOCK_N=${BLOCK_N:-100000}
ATTACH_WAIT=${ATTACH_WAIT:-2}
TRACER=""
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
	[ -n "$TRACER" ] && kill -INT "$TRACER" 2>/dev/null && wait "$TRACER" 2>/dev/null
	sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
	bench_cleanup
}
trap cleanup EXIT
mount_tracefs
# The workload has a command name of its own, which latscope's recordings filter on (-c).
LOOP="$WORK/whyloop"
cc -O2 -pthread -o "$LOOP" bench/whyloop.c
OFFCPU=$(command -v offcputime || { [ -x /usr/sbin/offcputime ] && echo /usr/sbin/offcputime; } || true)

# The variants: "label|command" (empty command: nothing runs alongside).
VARIANTS=("no tracing|")
VARIANTS+=("latscope record|$LS record -w $WORK/t.lst --quiet --no-block -c whyloop")
VARIANTS+=("latscope record --why|$LS record -w $WORK/t.lst --quiet --no-block -c whyloop --why")
VARIANTS+=("latscope record --why --stacks|$LS record -w $WORK/t.lst --quiet --no-block -c whyloop --why --stacks")
VARIANTS+=("latscope record --why --stacks --call-graph fp|$LS record -w $WORK/t.lst --quiet --no-block -c whyloop --why --stacks --call-graph fp")
VARIANTS+=("latscope record --why-above 1ms --stacks|$LS record -w $WORK/t.lst --quiet --no-block -c whyloop --why-above 1ms --stacks")
if [ -n "$BASE" ]; then
	# BASE's own defaults: a build from before stacks were opt-in takes them with --why.
	VARIANTS+=("previous build: record|$BASE record -w $WORK/t.lst --quiet --no-block -c whyloop")
	VARIANTS+=("previous build: record --why|$BASE record -w $WORK/t.lst --quiet --no-block -c whyloop --why")
	VARIANTS+=("previous build: record --why-above 1ms|$BASE record -w $WORK/t.lst --quiet --no-block -c whyloop --why-above 1ms")
	# BASE_STACKS=1: a BASE that has --stacks, with it (the stack maps' cost across builds).
	if [ -n "${BASE_STACKS:-}" ]; then
		VARIANTS+=("previous build: record --why --stacks|$BASE record -w $WORK/t.lst --quiet --no-block -c whyloop --why --stacks")
	fi
fi
[ -n "$OFFCPU" ] && VARIANTS+=("offcputime (libbpf-tools, all threads)|$OFFCPU")
if command -v perf >/dev/null && [[ $(perf sched record -h 2>&1 || true) == *--output* ]]; then
	VARIANTS+=("perf sched record -a|perf sched record -a -o $WORK/perf.data")
fi

# Sum of run_time_ns and run_cnt over the BPF programs process $1 holds, by a program's fd or by
# a link's (a program attached by a link may have no fd of its own left).
prog_time() {
	local ids
	ids=$(grep -h '^prog_id:' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
	bpf_progs | awk -v ids="$ids" 'BEGIN { n = split(ids, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
		want[$1] { t += $3; c += $4 } END { print t + 0, c + 0 }'
}

start_tracer() { # command: started, given time to attach; TRACER is its pid ("" for none)
	TRACER=""
	[ -z "$1" ] && return 0
	local cmd=$1
	# latscope's recordings write their summary (events, lost) beside the trace.
	[[ $cmd == *" -w $WORK/t.lst "* ]] && cmd="$cmd --json=$WORK/rec.json"
	# shellcheck disable=SC2086
	$cmd >/dev/null 2>&1 &
	TRACER=$!
	# latscope puts its trace file in place once its probes are attached (the verifier can
	# take seconds on a busy machine): wait for it, up to 60 s.
	if [[ $1 == *" -w $WORK/t.lst "* ]]; then
		local i
		for i in $(seq 600); do
			[ -e "$WORK/t.lst" ] && break
			kill -0 "$TRACER" 2>/dev/null || break
			sleep 0.1
		done
	fi
	sleep "$ATTACH_WAIT"
	kill -0 "$TRACER" 2>/dev/null || { TRACER=""; return 1; }
}

stop_tracer() {
	[ -z "$TRACER" ] && return 0
	kill -INT "$TRACER" 2>/dev/null || true
	wait "$TRACER" 2>/dev/null || true
	TRACER=""
	# latscope's own count of events it could not keep (its summary, --json=FILE).
	if [ -n "${1:-}" ] && [ -s "$WORK/rec.json" ]; then
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2] + "|" + str(d.get("lost", 0)) + "|" + str(d.get("events", 0)))' \
			"$WORK/rec.json" "$1" >>"$LOSS"
	fi
	rm -f "$WORK"/t.lst* "$WORK"/perf.data* "$WORK/rec.json"
}

# One round: every variant once, both workloads under it. Lines "round|label|workload|wall cpu calls".
run_round() {
	local r=$1 v label cmd w
	for v in "${VARIANTS[@]}"; do
		label=${v%%|*}
		cmd=${v#*|}
		if ! start_tracer "$cmd"; then
			echo "$r|$label|failed|0 0 1"
			continue
		fi
		for w in short block; do
			local n=$SHORT_N
			[ $w = block ] && n=$BLOCK_N
			echo "$r|$label|$w|$("$LOOP" $w "$n")"
		done
		stop_tracer "$label"
	done
}

# Kernel-side cost: each BPF tracer alone, stats on; "label|workload|prog ns per call".
run_stats() {
	local v label cmd w
	sysctl -qw kernel.bpf_stats_enabled=1
	for v in "${VARIANTS[@]}"; do
		label=${v%%|*}
		cmd=${v#*|}
		case $cmd in "" | perf*) continue ;; esac
		start_tracer "$cmd" || continue
		for w in short block; do
			local n=$SHORT_N
			[ $w = block ] && n=$BLOCK_N
			local b a out
			b=$(prog_time "$TRACER")
			out=$("$LOOP" $w "$n")
			a=$(prog_time "$TRACER")
			echo "$label|$w|$(awk -v b="$b" -v a="$a" -v o="$out" 'BEGIN{
				split(b, x, " "); split(a, y, " "); split(o, z, " ");
				printf "%.0f %.2f", (y[1] - x[1]) / z[3], (y[2] - x[2]) / z[3] }')"
		done
		stop_tracer
	done
	sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
}

RAW="$WORK/raw"
LOSS="$WORK/loss"
: >"$LOSS"
for r in $(seq "$REPS"); do run_round "$r" >>"$RAW"; done
STATS="$WORK/stats"
for _ in $(seq "${STATS_REPS:-3}"); do run_stats >>"$STATS"; done

python3 - "$RAW" "$STATS" "$SHORT_N" "$BLOCK_N" "$REPS" "$LOSS" <<'PY'
import statistics, sys
raw, stats, short_n, block_n, reps, loss = sys.argv[1:]
rows = {}  # (label, workload) -> [(wall ns/call, cpu ns/call)]
order = []
for line in open(raw):
    r, label, w, vals = line.rstrip("\n").split("|")
    if label not in order:
        order.append(label)
    if w == "failed":
        continue
    wall, cpu, calls = (int(x) for x in vals.split())
    rows.setdefault((label, w), []).append((wall / calls, cpu / calls))
med = lambda xs: statistics.median(xs) if xs else float("nan")
def fig(label, w):
    v = rows.get((label, w), [])
    return med([a for a, _ in v]), med([b for _, b in v])
names = {"short": f"short calls ({int(short_n)//1000} k reads of /dev/zero)",
         "block": f"blocking calls (pipe ping-pong on one CPU, {int(block_n)//1000} k round trips)"}
for w in ("short", "block"):
    base_wall, base_cpu = fig("no tracing", w)
    rec_wall, rec_cpu = fig("latscope record", w)
    print(f"### {names[w]}: ns per syscall, median of {reps} rounds\n")
    print("| running alongside | wall | added | CPU | added | added CPU / record's |")
    print("|---|---|---|---|---|---|")
    for label in order:
        wall, cpu = fig(label, w)
        if wall != wall:
            print(f"| {label} | failed | | | | |")
            continue
        aw, ac = wall - base_wall, cpu - base_cpu
        ratio = "-" if label == "no tracing" or rec_cpu - base_cpu <= 0 else f"{ac / (rec_cpu - base_cpu):.2f}x"
        print(f"| {label} | {wall:.0f} | {aw:+.0f} | {cpu:.0f} | {ac:+.0f} | {ratio} |")
    print()
st = {}
for line in open(stats):
    label, w, vals = line.rstrip("\n").split("|")
    ns, runs = (float(x) for x in vals.split())
    st.setdefault((label, w), []).append((ns, runs))
labels = [l for l in order if any((l, w) in st for w in ("short", "block"))]
print("### In the kernel: the tracer's BPF programs' run time per workload syscall (bpf_stats, median)\n")
print("| programs | short: ns | runs per call | / record's | blocking: ns | runs per call | / record's |")
print("|---|---|---|---|---|---|---|")
def kfig(label, w):
    v = st.get((label, w), [])
    return med([a for a, _ in v]), med([b for _, b in v])
for label in labels:
    cells = []
    for w in ("short", "block"):
        ns, runs = kfig(label, w)
        rec, _ = kfig("latscope record", w)
        ratio = f"{ns / rec:.2f}x" if rec == rec and rec > 0 and ns == ns else "-"
        cells += [f"{ns:.0f}", f"{runs:.2f}", ratio]
    print(f"| {label} | " + " | ".join(cells) + " |")
print()
# Events each latscope recording could not keep, over the timed rounds (both workloads).
lost = {}
for line in open(loss):
    label, n, events = line.rstrip("\n").split("|")
    l = lost.setdefault(label, [0, 0])
    l[0] += int(n)
    l[1] += int(events)
print("Events lost by latscope's recordings, over the rounds: " + "; ".join(
    f"{label} {n} of {n + e}" for label, (n, e) in lost.items()) + "\n")
print("Target: `record --why` costs at most 1.3x `record` (added CPU per syscall).")
PY
