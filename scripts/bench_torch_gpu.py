"""The torch yardstick of the GPU kit: the anchors' recipes on one GPU.

The recipes are those of the anchors (shared/anchors/torch_ddp_train.py for
mlp, torch_models.py for cnn and gpt): the same layers, optimisers, batch
sizes and seeds, at world 1 on cuda:0, with the machine's own torch (2.x on
the GPU machines). They are restated here, not imported, because the
anchors' GPT builds its position indices on the CPU, and the anchors spawn
Gloo workers, which a one-GPU throughput figure does not need.

Data: the mlp's synthetic set is generated as the anchor does. cnn reads
Fashion-MNIST from FMNIST_DIR (default /usr/share/datasets/fashion-mnist)
when it is there, and otherwise trains on random images of the same shape:
the throughput is the same, the loss is not comparable, and the output
says data=synthetic. gpt reads GPL_TEXT (default
/usr/share/common-licenses/GPL-3; the kit carries a copy).

Run: python3 bench_torch_gpu.py [WORKLOAD ...]   (default: all)
  WORKLOAD is mlp, cnn or gpt (batch 64, 64, 32), with an optional -bN
  suffix for batch N (mlp-b1024) and an optional -bf16 suffix for
  torch.autocast with bfloat16 (gpt-b256-bf16). Default: mlp-b64,
  mlp-b1024, cnn, gpt, cnn-bf16, gpt-bf16. One line per workload:
  torch-gpu workload=W device=NAME batch=B samples_per_s=S final_loss=L data=D
  samples/s excludes the first WARMUP steps and is timed with CUDA
  synchronisation; final_loss is the mean loss of the timed steps.
  Env: STEPS (timed steps per workload, default 200), TF32=1 allows TF32,
  BENCH_DEVICE=cpu runs the same code on the CPU (CI's check of the script).
"""
import math
import os
import sys
import time
import gzip
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

WARMUP = 10
STEPS = int(os.environ.get("STEPS", "200"))
FMNIST = os.environ.get("FMNIST_DIR", "/usr/share/datasets/fashion-mnist")
TEXT = os.environ.get("GPL_TEXT", "/usr/share/common-licenses/GPL-3")


def idx(path):
    b = gzip.open(path).read()
    nd = b[3]
    dims = struct.unpack(">" + "I" * nd, b[4:4 + 4 * nd])
    return torch.frombuffer(bytearray(b[4 + 4 * nd:]), dtype=torch.uint8).reshape(dims)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = [t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.h)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, ctx=64, d=128, heads=4, layers=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(T, device=ids.device))
        return self.head(self.ln(self.blocks(x)))


def build(workload, dev):
    """Returns model, inputs, targets, batch, loss, optimiser, data label.
    A "-bN" suffix (mlp-b1024, gpt-b256) sets the batch."""
    torch.manual_seed(0)
    batch = None
    if "-b" in workload:
        workload, b = workload.split("-b")
        batch = int(b)
    built = build_recipe(workload, dev)
    if batch is not None:
        built = built[:3] + (batch,) + built[4:]
    return built


def build_recipe(workload, dev):
    if workload.startswith("mlp"):
        g = torch.Generator().manual_seed(0)
        x = torch.rand(8192, 784, generator=g)
        y = torch.randint(0, 10, (8192,), generator=g)
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        return model, x, y, 64, F.cross_entropy, lambda p: torch.optim.SGD(p, lr=1e-3), "synthetic(anchor)"
    if workload == "cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))
        img = os.path.join(FMNIST, "train-images-idx3-ubyte.gz")
        if os.path.exists(img):
            x = idx(img).float().div(255.0).reshape(-1, 1, 28, 28)
            y = idx(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz")).long()
            data = "fashion-mnist"
        else:
            g = torch.Generator().manual_seed(0)
            x = torch.rand(60000, 1, 28, 28, generator=g)
            y = torch.randint(0, 10, (60000,), generator=g)
            data = "synthetic"
        return model, x, y, 64, F.cross_entropy, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), data
    if workload == "gpt":
        raw = open(TEXT, "rb").read()
        vocab = sorted(set(raw))
        lut = {c: i for i, c in enumerate(vocab)}
        ids = torch.tensor([lut[c] for c in raw], dtype=torch.int64)
        starts = torch.arange(0, len(ids) - 65, 8)
        x = torch.stack([ids[s:s + 64] for s in starts])
        y = torch.stack([ids[s + 1:s + 65] for s in starts])
        lossf = lambda o, t: F.cross_entropy(o.reshape(-1, o.shape[-1]), t.reshape(-1))
        return GPT(len(vocab)), x, y, 32, lossf, \
            lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01), "gpl-3"
    raise SystemExit(f"bench_torch_gpu: unknown workload {workload!r} (want mlp, cnn or gpt, with -bN and -bf16 suffixes)")


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def device_name(dev):
    return torch.cuda.get_device_name(dev).replace(" ", "_") if dev.type == "cuda" else "cpu"


def run(workload, dev):
    # W-bf16 is W under torch.autocast(dtype=bfloat16): float32 weights,
    # bf16 matmuls and convolutions, as goddp's -amp bf16.
    amp = workload.endswith("-bf16")
    base = workload[:-len("-bf16")] if amp else workload
    model, x, y, bs, lossf, mkopt, data = build(base, dev)
    model = model.to(dev)
    opt = mkopt(model.parameters())
    # The whole set lives on the device, as a DataLoader with pinned memory
    # and prefetch would approach: the figure is the step, not the input path.
    x, y = x.to(dev), y.to(dev)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(x), generator=g).to(dev)
    n = len(x) // bs
    losses = []
    t0 = None
    for step in range(WARMUP + STEPS):
        if step == WARMUP:
            sync(dev)
            t0 = time.perf_counter()
        b = order[(step % n) * bs:(step % n + 1) * bs]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = lossf(model(x[b]), y[b])
        loss.backward()
        opt.step()
        if step >= WARMUP:
            losses.append(loss.detach())
    sync(dev)
    dt = time.perf_counter() - t0
    final = torch.stack(losses).mean().item()
    print(f"torch-gpu workload={workload} device={device_name(dev)} "
          f"batch={bs} samples_per_s={STEPS * bs / dt:.1f} final_loss={final:.4f} data={data} "
          f"torch={torch.__version__}", flush=True)


# The products BenchmarkGPUGemmShapes (cuda/gpu_bench_cuda_test.go) times:
# row-major m x n x k with A and B transposed as named, float32 or bf16.
GEMM_SHAPES = [
    ("NT", 16384, 384, 128, False), ("NT", 16384, 512, 128, False), ("NT", 16384, 128, 512, False),
    ("NT", 16384, 76, 128, False), ("TN", 76, 128, 16384, False), ("TN", 384, 128, 16384, False),
    ("NT", 512, 10, 1024, False), ("NT", 512, 1024, 3136, False), ("NN", 512, 3136, 1024, False),
    ("NT", 512, 10, 1024, True), ("NN", 32, 401408, 25, True), ("NN", 64, 20776, 800, True),
]


def gemm_shapes(dev, reps=100):
    for t, m, n, k, bf16 in GEMM_SHAPES:
        dt = torch.bfloat16 if bf16 else torch.float32
        a = torch.zeros((k, m) if t[0] == "T" else (m, k), device=dev, dtype=dt)
        b = torch.zeros((n, k) if t[1] == "T" else (k, n), device=dev, dtype=dt)
        opa = a.t() if t[0] == "T" else a
        opb = b.t() if t[1] == "T" else b
        torch.matmul(opa, opb)
        sync(dev)
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.matmul(opa, opb)
        sync(dev)
        dt_s = (time.perf_counter() - t0) / reps
        print(f"torch-gemm {t}_{m}x{n}x{k}{'_bf16' if bf16 else ''} us={dt_s * 1e6:.1f} GFLOPS={2 * m * n * k / dt_s / 1e9:.0f}")


def main():
    dev = torch.device(os.environ.get("BENCH_DEVICE", "cuda:0"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("bench_torch_gpu: torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    allow = os.environ.get("TF32") == "1"
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    if sys.argv[1:] == ["gemm-shapes"]:
        gemm_shapes(dev)
        return
    for w in sys.argv[1:] or ["mlp-b64", "mlp-b1024", "cnn", "gpt", "cnn-bf16", "gpt-bf16"]:
        run(w, dev)


if __name__ == "__main__":
    main()
