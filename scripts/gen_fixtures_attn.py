#!/usr/bin/python3
"""Writes the fixtures of the transformer ops and nn.MultiheadAttention from PyTorch.

Run from the repository root with Debian's torch (apt-get install python3-torch):

    /usr/bin/python3 scripts/gen_fixtures_attn.py

Writes testdata/ops/<op>.json for permute, view, narrow, split, chunk,
masked_fill, where, masked_softmax, sdpa, self_attention and
cross_entropy_kd in the format of scripts/gen_fixtures_ops.py (float64,
seeded: forward output, a fixed upstream gradient and every input's
gradient), and testdata/nn/multihead_attention.json (float32 torch
nn.MultiheadAttention: state_dict, inputs, output and gradients). Masks are
inputs that take no gradient, stored as 0/1 floats for bool masks; JSON holds
no infinities, so -inf fills appear only inside ops whose outputs stay finite.
torch 1.13 has no F.scaled_dot_product_attention: the reference is the
formula softmax(q kᵀ·scale + mask) v written out.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures_ops import Gen, case, tj  # noqa: E402  (sets float64 as torch's default dtype)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata")


def ref_attention(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q kᵀ·scale + mask) v; mask is additive, causal masks j > i."""
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s + mask
    if causal:
        L, S = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.triu(torch.ones(L, S, dtype=torch.bool), diagonal=1), float("-inf"))
    return s.softmax(-1) @ v


def additive(boolmask):
    return torch.zeros(boolmask.shape).masked_fill(boolmask.bool(), float("-inf"))


def ref_self_attention(qkv, heads, mask=None, causal=False, scale=None):
    B, T, E3 = qkv.shape
    E = E3 // 3
    q, k, v = qkv.split(E, dim=2)
    q, k, v = [t.reshape(B, T, heads, E // heads).transpose(1, 2) for t in (q, k, v)]
    y = ref_attention(q, k, v, mask, causal, scale)
    return y.transpose(1, 2).reshape(B, T, E)


def build_ops():
    ops = {}
    gen = Gen(16)
    ops["permute"] = [
        case("3d_201", lambda a: a.permute(2, 0, 1), [gen.randn(2, 3, 4)], {"dims": [2, 0, 1]}, gen=gen),
        case("4d_heads", lambda a: a.permute(0, 2, 1, 3), [gen.randn(2, 3, 4, 5)], {"dims": [0, 2, 1, 3]}, gen=gen),
        case("neg", lambda a: a.permute(1, -1, 0), [gen.randn(3, 2, 5)], {"dims": [1, -1, 0]}, gen=gen),
        # A permuted view feeding a matmul (non-contiguous input to a GEMM op).
        case("into_matmul", lambda a, b: a.permute(1, 0, 2) @ b, [gen.randn(3, 2, 4), gen.randn(4, 5)],
             {"dims": [1, 0, 2], "matmul": True}, gen=gen),
    ]
    ops["view"] = [
        case("merge", lambda a: a.view(6, 4), [gen.randn(2, 3, 4)], {"shape": [6, 4]}, gen=gen),
        case("split_heads", lambda a: a.view(2, 3, 2, -1), [gen.randn(2, 3, 6)], {"shape": [2, 3, 2, -1]}, gen=gen),
    ]
    ops["narrow"] = [
        case("axis0", lambda a: a.narrow(0, 1, 2), [gen.randn(4, 3)], {"axis": 0, "start": 1, "length": 2}, gen=gen),
        case("last", lambda a: a.narrow(-1, 3, 4), [gen.randn(2, 3, 7)], {"axis": -1, "start": 3, "length": 4}, gen=gen),
        case("empty", lambda a: a.narrow(1, 2, 0), [gen.randn(2, 3)], {"axis": 1, "start": 2, "length": 0}, gen=gen),
    ]

    def weighted_cat(pieces, dim):
        return torch.cat([p * (i + 1) for i, p in enumerate(pieces)], dim)

    ops["split"] = [
        case("even", lambda a: weighted_cat(a.split(2, 1), 1), [gen.randn(3, 6)], {"size": 2, "axis": 1}, gen=gen),
        case("ragged", lambda a: weighted_cat(a.split(3, -1), -1), [gen.randn(2, 2, 7)], {"size": 3, "axis": -1}, gen=gen),
        case("sizes", lambda a: weighted_cat(a.split([1, 4, 2], 0), 0), [gen.randn(7, 3)], {"sizes": [1, 4, 2], "axis": 0}, gen=gen),
        case("qkv", lambda a: weighted_cat(a.split(5, 2), 2), [gen.randn(2, 3, 15)], {"size": 5, "axis": 2}, gen=gen),
    ]
    ops["chunk"] = [
        case("5in3", lambda a: weighted_cat(a.chunk(3, 0), 0), [gen.randn(5, 2)], {"chunks": 3, "axis": 0}, gen=gen),
        case("6in4", lambda a: weighted_cat(a.chunk(4, 1), 1), [gen.randn(2, 6)], {"chunks": 4, "axis": 1}, gen=gen),
        case("3in3", lambda a: weighted_cat(a.chunk(3, -1), -1), [gen.randn(2, 2, 3)], {"chunks": 3, "axis": -1}, gen=gen),
    ]

    def bern(*shape, p=0.4):
        return (torch.rand(*shape, generator=gen.g) < p).to(torch.float64)

    ops["masked_fill"] = [
        case("same", lambda a, m: a.masked_fill(m.bool(), 2.5), [gen.randn(3, 4), bern(3, 4)], {"value": 2.5},
             grad_mask=[True, False], gen=gen),
        case("row_mask", lambda a, m: a.masked_fill(m.bool(), -1e9), [gen.randn(3, 4), bern(4)], {"value": -1e9},
             grad_mask=[True, False], gen=gen),
        case("3d_mask2d", lambda a, m: a.masked_fill(m.bool(), 0.0), [gen.randn(2, 3, 4), bern(3, 4)], {"value": 0.0},
             grad_mask=[True, False], gen=gen),
    ]
    # The anchor's masking: masked_fill(triu(ones, 1), -inf) then softmax.
    ops["masked_softmax"] = [
        case("causal_%d" % T, lambda a, T=T: a.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1),
             [gen.randn(2, 2, T, T)], {"t": T, "diagonal": 1}, gen=gen) for T in (1, 5)
    ] + [
        case("tril_keep", lambda a: a.masked_fill(torch.tril(torch.ones(4, 6, dtype=torch.bool), 2) == 0, float("-inf")).softmax(-1),
             [gen.randn(3, 4, 6)], {"rows": 4, "cols": 6, "tril": 2}, gen=gen),
    ]
    ops["where"] = [
        case("same", lambda c, a, b: torch.where(c.bool(), a, b), [bern(3, 4), gen.randn(3, 4), gen.randn(3, 4)],
             grad_mask=[False, True, True], gen=gen),
        case("broadcast", lambda c, a, b: torch.where(c.bool(), a, b), [bern(2, 1, 4), gen.randn(3, 1), gen.randn(4)],
             grad_mask=[False, True, True], gen=gen),
    ]

    ops["sdpa"] = []
    for name, qs, ks, vs, mask, causal, scale in [
        ("plain", [2, 5, 4], [2, 7, 4], [2, 7, 3], None, False, None),
        ("heads", [2, 3, 5, 4], [2, 3, 7, 4], [2, 3, 7, 6], None, False, None),
        ("float_mask", [2, 3, 5, 4], [2, 3, 7, 4], [2, 3, 7, 6], ("float", [5, 7]), False, None),
        ("bool_mask", [2, 3, 5, 4], [2, 3, 7, 4], [2, 3, 7, 4], ("bool", [2, 1, 5, 7]), False, None),
        ("causal", [2, 2, 6, 3], [2, 2, 6, 3], [2, 2, 6, 5], None, True, None),
        ("causal_wide", [1, 4, 3], [1, 6, 3], [1, 6, 2], None, True, 0.7),
        ("causal_tall", [1, 6, 3], [1, 4, 3], [1, 4, 2], None, True, None),
        ("odd_scale", [3, 1, 3], [3, 9, 3], [3, 9, 1], ("float", [1, 9]), False, 2.0),
    ]:
        ins = [gen.randn(*qs), gen.randn(*ks), gen.randn(*vs)]
        args = {"causal": causal}
        if scale is not None:
            args["scale"] = scale
        gm = [True, True, True]
        if mask is None:
            fn = lambda q, k, v, c=causal, s=scale: ref_attention(q, k, v, None, c, s)
        else:
            kind, shape = mask
            if kind == "float":
                m = gen.randn(*shape)
                fn = lambda q, k, v, m, c=causal, s=scale: ref_attention(q, k, v, m, c, s)
            else:
                m = bern(*shape)
                m[..., 0] = 0  # every query keeps a key: no all-masked (NaN) rows
                fn = lambda q, k, v, m, c=causal, s=scale: ref_attention(q, k, v, additive(m), c, s)
            args["mask"] = kind
            ins.append(m)
            gm.append(False)
        ops["sdpa"].append(case(name, fn, ins, args, grad_mask=gm, gen=gen))

    ops["self_attention"] = []
    for name, B, T, E, H, mask, causal in [
        ("causal", 2, 5, 6, 2, None, True),
        ("plain_4heads", 3, 7, 8, 4, None, False),
        ("float_mask", 2, 4, 6, 3, ("float", [4, 4]), False),
        ("padding", 3, 6, 4, 2, ("bool", [3, 1, 1, 6]), False),
        ("causal_and_mask", 2, 5, 4, 1, ("float", [2, 1, 5, 5]), True),
        ("one_token", 2, 1, 6, 3, None, True),
    ]:
        ins = [gen.randn(B, T, 3 * E)]
        args = {"heads": H, "causal": causal}
        gm = [True]
        if mask is None:
            fn = lambda x, H=H, c=causal: ref_self_attention(x, H, None, c)
        else:
            kind, shape = mask
            if kind == "float":
                m = gen.randn(*shape)
                fn = lambda x, m, H=H, c=causal: ref_self_attention(x, H, m, c)
            else:
                m = bern(*shape)
                m[..., 0] = 0
                fn = lambda x, m, H=H, c=causal: ref_self_attention(x, H, additive(m), c)
            args["mask"] = kind
            ins.append(m)
            gm.append(False)
        ops["self_attention"].append(case(name, fn, ins, args, grad_mask=gm, gen=gen))

    ops["cross_entropy_kd"] = []
    for name, shape, kw in [
        ("bvt_mean", [2, 5, 3], {}),
        ("bvt_none", [2, 5, 3], {"reduction": "none"}),
        ("4d_sum", [2, 4, 3, 2], {"reduction": "sum"}),
        ("bvt_ignore_smooth", [3, 6, 4], {"ignore_index": 0, "label_smoothing": 0.1}),
    ]:
        tshape = [shape[0]] + shape[2:]
        tgt = torch.randint(0, shape[1], tshape, generator=gen.g)
        args = dict(kw, target=tgt.reshape(-1).tolist())
        ops["cross_entropy_kd"].append(case(name, lambda x, t=tgt, kw=kw: F.cross_entropy(x, t, **kw),
                                            [gen.randn(*shape) * 2], args, gen=gen))
    for name, shape in [("btv_reshape", [2, 3, 5]), ("btv_reshape_long", [3, 8, 4])]:
        tgt = torch.randint(0, shape[2], shape[:2], generator=gen.g)
        ops["cross_entropy_kd"].append(case(name, lambda x, t=tgt: F.cross_entropy(x.reshape(-1, x.shape[-1]), t.reshape(-1)),
                                            [gen.randn(*shape) * 2], {"target": tgt.reshape(-1).tolist(), "btv": True}, gen=gen))
    return ops


def T32(t):
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "data": [float(x) for x in t.reshape(-1).tolist()]}


def build_mha():
    """torch nn.MultiheadAttention cases, float32."""
    g = torch.Generator().manual_seed(7)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    cases = []
    specs = [
        # name, E, heads, batch_first, bias, self-attention, L, S, N, attn_mask, key_padding_mask, causal
        ("self_batch_first", 8, 2, True, True, True, 5, 5, 3, None, False, False),
        ("cross_seq_first_float_mask", 6, 3, False, True, False, 4, 7, 2, "float", False, False),
        ("causal_bool_mask", 8, 4, True, True, True, 6, 6, 2, "causal", False, True),
        ("mask_per_head_3d", 4, 2, True, False, False, 3, 5, 2, "bool3d", False, False),
        ("key_padding", 6, 2, True, True, True, 5, 5, 3, None, True, False),
        ("single_head_unbatched", 4, 1, True, True, True, 3, 3, 0, None, False, False),
    ]
    for name, E, H, bf, bias, selfattn, L, S, N, maskkind, kpm, causal in specs:
        torch.manual_seed(len(cases) + 100)
        m = nn.MultiheadAttention(E, H, bias=bias, batch_first=bf, dtype=torch.float32)
        with torch.no_grad():  # nonzero biases, so their gradients and use are checked
            if bias:
                m.in_proj_bias.copy_(0.1 * randn(3 * E))
                m.out_proj.bias.copy_(0.1 * randn(E))
        if N == 0:
            qshape, kshape = [L, E], [S, E]
        elif bf:
            qshape, kshape = [N, L, E], [N, S, E]
        else:
            qshape, kshape = [L, N, E], [S, N, E]
        q = randn(*qshape).requires_grad_(True)
        if selfattn:
            k = v = q
        else:
            k, v = randn(*kshape).requires_grad_(True), randn(*kshape).requires_grad_(True)
        kw = {"need_weights": False}
        mask = None
        if maskkind == "float":
            mask = randn(L, S)
        elif maskkind == "causal":
            mask = torch.triu(torch.ones(L, S, dtype=torch.bool), 1)
        elif maskkind == "bool3d":
            mask = torch.rand(N * H, L, S, generator=g) < 0.4
            mask[..., 0] = False
        if mask is not None:
            kw["attn_mask"] = mask
        pad = None
        if kpm:
            pad = torch.zeros(N, S, dtype=torch.bool)
            pad[0, -2:] = True
            pad[2, -1] = True
            kw["key_padding_mask"] = pad
        out, _ = m(q, k, v, **kw)
        gy = randn(*out.shape)
        out.backward(gy)
        c = {"name": name, "embed_dim": E, "num_heads": H, "batch_first": bf, "bias": bias, "self": selfattn,
             "causal": causal,
             "state_dict": [{"name": n, "value": T32(p)} for n, p in m.state_dict().items()],
             "grads": [{"name": n, "grad": T32(p.grad)} for n, p in m.named_parameters()],
             "query": T32(q), "out": T32(out), "grad_out": T32(gy), "grad_query": T32(q.grad)}
        if not selfattn:
            c.update({"key": T32(k), "value": T32(v), "grad_key": T32(k.grad), "grad_value": T32(v.grad)})
        if mask is not None:
            c["attn_mask"] = T32(mask.to(torch.float32))
            c["attn_mask_bool"] = mask.dtype == torch.bool
        if pad is not None:
            c["key_padding_mask"] = T32(pad.to(torch.float32))
        cases.append(c)
    return cases


def main():
    out = os.path.join(ROOT, "ops")
    os.makedirs(out, exist_ok=True)
    ops = build_ops()
    for name, cases in sorted(ops.items()):
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"op": name, "torch": torch.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
            f.write("\n")
    mha = build_mha()
    with open(os.path.join(ROOT, "nn", "multihead_attention.json"), "w") as f:
        json.dump({"torch": torch.__version__, "cases": mha}, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote %d op fixtures and %d MultiheadAttention cases under %s" % (len(ops), len(mha), os.path.normpath(ROOT)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
