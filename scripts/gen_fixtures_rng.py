#!/usr/bin/python3
"""Regenerate testdata/rng/*.json: what torch's CPU generator draws.

goddp's tensor.RNG reproduces torch.Generator().manual_seed(s) on the CPU
(mt19937, torch's uniform/normal/integer transforms, randperm, bernoulli) and
nn's initialisers reproduce torch's. This script records torch's draws for
tensor/rng_torch_test.go, nn/init_torch_test.go and data's sampler test.
Run it with Debian's python3-torch (1.13):

    /usr/bin/python3 scripts/gen_fixtures_rng.py

Float arrays are stored bit-exactly as base64 of their little-endian bytes
({"dtype": "float32"|"float64"|"int64", "shape": [...], "b64": "..."}), since
the tests demand equality, not closeness. Long index lists are stored as the
SHA-256 of their int64 little-endian bytes plus their first 16 entries.

Note: torch's float32 normal_ of 16 or more contiguous elements goes through
its AVX2 kernel (avx_mathfun polynomials) on x86 CPUs with AVX2; the script
records what this machine's torch does and says which kernel ran.
"""
import base64
import hashlib
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data.distributed import DistributedSampler

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata")


def enc(t):
    t = t.detach().contiguous()
    dt = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64"}[t.dtype]
    return {"dtype": dt, "shape": list(t.shape), "b64": base64.b64encode(t.numpy().tobytes()).decode()}


def digest(ints):
    t = torch.tensor(ints, dtype=torch.int64)
    return {"n": len(ints), "sha256": hashlib.sha256(t.numpy().tobytes()).hexdigest(), "head": ints[:16]}


def gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def write(sub, name, obj):
    d = os.path.join(ROOT, sub)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes", file=sys.stderr)


def state_digest(g):
    return hashlib.sha256(bytes(g.get_state().tolist())).hexdigest()


# A "program" is a list of steps run in order on one generator; each records
# its output. The Go test replays the same steps on one tensor.RNG.
def run_program(seed, steps):
    g = gen(seed)
    out = []
    for op in steps:
        kind = op["op"]
        if kind == "rand":
            t = torch.rand(*op["shape"], generator=g, dtype=getattr(torch, op["dtype"]))
        elif kind == "uniform":
            t = torch.empty(*op["shape"], dtype=getattr(torch, op["dtype"])).uniform_(op["lo"], op["hi"], generator=g)
        elif kind == "normal":
            t = torch.empty(*op["shape"], dtype=getattr(torch, op["dtype"])).normal_(op["mean"], op["std"], generator=g)
        elif kind == "randint":
            t = torch.randint(op["lo"], op["hi"], tuple(op["shape"]), generator=g, dtype=torch.int64)
        elif kind == "random_":
            t = torch.empty(*op["shape"], dtype=getattr(torch, op["dtype"])).random_(generator=g)
        elif kind == "randperm":
            t = torch.randperm(op["n"], generator=g)
        elif kind == "bernoulli":
            t = torch.empty(*op["shape"], dtype=getattr(torch, op["dtype"])).bernoulli_(op["p"], generator=g)
        else:
            raise ValueError(kind)
        out.append(enc(t))
    return {"seed": seed, "steps": steps, "out": out, "state_sha256": state_digest(g)}


def f32(shape):
    return {"dtype": "float32", "shape": shape}


def f64(shape):
    return {"dtype": "float64", "shape": shape}


def programs():
    progs = []
    sizes = [1, 2, 3, 15, 16, 17, 31, 32, 33, 100]
    # Uniform: float32 takes 24 bits of one 32-bit draw, float64 53 bits of a 64-bit draw.
    for seed in (0, 7, 2**32 + 5, 67280421310721):
        progs.append(run_program(seed, [
            dict(op="rand", **f32([37])), dict(op="rand", **f64([9])),
            dict(op="uniform", lo=-0.22360679774997896, hi=0.22360679774997896, **f32([300])),
            dict(op="uniform", lo=-3.0, hi=1.5, **f64([50])),
            dict(op="uniform", lo=2.0, hi=2.5, **f32([50])),
        ]))
    # Normal: every size on both paths, standard and shifted, chained on one
    # generator so that the cached second Box-Muller value is exercised.
    steps = []
    for n in sizes:
        steps.append(dict(op="normal", mean=0.0, std=1.0, **f32([n])))
        steps.append(dict(op="normal", mean=0.0, std=1.0, **f64([n])))
    for n in (5, 16, 40):
        steps.append(dict(op="normal", mean=2.0, std=0.5, **f32([n])))
        steps.append(dict(op="normal", mean=-1.25, std=3.0, **f64([n])))
    # The scalar path's x*std+mean: enough values to tell one rounding
    # from a fused multiply-add.
    for _ in range(8):
        steps.append(dict(op="normal", mean=0.7, std=1.3, **f64([15])))
    progs.append(run_program(7, steps))
    # Many float32 normals: the AVX2 kernel's polynomials over a wide sample.
    progs.append(run_program(0, [dict(op="normal", mean=0.0, std=1.0, **f32([4096]))]))
    progs.append(run_program(1, [dict(op="normal", mean=0.3, std=0.02, **f32([1024]))]))
    progs.append(run_program(2, [dict(op="normal", mean=0.0, std=1.0, **f64([1024]))]))
    # Integers.
    progs.append(run_program(7, [
        dict(op="randint", lo=0, hi=10, shape=[40]),
        dict(op="randint", lo=-5, hi=1000, shape=[40]),
        dict(op="randint", lo=0, hi=2**40, shape=[20]),
        dict(op="random_", **f32([10])),
        dict(op="random_", **f64([10])),
        {"op": "random_", "dtype": "int64", "shape": [10]},
    ]))
    # randperm and bernoulli.
    progs.append(run_program(3, [
        dict(op="randperm", n=0), dict(op="randperm", n=1), dict(op="randperm", n=2),
        dict(op="randperm", n=10), dict(op="randperm", n=1000),
        dict(op="bernoulli", p=0.3, **f32([64])), dict(op="bernoulli", p=0.5, **f64([20])),
    ]))
    return progs


def init_cases():
    cases = {}
    # The bar: torch.manual_seed(7); Linear(20,64); ReLU; Linear(64,4).
    torch.manual_seed(7)
    m = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
    cases["mlp_seed7"] = {k: enc(v) for k, v in m.state_dict().items()}
    # Every initialised layer kind in one construction order.
    torch.manual_seed(11)
    layers = nn.ModuleDict()
    layers["emb"] = nn.Embedding(10, 8)
    layers["ln"] = nn.LayerNorm(8)
    layers["lin"] = nn.Linear(8, 3)
    layers["emb_small"] = nn.Embedding(3, 2)  # 6 elements: torch's scalar normal path
    layers["lin_nobias"] = nn.Linear(5, 7, bias=False)
    cases["layers_seed11"] = {k: enc(v) for k, v in layers.state_dict().items()}
    # Conv2d's reset_parameters (kaiming_uniform a=sqrt(5), then the bias),
    # grouped and bias-free too, in one construction order.
    torch.manual_seed(3)
    convs = nn.ModuleDict()
    convs["c1"] = nn.Conv2d(1, 4, 5, padding=2)
    convs["c2"] = nn.Conv2d(4, 6, 3, groups=2, bias=False)
    convs["c3"] = nn.Conv2d(6, 6, (3, 1), groups=6)
    cases["conv_seed3"] = {k: enc(v) for k, v in convs.state_dict().items()}
    # The init functions over one generator, in this order.
    torch.manual_seed(5)
    seq = []
    t = torch.empty(6, 4); nn.init.kaiming_uniform_(t, a=math.sqrt(5)); seq.append(("kaiming_uniform_a_sqrt5", t))
    t = torch.empty(6, 4); nn.init.kaiming_uniform_(t, nonlinearity="relu"); seq.append(("kaiming_uniform_relu", t))
    t = torch.empty(8, 3, 3, 3); nn.init.kaiming_uniform_(t, a=math.sqrt(5)); seq.append(("kaiming_uniform_conv", t))
    t = torch.empty(6, 4); nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"); seq.append(("kaiming_normal_fan_out_relu", t))
    t = torch.empty(6, 4); nn.init.xavier_uniform_(t); seq.append(("xavier_uniform", t))
    t = torch.empty(6, 4); nn.init.xavier_normal_(t, gain=nn.init.calculate_gain("tanh")); seq.append(("xavier_normal_tanh", t))
    t = torch.empty(5); nn.init.uniform_(t, -0.1, 0.3); seq.append(("uniform", t))
    t = torch.empty(40); nn.init.normal_(t, 0.5, 0.02); seq.append(("normal", t))
    cases["init_seq_seed5"] = [[name, enc(v)] for name, v in seq]
    return cases


def dropout_cases():
    out = []
    for seed, p, n, dt in ((7, 0.2, 50, torch.float32), (8, 0.5, 33, torch.float64), (9, 0.15, 7, torch.float32),
                          (10, 0.45, 40, torch.float32)):
        torch.manual_seed(seed)
        x = torch.arange(1, n + 1, dtype=dt) / 8
        y = F.dropout(x, p=p, training=True)
        out.append({"seed": seed, "p": p, "x": enc(x), "y": enc(y)})
    # The layer after a Linear draws from the same (global) generator.
    torch.manual_seed(3)
    m = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.25))
    x = torch.ones(5, 4)
    y = m(x)
    out.append({"seed": 3, "p": 0.25, "linear_then_dropout": True,
                "weight": enc(m[0].weight), "bias": enc(m[0].bias), "x": enc(x), "y": enc(y.detach())})
    return out


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def sampler_cases():
    cases = []
    for n in (10, 1000, 60000):
        for seed in (0, 7):
            for epoch in range(3):
                for replicas in (2, 3):
                    ranks = []
                    for rank in range(replicas):
                        s = DistributedSampler(Sized(n), num_replicas=replicas, rank=rank, shuffle=True, seed=seed)
                        s.set_epoch(epoch)
                        idx = [int(i) for i in s]
                        ranks.append(idx if n <= 10 else digest(idx))
                    cases.append({"n": n, "seed": seed, "epoch": epoch, "num_replicas": replicas, "ranks": ranks})
    return cases


def hashed_draws():
    """Large draws stored as the SHA-256 of their bytes: rare rounding
    cases (one in 10^5) of the float32 AVX2 kernel's polynomials show up."""
    out = []
    for seed, dt, n, mean, std in ((11, "float32", 1 << 20, 0.0, 1.0), (12, "float32", 1 << 18, -0.5, 2.0),
                                   (13, "float64", 1 << 16, 0.0, 1.0)):
        g = gen(seed)
        t = torch.empty(n, dtype=getattr(torch, dt)).normal_(mean, std, generator=g)
        out.append({"seed": seed, "dtype": dt, "n": n, "mean": mean, "std": std,
                    "sha256": hashlib.sha256(t.numpy().tobytes()).hexdigest()})
    for seed, dt, n, lo, hi in ((14, "float32", 1 << 20, -0.03, 0.05), (15, "float64", 1 << 16, -2.0, 3.0)):
        g = gen(seed)
        t = torch.empty(n, dtype=getattr(torch, dt)).uniform_(lo, hi, generator=g)
        out.append({"seed": seed, "dtype": dt, "n": n, "lo": lo, "hi": hi, "uniform": True,
                    "sha256": hashlib.sha256(t.numpy().tobytes()).hexdigest()})
    return out


def main():
    seeded = {}
    for seed in (0, 7, 2**32 + 5, 67280421310721):
        seeded[str(seed)] = state_digest(gen(seed))
    write("rng", "torch_generator.json", {
        "torch_version": torch.__version__,
        "cpu_capability": torch.__config__.show().split("CPU capability usage: ")[1].split("\n")[0],
        "state_len": len(gen(0).get_state()),
        "seeded_state_sha256": seeded,
        "programs": programs(),
        "hashed": hashed_draws(),
    })
    write("rng", "torch_init.json", {"torch_version": torch.__version__, "cases": init_cases(), "dropout": dropout_cases()})
    write("data", "distributed_sampler_shuffle.json", {"torch_version": torch.__version__, "cases": sampler_cases()})


if __name__ == "__main__":
    main()
