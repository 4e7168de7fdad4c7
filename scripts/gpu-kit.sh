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
#   tests/<pkg>.tests the device tests run.sh runs, one step each: the Test
#                     functions of the package's gpu*_test.go files, with
#                     those that drive DDP or queues last (the likeliest to
#                     hang). CPU-only tests (fakes, sim) are CI's, not the
#                     GPU's.
#   bin/ddprun bin/ddpbench bin/gpuinfo
#   bin/mlp bin/cnn bin/gpt bin/gpt2  the examples with the cuda tag
#   ref/mlp-w1.losses, ref/mlp-w2.losses  rank 0's loss at every step of
#                     bin/mlp on the CPU (seed 5, world 1 and world 2 over
#                     tcp), recorded here so that the GPU machine spends no
#                     time training on its CPU
#   ref/cnn.losses, ref/gpt.losses  the same for examples/cnn (without
#                     dropout, whose masks a device draws its own way) and
#                     examples/gpt, 50 steps each at world 1
#   ref/cnn-bf16.losses, ref/gpt-bf16.losses  the same under -amp bf16
#   ref/gpt2-small.losses, ref/gpt2-small-bf16.losses  the same for
#                     examples/gpt2 at a small size (2 layers, width 64,
#                     T=64, batch 4; 30 steps on data/gpt2-small, the GPL-3
#                     token files of examples/gpt2/testdata), float32 and
#                     -amp bf16
#   bench_torch_gpu.py, data/GPL-3  the torch yardstick and the gpt text
#   bench_torch_gpu_gpt2.py  the torch 2.x yardstick for GPT-2 124M
#                     (nanoGPT's model and step, eager and torch.compile)
#   data/fmnist       the first 12800 training and 1000 test images of
#                     Fashion-MNIST (the whole set would not fit the lease's
#                     64 MiB), for cnn and the yardstick's cnn
# DIR holds the binaries compressed (pack/: xz where this machine has it,
# about 28% of their size, else gzip, about 40%), so that the kit stays
# under 60 MiB as device programs are added; SHA256SUMS
# of the unpacked binaries, VERSION, and run.sh (scripts/gpu-kit-run.sh),
# which unpacks them into a temporary directory (with xz, or Python's lzma
# where xz is missing; gzip for a gzipped kit).
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
rm -rf "$out/pack" "$out/bin" "$out/tests" "$out/ref" "$out/data"
mkdir -p "$build/bin" "$build/tests" "$out/pack/bin" "$out/pack/tests" "$out/tests" "$out/ref" "$out/data"

# Device test packages: cuda and comm/nccl, plus any package with a
# cuda-tagged test file (future device packages join by themselves).
# cuda/kernels/ptxcheck is CI's PTX assembler check, not a GPU test.
pkgs=$( { echo ./cuda; echo ./comm/nccl;
  grep -rlP --include='*_test.go' '^//go:build .*(?<![!\w])cuda\b' . | xargs -r -n1 dirname ; } |
  grep -v -e '^./cuda/kernels/ptxcheck$' -e '/testdata' | sort -u)
for p in $pkgs; do
  name=$(echo "${p#./}" | tr / _)
  go test -c "${flags[@]}" -o "$build/tests/$name.test" "$p"
  # The package's device tests, those over DDP or queues last.
  # (not files built only without the cuda tag: their tests are not in the binary)
  gpufiles=$(grep -LP '^//go:build .*!cuda\b' "$p"/gpu*_test.go 2>/dev/null || true)
  [ -z "$gpufiles" ] || grep -hoE '^func (Test[A-Za-z0-9_]+)\(t \*testing\.T\)' $gpufiles | sed -E 's/^func (Test[A-Za-z0-9_]+).*/\1/' |
    awk '/DDP|Queues/ { last[n++] = $0; next } { print } END { for (i = 0; i < n; i++) print last[i] }' >"$out/tests/$name.tests"
  if [ ! -s "$out/tests/$name.tests" ]; then
    echo "gpu-kit: $p has no device tests (Test functions in gpu*_test.go)" >&2
    exit 1
  fi
done
go build "${flags[@]}" -o "$build/bin/ddprun" ./cmd/ddprun
go build "${flags[@]}" -o "$build/bin/ddpbench" ./cmd/ddpbench
go build "${flags[@]}" -o "$build/bin/gpuinfo" ./cmd/gpuinfo
go build "${flags[@]}" -o "$build/bin/mlp" ./examples/mlp
go build "${flags[@]}" -o "$build/bin/cnn" ./examples/cnn
go build "${flags[@]}" -o "$build/bin/gpt" ./examples/gpt
go build "${flags[@]}" -o "$build/bin/gpt2" ./examples/gpt2

# The bars: nothing links a CUDA, NCCL or BLAS library; the kit fits.
bad=0
for f in "$build"/bin/* "$build"/tests/*; do
  if ldd "$f" 2>/dev/null | grep -E 'libcublas|libnccl|libcudart|libcuda\.so|libopenblas|libdnnl|libgomp|libgfortran' ; then
    echo "gpu-kit: $f links a library the GPU machine may lack" >&2
    bad=1
  fi
done
(cd "$build" && sha256sum bin/* tests/*) >"$out/SHA256SUMS"
# The newest glibc symbol version the binaries use (2.34 when built on
# Debian 12): run.sh refuses clearly on an older glibc.
glibc=$(for f in "$build"/bin/* "$build"/tests/*; do objdump -T "$f"; done 2>/dev/null |
  grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
echo "${glibc:-2.34}" >"$out/GLIBC"
for f in "$build"/bin/* "$build"/tests/*; do
  if command -v xz >/dev/null 2>&1; then
    xz -9 -T0 -c "$f" >"$out/pack/${f#"$build"/}.xz"
  else
    gzip -9 -n -c "$f" >"$out/pack/${f#"$build"/}.gz"
  fi
done
# The CPU losses run.sh compares the GPU's with: the kit's own mlp binary,
# seed 5, rank 0's loss at every step, at world 1 and at world 2 over tcp.
steplosses() { grep '"kind":"train"' "$1" | grep -o '"loss":[^,}]*' | cut -d: -f2; }
refdir=$(mktemp -d)
"$build/bin/mlp" -device cpu -epochs 1 -seed 5 -metrics "$refdir/w1.jsonl" -metrics-every 1 -ckpt-dir "$refdir/c1" >"$refdir/w1.log" 2>&1 ||
  { cat "$refdir/w1.log" >&2; echo "gpu-kit: the CPU reference run (world 1) failed" >&2; exit 1; }
GODDP_BACKEND=tcp "$build/bin/ddprun" --standalone --nproc-per-node 2 "$build/bin/mlp" -device cpu -epochs 1 -seed 5 \
  -metrics "$refdir/w2.jsonl" -metrics-every 1 -ckpt-dir "$refdir/c2" >"$refdir/w2.log" 2>&1 ||
  { cat "$refdir/w2.log" >&2; echo "gpu-kit: the CPU reference run (world 2) failed" >&2; exit 1; }
steplosses "$refdir/w1.jsonl" >"$out/ref/mlp-w1.losses"
steplosses "$refdir/w2.jsonl" >"$out/ref/mlp-w2.losses"
# A slice of Fashion-MNIST, cut record by record from the idx files.
fm=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
mkdir -p "$out/data/fmnist"
python3 - "$fm" "$out/data/fmnist" <<'EOF'
import gzip, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for split, n in (("train", 12800), ("t10k", 1000)):
    for kind in ("images-idx3", "labels-idx1"):
        name = f"{split}-{kind}-ubyte.gz"
        b = gzip.open(os.path.join(src, name)).read()
        nd = b[3]
        dims = list(struct.unpack(">" + "I" * nd, b[4:4 + 4 * nd]))
        rec = 1
        for d in dims[1:]:
            rec *= d
        dims[0] = min(n, dims[0])
        head = b[:4] + struct.pack(">" + "I" * nd, *dims)
        body = b[4 + 4 * nd:4 + 4 * nd + dims[0] * rec]
        with gzip.GzipFile(os.path.join(dst, name), "wb", compresslevel=9, mtime=0) as f:
            f.write(head + body)
EOF
# cnn without dropout (-dropout 0): a device draws its masks its own way.
FASHION_MNIST_DIR=$out/data/fmnist "$build/bin/cnn" -device cpu -epochs 1 -max-steps 50 -dropout 0 -seed 5 \
  -metrics "$refdir/cnn.jsonl" -metrics-every 1 -ckpt-dir "" >"$refdir/cnn.log" 2>&1 ||
  { cat "$refdir/cnn.log" >&2; echo "gpu-kit: the CPU reference run of cnn failed" >&2; exit 1; }
"$build/bin/gpt" -device cpu -epochs 1 -max-steps 50 -seed 5 \
  -metrics "$refdir/gpt.jsonl" -metrics-every 1 -ckpt-dir "" >"$refdir/gpt.log" 2>&1 ||
  { cat "$refdir/gpt.log" >&2; echo "gpu-kit: the CPU reference run of gpt failed" >&2; exit 1; }
# The same two under bf16 autocast (-amp bf16): the device's bf16 GEMMs
# against the CPU's, both rounding their operands to nearest even.
FASHION_MNIST_DIR=$out/data/fmnist "$build/bin/cnn" -device cpu -amp bf16 -epochs 1 -max-steps 50 -dropout 0 -seed 5 \
  -metrics "$refdir/cnn-bf16.jsonl" -metrics-every 1 -ckpt-dir "" >"$refdir/cnn-bf16.log" 2>&1 ||
  { cat "$refdir/cnn-bf16.log" >&2; echo "gpu-kit: the CPU reference run of cnn -amp bf16 failed" >&2; exit 1; }
"$build/bin/gpt" -device cpu -amp bf16 -epochs 1 -max-steps 50 -seed 5 \
  -metrics "$refdir/gpt-bf16.jsonl" -metrics-every 1 -ckpt-dir "" >"$refdir/gpt-bf16.log" 2>&1 ||
  { cat "$refdir/gpt-bf16.log" >&2; echo "gpu-kit: the CPU reference run of gpt -amp bf16 failed" >&2; exit 1; }
# examples/gpt2 at a small size (GPT2_SMALL, kept in ref/gpt2-small.args
# for run.sh), float32 and bf16; warm-up 5 steps so that 30 steps train.
mkdir -p "$out/data/gpt2-small"
cp examples/gpt2/testdata/gpl3_train.bin examples/gpt2/testdata/gpl3_val.bin "$out/data/gpt2-small/"
GPT2_SMALL="-model d2 -n-embd 64 -seq-len 64 -batch-size 4 -warmup-steps 5 -epochs 3 -max-steps 30 -seed 5 -eval-batches 1 -progress-every 0s"
echo "$GPT2_SMALL" >"$out/ref/gpt2-small.args"
for amp in fp32 bf16; do
  name=gpt2-small && [ "$amp" = fp32 ] || name=gpt2-small-$amp
  "$build/bin/gpt2" -device cpu -amp "$amp" -data "$out/data/gpt2-small" $GPT2_SMALL \
    -metrics "$refdir/$name.jsonl" -metrics-every 1 -ckpt-dir "" >"$refdir/$name.log" 2>&1 ||
    { cat "$refdir/$name.log" >&2; echo "gpu-kit: the CPU reference run of gpt2 -amp $amp failed" >&2; exit 1; }
  steplosses "$refdir/$name.jsonl" >"$out/ref/$name.losses"
done
steplosses "$refdir/cnn.jsonl" >"$out/ref/cnn.losses"
steplosses "$refdir/gpt.jsonl" >"$out/ref/gpt.losses"
steplosses "$refdir/cnn-bf16.jsonl" >"$out/ref/cnn-bf16.losses"
steplosses "$refdir/gpt-bf16.jsonl" >"$out/ref/gpt-bf16.losses"
rm -rf "$refdir"
for f in mlp-w1:100 mlp-w2:64 cnn:30 gpt:30 cnn-bf16:50 gpt-bf16:50 gpt2-small:30 gpt2-small-bf16:30; do
  n=$(wc -l <"$out/ref/${f%%:*}.losses")
  [ "$n" -ge "${f#*:}" ] || { echo "gpu-kit: ref/${f%%:*}.losses has $n steps, want at least ${f#*:}" >&2; exit 1; }
done
cp scripts/bench_torch_gpu.py "$out/bench_torch_gpu.py"
cp scripts/bench_torch_gpu_gpt2.py "$out/bench_torch_gpu_gpt2.py"
cp /usr/share/common-licenses/GPL-3 "$out/data/GPL-3"
cp scripts/gpu-kit-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
git rev-parse --short HEAD >"$out/VERSION" 2>/dev/null || echo unknown >"$out/VERSION"
if [ -n "${GPU_KIT_UNPACKED:-}" ]; then
  rm -rf "$GPU_KIT_UNPACKED" && mkdir -p "$GPU_KIT_UNPACKED" && cp -r "$build"/bin "$build"/tests "$GPU_KIT_UNPACKED"/
fi
size=$(du -sk "$out" | cut -f1)
echo "gpu-kit: $(ls "$build/tests" | wc -l) GPU test binaries ($(cat "$out"/tests/*.tests | wc -l) device tests), $(ls "$build/bin" | wc -l) programs ($(du -sm "$build" | cut -f1) MiB unpacked), $((size / 1024)) MiB in $out"
if [ "$size" -gt $((60 * 1024)) ]; then
  echo "gpu-kit: $out is over 60 MiB" >&2
  bad=1
fi
exit $bad
