#!/usr/bin/env bash
# latscope in a fleet, in ~30 s: a trace exported to Parquet and queried with DuckDB (the SQL
# distributed engines run), the unattended agent serving native histograms on /metrics for
# Prometheus and pushing exponential histograms to an OpenTelemetry receiver, and the Debian
# package that deploys it. Usage: demo/fleet.sh TRACE OUTDIR (run as root; `make demo` builds first).
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=$1
OUT=${2:-out/demo/fleet}
LS=${LATSCOPE:-$PWD/target/release/latscope}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
AGENT=""
RECEIVER=""
cleanup() {
	set +e
	[ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
	[ -n "$RECEIVER" ] && kill "$RECEIVER" 2>/dev/null && wait "$RECEIVER" 2>/dev/null
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

step "latscope agent: two series counted in the kernel, scraped from /metrics and pushed over OTLP"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# An OTLP/HTTP receiver that decodes each push with OpenTelemetry's own schema (the tests' one;
# a real collector takes the same endpoint: docs/AGENT.md).
python3 crates/cli/tests/otlp_receiver.py "$OUT/otlp.jsonl" "$WORK/otlp.port" &
RECEIVER=$!
for _ in $(seq 1 100); do [ -s "$WORK/otlp.port" ] && break; sleep 0.1; done
cat >"$WORK/agent.toml" <<TOML
listen = "127.0.0.1:$PORT"
interval = "1s"
[otlp]
endpoint = "http://127.0.0.1:$(cat "$WORK/otlp.port")/v1/metrics"
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
echo "the same series as OTLP exponential histograms (the receiver's last push, decoded):"
python3 - "$OUT/otlp.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if not lines:
    sys.exit("no OTLP push arrived")
for rm in lines[-1]["request"]["resource_metrics"]:
    for sm in rm["scope_metrics"]:
        for m in sm["metrics"]:
            points = [p for p in m.get("exponential_histogram", {}).get("data_points", []) if p.get("count")]
            for p in points[:4]:
                attrs = ", ".join(f'{a["key"]}={a["value"]["string_value"]}' for a in p.get("attributes", []))
                print(f'{m["name"]} {{{attrs}}}: count {p["count"]}, sum {p.get("sum", 0):.6f} {m.get("unit", "")}, '
                      f'scale {p.get("scale", 0)}, {len(p.get("positive", {}).get("bucket_counts", []))} buckets')
PY
kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
AGENT=""

step "make deb: the binary, its systemd unit, configuration, dashboard, man pages and completions in one package"
DEB_COMPRESS=zstd bash packaging/deb.sh "$LS" "$OUT/deb" >/dev/null
DEB=$(ls "$OUT"/deb/latscope_*.deb)
dpkg-deb --field "$DEB" Package Version Architecture Depends
dpkg-deb --contents "$DEB" | awk '{print $6}' | grep -E 'bin/|systemd|etc/|grafana|man1/latscope.1|completions/' | head -12
echo
echo "the Parquet files, the scrape, the OTLP pushes and the package are in $OUT (docs/INSTALL.md)"
