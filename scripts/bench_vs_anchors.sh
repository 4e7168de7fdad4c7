#!/usr/bin/env bash
# Side-by-side comparison with the anchors in ../shared/anchors (torch 1.13 +
# Gloo, OpenMPI 4.1), everything in one run so that the ratios share the
# machine's load. Needs /usr/bin/python3 with python3-torch and mpicc.
# Usage: scripts/bench_vs_anchors.sh [gemm|step|ddp|scaling|allreduce|cnn|all] > results.txt
# cnn (not part of all: minutes per round): ROUNDS (default 1) interleaved
# rounds of torch_models.py cnn and examples/cnn, both at world 2 for EPOCHS
# (default 2) epochs, with each side's peak RSS (the largest process of the
# job, i.e. one rank), then the conv layers' single-thread benchmark pair.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
anchors=${ANCHORS:-../shared/anchors}
what=${1:-all}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ddprun" ./cmd/ddprun
go build -o "$tmp/ddpbench" ./cmd/ddpbench

if [ "$what" = gemm ] || [ "$what" = all ]; then
  echo "### GEMM (Go benchmarks, then torch, interleaved)"
  bash scripts/bench_tensor_vs_torch.sh 2
  echo "### GEMM, Go and torch alternating in 0.3 s slices (the bar's figure)"
  go build -o "$tmp/gemmserve" ./scripts/gemmserve
  MODES=matmul,cloop /usr/bin/python3 scripts/gemm_pingpong.py "$tmp/gemmserve" 40
fi

if [ "$what" = step ] || [ "$what" = all ]; then
  echo "### single-process train step, 1 thread"
  GODDP_NUM_THREADS=1 go test -run '^$' -bench 'TrainStep' -benchmem -count 2 ./nn/ | grep '^Bench'
  GODDP_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 scripts/bench_torch_step.py
fi

if [ "$what" = scaling ] || [ "$what" = all ]; then
  echo "### DDP mlp world 2 against one rank on 1 thread"
  bash scripts/ddp_scaling.sh 12
fi

if [ "$what" = ddp ] || [ "$what" = all ]; then
  echo "### DDP training, world 2 (torch DDP+Gloo via mp.spawn vs goddp via ddprun)"
  for w in linear mlp; do
    e=5; [ $w = linear ] && e=20
    echo "torch $w world 2: $(OMP_NUM_THREADS=1 /usr/bin/python3 "$anchors/torch_ddp_train.py" $w 2 $e 2>/dev/null | tail -1)"
    echo "goddp $w world 2: $("$tmp/ddprun" --standalone --nproc-per-node 2 ./examples/$w -epochs $e -ckpt-dir '' 2>/dev/null | grep -E '^(samples_per_s|'$w':)' | tr '\n' ' ')"
  done
  echo "goddp mlp world 1, 1 thread: $(GODDP_NUM_THREADS=1 "$tmp/ddprun" --standalone --nproc-per-node 1 ./examples/mlp -epochs 5 2>/dev/null | grep '^samples_per_s')"
fi

if [ "$what" = allreduce ] || [ "$what" = all ]; then
  echo "### all_reduce float32 sum, world 2"
  mpicc -O2 -o "$tmp/mpi_allreduce" "$anchors/mpi_allreduce.c"
  mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
  echo "-- goddp tcp";  "$tmp/ddpbench" allreduce -backend tcp -nproc 2
  echo "-- goddp shm";  "$tmp/ddpbench" allreduce -backend shm -nproc 2
  echo "-- OpenMPI tcp"; "${mpi[@]}" --mca btl tcp,self "$tmp/mpi_allreduce"
  echo "-- OpenMPI shm"; "${mpi[@]}" "$tmp/mpi_allreduce"
  echo "-- Gloo";        OMP_NUM_THREADS=1 /usr/bin/python3 "$anchors/torch_allreduce.py" 2
fi

if [ "$what" = cnn ]; then
  e=${EPOCHS:-2}
  go build -o "$tmp/cnn" ./examples/cnn
  echo "### cnn (Fashion-MNIST convnet), world 2, $e epochs: torch DDP+Gloo via mp.spawn vs goddp via ddprun, interleaved"
  for r in $(seq "${ROUNDS:-1}"); do
    echo "round $r torch cnn world 2: $( { /usr/bin/time -f 'peak_rss_kb=%M' /usr/bin/python3 "$anchors/torch_models.py" cnn 2 "$e"; } 2>&1 | grep -E 'torch-ddp|peak_rss' | tr '\n' ' ')"
    echo "round $r goddp cnn world 2: $( { /usr/bin/time -f 'peak_rss_kb=%M' "$tmp/ddprun" --standalone --nproc-per-node 2 "$tmp/cnn" -epochs "$e" -ckpt-dir ''; } 2>&1 | grep -E '^(samples_per_s|epoch=|peak_rss)' | tr '\n' ' ')"
  done
  echo "### conv layers of the convnet, forward+backward, batch 64, 1 thread (Go, then torch, twice)"
  go test -c -o "$tmp/autograd.test" ./autograd/
  for r in 1 2; do
    GODDP_NUM_THREADS=1 "$tmp/autograd.test" -test.run '^$' -test.bench ConvNetConvLayers -test.benchtime 3s | grep '^Bench'
    OMP_NUM_THREADS=1 /usr/bin/python3 scripts/bench_torch_conv.py 3
  done
fi
