#!/bin/bash
# The suites run inside the test VM (see vmtest/run.sh), on the kernel under test, in one boot.
# Each suite writes RESULTS/<suite>.rc (its exit status) and RESULTS/<suite>.log. Ground truth
# comes from workloads with known counts; nothing asserts a time (the guest is emulated).
# usage: guest.sh REPO RESULTS
REPO=$1
RES=$2
LS=$REPO/target/ci/latscope
W=/tmp/vmtest
mkdir -p $W
cd $W || exit 1
uname -r > "$RES/kernel"

suite() {
	local name=$1
	shift
	echo "vmtest: suite $name" >/dev/console
	("$@") > "$RES/$name.log" 2>&1
	echo $? > "$RES/$name.rc"
}

# The features this kernel offers, and whether every probe can run.
check() {
	"$LS" check
	"$LS" check --json > "$RES/check.json"
}

# Tests left out here, with the reason: they assert what emulation's slowness changes.
SKIP=(
	# Counts the followed processes right after the start, while the script's `sleep 0.05`
	# loop runs: ~40x slower process start makes a sleep that exits between the start's
	# scan of /proc and the probes' attach likely, and it stays counted.
	# (Its full name in latscope-live's test binary: tests/follow.rs is the module `follow`.)
	follow::followed_children_leave_the_pid_filter_when_they_exit
)

# The probe-loading integration tests, built on the host (list in RESULTS/tests.list).
probes() {
	local rc=0 skip=() s
	for s in "${SKIP[@]}"; do
		echo "SKIPPED $s in the VM (see vmtest/guest.sh)"
		skip+=(--skip "$s" --exact)
	done
	while read -r t; do
		echo "== $t"
		"$t" --test-threads=1 "${skip[@]}" || rc=1
	done < "$RES/tests.list"
	return $rc
}

fail() {
	echo "FAILED: $*"
	exit 1
}

# record -- CMD on a workload with known counts, then views of the trace and a replay of it.
record() {
	"$LS" record -w $W/t.lst -- dd if=/dev/zero of=$W/out bs=4096 count=25 status=none || fail "record"
	"$LS" info -r $W/t.lst || fail "info"
	local n
	n=$("$LS" events -r $W/t.lst --json "proc.name = dd and evt.type = write and fd.name = $W/out" | grep -c '"bytes":4096')
	echo "writes of 4096 bytes to $W/out: $n"
	[ "$n" = 25 ] || fail "25 writes of 4096 bytes named by their file, got $n"
	n=$("$LS" events -r $W/t.lst --json "proc.name = dd and evt.type = read and fd.type = chardev" | grep -c .)
	echo "reads from /dev/zero: $n"
	[ "$n" -ge 25 ] || fail "25 reads from a character device, got $n"
	n=$("$LS" events -r $W/t.lst --json 'evt.kind = proc and proc.name = dd' | grep -c .)
	echo "process events of dd: $n"
	[ "$n" -ge 2 ] || fail "exec and exit of dd, got $n"
}

views() {
	"$LS" spectrogram -r $W/t.lst --plain --colors none --width 80 'proc.name = dd' || fail "spectrogram -r"
	"$LS" top -r $W/t.lst --by syscall 'proc.name = dd' | tee $W/top.txt || fail "top -r"
	grep -q write $W/top.txt || fail "top names the writes"
}

# The live views, with a workload running beside them.
live() {
	(for i in 1 2 3 4 5 6; do dd if=/dev/zero of=$W/live bs=4096 count=10 status=none; sleep 0.5; done) &
	"$LS" spectrogram --plain --colors none --width 80 -d 3s 'proc.name = dd' || fail "live spectrogram"
	"$LS" top --by syscall --interval 1s --count 2 'proc.name = dd' || fail "live top"
	wait
}

replay() {
	rm -rf $W/root
	"$LS" replay prepare -r $W/t.lst -o $W/plan.lsr --root $W/root || fail "replay prepare"
	"$LS" replay run $W/plan.lsr --init --json --quiet --trace $W/replay.lst > $W/run.json || fail "replay run"
	cat $W/run.json
	local n
	n=$("$LS" events -r $W/replay.lst --json 'evt.type = write' | grep -c '"bytes":4096')
	echo "writes of 4096 bytes replayed and recorded: $n"
	[ "$n" -ge 25 ] || fail "the replay's 25 writes recorded, got $n"
}

agent() {
	cat > $W/agent.toml <<-TOML
	listen = "127.0.0.1:19465"
	interval = "1s"
	host = "vmtest"

	[[series]]
	name = "sleeps"
	filter = "proc.name = sleep and evt.type = clock_nanosleep"
	by = "syscall"
	TOML
	"$LS" agent --config $W/agent.toml > $W/agent.log 2>&1 &
	local pid=$! body=""
	for i in $(seq 60); do
		sleep 1
		sleep 0.1
		exec 3<>/dev/tcp/127.0.0.1/19465 2>/dev/null || continue
		printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3
		body=$(cat <&3)
		exec 3>&-
		echo "$body" | grep -q sleeps && break
	done
	kill $pid
	wait $pid
	cat $W/agent.log
	echo "$body" | grep sleeps | head -20
	echo "$body" | grep -q sleeps || fail "the agent's /metrics has the series"
}

# Attribution with stacks: a sleep's kernel stack is captured and named. Where tracing programs
# lack task storage (before 5.13), record --why is refused, naming the feature.
why_stacks() {
	if python3 -c 'import json,sys; sys.exit(0 if any(f["key"] == "task_storage_tracing" and not f["present"] for f in json.load(open(sys.argv[1]))["features"]) else 1)' "$RES/check.json"; then
		local err
		err=$("$LS" record -w $W/why.lst --why-above 1ms --no-block -- sleep 0.2 2>&1) && fail "record --why ran without task storage"
		echo "$err"
		echo "$err" | grep -q "task local storage in tracing programs" || fail "the refusal names the feature"
		return
	fi
	"$LS" record -w $W/why.lst --why-above 1ms --stacks --no-block -- sleep 0.2 || fail "record --why"
	"$LS" why -r $W/why.lst --stacks --waits | tee $W/why.txt || fail "why --stacks"
	grep -q nanosleep $W/why.txt || fail "the sleep's kernel stack names nanosleep"
	# sleep exits right after its nanosleep, before the recorder reads its maps again: from
	# Linux 5.17 (bpf_find_vma) the kernel names its user frames as files at the exit. In this
	# VM (an overlay root on 9p) the C library's frame still shows as a bare address in fresh
	# runs on 6.12, where it is named on the host: a known gap, reported here, not asserted.
	if grep -A2 "user:" $W/why.txt | grep -q "nanosleep"; then
		echo "the exited sleep's user stack is named"
	else
		echo "KNOWN GAP: the exited sleep's user stack is not named on this kernel's VM"
	fi
	# The user stack unwound from its copy (--call-graph dwarf, the default): sleep and the C
	# library are built without frame pointers; reported, not asserted (see above).
	if grep -A12 "user:" $W/why.txt | grep -q "__libc_start"; then
		echo "the sleep's user stack is unwound to __libc_start_main"
	else
		echo "KNOWN GAP: the sleep's user stack is not unwound on this kernel's VM"
	fi
	# Each thread's whole time: the sleep's thread times read at the start and at its exit, its
	# 200 ms in nanosleep as timer time in calls.
	"$LS" why -r $W/why.lst --threads --json > $W/threads.json || fail "why --threads"
	python3 - "$W/threads.json" <<'PY' || fail "the sleep's whole time is accounted for"
import json, sys
j = json.load(open(sys.argv[1]))
t = [a for a in j["threads"] if a["comm"] == "sleep"]
assert t, j
a = t[0]
assert abs(a["outside_calls"]["total_ns"] + a["in_calls"]["total_ns"] - a["wall_ns"]) * 100 <= a["wall_ns"], a
assert a["in_calls"]["by_cause"]["timer_ns"] >= 190_000_000, a
print("sleep: wall", a["wall_ns"], "timer", a["in_calls"]["by_cause"]["timer_ns"])
PY
	# On-CPU samples: a shell loop sampled at 199 Hz, its samples with stacks.
	"$LS" record -w $W/prof.lst --profile 199 --no-block -- sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done' || fail "record --profile"
	n=$("$LS" events -r $W/prof.lst 'evt.type = proc_sample' | wc -l)
	echo "on-CPU samples: $n"
	[ "$n" -gt 0 ] || fail "record --profile took no sample"
	"$LS" why -r $W/prof.lst --on-cpu -n 1 || fail "why --on-cpu"
}

suite check check
suite probes probes
suite record record
suite views views
suite live live
suite replay replay
suite agent agent
suite why why_stacks
echo done > "$RES/finished"
