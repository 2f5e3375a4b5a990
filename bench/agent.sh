#!/usr/bin/env bash
# What `latscope agent` costs, next to the anchors, measured in the same run:
#  1. CPU time added per syscall of a tight loop of 1-byte read()s of /dev/zero
#     (bench/spectrogram-loop.c: the loop thread's CPU time per call) while the agent runs 10
#     series (by syscall, by class, by disk, syscall and fd-type filters), next to one live
#     `latscope spectrogram`, the previous agent (BASE=path/to/old/latscope: one probe set per
#     series, BPF run-time statistics on) on the same configuration, and libbpf-tools
#     `syscount -L`; ratios against the live spectrogram's added time;
#  2. the agent's resident memory with 100 k distinct label values (one series by process over
#     100 k process names, bench/agent-names.c), with the cap max_labels at 1000 and 10000: memory
#     follows the cap, not the values; the folded counter counts the rest.
# Prints Markdown tables. Run as root: bash bench/agent.sh  (N=... REPS=... NAMES=... to change the size)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
host_line
BASE=${BASE:-}
need_latscope
need_root "the agent loads eBPF programs"
mount_tracefs
LOOP="$WORK/sgloop"
cc -O2 -o "$LOOP" bench/spectrogram-loop.c
cc -O2 -o "$WORK/agent-names" bench/agent-names.c
N=${N:-3000000}
REPS=${REPS:-5}
NAMES=${NAMES:-100000}
PORT=${PORT:-19465}

# shellcheck source=lib/overhead.sh
. bench/lib/overhead.sh

# Ten series a fleet might run: none filters by process, so they share one probe set.
agent_config "$WORK/agent.toml" "$PORT"

echo "### Agent with 10 series: added CPU per syscall (tight read() loop, $N calls, best of $REPS)"
echo
base=$(loop_ns)
results=("nothing|$base")
results+=("$(with "latscope spectrogram (live, all syscalls, in-kernel histograms)" "$LS" spectrogram --plain -d 600s)")
results+=("$(with "latscope agent, 10 series (shared probes)" "$LS" agent --config "$WORK/agent.toml")")
sed 's/^interval = .*/&\nprobe_cpu = true/' "$WORK/agent.toml" >"$WORK/agent-cpu.toml"
results+=("$(with "latscope agent, 10 series, probe_cpu = true (BPF run-time statistics on)" "$LS" agent --config "$WORK/agent-cpu.toml")")
if [ -n "$BASE" ] && [ -x "$BASE" ]; then
	results+=("$(with "previous agent, 10 series (one probe set each)" "$BASE" agent --config "$WORK/agent.toml")")
fi
SC=$(command -v syscount || true)
[ -z "$SC" ] && [ -x /usr/sbin/syscount ] && SC=/usr/sbin/syscount
if [ -n "$SC" ]; then
	results+=("$(with "syscount -L (libbpf-tools)" "$SC" -L)")
fi
sp_added=""
for r in "${results[@]}"; do
	name=${r%|*}
	ns=${r##*|}
	[[ $name == "latscope spectrogram"* ]] && sp_added=$(awk -v a="$ns" -v b="$base" 'BEGIN{printf "%.0f", a-b}')
done
echo "| running alongside | ns per syscall | added ns | added / live spectrogram's |"
echo "|---|---|---|---|"
for r in "${results[@]}"; do
	name=${r%|*}
	ns=${r##*|}
	added=$(awk -v a="$ns" -v b="$base" 'BEGIN{printf "%.0f", a-b}')
	ratio=$(awk -v a="$added" -v s="${sp_added:-0}" 'BEGIN{ if (s>0) printf "%.2f", a/s; else print "-" }')
	echo "| $name | $ns | $added | $ratio |"
done
echo
echo "Target: the agent with 10 series adds at most 1.2x what one live spectrogram adds."
echo

# $1 = metric name (with labels); reads the agent's /metrics.
metric() {
	curl -s -H 'Accept: text/plain' "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" 'index($0, m" ") == 1 {print $2}'
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

echo "### Agent memory with $NAMES distinct label values (one series by process)"
echo
echo "| max_labels | RSS before, MiB | RSS after, MiB | label values | folded events | lost events |"
echo "|---|---|---|---|---|---|"
for cap in 1000 10000; do
	cat >"$WORK/names.toml" <<TOML
listen = "127.0.0.1:$PORT"
interval = "1s"
max_labels = $cap
[[series]]
name = "procs"
filter = "evt.type = getppid and proc.name startswith lsnm"
by = "proc"
TOML
	"$LS" agent --config "$WORK/names.toml" >/dev/null 2>&1 &
	pid=$!
	PIDS+=("$pid")
	for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null && break; sleep 1; done
	before=$(rss_kib "$pid")
	"$WORK/agent-names" "$NAMES"
	sel='{host="'"$(hostname)"'",series="procs"}'
	for _ in $(seq 30); do
		ev=$(metric "latscope_agent_events_total$sel")
		lost=$(metric "latscope_lost_events_total$sel")
		[ "$(awk -v e="${ev:-0}" -v l="${lost:-0}" -v n="$NAMES" 'BEGIN{print (e+l>=n)}')" = 1 ] && break
		sleep 1
	done
	after=$(rss_kib "$pid")
	vals=$(metric "latscope_agent_label_values$sel")
	folded=$(metric "latscope_agent_folded_events_total$sel")
	kill -INT "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	awk -v c="$cap" -v b="$before" -v a="$after" -v v="$vals" -v f="$folded" -v l="$lost" \
		'BEGIN{printf "| %d | %.1f | %.1f | %d | %d | %d |\n", c, b/1024, a/1024, v, f, l}'
done
echo
echo "Bound: a label value costs one histogram (34 KiB); the values past max_labels are folded into other."
