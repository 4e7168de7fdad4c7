// Package autograd is goddp's eager, define-by-run reverse-mode automatic
// differentiation.
//
// Every op (one per file) computes its value immediately and, when any input
// requires grad, records itself as the creator of its output Variable.
// Backward sorts the recorded graph topologically and walks it in reverse,
// accumulating gradients for reused nodes. Ops return gradients at their
// output's shape; the engine reduces broadcast gradients back to each input's
// shape in one place (broadcast.go).
//
// When the walk reaches a leaf, every consumer of that leaf has already run,
// so its gradient is final: the leaf's GradReadyHooks fire right there, while
// the rest of backward is still running. ddp attaches its bucket logic to
// these hooks and queues its finalize step with Pass.QueueCallback, so that
// loss.Backward() returns with synchronized gradients, as in PyTorch.
//
// Error policy: shape or dtype mismatches inside tensor math are programmer
// errors and panic with a message naming the op and the shapes. Conditions a
// caller can meet at run time (backward on a non-scalar without a seed,
// errors from queued callbacks) are returned as errors.
package autograd
