#!/usr/bin/python3
"""Writes models/gpt2/testdata/tiny.{safetensors,json}: a tiny GPT-2 in plain torch.

Run from the repository root with Debian's torch (apt-get install python3-torch):

    /usr/bin/python3 scripts/gen_fixtures_gpt2.py

Debian has no transformers package, so the model is GPT-2 written out in
torch the way nanoGPT writes it, but with HF's GPT2LMHeadModel parameter
names and its Conv1D layout (weight [in, out], y = x @ W + b): learned
positions, pre-LayerNorm blocks (eps 1e-5), causal attention over the packed
c_attn projection, GELU's tanh approximation, the head tied to
transformer.wte.weight. The config is vocab 97, context 16, width 32,
2 layers, 2 heads, dropout 0. Weights are seeded and wider than GPT-2's
N(0, 0.02) init (so the logits and gradients are far from trivial).

tiny.safetensors holds the float32 weights as GPT2LMHeadModel.save_pretrained
writes them (no lm_head.weight, metadata {"format": "pt"}); the writer below
is the format's spec (8-byte little-endian header length, JSON header, raw
little-endian data), since the safetensors package is not in Debian either.
tiny_llmc.bin is the same weights as llm.c's train_gpt2.py writes a model
file (version 3, float32): the 256-int32 header (magic 20240326, version,
max_seq_len, vocab_size, num_layers, num_heads, channels, padded_vocab_size),
wte padded with zero rows to 128, then the 16 tensors stacked over the layers
in llm.c's order, the four matrices in torch's Linear layout [out, in].
tiny.json holds the token ids and targets [2, 16], and what the float64 run
of the same weights gives: the logits [2, 16, 97] (and their sum and sum of
squares), the mean cross-entropy and the full gradients of six parameters.
"""
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "gpt2", "testdata")
V, T, C, L, H = 97, 16, 32, 2, 2
B = 2


def params(gen):
    """HF names -> float32 tensors, in GPT2LMHeadModel's state_dict order."""
    def randn(*shape, std=1.0, mean=0.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean).float()

    p = {
        "transformer.wte.weight": randn(V, C, std=0.5),
        "transformer.wpe.weight": randn(T, C, std=0.3),
    }
    for i in range(L):
        h = f"transformer.h.{i}."
        p[h + "ln_1.weight"] = randn(C, std=0.1, mean=1.0)
        p[h + "ln_1.bias"] = randn(C, std=0.1)
        p[h + "attn.c_attn.weight"] = randn(C, 3 * C, std=0.25)
        p[h + "attn.c_attn.bias"] = randn(3 * C, std=0.1)
        p[h + "attn.c_proj.weight"] = randn(C, C, std=0.2)
        p[h + "attn.c_proj.bias"] = randn(C, std=0.1)
        p[h + "ln_2.weight"] = randn(C, std=0.1, mean=1.0)
        p[h + "ln_2.bias"] = randn(C, std=0.1)
        p[h + "mlp.c_fc.weight"] = randn(C, 4 * C, std=0.25)
        p[h + "mlp.c_fc.bias"] = randn(4 * C, std=0.1)
        p[h + "mlp.c_proj.weight"] = randn(4 * C, C, std=0.1)
        p[h + "mlp.c_proj.bias"] = randn(C, std=0.1)
    p["transformer.ln_f.weight"] = randn(C, std=0.1, mean=1.0)
    p["transformer.ln_f.bias"] = randn(C, std=0.1)
    return p


def conv1d(x, w, b):
    """HF's Conv1D: x @ W + b with W [in, out]."""
    return x @ w + b


def forward(p, idx):
    """GPT2LMHeadModel's forward, dropout 0: logits [B, T, V]."""
    b, t = idx.shape
    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:t]
    for i in range(L):
        h = f"transformer.h.{i}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        q, k, v = conv1d(a, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"]).split(C, dim=2)
        q, k, v = [u.view(b, t, H, C // H).transpose(1, 2) for u in (q, k, v)]
        s = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, C)
        x = x + conv1d(y, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"])
        a = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        a = F.gelu(conv1d(a, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + conv1d(a, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    return x @ p["transformer.wte.weight"].t()  # the tied head


def write_safetensors(path, tensors, metadata):
    header, offset = {"__metadata__": metadata}, 0
    for name, t in tensors.items():
        n = t.numel() * 4
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for t in tensors.values():
            f.write(t.contiguous().numpy().astype("<f4").tobytes())


def write_llmc(path, p, padded):
    header = [0] * 256
    header[:8] = [20240326, 3, T, V, L, H, C, padded]
    wte = torch.zeros(padded, C)
    wte[:V] = p["transformer.wte.weight"]
    order = [wte, p["transformer.wpe.weight"]]

    def stacked(name, linear=False):
        for i in range(L):
            t = p[f"transformer.h.{i}.{name}"]
            order.append(t.t() if linear else t)  # Conv1D [in, out] -> Linear [out, in]

    for name, linear in [("ln_1.weight", False), ("ln_1.bias", False), ("attn.c_attn.weight", True),
                         ("attn.c_attn.bias", False), ("attn.c_proj.weight", True), ("attn.c_proj.bias", False),
                         ("ln_2.weight", False), ("ln_2.bias", False), ("mlp.c_fc.weight", True),
                         ("mlp.c_fc.bias", False), ("mlp.c_proj.weight", True), ("mlp.c_proj.bias", False)]:
        stacked(name, linear)
    order += [p["transformer.ln_f.weight"], p["transformer.ln_f.bias"]]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for t in order:
            f.write(t.contiguous().numpy().astype("<f4").tobytes())


def main():
    gen = torch.Generator().manual_seed(45)
    p32 = params(gen)
    idx = torch.randint(0, V, (B, T), generator=gen)
    tgt = torch.randint(0, V, (B, T), generator=gen)
    tgt[1, 3] = -1  # nanoGPT's ignore_index: no loss, not counted in the mean

    p64 = {k: v.double().requires_grad_() for k, v in p32.items()}
    logits = forward(p64, idx)
    loss = F.cross_entropy(logits.view(-1, V), tgt.view(-1), ignore_index=-1)
    loss.backward()

    grads = ["transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.attn.c_attn.weight",
             "transformer.h.0.ln_1.weight", "transformer.h.1.mlp.c_proj.weight", "transformer.ln_f.bias"]
    os.makedirs(OUT, exist_ok=True)
    write_safetensors(os.path.join(OUT, "tiny.safetensors"), p32, {"format": "pt"})
    write_llmc(os.path.join(OUT, "tiny_llmc.bin"), p32, 128)
    fixture = {
        "config": {"vocab_size": V, "n_positions": T, "n_embd": C, "n_layer": L, "n_head": H},
        "torch": torch.__version__,
        "idx": idx.tolist(),
        "targets": tgt.tolist(),
        "logits": logits.detach().reshape(-1).tolist(),
        "logits_sum": logits.sum().item(),
        "logits_sumsq": (logits * logits).sum().item(),
        "loss": loss.item(),
        "grads": {k: p64[k].grad.reshape(-1).tolist() for k in grads},
    }
    with open(os.path.join(OUT, "tiny.json"), "w") as f:
        json.dump(fixture, f)
        f.write("\n")
    print("wrote", OUT, "loss", loss.item())


if __name__ == "__main__":
    main()
