// Package autograd is goddp's eager, define-by-run reverse-mode automatic
// differentiation.
//
// # Model
//
// A Variable holds a value (a *tensor.Tensor), its gradient and whether it
// requires one. Leaves are made with Param (requires grad), Const or
// NewVariable. Every op (one per file: add.go, linear.go, cross_entropy.go,
// ...) computes its value immediately and, when any input requires grad,
// records itself as the creator of its output; when none does it records
// nothing. Backward (or BackwardWith for a non-scalar output and a seed
// gradient) sorts the recorded graph topologically and walks it in reverse,
// adding gradients for reused nodes and accumulating into each leaf's Grad
// across passes, like torch's .grad: call ZeroGrad between steps.
//
// Ops return gradients at their output's shape; the engine reduces a
// broadcast gradient back to each input's shape in one place (broadcast.go),
// never inside an op. User code can define ops too: implement Op and wrap the
// result with FromOp.
//
// # Views, masks and attention
//
// Reshape, View, Transpose, Permute and Narrow return strided views sharing
// their input's storage (Split, SplitSizes and Chunk are Narrows); ops that
// need contiguous data copy. Masks are 0/1 float tensors standing for torch's
// bool tensors (MaskedFill, Where; tensor.Triu/Tril build causal ones).
// ScaledDotProductAttention computes softmax(q kᵀ·scale + mask) v per
// (batch, head) matrix with two GEMMs and a fused mask + softmax, keeping the
// probabilities for a four-GEMM backward; SelfAttention does the same over a
// packed [B, T, 3E] projection, reading each head in place through the
// GEMMs' leading dimensions, so a transformer block makes no split, permute
// or concatenation copies. Under bf16 products on a CPU with AVX512-BF16,
// causal attention's products multiply bfloat16 pairs
// (tensor.GemmTriBF16).
//
// GELUTanh is torch's F.gelu(x, approximate='tanh'), GPT-2's activation;
// a float32 input keeps its derivative, which BackwardAndFree turns into
// the gradient in place.
//
// # Fused ops
//
// LinearGELU is GELU(Linear(...)) and LinearGELULinear a transformer's MLP,
// fc2(GELU(fc1(x))), each one op on the host that gives the separate ops'
// values and gradients to the bit with fewer passes over memory: the GELU
// runs in place and keeps its derivative, the backward folds that
// derivative into the pass that sums the bias gradient (and rounds the
// gradient for bf16 products), and under bf16 the MLP's GELU is written
// only as the bfloat16 rounding its second Linear reads. Elsewhere they
// are the separate ops.
//
// # Grad-ready hooks
//
// The engine counts, for every node, the consumers that have yet to deliver
// a gradient in the running pass. When a leaf's count reaches zero its
// gradient is final, and its GradReadyHooks fire right there, once per pass,
// while the rest of backward still runs: the last layer's parameters come
// first. ddp attaches its bucketing to these hooks to overlap communication
// with the remaining backward, and queues its finalize step with
// Pass.QueueCallback, which runs after every gradient is computed and before
// Backward returns.
//
// # No grad and detach
//
// Go has no goroutine-local state, so instead of torch's thread-local
// no_grad mode NoGrad(leaves, fn) switches requires-grad off on the given
// leaves (a model's parameters) while fn runs; ops on inputs that do not
// require grad record nothing. Detach returns a leaf sharing a value, cut from
// the graph. The package keeps no global state.
//
// # Memory
//
// A steady training step allocates nothing that grows with the parameter
// count. Leaf gradients accumulate into their existing Grad buffers: Linear,
// MatMul (with a 2-D right operand), IndexSelect, LayerNorm and BatchNorm add
// their weight gradients straight into Grad (dW = gyᵀx as a GEMM with
// beta = 1), broadcast gradients are reduced straight into Grad, and the
// engine adopts or adds into gradients that ops allocate instead of copying
// them. Elementwise ops compute their input gradient in place when the
// engine owns the incoming one.
//
// Activation-sized tensors come from the host's caching allocator
// (tensor.Host()). The gradients private to a pass (fresh or owned ones
// that did not become a leaf's Grad) go back to the cache as each op's
// backward runs, as soon as no pending gradient shares their storage, not
// when the pass ends: the next op's gradient of the same size takes the
// block, so the backward of a chain of 16 layers holds 2 activations
// of gradients at once, where it held 16 (23421fd, 2026-11-29).
//
// The activations themselves may still be read by the caller after
// Backward, and Go cannot tell whether it holds them, so Backward keeps
// them (torch's retain_graph=True) until the caller says the graph is
// finished: loss.FreeGraph(keep...) after Backward recycles every
// intermediate value (and what ops such as SelfAttention saved for
// backward) except leaves, their Grad, the root and keep, and detaches the
// recycled tensors so that a late read panics. loss.BackwardAndFree(keep...)
// is the two at once, torch's plain backward(): it frees the graph as the
// pass goes, each value and its op's saved tensors once that op's backward
// (their last reader) has run, and an op implementing FreeingBackward (the
// cross-entropy) writes its input's gradient over what it saved, so a
// step's peak is its forward's activations rather than those plus the
// backward's gradients. The trainer's step uses it. Either way a steady
// step takes its activations from the previous step's blocks.
//
// # Checking gradients
//
// GradCheck compares Backward with central finite differences in float64,
// as torch.autograd.gradcheck; every op's test uses it, and compares forward
// values and gradients with PyTorch fixtures in testdata/ops (written by
// scripts/gen_fixtures_ops.py and, for the view, mask and attention ops,
// scripts/gen_fixtures_attn.py).
//
// # Errors and panics
//
// Shape or dtype mismatches, bad axes and out-of-range indices are
// programmer errors: the op panics with a message naming itself and the
// shapes, as the tensor package does. Conditions a caller meets at run time
// are returned as errors: Backward on a non-scalar output without a seed
// (ErrNonScalar), on a variable that does not require grad (ErrNoGrad), a
// seed of the wrong shape, and errors from queued callbacks. The one
// exception is BatchNorm in training mode with a single value per channel,
// which panics as torch raises.
//
// A Variable and its graph are not safe for concurrent use; run one backward
// pass over a graph at a time.
package autograd
