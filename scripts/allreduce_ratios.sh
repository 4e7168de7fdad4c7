#!/usr/bin/env bash
# Interleaved all-reduce comparison at world 2, robust to a noisy host:
# ROUNDS rounds (default 5), each running goddp tcp, goddp shm, OpenMPI tcp,
# OpenMPI shm and (GLOO=1) torch Gloo back to back at the anchor sizes, then
# the median time per engine and size and the ratios goddp/other as speedups
# (other time / goddp time; above 1 means goddp is faster).
# Usage: ROUNDS=5 GLOO=1 scripts/allreduce_ratios.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
anchors=${ANCHORS:-../shared/anchors}
rounds=${ROUNDS:-5}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ddpbench" ./cmd/ddpbench
mpicc -O2 -o "$tmp/mpi_allreduce" "$anchors/mpi_allreduce.c"
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
out=$tmp/times # lines: engine bytes time_us
for r in $(seq "$rounds"); do
  for b in tcp shm; do
    "$tmp/ddpbench" allreduce -backend $b -nproc 2 -format csv |
      awk -F, -v e="goddp-$b" 'NR>1 {print e, $1, $4}' >>"$out"
  done
  "${mpi[@]}" --mca btl tcp,self "$tmp/mpi_allreduce" |
    sed -n 's/.*bytes=\([0-9]*\) time_us=\([0-9.]*\).*/mpi-tcp \1 \2/p' >>"$out"
  "${mpi[@]}" "$tmp/mpi_allreduce" |
    sed -n 's/.*bytes=\([0-9]*\) time_us=\([0-9.]*\).*/mpi-shm \1 \2/p' >>"$out"
  if [ "${GLOO:-0}" = 1 ]; then
    OMP_NUM_THREADS=1 /usr/bin/python3 "$anchors/torch_allreduce.py" 2 |
      sed -n 's/.*bytes=\([0-9]*\) time_us=\([0-9.]*\).*/gloo \1 \2/p' >>"$out"
  fi
  echo "round $r done" >&2
done
python3 - "$out" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    e, b, us = line.split()
    t[(e, int(b))].append(float(us))
sizes = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
med = {k: statistics.median(v) for k, v in t.items()}
engines = [e for e in ["goddp-tcp", "goddp-shm", "mpi-tcp", "mpi-shm", "gloo"] if any((e, s) in med for s in sizes)]
print("median time_us over rounds (n per cell in brackets)")
print("| bytes | " + " | ".join(engines) + " |")
print("|---" * (len(engines) + 1) + "|")
for s in sizes:
    cells = [f"{med[(e, s)]:.1f} [{len(t[(e, s)])}]" if (e, s) in med else "-" for e in engines]
    print(f"| {s} | " + " | ".join(cells) + " |")
print()
print("speedup = other time / goddp time")
pairs = [("goddp-tcp", "mpi-tcp"), ("goddp-shm", "mpi-shm"), ("goddp-tcp", "gloo"), ("goddp-shm", "gloo")]
pairs = [p for p in pairs if all((x, sizes[0]) in med for x in p)]
print("| bytes | " + " | ".join(f"{a} vs {b}" for a, b in pairs) + " |")
print("|---" * (len(pairs) + 1) + "|")
for s in sizes:
    cells = [f"{med[(b, s)] / med[(a, s)]:.2f}" if (a, s) in med and (b, s) in med else "-" for a, b in pairs]
    print(f"| {s} | " + " | ".join(cells) + " |")
PY
