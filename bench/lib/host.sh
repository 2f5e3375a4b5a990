# Sourced by the bench scripts: host_line prints the host every figure below it was measured on
# (CPU model, CPUs, kernel, load average, time), because the same build's ratios move between
# machines of one kind.
host_line() {
	local model
	model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
	echo "Host: ${model:-unknown CPU}, $(nproc) CPUs, kernel $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')."
}
