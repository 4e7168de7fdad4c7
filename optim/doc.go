// Package optim holds goddp's optimizers (SGD, Adam, AdamW), learning-rate
// schedulers (StepLR, CosineAnnealingLR, LinearLR/LinearWarmup) and gradient
// clipping, all with PyTorch 1.13's update rules; committed torch fixtures
// check them step by step. WarmupCosineLR is nanoGPT's schedule (its
// get_lr), and DecayGroups with NewAdamWGroups its optimizer (weight decay
// on parameters of two or more dimensions only).
//
// Optimizers work directly on each parameter's Value and Grad float32 (or
// float64) slices with plain loops: no autograd ops, no allocation once their
// state exists. Adam, AdamW and SGD update each group's parameters with one
// multi-tensor update (AdamConfig.Foreach, torch's foreach/fused): on a
// GPU one kernel launch for the group instead of one a parameter, with the
// same results bit for bit; ClipGradNorm likewise takes four launches
// whatever the number of gradients. A training step is
//
//	opt.ZeroGrad()
//	loss := lossFn(model.Forward(x), y)
//	loss.Backward()
//	opt.Step()
//	sched.Step() // if any, after opt.Step, as in torch
//
// Parameters live in ParamGroups; each group carries its own LR and
// WeightDecay (the only per-group hyperparameters goddp supports), and
// schedulers read and write ParamGroup.LR. Per-parameter state is numbered
// across groups in order, like torch's state_dict.
//
// State dicts (StateDict) are flat: Tensors map[string]*tensor.Tensor plus
// Scalars map[string]float64, keyed like torch's nested dicts joined with
// dots ("state.3.exp_avg", "param_groups.0.lr"); see StateDict for the keys.
// The checkpoint package serializes them without knowing any optimizer.
//
// Error policy: bad hyperparameters and bad state dicts are returned as errors
// wrapping ErrInvalidConfig or ErrStateDict; a gradient whose size or dtype
// does not match its parameter makes Step return ErrBadGrad. Nothing panics
// on runtime input.
package optim
