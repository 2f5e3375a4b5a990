# latscope: `make demo` shows it working, `make test` runs every test, `make bench` measures it,
# `make deb` packages it for Debian and Ubuntu, `make install` installs it elsewhere (docs/INSTALL.md).
# Each target first installs what is missing (Debian packages via apt, Python packages via pip).

SHELL := /bin/bash
CARGO ?= cargo
OUT ?= out
# Debian packages: clang/llvm compile the BPF programs; libelf/zlib/pkg-config build libbpf;
# tmux drives the terminal UI in tests; e2fsprogs/xfsprogs make test file systems on loop devices;
# chromium renders SVGs in tests; git, sqlite3 and tar are programs the replay tests record and replay;
# prometheus (native histograms), graphite-carbon and python3-whisper (carbon-cache, whisper-fetch)
# are the servers the export and replay tests scrape from and push to (prometheus ships promtool);
# openjdk-17-jre-headless runs Spark (pyspark), one of the readers the Parquet export is read with;
# strace/bpftrace/libbpf-tools/linux-perf/fio/hyperfine are benchmark anchors; bpftool/libbpf-dev
# build bench/floor (the cost floor of any syscall-latency tracer). dpkg-dev builds the package
# (`make deb`, and the test that installs it). libc6-dbg is glibc's separate debug file, which names
# glibc's own functions in user stacks.
APT_BUILD := clang llvm libelf-dev zlib1g-dev pkg-config make gcc
APT_TEST := dpkg-dev libc6-dbg tmux e2fsprogs xfsprogs util-linux chromium procps python3-pip git sqlite3 tar prometheus graphite-carbon python3-whisper openjdk-17-jre-headless rsync coreutils attr iproute2 fio libdevel-nytprof-perl
APT_BENCH := strace bpftrace libbpf-tools linux-perf fio hyperfine bpftool libbpf-dev curl
# Python packages: the Parquet export's readers (pyarrow, duckdb, polars, pandas, pyspark); perfetto
# ships Perfetto's own trace schema (perfetto_trace_pb2), which every exported Perfetto trace is
# parsed with; opentelemetry-proto has OpenTelemetry's OTLP schema, which the agent's OTLP pushes are
# decoded with. PACKAGE=MODULE where the module's name differs.
PIP_TEST := pyarrow duckdb polars pytz pandas pyspark perfetto opentelemetry-proto=opentelemetry.proto
# test-kernels: QEMU boots other kernels (unpacked from Debian packages, never installed) from a
# busybox initramfs.
APT_VM := qemu-system-x86 busybox-static

.PHONY: all build deps deps-test deps-bench demo test test-kernels bench fmt lint clean vmlinux deb install uninstall

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
	@for p in $(PIP_TEST); do python3 -c "import $${p#*=}" 2>/dev/null || pip install -q $${p%%=*} || exit 1; done

deps-bench: deps-test
	$(call apt_install,$(APT_BENCH))

build: deps
	$(CARGO) build --release --locked

demo: deps-test build
	bash demo/demo.sh $(OUT)/demo

# Each phase is timed (scripts/phase); the end of the run prints the phase times and the ten slowest
# tests (scripts/run-tests.py), so growth is seen early. The build and every test binary use the
# `ci` profile: release optimisation without LTO, so linking the test binaries stays cheap (each
# crate's tests/*.rs are one binary, tests/it/main.rs: scripts/test-binaries.py).
test:
	@rm -f $(OUT)/test-phases.tsv
	@OUT=$(OUT) scripts/phase deps $(MAKE) --no-print-directory deps-test
	@OUT=$(OUT) scripts/phase fmt $(CARGO) fmt --all -- --check
	@OUT=$(OUT) scripts/phase clippy $(CARGO) clippy --workspace --all-targets --locked --profile ci -- -D warnings
	@OUT=$(OUT) scripts/phase build $(CARGO) build --profile ci --locked
	@OUT=$(OUT) scripts/phase cli-docs bash docs/gen-cli.sh --check target/ci/latscope
	@OUT=$(OUT) scripts/phase tests python3 scripts/run-tests.py --profile ci --out $(OUT)
	@OUT=$(OUT) scripts/phase kernels $(MAKE) --no-print-directory test-kernels
	@python3 scripts/run-tests.py --report --out $(OUT)

# Boot Debian 12's Linux 6.1 and 6.12 and Ubuntu 22.04's 5.15 under QEMU and run the probe tests
# and a record / replay / views / agent / why smoke run inside each (vmtest/, docs/KERNELS.md).
# KERNELS="6.1" for one; Ubuntu 20.04's 5.11 and 5.13 can be asked for too (KERNELS=5.11: not in
# the default set while an intermittent hang under emulation is open, see docs/KERNELS.md).
KERNELS ?= 6.1 6.12 5.15
test-kernels: deps
	$(call apt_install,$(APT_VM))
	$(CARGO) build --profile ci --locked
	@mkdir -p $(OUT)/kernels
	# The workspace's test build (as `make test` builds it: asking for two packages alone would
	# unify features differently and rebuild dependencies), of which the probe and live tests run.
	$(CARGO) test --profile ci --locked --workspace --no-run --message-format=json \
		| python3 -c 'import json,re,sys; print(*dict.fromkeys(m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m.get("target", {}).get("kind") == ["test"] and re.search(r"[#/ ]?latscope-(probe|live)[@ ]", m["package_id"])), sep="\n")' \
		> $(OUT)/kernels/tests.list
	bash vmtest/run.sh $(OUT)/kernels $(OUT)/kernels/tests.list $(KERNELS)

bench: deps-bench build
	bash bench/run.sh

# Packaging (docs/INSTALL.md). `make deb` writes $(OUT)/deb/latscope_VERSION_ARCH.deb from the
# release build; BIN=path/to/latscope packages another build without building (make deb
# BIN=target/ci/latscope). DEB_COMPRESS=zstd builds in a second instead of half a minute (xz, the
# default, is read by every dpkg; zstd needs dpkg 1.21.18: Debian 12, Ubuntu 21.10). `make install`
# puts the same files under $(DESTDIR)$(PREFIX) (the unit in $(UNITDIR), the configuration in
# $(SYSCONFDIR)/latscope, an edited one kept), `make uninstall` removes them.
BIN ?= target/release/latscope
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
ZSHDIR ?= $(PREFIX)/share/zsh/site-functions
DESTDIR ?=
DEB_COMPRESS ?= xz
BUILD_BIN := $(if $(filter target/release/latscope,$(BIN)),build)

deb: $(BUILD_BIN)
	$(call apt_install,dpkg-dev)
	DEB_COMPRESS=$(DEB_COMPRESS) bash packaging/deb.sh $(BIN) $(OUT)/deb

install: $(BUILD_BIN)
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" SYSCONFDIR="$(SYSCONFDIR)" UNITDIR="$(UNITDIR)" ZSHDIR="$(ZSHDIR)" \
		bash packaging/stage.sh $(BIN)
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		echo "to run the agent: systemctl daemon-reload && systemctl enable --now latscope-agent"; fi

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/latscope $(DESTDIR)$(UNITDIR)/latscope-agent.service \
		$(DESTDIR)$(PREFIX)/share/man/man1/latscope.1.gz $(DESTDIR)$(PREFIX)/share/man/man1/latscope-*.1.gz \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/latscope $(DESTDIR)$(ZSHDIR)/_latscope \
		$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/latscope.fish \
		$(DESTDIR)$(SYSCONFDIR)/latscope/agent.toml.new
	rm -rf $(DESTDIR)$(PREFIX)/share/latscope $(DESTDIR)$(PREFIX)/share/doc/latscope
	@# The configuration goes only if it is the default: an edited one is the admin's.
	@conf=$(DESTDIR)$(SYSCONFDIR)/latscope/agent.toml; \
	if cmp -s packaging/agent.toml $$conf; then rm -f $$conf; rmdir $(DESTDIR)$(SYSCONFDIR)/latscope 2>/dev/null || true; \
	elif [ -e $$conf ]; then echo "kept the edited $$conf"; fi

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
