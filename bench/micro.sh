#!/usr/bin/env bash
# latscope bench's own costs: what a probe adds per sample to the operation it times (against the
# same operation in a bare loop, in the same run), and how fast the store writes and reads a week
# of hourly histograms of 50 series (against plain SQLite inserts and selects of the same blobs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/host.sh
. bench/lib/host.sh
host_line
echo "### Probe overhead"
echo
cargo bench --locked -q -p latscope-micro --bench overhead
echo
echo "### Store: a week of hourly histograms"
echo
cargo bench --locked -q -p latscope-store --bench week
