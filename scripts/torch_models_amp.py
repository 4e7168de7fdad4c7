#!/usr/bin/python3
"""The anchors' torch_models.py (cnn or gpt, DDP+Gloo via mp.spawn) with its
forward pass under torch.autocast("cpu", dtype=torch.bfloat16): torch's own
mixed precision, the yardstick for goddp's -amp bf16 in the same run.

Usage: torch_models_amp.py cnn|gpt WORLD EPOCHS [MAX_STEPS]
It runs the anchor's worker unchanged, with its DDP wrapper replaced by one
whose forward autocasts (the loss and the optimizer stay float32, as with
torch.autocast around the forward only).
"""
import os
import sys

import torch
import torch.multiprocessing as mp

ANCHORS = os.environ.get("ANCHORS", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "anchors"))


def load_anchor():
    sys.path.insert(0, os.path.abspath(ANCHORS))
    import torch_models
    return torch_models


def worker(rank, world, workload, epochs, max_steps, q):
    tm = load_anchor()
    base = tm.DDP

    class AutocastDDP(base):
        def forward(self, *args, **kwargs):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = super().forward(*args, **kwargs)
            return out.float()

    tm.DDP = AutocastDDP
    tm.worker(rank, world, workload, epochs, max_steps, q)


if __name__ == "__main__":
    workload, world, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    max_steps = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    os.environ["MASTER_PORT"] = str(29600 + os.getpid() % 300)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    mp.spawn(worker, args=(world, workload, epochs, max_steps, q), nprocs=world, join=True)
    res = sorted(q.get() for _ in range(world))
    print(f"torch-ddp-autocast-bf16 workload={workload} world={world} samples_per_s={sum(r[1] for r in res):.1f} "
          f"final_loss={res[0][2]:.4f} test_acc={res[0][3]:.4f}")
