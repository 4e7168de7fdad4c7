// Package zero is ZeRO stage 1 for goddp's optimizers, in the manner of
// torch.distributed.optim.ZeroRedundancyOptimizer: the optimizer state
// (Adam's two moments, SGD's momentum) is sharded across the ranks of a
// process group, so each rank keeps 1/world of it.
//
// # Model
//
// The parameters, in the optimizer's order (groups in order, torch's
// numbering), are laid end to end as one flat vector of N elements,
// padded to a multiple of the world size W; rank r owns elements
// [r*N/W, (r+1)*N/W). Unlike torch, which assigns whole parameters to
// ranks and so balances only as well as the parameter sizes allow, the
// split is by element: each rank's state is within one element per
// parameter of N/W, whatever the model.
//
// Each rank runs an ordinary optimizer (optim.SGD, Adam or AdamW, built by
// the constructor given to New) over "shard" variables that view its part
// of each parameter it overlaps. Step then
//
//  1. copies the gradients into a flat buffer and, with ReduceGrads,
//     reduce-scatters them (average) so that each rank gets the mean
//     gradient of its part only; without it the gradients are taken as
//     already averaged (by ddp), as torch's ZeroRedundancyOptimizer does;
//  2. steps the inner optimizer on this rank's part of the parameters;
//  3. all-gathers the updated parts, and copies them into every parameter.
//
// The update rules are the inner optimizer's, element by element, so a
// sharded AdamW steps the parameters exactly as an unsharded one given the
// same gradients.
//
// # Checkpoints
//
// ConsolidateStateDict (collective, torch's consolidate_state_dict)
// gathers the shards on one rank; that rank's StateDict is then the
// unsharded optimizer's, under the same keys ("state.<i>.exp_avg" shaped
// as parameter i, "state.<i>.step", the group and hyperparameter scalars),
// so it loads into an unsharded optimizer, and LoadStateDict takes such a
// dict on every rank, at any world size, keeping each rank's part.
package zero
