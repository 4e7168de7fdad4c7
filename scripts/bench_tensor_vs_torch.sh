#!/usr/bin/env bash
# Side-by-side GEMM comparison of goddp/tensor and torch on this machine:
# ROUNDS interleaved rounds of the Go benchmarks and the torch script, so
# both see the same machine load. Prints raw lines; compare best-of or
# medians per shape. torch gets its proper kernels where its OpenBLAS does
# not know the CPU (scripts/torch-blas.sh says what it chose).
# Usage: scripts/bench_tensor_vs_torch.sh [ROUNDS]
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
BIN=$(mktemp)
trap 'rm -f "$BIN"' EXIT
go test -c -o "$BIN" ./tensor/
. scripts/torch-blas.sh
torch_blas_setup
MLP="64,784,512,0,1 64,512,512,0,1 64,512,10,0,1 64,512,784,0,0 64,512,512,0,0 64,10,512,0,0 512,64,784,1,0 512,64,512,1,0 10,64,512,1,0"
for r in $(seq "$ROUNDS"); do
	echo "# round $r"
	GODDP_NUM_THREADS=2 "$BIN" -test.run XXX -test.bench 'MatMul/n=(256|1024)$' -test.benchtime 1s | grep '^Bench'
	OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "${TORCH_PY[@]}" scripts/bench_torch_gemm.py 2 256,256,256 1024,1024,1024
	GODDP_NUM_THREADS=1 "$BIN" -test.run XXX -test.bench 'GemmMLP' -test.benchtime 0.3s | grep '^Bench'
	# torch.set_num_threads does not reach OpenBLAS's own pthreads: pin them.
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 SECS=0.3 "${TORCH_PY[@]}" scripts/bench_torch_gemm.py 1 $MLP
done
