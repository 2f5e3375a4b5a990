#!/usr/bin/env bash
# latscope in a fleet, in ~30 s: a trace exported to Parquet and queried with DuckDB (the SQL
# distributed engines run), and the unattended agent serving native histograms on /metrics for
# Prometheus. Usage: demo/fleet.sh TRACE OUTDIR (run as root; `make demo` builds first).
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=$1
OUT=${2:-out/demo/fleet}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
AGENT=""
cleanup() {
	set +e
	[ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "latscope export -r $(basename "$TRACE") --parquet trace.parquet (events, processes, disks, traces tables)"
rm -f "$OUT"/trace*.parquet
"$LS" export -r "$TRACE" --parquet "$OUT/trace.parquet"
ls -la "$OUT"/*.parquet

step "DuckDB: syscall latency by operation, from the Parquet file (as latscope hist --by syscall)"
python3 - "$OUT/trace.parquet" <<'PY'
import sys, duckdb
con = duckdb.connect()
con.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet('{sys.argv[1]}')")
print(con.sql("""
SELECT host, op, count(*) AS calls,
       quantile_disc(lat, 0.5) / 1e3 AS p50_us,
       quantile_disc(lat, 0.99) / 1e3 AS p99_us,
       max(lat) / 1e3 AS max_us
FROM events WHERE kind = 'syscall'
GROUP BY host, op ORDER BY calls DESC LIMIT 10"""))
PY

step "latscope agent: two series counted in the kernel, scraped from /metrics"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/agent.toml" <<TOML
listen = "127.0.0.1:$PORT"
interval = "1s"
[[series]]
name = "syscalls"
by = "class"
[[series]]
name = "disks"
by = "disk"
TOML
cat "$WORK/agent.toml"
"$LS" agent --config "$WORK/agent.toml" &
AGENT=$!
get() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
for _ in $(seq 1 50); do get "http://127.0.0.1:$PORT/metrics" >/dev/null 2>&1 && break; sleep 0.2; done
sleep 3
get "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics.txt"
echo "GET http://127.0.0.1:$PORT/metrics (classic buckets in text; Prometheus asks for native histograms over protobuf):"
grep -E '^latscope_syscall_latency_seconds_(count|sum)|^latscope_agent_' "$OUT/metrics.txt" | head -20
echo
echo "the Parquet files and the scrape are in $OUT; packaging/ has the systemd unit, an example"
echo "configuration and a Grafana dashboard of the agent's native histograms"
