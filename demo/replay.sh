#!/usr/bin/env bash
# latscope replay in ~30 s: record a small application's file I/O (sqlite3 inserting rows, tar
# extracting an archive), turn the recording into a replay plan, build the starting tree in a
# sandbox, replay it as fast as possible and at the recorded pace, and compare the two runs.
# Usage: demo/replay.sh OUTDIR (run as root; `make demo` builds first).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/demo/replay}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d /var/tmp/latscope-replay-demo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "The application: sqlite3 inserts 2000 rows in 20 transactions, tar extracts 200 files"
mkdir -p "$WORK/app/src"
for i in $(seq 1 200); do head -c $((i * 97)) /dev/urandom >"$WORK/app/src/f$i"; done
tar -C "$WORK/app" -cf "$WORK/app/src.tar" src
rm -rf "$WORK/app/src"
cat >"$WORK/app.sh" <<APP
set -e
cd $WORK/app
for t in \$(seq 1 20); do
	echo "BEGIN; CREATE TABLE IF NOT EXISTS t(k INTEGER, v TEXT);" \\
		"\$(for r in \$(seq 1 100); do echo "INSERT INTO t VALUES(\$r, hex(randomblob(64)));"; done)" \\
		"COMMIT;" | sqlite3 app.db
done
mkdir -p out && tar -C out -xf src.tar
APP

step "latscope record -w app.lst --syscalls io -- sh app.sh"
"$LS" record -w "$OUT/app.lst" --syscalls io --no-block -- sh "$WORK/app.sh"

step "latscope replay prepare: the plan (what is replayed, what is left out and why)"
"$LS" replay prepare -r "$OUT/app.lst" -o "$OUT/app.lsr" --root "$WORK/sandbox" "proc.name in (sqlite3, tar)"

step "latscope replay init + run --speed 0 (as fast as the dependencies between threads allow)"
"$LS" replay run "$OUT/app.lsr" --init --speed 0 --stats "$OUT/fast.json" --json >/dev/null
"$LS" replay run "$OUT/app.lsr" --init --speed 0 --stats "$OUT/fast.txt"
head -40 "$OUT/fast.txt"

step "The same at the recorded pace (--speed 1): how late each operation started"
"$LS" replay run "$OUT/app.lsr" --init --speed 1 --stats "$OUT/paced.json" --json >/dev/null
python3 - "$OUT/paced.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
l = s["lateness"]
print(f"{s['ops']} operations in {s['wall_ns'] / 1e6:.1f} ms (recorded: {s['recorded_ns'] / 1e6:.1f} ms), "
      f"{s['divergences']} divergences")
print(f"lateness against the recorded schedule: p50 {l['p50_ns'] / 1e3:.1f} us, p99 {l['p99_ns'] / 1e3:.1f} us, "
      f"max {l['max_ns'] / 1e3:.1f} us")
PY
step "latscope replay compare fast.json paced.json"
"$LS" replay compare "$OUT/fast.json" "$OUT/paced.json" | head -30

"$LS" replay purge "$OUT/app.lsr" >/dev/null 2>&1 || true
echo
echo "plan, statistics and the recording are in $OUT"
