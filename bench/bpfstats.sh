# Sourced by the benchmarks: the in-kernel cost of a tracer's BPF programs per syscall, from the
# kernel's own run-time statistics (sysctl kernel.bpf_stats_enabled=1; bpftool prog show:
# run_time_ns / run_cnt), over LOOP_CMD's syscalls. Less noisy than timing the loop, but it
# counts only the programs' bodies (not the tracepoint's dispatch) and adds the statistics' own
# two clock reads to every run: compare tracers with each other, not with zero.
#
# bpf_cost LABEL CMD... -> prints "LABEL|enter_ns|exit_ns|total_ns" (the tracer runs alone, started
# and stopped around the loop).
bpf_progs() {
	if ! command -v bpftool >/dev/null; then
		python3 "$(dirname "${BASH_SOURCE[0]}")/lib/bpf_progs.py"
		return
	fi
	bpftool prog show -j | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("run_cnt", 0) > 0:
        print(p["id"], p.get("name", "?"), p["run_time_ns"], p["run_cnt"])'
}

bpf_cost() {
	local label=$1
	shift
	local was
	was=$(sysctl -n kernel.bpf_stats_enabled)
	sysctl -qw kernel.bpf_stats_enabled=1
	"$@" >/dev/null 2>&1 &
	local pid=$!
	sleep "${ATTACH_WAIT:-3}"
	if ! kill -0 "$pid" 2>/dev/null; then
		sysctl -qw kernel.bpf_stats_enabled="$was"
		echo "$label|failed|failed|failed"
		return
	fi
	local before after
	before=$(bpf_progs)
	$LOOP_CMD >/dev/null
	after=$(bpf_progs)
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	sysctl -qw kernel.bpf_stats_enabled="$was"
	python3 - "$label" "$before" "$after" <<'PY'
import sys
label, before, after = sys.argv[1], sys.argv[2], sys.argv[3]
b = {l.split()[0]: l.split() for l in before.splitlines() if l.strip()}
enter = exit_ = total = 0.0
for l in after.splitlines():
    f = l.split()
    if len(f) < 4 or f[0] not in b:
        continue
    dt, dc = int(f[2]) - int(b[f[0]][2]), int(f[3]) - int(b[f[0]][3])
    if dc < 100000:  # not a per-syscall program of this tracer
        continue
    total += dt / dc
    if "enter" in f[1]:
        enter += dt / dc
    elif "exit" in f[1]:
        exit_ += dt / dc
show = lambda v: f"{v:.0f}" if v else "-"
print(f"{label}|{show(enter)}|{show(exit_)}|{total:.0f}")
PY
}
