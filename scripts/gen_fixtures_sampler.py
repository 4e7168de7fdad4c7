#!/usr/bin/python3
"""Regenerate testdata/data/distributed_sampler.json from PyTorch.

Runs torch.utils.data.distributed.DistributedSampler (shuffle=False) for a
grid of (N, num_replicas, drop_last) and records each rank's index list and
len(sampler). data/distributed_test.go checks goddp's DistributedSampler
against it. Uses Debian's python3-torch:

    /usr/bin/python3 scripts/gen_fixtures_sampler.py
"""
import json
import os
import sys

import torch
from torch.utils.data.distributed import DistributedSampler


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


CASES = [
    (0, 2), (1, 1), (1, 3), (3, 4), (3, 8), (5, 2), (10, 3), (10, 4),
    (11, 4), (16, 4), (17, 5), (23, 7), (100, 8), (2048, 2), (2049, 3),
]


def main():
    out = {"torch_version": torch.__version__, "cases": []}
    for n, replicas in CASES:
        for drop_last in (False, True):
            ranks, lens = [], []
            for rank in range(replicas):
                s = DistributedSampler(Sized(n), num_replicas=replicas, rank=rank,
                                       shuffle=False, drop_last=drop_last)
                s.set_epoch(3)  # ignored without shuffle; shows that
                ranks.append([int(i) for i in s])
                lens.append(len(s))
            out["cases"].append({"n": n, "num_replicas": replicas, "drop_last": drop_last,
                                 "len": lens, "indices": ranks})
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "testdata", "data", "distributed_sampler.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", os.path.normpath(path), "with", len(out["cases"]), "cases", file=sys.stderr)


if __name__ == "__main__":
    main()
