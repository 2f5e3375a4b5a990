#!/usr/bin/env bash
# Per-syscall overhead of `latscope record` on a tight read() loop, next to the anchors
# (libbpf-tools syscount -L, bpftrace, perf trace, strace) in the same run, and the highest
# event rate recorded without loss. Prints a Markdown table; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
LS=${LATSCOPE:-target/release/latscope}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/readloop" bench/readloop.c
N=${N:-5000000}
REPS=${REPS:-3}

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
# machine. The floor rows are bench/floor: two empty programs, and the least a latency
# histogram can do (entry time in task storage, exit time, one counter).
echo
echo "In-kernel cost per syscall by bpf_stats (run_time_ns / run_cnt), each tracer alone, same loop:"
echo
# shellcheck source=bench/bpfstats.sh
source bench/bpfstats.sh
LOOP_CMD="$WORK/readloop $N"
costs=()
costs+=("$(bpf_cost "latscope record -c readloop (every event to file)" "$LS" record -w "$WORK/t.lst" --quiet --no-block -c readloop)")
costs+=("$(bpf_cost "latscope record (all processes, every event to file)" "$LS" record -w "$WORK/t.lst" --quiet --no-block)")
costs+=("$(bpf_cost "latscope spectrogram (live, in-kernel histograms)" "$LS" spectrogram --plain -d 600s)")
if [ -n "${SC:-}" ]; then
	costs+=("$(bpf_cost "syscount -L" "$SC" -L)")
fi
if command -v bpftrace >/dev/null; then
	costs+=("$(bpf_cost "bpftrace per-tid start + hist()" bpftrace -e 'tracepoint:raw_syscalls:sys_enter { @s[tid] = nsecs; } tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }')")
fi
if FLOOR=$(bash bench/floor/build.sh "$WORK"); then
	costs+=("$(bpf_cost "floor: two empty programs" "$FLOOR" 0)")
	costs+=("$(bpf_cost "floor: minimal latency histogram" "$FLOOR" 1)")
else
	echo "(bench/floor skipped: it could not be built)"
fi
sc_total=""
for r in "${costs[@]}"; do
	[[ $r == syscount* ]] && sc_total=${r##*|}
done
echo "| programs | sys_enter ns | sys_exit ns | total ns | vs syscount -L |"
echo "|---|---|---|---|---|"
for r in "${costs[@]}"; do
	IFS='|' read -r name en ex tot <<<"$r"
	ratio=$(awk -v a="$tot" -v s="${sc_total:-0}" 'BEGIN{ if (s>0 && a+0==a) printf "%.2fx", a/s; else print "-" }')
	echo "| $name | $en | $ex | $tot | $ratio |"
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
