#!/usr/bin/env bash
# The main job: installs what training needs (scripts/setup.sh: OpenBLAS,
# oneDNN, gcc, pkg-config and examples/cnn's Fashion-MNIST; none of the test
# suite's tools), then trains examples/linear (the PyTorch DDP tutorial's
# Trainer) on 2 ranks through the bundled launcher.
# Extra arguments go to the training script, e.g. `bash scripts/train.sh -epochs 10`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
bash scripts/setup.sh
go build -o bin/ddprun ./cmd/ddprun
exec bin/ddprun --standalone --nproc-per-node 2 ./examples/linear "$@"
