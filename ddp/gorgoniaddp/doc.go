// Package gorgoniaddp trains gorgonia.org/gorgonia models under goddp's DDP.
//
// A gorgonia user has an *ExprGraph: learnable nodes with values, inputs
// bound with gorgonia.Let, and a scalar cost node. New adapts it to
// nn.Layer so that ddp.Wrap takes it unchanged:
//
//	model, err := gorgoniaddp.New(cost, gorgonia.Nodes{w1, b1, w2, b2})
//	d, err := ddp.Wrap(ctx, model, pg)                 // rank 0's weights, into the graph
//	opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1})
//	for each batch {
//		gorgonia.Let(x, xs); gorgonia.Let(y, ys)  // this rank's shard
//		opt.ZeroGrad()
//		loss, err := gorgoniaddp.Step(d, model)  // forward, backward, all-reduce
//		err = opt.Step()                          // updates the graph's weights
//	}
//
// # How the gradients reach the Reducer
//
// New calls gorgonia.Grad(cost, learnables...) and compiles a TapeMachine
// with the learnables' dual values bound. Each learnable becomes a goddp
// leaf parameter (named after its node) whose tensor shares the learnable's
// memory, so ddp.Wrap's broadcast and goddp's optimizers write straight into
// the graph. Model.Loss runs the TapeMachine once, which computes the cost
// and every gradient, and returns the cost as an autograd variable created
// by one op whose inputs are the parameters and whose Backward returns the
// TapeMachine's gradients. loss.Backward() therefore accumulates them into
// each parameter's Grad and fires the grad-ready hooks, which is exactly
// the path a native goddp model takes: DDP's Reducer copies each gradient
// into its bucket (divided by the world size), all-reduces the buckets in
// order and writes the averages back before Backward returns. Bucketing,
// comm hooks, NoSync, Join, statistics and timelines all apply.
//
// Unlike a native model, the gradients all become ready together (the
// TapeMachine has finished backward before goddp sees them), so there is no
// overlap of communication with gorgonia's backward.
//
// To step with a gorgonia Solver instead, call Model.CopyGradsToGraph after
// Step: it writes the averaged gradients into the learnables' gorgonia
// gradients, and solver.Step(gorgonia.NodesToValueGrads(learnables)) applies
// them (and zeroes them, as gorgonia solvers do).
//
// # Rules
//
// Learnables must hold float32 or float64 values in host memory (a
// *tensor.Dense, or a *gorgonia.F32/*F64 scalar) and have unique names.
// Do not rebind a learnable with gorgonia.Let after New: it would no longer
// share memory with its parameter (Loss reports ErrRebound). Each Loss
// zeroes gorgonia's dual-value gradients before running, so they hold one
// run's gradients, while the goddp Grads accumulate across passes until
// ZeroGrad, as in torch. Inputs that require grad are not differentiated:
// the graph ends at its learnables.
//
// The adapter works with gorgonia's CPU TapeMachine only, so its code is
// left out of -tags cuda builds (the package is then empty): gorgonia uses
// the same tag for its own CUDA engine, which keeps values on the GPU and
// needs cuDNN's headers.
package gorgoniaddp
