package optim

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// SGDConfig holds torch.optim.SGD's arguments. The zero value except LR is
// torch's default (no momentum, no dampening, no weight decay).
type SGDConfig struct {
	LR          float64
	Momentum    float64
	Dampening   float64
	WeightDecay float64
	Nesterov    bool
	// Maximize ascends the objective instead of descending it.
	Maximize bool
}

func (c SGDConfig) validate() error {
	switch {
	case c.LR < 0:
		return fmt.Errorf("%w: SGD learning rate %v < 0", ErrInvalidConfig, c.LR)
	case c.Momentum < 0:
		return fmt.Errorf("%w: SGD momentum %v < 0", ErrInvalidConfig, c.Momentum)
	case c.WeightDecay < 0:
		return fmt.Errorf("%w: SGD weight decay %v < 0", ErrInvalidConfig, c.WeightDecay)
	case c.Nesterov && (c.Momentum <= 0 || c.Dampening != 0):
		return fmt.Errorf("%w: SGD nesterov momentum requires a momentum and zero dampening", ErrInvalidConfig)
	}
	return nil
}

// SGD is stochastic gradient descent with torch 1.13's exact update:
//
//	d = grad (negated when Maximize) + weight_decay*p
//	buf = d on the first step, else momentum*buf + (1-dampening)*d
//	d = d + momentum*buf (Nesterov) or buf
//	p -= lr*d
//
// Without momentum it keeps no state. Steps allocate nothing after the
// momentum buffers exist.
type SGD struct {
	cfg    SGDConfig
	groups groups
	bufs   []*tensor.Tensor // momentum buffers by flat parameter index; nil until first used
}

// NewSGD returns an SGD optimizer over params as one group with cfg.LR and
// cfg.WeightDecay. More groups can be added with AddParamGroup.
func NewSGD(params []*autograd.Variable, cfg SGDConfig) (*SGD, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := &SGD{cfg: cfg}
	if len(params) > 0 {
		if err := o.AddParamGroup(ParamGroup{Params: params, LR: cfg.LR, WeightDecay: cfg.WeightDecay}); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// AddParamGroup appends a group (torch's add_param_group). Every field of g
// is used as given.
func (o *SGD) AddParamGroup(g ParamGroup) error {
	pg, err := o.groups.add(g)
	if err != nil {
		return err
	}
	o.bufs = append(o.bufs, make([]*tensor.Tensor, len(pg.Params))...)
	return nil
}

// Config returns the optimizer-wide hyperparameters. Its LR and WeightDecay
// are only the values the first group started with; the live ones are in
// ParamGroups.
func (o *SGD) Config() SGDConfig { return o.cfg }

// ParamGroups implements Optimizer.
func (o *SGD) ParamGroups() []*ParamGroup { return o.groups.list }

// ZeroGrad implements Optimizer.
func (o *SGD) ZeroGrad() { o.groups.zeroGrad() }

// Step implements Optimizer.
func (o *SGD) Step() error {
	idx := 0
	for _, pg := range o.groups.list {
		for _, p := range pg.Params {
			i := idx
			idx++
			if p.Grad == nil {
				continue
			}
			if err := checkGrad(p, i); err != nil {
				return err
			}
			first := false
			if o.cfg.Momentum != 0 && o.bufs[i] == nil {
				o.bufs[i] = newLike(p)
				first = true
			}
			err := tensor.SGDStep(p.Value, p.Grad, o.bufs[i], tensor.SGDHyper{
				LR: pg.LR, WeightDecay: pg.WeightDecay, Momentum: o.cfg.Momentum, Dampening: o.cfg.Dampening,
				Nesterov: o.cfg.Nesterov, Maximize: o.cfg.Maximize, First: first,
			})
			if err != nil {
				return stepErr(err, i)
			}
		}
	}
	return nil
}

// StateDict implements Optimizer.
func (o *SGD) StateDict() *StateDict {
	sd := NewStateDict("SGD")
	o.groups.save(sd)
	sd.Scalars["momentum"] = o.cfg.Momentum
	sd.Scalars["dampening"] = o.cfg.Dampening
	sd.Scalars["nesterov"] = b2f(o.cfg.Nesterov)
	sd.Scalars["maximize"] = b2f(o.cfg.Maximize)
	for i, b := range o.bufs {
		if b != nil {
			sd.Tensors[fmt.Sprintf("state.%d.momentum_buffer", i)] = b
		}
	}
	return sd
}

// LoadStateDict implements Optimizer. On error nothing is changed.
func (o *SGD) LoadStateDict(sd *StateDict) error {
	if err := o.groups.check(sd, "SGD"); err != nil {
		return err
	}
	cfg := o.cfg
	for _, k := range []string{"momentum", "dampening", "nesterov", "maximize"} {
		if _, err := sd.scalar(k); err != nil {
			return err
		}
	}
	cfg.Momentum = sd.Scalars["momentum"]
	cfg.Dampening = sd.Scalars["dampening"]
	cfg.Nesterov = sd.Scalars["nesterov"] != 0
	cfg.Maximize = sd.Scalars["maximize"] != 0
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrStateDict, err)
	}
	bufs := make([]*tensor.Tensor, len(o.bufs))
	idx := 0
	for _, pg := range o.groups.list {
		for _, p := range pg.Params {
			t, ok, err := stateTensor(sd, idx, "momentum_buffer", p.Value)
			if err != nil {
				return err
			}
			if ok {
				bufs[idx] = cloneAs(t, p.Value)
			}
			idx++
		}
	}
	o.groups.load(sd)
	o.cfg = cfg
	o.bufs = bufs
	return nil
}
