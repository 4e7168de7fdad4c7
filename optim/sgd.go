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
	// Foreach chooses one multi-tensor update per group (the default,
	// where the device has it) or one update per parameter; the results
	// are the same. See Foreach.
	Foreach Foreach
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
	return c.Foreach.validate("SGD")
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
	multi  multiLists
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
	base := 0
	for _, pg := range o.groups.list {
		step := o.stepMulti
		if o.cfg.Foreach == ForeachOff {
			step = o.stepEach
		}
		if err := step(pg, base); err != nil {
			return err
		}
		base += len(pg.Params)
	}
	return nil
}

// stepEach updates the parameters of pg, numbered from base, one at a
// time.
func (o *SGD) stepEach(pg *ParamGroup, base int) error {
	for j, p := range pg.Params {
		i := base + j
		if p.Grad == nil {
			continue
		}
		if err := checkGrad(p, i); err != nil {
			return err
		}
		if err := o.update(pg, i, p, o.ensureBuf(i, p)); err != nil {
			return err
		}
	}
	return nil
}

// stepMulti updates the parameters of pg, numbered from base, with one
// multi-tensor update for those whose momentum buffer is fresh and one for
// the rest (torch's first step clones the gradient into the buffer), every
// gradient checked first.
func (o *SGD) stepMulti(pg *ParamGroup, base int) error {
	for j, p := range pg.Params {
		if p.Grad != nil {
			if err := checkGrad(p, base+j); err != nil {
				return err
			}
		}
	}
	m := &o.multi
	m.idx = m.idx[:0]
	var fresh []bool
	for j, p := range pg.Params {
		if p.Grad != nil {
			first := o.ensureBuf(base+j, p)
			if first && fresh == nil {
				fresh = make([]bool, len(pg.Params))
			}
			if first {
				fresh[j] = true
			}
		}
	}
	for _, first := range []bool{true, false} {
		if first && fresh == nil {
			continue
		}
		m.idx = m.idx[:0]
		for j, p := range pg.Params {
			if p.Grad == nil || (fresh != nil && fresh[j]) != first {
				continue
			}
			i := base + j
			m.idx = append(m.idx, i)
			m.ws, m.gs = append(m.ws, p.Value), append(m.gs, p.Grad)
			if o.cfg.Momentum != 0 {
				m.ms = append(m.ms, o.bufs[i])
			}
		}
		if len(m.idx) == 0 {
			continue
		}
		var bufs []*tensor.Tensor
		if o.cfg.Momentum != 0 {
			bufs = m.ms
		}
		err := tensor.SGDStepMulti(m.ws, m.gs, bufs, o.hyper(pg, first))
		m.clear()
		fallback, err := multiFallback(o.cfg.Foreach, err, "SGD", m.idx[0], m.idx[len(m.idx)-1])
		if err != nil {
			return err
		}
		for _, i := range m.idx {
			if !fallback {
				break
			}
			if err := o.update(pg, i, pg.Params[i-base], first); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureBuf makes parameter i's momentum buffer on its first step, which
// it reports (nothing without momentum).
func (o *SGD) ensureBuf(i int, p *autograd.Variable) bool {
	if o.cfg.Momentum == 0 || o.bufs[i] != nil {
		return false
	}
	o.bufs[i] = newLike(p)
	return true
}

func (o *SGD) hyper(pg *ParamGroup, first bool) tensor.SGDHyper {
	return tensor.SGDHyper{
		LR: pg.LR, WeightDecay: pg.WeightDecay, Momentum: o.cfg.Momentum, Dampening: o.cfg.Dampening,
		Nesterov: o.cfg.Nesterov, Maximize: o.cfg.Maximize, First: first,
	}
}

// update applies parameter i's update alone.
func (o *SGD) update(pg *ParamGroup, i int, p *autograd.Variable, first bool) error {
	if err := tensor.SGDStep(p.Value, p.Grad, o.bufs[i], o.hyper(pg, first)); err != nil {
		return stepErr(err, i)
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
