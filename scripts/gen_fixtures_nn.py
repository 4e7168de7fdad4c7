#!/usr/bin/python3
"""Write the torch fixtures that goddp's nn and optim tests compare against.

Run with Debian's torch 1.13 (apt-get install python3-torch):
    /usr/bin/python3 scripts/gen_fixtures_nn.py
Writes testdata/nn/*.json and testdata/optim/*.json (small, deterministic:
every input, weight and gradient is stored, so Go needs no torch RNG). The
outputs are committed; CI never runs this script.

Tensors are stored as {"shape": [...], "data": [flat row-major floats]}; the
floats are float32 values printed exactly.
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata")


def T(t):
    t = t.detach()
    return {"shape": list(t.shape), "data": [float(v) for v in t.reshape(-1).tolist()]}


def write(sub, name, obj):
    d = os.path.join(ROOT, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def randn(g, *shape):
    return torch.randn(*shape, generator=g, dtype=torch.float32)


# ---------------------------------------------------------------- nn layers

def layer_case(name, module, x, g, params_in_order, extra=None, train=True, x_requires_grad=True):
    """Forward x through module, backward a fixed random upstream gradient."""
    module.train(train)
    x = x.clone().requires_grad_(x_requires_grad)
    out = module(x)
    gy = randn(g, *out.shape)
    out.backward(gy)
    case = {
        "name": name,
        "train": train,
        "x": T(x),
        "out": T(out),
        "grad_out": T(gy),
        "params": [{"name": n, "value": T(p), "grad": T(p.grad)} for n, p in params_in_order],
    }
    if x_requires_grad:
        case["grad_x"] = T(x.grad)
    if extra:
        case.update(extra)
    return case


def gen_layers():
    g = torch.Generator().manual_seed(1)
    cases = []

    def pre(m):
        # Record parameter values before the step (backward leaves them intact).
        return [(n, p) for n, p in m.named_parameters()]

    lin = nn.Linear(5, 3)
    with torch.no_grad():
        lin.weight.copy_(randn(g, 3, 5)); lin.bias.copy_(randn(g, 3))
    cases.append(layer_case("linear", lin, randn(g, 4, 5), g, pre(lin)))

    lin_nb = nn.Linear(6, 2, bias=False)
    with torch.no_grad():
        lin_nb.weight.copy_(randn(g, 2, 6))
    cases.append(layer_case("linear_nobias", lin_nb, randn(g, 3, 6), g, pre(lin_nb)))

    for nm, mod in [("relu", nn.ReLU()), ("gelu", nn.GELU()), ("tanh", nn.Tanh()), ("sigmoid", nn.Sigmoid())]:
        cases.append(layer_case(nm, mod, randn(g, 3, 4) * 2, g, []))

    ln = nn.LayerNorm(6, eps=1e-5)
    with torch.no_grad():
        ln.weight.copy_(randn(g, 6)); ln.bias.copy_(randn(g, 6))
    cases.append(layer_case("layernorm", ln, randn(g, 4, 6) * 3 + 1, g, pre(ln), extra={"eps": 1e-5}))

    emb = nn.Embedding(7, 3)
    with torch.no_grad():
        emb.weight.copy_(randn(g, 7, 3))
    idx = torch.tensor([[1, 4, 4], [0, 6, 2]])
    out = emb(idx)
    gy = randn(g, *out.shape)
    out.backward(gy)
    cases.append({"name": "embedding", "train": True, "indices": T(idx.float()), "out": T(out), "grad_out": T(gy),
                  "params": [{"name": "weight", "value": T(emb.weight), "grad": T(emb.weight.grad)}]})

    bn = nn.BatchNorm1d(4, eps=1e-5, momentum=0.1)
    with torch.no_grad():
        bn.weight.copy_(randn(g, 4)); bn.bias.copy_(randn(g, 4))
        bn.running_mean.copy_(randn(g, 4)); bn.running_var.copy_(randn(g, 4).abs() + 0.5)
    rm0, rv0 = bn.running_mean.clone(), bn.running_var.clone()
    params = pre(bn)
    c = layer_case("batchnorm1d_train", bn, randn(g, 5, 4) * 2 + 0.5, g, params, train=True,
                   extra={"eps": 1e-5, "momentum": 0.1, "running_mean_before": T(rm0), "running_var_before": T(rv0)})
    c["running_mean_after"] = T(bn.running_mean); c["running_var_after"] = T(bn.running_var)
    c["num_batches_tracked_after"] = int(bn.num_batches_tracked)
    cases.append(c)

    for p in bn.parameters():
        p.grad = None
    rm1, rv1 = bn.running_mean.clone(), bn.running_var.clone()
    c = layer_case("batchnorm1d_eval", bn, randn(g, 3, 4), g, pre(bn), train=False,
                   extra={"eps": 1e-5, "momentum": 0.1, "running_mean_before": T(rm1), "running_var_before": T(rv1)})
    c["running_mean_after"] = T(bn.running_mean); c["running_var_after"] = T(bn.running_var)
    c["num_batches_tracked_after"] = int(bn.num_batches_tracked)
    cases.append(c)

    seq = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    with torch.no_grad():
        for p in seq.parameters():
            p.copy_(randn(g, *p.shape))
    cases.append(layer_case("sequential", seq, randn(g, 3, 4), g, pre(seq)))
    write("nn", "layers.json", {"cases": cases})


# ---------------------------------------------------------------- losses

def gen_losses():
    g = torch.Generator().manual_seed(2)
    cases = []
    for red in ["mean", "sum", "none"]:
        pred, tgt = randn(g, 4, 3), randn(g, 4, 3)
        p = pred.clone().requires_grad_(True)
        out = F.mse_loss(p, tgt, reduction=red)
        gy = torch.ones_like(out) if red != "none" else randn(g, *out.shape)
        out.backward(gy)
        cases.append({"name": "mse_" + red, "loss": "mse", "reduction": red, "input": T(pred), "target": T(tgt),
                      "out": T(out), "grad_out": T(gy), "grad_input": T(p.grad)})

        logits = randn(g, 5, 4) * 2
        cls = torch.tensor([0, 3, 1, 3, 2])
        p = logits.clone().requires_grad_(True)
        out = F.cross_entropy(p, cls, reduction=red)
        gy = torch.ones_like(out) if red != "none" else randn(g, *out.shape)
        out.backward(gy)
        cases.append({"name": "cross_entropy_" + red, "loss": "cross_entropy", "reduction": red, "input": T(logits),
                      "classes": cls.tolist(), "out": T(out), "grad_out": T(gy), "grad_input": T(p.grad)})

        logits, tgt = randn(g, 3, 4) * 3, torch.rand(3, 4, generator=g)
        p = logits.clone().requires_grad_(True)
        out = F.binary_cross_entropy_with_logits(p, tgt, reduction=red)
        gy = torch.ones_like(out) if red != "none" else randn(g, *out.shape)
        out.backward(gy)
        cases.append({"name": "bce_with_logits_" + red, "loss": "bce_with_logits", "reduction": red, "input": T(logits),
                      "target": T(tgt), "out": T(out), "grad_out": T(gy), "grad_input": T(p.grad)})
    write("nn", "losses.json", {"cases": cases})


# ---------------------------------------------------------------- state dict keys and a training run

def gen_module_misc():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    sd_keys = list(model.state_dict().keys())
    param_names = [n for n, _ in model.named_parameters()]
    buffer_names = [n for n, _ in model.named_buffers()]

    # 5 SGD-momentum steps of a small MLP with cross-entropy: an end-to-end check of nn + autograd + optim.
    g = torch.Generator().manual_seed(3)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(randn(g, *p.shape) * 0.5)
    init = {n: T(p) for n, p in mlp.named_parameters()}
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3, foreach=False)
    xs, ys, losses = [], [], []
    for step in range(5):
        x = randn(g, 6, 4)
        y = torch.randint(0, 3, (6,), generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(mlp(x), y)
        loss.backward()
        opt.step()
        xs.append(T(x)); ys.append(y.tolist()); losses.append(float(loss))
    final = {n: T(p) for n, p in mlp.named_parameters()}
    write("nn", "module.json", {
        "state_dict_keys": sd_keys, "param_names": param_names, "buffer_names": buffer_names,
        "train_mlp": {"init": init, "xs": xs, "ys": ys, "losses": losses, "final": final,
                      "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3},
    })


# ---------------------------------------------------------------- optimizers

OPT_CASES = [
    ("sgd_plain", "SGD", dict(lr=0.1)),
    ("sgd_momentum", "SGD", dict(lr=0.1, momentum=0.9)),
    ("sgd_nesterov", "SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("sgd_weight_decay", "SGD", dict(lr=0.1, weight_decay=0.01)),
    ("sgd_dampening", "SGD", dict(lr=0.1, momentum=0.8, dampening=0.3, weight_decay=0.05)),
    ("sgd_maximize", "SGD", dict(lr=0.1, momentum=0.5, maximize=True)),
    ("adam", "Adam", dict(lr=0.01)),
    ("adam_weight_decay", "Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("adam_amsgrad", "Adam", dict(lr=0.02, amsgrad=True)),
    ("adamw", "AdamW", dict(lr=0.01)),
    ("adamw_weight_decay", "AdamW", dict(lr=0.01, betas=(0.85, 0.995), eps=1e-7, weight_decay=0.3)),
    ("adamw_amsgrad", "AdamW", dict(lr=0.02, weight_decay=0.05, amsgrad=True)),
]


def make_params(g):
    w = randn(g, 3, 4).requires_grad_(True)
    b = randn(g, 3).requires_grad_(True)
    frozen = randn(g, 2).requires_grad_(True)  # never gets a gradient: must stay put, no state
    return [w, b, frozen]


def loss_fn(params, x, y):
    w, b, _ = params
    return ((x @ w.t() + b - y) ** 2).mean() + 0.1 * (w ** 3).sum()


def gen_optimizers():
    cases = []
    for name, kind, kw in OPT_CASES:
        g = torch.Generator().manual_seed(4)
        params = make_params(g)
        init = [T(p) for p in params]
        opt = getattr(torch.optim, kind)(params, foreach=False, **kw)
        steps = []
        for _ in range(5):
            x, y = randn(g, 5, 4), randn(g, 5, 3)
            opt.zero_grad()
            loss_fn(params, x, y).backward()
            grads = [T(p.grad) if p.grad is not None else None for p in params]
            opt.step()
            steps.append({"grads": grads, "params": [T(p) for p in params]})
        state = {}
        for i, p in enumerate(params):
            for k, v in opt.state.get(p, {}).items():
                if v is None:
                    continue  # SGD without momentum records momentum_buffer=None
                state["state.%d.%s" % (i, k)] = float(v) if k == "step" else T(v)
        cfg = dict(kw)
        if "betas" in cfg:
            cfg["beta1"], cfg["beta2"] = cfg.pop("betas")
        cases.append({"name": name, "kind": kind, "config": cfg, "init": init, "steps": steps, "state": state})

    # Two groups with their own lr and weight decay.
    g = torch.Generator().manual_seed(5)
    params = make_params(g)
    init = [T(p) for p in params]
    opt = torch.optim.SGD([{"params": [params[0]], "lr": 0.05, "weight_decay": 0.1},
                           {"params": [params[1], params[2]], "lr": 0.2}], lr=0.1, momentum=0.9, foreach=False)
    steps = []
    for _ in range(5):
        x, y = randn(g, 5, 4), randn(g, 5, 3)
        opt.zero_grad()
        loss_fn(params, x, y).backward()
        grads = [T(p.grad) if p.grad is not None else None for p in params]
        opt.step()
        steps.append({"grads": grads, "params": [T(p) for p in params]})
    state = {}
    for i, p in enumerate(params):
        if opt.state.get(p, {}).get("momentum_buffer") is not None:
            state["state.%d.momentum_buffer" % i] = T(opt.state[p]["momentum_buffer"])
    groups = {"name": "sgd_two_groups", "kind": "SGD", "config": {"lr": 0.1, "momentum": 0.9},
              "groups": [{"params": [0], "lr": 0.05, "weight_decay": 0.1}, {"params": [1, 2], "lr": 0.2, "weight_decay": 0.0}],
              "init": init, "steps": steps, "state": state}
    cases.append(groups)
    write("optim", "optimizers.json", {"cases": cases})


# ---------------------------------------------------------------- schedulers

def gen_schedulers():
    from torch.optim import lr_scheduler as L
    specs = [
        ("steplr", lambda o: [L.StepLR(o, step_size=3, gamma=0.5)], {"kind": "StepLR", "step_size": 3, "gamma": 0.5}),
        ("cosine", lambda o: [L.CosineAnnealingLR(o, T_max=5, eta_min=0.001)],
         {"kind": "CosineAnnealingLR", "T_max": 5, "eta_min": 0.001}),
        ("cosine_zero_min", lambda o: [L.CosineAnnealingLR(o, T_max=4)], {"kind": "CosineAnnealingLR", "T_max": 4, "eta_min": 0.0}),
        ("linear_warmup", lambda o: [L.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=4)],
         {"kind": "LinearWarmup", "start_factor": 0.1, "total_iters": 4}),
        ("linearlr_decay", lambda o: [L.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=5)],
         {"kind": "LinearLR", "start_factor": 1.0, "end_factor": 0.2, "total_iters": 5}),
        ("warmup_then_cosine_chained", lambda o: [L.LinearLR(o, start_factor=0.25, total_iters=3),
                                                  L.CosineAnnealingLR(o, T_max=8, eta_min=0.0)],
         {"kind": "Chained", "start_factor": 0.25, "total_iters": 3, "T_max": 8, "eta_min": 0.0}),
    ]
    cases = []
    for name, mk, cfg in specs:
        p1, p2 = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
        opt = torch.optim.SGD([{"params": [p1], "lr": 0.1}, {"params": [p2], "lr": 0.05}], lr=0.1)
        scheds = mk(opt)
        lrs = [[gr["lr"] for gr in opt.param_groups]]
        for _ in range(12):
            opt.step()
            for s in scheds:
                s.step()
            lrs.append([gr["lr"] for gr in opt.param_groups])
        cases.append({"name": name, "config": cfg, "base_lrs": [0.1, 0.05], "lrs": lrs})
    write("optim", "schedulers.json", {"cases": cases})


def gen_clip():
    g = torch.Generator().manual_seed(6)
    cases = []
    for name, scale, max_norm in [("clips", 3.0, 1.0), ("no_clip", 0.1, 10.0)]:
        ps = [torch.zeros(3, 4, requires_grad=True), torch.zeros(5, requires_grad=True)]
        for p in ps:
            p.grad = randn(g, *p.shape) * scale
        before = [T(p.grad) for p in ps]
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        cases.append({"name": name, "max_norm": max_norm, "grads": before, "total_norm": float(total),
                      "clipped": [T(p.grad) for p in ps]})
    write("optim", "clip.json", {"cases": cases})


if __name__ == "__main__":
    torch.set_num_threads(1)
    gen_layers()
    gen_losses()
    gen_module_misc()
    gen_optimizers()
    gen_schedulers()
    gen_clip()
    print("wrote fixtures under", os.path.normpath(ROOT))


# ---------------------------------------------------------------- cross-entropy options
# Appended after the main block so the files above keep their seeds; running
# the script writes this file last.

def gen_cross_entropy_options():
    """nn.CrossEntropyLoss with ignore_index and label_smoothing, float32."""
    g = torch.Generator().manual_seed(7)
    cases = []
    for name, cls, ign, eps in [("ignore_default", [0, -100, 1, 3, -100], None, 0.0),
                                ("smooth", [0, 3, 1, 3, 2], None, 0.1),
                                ("ignore_class1_smooth", [1, 3, 1, 0, 2], 1, 0.3)]:
        for red in ["mean", "sum", "none"]:
            kw = {"reduction": red, "label_smoothing": eps}
            if ign is not None:
                kw["ignore_index"] = ign
            logits = randn(g, 5, 4) * 2
            p = logits.clone().requires_grad_(True)
            out = nn.CrossEntropyLoss(**kw)(p, torch.tensor(cls))
            gy = torch.ones_like(out) if red != "none" else randn(g, *out.shape)
            out.backward(gy)
            c = {"name": "%s_%s" % (name, red), "loss": "cross_entropy", "reduction": red, "input": T(logits),
                 "classes": cls, "label_smoothing": eps, "out": T(out), "grad_out": T(gy), "grad_input": T(p.grad)}
            if ign is not None:
                c["ignore_index"] = ign
            cases.append(c)
    write("nn", "cross_entropy_options.json", {"cases": cases})


if __name__ == "__main__":
    gen_cross_entropy_options()
