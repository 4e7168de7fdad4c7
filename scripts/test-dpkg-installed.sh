#!/usr/bin/env bash
# Checks dpkg_installed (scripts/dpkg-installed.sh) against a fake dpkg
# database (DPKG_ADMINDIR) holding an installed package, one removed with its
# config files left ("rc"), and one half-installed; no real package changes.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/dpkg-installed.sh
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
mkdir -p "$db/info" "$db/updates"
touch "$db/available"
for pkg in "goddp-test-ok:install ok installed" "goddp-test-rc:deinstall ok config-files" "goddp-test-half:install reinstreq half-installed"; do
  printf 'Package: %s\nStatus: %s\nPriority: optional\nSection: misc\nMaintainer: t <t@t>\nArchitecture: all\nVersion: 1\nDescription: t\n\n' "${pkg%%:*}" "${pkg#*:}"
done >"$db/status"
export DPKG_ADMINDIR=$db
fail=0
check() { # check PKG WANT(0|1)
  if dpkg_installed "$1"; then got=0; else got=1; fi
  if [ "$got" != "$2" ]; then echo "FAIL: dpkg_installed $1 gave $got, want $2" >&2; fail=1; fi
}
check goddp-test-ok 0
check goddp-test-rc 1
check goddp-test-half 1
check goddp-test-absent 1
# The old test passes the rc package: this is the bug the helper fixes.
if ! dpkg -s goddp-test-rc >/dev/null 2>&1; then echo "note: this dpkg's 'dpkg -s' already rejects rc packages" >&2; fi
[ "$fail" = 0 ] && echo "test-dpkg-installed: ok"
exit "$fail"
