#!/usr/bin/env bash
# Builds bench/floor (the cost floor of a syscall-latency tracer) into directory $1 and prints
# the loader's path. Needs clang, bpftool and libbpf-dev (make deps-bench installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
for t in clang bpftool cc; do
	command -v "$t" >/dev/null || { echo "bench/floor: $t not installed (make deps-bench)" >&2; exit 1; }
done
clang -g -O2 -target bpf -D__TARGET_ARCH_x86 -I "$here/../../crates/probe/src/bpf" \
	-c "$here/floor.bpf.c" -o "$out/floor.bpf.o"
bpftool gen skeleton "$out/floor.bpf.o" name floor_bpf >"$out/floor.skel.h"
cc -O2 -I "$out" "$here/floor.c" -o "$out/floor" -lbpf
echo "$out/floor"
