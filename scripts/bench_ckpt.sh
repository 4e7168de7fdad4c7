#!/usr/bin/env bash
# Checkpoint save speed against the disk (issue 45's bar: a 500 MB
# checkpoint of weights + AdamW state saves in less than 1.5x the time dd
# takes to write as many bytes to the same disk, both fsynced), interleaved
# ROUNDS times (default 5); prints every round, then the medians.
#
# dd copies random bytes (made once from /dev/urandom into /dev/shm), not
# /dev/zero: a thin-provisioned or compressing virtual disk may store zeros
# specially, which would flatter dd. DIR (default: a directory under the
# repository, i.e. the disk checkpoints usually go to) and MB (default 500)
# choose what is written. Benchmarks only: nothing here runs in tests or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
mb=${MB:-500}
rounds=${ROUNDS:-5}
dir=${DIR:-$(mktemp -d -p .)}
bin=$(mktemp)
src=$(mktemp -p /dev/shm goddp-bench-ckpt.XXXXXX)
trap 'rm -rf "$dir/dd.bin" "$bin" "$src"; [ -z "${DIR:-}" ] && rm -rf "$dir"' EXIT
go test -c -o "$bin" ./checkpoint/
head -c "$((mb << 20))" /dev/urandom >"$src"
echo "### checkpoint save vs dd, $mb MiB into $dir ($(df -h "$dir" | awk 'NR == 2 {print $1}')), $rounds rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
res=$(mktemp)
for r in $(seq "$rounds"); do
  t0=$(date +%s.%N)
  dd if="$src" of="$dir/dd.bin" bs=4M conv=fsync status=none
  t1=$(date +%s.%N); rm -f "$dir/dd.bin"
  # -benchtime 1x: the benchmark's first run is the one timed save (into a
  # path that does not exist yet, as dd's); the median smooths the noise.
  ns=$(GODDP_CKPT_MB=$mb GODDP_CKPT_DIR=$dir "$bin" -test.run '^$' -test.bench '^BenchmarkSave$' -test.benchtime 1x | awk '/^BenchmarkSave/ {print $3}')
  awk -v a="$t0" -v b="$t1" -v ns="$ns" -v r="$r" -v mb="$mb" 'BEGIN {
    dd = b - a; s = ns / 1e9
    printf "round %d: dd %.2f s (%.0f MiB/s), goddp checkpoint.Save %.2f s (%.0f MiB/s), ratio %.2fx\n", r, dd, mb / dd, s, mb / s, s / dd }' | tee -a "$res"
done
# Medians of each column (dd seconds, Save seconds, ratio) over the rounds.
awk -v mb="$mb" '{ dd[NR] = $4; sv[NR] = $10; ra[NR] = substr($15, 1, length($15) - 1) }
  function med(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END { d = med(dd, NR); s = med(sv, NR); r = med(ra, NR)
    printf "median of %d: dd %.2f s (%.0f MiB/s), checkpoint.Save %.2f s (%.0f MiB/s), ratio %.2fx (bar: < 1.5x)\n", NR, d, mb / d, s, mb / s, r }' "$res"
rm -f "$res"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
