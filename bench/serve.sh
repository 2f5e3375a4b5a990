#!/usr/bin/env bash
# The dashboard's page load time in headless Chromium (driven over the DevTools protocol) with a
# week of hourly histograms of 50 series: from navigation start to the page rendered from its
# JSON and painted (the page's own performance.now() marks), against the same page over a store of
# one series and one hour, in the same run. Target: under 200 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/host.sh
. bench/lib/host.sh
host_line
cargo bench --locked -q -p latscope --bench serve
