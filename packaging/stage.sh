#!/usr/bin/env bash
# Installs latscope's files under DESTDIR: the binary, the agent's systemd unit and configuration,
# the Grafana dashboard, man pages and shell completions (made by the binary itself from its
# command-line definition: `latscope generate`), copyright and changelog. `make install` and
# `make deb` (packaging/deb.sh) both install with it, so the package and a plain install agree.
# usage: packaging/stage.sh BIN      with DESTDIR, PREFIX, SYSCONFDIR, UNITDIR, ZSHDIR in the environment
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:?usage: packaging/stage.sh path/to/latscope}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
SYSCONFDIR=${SYSCONFDIR:-/etc}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
ZSHDIR=${ZSHDIR:-$PREFIX/share/zsh/site-functions}
[ -x "$BIN" ] || { echo "stage.sh: $BIN is not an executable: build it first (make build, or BIN=path/to/latscope)" >&2; exit 1; }
root=$DESTDIR
share=$root$PREFIX/share

install -d "$root$PREFIX/bin" "$root$UNITDIR" "$root$SYSCONFDIR/latscope" "$share/latscope/grafana" \
	"$share/man/man1" "$share/bash-completion/completions" "$root$ZSHDIR" "$share/fish/vendor_completions.d" \
	"$share/doc/latscope"
# Without debug information (the ci profile keeps it): a fifth of the size, the same program.
strip --strip-debug -o "$root$PREFIX/bin/latscope" "$BIN"
chmod 0755 "$root$PREFIX/bin/latscope"
# The unit names the binary and the configuration where this install puts them.
sed -e "s|/usr/local/bin/latscope|$PREFIX/bin/latscope|g" -e "s|/etc/latscope/|$SYSCONFDIR/latscope/|g" \
	packaging/latscope-agent.service > "$root$UNITDIR/latscope-agent.service"
chmod 0644 "$root$UNITDIR/latscope-agent.service"
# An edited configuration is kept: the new default goes next to it (as dpkg does with a conffile).
conf=$root$SYSCONFDIR/latscope/agent.toml
if [ -e "$conf" ] && ! cmp -s packaging/agent.toml "$conf"; then
	install -m 0644 packaging/agent.toml "$conf.new"
	echo "stage.sh: kept the edited $conf; the new default is $conf.new" >&2
else
	install -m 0644 packaging/agent.toml "$conf"
fi
install -m 0644 packaging/grafana/latscope.json "$share/latscope/grafana/latscope.json"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BIN" generate man "$tmp/man"
for page in "$tmp"/man/*.1; do
	gzip -9n < "$page" > "$share/man/man1/$(basename "$page").gz"
done
chmod 0644 "$share"/man/man1/latscope*.1.gz
"$BIN" generate bash > "$share/bash-completion/completions/latscope"
"$BIN" generate zsh > "$root$ZSHDIR/_latscope"
"$BIN" generate fish > "$share/fish/vendor_completions.d/latscope.fish"
chmod 0644 "$share/bash-completion/completions/latscope" "$root$ZSHDIR/_latscope" \
	"$share/fish/vendor_completions.d/latscope.fish"
install -m 0644 packaging/copyright "$share/doc/latscope/copyright"
gzip -9n < CHANGELOG.md > "$share/doc/latscope/changelog.gz"
chmod 0644 "$share/doc/latscope/changelog.gz"
