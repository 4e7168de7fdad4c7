package optim

import (
	"errors"
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// ErrInvalidConfig is wrapped by constructor errors for out-of-range
// hyperparameters (torch raises ValueError for the same conditions).
var ErrInvalidConfig = errors.New("optim: invalid configuration")

// ErrBadGrad is wrapped by Step when a gradient does not match its parameter.
var ErrBadGrad = errors.New("optim: gradient does not match parameter")

// Optimizer updates parameters from their accumulated gradients.
//
// A training step is ZeroGrad, forward, Backward, Step. Schedulers read and
// write ParamGroups()[i].LR between steps.
type Optimizer interface {
	// Step applies one update to every parameter that has a gradient.
	// Parameters whose Grad is nil are skipped, as in torch.
	Step() error
	// ZeroGrad zeroes every parameter's gradient in place, keeping the
	// buffers (torch's zero_grad(set_to_none=False)).
	ZeroGrad()
	// ParamGroups returns the live groups; changing LR takes effect at the
	// next Step.
	ParamGroups() []*ParamGroup
	// StateDict returns the optimizer's state and hyperparameters. Its
	// tensors alias the optimizer's buffers (like torch's state_dict); clone
	// or serialize them before the next Step if a snapshot is needed.
	StateDict() *StateDict
	// LoadStateDict restores state saved by StateDict from an optimizer of
	// the same kind over parameters of the same shapes. Tensors are copied.
	LoadStateDict(sd *StateDict) error
}

// ParamGroup is a set of parameters sharing a learning rate and weight decay.
// Other hyperparameters (momentum, betas, eps, ...) are per optimizer; torch
// allows them per group too, but goddp keeps only the two that are varied per
// group in practice (for example no weight decay on biases and norms).
type ParamGroup struct {
	Params      []*autograd.Variable
	LR          float64
	WeightDecay float64
	// InitialLR is the learning rate schedulers start from (torch's
	// group['initial_lr']). The first scheduler attached sets it from LR when
	// it is zero; zero means "not set".
	InitialLR float64
}

// groups holds the parameter groups and the flat parameter order that
// per-parameter state is indexed by (torch numbers parameters across groups
// in order, and so does the state dict).
type groups struct {
	list []*ParamGroup
	seen map[*autograd.Variable]bool
}

func (g *groups) add(pg ParamGroup) (*ParamGroup, error) {
	if pg.LR < 0 {
		return nil, fmt.Errorf("%w: learning rate %v < 0", ErrInvalidConfig, pg.LR)
	}
	if pg.WeightDecay < 0 {
		return nil, fmt.Errorf("%w: weight decay %v < 0", ErrInvalidConfig, pg.WeightDecay)
	}
	if g.seen == nil {
		g.seen = map[*autograd.Variable]bool{}
	}
	local := make(map[*autograd.Variable]bool, len(pg.Params))
	for i, p := range pg.Params {
		if p == nil {
			return nil, fmt.Errorf("%w: parameter %d of group %d is nil", ErrInvalidConfig, i, len(g.list))
		}
		if g.seen[p] || local[p] {
			return nil, fmt.Errorf("%w: parameter %d of group %d appears more than once", ErrInvalidConfig, i, len(g.list))
		}
		local[p] = true
	}
	for p := range local {
		g.seen[p] = true
	}
	pg.Params = append([]*autograd.Variable(nil), pg.Params...)
	cp := pg
	g.list = append(g.list, &cp)
	return &cp, nil
}

func (g *groups) zeroGrad() {
	for _, pg := range g.list {
		for _, p := range pg.Params {
			p.ZeroGrad()
		}
	}
}

// checkGrad verifies that p's gradient can be used to update it.
func checkGrad(p *autograd.Variable, idx int) error {
	if p.Grad.Numel() != p.Value.Numel() || p.Grad.DType() != p.Value.DType() {
		return fmt.Errorf("%w: parameter %d has value %v %v and grad %v %v", ErrBadGrad, idx,
			p.Value.DType(), p.Value.Shape(), p.Grad.DType(), p.Grad.Shape())
	}
	if !p.Value.IsContiguous() || !p.Grad.IsContiguous() {
		return fmt.Errorf("%w: parameter %d or its grad is not contiguous", ErrBadGrad, idx)
	}
	return nil
}

// stepErr attributes a tensor update's error to parameter idx: an update
// the parameter's device has no kernel for is a configuration error (as
// an option torch's device would refuse), tensors on different devices a
// bad gradient.
func stepErr(err error, idx int) error {
	if errors.Is(err, tensor.ErrNoKernel) {
		return fmt.Errorf("%w: parameter %d: %w", ErrInvalidConfig, idx, err)
	}
	return fmt.Errorf("%w: parameter %d: %w", ErrBadGrad, idx, err)
}

// newLike returns a zero tensor with p's dtype and shape on p's device.
func newLike(p *autograd.Variable) *tensor.Tensor {
	return tensor.ZerosAs(p.Value, p.Value.Shape()...)
}
