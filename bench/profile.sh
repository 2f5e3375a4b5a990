#!/usr/bin/env bash
# Cost of on-CPU profiling with stacks, printed as a Markdown table: `latscope record --profile
# HZ` (user stacks unwound from an 8 KiB copy, --call-graph dwarf, and by frame pointers only) next to `perf record -F HZ -g` (frame pointers), `perf record -F HZ --call-graph dwarf`
# (perf copies 8 KiB of stack per sample and unwinds it afterwards) and bpftrace's `profile` probe
# counting user and kernel stacks in the kernel, in the same run. Each profiles a command that does
# a fixed amount of CPU work (crates/cli/tests/profile.c -n, built without frame pointers, as most code is)
# from its start to its exit; the CPU it adds is the CPU (user + system, all threads: perf's
# task-clock) of the profiled run less that of the command alone, the median of REPS runs. Then
# what it costs to read the samples back as stacks: `latscope why --on-cpu --folded`, `perf script`.
#
# Environment: LATSCOPE (default target/$PROFILE/latscope), BASE (a previous latscope binary with
# --profile, measured too), HZ (default 99), ROUNDS (the work: default 1800, about 5 s here), REPS
# (3), PROFILE (cargo profile of the build, default release; `ci` reuses the test build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
need_root "the profilers attach BPF programs and perf events"
need_latscope
HZ=${HZ:-99}
ROUNDS=${ROUNDS:-1800}
REPS=${REPS:-3}
BASE=${BASE:-}
mount_tracefs
cc -O2 -fomit-frame-pointer -o "$WORK/work" crates/cli/tests/profile.c
W=("$WORK/work" -n "$ROUNDS")

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; load average $(cut -d' ' -f1 /proc/loadavg); $HZ Hz; ${ROUNDS} rounds of work"
alone=$(cpu "${W[@]}")
rows=()
# $1 = label, $2 = output file (or -), rest = the profiler's command line before the workload.
run() {
	local name=$1 out=$2
	shift 2
	local all=()
	for _ in $(seq "$REPS"); do
		rm -f "$out"
		all+=("$(cpu_once "$@" "${W[@]}" || echo fail)")
	done
	local m
	m=$(median "${all[@]}")
	rows+=("$name|$m")
}
run "latscope record --profile $HZ (with --why: every syscall's breakdown too)" "$WORK/ls.lst" \
	"$LS" record --profile "$HZ" --no-block --quiet -w "$WORK/ls.lst" --
post_ls=$(cpu "$LS" why -r "$WORK/ls.lst" --on-cpu --folded "$WORK/ls.folded")
run "latscope record --profile $HZ --call-graph fp (frame pointers only)" "$WORK/ls-fp.lst" \
	"$LS" record --profile "$HZ" --call-graph fp --no-block --quiet -w "$WORK/ls-fp.lst" --
# What of it is the recording with attribution itself (load, attach, the syscalls' breakdowns),
# not the samples.
run "latscope record --why (the same without samples)" "$WORK/ls-why.lst" \
	"$LS" record --why --stacks --no-block --quiet -w "$WORK/ls-why.lst" --
if [ -n "$BASE" ] && [ -x "$BASE" ] && "$BASE" record --help | grep -q -- --profile; then
	run "previous build, record --profile $HZ" "$WORK/base.lst" "$BASE" record --profile "$HZ" --no-block --quiet -w "$WORK/base.lst" --
fi
post_fp=-
post_dwarf=-
if command -v perf >/dev/null 2>&1; then
	run "perf record -F $HZ -g (frame pointers)" "$WORK/fp.data" perf record -q -F "$HZ" -g -o "$WORK/fp.data" --
	post_fp=$(cpu perf script -i "$WORK/fp.data")
	run "perf record -F $HZ --call-graph dwarf" "$WORK/dwarf.data" perf record -q -F "$HZ" --call-graph dwarf -o "$WORK/dwarf.data" --
	post_dwarf=$(cpu perf script -i "$WORK/dwarf.data")
fi
if command -v bpftrace >/dev/null 2>&1; then
	# (bpftrace -c takes the command as one string)
	printf '#!/bin/sh\nexec bpftrace -q -e "profile:hz:%s /pid == cpid/ { @[ustack, kstack] = count(); }" -c "$*"\n' "$HZ" >"$WORK/bt"
	chmod +x "$WORK/bt"
	run "bpftrace profile:hz:$HZ, stacks counted in the kernel" - "$WORK/bt"
fi
echo
echo "| profiler | CPU of the profiled run | added to the work's ${alone} s | read back as stacks |"
echo "|---|---|---|---|"
echo "| nothing | ${alone} s | - | - |"
for r in "${rows[@]}"; do
	name=${r%|*}
	s=${r##*|}
	added=$(awk -v a="$s" -v b="$alone" 'BEGIN{ if (a == "fail") print "failed"; else printf "%.3f s (%.1f %%)", a-b, (a-b)*100/b }')
	post="-"
	case $name in
	*"without samples"*) post="-" ;;
	*"call-graph fp"*) post="-" ;;
	latscope*) post="$post_ls s (\`why --on-cpu --folded\`)" ;;
	*"-g (frame"*) post="$post_fp s (\`perf script\`)" ;;
	*dwarf*) post="$post_dwarf s (\`perf script\`)" ;;
	bpftrace*) post="0 (printed at its exit)" ;;
	esac
	echo "| $name | $s s | $added | $post |"
done
