"""The GPU kit's torch 2.x yardstick for GPT-2 124M: the model and step as
nanoGPT writes them, on cuda:0, with the machine's own torch.

The model is GPT-2 as nanoGPT's model.py builds it (restated here, not
imported or copied): fused qkv projection, F.scaled_dot_product_attention
with is_causal=True, GELU MLP, pre-LayerNorm blocks with biases, the
vocabulary padded to 50304, the head tied to the token embedding, weights
N(0, 0.02) with the residual projections scaled by 1/sqrt(2 layers). The
step is train.py's: torch.autocast bfloat16, AdamW (beta2 0.95, weight
decay 0.1 on matrices only) with fused=True, gradient clipping at 1.0.
Tokens are random (uniform below 50257): a step's time does not depend on
which tokens it reads.

Run: python3 bench_torch_gpu_gpt2.py MODE   (MODE: eager or compile)
  Tries the batch sizes of BATCHES (default 32,16,8), largest first, with
  one step each, and keeps the first that does not run out of memory
  (BATCH=N skips the search). Then WARMUP steps (default 5; under
  torch.compile they include the compilation), then up to STEPS timed
  steps (default 100) within CAP seconds (default 60), synchronised. One
  line:
    torch-gpt2 mode=M device=NAME torch=V batch=B seq=T steps=N
      tokens_per_s=X mfu=Y peak_reserved_bytes=Z final_loss=L capped=0|1
      sdpa=1|0 fused_adamw=1|0
  mfu is nanoGPT's estimate (6N + 12·L·H·Q·T FLOPs per token, N the
  parameters without the position embeddings) over the device's dense
  bf16 peak: 989 TFLOPS for H100/H200, 312 for A100, else PEAK_TFLOPS
  (unknown: mfu=n/a). capped=1 says CAP ended the timing before STEPS.
  When torch cannot compile, MODE compile prints
    torch-gpt2 mode=compile unavailable: REASON
  and exits 0 (the kit reports it, it is not goddp's failure).
  Env: SEQ (1024), N_LAYER/N_HEAD/N_EMBD (12/12/768), BENCH_DEVICE=cpu
  runs the same code on the CPU at a tiny size (a check of the script on
  a machine without a GPU; torch 1.13 there lacks SDPA and fused AdamW,
  which the line reports as sdpa=0 fused_adamw=0).
"""
import inspect
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 50257
PADDED_VOCAB = 50304  # nanoGPT's multiple of 64
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.x (the CPU check only)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, h)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, layers, heads, d, seq):
        super().__init__()
        self.wte = nn.Embedding(PADDED_VOCAB, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, PADDED_VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def peak_flops(dev, name):
    if os.environ.get("PEAK_TFLOPS"):
        return float(os.environ["PEAK_TFLOPS"]) * 1e12
    if dev.type != "cuda":
        return 0.0
    if "H100" in name or "H200" in name:
        return 989e12
    if "A100" in name:
        return 312e12
    return 0.0


def optimizer(model, dev):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}]
    fused = dev.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
    kw = {"fused": True} if fused else {}
    return torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **kw), fused


def is_oom(e):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or "out of memory" in str(e)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "eager"
    if mode not in ("eager", "compile"):
        sys.exit(f"bench_torch_gpu_gpt2: mode {mode!r}: want eager or compile")
    cpu = os.environ.get("BENCH_DEVICE") == "cpu"
    if not cpu and not torch.cuda.is_available():
        sys.exit("bench_torch_gpu_gpt2: torch sees no CUDA device (BENCH_DEVICE=cpu runs on the CPU)")
    dev = torch.device("cpu" if cpu else "cuda:0")
    name = "cpu" if cpu else torch.cuda.get_device_name(0)
    seq = int(os.environ.get("SEQ", "64" if cpu else "1024"))
    layers = int(os.environ.get("N_LAYER", "2" if cpu else "12"))
    heads = int(os.environ.get("N_HEAD", "2" if cpu else "12"))
    d = int(os.environ.get("N_EMBD", "64" if cpu else "768"))
    batches = [int(os.environ["BATCH"])] if os.environ.get("BATCH") else \
        [int(b) for b in os.environ.get("BATCHES", "2" if cpu else "32,16,8").split(",")]
    warmup = int(os.environ.get("WARMUP", "5"))
    steps = int(os.environ.get("STEPS", "100"))
    cap = float(os.environ.get("CAP", "60"))
    torch.manual_seed(1)
    if not cpu:
        torch.backends.cuda.matmul.allow_tf32 = True  # as nanoGPT's train.py
        torch.backends.cudnn.allow_tf32 = True

    def autocast():
        return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for b in batches:
        try:
            model = GPT(layers, heads, d, seq).to(dev)
            opt, fused = optimizer(model, dev)
            step_model = model
            if mode == "compile":
                if not hasattr(torch, "compile"):
                    print(f"torch-gpt2 mode=compile unavailable: torch {torch.__version__} has no torch.compile")
                    return
                step_model = torch.compile(model)
            x = torch.randint(0, VOCAB, (b, seq), device=dev)
            y = torch.randint(0, VOCAB, (b, seq), device=dev)

            def step():
                with autocast():
                    loss = step_model(x, y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                return loss

            try:
                step()
                sync()
            except Exception as e:
                if is_oom(e):
                    raise
                if mode == "compile":
                    msg = " ".join(str(e).split())[:300]
                    print(f"torch-gpt2 mode=compile unavailable: {type(e).__name__}: {msg}")
                    return
                raise
        except Exception as e:
            if not is_oom(e) or b == batches[-1]:
                raise
            print(f"batch {b}: out of memory, trying a smaller one", file=sys.stderr)
            model = opt = step_model = x = y = None
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            continue
        break
    for _ in range(warmup):
        step()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    n, losses = 0, []
    t0 = time.perf_counter()
    while n < steps:
        losses.append(step())
        n += 1
        if n % 10 == 0:
            sync()
            if time.perf_counter() - t0 > cap:
                break
    sync()
    dt = time.perf_counter() - t0
    final = sum(float(l) for l in losses) / len(losses)
    tps = n * b * seq / dt
    nparams = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    flops_per_token = 6 * nparams + 12 * layers * heads * (d // heads) * seq
    peak = peak_flops(dev, name)
    mfu = f"{tps * flops_per_token / peak:.4f}" if peak else "n/a"
    reserved = torch.cuda.max_memory_reserved() if dev.type == "cuda" else 0
    print(f"torch-gpt2 mode={mode} device={name.replace(' ', '_')} torch={torch.__version__} batch={b} seq={seq} "
          f"steps={n} tokens_per_s={tps:.1f} mfu={mfu} peak_reserved_bytes={reserved} final_loss={final:.4f} "
          f"capped={int(n < steps)} sdpa={int(HAS_SDPA)} fused_adamw={int(fused)}", flush=True)


if __name__ == "__main__":
    main()
