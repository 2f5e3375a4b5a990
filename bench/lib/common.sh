# Shared by the bench scripts; sourced from the repository's root after `set -euo pipefail`.
# Sets LS (LATSCOPE, default target/$PROFILE/latscope; PROFILE defaults to release), WORK (a
# scratch directory) and PIDS (background pids); at exit the pids get SIGINT and WORK is removed.
# A script with more to undo defines its own EXIT trap and calls bench_cleanup from it.

# shellcheck source=host.sh
. "$(dirname "${BASH_SOURCE[0]}")/host.sh"

PROFILE=${PROFILE:-release}
LS=${LATSCOPE:-target/$PROFILE/latscope}
WORK=$(mktemp -d)
PIDS=()

bench_cleanup() {
	for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap bench_cleanup EXIT

# Stops with what to do unless latscope is built (scripts that do not build it themselves).
need_latscope() {
	[ -x "$LS" ] || { echo "build first: cargo build --release (or set LATSCOPE=path)"; exit 1; }
}

# Stops unless run as root; $1 says why root is needed.
need_root() {
	[ "$(id -u)" = 0 ] || { echo "run as root: $1"; exit 1; }
}

# Classic tracepoints (which the anchors attach) need tracefs mounted.
mount_tracefs() {
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
}

# Builds latscope (when LS is not there) and the synthetic trace writer with PROFILE; sets SYNTH.
build_synth() {
	if [ ! -x "$LS" ]; then
		cargo build --profile "$PROFILE" --locked -p latscope >&2
	fi
	cargo build --profile "$PROFILE" --locked -p latscope --example synth_trace >&2
	SYNTH=target/$PROFILE/examples/synth_trace
}

# Peak resident size of one run of the command given, KiB (its output discarded).
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }

# The median of the numbers given (the first field of each, compared as numbers).
median() {
	printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"
}

# CPU seconds of all threads of one run of a command (perf's task-clock when perf is installed:
# time's user and system figures have a resolution of 10 ms). Its output is discarded, its
# standard error kept in $WORK/err; returns the command's exit status.
cpu_once() {
	local rc=0
	if command -v perf >/dev/null 2>&1; then
		perf stat -x, -e task-clock -o "$WORK/time" "$@" >/dev/null 2>"$WORK/err" || rc=$?
		awk -F, '/task-clock/ {print $1 / 1000}' "$WORK/time"
	else
		/usr/bin/time -o "$WORK/time" -f "%U %S" "$@" >/dev/null 2>"$WORK/err" || rc=$?
		# A failed command's status line comes first: the figures are on the last line.
		awk 'END {print $1 + $2}' "$WORK/time"
	fi
	return "$rc"
}

# Median CPU seconds (user + system) of REPS runs of a command.
cpu() {
	local all=()
	for _ in $(seq "$REPS"); do
		all+=("$(cpu_once "$@" || true)")
	done
	median "${all[@]}"
}

# agent_config FILE PORT: the ten series of the agent benchmarks (none filters by process, so
# they share one probe set), listening on PORT.
agent_config() {
	cat >"$1" <<TOML
listen = "127.0.0.1:$2"
interval = "10s"
[[series]]
name = "syscalls"
by = "syscall"
[[series]]
name = "classes"
by = "class"
[[series]]
name = "disks"
by = "disk"
[[series]]
name = "block_all"
kind = "block"
[[series]]
name = "rw"
filter = "evt.type in (read, write, pread64, pwrite64, readv, writev)"
by = "syscall"
[[series]]
name = "files"
filter = "fd.type = file"
by = "syscall"
[[series]]
name = "net"
filter = "fd.type in (ipv4, ipv6)"
by = "class"
[[series]]
name = "syncs"
filter = "evt.type in (fsync, fdatasync, sync_file_range)"
[[series]]
name = "opens"
filter = "evt.type in (open, openat, openat2)"
by = "syscall"
[[series]]
name = "polls"
filter = "evt.type in (poll, ppoll, select, pselect6, epoll_wait, epoll_pwait)"
by = "syscall"
TOML
}
