#!/usr/bin/env bash
# Every benchmark, anchors included, in one run (`make bench`). Results go to stdout and to
# out/bench/*.md; docs/PERFORMANCE.md quotes them. Run as root on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/bench}
mkdir -p "$OUT"
export LATSCOPE=${LATSCOPE:-$PWD/target/release/latscope}
# shellcheck source=lib/host.sh
. bench/lib/host.sh
run() { # name, command...
	local name=$1; shift
	printf '\n## %s\n\n' "$name" | tee "$OUT/$name.md"
	# (the scripts say their host themselves; cargo bench does not)
	[ "$1" = bash ] || host_line | tee -a "$OUT/$name.md"
	"$@" 2>&1 | tee -a "$OUT/$name.md"
}
run record bash bench/record.sh
run flight bash bench/flight.sh
run why bash bench/why.sh
run profile bash bench/profile.sh
run spectrogram bash bench/spectrogram.sh
run agent bash bench/agent.sh
run views bash bench/views.sh
run events bash bench/events.sh
run diff bash bench/diff.sh
run export bash bench/export.sh
run hist cargo bench --locked -q -p latscope-hist
run filter cargo bench --locked -q -p latscope-filter
run trace cargo bench --locked -q -p latscope-trace
run micro bash bench/micro.sh
# IORIOT_SRC (a checkout of github.com/mimecast/ioriot) adds I/O Riot's replayer as an anchor.
run replay bash bench/replay.sh
run serve bash bench/serve.sh
echo
echo "results in $OUT/"
