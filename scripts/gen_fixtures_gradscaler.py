#!/usr/bin/python3
"""Fixtures for goddp/amp's GradScaler: the loss-scale sequence of torch's
GradScaler update rule, and unscaled gradients, computed with torch's float32
arithmetic.

torch 1.13 (Debian's python3-torch) implements the rule only as a CUDA kernel
(aten/src/ATen/native/cuda/AmpKernels.cu, amp_update_scale_cuda_kernel;
GradScaler.update calls it through torch._amp_update_scale_, which has no CPU
kernel in 1.13). This script follows that kernel statement by statement:

    if found_inf: scale = scale * backoff; tracker = 0
    else:
        successful = tracker + 1
        if successful == interval:
            new_scale = float(scale * growth)
            if isfinite(new_scale): scale = new_scale
            tracker = 0
        else: tracker = successful

with the scale held in a float32 tensor, as GradScaler holds it, and the
products formed in double and rounded to float32 as the kernel does.
Unscaling follows GradScaler._unscale_grads_: inv_scale =
scale.double().reciprocal().float(), then grad * inv_scale in float32.

Run: /usr/bin/python3 scripts/gen_fixtures_gradscaler.py > amp/testdata/gradscaler.json
"""
import json
import math

import torch


def update(scale, tracker, found_inf, growth, backoff, interval):
    if found_inf:
        scale = torch.tensor([scale.double().item() * backoff], dtype=torch.float32)
        return scale, 0
    successful = tracker + 1
    if successful == interval:
        new_scale = torch.tensor([scale.double().item() * growth], dtype=torch.float32)
        if math.isfinite(new_scale.item()):
            scale = new_scale
        return scale, 0
    return scale, successful


def sequence(name, steps, init, growth, backoff, interval, inf_steps):
    scale = torch.tensor([init], dtype=torch.float32)
    tracker = 0
    scales, trackers = [], []
    for step in range(steps):
        scale, tracker = update(scale, tracker, step in inf_steps, growth, backoff, interval)
        scales.append(scale.item())
        trackers.append(tracker)
    return {"name": name, "init_scale": init, "growth_factor": growth, "backoff_factor": backoff,
            "growth_interval": interval, "inf_steps": sorted(inf_steps), "scales": scales,
            "trackers": trackers}


def main():
    g = torch.Generator().manual_seed(0)
    # Overflow early, then a clean run longer than the growth interval.
    infs = set(int(s) for s in torch.randint(0, 900, (12,), generator=g).tolist())
    infs |= {0, 1, 2, 3, 4, 5, 6, 7}  # the first steps overflow at 2^16
    seqs = [
        sequence("torch defaults, 3000 steps", 3000, 65536.0, 2.0, 0.5, 2000, infs),
        sequence("interval 50, odd factors", 3000, 1024.0, 3.0, 0.25, 50,
                 set(range(100, 3000, 173)) | {7, 8}),
        # Growth every step runs the scale past float32's range: the guard
        # keeps the last finite scale.
        sequence("growth to overflow", 200, 65536.0, 2.0, 0.5, 1, set()),
    ]
    # Unscale: gradients scaled by a loss scale, some with an inf.
    scale = torch.tensor([65536.0 * 3], dtype=torch.float32)
    inv = scale.double().reciprocal().float()
    grads = [torch.randn(17, generator=g) * 1000, torch.randn(3, 4, generator=g) * 1e-3]
    unscaled = [(x * inv).tolist() for x in grads]
    out = {"torch": torch.__version__, "sequences": seqs,
           "unscale": {"scale": scale.item(), "inv_scale": inv.item(),
                       "grads": [x.flatten().tolist() for x in grads],
                       "shapes": [list(x.shape) for x in grads],
                       "unscaled": [torch.tensor(u).flatten().tolist() for u in unscaled]}}
    print(json.dumps(out))


main()
