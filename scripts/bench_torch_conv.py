#!/usr/bin/python3
"""torch's counterpart of autograd's BenchmarkConvNetConvLayers.

    OMP_NUM_THREADS=1 /usr/bin/python3 scripts/bench_torch_conv.py [seconds]

Forward and backward of the Fashion-MNIST convnet's two convolutions at batch
64: Conv2d(1,32,5,pad 2) on [64,1,28,28] (input takes no gradient) and
Conv2d(32,64,5,pad 2) on [64,32,14,14], each backward seeded with a fixed
upstream gradient. Prints one go-bench-style line: ns/op, samples/s, GFLOPS
(same FLOP count as the Go benchmark), and the process CPU time per step
and samples per CPU-second (steadier than wall time on a shared host).
"""
import os
import sys
import time

import torch
import torch.nn.functional as F


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    for k in ("GODDP_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(k):
            torch.set_num_threads(int(os.environ[k]))
            break
    torch.manual_seed(0)
    bs = 64
    x1 = torch.rand(bs, 1, 28, 28)
    w1, b1 = (torch.randn(32, 1, 5, 5) * 0.2).requires_grad_(), (torch.randn(32) * 0.2).requires_grad_()
    x2 = torch.randn(bs, 32, 14, 14).requires_grad_()
    w2, b2 = (torch.randn(64, 32, 5, 5) * 0.03).requires_grad_(), (torch.randn(64) * 0.03).requires_grad_()
    gy1, gy2 = torch.randn(bs, 32, 28, 28), torch.randn(bs, 64, 14, 14)

    def step():
        for p in (w1, b1, x2, w2, b2):
            p.grad = None
        F.conv2d(x1, w1, b1, padding=2).backward(gy1)
        F.conv2d(x2, w2, b2, padding=2).backward(gy2)

    for _ in range(5):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.3:
        step(); n += 1
    iters = max(5, int(n * seconds / (time.perf_counter() - t0)))
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        step()
    el, cpu = time.perf_counter() - t0, time.process_time() - c0
    flops = 2.0 * bs * (2 * 32 * 28 * 28 * 25 + 3 * 64 * 14 * 14 * 800)
    print(f"TorchConvNetConvLayers threads={torch.get_num_threads()}\t{iters}\t{el / iters * 1e9:.0f} ns/op"
          f"\t{iters * bs / el:.0f} samples/s\t{flops * iters / el / 1e9:.2f} GFLOPS"
          f"\t{cpu / iters * 1e9:.0f} cpu-ns/op\t{iters * bs / cpu:.0f} samples/cpu-s")


if __name__ == "__main__":
    main()
