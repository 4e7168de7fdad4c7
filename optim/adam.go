package optim

import (
	"fmt"
	"math"
	"slices"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// AdamConfig holds torch.optim.Adam's (and AdamW's) arguments. Use
// DefaultAdam or DefaultAdamW for torch's defaults and override fields.
type AdamConfig struct {
	LR          float64
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64
	AMSGrad     bool
	Maximize    bool
	// Foreach chooses one multi-tensor update per group (the default,
	// where the device has it) or one update per parameter; the results
	// are the same. See Foreach.
	Foreach Foreach
}

// DefaultAdam is torch.optim.Adam's defaults: lr 1e-3, betas (0.9, 0.999),
// eps 1e-8, no weight decay.
func DefaultAdam() AdamConfig {
	return AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// DefaultAdamW is torch.optim.AdamW's defaults: as Adam with weight decay 1e-2.
func DefaultAdamW() AdamConfig {
	c := DefaultAdam()
	c.WeightDecay = 1e-2
	return c
}

func (c AdamConfig) validate(kind string) error {
	switch {
	case !(c.LR >= 0):
		return fmt.Errorf("%w: %s learning rate %v < 0", ErrInvalidConfig, kind, c.LR)
	case !(c.Eps >= 0):
		return fmt.Errorf("%w: %s eps %v < 0", ErrInvalidConfig, kind, c.Eps)
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return fmt.Errorf("%w: %s beta1 %v outside [0, 1)", ErrInvalidConfig, kind, c.Beta1)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("%w: %s beta2 %v outside [0, 1)", ErrInvalidConfig, kind, c.Beta2)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("%w: %s weight decay %v < 0", ErrInvalidConfig, kind, c.WeightDecay)
	}
	if err := c.Foreach.validate(kind); err != nil {
		return err
	}
	if c.Beta1 == 0 && c.Beta2 == 0 && c.Eps == 0 {
		// torch accepts betas (0, 0) with eps 0, but in Go this is an
		// AdamConfig{LR: ...} literal that left the rest at their zero
		// values: v = g², so a parameter whose gradient is 0 steps by
		// 0/0 and becomes NaN.
		return fmt.Errorf("%w: %s beta1, beta2 and eps are all 0 (a zero gradient would step by 0/0); "+
			"start from Default%s() and set the fields you change", ErrInvalidConfig, kind, kind)
	}
	return nil
}

// Adam implements torch 1.13's Adam and, with decoupled weight decay, AdamW
// (single-tensor path, capturable=False):
//
//	step += 1
//	Adam:  g = grad + wd*p            AdamW: p *= 1 - lr*wd
//	m = beta1*m + (1-beta1)*g
//	v = beta2*v + (1-beta2)*g*g
//	vmax = max(vmax, v)               (AMSGrad only; used instead of v below)
//	denom = sqrt(v)/sqrt(1-beta2^step) + eps
//	p -= lr/(1-beta1^step) * m/denom
//
// eps is added after the bias-corrected square root, as in torch (not inside
// it). Step counts are kept per parameter, as torch does.
type Adam struct {
	kind   string
	cfg    AdamConfig
	groups groups
	state  []adamState
	multi  multiLists
}

type adamState struct {
	step          float64
	expAvg, expSq *tensor.Tensor
	maxSq         *tensor.Tensor
}

// NewAdam returns torch's Adam (L2 penalty added to the gradient) over params
// as one group with cfg.LR and cfg.WeightDecay.
func NewAdam(params []*autograd.Variable, cfg AdamConfig) (*Adam, error) {
	return newAdam("Adam", params, cfg)
}

// NewAdamW returns torch's AdamW (decoupled weight decay) over params as one
// group with cfg.LR and cfg.WeightDecay. DefaultAdamW gives torch's defaults.
func NewAdamW(params []*autograd.Variable, cfg AdamConfig) (*Adam, error) {
	return newAdam("AdamW", params, cfg)
}

func newAdam(kind string, params []*autograd.Variable, cfg AdamConfig) (*Adam, error) {
	if err := cfg.validate(kind); err != nil {
		return nil, err
	}
	o := &Adam{kind: kind, cfg: cfg}
	if len(params) > 0 {
		if err := o.AddParamGroup(ParamGroup{Params: params, LR: cfg.LR, WeightDecay: cfg.WeightDecay}); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Kind is "Adam" or "AdamW".
func (o *Adam) Kind() string { return o.kind }

// Config returns the optimizer-wide hyperparameters. Its LR and WeightDecay
// are only the values the first group started with; the live ones are in
// ParamGroups.
func (o *Adam) Config() AdamConfig { return o.cfg }

// AddParamGroup appends a group (torch's add_param_group).
func (o *Adam) AddParamGroup(g ParamGroup) error {
	pg, err := o.groups.add(g)
	if err != nil {
		return err
	}
	o.state = append(o.state, make([]adamState, len(pg.Params))...)
	return nil
}

// ParamGroups implements Optimizer.
func (o *Adam) ParamGroups() []*ParamGroup { return o.groups.list }

// ZeroGrad implements Optimizer.
func (o *Adam) ZeroGrad() { o.groups.zeroGrad() }

// Step implements Optimizer.
func (o *Adam) Step() error {
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
func (o *Adam) stepEach(pg *ParamGroup, base int) error {
	for j, p := range pg.Params {
		i := base + j
		if p.Grad == nil {
			continue
		}
		if err := checkGrad(p, i); err != nil {
			return err
		}
		o.advance(i, p)
		if err := o.update(pg, i, p); err != nil {
			return err
		}
	}
	return nil
}

// stepMulti updates the parameters of pg, numbered from base, with one
// multi-tensor update for each step count among them (one, unless some
// parameters went without a gradient at some step), every gradient
// checked first.
func (o *Adam) stepMulti(pg *ParamGroup, base int) error {
	for j, p := range pg.Params {
		if p.Grad != nil {
			if err := checkGrad(p, base+j); err != nil {
				return err
			}
		}
	}
	steps := o.multi.steps[:0]
	for j, p := range pg.Params {
		if p.Grad != nil {
			st := o.advance(base+j, p)
			if !slices.Contains(steps, st.step) {
				steps = append(steps, st.step)
			}
		}
	}
	o.multi.steps = steps
	m := &o.multi
	for _, step := range steps {
		m.idx = m.idx[:0]
		for j, p := range pg.Params {
			if i := base + j; p.Grad != nil && o.state[i].step == step {
				m.idx = append(m.idx, i)
				st := &o.state[i]
				m.ws, m.gs = append(m.ws, p.Value), append(m.gs, p.Grad)
				m.ms, m.vs = append(m.ms, st.expAvg), append(m.vs, st.expSq)
				if o.cfg.AMSGrad {
					m.vmaxs = append(m.vmaxs, st.maxSq)
				}
			}
		}
		var vmaxs []*tensor.Tensor
		if o.cfg.AMSGrad {
			vmaxs = m.vmaxs
		}
		err := tensor.AdamStepMulti(m.ws, m.gs, m.ms, m.vs, vmaxs, o.hyper(pg, step))
		m.clear()
		fallback, err := multiFallback(o.cfg.Foreach, err, o.kind, m.idx[0], m.idx[len(m.idx)-1])
		if err != nil {
			return err
		}
		for _, i := range m.idx {
			if !fallback {
				break
			}
			if err := o.update(pg, i, pg.Params[i-base]); err != nil {
				return err
			}
		}
	}
	return nil
}

// advance makes parameter i's state on its first step and counts the step.
func (o *Adam) advance(i int, p *autograd.Variable) *adamState {
	st := &o.state[i]
	if st.expAvg == nil {
		st.expAvg, st.expSq = newLike(p), newLike(p)
		if o.cfg.AMSGrad {
			st.maxSq = newLike(p)
		}
	}
	st.step++
	return st
}

// hyper is the update's hyper-parameters for pg at a step count.
func (o *Adam) hyper(pg *ParamGroup, step float64) tensor.AdamHyper {
	return tensor.AdamHyper{
		LR: pg.LR, WeightDecay: pg.WeightDecay, Beta1: o.cfg.Beta1, Beta2: o.cfg.Beta2, Eps: o.cfg.Eps,
		StepSize:  pg.LR / (1 - math.Pow(o.cfg.Beta1, step)),
		BC2Sqrt:   math.Sqrt(1 - math.Pow(o.cfg.Beta2, step)),
		Decoupled: o.kind == "AdamW", Maximize: o.cfg.Maximize,
	}
}

// update applies parameter i's update alone, its step counted.
func (o *Adam) update(pg *ParamGroup, i int, p *autograd.Variable) error {
	st := &o.state[i]
	if err := tensor.AdamStep(p.Value, p.Grad, st.expAvg, st.expSq, st.maxSq, o.hyper(pg, st.step)); err != nil {
		return stepErr(err, i)
	}
	return nil
}

// StateDict implements Optimizer.
func (o *Adam) StateDict() *StateDict {
	sd := NewStateDict(o.kind)
	o.groups.save(sd)
	sd.Scalars["beta1"] = o.cfg.Beta1
	sd.Scalars["beta2"] = o.cfg.Beta2
	sd.Scalars["eps"] = o.cfg.Eps
	sd.Scalars["amsgrad"] = b2f(o.cfg.AMSGrad)
	sd.Scalars["maximize"] = b2f(o.cfg.Maximize)
	for i, st := range o.state {
		if st.expAvg == nil {
			continue
		}
		p := fmt.Sprintf("state.%d.", i)
		sd.Scalars[p+"step"] = st.step
		sd.Tensors[p+"exp_avg"] = st.expAvg
		sd.Tensors[p+"exp_avg_sq"] = st.expSq
		if st.maxSq != nil {
			sd.Tensors[p+"max_exp_avg_sq"] = st.maxSq
		}
	}
	return sd
}

// LoadStateDict implements Optimizer. On error nothing is changed.
func (o *Adam) LoadStateDict(sd *StateDict) error {
	if err := o.groups.check(sd, o.kind); err != nil {
		return err
	}
	for _, k := range []string{"beta1", "beta2", "eps", "amsgrad", "maximize"} {
		if _, err := sd.scalar(k); err != nil {
			return err
		}
	}
	cfg := o.cfg
	cfg.Beta1, cfg.Beta2, cfg.Eps = sd.Scalars["beta1"], sd.Scalars["beta2"], sd.Scalars["eps"]
	cfg.AMSGrad, cfg.Maximize = sd.Scalars["amsgrad"] != 0, sd.Scalars["maximize"] != 0
	if err := cfg.validate(o.kind); err != nil {
		return fmt.Errorf("%w: %w", ErrStateDict, err)
	}
	state := make([]adamState, len(o.state))
	idx := 0
	for _, pg := range o.groups.list {
		for _, p := range pg.Params {
			i := idx
			idx++
			m, okM, err := stateTensor(sd, i, "exp_avg", p.Value)
			if err != nil {
				return err
			}
			v, okV, err := stateTensor(sd, i, "exp_avg_sq", p.Value)
			if err != nil {
				return err
			}
			mx, okX, err := stateTensor(sd, i, "max_exp_avg_sq", p.Value)
			if err != nil {
				return err
			}
			step, okS := sd.Scalars[fmt.Sprintf("state.%d.step", i)]
			if !okM && !okV && !okS {
				continue // parameter never stepped
			}
			if !okM || !okV || !okS {
				return fmt.Errorf("%w: %s: state.%d needs step, exp_avg and exp_avg_sq together", ErrStateDict, o.kind, i)
			}
			if cfg.AMSGrad && !okX {
				return fmt.Errorf("%w: %s: state.%d.max_exp_avg_sq missing with amsgrad", ErrStateDict, o.kind, i)
			}
			state[i] = adamState{step: step, expAvg: cloneAs(m, p.Value), expSq: cloneAs(v, p.Value)}
			if cfg.AMSGrad {
				state[i].maxSq = cloneAs(mx, p.Value)
			}
		}
	}
	o.groups.load(sd)
	o.cfg = cfg
	o.state = state
	return nil
}
