#!/usr/bin/env bash
# Replay speed and timing, printed as Markdown tables:
#
# 1. ops/s replaying a large capture (THREADS threads, each OPS random 4 KiB pwrites then OPS
#    preads in its own file: 16 x 65536 = 1 M operations by default), recorded with latscope, on
#    tmpfs and on ext4 on a loop device, as fast as possible: `latscope replay run --speed 0`,
#    next to fio's iolog replay of the same operations (16 jobs, psync, replay_no_stall) and
#    I/O Riot's replayer (given its source in IORIOT_SRC; skipped with a message otherwise);
# 2. the same capture at the recorded pace (`--speed 1`), with ordinary and with real-time
#    (`--realtime`) workers: lateness p50/p99/max and the replay's duration against the recording's.
#
# Every replayed operation is counted; "I/O ops/s" counts the reads and writes alone (I/O Riot
# has no pread/pwrite: it is given lseek + read/write, and its lseeks are not counted). Each tool
# is also measured in I/O operations per CPU-second (user + system time of the whole command,
# loading its input included), which a busy machine disturbs much less than wall time.
#
# Environment: LATSCOPE (default target/release/latscope), THREADS (16), OPS (32768 per thread
# and direction), FILE_MIB (16 per thread), REPS (3, the median is printed), IORIOT_SRC (a
# checkout of github.com/mimecast/ioriot, built into a temporary directory), FS ("tmpfs ext4"),
# BASE (a previous build of latscope: it records, prepares and replays the same load itself, its
# runs interleaved with this build's, REPS rounds, and a table gives the ratio), ANCHORS (0: no
# fio, I/O Riot or paced runs, for a quick same-run comparison with BASE).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/host.sh
. bench/lib/host.sh
host_line
LS=${LATSCOPE:-$PWD/target/release/latscope}
THREADS=${THREADS:-16}
OPS=${OPS:-32768}
FILE_MIB=${FILE_MIB:-16}
REPS=${REPS:-3}
BASE=${BASE:-}
ANCHORS=${ANCHORS:-1}
FS=${FS:-tmpfs ext4}
WORK=$(mktemp -d /tmp/latscope-replay-bench.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
LOOP=""
cleanup() {
	umount "$MNT" 2>/dev/null || true
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "bench/replay.sh needs root (recording, mounts)"; exit 1; }
[ -x "$LS" ] || cargo build --release --locked -p latscope >&2
cc -O2 -Wall -pthread -o "$WORK/replay-load" bench/replay-load.c
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "BASE=$BASE: not an executable latscope"; exit 1; }
IORIOT=""
if [ "$ANCHORS" = 0 ]; then
	: # no anchors
elif [ -n "${IORIOT_SRC:-}" ] && [ -d "$IORIOT_SRC/ioriot/src" ]; then
	# A copy, built here, adjusted to run on this kind of machine: its hard-coded open-file
	# limit (369216) is above what the kernel allows (it exits), and its mount filter knows no
	# tmpfs (the bench's tmpfs mount is added, and only it).
	cp -r "$IORIOT_SRC" "$WORK/ioriot-src"
	src=$WORK/ioriot-src/ioriot
	rm -f "$src"/src/*.o "$src"/src/*/*.o "$src/ioriot"
	sed -i "s/^#define SET_RLIMIT_NOFILE .*/#define SET_RLIMIT_NOFILE $(ulimit -Hn)/" "$src/src/defaults.h"
	sed -i "s|} else if (Eq(fs, \"btrfs\")) {|} else if (Eq(fs, \"btrfs\") \|\| (Eq(fs, \"tmpfs\") \&\& Eq(mp, \"$MNT\"))) {|" "$src/src/mounts.c"
	if make -s -C "$src" compile >/dev/null 2>&1; then
		IORIOT=$src/ioriot
	else
		echo "(I/O Riot did not build from $IORIOT_SRC: skipped)"
	fi
else
	echo "(I/O Riot skipped: set IORIOT_SRC to a checkout of github.com/mimecast/ioriot)"
fi
[ "$ANCHORS" = 0 ] || command -v fio >/dev/null || echo "(fio skipped: not installed; 'make bench' installs it)"

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# Run a command; append "wall_s cpu_s" to $WORK/times.
timed() { /usr/bin/time -o "$WORK/t1" -f "%e %U %S" "$@"; awk '{ print $1, $2 + $3 }' "$WORK/t1" >>"$WORK/times"; }
# I/O ops per CPU-second from the last line of $WORK/times.
per_cpu() { tail -1 "$WORK/times" | awk -v n="$io_ops" '{ printf "%.0f", n / ($2 > 0 ? $2 : 1e-9) }'; }
jget() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

mount_fs() { # tmpfs | ext4
	case $1 in
	tmpfs) mount -t tmpfs -o size=4g tmpfs "$MNT" ;;
	ext4)
		truncate -s 4G "$WORK/ext4.img"
		LOOP=$(losetup -f --show "$WORK/ext4.img")
		mkfs.ext4 -q -F "$LOOP"
		mount "$LOOP" "$MNT"
		;;
	esac
}
umount_fs() {
	umount "$MNT"
	if [ -n "$LOOP" ]; then losetup -d "$LOOP"; LOOP=""; rm -f "$WORK/ext4.img"; fi
}

# The capture, in I/O Riot's text format (open, lseek + read/write for pread/pwrite, close).
to_ioriot() { # trace, out
	"$LS" events -r "$1" --json "evt.type in (openat, pread64, pwrite64, close) and fd.type = file and fd.name startswith $MNT/" | python3 -c '
import json, sys
out = open(sys.argv[1], "w")
out.write("#|capture_version=3|\n")
for line in sys.stdin:
    e = json.loads(line)
    t, pid, tid, ret = e["ts_ns"], e["pid"], e["tid"], e["ret"]
    pre = "t=%d;:,D=%d;:,i=%d:%d;:," % (t, e.get("latency_ns", 1000), pid, tid)
    op = e["type"]
    if op == "openat":
        out.write(pre + "o=open;:,d=%d;:,p=%s;:,f=%d;:,m=%d;:,\n" % (ret, e["path"], e["flags"], e["mode"]))
    elif op == "close":
        out.write(pre + "o=close;:,d=%d;:,s=%d;:,\n" % (e["fd"], ret))
    else:
        out.write(pre + "o=lseek;:,d=%d;:,O=%d;:,W=0;:,b=%d;:,\n" % (e["fd"], e["offset"], e["offset"]))
        out.write(pre + "o=%s;:,d=%d;:,c=%d;:,b=%d;:,\n" % ("write" if op == "pwrite64" else "read", e["fd"], e["bytes"], ret))
' "$2"
}

io_ops=$((THREADS * OPS * 2))
declare -A RES
for fs in $FS; do
	mount_fs "$fs"
	mkdir -p "$MNT/orig"
	# The capture: recorded once per file system, replayed REPS times.
	"$LS" record -w "$WORK/cap.lst" --quiet --no-block --buffer-size 256MiB -- \
		"$WORK/replay-load" "$MNT/orig" "$THREADS" "$OPS" "$FILE_MIB" 2>"$WORK/rec.err"
	lost=$("$LS" info -r "$WORK/cap.lst" --json | python3 -c 'import json,sys; print(json.load(sys.stdin).get("lost", 0))')
	[ "$lost" = 0 ] || { echo "the capture lost $lost events: raise --buffer-size"; exit 1; }
	"$LS" replay prepare -r "$WORK/cap.lst" -o "$WORK/plan.lsr" --root "$MNT/sb" >"$WORK/prep.txt"
	ops=$("$LS" replay info "$WORK/plan.lsr" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["ops"])')
	rm -rf "$MNT/orig"
	if [ -n "$BASE" ]; then
		# The previous build's own capture and plan of the same load (its formats may differ).
		mkdir -p "$MNT/orig"
		"$BASE" record -w "$WORK/cap0.lst" --quiet --no-block --buffer-size 256MiB -- \
			"$WORK/replay-load" "$MNT/orig" "$THREADS" "$OPS" "$FILE_MIB" 2>"$WORK/rec0.err"
		"$BASE" replay prepare -r "$WORK/cap0.lst" -o "$WORK/plan0.lsr" --root "$MNT/sb0" >"$WORK/prep0.txt"
		rm -rf "$MNT/orig" "$WORK/cap0.lst"
	fi
	RES[$fs.ops]=$ops
	# One replay: LS, plan; appends "ops/s wall_ns io-ops-per-CPU-second" to the array named by $3.
	one_run() {
		"$1" replay init "$2" --quiet >/dev/null
		timed "$1" replay run "$2" --json --quiet >"$WORK/run.json"
		[ "$(jget "$WORK/run.json" 'd["divergences"]')" = 0 ] || { echo "the replay diverged"; cat "$WORK/run.json"; exit 1; }
		local -n acc=$3
		acc+=("$(jget "$WORK/run.json" 'd["ops_per_sec"]') $(jget "$WORK/run.json" 'd["wall_ns"]') $(per_cpu)")
	}
	v=()
	v0=()
	for _ in $(seq "$REPS"); do
		# Rounds interleave the two builds, so that a change in the machine's load hits both.
		[ -z "$BASE" ] || one_run "$BASE" "$WORK/plan0.lsr" v0
		one_run "$LS" "$WORK/plan.lsr" v
	done
	RES[$fs.ls]=$(printf '%s\n' "${v[@]}" | cut -d' ' -f1 | median)
	RES[$fs.ls_io]=$(printf '%s\n' "${v[@]}" | cut -d' ' -f2 | median | awk -v n="$io_ops" '{ printf "%.0f", n / ($1 / 1e9) }')
	RES[$fs.ls_cpu]=$(printf '%s\n' "${v[@]}" | cut -d' ' -f3 | median)
	if [ -n "$BASE" ]; then
		RES[$fs.b_io]=$(printf '%s\n' "${v0[@]}" | cut -d' ' -f2 | median | awk -v n="$io_ops" '{ printf "%.0f", n / ($1 / 1e9) }')
		RES[$fs.b_cpu]=$(printf '%s\n' "${v0[@]}" | cut -d' ' -f3 | median)
		# Per round: this build's I/O ops per CPU-second over the previous build's.
		RES[$fs.b_rounds]=$(paste -d' ' <(printf '%s\n' "${v[@]}" | cut -d' ' -f3) <(printf '%s\n' "${v0[@]}" | cut -d' ' -f3) |
			awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $1 / $2 }')
		rm -rf "$MNT/sb0"
	fi
	if [ "$ANCHORS" = 0 ]; then
		umount_fs
		continue
	fi
	# At the recorded pace.
	"$LS" replay init "$WORK/plan.lsr" --quiet >/dev/null
	"$LS" replay run "$WORK/plan.lsr" --speed 1 --json --quiet >"$WORK/timed.json"
	RES[$fs.p50]=$(jget "$WORK/timed.json" 'd["lateness"]["p50_ns"]')
	RES[$fs.p99]=$(jget "$WORK/timed.json" 'd["lateness"]["p99_ns"]')
	RES[$fs.max]=$(jget "$WORK/timed.json" 'd["lateness"]["max_ns"]')
	RES[$fs.dur]=$(jget "$WORK/timed.json" '"%.2f" % (100.0 * (d["wall_ns"] - d["recorded_ns"]) / d["recorded_ns"])')
	RES[$fs.div]=$(jget "$WORK/timed.json" 'd["divergences"]')
	# The same with the workers under SCHED_FIFO.
	"$LS" replay init "$WORK/plan.lsr" --quiet >/dev/null
	"$LS" replay run "$WORK/plan.lsr" --speed 1 --realtime --json --quiet >"$WORK/timed-rt.json"
	for k in p50 p99 max; do RES[$fs.rt_$k]=$(jget "$WORK/timed-rt.json" "d['lateness']['${k}_ns']"); done
	RES[$fs.rt_dur]=$(jget "$WORK/timed-rt.json" '"%.2f" % (100.0 * (d["wall_ns"] - d["recorded_ns"]) / d["recorded_ns"])')
	RES[$fs.rt_div]=$(jget "$WORK/timed-rt.json" 'd["divergences"]')

	if command -v fio >/dev/null; then
		mkdir -p "$MNT/fio" "$WORK/iolog"
		"$WORK/replay-load" "$MNT/fio" "$THREADS" "$OPS" "$FILE_MIB" >/dev/null # the files, sized and written once
		"$WORK/replay-load" "$MNT/fio" "$THREADS" "$OPS" "$FILE_MIB" "$WORK/iolog"
		jobs=()
		for k in $(seq 0 $((THREADS - 1))); do jobs+=(--name="t$k" --read_iolog="$WORK/iolog/t$k.iolog"); done
		v=()
		for _ in $(seq "$REPS"); do
			s=$(date +%s%N)
			timed fio --ioengine=psync --rw=randrw --replay_no_stall=1 --output-format=json --output="$WORK/fio.json" "${jobs[@]}" >/dev/null
			e=$(date +%s%N)
			v+=("$(awk -v n="$io_ops" -v s="$s" -v e="$e" 'BEGIN { printf "%.0f", n / ((e - s) / 1e9) }') $(per_cpu)")
		done
		RES[$fs.fio]=$(printf '%s\n' "${v[@]}" | cut -d' ' -f1 | median)
		RES[$fs.fio_cpu]=$(printf '%s\n' "${v[@]}" | cut -d' ' -f2 | median)
		rm -rf "$MNT/fio"
	fi

	if [ -n "$IORIOT" ]; then
		to_ioriot "$WORK/cap.lst" "$WORK/io.capture"
		name=bench$$
		(cd "$WORK" && "$IORIOT" -c io.capture -r io.replay -u root -n "$name" >"$WORK/ioriot-gen.txt" 2>&1)
		performed=""
		v=()
		for _ in $(seq "$REPS"); do
			(cd "$WORK" && "$IORIOT" -i io.replay >"$WORK/ioriot-init.txt" 2>&1)
			s=$(date +%s%N)
			(cd "$WORK" && timed "$IORIOT" -r io.replay -D -S "$WORK/ioriot-stats.txt" >"$WORK/ioriot-run.txt" 2>&1)
			e=$(date +%s%N)
			performed=$(awk -F: '/Performed ioops/ { gsub(/ /, "", $2); print $2 }' "$WORK/ioriot-stats.txt")
			v+=("$(awk -v n="$io_ops" -v s="$s" -v e="$e" 'BEGIN { printf "%.0f", n / ((e - s) / 1e9) }') $(per_cpu)")
		done
		RES[$fs.ioriot]=$(printf '%s\n' "${v[@]}" | cut -d' ' -f1 | median)
		RES[$fs.ioriot_cpu]=$(printf '%s\n' "${v[@]}" | cut -d' ' -f2 | median)
		RES[$fs.ioriot_ops]=$performed
		(cd "$WORK" && "$IORIOT" -P >/dev/null 2>&1) || true
		rm -rf "$MNT/.ioriot"
	fi
	umount_fs
done

printf '\n### Replay throughput (%s threads, %s I/O operations of 4 KiB, as fast as possible, median of %s)\n\n' "$THREADS" "$io_ops" "$REPS"
printf '| file system | tool | I/O ops/s (wall) | I/O ops per CPU-second | latscope / tool (wall) | latscope / tool (CPU) |\n|---|---|---|---|---|---|\n'
for fs in $FS; do
	row() { # tool, wall, cpu, note
		awk -v fs="$fs" -v t="$1" -v w="$2" -v c="$3" -v lw="${RES[$fs.ls_io]}" -v lc="${RES[$fs.ls_cpu]}" -v note="$4" 'BEGIN {
			if (w == "") { printf "| %s | %s | - | - | - | - |\n", fs, t; exit }
			printf "| %s | %s%s | %.0f | %.0f | %.2fx | %.2fx |\n", fs, t, note, w, c, lw / w, lc / c }'
	}
	row "latscope replay (${RES[$fs.ops]} ops, $(printf '%.0f' "${RES[$fs.ls]}") ops/s all kinds)" "${RES[$fs.ls_io]}" "${RES[$fs.ls_cpu]}" ""
	row "fio iolog replay" "${RES[$fs.fio]:-}" "${RES[$fs.fio_cpu]:-}" ""
	row "I/O Riot" "${RES[$fs.ioriot]:-}" "${RES[$fs.ioriot_cpu]:-}" "${RES[$fs.ioriot_ops]:+ (performed ${RES[$fs.ioriot_ops]} of $((io_ops * 2)) ioops, lseeks included)}"
done
if [ -n "$BASE" ]; then
	printf '\n### This build against the previous one (%s), same run, %s interleaved rounds, median\n\n' "$BASE" "$REPS"
	printf '| file system | previous I/O ops/s (wall) | this build | ratio | previous I/O ops per CPU-second | this build | ratio | CPU ratio per round |\n|---|---|---|---|---|---|---|---|\n'
	for fs in $FS; do
		awk -v fs="$fs" -v bw="${RES[$fs.b_io]}" -v w="${RES[$fs.ls_io]}" -v bc="${RES[$fs.b_cpu]}" -v c="${RES[$fs.ls_cpu]}" -v r="${RES[$fs.b_rounds]}" 'BEGIN {
			printf "| %s | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx | %s |\n", fs, bw, w, w / bw, bc, c, c / bc, r }'
	done
fi
[ "$ANCHORS" = 0 ] && exit 0
printf '\n### At the recorded pace (--speed 1)\n\n| file system | workers | lateness p50 | p99 | max | duration vs recording | divergences |\n|---|---|---|---|---|---|---|\n'
for fs in $FS; do
	for w in "" rt_; do
		awk -v fs="$fs" -v w="$([ -n "$w" ] && echo "SCHED_FIFO (--realtime)" || echo "ordinary")" -v a="${RES[$fs.${w}p50]}" -v b="${RES[$fs.${w}p99]}" -v c="${RES[$fs.${w}max]}" -v d="${RES[$fs.${w}dur]}" -v v="${RES[$fs.${w}div]}" 'BEGIN {
			printf "| %s | %s | %.1f us | %.1f us | %.1f us | %+.2f %% | %s |\n", fs, w, a / 1e3, b / 1e3, c / 1e3, d, v }'
	done
done
