#!/usr/bin/env bash
# Runs the mpi backend's collective suite for real: builds the comm/mpi test
# binary with -tags mpi and runs it under mpirun with 2 and 3 ranks, once
# through mpi.New and once through comm.InitFromEnv (GODDP_BACKEND=mpi, a
# file:// store). Needs libopenmpi-dev and openmpi-bin (scripts/setup-test.sh).
# Extra arguments go to the test binary, e.g. -test.v or -test.run=TestInFlight.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v mpirun >/dev/null || { echo "test-mpi: mpirun not found (apt install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go test -tags mpi -c -o "$tmp/mpi.test" ./comm/mpi

# --allow-run-as-root: CI containers run as root; --oversubscribe: more
# ranks than cores is fine for a correctness suite.
mpiflags=(--allow-run-as-root --oversubscribe --bind-to none)
if [ "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" = "" ]; then
  # Containers often forbid the cross-process reads (CMA) that OpenMPI's
  # shared-memory transport uses for large messages.
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
fi

for np in 2 3; do
  echo "== mpi.New, $np ranks"
  timeout 300 mpirun "${mpiflags[@]}" -np "$np" "$tmp/mpi.test" -test.count=1 "$@"
  echo "== comm.InitFromEnv (GODDP_BACKEND=mpi), $np ranks"
  GODDP_BACKEND=mpi GODDP_INIT_METHOD="file://$tmp/store-$np" \
    timeout 300 mpirun "${mpiflags[@]}" -np "$np" -x GODDP_BACKEND -x GODDP_INIT_METHOD \
    "$tmp/mpi.test" -test.count=1 "$@"
done
echo "test-mpi: ok"
