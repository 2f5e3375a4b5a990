# latscope: `make demo` shows it working, `make test` runs every test, `make bench` measures it.
# Each target first installs what is missing (Debian packages via apt, Python packages via pip).

SHELL := /bin/bash
CARGO ?= cargo
OUT ?= out
# Debian packages: clang/llvm compile the BPF programs; libelf/zlib/pkg-config build libbpf;
# tmux drives the terminal UI in tests; e2fsprogs/xfsprogs make test file systems on loop devices;
# chromium renders SVGs in tests; git, sqlite3 and tar are programs the replay tests record and replay;
# prometheus (native histograms), graphite-carbon and python3-whisper (carbon-cache, whisper-fetch)
# are the servers the export and replay tests scrape from and push to;
# strace/bpftrace/libbpf-tools/linux-perf/fio/hyperfine are benchmark anchors; bpftool/libbpf-dev
# build bench/floor (the cost floor of any syscall-latency tracer).
APT_BUILD := clang llvm libelf-dev zlib1g-dev pkg-config make gcc
APT_TEST := tmux e2fsprogs xfsprogs util-linux chromium procps python3-pip git sqlite3 tar prometheus graphite-carbon python3-whisper rsync coreutils attr
APT_BENCH := strace bpftrace libbpf-tools linux-perf fio hyperfine bpftool libbpf-dev curl
PIP_TEST := pyarrow duckdb polars pytz

.PHONY: all build deps deps-test deps-bench demo test bench fmt lint clean vmlinux

all: build

define apt_install
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		if [ "$$(id -u)" != 0 ]; then echo "need root to install packages: run as root (sudo make ...)"; exit 1; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	fi
endef

deps:
	$(call apt_install,$(APT_BUILD))
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (rustup) first"; exit 1; }

deps-test: deps
	$(call apt_install,$(APT_TEST))
	@for m in $(PIP_TEST); do python3 -c "import $$m" 2>/dev/null || pip install -q $$m || exit 1; done

deps-bench: deps-test
	$(call apt_install,$(APT_BENCH))

build: deps
	$(CARGO) build --release --locked

demo: deps-test build
	bash demo/demo.sh $(OUT)/demo

test: deps-test
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) build --profile ci --locked
	bash docs/gen-cli.sh --check target/ci/latscope
	$(CARGO) test --workspace --locked --profile ci -- --test-threads=1

bench: deps-bench build
	bash bench/run.sh

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Regenerate the committed vmlinux.h from this machine's kernel BTF.
vmlinux: deps-bench
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > crates/probe/src/bpf/vmlinux.h

clean:
	$(CARGO) clean
	rm -rf $(OUT)
