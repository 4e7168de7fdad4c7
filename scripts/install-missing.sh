# Sourced by setup.sh and setup-test.sh.
# install_missing WHO PKG...: prints what WHO needs and which of it is missing,
# then installs the missing packages with apt-get (Debian 12, as root).
# Packages dpkg reports "installed" are skipped (scripts/dpkg-installed.sh).
. "$(dirname "${BASH_SOURCE[0]}")/dpkg-installed.sh"
install_missing() {
  local who=$1; shift
  local need=() p
  for p in "$@"; do dpkg_installed "$p" || need+=("$p"); done
  echo "$who: needs $*"
  if [ "${#need[@]}" -eq 0 ]; then echo "$who: all installed"; return 0; fi
  echo "$who: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
}
