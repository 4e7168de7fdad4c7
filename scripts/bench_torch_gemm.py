"""Torch side of the tensor GEMM comparison (run beside `go test -bench MatMul ./tensor/`).

Usage: /usr/bin/python3 scripts/bench_torch_gemm.py THREADS SHAPE...
SHAPE is m,k,n[,tB] (tB=1: a[m,k] @ b[n,k].T as nn.Linear does). Each shape
runs torch.mm(a, b, out=c) into a preallocated c (as the Go benchmark does)
for about `SECS` seconds after warm-up and prints one line:
  torch m=.. k=.. n=.. tB=.. threads=.. GFLOPS=..
Take the median of a few rounds; the machine is shared, so compare with Go
figures interleaved in the same run.
"""
import sys
import time

import torch

SECS = 1.0


def bench(m, k, n, tb):
    g = torch.Generator().manual_seed(0)
    a = torch.rand(m, k, generator=g)
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
        tb = len(parts) > 3 and parts[3] == 1
        print(f"torch m={m} k={k} n={n} tB={int(tb)} threads={threads} GFLOPS={bench(m, k, n, tb):.1f}", flush=True)


if __name__ == "__main__":
    main()
