#!/usr/bin/python3
"""torch's single-process training step on BenchmarkTrainStep's shapes.

    GODDP_NUM_THREADS=2 /usr/bin/python3 scripts/bench_torch_step.py [seconds]

mlp:    784-512-512-10 with ReLU, batch 64, SGD lr 1e-3, cross-entropy
linear: Linear(20, 1), batch 32, SGD lr 1e-3, MSE
A fixed batch, as in the Go benchmark: zero_grad, forward, loss, backward,
step. Threads: GODDP_NUM_THREADS, else OMP_NUM_THREADS, else 2. Prints one
line per workload in go-bench style: ns/op, samples/s and cpu-ns/op (process
CPU time per step, all threads; steadier than wall time on a shared machine).
"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def threads():
    for k in ("GODDP_NUM_THREADS", "OMP_NUM_THREADS"):
        v = os.environ.get(k)
        if v:
            return int(v)
    return 2


def bench(name, model, x, y, lossf, seconds):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        lossf(model(x), y).backward()
        opt.step()

    for _ in range(20):
        step()
    # Calibrate the count to ~seconds, then time it.
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.2:
        step(); n += 1
    iters = max(10, int(n * seconds / (time.perf_counter() - t0)))
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        step()
    el, cpu = time.perf_counter() - t0, time.process_time() - c0
    bs = x.shape[0]
    print(f"TorchTrainStep/{name}\t{iters}\t{el / iters * 1e9:.0f} ns/op\t{iters * bs / el:.0f} samples/s"
          f"\t{cpu / iters * 1e9:.0f} cpu-ns/op")


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    torch.set_num_threads(threads())
    torch.manual_seed(0)
    print(f"torch {torch.__version__} threads={torch.get_num_threads()}")
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    bench("mlp", mlp, torch.rand(64, 784), torch.randint(0, 10, (64,)), F.cross_entropy, seconds)
    bench("linear", nn.Linear(20, 1), torch.rand(32, 20), torch.rand(32, 1), F.mse_loss, seconds)


if __name__ == "__main__":
    main()
