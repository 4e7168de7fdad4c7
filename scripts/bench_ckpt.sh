#!/usr/bin/env bash
# Checkpoint save speed against the disk (issue 45's bar: a 500 MB
# checkpoint of weights + AdamW state saves in less than 1.5x the time dd
# takes to write as many bytes to the same disk, both fsynced), interleaved
# ROUNDS times. DIR (default: a directory under the repository, i.e. the
# disk checkpoints usually go to) and MB (default 500) choose what is
# written. Benchmarks only: nothing here runs in tests or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
mb=${MB:-500}
dir=${DIR:-$(mktemp -d -p .)}
trap 'rm -rf "$dir/dd.bin" "$bin"; [ -z "${DIR:-}" ] && rm -rf "$dir"' EXIT
bin=$(mktemp)
go test -c -o "$bin" ./checkpoint/
echo "### checkpoint save vs dd, $mb MB into $dir ($(df -h "$dir" | awk 'NR == 2 {print $1}'))"
for r in $(seq "${ROUNDS:-3}"); do
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$dir/dd.bin" bs=1M count="$mb" conv=fsync status=none
  t1=$(date +%s.%N); rm -f "$dir/dd.bin"
  ns=$(GODDP_CKPT_MB=$mb GODDP_CKPT_DIR=$dir "$bin" -test.run '^$' -test.bench '^BenchmarkSave$' -test.benchtime 2x | awk '/^BenchmarkSave/ {print $3}')
  awk -v a="$t0" -v b="$t1" -v ns="$ns" -v r="$r" -v mb="$mb" 'BEGIN {
    dd = b - a; s = ns / 1e9
    printf "round %d: dd %.2f s (%.0f MB/s), goddp checkpoint.Save %.2f s (%.0f MB/s), ratio %.2fx\n", r, dd, mb / dd, s, mb / s, s / dd }'
done
