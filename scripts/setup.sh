#!/usr/bin/env bash
# Installs what training needs on a fresh Debian 12 machine (run as root) and
# downloads the Go modules: the training command's setup (scripts/train.sh).
# It prints the packages it needs and those it installs. Idempotent:
# already-installed packages are skipped. The test suite's tools (OpenMPI,
# Slurm, munge, Chromium, strace, iproute2) are scripts/setup-test.sh's;
# internal/docscheck checks that none of them is listed here.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/install-missing.sh

# libopenblas-dev, libdnnl-dev: the CPU engine's GEMM and convolution kernels
#   (cgo links them; -tags noblas builds without either).
# gcc, pkg-config: cgo's compiler, and how it finds oneDNN and OpenBLAS.
# dataset-fashion-mnist: examples/cnn's data (/usr/share/datasets/fashion-mnist).
train_pkgs=(libopenblas-dev libdnnl-dev gcc pkg-config dataset-fashion-mnist)
install_missing setup "${train_pkgs[@]}"

if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then export PATH=$PATH:/usr/local/go/bin
  else echo "setup: Go 1.26 is required (https://go.dev/dl); 'go' is not on PATH" >&2; exit 1; fi
fi
go mod download
