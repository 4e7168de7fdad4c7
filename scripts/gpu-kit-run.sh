#!/usr/bin/env bash
# goddp's GPU check: run `bash run.sh` in the kit that scripts/gpu-kit.sh
# built. Needs an NVIDIA GPU and driver; no Go, no network. It runs only
# what needs the GPU (CI runs everything else), in this order:
#   inventory; the device tests of each package, one step per test (names
#   listed at build time, the likeliest to hang last); examples/mlp on the
#   device against CPU losses computed when the kit was built; NCCL's
#   tests and DDP over NCCL; ddpbench; the torch yardstick
#   (bench_torch_gpu.py: the anchors' recipes on cuda:0 with this machine's
#   torch); a small GPT-2 (examples/gpt2) against its CPU losses, float32
#   and bf16; torch's torchrun (static, c10d, standalone) launching goddp.
# GPU_KIT_ONLY=gpt2 runs the inventory, the GPT-2 and torchrun steps and
# GPT-2 124M's timing, goddp against torch 2.x written as nanoGPT writes
# it (bench_torch_gpu_gpt2.py, eager and torch.compile): one call of about
# 5 minutes. GPU_KIT_ONLY=profile: see GPU_KIT_PROFILE below.
# Every step is bounded (GPU_CHECK_LIMIT, at most and by default 120 s) by
# `timeout -s QUIT`, so a hung Go program prints every goroutine's stack
# into its log before it is killed, and the next step runs. The whole run
# takes at most 6 minutes on a healthy GPU.
#
# Logs go to $GPU_CHECK_LOGS, else $OUT/logs (the device tool brings back
# only $OUT), else ./logs beside the kit. Test verdicts (--- PASS/FAIL)
# and each step's verdict stream to the console as they happen. The last
# line is
#   gpu-check: N passed, M failed
# and the exit code 0 (all passed), 1 (a check failed) or 3 (no NVIDIA GPU).
#
# Libraries: cuBLAS, cuDNN and NCCL are taken from the environment
# (GODDP_CUBLAS_LIBRARY, GODDP_CUDNN_LIBRARY, GODDP_NCCL_LIBRARY), else from
# the Python environment's nvidia wheels (nvidia/*/lib), whose directories
# also go on LD_LIBRARY_PATH so that a wheel's libcublas finds its
# libcublasLt; else the system loader's.
set -u
kit=$(cd "$(dirname "$0")" && pwd)
if [ -n "${GPU_CHECK_LOGS:-}" ]; then logs=$GPU_CHECK_LOGS
elif [ -n "${OUT:-}" ]; then logs=$OUT/logs
else logs=$kit/logs; fi
limit=${GPU_CHECK_LIMIT:-120}
[ "$limit" -le 120 ] 2>/dev/null || limit=120
py=${GPU_CHECK_PYTHON:-python3}
# The binaries travel compressed (pack/NAME.xz, or .gz); unpack them into
# a scratch directory. Without an xz command, Python's lzma module reads
# .xz (the torch machines have Python).
work=$(mktemp -d "${TMPDIR:-/tmp}/goddp-kit.XXXXXX")
trap 'rm -rf "$work"' EXIT
unpack() { # unpack bin/NAME or tests/NAME
  mkdir -p "$work/$(dirname "$1")"
  if [ -f "$kit/pack/$1.xz" ]; then
    if command -v xz >/dev/null 2>&1; then
      xz -dc "$kit/pack/$1.xz" >"$work/$1"
    else
      "$py" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$kit/pack/$1.xz" >"$work/$1"
    fi
  else
    gzip -dc "$kit/pack/$1.gz" >"$work/$1"
  fi && chmod +x "$work/$1"
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
ngpu=$(timeout -k 5 30 "$bin/gpuinfo" -count 2>"$work/gpuinfo.err")
rc=$?
if [ "$rc" = 3 ] || { [ "$rc" = 0 ] && [ "${ngpu:-0}" -lt 1 ]; }; then
  echo "gpu-check: no NVIDIA GPU"
  exit 3
elif [ "$rc" != 0 ]; then
  echo "gpu-check: gpuinfo failed (exit $rc): $(cat "$work/gpuinfo.err")"
  exit 1
fi
for f in "$kit"/pack/bin/* "$kit"/pack/tests/*; do
  rel=${f#"$kit"/pack/}
  rel=${rel%.gz}
  unpack "${rel%.xz}"
done
if command -v sha256sum >/dev/null 2>&1 && ! (cd "$work" && sha256sum --quiet -c "$kit/SHA256SUMS"); then
  echo "gpu-check: the kit's binaries do not match SHA256SUMS (a damaged copy?)"
  exit 1
fi
mkdir -p "$logs" 2>/dev/null && [ -w "$logs" ] || logs=$(mktemp -d "${TMPDIR:-/tmp}/goddp-kit-logs.XXXXXX")

# The nvidia wheels' library directories, newest Python environment first.
wheeldirs=$(timeout 30 "$py" - 2>/dev/null <<'EOF'
import os
try:
    import nvidia
except Exception:
    raise SystemExit(0)
for root in list(nvidia.__path__):
    for d in sorted(os.listdir(root)):
        lib = os.path.join(root, d, "lib")
        if os.path.isdir(lib):
            print(lib)
EOF
)
firstlib() { # firstlib GLOB...: the first file matching, in the wheel dirs
  local d g f
  for g in "$@"; do
    for d in $wheeldirs; do
      for f in "$d"/$g; do [ -e "$f" ] && { echo "$f"; return; }; done
    done
  done
}
if [ -n "$wheeldirs" ]; then
  export LD_LIBRARY_PATH=$(echo $wheeldirs | tr ' ' :)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  : "${GODDP_CUBLAS_LIBRARY:=$(firstlib 'libcublas.so.1[0-9]' 'libcublas.so.*')}"
  : "${GODDP_CUDNN_LIBRARY:=$(firstlib 'libcudnn.so.9' 'libcudnn.so.8')}"
  : "${GODDP_NCCL_LIBRARY:=$(firstlib 'libnccl.so.2')}"
fi
for v in GODDP_CUBLAS_LIBRARY GODDP_CUDNN_LIBRARY GODDP_NCCL_LIBRARY; do
  if [ -n "${!v:-}" ]; then export "$v"; else unset "$v"; fi
done

export GODDP_GPU_KIT=1 # GPU tests fail instead of skipping
export GODDP_TIMEOUT=30s # every collective and rendezvous of every step
export NCCL_DEBUG=WARN
export bin work

passed=0
failed=0
failures=()
skipped=()
# check NAME BOUND CMD...: runs CMD for at most BOUND seconds (at most
# $limit), logs everything to $logs/NAME.log, streams test verdicts, and
# counts it. On time-out CMD gets SIGQUIT (a Go program prints its
# goroutines' stacks), then SIGKILL 10 s later.
check() {
  local name=$1 t=$2
  shift 2
  local log=$logs/$name.log
  if ! [ "$t" -le 120 ] 2>/dev/null; then
    echo "== $name"
    echo "   FAILED: the kit gives this step a bound of $t s; every step must have 120 s or less"
    failed=$((failed + 1)); failures+=("$name"); return 1
  fi
  [ "$t" -le "$limit" ] || t=$limit
  echo "== $name (bound $t s)"
  local start=$SECONDS
  timeout -s QUIT -k 10 "$t" "$@" 2>&1 | tee "$log" |
    { grep --line-buffered -E -e '--- (PASS|FAIL|SKIP)' -e '^(panic|fatal error|SIGQUIT)' | sed -u 's/^/   /'; true; }
  local rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ] && grep -q -e '^--- SKIP' "$log"; then
    # A test that skips on a GPU machine (one for machines without a GPU)
    # neither passes nor fails here.
    skipped+=("$name")
    echo "   skipped ($((SECONDS - start)) s)"
    return 0
  fi
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    echo "   ok ($((SECONDS - start)) s)"
    return 0
  fi
  failed=$((failed + 1))
  failures+=("$name")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "   FAILED: killed at its bound of $t s (exit $rc); the Go stacks are in $log"
  else
    echo "   FAILED (exit $rc after $((SECONDS - start)) s); last lines of $log:"
  fi
  tail -n 15 "$log" | sed 's/^/   | /'
  return 1
}
# gotest NAME BINARY TEST: one test of a package's test binary, in a
# scratch directory as go test runs it.
gotest() {
  local name=$1 t=$2 test=$3
  local dir
  dir=$(mktemp -d "$work/run.XXXXXX")
  check "$name" 120 bash -c 'cd "$1" && exec "$2" -test.v -test.count=1 -test.timeout 100s -test.run "^$3\$"' _ "$dir" "$t" "$test"
}

echo "goddp GPU kit $(cat "$kit/VERSION" 2>/dev/null), $(date -u +%Y-%m-%dT%H:%MZ), $(uname -srm)"
echo "== inventory"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv 2>&1 | sed 's/^/   /'
else
  echo "   nvidia-smi: not installed"
fi
{
  echo "cuBLAS: ${GODDP_CUBLAS_LIBRARY:-from the system loader}"
  echo "cuDNN: ${GODDP_CUDNN_LIBRARY:-from the system loader}"
  echo "NCCL: ${GODDP_NCCL_LIBRARY:-from the system loader}"
  echo "torch: $(timeout 60 "$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -n 1)"
} | tee "$logs/libraries.log" | sed 's/^/   /'
timeout -s QUIT -k 10 60 "$bin/gpuinfo" 2>&1 | tee "$logs/inventory.log" | sed 's/^/   /'
if [ "${PIPESTATUS[0]}" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=(inventory); fi

# Losses against the CPU references that gpu-kit.sh recorded (ref/).
steplosses() { grep '"kind":"train"' "$1" | grep -o '"loss":[^,}]*' | cut -d: -f2; }
cmpref() { # cmpref REF JSONL STEPS [TOL]: the first STEPS losses agree within TOL (1e-3)
  paste "$1" <(steplosses "$2") | awk -v want="$3" -v tol="${4:-1e-3}" '
    NR <= want && NF == 2 { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > worst) worst = r; last = r; n = NR
      if (r > tol) { bad++; if (bad <= 5) print "step " NR ": cpu " $1 ", device " $2 } }
    NF == 2 && NR % 5 == 0 { d = $1 - $2; if (d < 0) d = -d; curve = curve sprintf(" %d:%.1e", NR, d / ($1 < 0 ? -$1 : $1)) }
    END { if (curve != "") print "relative difference every 5 steps (the first " want " compared):" curve
      print n " steps compared with the CPU, relative difference at the last " last ", worst " worst
      exit (n == want && bad == 0) ? 0 : 1 }'
}
# GPU_KIT_ONLY=profile runs the inventory and GPU_KIT_PROFILE's steps
# alone (a short call when device time is scarce).
if [ -z "${GPU_KIT_ONLY:-}" ]; then
# The device tests, one step each, in the order tests/PKG.tests lists
# them (gpu-kit.sh puts the likeliest to hang last).
for t in "$work"/tests/*.test; do
  pkg=$(basename "$t" .test)
  list=$kit/tests/$pkg.tests
  [ -f "$list" ] || { echo "== test-$pkg"; echo "   FAILED: the kit has no tests/$pkg.tests"; failed=$((failed + 1)); failures+=("test-$pkg"); continue; }
  mapfile -t names <"$list" # read first: a test must not eat the list from its stdin
  for name in "${names[@]}"; do
    [ -n "$name" ] && gotest "test-$pkg-$name" "$t" "$name" </dev/null
  done
done

# examples/mlp on the GPU against the CPU, same seed: rank 0's loss at
# every step (-metrics) within 1e-3 relative of the CPU run that
# gpu-kit.sh recorded (ref/mlp-wN.losses), so no CPU training runs here.
mlp_cuda_vs_cpu() {
  "$bin/mlp" -device cuda -epochs 2 -seed 5 -num-workers 2 -metrics "$work/mlp1.jsonl" -metrics-every 1 -ckpt-dir "$work/ckpt-mlp1" || return 1
  cmpref "$kit/ref/mlp-w1.losses" "$work/mlp1.jsonl" 100
}
# Two ranks on cuda:0 (NCCL refuses two ranks on one GPU), reducing over
# shm: the only multi-process device path a one-GPU machine can run.
mlp_cuda_w2_shm() {
  GODDP_BACKEND=shm "$bin/ddprun" --standalone --nproc-per-node 2 "$bin/mlp" -device cuda:0 -epochs 1 -seed 5 \
    -metrics "$work/mlp2.jsonl" -metrics-every 1 -ckpt-dir "$work/ckpt-mlp2" || return 1
  cmpref "$kit/ref/mlp-w2.losses" "$work/mlp2.jsonl" 64
}
# DDP over NCCL with the buckets on the GPUs, one rank per GPU.
mlp_cuda_nccl() {
  GODDP_BACKEND=nccl "$bin/ddprun" --standalone --nproc-per-node gpu "$bin/mlp" -device cuda -epochs 1 -seed 5 \
    -metrics "$work/mlpn.jsonl" -metrics-every 1 -ckpt-dir "$work/ckpt-mlpn" || return 1
  case $ngpu in
  1) cmpref "$kit/ref/mlp-w1.losses" "$work/mlpn.jsonl" 100 ;;
  2) cmpref "$kit/ref/mlp-w2.losses" "$work/mlpn.jsonl" 64 ;;
  *) echo "no CPU reference recorded for world $ngpu: trained, losses not compared" ;;
  esac
}
export ngpu kit
export -f steplosses cmpref mlp_cuda_vs_cpu mlp_cuda_w2_shm mlp_cuda_nccl
check mlp-cuda-vs-cpu 120 bash -c mlp_cuda_vs_cpu && grep -h -e 'steps compared' -e samples_per_s "$logs/mlp-cuda-vs-cpu.log" | sed 's/^/   /'
# 8 steps an epoch at batch 1024, and the first epoch is the warm-up: 26
# epochs time 200 steps, as many as the torch yardstick's. Two loader
# workers gather the next batches beside the step, as the yardstick's
# data, already on the device, costs its step nothing (the losses above
# show that workers do not change what is trained).
check mlp-cuda-b1024 120 "$bin/mlp" -device cuda -epochs 26 -batch-size 1024 -num-workers 2 -ckpt-dir "$work/ckpt-b1024" &&
  grep -h samples_per_s "$logs/mlp-cuda-b1024.log" | sed 's/^/   /'
check mlp-cuda0-w2-shm 120 bash -c mlp_cuda_w2_shm && grep -h 'steps compared' "$logs/mlp-cuda0-w2-shm.log" | sed 's/^/   /'
# examples/cnn (without dropout) and examples/gpt on the GPU against the
# CPU: gpt over 50 steps, cnn over its first 30. The convnet's SGD
# amplifies a last-bit difference about sevenfold every 5 steps after its
# 30th: the CPU's two builds (pure Go, and OpenBLAS/oneDNN) agree within
# 6e-6 at step 30 and differ by 8e-4 at step 45 and 1.2e-3 at step 50, as
# the H200 did from the CPU (2.2e-3 at step 47). Then their samples/s
# over 300 steps with the anchors' recipes (cnn with its dropout, on the kit's slice of
# Fashion-MNIST).
cnn_cuda_vs_cpu() {
  FASHION_MNIST_DIR=$kit/data/fmnist "$bin/cnn" -device cuda -epochs 1 -max-steps 50 -dropout 0 -seed 5 \
    -metrics "$work/cnn.jsonl" -metrics-every 1 -ckpt-dir "" || return 1
  cmpref "$kit/ref/cnn.losses" "$work/cnn.jsonl" 30
}
# The same with cuDNN timing its algorithms (GODDP_CUDNN_BENCHMARK=1):
# other algorithms, the same float32 arithmetic.
cnn_cuda_benchmark_vs_cpu() {
  GODDP_CUDNN_BENCHMARK=1 FASHION_MNIST_DIR=$kit/data/fmnist "$bin/cnn" -device cuda -epochs 1 -max-steps 50 -dropout 0 -seed 5 \
    -metrics "$work/cnn-bench.jsonl" -metrics-every 1 -ckpt-dir "" || return 1
  cmpref "$kit/ref/cnn.losses" "$work/cnn-bench.jsonl" 30
}
gpt_cuda_vs_cpu() {
  GPT_TEXT=$kit/data/GPL-3 "$bin/gpt" -device cuda -epochs 1 -max-steps 50 -seed 5 -metrics "$work/gpt.jsonl" -metrics-every 1 -ckpt-dir "" || return 1
  cmpref "$kit/ref/gpt.losses" "$work/gpt.jsonl" 50
}
# Under bf16 autocast: the device's bf16 GEMMs (cublasGemmEx) against the
# CPU's, over the same steps as above and within the same 1e-3. Both round
# each operand to bf16 (nearest even) and sum in float32, in another
# order. These runs show that training under autocast on the device
# follows the CPU's; they cannot by themselves tell bf16 from float32, as
# the two CPU runs differ by 5e-4 (cnn, step 30) and 5e-5 (gpt) only:
# TestGPUGemmBF16 checks the bf16 products, and the distance to the
# float32 reference is printed beside. The convnet runs twice: on goddp's
# kernels (GODDP_CUDNN=0), and on cuDNN (operands rounded to bfloat16,
# multiplied on TF32 tensor cores, exactly); both compute what the CPU
# does (TestGPUCudnnConvBF16 checks the passes one by one).
cnn_cuda_bf16_vs_cpu() {
  GODDP_CUDNN=0 FASHION_MNIST_DIR=$kit/data/fmnist "$bin/cnn" -device cuda -amp bf16 -epochs 1 -max-steps 50 -dropout 0 -seed 5 \
    -metrics "$work/cnn-bf16-own.jsonl" -metrics-every 1 -ckpt-dir "" || return 1
  FASHION_MNIST_DIR=$kit/data/fmnist "$bin/cnn" -device cuda -amp bf16 -epochs 1 -max-steps 50 -dropout 0 -seed 5 \
    -metrics "$work/cnn-bf16.jsonl" -metrics-every 1 -ckpt-dir "" || return 1
  cmpref "$kit/ref/cnn.losses" "$work/cnn-bf16.jsonl" 30 1 | sed 's/^/against float32: /'
  local rc=0
  cmpref "$kit/ref/cnn-bf16.losses" "$work/cnn-bf16-own.jsonl" 30 | sed 's/^/goddp kernels: /'
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  cmpref "$kit/ref/cnn-bf16.losses" "$work/cnn-bf16.jsonl" 30 | sed 's/^/cuDNN: /'
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  return $rc
}
gpt_cuda_bf16_vs_cpu() {
  GPT_TEXT=$kit/data/GPL-3 "$bin/gpt" -device cuda -amp bf16 -epochs 1 -max-steps 50 -seed 5 -metrics "$work/gpt-bf16.jsonl" -metrics-every 1 -ckpt-dir "" || return 1
  cmpref "$kit/ref/gpt.losses" "$work/gpt-bf16.jsonl" 50 1 | sed 's/^/against float32: /' 
  cmpref "$kit/ref/gpt-bf16.losses" "$work/gpt-bf16.jsonl" 50
}
export -f cnn_cuda_vs_cpu cnn_cuda_benchmark_vs_cpu gpt_cuda_vs_cpu cnn_cuda_bf16_vs_cpu gpt_cuda_bf16_vs_cpu
check cnn-cuda-vs-cpu 120 bash -c cnn_cuda_vs_cpu && grep -h -e 'steps compared' -e 'every 5' "$logs/cnn-cuda-vs-cpu.log" | sed 's/^/   /'
check cnn-cuda-benchmark-vs-cpu 120 bash -c cnn_cuda_benchmark_vs_cpu && grep -h 'steps compared' "$logs/cnn-cuda-benchmark-vs-cpu.log" | sed 's/^/   /'
check cnn-cuda-speed 120 env FASHION_MNIST_DIR="$kit/data/fmnist" "$bin/cnn" -device cuda -epochs 2 -max-steps 300 -num-workers 2 -ckpt-dir "" &&
  grep -h samples_per_s "$logs/cnn-cuda-speed.log" | sed 's/^/   /'
check gpt-cuda-vs-cpu 120 bash -c gpt_cuda_vs_cpu && grep -h 'steps compared' "$logs/gpt-cuda-vs-cpu.log" | sed 's/^/   /'
check gpt-cuda-speed 120 env GPT_TEXT="$kit/data/GPL-3" "$bin/gpt" -device cuda -epochs 2 -max-steps 300 -num-workers 2 -ckpt-dir "" &&
  grep -h samples_per_s "$logs/gpt-cuda-speed.log" | sed 's/^/   /'
check cnn-cuda-bf16-vs-cpu 120 bash -c cnn_cuda_bf16_vs_cpu && grep -h -e 'steps compared' -e 'every 5' "$logs/cnn-cuda-bf16-vs-cpu.log" | sed 's/^/   /'
check cnn-cuda-bf16-speed 120 env FASHION_MNIST_DIR="$kit/data/fmnist" "$bin/cnn" -device cuda -amp bf16 -epochs 2 -max-steps 300 -num-workers 2 -ckpt-dir "" &&
  grep -h samples_per_s "$logs/cnn-cuda-bf16-speed.log" | sed 's/^/   /'
check gpt-cuda-bf16-vs-cpu 120 bash -c gpt_cuda_bf16_vs_cpu && grep -h -e 'steps compared' -e 'every 5' "$logs/gpt-cuda-bf16-vs-cpu.log" | sed 's/^/   /'
check gpt-cuda-bf16-speed 120 env GPT_TEXT="$kit/data/GPL-3" "$bin/gpt" -device cuda -amp bf16 -epochs 2 -max-steps 300 -num-workers 2 -ckpt-dir "" &&
  grep -h samples_per_s "$logs/gpt-cuda-bf16-speed.log" | sed 's/^/   /'
# Device memory. A step's intermediates go back to the cache when the step
# ends (FreeGraph) and an op's temporaries at once, not when Go's collector
# finds them; each run above prints its footprint ("device memory:").
# Under GODDP_DEVICE_MEMORY_LIMIT the allocator reserves no more than the
# limit, collecting garbage first when a request would pass it: the
# convnet under autocast, whose rounded copies are the most garbage,
# trains within 1 GiB.
peakreserved() { # the peak reserved bytes on the last "device memory:" line of $1
  grep -h '^device memory:' "$1" | tail -n 1 | sed -nE 's/.*reserved [^(]*\(peak ([0-9.]+) (GiB|MiB|KiB|B)\).*/\1 \2/p' |
    awk '{ m = $2 == "GiB" ? 2^30 : $2 == "MiB" ? 2^20 : $2 == "KiB" ? 2^10 : 1; printf "%.0f\n", $1 * m }'
}
cnn_cuda_bf16_limit() {
  local out=$work/cnn-bf16-limit.log peak rc=0
  GODDP_DEVICE_MEMORY_LIMIT=1G FASHION_MNIST_DIR=$kit/data/fmnist "$bin/cnn" -device cuda -amp bf16 -epochs 2 -max-steps 300 \
    -num-workers 2 -ckpt-dir "" >"$out" 2>&1 || rc=$?
  cat "$out"
  [ "$rc" -eq 0 ] || return 1
  peak=$(peakreserved "$out")
  echo "peak reserved: ${peak:-none} bytes, under a limit of 1073741824"
  [ -n "$peak" ] && [ "$peak" -le 1073741824 ]
}
export -f peakreserved cnn_cuda_bf16_limit
check cnn-cuda-bf16-limit 120 bash -c cnn_cuda_bf16_limit &&
  grep -h -e samples_per_s -e 'peak reserved' "$logs/cnn-cuda-bf16-limit.log" | sed 's/^/   /'
for f in cnn-cuda-speed gpt-cuda-speed cnn-cuda-bf16-speed gpt-cuda-bf16-speed; do
  echo "   $f: $(grep -h '^device memory:' "$logs/$f.log" 2>/dev/null | tail -n 1)"
done

# NCCL: its device tests ran above (test-comm_nccl-*); DDP over it.
check mlp-cuda-ddp-nccl 120 bash -c mlp_cuda_nccl && grep -h 'steps compared' "$logs/mlp-cuda-ddp-nccl.log" | sed 's/^/   /'

# ddpbench over NCCL, one rank per visible GPU: device buffers straight to
# NCCL (comparable with nccl-tests' all_reduce_perf), then host buffers,
# which the backend stages through pinned memory. At world 1 NCCL has no
# peer, so these time the backend's own path, not a network.
for mem in device host; do
  check "ddpbench-nccl-$mem" 120 "$bin/ddpbench" allreduce -backend nccl -mem "$mem" -nproc "$ngpu" -min 4K -max 256M -timeout 30s &&
    sed 's/^/   /' "$logs/ddpbench-nccl-$mem.log"
done

# The yardstick: torch on the same GPU, the anchors' recipes.
if [ -f "$kit/bench_torch_gpu.py" ]; then
  check torch-yardstick 120 env GPL_TEXT="$kit/data/GPL-3" FMNIST_DIR="$kit/data/fmnist" STEPS=200 "$py" "$kit/bench_torch_gpu.py" &&
    grep -h '^torch-gpu' "$logs/torch-yardstick.log" | sed 's/^/   /'
fi
fi # GPU_KIT_ONLY

# GPT-2 (examples/gpt2) and torchrun. By default the small GPT-2 against
# its CPU references and torchrun launching goddp; GPU_KIT_ONLY=gpt2 runs
# the inventory and these with GPT-2 124M's timing (goddp, then torch
# eager and compiled) in one call of about 5 minutes; GPU_KIT_GPT2=1 adds
# the 124M timing to the full run (which then takes longer than 6 minutes).
# For a check of these steps without a GPU (scripts/check-engines.sh):
# GPU_KIT_GPT2_DEVICE=cpu trains goddp's runs on the CPU (the simulated
# device, sim, is too slow for even the small GPT-2's 30 steps),
# GPT2_MODEL_ARGS replaces "-model gpt2 -seq-len 1024", and the torch
# script's BENCH_DEVICE=cpu, SEQ, N_LAYER, N_HEAD, N_EMBD pass through.
case ${GPU_KIT_ONLY:-} in
"") gpt2_checks=small; [ -z "${GPU_KIT_GPT2:-}" ] || gpt2_checks=all ;;
gpt2) gpt2_checks=all ;;
*) gpt2_checks="" ;;
esac
if [ -n "$gpt2_checks" ]; then
# The small GPT-2 (2 layers, width 64, T=64, batch 4, ref/gpt2-small.args)
# on the GPU against the CPU run gpu-kit.sh recorded: 30 steps within
# 1e-3 relative, float32 and under -amp bf16 (against the CPU's bf16; the
# distance to float32 printed beside).
gpt2_small_vs_cpu() { # gpt2_small_vs_cpu fp32|bf16
  local name=gpt2-small
  [ "$1" = fp32 ] || name=gpt2-small-$1
  # shellcheck disable=SC2046 # the recorded flags, one word each
  "$bin/gpt2" -device "${GPU_KIT_GPT2_DEVICE:-cuda}" -amp "$1" -data "$kit/data/gpt2-small" $(cat "$kit/ref/gpt2-small.args") \
    -metrics "$work/$name.jsonl" -metrics-every 1 -ckpt-dir "" || return 1
  [ "$1" = fp32 ] || cmpref "$kit/ref/gpt2-small.losses" "$work/$name.jsonl" 30 1 | sed 's/^/against float32: /'
  cmpref "$kit/ref/$name.losses" "$work/$name.jsonl" 30
}
# GPT-2 124M at T=1024 under bf16 autocast on random tokens (a step's
# time does not depend on which), at the largest batch of 32, 16, 8 that
# fits (a batch that runs out of memory fails within its first step),
# for GPT2_STEPS (100) steps or until GPT2_CAP (95 s, all tries) has
# passed, when it is stopped and the steps done are reported. The rates
# are the trainer's step lines (every 5 s, each over the steps since the
# last, the first step excluded) and, when every step ran, its tokens_per_s
# line; the peak reserved memory its "device memory:" line, and the most
# memory nvidia-smi saw in use on the GPU (the driver's context included).
gpt2_tokens() { # gpt2_tokens DIR: random GPT-2 tokens for 124M's steps, nanoGPT's train.bin and val.bin
  [ -f "$1/train.bin" ] && return 0
  mkdir -p "$1" && "$py" - "$1" "$((${GPT2_STEPS:-100} * 32 * 1025 + 1025))" <<'EOF'
import array, os, random, sys
r = random.Random(1)
for name, n in (("train.bin", int(sys.argv[2])), ("val.bin", 65 * 1025)):
    a = array.array("H")
    a.frombytes(r.randbytes(2 * n))
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        array.array("H", (v % 50257 for v in a)).tofile(f)
EOF
}
gpt2_124m() {
  local d=$work/gpt2-124m log=$work/gpt2-124m.log cap=${GPT2_CAP:-95} start=$SECONDS rc=1 b smi
  gpt2_tokens "$d" || { echo "could not write random tokens into $d"; return 1; }
  smi=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$work/gpt2-124m.smi" 2>/dev/null &
    smi=$!
  fi
  for b in ${GPT2_BATCHES:-32 16 8}; do
    local left=$((cap - (SECONDS - start)))
    [ "$left" -gt 5 ] || { echo "batch $b: no time left of the cap of $cap s"; break; }
    # shellcheck disable=SC2086 # GPT2_MODEL_ARGS: flags, one word each
    timeout -s TERM -k 10 "$left" "$bin/gpt2" -device "${GPU_KIT_GPT2_DEVICE:-cuda}" -amp bf16 ${GPT2_MODEL_ARGS:--model gpt2 -seq-len 1024} -batch-size "$b" \
      -epochs 1 -max-steps "${GPT2_STEPS:-100}" -warmup-steps 10 -eval-batches 1 -progress-every 5s -seed 5 \
      -data "$d" -ckpt-dir "" >"$log" 2>&1
    rc=$?
    cat "$log"
    if [ "$rc" != 0 ] && ! grep -q '^step=' "$log" && grep -qEi 'out of memory|OUT_OF_MEMORY' "$log"; then
      echo "batch $b: out of memory"
      continue
    fi
    break
  done
  [ -z "$smi" ] || { kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null; }
  local steps last
  last=$(grep '^step=' "$log" | tail -n 1)
  steps=$(echo "$last" | sed -nE 's/^step=([0-9]+) .*/\1/p')
  [ -n "$steps" ] || { echo "gpt2-124m: no step line (exit $rc)"; return 1; }
  local smipeak
  smipeak=$(sort -n "$work/gpt2-124m.smi" 2>/dev/null | tail -n 1)
  local seq
  seq=$(echo "${GPT2_MODEL_ARGS:--seq-len 1024}" | sed -nE 's/.*-seq-len ([0-9]+).*/\1/p')
  echo "gpt2-124m goddp batch=$b seq=${seq:-?} steps=$steps$([ "$rc" = 0 ] || echo " capped=1 (stopped at $cap s, exit $rc)") $(grep -h '^tokens_per_s=' "$log" | tail -n 1)"
  echo "gpt2-124m goddp last window: $last"
  echo "gpt2-124m goddp $(grep -h '^device memory:' "$log" | tail -n 1) nvidia-smi peak used ${smipeak:-n/a} MiB"
  # Stopped at the cap after some steps is a measurement, not a failure
  # (137: it took more than 10 s to stop and was killed).
  [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$rc" = 137 ]
}
# torch's own torchrun launching a goddp binary (--no_python): examples/mlp
# at world 2 on the CPU over tcp (NCCL refuses two ranks on one GPU; the
# point is the rendezvous and torch's store), against the CPU reference of
# world 2. static: the agent hosts torch's TCPStore on --master_port (libuv
# from torch 2.4) and the workers join it (TORCHELASTIC_USE_AGENT_STORE=
# True); c10d: rendezvous on a c10d store at --rdzv_endpoint (torch 2.x
# hands its workers the agent's store too); standalone: c10d on a local
# store torchrun picks. A wrapper prints what torchrun gave each worker.
torchrun_mlp() { # torchrun_mlp static|c10d|standalone
  local port args
  port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || return 1
  case $1 in
  static) args=(--nnodes 1 --master_addr 127.0.0.1 --master_port "$port") ;;
  c10d) args=(--nnodes 1 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" --rdzv_id goddp-kit) ;;
  standalone) args=(--standalone --nnodes 1) ;;
  esac
  "$py" -c 'import torch; print("torch", torch.__version__)'
  # --redirects 1 --tee 1 (the workers' stdout to files and the console):
  # Debian's torch 1.13 under Python 3.11 reads the default "0" (and any
  # value of two bits, "3") as None and fails before any worker starts.
  KIT_ENV_FILE=$work/torchrun-$1.env GODDP_BACKEND=tcp "$py" -m torch.distributed.run "${args[@]}" --nproc_per_node 2 \
    --monitor_interval 1 --redirects 1 --tee 1 --log_dir "$work/torchrun-$1-logs" --no_python bash -c 'echo "rank $RANK of $WORLD_SIZE: MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT TORCHELASTIC_USE_AGENT_STORE=${TORCHELASTIC_USE_AGENT_STORE:-unset}" | tee -a "$KIT_ENV_FILE"; exec "$0" "$@"' \
    "$bin/mlp" -device cpu -epochs 1 -seed 5 -metrics "$work/torchrun-$1.jsonl" -metrics-every 1 -ckpt-dir "$work/ckpt-torchrun-$1" || return 1
  if [ "$1" = static ] && ! grep -q "TORCHELASTIC_USE_AGENT_STORE=True" "$work/torchrun-$1.env"; then
    echo "torchrun static did not hand its workers the agent's store (TORCHELASTIC_USE_AGENT_STORE=True)"
    return 1
  fi
  cmpref "$kit/ref/mlp-w2.losses" "$work/torchrun-$1.jsonl" 64
}
export py kit ngpu
export -f steplosses cmpref gpt2_small_vs_cpu gpt2_tokens gpt2_124m torchrun_mlp
check gpt2-small-cuda-vs-cpu 120 bash -c 'gpt2_small_vs_cpu fp32' && grep -h 'steps compared' "$logs/gpt2-small-cuda-vs-cpu.log" | sed 's/^/   /'
check gpt2-small-cuda-bf16-vs-cpu 120 bash -c 'gpt2_small_vs_cpu bf16' &&
  grep -h -e 'steps compared' -e 'every 5' "$logs/gpt2-small-cuda-bf16-vs-cpu.log" | sed 's/^/   /'
if [ "$gpt2_checks" = all ]; then
  check gpt2-124m-goddp 120 bash -c gpt2_124m && grep -h '^gpt2-124m goddp' "$logs/gpt2-124m-goddp.log" | sed 's/^/   /'
  # torch at the batch goddp found, else its own search.
  tb=$(sed -nE 's/^gpt2-124m goddp batch=([0-9]+) .*/\1/p' "$logs/gpt2-124m-goddp.log" 2>/dev/null | tail -n 1)
  check gpt2-124m-torch-eager 120 env ${tb:+BATCH=$tb} STEPS="${GPT2_STEPS:-100}" CAP=60 "$py" "$kit/bench_torch_gpu_gpt2.py" eager &&
    grep -h '^torch-gpt2' "$logs/gpt2-124m-torch-eager.log" | sed 's/^/   /'
  tb=$(sed -nE 's/^torch-gpt2 mode=eager .* batch=([0-9]+) .*/\1/p' "$logs/gpt2-124m-torch-eager.log" 2>/dev/null | tail -n 1)
  check gpt2-124m-torch-compile 120 env ${tb:+BATCH=$tb} STEPS="${GPT2_STEPS:-100}" CAP=30 "$py" "$kit/bench_torch_gpu_gpt2.py" compile &&
    grep -h '^torch-gpt2' "$logs/gpt2-124m-torch-compile.log" | sed 's/^/   /'
  # goddp's rate: the whole run's when every step ran, else the last window's
  # (the trainer's step line every 5 s).
  g=$(grep -h '^gpt2-124m goddp batch=' "$logs/gpt2-124m-goddp.log" 2>/dev/null | grep -o 'tokens_per_s=[0-9.]*' | cut -d= -f2)
  # (A short run's own figure is 0: the trainer leaves its first steps out.)
  awk -v g="${g:-0}" 'BEGIN { exit !(g > 0) }' || g=$(grep -h '^gpt2-124m goddp last window' "$logs/gpt2-124m-goddp.log" 2>/dev/null | grep -o 'tokens_per_s=[0-9.]*' | cut -d= -f2)
  echo "== GPT-2 124M, T=1024, bf16 (tokens/s)"
  for mode in eager compile; do
    tt=$(grep -h "^torch-gpt2 mode=$mode " "$logs/gpt2-124m-torch-$mode.log" 2>/dev/null | grep -o 'tokens_per_s=[0-9.]*' | cut -d= -f2)
    ratio=$(awk -v g="${g:-0}" -v t="${tt:-0}" 'BEGIN { if (g > 0 && t > 0) printf "%.2fx", g / t; else print "n/a" }')
    echo "   goddp ${g:-n/a}, torch $mode ${tt:-n/a}, goddp/torch $ratio" | tee -a "$logs/compare.log"
  done
fi
for form in static c10d standalone; do
  check "torchrun-$form-mlp" 120 bash -c "torchrun_mlp $form" &&
    grep -h -e '^torch ' -e 'steps compared' -e 'AGENT_STORE' "$logs/torchrun-$form-mlp.log" | sort -u | sed 's/^/   /'
done
fi # gpt2_checks

# GPU_KIT_SWEEP=1: the same models at batch sizes that fill the GPU
# (gpt at 256 sequences, cnn at 512 images), in float32, with TF32, and
# under bf16 autocast, goddp and torch (200 steps each): at the anchors'
# batches both are bound by the host's kernel launches, so precision does
# not show there.
if [ -n "${GPU_KIT_SWEEP:-}" ]; then
  for v in "fp32:" "tf32:GODDP_ALLOW_TF32=1" "bf16:-amp bf16"; do
    name=${v%%:*} opt=${v#*:}
    env=() flags=()
    case $opt in GODDP_*) env=("$opt") ;; -*) read -ra flags <<<"$opt" ;; esac
    check "sweep-gpt-b256-$name" 120 env "${env[@]}" GPT_TEXT="$kit/data/GPL-3" "$bin/gpt" -device cuda "${flags[@]}" \
      -batch-size 256 -epochs 20 -max-steps 200 -num-workers 2 -ckpt-dir "" && grep -h samples_per_s "$logs/sweep-gpt-b256-$name.log" | sed 's/^/   /'
    check "sweep-cnn-b512-$name" 120 env "${env[@]}" FASHION_MNIST_DIR="$kit/data/fmnist" "$bin/cnn" -device cuda "${flags[@]}" \
      -batch-size 512 -epochs 20 -max-steps 200 -num-workers 2 -ckpt-dir "" && grep -h samples_per_s "$logs/sweep-cnn-b512-$name.log" | sed 's/^/   /'
  done
  # cuDNN timing its algorithms (torch.backends.cudnn.benchmark) against
  # its heuristics, float32 and TF32.
  check sweep-cnn-b512-fp32-benchmark 120 env GODDP_CUDNN_BENCHMARK=1 FASHION_MNIST_DIR="$kit/data/fmnist" "$bin/cnn" -device cuda \
    -batch-size 512 -epochs 20 -max-steps 200 -num-workers 2 -ckpt-dir "" && grep -h samples_per_s "$logs/sweep-cnn-b512-fp32-benchmark.log" | sed 's/^/   /'
  check sweep-cnn-b512-tf32-benchmark 120 env GODDP_CUDNN_BENCHMARK=1 GODDP_ALLOW_TF32=1 FASHION_MNIST_DIR="$kit/data/fmnist" "$bin/cnn" -device cuda \
    -batch-size 512 -epochs 20 -max-steps 200 -num-workers 2 -ckpt-dir "" && grep -h samples_per_s "$logs/sweep-cnn-b512-tf32-benchmark.log" | sed 's/^/   /'
  check sweep-torch 120 env GPL_TEXT="$kit/data/GPL-3" FMNIST_DIR="$kit/data/fmnist" STEPS=200 "$py" "$kit/bench_torch_gpu.py" \
    gpt-b256 cnn-b512 gpt-b256-bf16 cnn-b512-bf16 && grep -h '^torch-gpu' "$logs/sweep-torch.log" | sed 's/^/   /'
  check sweep-torch-tf32 120 env TF32=1 GPL_TEXT="$kit/data/GPL-3" FMNIST_DIR="$kit/data/fmnist" STEPS=200 "$py" "$kit/bench_torch_gpu.py" \
    gpt-b256 cnn-b512 && grep -h '^torch-gpu' "$logs/sweep-torch-tf32.log" | sed 's/^/   /'
fi

# GPU_KIT_PROFILE=1: where the device time of a large-batch step goes.
# GODDP_CUDA_OP_TIMES=1 waits for the stream around every call the device
# queues and prints the totals by kernel, product and convolution shape
# (the waits slow the run; the shares are what counts).
if [ -n "${GPU_KIT_PROFILE:-}" ] || [ "${GPU_KIT_ONLY:-}" = profile ]; then
  [ -n "${GPU_KIT_PROFILE_RUNS:-}" ] || check profile-gemm-shapes 120 bash -c 'cd "$work" && "$work/tests/cuda.test" -test.run "^\$" -test.bench BenchmarkGPUGemmShapes -test.benchtime 100x' &&
    grep -h '^Benchmark' "$logs/profile-gemm-shapes.log" | sed 's/^/   /'
  [ -n "${GPU_KIT_PROFILE_RUNS:-}" ] || check profile-gemm-shapes-torch 120 "$py" "$kit/bench_torch_gpu.py" gemm-shapes && sed 's/^/   /' "$logs/profile-gemm-shapes-torch.log"
  # GPU_KIT_PROFILE_RUNS: NAME:MODEL:BATCH:ARGS entries, spaces between,
  # commas between ARGS (VAR=value ones go to the environment).
  for v in ${GPU_KIT_PROFILE_RUNS:-cnn-b512-fp32:cnn:512: cnn-b512-bf16:cnn:512:-amp,bf16 gpt-b256-fp32:gpt:256:}; do
    IFS=: read -r name model b opt <<<"$v"
    flags=() envs=()
    for a in ${opt//,/ }; do
      case $a in [A-Z]*=*) envs+=("$a") ;; *) flags+=("$a") ;; esac
    done
    check "profile-$name" 120 env "${envs[@]}" GODDP_CUDA_OP_TIMES=1 GPT_TEXT="$kit/data/GPL-3" FASHION_MNIST_DIR="$kit/data/fmnist" \
      "$bin/$model" -device cuda -num-workers 2 -batch-size "$b" -epochs 1 -max-steps 40 -ckpt-dir "" "${flags[@]}" &&
      grep -h -A 22 "^device op times" "$logs/profile-$name.log" | cut -c 1-160 | sed 's/^/   /'
  done
fi

if [ -z "${GPU_KIT_ONLY:-}" ]; then
echo "== goddp against torch on this GPU (samples/s)"
fig() { grep -ho 'samples_per_s=[0-9.]*' "$logs/$1.log" 2>/dev/null | tail -n 1 | cut -d= -f2; }
tfig() { grep -h "^torch-gpu workload=$1 " "$logs/torch-yardstick.log" 2>/dev/null | grep -o 'samples_per_s=[0-9.]*' | cut -d= -f2; }
for row in "mlp-b64 mlp-cuda-vs-cpu" "mlp-b1024 mlp-cuda-b1024" "cnn cnn-cuda-speed" "gpt gpt-cuda-speed" \
  "cnn-bf16 cnn-cuda-bf16-speed" "gpt-bf16 gpt-cuda-bf16-speed"; do
  set -- $row
  g=$(fig "$2"); tt=$(tfig "$1")
  ratio=$(awk -v g="${g:-0}" -v t="${tt:-0}" 'BEGIN { if (g > 0 && t > 0) printf "%.2fx", g / t; else print "n/a" }')
  echo "   $1: goddp ${g:-n/a}, torch ${tt:-n/a}, goddp/torch $ratio" | tee -a "$logs/compare.log"
done
fi

# The device tool brings back a limited number of files: one archive of
# the logs beside them.
tar -C "$logs" -czf "$logs.tar.gz" . 2>/dev/null
echo "logs: $logs (and $logs.tar.gz)"
[ "$failed" -eq 0 ] || echo "failed: ${failures[*]}"
[ "${#skipped[@]}" -eq 0 ] || echo "skipped (neither passed nor failed): ${skipped[*]}"
echo "gpu-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
