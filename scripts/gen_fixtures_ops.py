#!/usr/bin/python3
"""Writes the autograd op fixtures in testdata/ops/ from PyTorch.

Run from the repository root with Debian's torch (apt-get install python3-torch):

    /usr/bin/python3 scripts/gen_fixtures_ops.py

Each file testdata/ops/<op>.json holds {"op", "torch", "cases": [...]}; a case
has the inputs, op arguments, the forward output, a fixed upstream gradient and
the gradient of every input (null where the input takes none), plus "extra"
tensors an op updates (BatchNorm's running stats). Everything is float64 and
seeded, so the output is byte-for-byte deterministic for a torch version.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "ops")


def tj(t):
    t = t.detach().to(torch.float64).contiguous()
    return {"shape": list(t.shape), "data": [float(x) for x in t.reshape(-1).tolist()]}


class Gen:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape):
        return torch.randn(*shape, generator=self.g)

    def uniform(self, lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(*shape, generator=self.g)

    def away(self, pts, gap, *shape):
        """randn values at least gap away from every point in pts (kinks)."""
        x = self.randn(*shape)
        for p in pts:
            near = (x - p).abs() < gap
            x = torch.where(near, x + torch.sign(x - p + 1e-12) * 2 * gap, x)
        return x


def case(name, fn, inputs, args=None, grad_mask=None, extra=None, gen=None):
    """Runs fn(*inputs) -> output tensor, backprops a seeded upstream gradient."""
    ins = []
    for i, x in enumerate(inputs):
        x = x.clone()
        if grad_mask is None or grad_mask[i]:
            x.requires_grad_(True)
        ins.append(x)
    out = fn(*ins)
    up = gen.randn(*out.shape) if out.dim() > 0 else torch.tensor(gen.randn(1).item())
    grads = torch.autograd.grad(out, [x for x in ins if x.requires_grad], up, allow_unused=True)
    gi = iter(grads)
    gl = []
    for x in ins:
        if x.requires_grad:
            g = next(gi)
            gl.append(tj(g) if g is not None else tj(torch.zeros_like(x)))
        else:
            gl.append(None)
    c = {"name": name, "inputs": [tj(x) for x in inputs], "args": args or {},
         "out": tj(out), "upstream": tj(up), "grads": gl}
    if extra:
        c["extra"] = {k: tj(v() if callable(v) else v) for k, v in extra.items()}
    return c


def binary(name, fn, gen, positive_a=False, nonzero_b=False):
    shapes = [([3, 4], [3, 4]), ([3, 4], [4]), ([2, 1, 4], [3, 1]), ([2, 3], [1]), ([4], [2, 3, 4])]
    cs = []
    for sa, sb in shapes:
        a = gen.uniform(0.5, 2.0, *sa) if positive_a else gen.randn(*sa)
        b = gen.randn(*sb)
        if nonzero_b:
            b = torch.sign(b + 1e-12) * (b.abs() + 0.5)
        cs.append(case("%s_%s" % ("x".join(map(str, sa)), "x".join(map(str, sb))), fn, [a, b], gen=gen))
    return cs


def build():
    ops = {}
    gen = Gen(1234)
    ops["add"] = binary("add", torch.add, gen)
    ops["sub"] = binary("sub", torch.sub, gen)
    ops["mul"] = binary("mul", torch.mul, gen)
    ops["div"] = binary("div", torch.div, gen, nonzero_b=True)
    ops["pow"] = binary("pow", torch.pow, gen, positive_a=True)

    def unary(fn, xs):
        return [case(n, fn, [x], gen=gen) for n, x in xs]

    ops["neg"] = unary(torch.neg, [("3x4", gen.randn(3, 4))])
    ops["exp"] = unary(torch.exp, [("3x4", gen.randn(3, 4)), ("2x3x2", gen.randn(2, 3, 2))])
    ops["log"] = unary(torch.log, [("3x4", gen.uniform(0.1, 3.0, 3, 4))])
    ops["sqrt"] = unary(torch.sqrt, [("3x4", gen.uniform(0.1, 3.0, 3, 4))])
    ops["relu"] = unary(F.relu, [("3x4", gen.away([0.0], 0.05, 3, 4))])
    ops["gelu"] = unary(F.gelu, [("3x4", gen.randn(3, 4) * 2)])
    ops["sigmoid"] = unary(torch.sigmoid, [("3x4", gen.randn(3, 4) * 2)])
    ops["tanh"] = unary(torch.tanh, [("3x4", gen.randn(3, 4))])
    ops["pow_scalar"] = [
        case("p2.5", lambda a: torch.pow(a, 2.5), [gen.uniform(0.2, 2.0, 3, 4)], {"p": 2.5}, gen=gen),
        case("p3", lambda a: torch.pow(a, 3.0), [gen.randn(3, 4)], {"p": 3.0}, gen=gen),
        case("p-1", lambda a: torch.pow(a, -1.0), [gen.uniform(0.5, 2.0, 2, 3)], {"p": -1.0}, gen=gen),
    ]
    ops["clamp"] = [
        case("m0.5_0.5", lambda a: torch.clamp(a, -0.5, 0.5), [gen.away([-0.5, 0.5], 0.05, 4, 5)], {"lo": -0.5, "hi": 0.5}, gen=gen),
    ]

    def red(fn, name_args):
        cs = []
        for n, shape, axes, keep in name_args:
            x = gen.randn(*shape)
            args = {"axes": axes, "keepdim": keep}
            if axes is None:
                cs.append(case(n, lambda a, k=keep: fn(a, list(range(a.dim())), k), [x], args, gen=gen))
            else:
                cs.append(case(n, lambda a, ax=axes, k=keep: fn(a, ax, k), [x], args, gen=gen))
        return cs

    red_cases = [("axis1", [3, 4], [1], False), ("axes02_keep", [2, 3, 4], [0, 2], True),
                 ("all", [2, 3], None, False), ("neg_axis", [2, 3, 4], [-1], False), ("axis0_keep", [3, 4], [0], True)]
    ops["sum"] = red(lambda a, ax, k: torch.sum(a, ax, keepdim=k), red_cases)
    ops["mean"] = red(lambda a, ax, k: torch.mean(a, ax, keepdim=k), red_cases)
    ops["sum_all"] = [case("3x4", torch.sum, [gen.randn(3, 4)], gen=gen)]
    ops["mean_all"] = [case("2x3x2", torch.mean, [gen.randn(2, 3, 2)], gen=gen)]
    ops["max"] = []
    for n, shape, axis, keep in [("axis1", [3, 5], 1, False), ("axis0_keep", [4, 3], 0, True), ("neg_axis", [2, 3, 4], -1, False),
                                 ("mid", [2, 3, 4], 1, True)]:
        ops["max"].append(case(n, lambda a, ax=axis, k=keep: torch.max(a, ax, keepdim=k)[0], [gen.randn(*shape)],
                               {"axis": axis, "keepdim": keep}, gen=gen))

    ops["matmul"] = []
    for sa, sb in [([3, 4], [4, 5]), ([2, 3, 4], [2, 4, 5]), ([2, 3, 4], [4, 5]), ([2, 1, 3, 4], [3, 4, 2]), ([3, 4], [2, 4, 5])]:
        ops["matmul"].append(case("%s@%s" % ("x".join(map(str, sa)), "x".join(map(str, sb))), torch.matmul,
                                  [gen.randn(*sa), gen.randn(*sb)], gen=gen))
    ops["linear"] = [
        case("bias", F.linear, [gen.randn(5, 4), gen.randn(3, 4), gen.randn(3)], gen=gen),
        case("nobias", lambda x, w: F.linear(x, w), [gen.randn(5, 4), gen.randn(3, 4)], gen=gen),
        case("3d", F.linear, [gen.randn(2, 5, 4), gen.randn(3, 4), gen.randn(3)], gen=gen),
        case("xconst", F.linear, [gen.randn(6, 3), gen.randn(2, 3), gen.randn(2)], grad_mask=[False, True, True], gen=gen),
    ]
    for op, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        ops[op] = [case("axis%d" % ax, lambda a, ax=ax: fn(a, ax), [gen.randn(*shape)], {"axis": ax}, gen=gen)
                   for shape, ax in (([3, 5], -1), ([3, 5], 0), ([2, 3, 4], 1))]

    ops["gather"] = []
    for n, shape, axis in [("axis1", [4, 5], 1), ("axis0", [4, 5], 0), ("3d_axis1", [2, 3, 4], 1)]:
        x = gen.randn(*shape)
        ishape = list(shape)
        ishape[axis] = 1
        idx = torch.randint(0, shape[axis], ishape, generator=gen.g)
        ops["gather"].append(case(n, lambda a, ax=axis, i=idx: torch.gather(a, ax, i).squeeze(ax), [x],
                                  {"axis": axis, "index": idx.reshape(-1).tolist()}, gen=gen))
    ops["index_select"] = []
    for n, shape, axis, idx in [("axis0", [5, 3], 0, [0, 2, 2, 4]), ("axis1", [3, 4], 1, [3, 0, 3]), ("3d", [2, 4, 3], 1, [1, 1, 0])]:
        ops["index_select"].append(case(n, lambda a, ax=axis, i=idx: torch.index_select(a, ax, torch.tensor(i)),
                                        [gen.randn(*shape)], {"axis": axis, "index": idx}, gen=gen))
    ops["concat"] = [
        case("axis0", lambda *xs: torch.cat(xs, 0), [gen.randn(2, 3), gen.randn(1, 3), gen.randn(3, 3)], {"axis": 0}, gen=gen),
        case("axis1", lambda *xs: torch.cat(xs, 1), [gen.randn(2, 2, 2), gen.randn(2, 3, 2)], {"axis": 1}, gen=gen),
        case("neg_axis", lambda *xs: torch.cat(xs, -1), [gen.randn(2, 3), gen.randn(2, 1)], {"axis": -1}, gen=gen),
    ]
    ops["stack"] = [
        case("axis0", lambda *xs: torch.stack(xs, 0), [gen.randn(2, 3), gen.randn(2, 3)], {"axis": 0}, gen=gen),
        case("axis1", lambda *xs: torch.stack(xs, 1), [gen.randn(2, 3), gen.randn(2, 3), gen.randn(2, 3)], {"axis": 1}, gen=gen),
        case("last", lambda *xs: torch.stack(xs, 2), [gen.randn(2, 3), gen.randn(2, 3)], {"axis": 2}, gen=gen),
    ]
    ops["reshape"] = [
        case("flat", lambda a: a.reshape(6, 4), [gen.randn(2, 3, 4)], {"shape": [6, 4]}, gen=gen),
        case("infer", lambda a: a.reshape(-1, 2), [gen.randn(3, 4)], {"shape": [-1, 2]}, gen=gen),
    ]
    ops["transpose"] = [
        case("2d", lambda a: a.transpose(0, 1), [gen.randn(3, 4)], {"d0": 0, "d1": 1}, gen=gen),
        case("3d_02", lambda a: a.transpose(0, 2), [gen.randn(2, 3, 4)], {"d0": 0, "d1": 2}, gen=gen),
        case("neg", lambda a: a.transpose(-1, -2), [gen.randn(2, 3, 4)], {"d0": -1, "d1": -2}, gen=gen),
    ]
    ops["layer_norm"] = [
        case("affine", lambda x, w, b: F.layer_norm(x, [6], w, b, 1e-5), [gen.randn(4, 6), 1 + 0.3 * gen.randn(6), gen.randn(6)],
             {"eps": 1e-5}, gen=gen),
        case("noaffine", lambda x: F.layer_norm(x, [5], None, None, 1e-5), [gen.randn(3, 5)], {"eps": 1e-5}, gen=gen),
        case("3d", lambda x, w, b: F.layer_norm(x, [4], w, b, 1e-3), [gen.randn(2, 3, 4), 1 + 0.3 * gen.randn(4), gen.randn(4)],
             {"eps": 1e-3}, gen=gen),
    ]

    ops["batch_norm"] = []
    for n, shape, training, affine, mom in [("train2d", [6, 3], True, True, 0.1), ("train3d", [4, 3, 5], True, True, 0.2),
                                            ("eval", [5, 3], False, True, 0.1), ("noaffine", [6, 2], True, False, 0.1)]:
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
        ops["batch_norm"].append(c)

    red_names = ("mean", "sum", "none")
    ops["mse_loss"] = [case(r, lambda p, t, r=r: F.mse_loss(p, t, reduction=r), [gen.randn(4, 3), gen.randn(4, 3)],
                            {"reduction": r}, gen=gen) for r in red_names]
    ops["cross_entropy"] = []
    for r in red_names:
        tgt = torch.randint(0, 5, (6,), generator=gen.g)
        ops["cross_entropy"].append(case(r, lambda x, r=r, t=tgt: F.cross_entropy(x, t, reduction=r), [gen.randn(6, 5) * 2],
                                         {"reduction": r, "target": tgt.tolist()}, gen=gen))
    ops["bce_with_logits"] = []
    for r in red_names:
        tgt = torch.rand(4, 3, generator=gen.g)
        ops["bce_with_logits"].append(case(r, lambda x, t, r=r: F.binary_cross_entropy_with_logits(x, t, reduction=r),
                                           [gen.randn(4, 3) * 3, tgt], {"reduction": r}, grad_mask=[True, False], gen=gen))
    return ops


def main():
    os.makedirs(OUT, exist_ok=True)
    ops = build()
    for name, cases in sorted(ops.items()):
        doc = {"op": name, "torch": torch.__version__, "cases": cases}
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(doc, f, indent=None, separators=(",", ":"))
            f.write("\n")
    print("wrote %d fixture files to %s" % (len(ops), os.path.normpath(OUT)), file=sys.stderr)


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------- cross_entropy options
# Appended after main() so that every case above keeps its seed and bytes:
# running the script writes the files above first, then this one.

def build_cross_entropy_options():
    """F.cross_entropy with ignore_index and label_smoothing (torch 1.13)."""
    gen = Gen(4321)
    specs = [  # name, targets, ignore_index (None: torch's default -100), label_smoothing
        ("ignore_default", [1, -100, 4, 0, -100, 2], None, 0.0),
        ("smooth", [1, 3, 4, 0, 2, 2], None, 0.1),
        ("smooth_ignore_default", [1, -100, 4, 0, -100, 2], None, 0.2),
        ("ignore_class0", [0, 3, 0, 4, 1, 0], 0, 0.0),
        ("ignore_class2_smooth", [2, 0, 2, 4, 1, 3], 2, 0.25),
        ("ignore_out_of_range_smooth", [7, 0, 3, 7, 1, 3], 7, 0.05),
        ("smooth_one", [1, -100, 4, 0, 3, 2], None, 1.0),
        # The mean over no kept target is NaN, which JSON cannot hold: the Go
        # test checks that case directly.
        ("all_ignored", [-100] * 6, None, 0.3),
    ]
    cases = []
    for name, tgt, ign, eps in specs:
        for r in ("mean", "sum", "none"):
            if name == "all_ignored" and r == "mean":
                continue
            kw = {"reduction": r, "label_smoothing": eps}
            if ign is not None:
                kw["ignore_index"] = ign
            args = dict(kw, target=tgt)
            t = torch.tensor(tgt)
            cases.append(case("%s_%s" % (name, r), lambda x, t=t, kw=kw: F.cross_entropy(x, t, **kw),
                              [gen.randn(6, 5) * 2], args, gen=gen))
    return cases


def main_cross_entropy_options():
    doc = {"op": "cross_entropy_options", "torch": torch.__version__, "cases": build_cross_entropy_options()}
    with open(os.path.join(OUT, "cross_entropy_options.json"), "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote cross_entropy_options.json to %s" % os.path.normpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main_cross_entropy_options()
