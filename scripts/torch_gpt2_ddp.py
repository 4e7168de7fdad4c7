#!/usr/bin/python3
"""GPT-2 trained with torch DDP as nanoGPT trains it: the anchor for
examples/gpt2's equality test (issue 45).

Usage:
    /usr/bin/python3 scripts/torch_gpt2_ddp.py SHARD OUT.json [--steps 30] ...

SHARD   an llm.c token shard (int32[256] header: magic 20240520, version 1,
        token count; then uint16 tokens), e.g. examples/gpt2/testdata/gpl3.bin
OUT     the fixture: config, the initial weights' digest and rank 0's
        per-step losses, gradient norms and learning rates

The model is GPT-2 written in plain torch with Hugging Face's parameter names
and Conv1D layout (weight [in, out]); Debian's torch 1.13 has neither
transformers nor safetensors, so the safetensors file is written by hand.

The initial weights come from a counter-based generator (splitmix64) rather
than torch's, so that examples/gpt2's test can build the same weights bit for
bit in Go without committing 13 MB of them: the fixture holds their digest
(init_digest: SHA-256 over the Hugging Face state dict in name order, each
tensor as its name, a NUL, its shape as decimal numbers joined by "x", a NUL
and its little-endian float32 bytes). With --init-in the weights are read from
a safetensors file instead (the Go side writes it: GODDP_TORCH_CHECK=1). Weights and embeddings are uniform
with GPT-2's standard deviation (0.02; residual projections 0.02/sqrt(2L)),
biases 0, LayerNorms 1 and 0.

With --bench K the script is the torch side of scripts/bench_gpt2.sh
instead: it times steps 2..K+1 (the first is the warm-up) and prints
tokens/s over all ranks and each rank's peak resident memory; no fixture
is written (OUT may be "-").

Training is nanoGPT's recipe: windows of T+1 tokens at stride T dealt by
DistributedSampler (seed, set_epoch), micro-batches of -batch per rank,
gradient accumulation (no_sync on all but the last micro-batch, the loss
divided by the micro-batch count), clip_grad_norm_, AdamW with weight decay
on the >= 2-D parameters only, nanoGPT's warmup + cosine learning rate. The
logged loss of a step is the mean of rank 0's micro-batch losses.
"""
import argparse
import hashlib
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

MASK64 = (1 << 64) - 1


def splitmix64(counter):
    """splitmix64 of a uint64 array (numpy wraps uint64 arithmetic)."""
    z = (counter + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform_init(seed, offset, n, std):
    """n float32 values uniform on [-a, a) with standard deviation std.

    Element i is splitmix64(seed*2^32 + offset + i): the top 24 bits make
    u in [0, 1) exactly, and (2u - 1) * a is computed in float64 and
    rounded once to float32, so Go gets the same bits.
    """
    with np.errstate(over="ignore"):
        c = np.arange(n, dtype=np.uint64) + np.uint64((seed << 32) + offset)
        bits = splitmix64(c) >> np.uint64(40)
    u = bits.astype(np.float64) / float(1 << 24)
    a = std * math.sqrt(3.0)
    return ((2.0 * u - 1.0) * a).astype(np.float32)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = Conv1D(d, 3 * d)
        self.attn.c_proj = Conv1D(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = Conv1D(d, 4 * d)
        self.mlp.c_proj = Conv1D(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(d, dim=2)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.attn.c_proj(y)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class Conv1D(nn.Module):
    """Hugging Face's Conv1D: y = x @ weight + bias, weight [in, out]."""

    def __init__(self, nin, nout):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nin, nout))
        self.bias = nn.Parameter(torch.zeros(nout))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


class GPT2(nn.Module):
    def __init__(self, vocab, ctx, d, heads, layers):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocab, d)
        self.transformer.wpe = nn.Embedding(ctx, d)
        self.transformer.h = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.transformer.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as GPT-2's

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def init_weights(model, seed, layers):
    """The counter-based init (see the module doc), in state_dict order."""
    offset = 0
    sd = model.state_dict()
    with torch.no_grad():
        for name, p in sd.items():
            if name == "lm_head.weight":
                continue  # tied to transformer.wte.weight
            if name.endswith(".bias"):
                p.zero_()
            elif ".ln_" in name:
                p.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                p.copy_(torch.from_numpy(uniform_init(seed, offset, p.numel(), std)).view(p.shape))
            offset += p.numel()


def init_digest(model):
    h = hashlib.sha256()
    for name, t in sorted((k, v) for k, v in model.state_dict().items() if k != "lm_head.weight"):
        h.update(name.encode() + b"\0" + "x".join(str(n) for n in t.shape).encode() + b"\0")
        h.update(t.detach().contiguous().numpy().astype("<f4").tobytes())
    return h.hexdigest()


def load_safetensors(path, model):
    """Loads a Hugging Face GPT-2 safetensors file (F32) into model, strictly."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    header.pop("lm_head.weight", None)  # tied: HF may write it or not
    want = {k for k in model.state_dict() if k != "lm_head.weight"}
    if set(header) != want:
        sys.exit(f"{path}: tensors {sorted(set(header) ^ want)} differ from the model's")
    data = raw[8 + n:]
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if name == "lm_head.weight":
                continue
            e = header[name]
            if e["dtype"] != "F32" or e["shape"] != list(p.shape):
                sys.exit(f"{path}: {name}: {e['dtype']} {e['shape']}, want F32 {list(p.shape)}")
            b, end = e["data_offsets"]
            p.copy_(torch.from_numpy(np.frombuffer(data[b:end], dtype="<f4").copy()).view(p.shape))


def save_safetensors(path, model):
    """HF's layout: every tensor but the tied lm_head.weight, sorted by name."""
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        b = tensors[name].numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    raw = struct.pack("<Q", len(h)) + h + b"".join(blobs)
    with open(path, "wb") as f:
        f.write(raw)
    return hashlib.sha256(raw).hexdigest()


def read_shard(path):
    raw = open(path, "rb").read()
    magic, version, count = struct.unpack("<3i", raw[:12])
    if magic != 20240520 or version != 1 or len(raw) != 1024 + 2 * count:
        sys.exit(f"{path}: not an llm.c token shard (magic {magic}, version {version}, {count} tokens, {len(raw)} bytes)")
    return np.frombuffer(raw[1024:], dtype="<u2").astype(np.int64)


class Windows(torch.utils.data.Dataset):
    """Windows i of T+1 tokens at stride T: input [iT, iT+T), target shifted by one."""

    def __init__(self, tokens, t):
        self.tokens, self.t = torch.from_numpy(tokens), t

    def __len__(self):
        return (len(self.tokens) - 1) // self.t

    def __getitem__(self, i):
        w = self.tokens[i * self.t: i * self.t + self.t + 1]
        return w[:-1], w[1:]


def get_lr(it, a):
    """nanoGPT's schedule: linear warmup, cosine decay to min_lr, then min_lr."""
    if it < a.warmup_steps:
        return a.lr * (it + 1) / (a.warmup_steps + 1)
    if it > a.decay_steps:
        return a.min_lr
    ratio = (it - a.warmup_steps) / (a.decay_steps - a.warmup_steps)
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.lr - a.min_lr)


def worker(rank, a, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    model = GPT2(a.vocab, a.ctx, a.d, a.heads, a.layers)
    if a.init_in:
        load_safetensors(a.init_in, model)
    else:
        init_weights(model, a.init_seed, a.layers)
    ddp = DDP(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    ds = Windows(read_shard(a.shard), a.ctx)
    sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=a.world, rank=rank, shuffle=True, seed=a.seed)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, sampler=sampler, drop_last=True)
    losses, norms, lrs, step, epoch = [], [], [], 0, 0
    steps = a.bench + 1 if a.bench else a.steps
    t0 = None
    while step < steps:
        sampler.set_epoch(epoch)
        batches = list(loader)
        for g in range(0, len(batches) - a.accum + 1, a.accum):
            lr = get_lr(step, a)
            for group in opt.param_groups:
                group["lr"] = lr
            total = 0.0
            for m in range(a.accum):
                x, y = batches[g + m]
                ddp.require_backward_grad_sync = m == a.accum - 1
                loss = ddp(x, y)
                total += loss.item()
                (loss / a.accum).backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(total / a.accum)
            norms.append(float(norm))
            lrs.append(lr)
            step += 1
            if step == 1:
                dist.barrier()
                t0 = time.perf_counter()
            if step == steps:
                break
        epoch += 1
    if a.bench:
        dist.barrier()
        secs = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        q.put((rank, secs, rss, losses))
    elif rank == 0:
        q.put((losses, norms, lrs))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("shard")
    p.add_argument("out")
    p.add_argument("--init-out", default="", help="also write the initial weights as this safetensors file")
    p.add_argument("--init-in", default="", help="start from this safetensors file's weights instead of the counter-based init")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--min-lr", type=float, default=6e-5)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--decay-steps", type=int, default=30)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1, help="DistributedSampler's seed")
    p.add_argument("--init-seed", type=int, default=1)
    p.add_argument("--bench", type=int, default=0, help="time this many steps after a warm-up step instead of writing a fixture")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    a = p.parse_args()

    model = GPT2(a.vocab, a.ctx, a.d, a.heads, a.layers)
    if a.init_in:
        load_safetensors(a.init_in, model)
    else:
        init_weights(model, a.init_seed, a.layers)
    if a.init_out:
        save_safetensors(a.init_out, model)
    sha = init_digest(model)

    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, a, port, q)) for r in range(a.world)]
    for pr in procs:
        pr.start()
    if a.bench:
        res = sorted(q.get(timeout=7200) for _ in range(a.world))
        secs = max(r[1] for r in res)
        tokens = a.bench * a.world * a.accum * a.batch * a.ctx
        print(f"torch_tokens_per_s={tokens / secs:.1f} steps={a.bench} secs={secs:.2f} "
              f"peak_rss_kib=[ {' '.join(str(r[2]) for r in res)} ] loss={res[0][3][-1]:.4f} threads={torch.get_num_threads()}")
    else:
        losses, norms, lrs = q.get(timeout=1800)
    for pr in procs:
        pr.join(60)
        if pr.exitcode != 0:
            sys.exit(f"rank exited with {pr.exitcode}")
    if a.bench:
        return
    cfg = {k: v for k, v in vars(a).items() if k not in ("shard", "out", "init_out", "init_in")}
    with open(a.out, "w") as f:
        json.dump({"torch": torch.__version__, "config": cfg, "shard_sha256": hashlib.sha256(open(a.shard, "rb").read()).hexdigest(),
                   "init_digest": sha, "losses": losses, "grad_norms": norms, "lrs": lrs}, f, indent=1)
    print(f"{a.steps} steps: loss {losses[0]:.6f} -> {losses[-1]:.6f}; init {sha[:12]}")


if __name__ == "__main__":
    main()
