#!/usr/bin/env bash
# Builds the Debian package out of an already built binary: packaging/stage.sh installs the files
# into a staging tree, this adds the control file, conffiles and maintainer scripts and runs
# `dpkg-deb --build`. The Depends line is what dpkg-shlibdeps finds the binary linked against.
# usage: packaging/deb.sh path/to/latscope OUTDIR      writes OUTDIR/latscope_VERSION_ARCH.deb
#        (DEB_COMPRESS=xz|zstd|gzip|none in the environment: the payload's compression, xz unless set)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:?usage: packaging/deb.sh path/to/latscope OUTDIR}
OUTDIR=${2:?usage: packaging/deb.sh path/to/latscope OUTDIR}
[ -x "$BIN" ] || { echo "deb.sh: $BIN is not an executable: build it first (make build, or make deb BIN=path/to/latscope)" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps; do
	command -v $tool >/dev/null || { echo "deb.sh: $tool not found: apt-get install dpkg-dev" >&2; exit 1; }
done
version=$("$BIN" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
DESTDIR=$root PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/lib/systemd/system ZSHDIR=/usr/share/zsh/vendor-completions \
	bash packaging/stage.sh "$BIN"

# dpkg-shlibdeps reads the package's name from a debian/control; it runs in a scratch source tree.
mkdir -p "$work/src/debian"
printf 'Source: latscope\n\nPackage: latscope\nArchitecture: %s\n' "$arch" > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O "$root/usr/bin/latscope" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "deb.sh: dpkg-shlibdeps found no dependencies of $BIN" >&2; exit 1; }

install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: latscope
Version: $version
Architecture: $arch
Maintainer: The latscope authors <latscope@localhost>
Section: admin
Priority: optional
Depends: $depends
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Description: Linux latency observatory: syscall and block latency with eBPF
 latscope records every syscall's and block request's latency with eBPF,
 explains slow calls, draws heat maps, histograms and timelines, replays
 recorded I/O, and exports to Prometheus, Graphite and Parquet.
 .
 The latscope-agent service serves latency histograms on /metrics (and to
 Graphite); it is enabled and started on install where systemd runs. Its
 configuration is /etc/latscope/agent.toml.
CONTROL
echo /etc/latscope/agent.toml > "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do
	install -m 0755 "packaging/debian/$script" "$root/DEBIAN/$script"
done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
mkdir -p "$OUTDIR"
deb=$OUTDIR/latscope_${version}_$arch.deb
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" --build "$root" "$deb" >/dev/null
echo "$deb"
