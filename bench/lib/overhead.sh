# Shared by bench/spectrogram.sh and bench/agent.sh: the CPU a tool running alongside adds to
# each call of a tight syscall loop. Sourced; uses the caller's LOOP (the loop binary), N (calls
# per run), REPS (runs) and PIDS (background pids, stopped at exit: bench/lib/common.sh).

# Lowest CPU ns per call over REPS runs of the loop (the run least disturbed by other work).
loop_ns() {
	local vals=()
	for _ in $(seq "$REPS"); do vals+=("$("$LOOP" "$N")"); done
	printf '%s\n' "${vals[@]}" | sort -n | head -1
}

# $1 = label; rest = command run alongside (started, given time to attach, stopped after).
# Prints "label|ns per call" ("label failed|0" when the command did not stay up).
with() {
	local name=$1
	shift
	"$@" >/dev/null 2>&1 &
	local pid=$!
	PIDS+=("$pid")
	sleep "${ATTACH_WAIT:-3}"
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "$name failed|0"
		return
	fi
	local ns
	ns=$(loop_ns)
	kill -INT "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	echo "$name|$ns"
}
