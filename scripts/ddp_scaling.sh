#!/usr/bin/env bash
# DDP scaling bar of issue #5: examples/mlp at world 2 against one rank on
# one thread, interleaved over ROUNDS rounds (default 12), each round
# bracketed by the cross-core bandwidth probe (scripts/xcore_bandwidth.c),
# because this host moves between fast and slow phases of seconds and a
# world-2 run depends on the phase far more than a one-rank run.
# Prints one line per round and the median ratio over all rounds, and over
# the rounds whose two probes both read fast (>= 6 GB/s) or both slow.
# Usage: scripts/ddp_scaling.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
rounds=${1:-12}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ddprun" ./cmd/ddprun
go build -o "$tmp/mlp" ./examples/mlp
gcc -O3 -ffast-math -march=native -o "$tmp/xcore" scripts/xcore_bandwidth.c -lpthread
probe() { "$tmp/xcore" | tr -s ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
sps() { grep '^samples_per_s=' | cut -d= -f2; }
for r in $(seq "$rounds"); do
  p1=$(probe)
  solo=$(GODDP_NUM_THREADS=1 "$tmp/ddprun" --standalone --nproc-per-node 1 "$tmp/mlp" -epochs 5 2>/dev/null | sps)
  w2=$("$tmp/ddprun" --standalone --nproc-per-node 2 "$tmp/mlp" -epochs 5 2>/dev/null | sps)
  p2=$(probe)
  echo "round $r probe_gbs=$p1,$p2 solo=$solo world2=$w2"
done | tee "$tmp/rounds"
python3 - "$tmp/rounds" <<'PY'
import re, statistics, sys
rows = []
for line in open(sys.argv[1]):
    m = re.search(r"probe_gbs=([\d.]+),([\d.]+) solo=([\d.]+) world2=([\d.]+)", line)
    if m:
        p1, p2, s, w = map(float, m.groups())
        rows.append((min(p1, p2), max(p1, p2), s, w))
def show(name, sel):
    if not sel:
        print(f"{name}: no rounds"); return
    solo = statistics.median(r[2] for r in sel); w2 = statistics.median(r[3] for r in sel)
    ratios = [r[3] / r[2] for r in sel]
    print(f"{name}: {len(sel)} rounds, solo median {solo:.0f}, world-2 median {w2:.0f} samples/s, "
          f"ratio of medians {w2 / solo:.2f}, per-round ratio median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
show("all rounds", rows)
show("fast phase (both probes >= 6 GB/s)", [r for r in rows if r[0] >= 6])
show("slow phase (both probes < 6 GB/s)", [r for r in rows if r[1] < 6])
PY
