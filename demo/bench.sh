#!/usr/bin/env bash
# latscope bench in ~15 s: clocks and loops explained, then random reads of a file that is a
# quarter in the page cache (two tiers, and the cache size estimated from them), written to a store
# that plain SQLite reads back. Usage: demo/bench.sh OUTDIR (run as root; `make demo` builds first).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/demo}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d /var/tmp/latscope-bench-demo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
rm -f "$OUT/bench.db" "$OUT/bench.db-wal" "$OUT/bench.db-shm"

step "Clocks, an empty call and two loops: latscope bench clock call muladd sin -d 4s"
"$LS" bench clock call muladd sin -d 4s --report 0 --store "$OUT/bench.db" --flush 1s

step "A 128 MiB file on disk, a quarter of it in the page cache"
"$LS" bench "read:$WORK/data,file_size=128MiB" -d 0 --report 0 >/dev/null
dd if="$WORK/data" iflag=nocache count=0 status=none          # drop it from the page cache
dd if="$WORK/data" of=/dev/null bs=1M count=32 status=none    # read the first quarter back
echo "$WORK/data: 128 MiB, the first 32 MiB cached"

step "Random 4 KiB reads for 6 s: whole file (one every 2 ms), O_DIRECT, a hot 512 KiB region"
echo "(each read the cache misses caches one more block: the cached share grows a little as it runs)"
"$LS" bench "read:$WORK/data,name=read-whole,every=2ms" "read:$WORK/data,name=read-direct,direct" \
	"read:$WORK/data,name=read-hot-512KiB,region=512KiB" -d 6s --report 0 --store "$OUT/bench.db" --flush 1s

step "The store is plain SQLite (docs/STORE.md): series and hourly rows"
python3 - "$OUT/bench.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = db.execute("""SELECT s.name, s.unit, datetime(h.hour, 'unixepoch'), h.count, h.min, h.max, length(h.data)
                     FROM hist h JOIN series s ON s.id = h.series ORDER BY s.name, h.hour""").fetchall()
print(f"{'series':44} {'unit':4} {'hour (UTC)':19} {'values':>9} {'min':>9} {'max':>10} {'bytes':>6}")
for r in rows:
    print(f"{r[0][:44]:44} {r[1]:4} {r[2]:19} {r[3]:9} {r[4]:9} {r[5]:10} {r[6]:6}")
PY
ls -la "$OUT/bench.db"
