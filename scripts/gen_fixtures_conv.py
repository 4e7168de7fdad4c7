#!/usr/bin/python3
"""Writes the convolution, pooling and BatchNorm2d op fixtures in testdata/ops/ from PyTorch.

Run from the repository root with Debian's torch (apt-get install python3-torch):

    /usr/bin/python3 scripts/gen_fixtures_conv.py

The files have the format of scripts/gen_fixtures_ops.py (whose case() this
reuses), so autograd's runFixture reads them: conv2d.json, max_pool2d.json,
avg_pool2d.json, adaptive_avg_pool2d.json and batch_norm2d.json, plus
testdata/nn/convnet.json (examples/cnn's whole network, float32: state dict,
loss and gradients). Everything else is float64; all of it is seeded. Sizes are odd on purpose; strides, paddings (including
"same" with an even kernel, which torch pads asymmetrically), dilations and
groups (including depthwise) are covered.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from gen_fixtures_ops import OUT, Gen, case, tj  # noqa: E402  (sets the default dtype to float64)


def pair(v):
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def conv_cases(gen):
    # name, x shape, w shape, bias, stride, padding, dilation, groups, x needs grad
    specs = [
        ("basic", [2, 3, 7, 6], [4, 3, 3, 3], True, 1, 0, 1, 1, True),
        ("stride2_pad1_odd", [2, 2, 9, 5], [3, 2, 3, 3], True, 2, 1, 1, 1, True),
        ("rect_kernel_stride21_pad02", [1, 3, 6, 7], [2, 3, 3, 2], True, (2, 1), (0, 2), 1, 1, True),
        ("dilation2_pad2", [2, 2, 8, 7], [3, 2, 3, 3], True, 1, 2, 2, 1, True),
        ("dilation21_stride12", [1, 2, 9, 8], [2, 2, 2, 3], False, (1, 2), (1, 0), (2, 1), 1, True),
        ("groups2", [2, 4, 6, 5], [6, 2, 3, 3], True, 1, 1, 1, 2, True),
        ("depthwise", [2, 3, 7, 7], [3, 1, 3, 3], True, 1, 1, 1, 3, True),
        ("depthwise_mult2_stride2", [1, 2, 8, 9], [4, 1, 3, 3], False, 2, 1, 1, 2, True),
        ("same_even_kernel", [2, 2, 5, 6], [3, 2, 4, 2], True, 1, "same", 1, 1, True),
        ("same_dilation2", [1, 3, 7, 5], [2, 3, 3, 3], True, 1, "same", 2, 1, True),
        ("pointwise_nobias", [2, 5, 4, 3], [3, 5, 1, 1], False, 1, 0, 1, 1, True),
        ("pointwise_stride2", [1, 3, 5, 5], [2, 3, 1, 1], True, 2, 0, 1, 1, True),
        ("convnet_first", [2, 1, 12, 12], [4, 1, 5, 5], True, 1, 2, 1, 1, False),
        ("kernel_larger_than_stride_pad", [1, 1, 4, 4], [2, 1, 3, 3], True, 3, 2, 1, 1, True),
    ]
    cases = []
    for name, xs, ws, bias, stride, pad, dil, groups, xgrad in specs:
        x, w = gen.randn(*xs), gen.randn(*ws) * 0.5
        ins = [x, w] + ([gen.randn(ws[0])] if bias else [])
        mask = [xgrad, True] + ([True] if bias else [])
        args = {"stride": pair(stride), "dilation": pair(dil), "groups": groups, "bias": bias}
        if pad == "same":
            args["same"] = True
            args["padding"] = [0, 0]
        else:
            args["padding"] = pair(pad)

        def fn(*t, s=stride, p=pad, d=dil, g=groups):
            return F.conv2d(t[0], t[1], t[2] if len(t) > 2 else None, s, p, d, g)
        cases.append(case(name, fn, ins, args, grad_mask=mask, gen=gen))
    return cases


def max_pool_cases(gen):
    specs = [  # name, x shape, kernel, stride (None: kernel), padding
        ("k2", [2, 3, 6, 6], 2, None, 0),
        ("k2_odd", [1, 2, 7, 5], 2, None, 0),
        ("k3_s2_p1", [2, 2, 9, 7], 3, 2, 1),
        ("rect_k32_s21_p10", [1, 3, 7, 6], (3, 2), (2, 1), (1, 0)),
        ("k3_s1_p1", [1, 1, 5, 5], 3, 1, 1),
    ]
    cases = []
    for name, xs, k, s, p in specs:
        args = {"kernel": pair(k), "stride": pair(s if s is not None else k), "padding": pair(p)}
        cases.append(case(name, lambda x, k=k, s=s, p=p: F.max_pool2d(x, k, s, p), [gen.randn(*xs)], args, gen=gen))
    return cases


def avg_pool_cases(gen):
    specs = [  # name, x shape, kernel, stride, padding, count_include_pad
        ("k2", [2, 3, 6, 6], 2, None, 0, True),
        ("k2_odd", [1, 2, 7, 5], 2, None, 0, True),
        ("k3_s2_p1_incl", [2, 2, 9, 7], 3, 2, 1, True),
        ("k3_s2_p1_excl", [2, 2, 9, 7], 3, 2, 1, False),
        ("rect_k23_s12_p11_excl", [1, 3, 6, 7], (2, 3), (1, 2), (1, 1), False),
        ("rect_k23_s12_p11_incl", [1, 3, 6, 7], (2, 3), (1, 2), (1, 1), True),
    ]
    cases = []
    for name, xs, k, s, p, cip in specs:
        args = {"kernel": pair(k), "stride": pair(s if s is not None else k), "padding": pair(p), "count_include_pad": cip}
        cases.append(case(name, lambda x, k=k, s=s, p=p, c=cip: F.avg_pool2d(x, k, s, p, count_include_pad=c),
                          [gen.randn(*xs)], args, gen=gen))
    return cases


def adaptive_cases(gen):
    specs = [("7x7_to_3x3", [2, 3, 7, 7], (3, 3)), ("5x6_to_2x4", [1, 2, 5, 6], (2, 4)),
             ("global", [2, 4, 6, 5], (1, 1)), ("upsample_3x3_to_5x4", [1, 2, 3, 3], (5, 4)), ("same", [1, 1, 4, 4], (4, 4))]
    return [case(n, lambda x, o=o: F.adaptive_avg_pool2d(x, o), [gen.randn(*xs)], {"output": list(o)}, gen=gen)
            for n, xs, o in specs]


def batch_norm2d_cases(gen):
    cases = []
    for n, shape, training, affine, mom in [("train", [3, 4, 5, 3], True, True, 0.1), ("eval", [2, 3, 4, 5], False, True, 0.1),
                                            ("train_noaffine", [4, 2, 3, 3], True, False, 0.3), ("train_1x1", [5, 3, 1, 1], True, True, 0.1)]:
        C = shape[1]
        rm0, rv0 = 0.1 * gen.randn(C), gen.uniform(0.5, 1.5, C)
        rm, rv = rm0.clone(), rv0.clone()
        x = gen.randn(*shape) * 1.5 + 0.3
        ins = [x] + ([1 + 0.3 * gen.randn(C), 0.2 * gen.randn(C)] if affine else [])
        fn = (lambda x, w, b, rm=rm, rv=rv, t=training, m=mom: F.batch_norm(x, rm, rv, w, b, t, m, 1e-5)) if affine else \
             (lambda x, rm=rm, rv=rv, t=training, m=mom: F.batch_norm(x, rm, rv, None, None, t, m, 1e-5))
        c = case(n, fn, ins, {"training": training, "momentum": mom, "eps": 1e-5,
                               "running_mean": rm0.tolist(), "running_var": rv0.tolist()}, gen=gen)
        c["extra"] = {"running_mean": tj(rm), "running_var": tj(rv)}
        cases.append(c)
    return cases


def convnet_fixture():
    """The examples/cnn convnet on 3 images, as a compact whole-network check.

    Its 3.3M weights are too many to store, so both sides compute them from a
    formula (parameter k of the state dict, element i, fan-in f:
    sin(0.7*i + k) / sqrt(f), in float64 then rounded to float32), and so the
    input (pixel i: (i*7919 mod 1000)/1000). Stored: the state dict's keys
    and shapes in torch's order, the loss, and for each gradient its sum, its
    sum of absolute values and 257 elements at evenly spaced positions.
    Dropout is off (eval mode; the net has no BatchNorm)."""
    import math
    import torch.nn as nn
    model = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10)).float()
    model.eval()
    fan = {"0": 25, "3": 800, "7": 3136, "10": 1024}
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            i = torch.arange(p.numel(), dtype=torch.float64)
            p.copy_((torch.sin(0.7 * i + k) / math.sqrt(fan[name.split(".")[0]])).reshape(p.shape).float())
    x = ((torch.arange(3 * 28 * 28, dtype=torch.int64) * 7919 % 1000).double() / 1000).float().reshape(3, 1, 28, 28)
    y = torch.tensor([3, 0, 9])
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    grads = []
    for name, p in model.named_parameters():
        g = p.grad.reshape(-1).double()
        pos = [int(j * (g.numel() - 1) / 256) for j in range(257)]
        grads.append({"key": name, "sum": g.sum().item(), "abs_sum": g.abs().sum().item(),
                      "positions": pos, "values": [g[j].item() for j in pos]})
    return {"torch": torch.__version__, "labels": y.tolist(), "loss": loss.item(),
            "state_dict": [{"key": k, "shape": list(v.shape)} for k, v in model.state_dict().items()],
            "grads": grads}


def main():
    nn_dir = os.path.join(OUT, "..", "nn")
    os.makedirs(nn_dir, exist_ok=True)
    with open(os.path.join(nn_dir, "convnet.json"), "w") as f:
        json.dump(convnet_fixture(), f, indent=None, separators=(",", ":"))
        f.write("\n")
    torch.set_default_dtype(torch.float64)
    gen = Gen(2024)
    ops = {"conv2d": conv_cases(gen), "max_pool2d": max_pool_cases(gen), "avg_pool2d": avg_pool_cases(gen),
           "adaptive_avg_pool2d": adaptive_cases(gen), "batch_norm2d": batch_norm2d_cases(gen)}
    os.makedirs(OUT, exist_ok=True)
    for name, cases in sorted(ops.items()):
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump({"op": name, "torch": torch.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
            f.write("\n")
    print("wrote %d fixture files to %s" % (len(ops), os.path.normpath(OUT)), file=sys.stderr)


if __name__ == "__main__":
    main()
