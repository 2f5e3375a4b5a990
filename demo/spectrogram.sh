#!/usr/bin/env bash
# The spectrogram write-up's storage comparison, on this machine: its three tests
#   1. moderate: 1 KiB writes, 1000 per second
#   2. sustained: 100 KiB writes as fast as possible
#   3. sustained, no cache: 100 KiB writes with O_SYNC | O_DIRECT
# run by `latscope load` on an ext4 file system on a loop device and on tmpfs, each watched by a
# live `latscope spectrogram` with the write-up's filter (plain rows, an SVG each), plus the
# block requests of the loop device during the ext4 runs.
# usage: demo/spectrogram.sh [OUTDIR]   (root; DURATION=5 seconds per test; LATSCOPE=binary)
set -euo pipefail
cd "$(dirname "$0")/.."
LS=${LATSCOPE:-target/release/latscope}
[ -x "$LS" ] || LS=target/debug/latscope
[ -x "$LS" ] || { echo "build latscope first (cargo build --release)"; exit 1; }
LS=$(realpath "$LS")
[ "$(id -u)" = 0 ] || { echo "run as root: the demo mounts file systems and loads eBPF programs"; exit 1; }
OUT=$(realpath -m "${1:-out/demo/spectrogram}")
DUR=${DURATION:-5}
WIDTH=${WIDTH:-120}
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/latscope-demo.XXXXXX)
LOOPDEV=""
cleanup() {
	set +e
	jobs -p | xargs -r kill -INT 2>/dev/null
	wait 2>/dev/null
	mountpoint -q "$TMP/ext4" && umount "$TMP/ext4"
	mountpoint -q "$TMP/tmpfs" && umount "$TMP/tmpfs"
	[ -n "$LOOPDEV" ] && losetup -d "$LOOPDEV"
	rm -rf "$TMP"
}
trap cleanup EXIT

echo "== setting up: ext4 on a loop device and tmpfs under $TMP"
mkdir -p "$TMP/ext4" "$TMP/tmpfs"
truncate -s 1G "$TMP/ext4.img"
LOOPDEV=$(losetup -f --show "$TMP/ext4.img")
mkfs.ext4 -q -F "$LOOPDEV"
mount "$LOOPDEV" "$TMP/ext4"
mount -t tmpfs -o size=256m tmpfs "$TMP/tmpfs"
DISK=$(basename "$LOOPDEV")
echo "   ext4 on $LOOPDEV at $TMP/ext4; tmpfs at $TMP/tmpfs"

# Wait until a spectrogram has printed its header (its probes are attached).
wait_ready() {
	for _ in $(seq 600); do
		[ -s "$1" ] && return 0
		sleep 0.1
	done
	echo "the spectrogram did not start; see $1"
	return 1
}

run_test() { # fs, name, load args...
	local fs=$1 name=$2
	shift 2
	local mnt="$TMP/$fs" tag="$fs-$name"
	local filter="proc.name=latscope-load and evt.is_io_write=true and fd.name contains $mnt"
	echo
	echo "== $tag: latscope load $*"
	"$LS" spectrogram 500 "$filter" --plain --colors none --width "$WIDTH" -d "$((DUR + 2))s" \
		--svg "$OUT/$tag.svg" >"$OUT/$tag.txt" 2>"$OUT/$tag.err" &
	local spec=$!
	local blk=""
	if [ "$fs" = ext4 ]; then
		"$LS" spectrogram 500 "blk.disk=$DISK" --block --plain --colors none --width "$WIDTH" -d "$((DUR + 2))s" \
			>"$OUT/$tag.block.txt" 2>"$OUT/$tag.block.err" &
		blk=$!
		wait_ready "$OUT/$tag.block.txt"
	fi
	wait_ready "$OUT/$tag.txt"
	sleep 0.5
	if ! "$LS" load -f "$mnt/testfile" -d "${DUR}s" "$@" >"$OUT/$tag.load.txt" 2>&1; then
		echo "   (the load stopped early: $(tail -1 "$OUT/$tag.load.txt"))"
	fi
	wait "$spec" || true
	[ -n "$blk" ] && { wait "$blk" || true; }
	sed 's/^/   /' "$OUT/$tag.load.txt"
	echo "   -- syscall latency of the writes ($OUT/$tag.txt, $OUT/$tag.svg):"
	sed 's/^/   /' "$OUT/$tag.txt"
	if [ -n "$blk" ]; then
		echo "   -- block request latency on $DISK ($OUT/$tag.block.txt):"
		grep -v '^#' "$OUT/$tag.block.txt" | sed 's/^/   /'
	fi
	rm -f "$mnt/testfile"
}

for fs in ext4 tmpfs; do
	run_test "$fs" 1-moderate --size 1KiB --rate 1000
	run_test "$fs" 2-sustained --size 100KiB
	run_test "$fs" 3-nocache --size 100KiB --sync --direct
done

echo
echo "== a trace of test 2 on ext4, drawn from the file (empty intervals kept)"
"$LS" record -w "$OUT/ext4-sustained.lst" --quiet -c latscope-load -d "$((DUR + 3))s" 2>"$OUT/record.err" &
rec=$!
sleep 2
"$LS" load -f "$TMP/ext4/testfile" --size 100KiB -d "${DUR}s" >/dev/null
wait "$rec" || true
"$LS" spectrogram -r "$OUT/ext4-sustained.lst" --plain --colors none --width "$WIDTH" \
	--svg "$OUT/ext4-sustained-file.svg" "evt.is_io_write=true" | sed 's/^/   /'
echo
echo "outputs in $OUT (text rows, SVG images, load reports, the trace)"
