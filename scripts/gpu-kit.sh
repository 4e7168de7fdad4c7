#!/usr/bin/env bash
# Builds the GPU kit into DIR on a CPU machine (Debian 12; cgo; no GPU, no
# CUDA library needed: goddp opens libcuda.so.1, cuBLAS and NCCL at run
# time). Copy DIR to any Linux x86-64 machine with an NVIDIA GPU and run
#   bash DIR/run.sh
# there: no Go, no network. See docs/gpu.md.
#
# The binaries are stripped and link nothing beyond glibc, libstdc++/libgcc
# (the CPU side is built pure Go: -tags noblas, no OpenBLAS/oneDNN):
#   tests/<pkg>.test  the -tags cuda test binaries of every package with
#                     device tests (cuda, comm/nccl, and any package whose
#                     tests carry the cuda build tag)
#   bin/ddprun bin/ddpbench bin/gpuinfo
#   bin/mlp           examples/mlp with the cuda tag
#   simtests/<pkg>.test  the device path on goddp/cuda/sim (issue 15), which
#                     needs no GPU: cuda/sim (kernels.cu on the host, the
#                     tensor device, training and checkpoints against the
#                     CPU) and ddp (its device tests; run.sh picks them)
# DIR holds them gzipped (pack/, about 40% of their size, so that the kit
# stays well under 60 MiB as device packages are added), SHA256SUMS of the
# unpacked binaries, VERSION, and run.sh (scripts/gpu-kit-run.sh), which
# unpacks them into a temporary directory (gzip is all it needs).
# GPU_KIT_UNPACKED=DIR2 also leaves the unpacked binaries in DIR2 (CI runs
# ldd on them).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
cd "$root"
export PATH=$PATH:/usr/local/go/bin
export CGO_ENABLED=1
tags="cuda noblas"
flags=(-trimpath -ldflags=-s\ -w -tags "$tags")
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
rm -rf "$out/pack" "$out/bin" "$out/tests"
mkdir -p "$build/bin" "$build/tests" "$build/simtests" "$out/pack/bin" "$out/pack/tests" "$out/pack/simtests"

# Device test packages: cuda and comm/nccl, plus any package with a
# cuda-tagged test file (future device packages join by themselves).
# cuda/kernels/ptxcheck is CI's PTX assembler check, not a GPU test.
pkgs=$( { echo ./cuda; echo ./comm/nccl;
  grep -rlP --include='*_test.go' '^//go:build .*(?<![!\w])cuda\b' . | xargs -r -n1 dirname ; } |
  grep -v -e '^./cuda/kernels/ptxcheck$' -e '/testdata' | sort -u)
for p in $pkgs; do
  name=$(echo "${p#./}" | tr / _)
  go test -c "${flags[@]}" -o "$build/tests/$name.test" "$p"
done
for p in ./cuda/sim ./ddp; do
  name=$(echo "${p#./}" | tr / _)
  go test -c "${flags[@]}" -o "$build/simtests/$name.test" "$p"
done
go build "${flags[@]}" -o "$build/bin/ddprun" ./cmd/ddprun
go build "${flags[@]}" -o "$build/bin/ddpbench" ./cmd/ddpbench
go build "${flags[@]}" -o "$build/bin/gpuinfo" ./cmd/gpuinfo
go build "${flags[@]}" -o "$build/bin/mlp" ./examples/mlp

# The bars: nothing links a CUDA, NCCL or BLAS library; the kit fits.
bad=0
for f in "$build"/bin/* "$build"/tests/* "$build"/simtests/*; do
  if ldd "$f" 2>/dev/null | grep -E 'libcublas|libnccl|libcudart|libcuda\.so|libopenblas|libdnnl|libgomp|libgfortran' ; then
    echo "gpu-kit: $f links a library the GPU machine may lack" >&2
    bad=1
  fi
done
(cd "$build" && sha256sum bin/* tests/* simtests/*) >"$out/SHA256SUMS"
# The newest glibc symbol version the binaries use (2.34 when built on
# Debian 12): run.sh refuses clearly on an older glibc.
glibc=$(for f in "$build"/bin/* "$build"/tests/* "$build"/simtests/*; do objdump -T "$f"; done 2>/dev/null |
  grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
echo "${glibc:-2.34}" >"$out/GLIBC"
for f in "$build"/bin/* "$build"/tests/* "$build"/simtests/*; do
  gzip -9 -n -c "$f" >"$out/pack/${f#"$build"/}.gz"
done
cp scripts/gpu-kit-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
git rev-parse --short HEAD >"$out/VERSION" 2>/dev/null || echo unknown >"$out/VERSION"
if [ -n "${GPU_KIT_UNPACKED:-}" ]; then
  rm -rf "$GPU_KIT_UNPACKED" && mkdir -p "$GPU_KIT_UNPACKED" && cp -r "$build"/bin "$build"/tests "$build"/simtests "$GPU_KIT_UNPACKED"/
fi
size=$(du -sk "$out" | cut -f1)
echo "gpu-kit: $(ls "$build/tests" | wc -l) GPU and $(ls "$build/simtests" | wc -l) sim test binaries, $(ls "$build/bin" | wc -l) programs ($(du -sm "$build" | cut -f1) MiB unpacked), $((size / 1024)) MiB in $out"
if [ "$size" -gt $((60 * 1024)) ]; then
  echo "gpu-kit: $out is over 60 MiB" >&2
  bad=1
fi
exit $bad
