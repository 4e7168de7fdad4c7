"""Writes the parameter profiles that `ddpbench sync` embeds (cmd/ddpbench/profiles/*.json).

A profile lists a real model's parameters in named_parameters order, in the format of
../shared/anchors/profiles/*.json ({"model": ..., "params": [[name, shape], ...]}), which
torch_grad_sync.py reads, plus two keys that the anchor ignores:

  flops_unit      what one "sample" is for the FLOPs below
  backward_flops  per parameter, the floating-point operations of the backward work that
                  precedes that parameter's gradient becoming ready, for one sample
                  (about 2x the forward FLOPs of the layer that owns it: dX and dW)

ddpbench sync -compute flops spins each parameter's share for flops * batch / rate seconds
just before the parameter's gradient becomes ready, so that overlap can be studied.

  resnet50  torchvision 0.14's resnet50() (Debian's python3-torchvision), 161 tensors,
            25,557,032 parameters; FLOPs from forward hooks on one 3x224x224 image
            (conv: 2*Cout*Cin/groups*kh*kw*Hout*Wout; BatchNorm: 2 per output element
            for each of weight and bias; fc: 2*in*out).
  gpt2      GPT-2 small as Hugging Face's GPT2Model names it (wte, wpe, h.0..11, ln_f),
            148 tensors, 124,439,808 parameters; its shapes follow from the configuration
            (vocab 50257, n_ctx 1024, d 768, 12 layers, MLP 4d). FLOPs per token at a
            1024-token context: 2*in*out per weight matrix, the attention core's
            2*2*n_ctx*d per layer on c_attn (its gradient waits for that core's backward),
            the tied LM head's 2*d*vocab on ln_f (it runs first in backward, before ln_f),
            LayerNorm and biases 2 per element.

Run: /usr/bin/python3 scripts/gen_profiles.py [OUTDIR]   (default cmd/ddpbench/profiles)
When ../shared/anchors/profiles exists (ANCHORS overrides), the script checks that its
"params" equal the anchor's, so the Go benchmark and torch_grad_sync.py sync the same model.
"""
import json
import math
import os
import sys

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))


def resnet50():
    model = torchvision.models.resnet50()
    flops = {}

    def hook(mod, inp, out):
        for name, p in mod.named_parameters(recurse=False):
            key = id(p)
            if isinstance(mod, torch.nn.Conv2d):
                k = mod.weight.shape[1] * mod.weight.shape[2] * mod.weight.shape[3]
                f = 2 * k * out.numel() if name == "weight" else out.numel()
            elif isinstance(mod, torch.nn.BatchNorm2d):
                f = 2 * out.numel()
            elif isinstance(mod, torch.nn.Linear):
                f = 2 * mod.in_features * mod.out_features if name == "weight" else mod.out_features
            else:
                raise SystemExit(f"resnet50: no FLOP rule for {type(mod).__name__}")
            flops[key] = 2 * f  # backward = dX + dW, each about the forward's cost

    hs = [m.register_forward_hook(hook) for m in model.modules() if list(m.parameters(recurse=False))]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    for h in hs:
        h.remove()
    params = [[n, list(p.shape)] for n, p in model.named_parameters()]
    bflops = [int(flops[id(p)]) for _, p in model.named_parameters()]
    return {"model": "resnet50 (torchvision 0.14, named_parameters order)", "params": params,
            "flops_unit": "one 3x224x224 image", "backward_flops": bflops}


def gpt2(vocab=50257, n_ctx=1024, d=768, layers=12):
    params, bflops = [], []

    def add(name, shape, fwd):
        params.append([name, shape])
        bflops.append(int(2 * fwd))

    add("wte.weight", [vocab, d], d)  # embedding lookup: its backward is a scatter-add
    add("wpe.weight", [n_ctx, d], d)
    for i in range(layers):
        h = f"h.{i}."
        add(h + "ln_1.weight", [d], 2 * d)
        add(h + "ln_1.bias", [d], 2 * d)
        add(h + "attn.c_attn.weight", [d, 3 * d], 2 * d * 3 * d + 2 * 2 * n_ctx * d)
        add(h + "attn.c_attn.bias", [3 * d], 3 * d)
        add(h + "attn.c_proj.weight", [d, d], 2 * d * d)
        add(h + "attn.c_proj.bias", [d], d)
        add(h + "ln_2.weight", [d], 2 * d)
        add(h + "ln_2.bias", [d], 2 * d)
        add(h + "mlp.c_fc.weight", [d, 4 * d], 2 * d * 4 * d)
        add(h + "mlp.c_fc.bias", [4 * d], 4 * d)
        add(h + "mlp.c_proj.weight", [4 * d, d], 2 * 4 * d * d)
        add(h + "mlp.c_proj.bias", [d], d)
    add("ln_f.weight", [d], 2 * d + 2 * d * vocab)  # the tied LM head's backward runs just before
    add("ln_f.bias", [d], 2 * d)
    return {"model": "gpt2 small (124M), HF GPT2Model order", "params": params,
            "flops_unit": "one token of a 1024-token sequence", "backward_flops": bflops}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "cmd", "ddpbench", "profiles")
    anchors = os.environ.get("ANCHORS", os.path.join(HERE, "..", "..", "shared", "anchors"))
    expect = {"resnet50": (161, 25557032), "gpt2": (148, 124439808)}
    os.makedirs(out, exist_ok=True)
    for name, build in (("resnet50", resnet50), ("gpt2", gpt2)):
        prof = build()
        n, total = len(prof["params"]), sum(math.prod(s) for _, s in prof["params"])
        if (n, total) != expect[name]:
            raise SystemExit(f"{name}: {n} tensors, {total} parameters; want {expect[name]}")
        ref = os.path.join(anchors, "profiles", name + ".json")
        if os.path.exists(ref):
            with open(ref) as f:
                if json.load(f)["params"] != prof["params"]:
                    raise SystemExit(f"{name}: params differ from the anchor's {ref}")
            print(f"{name}: params match {ref}")
        with open(os.path.join(out, name + ".json"), "w") as f:
            f.write(json.dumps(prof))
        print(f"{name}: {n} tensors, {total} parameters, {sum(prof['backward_flops']) / 1e9:.2f} GFLOP backward per "
              f"{prof['flops_unit']}")


if __name__ == "__main__":
    main()
