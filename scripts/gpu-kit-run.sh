#!/usr/bin/env bash
# goddp's GPU check: run `bash run.sh` in the kit that scripts/gpu-kit.sh
# built. Needs an NVIDIA GPU and driver; no Go, no network. cuBLAS and NCCL
# are found as goddp finds them (GODDP_CUBLAS_LIBRARY, GODDP_NCCL_LIBRARY,
# the system loader, the nvidia/*/lib directories of Python environments).
# Logs go to ./logs (or $GPU_CHECK_LOGS). The last line is
#   gpu-check: N passed, M failed
# and the exit code 0 (all passed), 1 (a check failed) or 3 (no NVIDIA GPU).
set -u
kit=$(cd "$(dirname "$0")" && pwd)
logs=${GPU_CHECK_LOGS:-$kit/logs}
# The binaries travel gzipped (pack/); unpack them into a scratch directory.
work=$(mktemp -d "${TMPDIR:-/tmp}/goddp-kit.XXXXXX")
trap 'rm -rf "$work"' EXIT
unpack() { # unpack bin/NAME or tests/NAME
  mkdir -p "$work/$(dirname "$1")"
  gzip -dc "$kit/pack/$1.gz" >"$work/$1" && chmod +x "$work/$1"
}
bin=$work/bin

# The binaries need the glibc they were built against (2.34: Ubuntu 22.04,
# Debian 12, RHEL 9 or later).
need=$(cat "$kit/GLIBC" 2>/dev/null || echo 2.34)
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
  echo "gpu-check: this machine's glibc $have is older than $need, which the kit's binaries need"
  exit 1
fi

# No GPU: stop at once.
unpack bin/gpuinfo
ngpu=$("$bin/gpuinfo" -count 2>"$work/gpuinfo.err")
rc=$?
if [ "$rc" = 3 ] || { [ "$rc" = 0 ] && [ "${ngpu:-0}" -lt 1 ]; }; then
  echo "gpu-check: no NVIDIA GPU"
  exit 3
elif [ "$rc" != 0 ]; then
  echo "gpu-check: gpuinfo failed (exit $rc): $(cat "$work/gpuinfo.err")"
  exit 1
fi
for f in "$kit"/pack/bin/*.gz "$kit"/pack/tests/*.gz "$kit"/pack/simtests/*.gz; do
  rel=${f#"$kit"/pack/}
  unpack "${rel%.gz}"
done
if command -v sha256sum >/dev/null 2>&1 && ! (cd "$work" && sha256sum --quiet -c "$kit/SHA256SUMS"); then
  echo "gpu-check: the kit's binaries do not match SHA256SUMS (a damaged copy?)"
  exit 1
fi
mkdir -p "$logs" 2>/dev/null && [ -w "$logs" ] || logs=$(mktemp -d "${TMPDIR:-/tmp}/goddp-kit-logs.XXXXXX")
passed=0
failed=0
failures=()
check() { # check NAME TIMEOUT CMD...: runs CMD, logs its output, counts it
  local name=$1 t=$2
  shift 2
  echo "== $name"
  local start=$SECONDS
  if timeout "$t" "$@" >"$logs/$name.log" 2>&1; then
    passed=$((passed + 1))
    echo "   ok ($((SECONDS - start)) s)"
    return 0
  else
    local rc=$?
    failed=$((failed + 1))
    failures+=("$name")
    echo "   FAILED (exit $rc after $((SECONDS - start)) s); last lines of $logs/$name.log:"
    tail -n 15 "$logs/$name.log" | sed 's/^/   | /'
    return 1
  fi
}

echo "goddp GPU kit $(cat "$kit/VERSION" 2>/dev/null), $(date -u +%Y-%m-%dT%H:%MZ), $(uname -srm)"
echo "== inventory"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv 2>&1 | sed 's/^/   /'
else
  echo "   nvidia-smi: not installed"
fi
"$bin/gpuinfo" 2>&1 | tee "$logs/inventory.log" | sed 's/^/   /'
if [ "${PIPESTATUS[0]}" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=(inventory); fi

export GODDP_GPU_KIT=1 # GPU tests fail instead of skipping
for t in "$work"/tests/*.test; do
  name=$(basename "$t" .test)
  # Each package's tests run in a scratch directory, as go test runs them in theirs.
  dir=$(mktemp -d)
  check "test-$name" 900 sh -c "cd '$dir' && '$t' -test.v -test.count=1 -test.timeout 850s"
  rm -rf "$dir"
  l=$logs/test-$name.log
  echo "   tests: $(grep -c -- '--- PASS' "$l") passed, $(grep -c -- '--- FAIL' "$l") failed, $(grep -c -- '--- SKIP' "$l") skipped"
  grep -E -- '--- (FAIL|SKIP)' "$l" | head -20 | sed 's/^/   /'
done

# The device path on goddp/cuda/sim (no GPU used): kernels.cu compiled for
# the host, the tensor layer's sim device, training and checkpoints on it,
# and DDP's buckets on it. Each package's tests to run, and to skip (the
# check that the generated kernel table matches kernels.cu needs the source
# tree, which the kit does not carry):
for spec in "cuda_sim:.:^TestGeneratedFromCurrentSource\$" "ddp:^(TestDevice|TestWrapDevice|TestWrapMixed):^\$"; do
  name=${spec%%:*}
  rest=${spec#*:}
  run=${rest%%:*}
  skip=${rest#*:}
  t=$work/simtests/$name.test
  [ -x "$t" ] || { echo "== sim-$name"; echo "   FAILED: $name.test is not in the kit"; failed=$((failed + 1)); failures+=("sim-$name"); continue; }
  dir=$(mktemp -d)
  check "sim-$name" 900 sh -c "cd '$dir' && '$t' -test.v -test.count=1 -test.run '$run' -test.skip '$skip' -test.timeout 850s"
  rm -rf "$dir"
  l=$logs/sim-$name.log
  echo "   tests: $(grep -c -- '--- PASS' "$l") passed, $(grep -c -- '--- FAIL' "$l") failed, $(grep -c -- '--- SKIP' "$l") skipped"
done

# examples/mlp -device sim against -device cpu at world 2, same seed: rank
# 0's loss at every step (-metrics) within 1e-5 relative (issue 15's bar).
steplosses() { grep '"kind":"train"' "$1" | grep -o '"loss":[^,}]*' | cut -d: -f2; }
mlpcmp() {
  for dev in cpu sim; do
    GODDP_BACKEND=tcp "$bin/ddprun" --standalone --nproc-per-node 2 "$bin/mlp" -device "$dev" -epochs 1 -seed 5 \
      -metrics "$work/mlp-$dev.jsonl" -metrics-every 1 || return 1
  done
  paste <(steplosses "$work/mlp-cpu.jsonl") <(steplosses "$work/mlp-sim.jsonl") | awk '
    { n++; d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > worst) worst = r
      if (r > 1e-5) { bad++; print "step " n ": cpu " $1 ", sim " $2 } }
    END { print n " steps, worst relative difference " worst; exit (n == 64 && bad == 0) ? 0 : 1 }'
}
export bin work
export -f steplosses mlpcmp
if check "mlp-sim-vs-cpu" 900 bash -c mlpcmp; then
  tail -n 1 "$logs/mlp-sim-vs-cpu.log" | sed 's/^/   /'
fi

# ddpbench over NCCL, one rank per visible GPU: the nccl-tests-style table.
# Device buffers straight to NCCL (comparable with nccl-tests' all_reduce_perf),
# then host buffers, which the backend stages through pinned memory.
for mem in device host; do
  if check "ddpbench-nccl-$mem" 600 "$bin/ddpbench" allreduce -backend nccl -mem "$mem" -nproc "$ngpu" -min 4K -max 256M -timeout 120s; then
    sed 's/^/   /' "$logs/ddpbench-nccl-$mem.log"
  fi
done

# The cuda build of examples/mlp: starts and trains on the CPU (1 epoch)...
check "mlp-cpu" 600 "$bin/mlp" -epochs 1
# ...and DDP over NCCL with host buckets, one rank per GPU (world = $ngpu).
check "mlp-ddp-nccl" 600 env GODDP_BACKEND=nccl "$bin/ddprun" --standalone --nproc-per-node gpu "$bin/mlp" -epochs 1
# examples/mlp on cuda:0 against the CPU, same seed, one process: the
# tensor layer's cuda device (goddp/cuda/devtensor over the Context) runs
# the op table that the sim checks above ran; the loss at step 100 must be
# within 1e-3 relative of the CPU's. Then its throughput at batch 1024 (the
# second epoch; compare with the same run on the 2-core CPU at world 2).
cudacmp() {
  for dev in cpu cuda; do
    "$bin/mlp" -device "$dev" -epochs 1 -seed 5 -metrics "$work/mlp1-$dev.jsonl" -metrics-every 1 || return 1
  done
  paste <(steplosses "$work/mlp1-cpu.jsonl") <(steplosses "$work/mlp1-cuda.jsonl") | awk '
    NR <= 100 { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > worst) worst = r; last = r; n = NR
      if (NR == 100) print "step 100: cpu " $1 ", cuda:0 " $2 }
    END { print n " steps compared, relative difference at step 100 " last ", worst " worst; exit (n == 100 && last <= 1e-3) ? 0 : 1 }'
}
export -f cudacmp
if check "mlp-cuda-vs-cpu" 900 bash -c cudacmp; then
  tail -n 2 "$logs/mlp-cuda-vs-cpu.log" | sed 's/^/   /'
fi
if check "mlp-cuda-b1024" 900 "$bin/mlp" -device cuda -epochs 2 -batch-size 1024; then
  grep samples_per_s "$logs/mlp-cuda-b1024.log" | sed 's/^/   /'
fi

# DDP with its buckets on the GPUs, one rank per GPU over NCCL: ddp.Wrap
# takes the cuda Context's queues (CUDA streams and events) and hands each
# bucket to NCCL in device memory, ordered by events (issue 15). Rank 0's
# loss at step 100 must be within 1e-3 relative of the CPU's at the same
# world size and seed (tcp).
ddpcudacmp() {
  GODDP_BACKEND=tcp "$bin/ddprun" --standalone --nproc-per-node "$ngpu" "$bin/mlp" -device cpu -epochs 1 -seed 5 \
    -metrics "$work/mlpddp-cpu.jsonl" -metrics-every 1 || return 1
  GODDP_BACKEND=nccl "$bin/ddprun" --standalone --nproc-per-node gpu "$bin/mlp" -device cuda -epochs 1 -seed 5 \
    -metrics "$work/mlpddp-cuda.jsonl" -metrics-every 1 || return 1
  paste <(steplosses "$work/mlpddp-cpu.jsonl") <(steplosses "$work/mlpddp-cuda.jsonl") | awk '
    NR <= 100 { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > worst) worst = r; last = r; n = NR }
    END { print n " steps compared, relative difference at the last " last ", worst " worst; exit (n >= 1 && last <= 1e-3) ? 0 : 1 }'
}
export ngpu
export -f ddpcudacmp
if check "mlp-cuda-ddp-nccl-vs-cpu" 900 bash -c ddpcudacmp; then
  tail -n 1 "$logs/mlp-cuda-ddp-nccl-vs-cpu.log" | sed 's/^/   /'
fi

echo "logs: $logs"
[ "$failed" -eq 0 ] || echo "failed: ${failures[*]}"
echo "gpu-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
