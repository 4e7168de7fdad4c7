"""Fixture: torch DDP's bucket layout after its rebuild, for sequential Linear/ReLU models.

torch 1.13 uses a single bucket in the first iteration, then rebuilds the buckets from the
order in which gradients became ready (bias before weight within each layer, last layer first),
with a 1 MiB first bucket and bucket_cap_mb after. goddp's initial layout (reverse registration
order, same caps) must equal that rebuilt layout; ddp/torch_fixture_test.go checks it.

Run: /usr/bin/python3 testdata/ddp/torch_buckets.py > testdata/ddp/torch_buckets.json
"""
import json, os
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CASES = [
    ("mlp", [784, 512, 512, 10], 25),
    ("mlp_cap1", [784, 512, 512, 10], 1),
    ("wide", [1024] * 9, 25),
    ("deep_small_cap", [256] * 12 + [10], 0.5),
    ("linear", [20, 1], 25),
]

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29787")
dist.init_process_group("gloo", rank=0, world_size=1)
torch.manual_seed(0)
out = []
for name, sizes, cap in CASES:
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.ReLU())
    d = DDP(nn.Sequential(*layers), bucket_cap_mb=cap)
    x = torch.rand(4, sizes[0])
    for _ in range(3):
        d.zero_grad()
        d(x).sum().backward()
    ld = d._get_ddp_logging_data()
    out.append({
        "name": name,
        "sizes": sizes,
        "bucket_cap_mb": cap,
        "bucket_bytes": [int(s) for s in str(ld["rebuilt_bucket_sizes"]).split(",")],
        "param_indices": [[int(i) for i in b.split()] for b in str(ld["rebuilt_per_bucket_param_indices"]).split(",")],
    })
print(json.dumps(out, indent=1))
dist.destroy_process_group()
