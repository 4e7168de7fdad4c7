# Sourced by install-missing.sh (setup.sh, setup-test.sh), cuda-headers.sh and check-engines.sh.
# dpkg_installed PKG succeeds only when dpkg's state for PKG is "installed".
# `dpkg -s PKG` is not that test: it also succeeds for a package removed with
# its config files left (state "rc"), and a setup that trusted it skipped the
# install and failed later. scripts/test-dpkg-installed.sh checks both.
dpkg_installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }
