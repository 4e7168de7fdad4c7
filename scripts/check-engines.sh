#!/usr/bin/env bash
# CI for the optional engines (no GPU needed):
#   - the cuda build: go vet -tags cuda over everything; the cuda, nccl and
#     gpuinfo tests (a fake device drives the Context's logic, a fake library
#     the nccl engine's; without a GPU the device tests skip and the
#     no-GPU errors are checked); the kernels' PTX assembled for
#     sm_70/80/90 with Debian's CUDA 11.8 PTX compiler
#     (scripts/cuda-headers.sh, cuda/kernels/ptxcheck);
#   - the GPU kit (scripts/gpu-kit.sh): it builds, stays within 60 MiB,
#     its binaries link no CUDA, NCCL or BLAS library, and its run.sh says
#     "gpu-check: no NVIDIA GPU" with exit code 3 within 10 s here; a
#     program asked for a GPU here fails naming what is missing;
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

echo "== -tags cuda (vet; tests: fakes here, the device tests need a GPU)"
go vet -tags cuda ./...
go test -tags cuda -count=1 ./cuda/... ./comm/nccl ./cmd/gpuinfo ./internal/libfind

echo "== the GPU kit"
kit=$(mktemp -d)
trap 'rm -rf "$kit"' EXIT
GPU_KIT_UNPACKED="$kit/unpacked" scripts/gpu-kit.sh "$kit/kit"
size=$(du -sk "$kit/kit" | cut -f1)
[ "$size" -le $((60 * 1024)) ] || { echo "check-engines: the kit is $((size / 1024)) MiB, over 60" >&2; exit 1; }
for f in "$kit"/unpacked/bin/* "$kit"/unpacked/tests/*; do
  if ldd "$f" | grep -E 'libcublas|libnccl|libcudart|libopenblas|libdnnl'; then
    echo "check-engines: $f links a CUDA/NCCL/BLAS library" >&2; exit 1
  fi
done
start=$(date +%s)
set +e
out=$(timeout 10 bash "$kit/kit/run.sh" 2>&1)
rc=$?
set -e
echo "$out"
if [ "$rc" != 3 ] || [ "$(echo "$out" | tail -n 1)" != "gpu-check: no NVIDIA GPU" ]; then
  echo "check-engines: run.sh without a GPU: exit $rc after $(($(date +%s) - start)) s, want 3 and 'gpu-check: no NVIDIA GPU'" >&2; exit 1
fi
# run.sh's GPU path, dry: a gpuinfo that claims one GPU, and in place of
# the cuda test binary a stand-in (scripts/testdata/kithang) that hangs on
# the first device test and fails the others at once. Every step runs and
# is counted (the GPU ones fail here); the hung step is killed at its
# bound (GPU_CHECK_LIMIT=5 here) with its Go stacks in $OUT/logs; the
# steps after it still run; the last line is the summary.
fake=$kit/fakekit
cp -r "$kit/kit" "$fake"
rm -f "$fake"/pack/bin/gpuinfo.* "$fake"/pack/tests/cuda.test.* # the real ones (.xz or .gz), replaced below
printf '#!/bin/sh\nif [ "$1" = -count ]; then echo 1; exit 0; fi\necho "fake gpuinfo"; exit 4\n' | gzip -n >"$fake/pack/bin/gpuinfo.gz"
go build -o "$kit/kithang" ./scripts/testdata/kithang
gzip -n -c "$kit/kithang" >"$fake/pack/tests/cuda.test.gz"
grep -v -e ' bin/gpuinfo$' -e ' tests/cuda.test$' "$kit/kit/SHA256SUMS" >"$fake/SHA256SUMS"
first=$(head -n 1 "$fake/tests/cuda.tests")
second=$(sed -n 2p "$fake/tests/cuda.tests")
# Every step's bound is a literal of 120 s or less.
if grep -E '^\s*(check|gotest) ' "$fake/run.sh" | grep -vE '^\s*(check|gotest) "?[^ ]+"? (120|[1-9][0-9]?|1[01][0-9]) ' | grep -v '^\s*check "\$name" 120'; then
  echo "check-engines: a run.sh step above has no bound of 120 s or less" >&2; exit 1
fi
set +e
start=$(date +%s)
out=$(OUT="$kit/out" GPU_CHECK_LIMIT=5 KITHANG_TEST="$first" timeout 600 bash "$fake/run.sh" 2>&1)
rc=$?
took=$(($(date +%s) - start))
set -e
echo "$out" | grep -E '^(== |   (ok|FAILED)|gpu-check)'
hunglog=$kit/out/logs/test-cuda-$first.log
problem=""
[ "$rc" = 1 ] || problem="exit $rc, want 1"
echo "$out" | tail -n 1 | grep -Eq '^gpu-check: [0-9]+ passed, [1-9][0-9]* failed$' || problem="$problem; no summary line"
echo "$out" | grep -A4 "^== test-cuda-$first " | grep -q 'killed at its bound of 5 s' || problem="$problem; the hung step was not killed at its bound"
grep -q '^SIGQUIT' "$hunglog" && grep -q '^goroutine ' "$hunglog" || problem="$problem; no Go stacks in $hunglog"
echo "$out" | grep -q "^== test-cuda-$second " || problem="$problem; the step after the hung one did not run"
echo "$out" | grep -q '^== ddpbench-nccl-device ' || problem="$problem; the later steps did not run"
[ "$took" -le 300 ] || problem="$problem; took $took s"
if [ -n "$problem" ]; then
  echo "check-engines: run.sh's GPU path (dry run): ${problem#; }" >&2; exit 1
fi
set +e
out=$("$kit/unpacked/bin/ddpbench" allreduce -backend nccl -nproc 1 -max 4K -timeout 20s 2>&1)
rc=$?
set -e
echo "$out"
if [ "$rc" != 5 ] || ! echo "$out" | grep -Eq 'no usable CUDA device|libcuda.so.1|libnccl.so.2'; then
  echo "check-engines: ddpbench over nccl without a GPU: exit $rc, want 5 and a message naming what is missing" >&2; exit 1
fi

echo "== -tags mpi"
go vet -tags mpi ./...
go build -tags mpi -o /dev/null ./cmd/ddpbench
scripts/test-mpi.sh
echo "check-engines: ok"
