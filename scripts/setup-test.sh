#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian 12 machine (run as
# root): the training setup (scripts/setup.sh), then the tools only tests use.
# It prints the packages it needs and those it installs. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/install-missing.sh

# libopenmpi-dev, openmpi-bin: the mpi build tag and its suite under mpirun
#   (scripts/check-engines.sh, scripts/test-mpi.sh, e2e/cluster).
# iproute2 (ss), strace: the e2e auth test's tools; it fails without them.
# procps: ps and pgrep, which test and benchmark scripts use.
# slurmctld, slurmd, slurm-client, munge: e2e/cluster's Slurm cluster (its
#   daemons start inside the test).
# chromium: trainer's dashboard test loads the live training page in headless Chromium.
test_pkgs=(libopenmpi-dev openmpi-bin iproute2 procps strace slurmctld slurmd slurm-client munge chromium)
install_missing setup-test "${test_pkgs[@]}"
