#!/usr/bin/env bash
# Per-syscall overhead of `latscope record` on a tight read() loop, next to the anchors
# (libbpf-tools syscount -L, bpftrace, perf trace, strace) in the same run, and the highest
# event rate recorded without loss; then the trace writer on real recordings: events per writer
# CPU-second, bytes per event, the highest lossless rate with 1 and 2 CPUs for latscope, and
# the recorder's peak RSS, next to a previous build (BASE=path/to/old/latscope) in the same run
# (which also gets a row of in-kernel cost).
# Prints Markdown tables; run as root.
#
# SECTIONS=overhead,writer (default both); writer: RATES (events/s), DUR (s per run).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
host_line
BASE=${BASE:-}
SECTIONS=${SECTIONS:-overhead,writer}
# The anchors (syscount, bpftrace, perf trace) attach classic tracepoints.
mount_tracefs
cc -O2 -o "$WORK/readloop" bench/readloop.c
N=${N:-5000000}
REPS=${REPS:-3}
has() { [[ ",$SECTIONS," == *",$1,"* ]]; }

if has overhead; then
# Median of REPS runs of the loop while a tracer runs alongside: "wall_ns cpu_ns" per call.
med() { sort -n | sed -n "$(( (REPS + 1) / 2 ))p"; }
loop_ns() {
	local out; out=$(for _ in $(seq "$REPS"); do "$WORK/readloop" "$N"; done)
	echo "$(awk '{print $1}' <<<"$out" | med) $(awk '{print $2}' <<<"$out" | med)"
}

with_tracer() { # $1 = name; rest = tracer command (backgrounded, given 3 s to attach)
	local name=$1; shift
	"$@" >/dev/null 2>&1 &
	local pid=$!
	sleep 3
	local ns; ns=$(loop_ns)
	kill -INT "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	echo "$name|$ns"
}

base=$(loop_ns)
results=("nothing|$base")
results+=("$(with_tracer "latscope record (all syscalls, every event to file)" "$LS" record -w "$WORK/t.lst" --quiet --no-block -c readloop)")
if command -v syscount >/dev/null || [ -x /usr/sbin/syscount ]; then
	SC=$(command -v syscount || echo /usr/sbin/syscount)
	results+=("$(with_tracer "syscount -L (in-kernel counts)" "$SC" -L)")
fi
if command -v bpftrace >/dev/null; then
	results+=("$(with_tracer "bpftrace per-tid start + hist()" bpftrace -e 'tracepoint:raw_syscalls:sys_enter { @s[tid] = nsecs; } tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }')")
fi
if command -v perf >/dev/null && perf trace -h >/dev/null 2>&1; then
	results+=("$(with_tracer "perf trace -s" perf trace -s -a -o /dev/null)")
fi
if command -v strace >/dev/null; then
	out=$(for _ in $(seq "$REPS"); do strace -f -c -o /dev/null "$WORK/readloop" $((N / 20)); done)
	results+=("strace -c (ptrace)|$(awk '{print $1}' <<<"$out" | med) $(awk '{print $2}' <<<"$out" | med)")
fi

echo "| running alongside | wall ns/syscall | added | CPU ns/syscall | added | added CPU vs latscope's |"
echo "|---|---|---|---|---|---|"
read -r bw bc <<<"$base"
ls_added=""
for r in "${results[@]}"; do
	name=${r%%|*}; read -r w c <<<"${r#*|}"
	aw=$(awk -v a="$w" -v b="$bw" 'BEGIN{printf "%.0f", a-b}')
	ac=$(awk -v a="$c" -v b="$bc" 'BEGIN{printf "%.0f", a-b}')
	[ -z "$ls_added" ] && [[ $name == latscope* ]] && ls_added=$ac
	ratio=$(awk -v a="$ac" -v l="${ls_added:-0}" 'BEGIN{ if (l>0) printf "%.2fx", a/l; else print "-" }')
	echo "| $name | $w | $aw | $c | $ac | $ratio |"
done

# In-kernel cost from the kernel's BPF statistics: steadier than the loop's times on a shared
# machine. The floor rows are bench/floor: two empty programs, the least a latency histogram
# can do (entry time in task storage, exit time, one counter), and the least a recorder of every
# call can do (the same two clock reads and a 32-byte ring-buffer record per call). Every
# tracer runs alone, in KROUNDS rounds (default 3) that take the tracers in turn, so that a
# host whose speed drifts moves every row alike; each row is the median of its rounds. The
# targets are ratios of the same run: `record` against `syscount -L` and against the histogram
# floor; the live views (spectrogram, agent) against the histogram floor.
echo
echo "In-kernel cost per syscall by bpf_stats (run_time_ns / run_cnt), each tracer alone, same loop, median of ${KROUNDS:-3} interleaved rounds:"
echo
# shellcheck source=bench/bpfstats.sh
source bench/bpfstats.sh
LOOP_CMD="$WORK/readloop $N"
# The agent of bench/agent.sh's ten series, sharing one probe set.
agent_config "$WORK/agent.toml" "${AGENT_PORT:-19466}"
# Each tracer a function that execs it (bpf_cost runs it in the background and stops that pid).
t_rec_c() { exec "$LS" record -w "$WORK/t.lst" --quiet --no-block -c readloop; }
t_base_rec_c() { exec "$BASE" record -w "$WORK/t.lst" --quiet --no-block -c readloop; }
t_rec_all() { exec "$LS" record -w "$WORK/t.lst" --quiet --no-block; }
t_spectrogram() { exec "$LS" spectrogram --plain -d 600s; }
t_agent() { exec "$LS" agent --config "$WORK/agent.toml"; }
t_syscount() { exec "$SC" -L; }
t_bpftrace() {
	exec bpftrace -e 'tracepoint:raw_syscalls:sys_enter { @s[tid] = nsecs; } tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }'
}
t_floor() { exec "$FLOOR" "$1"; }
tracers=()
tracers+=("latscope record -c readloop (every event to file)|t_rec_c")
if [ -n "$BASE" ]; then
	tracers+=("previous build: record -c readloop|t_base_rec_c")
fi
tracers+=("latscope record (all processes, every event to file)|t_rec_all")
tracers+=("latscope spectrogram (live, in-kernel histograms)|t_spectrogram")
tracers+=("latscope agent, 10 series (in-kernel sums)|t_agent")
if [ -n "${SC:-}" ]; then
	tracers+=("syscount -L|t_syscount")
fi
if command -v bpftrace >/dev/null; then
	tracers+=("bpftrace per-tid start + hist()|t_bpftrace")
fi
if FLOOR=$(bash bench/floor/build.sh "$WORK"); then
	tracers+=("floor: two empty programs|t_floor 0")
	tracers+=("floor: minimal latency histogram|t_floor 1")
	tracers+=("floor: minimal recorder (histogram's floor + a 32-byte ring record)|t_floor 2")
	tracers+=("floor: per-CPU ring written in place, no helper (x86)|t_floor 3")
else
	echo "(bench/floor skipped: it could not be built)"
fi
: >"$WORK/kcost"
for _ in $(seq "${KROUNDS:-3}"); do
	for t in "${tracers[@]}"; do
		# shellcheck disable=SC2086 # "function [argument]"
		bpf_cost "${t%%|*}" ${t#*|} >>"$WORK/kcost"
	done
done
# Median of each row's rounds (failed rounds left out), in the order of the tracers.
costs=()
for t in "${tracers[@]}"; do
	costs+=("$(python3 - "${t%%|*}" "$WORK/kcost" <<'PY'
import statistics, sys
name, rows = sys.argv[1], [l.rstrip("\n").split("|") for l in open(sys.argv[2])]
got = [r[1:] for r in rows if r[0] == name and r[3] != "failed"]
med = lambda k: statistics.median(float(g[k]) if g[k] != "-" else 0.0 for g in got)
print(f"{name}|{med(0):.0f}|{med(1):.0f}|{med(2):.0f}" if got else f"{name}|failed|failed|failed")
PY
)")
done
sc_total=""
floor_total=""
for r in "${costs[@]}"; do
	[[ $r == syscount* ]] && sc_total=${r##*|}
	[[ $r == "floor: minimal latency histogram|"* ]] && floor_total=${r##*|}
done
echo "| programs | sys_enter ns | sys_exit ns | total ns | vs syscount -L | vs histogram floor |"
echo "|---|---|---|---|---|---|"
for r in "${costs[@]}"; do
	IFS='|' read -r name en ex tot <<<"$r"
	ratio=$(awk -v a="$tot" -v s="${sc_total:-0}" 'BEGIN{ if (s>0 && a+0==a) printf "%.2fx", a/s; else print "-" }')
	vf=$(awk -v a="$tot" -v s="${floor_total:-0}" 'BEGIN{ if (s>0 && a+0==a) printf "%.2fx", a/s; else print "-" }')
	echo "| $name | $en | $ex | $tot | $ratio | $vf |"
done
echo
echo "Targets (same run): record <= 0.6x syscount -L and <= 1.3x the histogram floor; the live views and the agent at the floor."

# Where record's in-kernel ns go: the same recording with one part of the per-call work
# switched off at load (LATSCOPE_ABLATE, constants the verifier folds: no run-time test), the
# difference to the full recording being that part's cost. Such recordings are incomplete.
echo
echo "Ablation: latscope record -c readloop with one part switched off (bpf_stats, ns per syscall):"
echo
full=""
echo "| switched off | sys_enter ns | sys_exit ns | total ns | saved ns |"
echo "|---|---|---|---|---|"
for part in none pcpu ring fd task filter ring,fd,task,filter; do
	r=$(bpf_cost "$part" env LATSCOPE_ABLATE="$part" "$LS" record -w "$WORK/t.lst" --quiet --no-block -c readloop)
	IFS='|' read -r name en ex tot <<<"$r"
	[ "$part" = none ] && full=$tot
	saved=$(awk -v f="$full" -v t="$tot" 'BEGIN{ if (f+0==f && t+0==t) printf "%.0f", f-t; else print "-" }')
	label=$part
	case $part in
	none) label="nothing (full recording)" ;;
	pcpu) label="per-CPU rings (every event reserved and committed in the shared ring buffer)" ;;
	ring) label="any output (the event built in scratch space, never written)" ;;
	fd) label="fd naming (device, inode, type, position at entry and for returned fds)" ;;
	task) label="task fields (ids, uid, cgroup, comm, namespaces)" ;;
	filter) label="per-event filter (pid filter of -c)" ;;
	ring,fd,task,filter) label="all four" ;;
	esac
	echo "| $label | $en | $ex | $tot | $saved |"
done

# Highest rate with no loss: pace the loop at increasing rates for 10 s each, record everything.
echo
echo "| target rate (events/s, 10 s) | events written | lost |"
echo "|---|---|---|"
for rate in 250000 500000 1000000 1500000; do
	"$LS" record -w "$WORK/r.lst" --quiet --json --no-block -c readloop >"$WORK/sum.json" 2>/dev/null &
	pid=$!
	sleep 2
	sleep 1
	"$WORK/readloop" $((rate * 10)) "$rate" >/dev/null
	sleep 1
	kill -INT "$pid"; wait "$pid" || true
	python3 -c "import json,sys; s=json.load(open('$WORK/sum.json')); print(f\"| $rate | {s['events']} | {s['lost']} |\")"
done
fi

# The trace writer on real recordings: a paced loop of read() and getppid() calls (comm
# readloop), recorded with -c readloop, latscope pinned to its CPUs (taskset) and the loop on
# the others (on all of them when latscope has them all). Writer CPU is that of the threads that
# encode and write (latscope-trace, latscope-enc*), read just before the recording stops; the
# whole process's CPU (the reading and decoding thread too) is taken over the loop's run.
writer_cpu_ns() { # pid
	local t total=0 comm ticks
	for t in /proc/"$1"/task/*; do
		comm=$(cat "$t/comm" 2>/dev/null) || continue
		case $comm in
		latscope-trace | latscope-enc*)
			ticks=$(sed 's/.*) //' "$t/stat" | awk '{print $12 + $13}')
			total=$((total + ticks)) ;;
		esac
	done
	echo $((total * 10000000))
}
proc_cpu_ns() { # pid -> CPU time of all its threads so far (ns, 10 ms resolution)
	echo $(($(sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}') * 10000000))
}
cpu_list() { # first count -> "first-(first+count-1)"
	echo "$1-$(($1 + $2 - 1))"
}
record_at() { # binary latscope_cpus rate -> "events lost bytes loop_s writer_ns rss_kb"
	local bin=$1 lcpus=$2 rate=$3 total wl_first wl_n procs i t0 t1
	total=$(nproc)
	if [ "$lcpus" -lt "$total" ]; then wl_first=$lcpus; wl_n=$((total - lcpus)); else wl_first=0; wl_n=$total; fi
	procs=$wl_n
	rm -f "$WORK/w.lst" "$WORK/w.lst.old"
	taskset -c "$(cpu_list 0 "$lcpus")" "$bin" record -w "$WORK/w.lst" --quiet --json --no-block -c readloop \
		>"$WORK/w.json" 2>"$WORK/w.err" &
	local pid=$!
	sleep 3
	local c0 c1
	c0=$(proc_cpu_ns "$pid")
	t0=$(date +%s.%N)
	local loops=()
	for i in $(seq "$procs"); do
		taskset -c "$(cpu_list "$wl_first" "$wl_n")" "$WORK/readloop" $((rate * DUR / procs)) $((rate / procs)) mix >/dev/null &
		loops+=($!)
	done
	wait "${loops[@]}"
	t1=$(date +%s.%N)
	sleep 1
	local wns rss
	wns=$(writer_cpu_ns "$pid")
	c1=$(proc_cpu_ns "$pid")
	rss=$(awk '/VmHWM/ {print $2}' /proc/"$pid"/status)
	kill -INT "$pid"
	wait "$pid" || true
	python3 -c "import json; s=json.load(open('$WORK/w.json')); print(s['events'], s['lost'], s['bytes'], $t1 - $t0, $wns, $rss, $c1 - $c0)"
}

if has writer; then
	RATES=${RATES:-500000 1000000 1500000 2000000 3000000}
	DUR=${DUR:-10}
	bins=("new|$LS")
	[ -n "$BASE" ] && bins=("base|$BASE" "${bins[@]}")
	echo
	echo "Trace writer, recording a paced read()/getppid() loop ($DUR s per run; $(nproc) CPUs; latscope on the first N, the loop on the rest):"
	echo
	echo "| build | CPUs for latscope | target events/s | recorded events/s | lost | bytes/event | events per writer CPU-second | events per latscope CPU-second (all threads) | peak RSS MB |"
	echo "|---|---|---|---|---|---|---|---|---|"
	declare -A best
	for cpus in 1 2; do
		[ "$cpus" -le "$(nproc)" ] || continue
		for rate in $RATES; do
			# Builds interleaved at each rate: the same machine state for both.
			for b in "${bins[@]}"; do
				name=${b%%|*}; bin=${b#*|}
				read -r ev lost bytes secs wns rss pns <<<"$(record_at "$bin" "$cpus" "$rate")"
				awk -v n="$name" -v c="$cpus" -v r="$rate" -v e="$ev" -v l="$lost" -v b="$bytes" -v s="$secs" -v w="$wns" -v m="$rss" -v p="$pns" \
					'BEGIN { printf "| %s | %d | %d | %.0f | %d | %.1f | %s | %s | %.0f |\n", n, c, r, e / s, l, b / (e > 0 ? e : 1), (w > 0 ? sprintf("%.1f M", e / (w / 1e9) / 1e6) : "-"), (p > 0 ? sprintf("%.2f M", e / (p / 1e9) / 1e6) : "-"), m / 1024 }'
				if [ "$lost" -eq 0 ]; then best[$name,$cpus]=$rate; fi
			done
		done
	done
	echo
	echo "| build | highest lossless target rate, 1 CPU | 2 CPUs |"
	echo "|---|---|---|"
	for b in "${bins[@]}"; do
		name=${b%%|*}
		echo "| $name | ${best[$name,1]:-none of $RATES} | ${best[$name,2]:--} |"
	done
fi
