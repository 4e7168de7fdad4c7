#!/usr/bin/env bash
# CI for the optional engines (no GPU needed):
#   - the cuda build: Debian's CUDA 11.8 headers (scripts/cuda-headers.sh),
#     go vet -tags cuda over everything, the cuda test binary compiled, and
#     the kernels' PTX assembled for sm_70/80/90 (cuda/kernels/ptxcheck);
#   - the mpi build: go vet -tags mpi, ddpbench with mpi, and the collective
#     suite under mpirun (scripts/test-mpi.sh);
#   - the default build's tests of these packages (error paths without a GPU).
# gorgonia.org/cu's cgo flags already search /usr/include and
# /usr/lib/x86_64-linux-gnu, where Debian puts CUDA, so no CGO_CFLAGS or
# CGO_LDFLAGS are needed.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/dpkg-installed.sh
if ! dpkg_installed nvidia-cuda-dev; then
  if [ "$(id -u)" = 0 ]; then scripts/cuda-headers.sh
  else echo "check-engines: nvidia-cuda-dev is missing; run scripts/cuda-headers.sh as root" >&2; exit 1; fi
fi

echo "== default build"
go vet ./...
go test -count=1 ./cuda/... ./comm/nccl ./comm/mpi ./ddp/gorgoniaddp ./examples/gorgonia

echo "== -tags cuda (compile and vet; GPU tests need a GPU)"
go vet -tags cuda ./...
go test -tags cuda -count=1 -c -o /dev/null ./cuda
go test -tags cuda -count=1 ./cuda/kernels/...

echo "== -tags mpi"
go vet -tags mpi ./...
go build -tags mpi -o /dev/null ./cmd/ddpbench
scripts/test-mpi.sh
echo "check-engines: ok"
