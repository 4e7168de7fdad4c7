#!/usr/bin/env bash
# Side-by-side comparison with the anchors in ../shared/anchors (torch 1.13 +
# Gloo, OpenMPI 4.1), everything in one run so that the ratios share the
# machine's load. Needs /usr/bin/python3 with python3-torch (TORCH_PYTHON names another) and mpicc.
# Usage: scripts/bench_vs_anchors.sh [rates|gemm|step|ddp|scaling|allreduce|cnn|gpt|gpt2|amp|sync|all] > results.txt
# gpt2: GPT-2 124M at T=1024 against torch (not part of all: about 15 minutes on 2 cores; STEPS, ROUNDS).
# rates: only what every run starts with (the CPU, torch's BLAS kernels, both
# GEMM rates); GEMM_BENCHTIME (default 2s) and TORCH_GEMM_SECS (default 2) time them.
# cnn (not part of all: minutes per round): ROUNDS (default 1) interleaved
# rounds of torch_models.py cnn and examples/cnn, both at world 2 for EPOCHS
# (default 2) epochs, with each side's peak RSS (the largest process of the
# job, i.e. one rank), then the conv layers' single-thread benchmark pair.
# gpt: ROUNDS (default 2) interleaved rounds of torch_models.py gpt and
# examples/gpt at world 2, EPOCHS (default 3) each; both print samples/s,
# the last epoch's mean loss and the peak RSS of each rank.
# amp: ROUNDS (default 2) interleaved rounds, for MODELS (default "gpt cnn"), of
# torch float32, torch under autocast bf16 (scripts/torch_models_amp.py), goddp
# float32 and goddp -amp bf16, all at world 2 for EPOCHS (default 1) epochs;
# each prints samples/s and its final loss (cnn: test accuracy too), and goddp
# its kernels' own rate (-kernel-profile): bf16's kernel_gflops over fp32's is
# the most -amp bf16 can gain while everything else stays float32.
# cnn and gpt also run goddp with -kernel-profile and print the kernels'
# share of the steps and their own rate against the GEMM rate (the ceiling).
# sync: ROUNDS (default 3) interleaved rounds of torch_grad_sync.py and `ddpbench sync` per profile
# (world 2, bucket_cap_mb 25, default backend; gradient_as_bucket_view off and on, OverlapComm on and off,
# ReduceInPlace on and off) plus
# `ddpbench allreduce` at 16 MiB, with the ratios;
# SWEEP=1 adds the bucket_cap_mb sweep 1,5,25,100 on both sides (tcp and shm for goddp).
#
# Fair anchors: every run starts by giving torch its proper GEMM kernels
# where its OpenBLAS does not know the CPU (scripts/torch-blas.sh prints
# what it found and chose; only torch's processes get OPENBLAS_CORETYPE),
# then prints both frameworks' float32 GEMM rates at n=1024 on every core,
# goddp's engine and torch's sgemm. cnn and gpt print, each round, the
# ratio beside each side's fraction of the machine's GEMM rate (the higher
# of the two): a ratio alone flatters whichever side has the better kernels.
# Benchmarks only: nothing here runs in tests or CI.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
anchors=${ANCHORS:-../shared/anchors}
what=${1:-all}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ddprun" ./cmd/ddprun
go build -o "$tmp/ddpbench" ./cmd/ddpbench
. scripts/torch-blas.sh

# The machine's yardstick: its float32 GEMM rate (square n=1024, every
# core), goddp's engine (the tensor package's benchmark) and torch's sgemm
# (scripts/bench_torch_gemm.py, with the kernels torch_blas_setup chose),
# measured in the same run as the workloads they are compared with.
gemm_gflops() {
  [ -x "$tmp/tensor.test" ] || go test -c -o "$tmp/tensor.test" ./tensor/
  "$tmp/tensor.test" -test.run '^$' -test.bench 'MatMul/n=1024$' -test.benchtime "${GEMM_BENCHTIME:-2s}" |
    awk '/GFLOPS/ {for (i = 1; i < NF; i++) if ($(i+1) == "GFLOPS") print $i}'
}
# gemm_percore_gflops: one single-threaded engine GEMM (n=1024) per core,
# all at once, their rates summed: the configuration DDP's ranks run in
# (ddprun gives each of nproc ranks one thread). On this 2-core Xeon VM
# the 2-thread figure above came out 171-207 GFLOPS in rounds whose
# training ran its own products at 262-276 with one thread a rank, so the
# machine's rate is the higher of the three.
gemm_percore_gflops() {
  [ -x "$tmp/tensor.test" ] || go test -c -o "$tmp/tensor.test" ./tensor/
  local i
  for i in $(seq "$(nproc)"); do
    GODDP_NUM_THREADS=1 "$tmp/tensor.test" -test.run '^$' -test.bench 'MatMul/n=1024$' -test.benchtime "${GEMM_BENCHTIME:-2s}" > "$tmp/percore.$i" &
  done
  wait
  cat "$tmp"/percore.* | awk '/GFLOPS/ {for (i = 1; i < NF; i++) if ($(i+1) == "GFLOPS") s += $i} END {printf "%.1f\n", s}'
}
torch_gemm_gflops() {
  OMP_NUM_THREADS=$(nproc) SECS=${TORCH_GEMM_SECS:-2} "${TORCH_PY[@]}" scripts/bench_torch_gemm.py "$(nproc)" 1024,1024,1024 2>/dev/null |
    sed -n 's/.*GFLOPS=\([0-9.]*\).*/\1/p'
}
echo "### machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
torch_blas_setup
echo "### GEMM rate, float32 n=1024, $(nproc) threads: goddp engine $(gemm_gflops) GFLOPS, torch sgemm $(torch_gemm_gflops) GFLOPS; one thread a core at once: $(gemm_percore_gflops) GFLOPS"

if [ "$what" = gemm ] || [ "$what" = all ]; then
  echo "### GEMM (Go benchmarks, then torch, interleaved)"
  bash scripts/bench_tensor_vs_torch.sh 2
  echo "### GEMM, Go and torch alternating in 0.3 s slices (the bar's figure)"
  # gemmserve runs inside torch's environment here, so it gets the same
  # OPENBLAS_CORETYPE as torch (goddp keeps a user's setting).
  go build -o "$tmp/gemmserve" ./cmd/gemmserve
  MODES=matmul,cloop "${TORCH_PY[@]}" scripts/gemm_pingpong.py "$tmp/gemmserve" 40
fi

if [ "$what" = step ] || [ "$what" = all ]; then
  echo "### single-process train step, 1 thread"
  GODDP_NUM_THREADS=1 go test -run '^$' -bench 'TrainStep' -benchmem -count 2 ./nn/ | grep '^Bench'
  GODDP_NUM_THREADS=1 OMP_NUM_THREADS=1 "${TORCH_PY[@]}" scripts/bench_torch_step.py
fi

if [ "$what" = scaling ] || [ "$what" = all ]; then
  echo "### DDP mlp world 2 against one rank on 1 thread"
  bash scripts/ddp_scaling.sh 12
fi

if [ "$what" = ddp ] || [ "$what" = all ]; then
  echo "### DDP training, world 2 (torch DDP+Gloo via mp.spawn vs goddp via ddprun)"
  for w in linear mlp; do
    e=5; [ $w = linear ] && e=20
    echo "torch $w world 2: $(OMP_NUM_THREADS=1 "${TORCH_PY[@]}" "$anchors/torch_ddp_train.py" $w 2 $e 2>/dev/null | tail -1)"
    echo "goddp $w world 2: $("$tmp/ddprun" --standalone --nproc-per-node 2 ./examples/$w -epochs $e -ckpt-dir '' 2>/dev/null | grep -E '^(samples_per_s|'$w':)' | tr '\n' ' ')"
  done
  echo "goddp mlp world 1, 1 thread: $(GODDP_NUM_THREADS=1 "$tmp/ddprun" --standalone --nproc-per-node 1 ./examples/mlp -epochs 5 2>/dev/null | grep '^samples_per_s')"
fi

if [ "$what" = sync ] || [ "$what" = all ]; then
  echo "### gradient sync through DDP, world 2, bucket_cap_mb 25 (torch DDP+Gloo vs goddp ddp.Wrap), interleaved"
  echo "### ratio_torch = goddp sync_gbps / torch sync_gbps (bar >= 5); of_allreduce = goddp sync_gbps / allreduce busbw at 16 MiB (bar >= 0.6)"
  for round in $(seq "${ROUNDS:-3}"); do
    for prof in resnet50 gpt2; do
      iters=20; [ $prof = gpt2 ] && iters=10
      t=$(OMP_NUM_THREADS=1 "${TORCH_PY[@]}" "$anchors/torch_grad_sync.py" $prof 2 $iters 25 2>/dev/null | tail -1)
      gs=$("$tmp/ddpbench" sync -profile $prof -iters $iters -bucket-cap-mb 25 -bucket-view false,true -overlap true,false -inplace true,false -format csv | tail -8)
      be=$(echo "$gs" | head -1 | cut -d, -f2)
      a=$("$tmp/ddpbench" allreduce -backend "$be" -min 16M -max 16M -stat median -format csv | tail -1)
      echo "round $round $prof torch: $t"
      echo "$gs" | sed "s/^/round $round $prof goddp: /"
      echo "round $round $prof allreduce16M: $a"
      tg=$(echo "$t" | sed -n 's/.*sync_gbps=\([0-9.]*\).*/\1/p')
      ab=$(echo "$a" | cut -d, -f6)
      echo "$gs" | awk -F, -v r="$round" -v p="$prof" -v t="$tg" -v a="$ab" '{
        mode = ($13 == "true") ? "bucket_view" : "default"
        if ($18 == "false") mode = mode "+no_overlap"
        if ($19 == "false") mode = mode "+copies"
        printf "round %s %s %-30s ratio_torch=%.2f of_allreduce=%.2f (goddp %.3f GB/s, torch %.3f, allreduce busbw %.3f)\n",
          r, p, mode, (t > 0 ? $8 / t : 0), (a > 0 ? $8 / a : 0), $8, t, a }'
    done
  done
  if [ "${SWEEP:-0}" = 1 ]; then
    echo "### bucket_cap_mb sweep"
    for prof in resnet50 gpt2; do
      iters=20; [ $prof = gpt2 ] && iters=10
      for cap in 1 5 25 100; do
        echo "torch: $(OMP_NUM_THREADS=1 "${TORCH_PY[@]}" "$anchors/torch_grad_sync.py" $prof 2 $iters $cap 2>/dev/null | tail -1)"
      done
      "$tmp/ddpbench" sync -profile $prof -iters $iters -bucket-cap-mb 1,5,25,100 -backend tcp,shm -format csv
      "$tmp/ddpbench" allreduce -backend shm -min 1M -max 128M -stat median -format csv
    done
  fi
fi

if [ "$what" = allreduce ] || [ "$what" = all ]; then
  echo "### all_reduce float32 sum, world 2"
  mpicc -O2 -o "$tmp/mpi_allreduce" "$anchors/mpi_allreduce.c"
  mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
  echo "-- goddp tcp";  "$tmp/ddpbench" allreduce -backend tcp -nproc 2
  echo "-- goddp shm";  "$tmp/ddpbench" allreduce -backend shm -nproc 2
  echo "-- OpenMPI tcp"; "${mpi[@]}" --mca btl tcp,self "$tmp/mpi_allreduce"
  echo "-- OpenMPI shm"; "${mpi[@]}" "$tmp/mpi_allreduce"
  echo "-- Gloo";        OMP_NUM_THREADS=1 "${TORCH_PY[@]}" "$anchors/torch_allreduce.py" 2
fi

# The physical yardstick of cnn and gpt: the machine's own float32 GEMM
# rate (gemm_gflops, torch_gemm_gflops and gemm_percore_gflops above, the
# highest of the three),
# measured in the same round, and the fraction of it each side's
# samples/s reach. A sample's FLOPs are those of
# its GEMMs and convolutions, forward and backward (3x forward, less the
# first layer's input gradient): cnn 82 MFLOP per image (conv2's 20 MFLOP
# forward dominates), gpt 168 MFLOP per 64-token sequence.
# kernel_ceiling OUTPUT GFLOPS: from a run with -kernel-profile, the kernels'
# share of the measured steps, their own rate (all ranks) and that rate as a
# fraction of the same round's GEMM rate: the most the step could reach if
# nothing but the matrix products and convolutions took time. The
# kernel-counted FLOPs over the measured time (step_gflops) checks the
# MFLOP-per-sample figures used above.
kernel_ceiling() {
  echo "$1" | awk -v g="$2" '/^kernel_profile/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    printf "kernels %.1f%% of the steps at %.1f GFLOPS = %.0f%% of the GEMM rate (the ceiling); the steps at %.1f GFLOPS = %.0f%%\n",
      f["kernel_pct"], f["kernel_gflops"], (g > 0 ? 100 * f["kernel_gflops"] / g : 0), f["step_gflops"], (g > 0 ? 100 * f["step_gflops"] / g : 0) }'
}
# gemm_fraction SAMPLES_PER_S MFLOP_PER_SAMPLE GFLOPS
gemm_fraction() { awk -v s="$1" -v f="$2" -v g="$3" 'BEGIN {if (s > 0 && g > 0) printf "%.0f%%", 100 * s * f / 1000 / g; else print "n/a"}'; }
# round_report ROUND MODEL GODDP_SPS TORCH_SPS MFLOP_PER_SAMPLE: both GEMM
# rates, then the ratio beside each side's fraction of the higher rate.
round_report() {
  local g t c m
  g=$(gemm_gflops); t=$(torch_gemm_gflops); c=$(gemm_percore_gflops)
  m=$(awk -v a="${g:-0}" -v b="${t:-0}" -v c="${c:-0}" 'BEGIN {m = (a > b ? a : b); print (c > m ? c : m)}')
  echo "round $1 GEMM n=1024: goddp ${g:-?} GFLOPS, torch ${t:-?} GFLOPS, goddp one thread a core at once ${c:-?} GFLOPS (machine rate $m, the highest)"
  echo "round $1 $2: goddp ${3:-?} torch ${4:-?} samples/s, ratio $(awk -v a="${3:-0}" -v b="${4:-0}" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'); goddp at $(gemm_fraction "${3:-0}" "$5" "$m") of the machine's GEMM rate, torch at $(gemm_fraction "${4:-0}" "$5" "$m")"
  GEMM_NOW=$m
}

# poll_rss PARENT: until killed, appends "pid VmHWM-KiB" of every child of
# PARENT (torch's spawned ranks, ddprun's workers; not other jobs' processes).
# VmHWM is the peak so far, so a read every 2 s finds it. The loop starts
# two processes a poll (sleep, pgrep) and reads the status files with
# builtins: polling every 0.3 s with an awk per rank (13 processes a
# second) slowed the measured goddp gpt by 15-24% (1514 → 1157 samples/s,
# kernels 357 → 290 GFLOPS, three interleaved pairs), which the GEMM
# rate it is compared with never saw; this loop measured within the noise.
poll_rss() { while sleep 2; do for p in $(pgrep -P "$1"); do
  while read -r k v _; do [ "$k" = VmHWM: ] && echo "$p $v"; done < "/proc/$p/status" 2>/dev/null
done; done >> "$tmp/rss"; }
peak_rss() { awk '{if ($2 > m[$1]) m[$1] = $2} END {for (p in m) printf "%d ", m[p]}' "$tmp/rss"; }

if [ "$what" = cnn ]; then
  e=${EPOCHS:-2}
  go build -o "$tmp/cnn" ./examples/cnn
  echo "### cnn (Fashion-MNIST convnet), world 2, $e epochs: torch DDP+Gloo via mp.spawn vs goddp via ddprun, interleaved"
  for r in $(seq "${ROUNDS:-1}"); do
    tline=$( { /usr/bin/time -f 'peak_rss_kb=%M' "${TORCH_PY[@]}" "$anchors/torch_models.py" cnn 2 "$e"; } 2>&1 | grep -E 'torch-ddp|peak_rss' | tr '\n' ' ')
    echo "round $r torch cnn world 2: $tline"
    full=$( { /usr/bin/time -f 'peak_rss_kb=%M' "$tmp/ddprun" --standalone --nproc-per-node 2 "$tmp/cnn" -epochs "$e" -ckpt-dir '' -kernel-profile; } 2>&1)
    line=$(echo "$full" | grep -E '^(samples_per_s|epoch=|peak_rss)' | tr '\n' ' ')
    echo "round $r goddp cnn world 2: $line"
    sps=$(echo "$line" | grep -o 'samples_per_s=[0-9.]*' | tail -1 | cut -d= -f2)
    tsps=$(echo "$tline" | grep -o 'samples_per_s=[0-9.]*' | tail -1 | cut -d= -f2)
    round_report "$r" cnn "$sps" "$tsps" 82
    echo "round $r goddp cnn $(kernel_ceiling "$full" "${GEMM_NOW:-0}")"
  done
  echo "### conv layers of the convnet, forward+backward, batch 64, 1 thread (Go, then torch, twice)"
  go test -c -o "$tmp/autograd.test" ./autograd/
  for r in 1 2; do
    GODDP_NUM_THREADS=1 "$tmp/autograd.test" -test.run '^$' -test.bench ConvNetConvLayers -test.benchtime 3s | grep '^Bench'
    OMP_NUM_THREADS=1 "${TORCH_PY[@]}" scripts/bench_torch_conv.py 3
  done
fi

if [ "$what" = gpt ] || [ "$what" = all ]; then
  echo "### gpt world 2 (torch_models.py gpt via mp.spawn vs examples/gpt via ddprun), interleaved"
  go build -o "$tmp/gpt" ./examples/gpt
  for r in $(seq "${ROUNDS:-2}"); do
    : > "$tmp/rss"
    "${TORCH_PY[@]}" "$anchors/torch_models.py" gpt 2 "${EPOCHS:-3}" > "$tmp/out" 2>/dev/null & j=$!
    poll_rss $j & w=$!; wait $j; kill $w; wait $w 2>/dev/null
    tline=$(tail -1 "$tmp/out")
    echo "torch gpt world 2 round $r: $tline peak_rss_kib=[ $(peak_rss)]"
    : > "$tmp/rss"
    "$tmp/ddprun" --standalone --nproc-per-node 2 "$tmp/gpt" -epochs "${EPOCHS:-3}" -kernel-profile > "$tmp/out" 2>/dev/null & j=$!
    poll_rss $j & w=$!; wait $j; kill $w; wait $w 2>/dev/null
    echo "goddp gpt world 2 round $r: $(grep -E '^samples_per_s' "$tmp/out" | tr '\n' ' ')final_loss=$(grep -o 'loss=[0-9.]*' "$tmp/out" | tail -1 | cut -d= -f2) peak_rss_kib=[ $(peak_rss)]"
    sps=$(grep -o 'samples_per_s=[0-9.]*' "$tmp/out" | tail -1 | cut -d= -f2)
    tsps=$(echo "$tline" | grep -o 'samples_per_s=[0-9.]*' | tail -1 | cut -d= -f2)
    round_report "$r" gpt "$sps" "$tsps" 168
    echo "round $r goddp gpt $(kernel_ceiling "$(cat "$tmp/out")" "${GEMM_NOW:-0}")"
  done
fi

if [ "$what" = gpt2 ]; then
  # Issue 45's bar: the whole GPT-2 124M (the 50304-row padded head, as
  # nanoGPT and llm.c) at T=1024, batch 2 per rank, world 2: examples/gpt2
  # through ddprun against the same model in torch 1.13 DDP + Gloo
  # (scripts/torch_gpt2_ddp.py --bench), interleaved; tokens/s, each
  # rank's peak RSS, and both sides' fraction of the machine's GEMM rate by
  # nanoGPT's FLOP count (6N + 12·L·H·Q·T = 855.4 MFLOP a token, N without
  # the position embeddings). STEPS timed steps a side (goddp skips its
  # first 3 as warm-up, torch its first 1). The tokens are GCIDE's when
  # dict-gcide is installed, else GPL-3's repeated (speed does not depend
  # on which tokens).
  steps=${STEPS:-4}
  go build -o "$tmp/gpt2" ./examples/gpt2
  go build -o "$tmp/tokenize" ./cmd/tokenize
  src=/usr/share/dictd/gcide.dict.dz
  [ -f "$src" ] || { src=$tmp/gpl.txt; for i in $(seq 40); do cat /usr/share/common-licenses/GPL-3; done > "$src"; }
  "$tmp/tokenize" -o "$tmp/tok" -prefix bench -val-tokens 1000000 -shard-size 20000000 "$src" >/dev/null
  echo "### gpt2 124M, T=1024, batch 2 per rank, world 2: torch DDP+Gloo vs examples/gpt2 via ddprun, interleaved, $steps timed steps"
  for r in $(seq "${ROUNDS:-1}"); do
    : > "$tmp/rss"
    "${TORCH_PY[@]}" scripts/torch_gpt2_ddp.py "$tmp"/tok/bench_train_*.bin - --bench "$steps" --vocab 50304 --ctx 1024 --d 768 --heads 12 --layers 12 --batch 2 --accum 1 > "$tmp/out" 2>&1 & j=$!
    poll_rss $j & w=$!; wait $j; kill $w; wait $w 2>/dev/null
    tline=$(grep torch_tokens_per_s "$tmp/out")
    echo "torch gpt2 round $r: $tline (polled peak_rss_kib=[ $(peak_rss)])"
    : > "$tmp/rss"
    "$tmp/ddprun" --standalone --nproc-per-node 2 "$tmp/gpt2" -data "$tmp/tok" -model gpt2 -batch-size 2 -grad-accum 1 \
      -max-steps $((steps + 3)) -ckpt-dir '' -eval-every 0 -eval-batches 1 -kernel-profile > "$tmp/out" 2>&1 & j=$!
    poll_rss $j & w=$!; wait $j; kill $w; wait $w 2>/dev/null
    tps=$(grep -o 'tokens_per_s=[0-9.]*' "$tmp/out" | tail -1 | cut -d= -f2)
    echo "goddp gpt2 round $r: tokens_per_s=${tps:-?} peak_rss_kib=[ $(peak_rss)] $(grep -E '^(kernel_profile|samples_per_s)' "$tmp/out" | tr '\n' ' ')"
    [ -n "$tps" ] || tail -20 "$tmp/out"
    round_report "$r" "gpt2 (tokens/s)" "$tps" "$(echo "$tline" | grep -o 'torch_tokens_per_s=[0-9.]*' | cut -d= -f2)" 855.4
    echo "round $r goddp gpt2 $(kernel_ceiling "$(cat "$tmp/out")" "${GEMM_NOW:-0}")"
  done
fi

if [ "$what" = amp ]; then
  e=${EPOCHS:-1}
  echo "### mixed precision, world 2, $e epoch(s): torch fp32 / torch autocast bf16 / goddp fp32 / goddp -amp bf16, interleaved"
  grep -m1 'model name' /proc/cpuinfo
  grep -o -w 'avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
  for m in ${MODELS:-gpt cnn}; do
    go build -o "$tmp/$m" ./examples/$m
    for r in $(seq "${ROUNDS:-2}"); do
      echo "round $r $m torch fp32: $("${TORCH_PY[@]}" "$anchors/torch_models.py" $m 2 "$e" 2>/dev/null | tail -1)"
      echo "round $r $m torch bf16: $(ANCHORS=$anchors "${TORCH_PY[@]}" scripts/torch_models_amp.py $m 2 "$e" 2>/dev/null | tail -1)"
      for a in fp32 bf16; do
        out=$("$tmp/ddprun" --standalone --nproc-per-node 2 "$tmp/$m" -epochs "$e" -amp $a -ckpt-dir '' -kernel-profile 2>/dev/null)
        echo "round $r $m goddp $a: $(echo "$out" | grep -E '^(samples_per_s|epoch=)' | tail -3 | tr '\n' ' ')$(echo "$out" | grep '^kernel_profile' | cut -d' ' -f2-)"
      done
    done
  done
fi
