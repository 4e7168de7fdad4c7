"""Torch side of the tensor GEMM comparison (run beside `go test -bench MatMul ./tensor/`).

Usage: /usr/bin/python3 scripts/bench_torch_gemm.py THREADS SHAPE...
SHAPE is m,k,n[,tA,tB] (tB=1: a[m,k] @ b[n,k].T as nn.Linear's forward does;
tA=1: a[k,m].T @ b as its weight gradient does). Each shape
runs torch.mm(a, b, out=c) into a preallocated c (as the Go benchmark does)
for about `SECS` seconds after warm-up and prints one line:
  torch m=.. k=.. n=.. tA=.. tB=.. threads=.. GFLOPS=..
Take the median of a few rounds; the machine is shared, so compare with Go
figures interleaved in the same run.
"""
import os
import sys
import time

import torch

SECS = float(os.environ.get("SECS", "1.0"))


def bench(m, k, n, ta, tb):
    g = torch.Generator().manual_seed(0)
    a = torch.rand(k, m, generator=g).t() if ta else torch.rand(m, k, generator=g)
    b = torch.rand(n, k, generator=g).t() if tb else torch.rand(k, n, generator=g)
    c = torch.empty(m, n)
    for _ in range(3):
        torch.mm(a, b, out=c)
    iters, t0 = 0, time.perf_counter()
    while True:
        torch.mm(a, b, out=c)
        iters += 1
        el = time.perf_counter() - t0
        if el >= SECS:
            break
    return 2.0 * m * n * k * iters / el / 1e9


def main():
    threads = int(sys.argv[1])
    torch.set_num_threads(threads)
    for spec in sys.argv[2:]:
        parts = [int(x) for x in spec.split(",")]
        m, k, n = parts[:3]
        ta = len(parts) > 3 and parts[3] == 1
        tb = len(parts) > 4 and parts[4] == 1
        g = bench(m, k, n, ta, tb)
        print(f"torch m={m} k={k} n={n} tA={int(ta)} tB={int(tb)} threads={threads} GFLOPS={g:.1f}", flush=True)


if __name__ == "__main__":
    main()
