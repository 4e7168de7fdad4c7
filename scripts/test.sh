#!/usr/bin/env bash
# The test command: installs what the tests need (scripts/setup-test.sh:
# the training setup plus the test tools; idempotent), then runs
#   1. go vet and the unit + multi-process tests of every package (default build;
#      the end-to-end fault suites after the rest, one package at a time),
#   2. the pure-Go build (CGO_ENABLED=0) of tensor/autograd/nn/optim, and the
#      OpenBLAS-only engine (-tags nodnnl) of tensor/nn,
#   3. a compile + vet of the `cuda` and `mpi` build tags, and the mpi suite under mpirun,
#   4. bounded fuzzing of every parser,
#   5. a 2-rank smoke run of examples/linear and examples/mlp through ddprun.
# Set GODDP_TEST_QUICK=1 to run only step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
bash scripts/setup-test.sh
bash scripts/test-dpkg-installed.sh

echo "== go vet"
go vet ./...
logs=$(mktemp -d)
echo "== go test (default build)"
bash scripts/bounded.sh 2100 "$logs/unit.log" go test -count=1 -timeout 25m $(go list ./... | grep -v '/e2e')
# The end-to-end fault suites time kills, freezes and timeouts across real
# processes: run them one package at a time after the rest, so that the
# heaviest tests (examples on the simulated GPU) do not share their cores.
# -v streams each test's verdict as it ends (one package at a time), so a
# run that hangs shows where; each package takes about 3 minutes.
echo "== go test (end-to-end fault suites, one package at a time)"
bash scripts/bounded.sh 1800 "$logs/e2e.log" go test -count=1 -p 1 -v -timeout 12m ./e2e/...
rm -rf "$logs"
[ "${GODDP_TEST_QUICK:-0}" = 1 ] && exit 0

echo "== go test (pure Go, CGO_ENABLED=0)"
CGO_ENABLED=0 go test -count=1 -timeout 10m ./tensor/ ./autograd/ ./nn/ ./optim/
echo "== go test (OpenBLAS kernels only, -tags nodnnl)"
go vet -tags nodnnl ./tensor/
go test -tags nodnnl -count=1 -timeout 10m ./tensor/ ./nn/

echo "== cuda and mpi build tags (compile + vet; the mpi suite under mpirun)"
bash scripts/check-engines.sh

echo "== fuzz (bounded)"
bash scripts/fuzz.sh "${GODDP_FUZZTIME:-10s}"

echo "== examples on 2 ranks through ddprun"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ddprun" ./cmd/ddprun
"$tmp/ddprun" --standalone --nproc-per-node 2 ./examples/linear -epochs 2 -ckpt-dir "$tmp/ckpt" | tee "$tmp/linear.log"
grep -q '^samples_per_s=' "$tmp/linear.log"
"$tmp/ddprun" --standalone --nproc-per-node 2 ./examples/mlp -epochs 2 | tee "$tmp/mlp.log"
grep -q '^samples_per_s=' "$tmp/mlp.log"
echo "all test steps passed"
