package autograd

import (
	"github.com/goddp/goddp/tensor"
)

// Op is one differentiable operation recorded in the graph. Each op lives in
// its own file. Inputs may hold nil for an absent optional input (Linear's or
// LayerNorm's bias). Backward receives the gradient of the op's output (which
// may be a strided view) and returns one gradient per input (nil where the
// input needs none). A returned gradient may have a broadcast shape: the
// engine reduces it back to the input's shape in one central place
// (reduceToShape), never inside the op. The engine treats returned gradients
// as borrowed (it copies before keeping or writing into one), so an Op may
// return gy itself or a view of it.
type Op interface {
	Name() string
	Inputs() []*Variable
	Backward(gy *tensor.Tensor) []*tensor.Tensor
}

// GradReadyHook is called exactly once per backward pass for a leaf that
// requires grad, as soon as that leaf's gradient is final and already
// accumulated into Grad, while the pass is still running. DDP attaches here.
type GradReadyHook func(leaf *Variable, pass *Pass)

// Variable is a node of the define-by-run graph: a value, its gradient and
// whether it requires one. Leaves (parameters, inputs) have no creator op.
type Variable struct {
	Value *tensor.Tensor
	// Grad is accumulated across backward passes on leaves, like torch's
	// .grad; call ZeroGrad (or set nil) between steps.
	Grad *tensor.Tensor

	requiresGrad bool
	creator      Op
	hooks        []GradReadyHook

	// Per-pass bookkeeping, valid only while the pass that set mark runs
	// (the engine clears it when the pass ends).
	mark         *Pass          // the pass that reached this node
	deps         int            // consumers in this pass yet to deliver a gradient
	pending      *tensor.Tensor // non-leaf: gradient accumulated so far
	pendingOwned bool           // pending is private to the pass and may be written in place
	got          bool           // leaf: some gradient arrived in this pass
}

// NewVariable returns a leaf wrapping value.
func NewVariable(value *tensor.Tensor, requiresGrad bool) *Variable {
	return &Variable{Value: value, requiresGrad: requiresGrad}
}

// Param returns a leaf that requires grad.
func Param(value *tensor.Tensor) *Variable { return NewVariable(value, true) }

// Const returns a leaf that does not require grad.
func Const(value *tensor.Tensor) *Variable { return NewVariable(value, false) }

// FromOp records the result of op. It requires grad if any input does; when
// none does, the op is not recorded.
func FromOp(value *tensor.Tensor, op Op) *Variable {
	v := &Variable{Value: value}
	for _, in := range op.Inputs() {
		if in != nil && in.requiresGrad {
			v.requiresGrad = true
			v.creator = op
			break
		}
	}
	return v
}

// RequiresGrad reports whether gradients flow to this variable.
func (v *Variable) RequiresGrad() bool { return v.requiresGrad }

// SetRequiresGrad changes a leaf's flag (it panics on a non-leaf, as torch does).
func (v *Variable) SetRequiresGrad(on bool) {
	if v.creator != nil {
		panic("autograd: SetRequiresGrad on a non-leaf variable; use Detach")
	}
	v.requiresGrad = on
}

// IsLeaf reports whether v was not produced by a recorded op.
func (v *Variable) IsLeaf() bool { return v.creator == nil }

// Creator returns the op that produced v, or nil for a leaf.
func (v *Variable) Creator() Op { return v.creator }

// Detach returns a leaf sharing v's value that does not require grad.
func (v *Variable) Detach() *Variable { return Const(v.Value) }

// Shape is v.Value.Shape().
func (v *Variable) Shape() []int { return v.Value.Shape() }

// RegisterGradReadyHook adds a hook fired when this leaf's gradient is final
// during each backward pass. It returns a function that removes the hook.
func (v *Variable) RegisterGradReadyHook(h GradReadyHook) (remove func()) {
	if v.creator != nil {
		panic("autograd: grad-ready hooks are only supported on leaves")
	}
	v.hooks = append(v.hooks, h)
	idx := len(v.hooks) - 1
	return func() {
		if idx < len(v.hooks) {
			v.hooks[idx] = nil
		}
	}
}

// ZeroGrad sets Grad's elements to zero, keeping the buffer (so a steady
// training loop allocates no gradient memory).
func (v *Variable) ZeroGrad() {
	if v.Grad == nil {
		return
	}
	tensor.Fill(v.Grad, 0)
}

// NoGrad runs fn with requires-grad switched off on the given leaves (for
// example a model's parameters), restoring the flags afterwards. Ops on
// variables that do not require grad record nothing. Go has no goroutine-local
// storage, so instead of torch's thread-local mode the switch lives on the
// leaves themselves; the library keeps no global state.
func NoGrad(leaves []*Variable, fn func()) {
	saved := make([]bool, len(leaves))
	for i, l := range leaves {
		saved[i] = l.requiresGrad
		l.requiresGrad = false
	}
	defer func() {
		for i, l := range leaves {
			l.requiresGrad = saved[i]
		}
	}()
	fn()
}
