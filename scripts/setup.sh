#!/usr/bin/env bash
# Installs what goddp needs on a fresh Debian 12 machine (run as root) and
# downloads the Go modules. Idempotent: already-installed packages are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/dpkg-installed.sh
need=()
# iproute2 (ss) and strace are the e2e auth test's tools; it fails without them.
# dataset-fashion-mnist: the real data examples/cnn trains on (/usr/share/datasets/fashion-mnist).
# slurmctld, slurmd, slurm-client, munge: e2e/cluster's Slurm cluster (its daemons start inside the test).
# chromium: trainer's dashboard test loads the live training page in headless Chromium.
for p in libopenblas-dev libdnnl-dev pkg-config gcc libopenmpi-dev openmpi-bin iproute2 procps strace dataset-fashion-mnist slurmctld slurmd slurm-client munge chromium; do
  dpkg_installed "$p" || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then export PATH=$PATH:/usr/local/go/bin
  else echo "setup: Go 1.26 is required (https://go.dev/dl); 'go' is not on PATH" >&2; exit 1; fi
fi
go mod download
