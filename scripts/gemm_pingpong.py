"""GEMM goddp/tensor vs torch, alternated in short slices (issue #2's bar).

Usage: /usr/bin/python3 scripts/gemm_pingpong.py GEMMSERVE [ROUNDS]
Environment: THREADS (2), SIZES (256,1024), SLICE seconds (0.3), PAUSE
seconds between slices (0.02), MODES: gemmserve modes to alternate with
torch (matmul; e.g. matmul,cgo,cloop to split the library's cost from the
Go runtime's).

GEMMSERVE is a built cmd/gemmserve. The host this runs on is shared and
its speed moves in phases of seconds (the cross-core bandwidth between our
two vCPUs swings between about 1.7 and 9-13 GB/s; see
scripts/xcore_bandwidth.c), so separate runs of `go test -bench` and the
torch script land in different phases. Here one torch process (this one)
and one Go process (gemmserve, kept alive) take turns: per round and size,
a slice of about 0.1 s of torch.mm(a, b, out=c), then the same on the Go
side, the order swapped every round, with a short pause between slices so
the idle side's OpenBLAS threads are asleep. Both use THREADS threads
(default 2; OPENBLAS_NUM_THREADS is pinned, since torch.set_num_threads does
not reach OpenBLAS's own pthreads). It prints, per size, both medians in
GFLOPS, their ratio, and the median and quartiles of the per-round ratios
go/torch (above 1: Go faster).
"""
import os
import statistics
import subprocess
import sys
import time

THREADS = int(os.environ.get("THREADS", "2"))
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)  # before torch loads OpenBLAS
import torch  # noqa: E402

SIZES = [int(s) for s in os.environ.get("SIZES", "256,1024").split(",")]
SLICE = float(os.environ.get("SLICE", "0.3"))
MODES = os.environ.get("MODES", "matmul").split(",")
PAUSE = float(os.environ.get("PAUSE", "0.02"))


def main():
    server, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    torch.set_num_threads(THREADS)
    env = dict(os.environ, GODDP_NUM_THREADS=str(THREADS))
    go = subprocess.Popen([server], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def go_run(n, reps, mode="matmul"):
        go.stdin.write(f"{n} {reps} {mode}\n")
        go.stdin.flush()
        line = go.stdout.readline()
        if not line:
            sys.exit("gemmserve exited")
        return float(line)

    g = torch.Generator().manual_seed(0)
    for n in SIZES:
        a, b, c = torch.rand(n, n, generator=g), torch.rand(n, n, generator=g), torch.empty(n, n)
        flop = 2.0 * n ** 3
        # Calibrate a rep count for a SLICE-long slice (torch's speed is as
        # good a guess as any), and warm both sides up.
        for _ in range(3):
            torch.mm(a, b, out=c)
        t0, k = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.05 or k < 2:
            torch.mm(a, b, out=c)
            k += 1
        reps = max(1, int(SLICE * k / (time.perf_counter() - t0)))
        for mode in MODES:
            go_run(n, reps, mode)

        def torch_run():
            t0 = time.perf_counter()
            for _ in range(reps):
                torch.mm(a, b, out=c)
            return time.perf_counter() - t0

        sides = ["torch"] + MODES
        rates = {side: [] for side in sides}
        for r in range(rounds):
            order = sides[r % len(sides):] + sides[:r % len(sides)]
            if r // len(sides) % 2:
                order.reverse()
            for side in order:
                time.sleep(PAUSE)
                secs = torch_run() if side == "torch" else go_run(n, reps, side)
                rates[side].append(flop * reps / secs / 1e9)
        tm = statistics.median(rates["torch"])
        print(f"n={n} threads={THREADS} rounds={rounds} reps/slice={reps}: torch median {tm:.1f} GFLOPS", flush=True)
        for mode in MODES:
            ratios = [g / t for g, t in zip(rates[mode], rates["torch"])]
            q = statistics.quantiles(ratios, n=4)
            gm = statistics.median(rates[mode])
            print(f"  go {mode}: median {gm:.1f} GFLOPS, ratio of medians {gm / tm:.3f}; per-round go/torch "
                  f"median {statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}), "
                  f"go faster in {sum(x > 1 for x in ratios)}/{rounds}", flush=True)
    go.stdin.close()
    go.wait()


if __name__ == "__main__":
    main()
