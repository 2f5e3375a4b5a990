#!/usr/bin/env bash
# Cost of the container lookup per event: filtering and grouping a trace by container next to
# the same by process name, printed as a Markdown table. The trace is synthetic (EVENTS events of
# four processes, each in a docker container of its own named in the header's cgroup table);
# each view runs on one core (taskset -c 0) and is measured in CPU seconds (user + sys; perf's
# task-clock when perf is installed), the median of REPS runs.
#
# Environment: LATSCOPE (default target/$PROFILE/latscope), EVENTS (default 10000000), REPS (3),
# PROFILE (cargo profile of the builds, default release; `ci` reuses the test build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/common.sh
. bench/lib/common.sh
host_line
EVENTS=${EVENTS:-10000000}
REPS=${REPS:-3}

build_synth
"$SYNTH" "$WORK/c.lst" "$EVENTS" 0 containers 2>/dev/null

ID=$(printf '1%.0s' $(seq 12))
echo "| view (one core, $((EVENTS / 1000000)) M events) | CPU | rate | vs the proc.name case |"
echo "|---|---|---|---|"
base_f=
base_g=
for v in "hist, filter proc.name = nginx|hist|proc.name = nginx|f" \
	"hist, filter container.name = c1|hist|container.name = c1|f" \
	"hist, filter container.id = $ID|hist|container.id = $ID|f" \
	"hist, filter k8s.ns.name exists (absent: no pod)|hist|k8s.ns.name exists|f" \
	"top --by proc|top --by proc||g" \
	"top --by container|top --by container||g" \
	"top --by cgroup|top --by cgroup||g"; do
	IFS='|' read -r name cmd filter kind <<<"$v"
	# shellcheck disable=SC2206
	args=($cmd)
	args=("${args[0]}" -r "$WORK/c.lst" "${args[@]:1}")
	[ -n "$filter" ] && args+=("$filter")
	c=$(cpu taskset -c 0 "$LS" "${args[@]}")
	if [ "$kind" = f ]; then
		base_f=${base_f:-$c}
		base=$base_f
	else
		base_g=${base_g:-$c}
		base=$base_g
	fi
	printf '| %s | %.3f s | %.1f M events/s | %.2fx |\n' "$name" "$c" "$(echo "$EVENTS / $c / 1000000" | bc -l)" \
		"$(echo "$c / $base" | bc -l)"
done
