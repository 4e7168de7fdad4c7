package amp

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// ErrConfig marks an invalid GradScaler configuration or state.
var ErrConfig = errors.New("amp: invalid configuration")

// GradScalerConfig holds torch's GradScaler arguments. The zero value of
// each field means torch's default.
type GradScalerConfig struct {
	InitScale      float64 // default 2^16
	GrowthFactor   float64 // default 2
	BackoffFactor  float64 // default 0.5
	GrowthInterval int     // default 2000
	// Disabled makes every method a pass-through (torch's enabled=False),
	// so one training loop serves float32 and mixed precision.
	Disabled bool
}

func (c *GradScalerConfig) withDefaults() (GradScalerConfig, error) {
	d := *c
	if d.InitScale == 0 {
		d.InitScale = 65536
	}
	if d.GrowthFactor == 0 {
		d.GrowthFactor = 2
	}
	if d.BackoffFactor == 0 {
		d.BackoffFactor = 0.5
	}
	if d.GrowthInterval == 0 {
		d.GrowthInterval = 2000
	}
	switch {
	case !(d.InitScale > 0) || math.IsInf(d.InitScale, 0):
		return d, fmt.Errorf("%w: InitScale must be positive and finite, got %v", ErrConfig, d.InitScale)
	case !(d.GrowthFactor > 1):
		return d, fmt.Errorf("%w: GrowthFactor must be above 1, got %v", ErrConfig, d.GrowthFactor)
	case !(d.BackoffFactor > 0 && d.BackoffFactor < 1):
		return d, fmt.Errorf("%w: BackoffFactor must be in (0, 1), got %v", ErrConfig, d.BackoffFactor)
	case d.GrowthInterval < 1:
		return d, fmt.Errorf("%w: GrowthInterval must be at least 1, got %d", ErrConfig, d.GrowthInterval)
	}
	return d, nil
}

// GradScaler is torch's dynamic loss scaling for float16 training
// (torch.cuda.amp.GradScaler): the loss is multiplied by a scale before
// backward so that small gradients survive float16; before the optimizer
// step the gradients are divided by it again, and a step whose gradients
// hold an inf or NaN is skipped and the scale backed off. After
// GrowthInterval clean steps in a row the scale grows.
//
// With a process group (WithGroup), whether any gradient overflowed is
// all-reduced (max) over the ranks before the step, so every rank skips the
// same steps and keeps the same scale even when gradients are not
// all-reduced (local SGD, or parameters DDP does not own). A step is:
//
//	opt.ZeroGrad()
//	loss := lossFn(model.Forward(x))
//	if err := scaler.ScaleLoss(loss).Backward(); err != nil { ... }
//	if _, err := scaler.Step(ctx, opt); err != nil { ... } // unscales, skips on overflow
//	scaler.Update()
//
// Call Unscale before Step to clip the true gradients (as torch's
// unscale_ before clip_grad_norm_). A GradScaler is not safe for
// concurrent use.
type GradScaler struct {
	cfg     GradScalerConfig
	pg      backend.ProcessGroup
	scale   float32 // as torch, the scale is a float32
	tracker int     // clean steps since the last change
	// Per step: whether Unscale ran, and what it found.
	unscaled bool
	foundInf bool
	stepped  bool
}

// Option configures NewGradScaler.
type Option func(*GradScaler)

// WithGroup all-reduces the overflow flag over pg's ranks.
func WithGroup(pg backend.ProcessGroup) Option { return func(s *GradScaler) { s.pg = pg } }

// NewGradScaler makes a scaler; cfg's zero fields take torch's defaults.
func NewGradScaler(cfg GradScalerConfig, opts ...Option) (*GradScaler, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &GradScaler{cfg: c, scale: float32(c.InitScale)}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Scale is the current loss scale (1 when disabled).
func (s *GradScaler) Scale() float32 {
	if s.cfg.Disabled {
		return 1
	}
	return s.scale
}

// ScaleLoss returns loss multiplied by the current scale (torch's
// scaler.scale(loss)); backpropagate the result.
func (s *GradScaler) ScaleLoss(loss *autograd.Variable) *autograd.Variable {
	if s.cfg.Disabled {
		return loss
	}
	// autograd.Scale runs on the loss's device too (Mul by a constant
	// tensor has no device kernel), with the same float32 products.
	return autograd.Scale(loss, float64(s.scale))
}

// Unscale divides opt's gradients by the scale in place and records whether
// any was infinite or NaN, on any rank when a group is set (torch's
// unscale_). It may be called once per step, before Step.
func (s *GradScaler) Unscale(ctx context.Context, opt optim.Optimizer) error {
	if s.cfg.Disabled {
		return nil
	}
	if s.unscaled {
		return fmt.Errorf("%w: Unscale was already called since the last Update", ErrConfig)
	}
	if s.stepped {
		return fmt.Errorf("%w: Unscale after Step: call Update first", ErrConfig)
	}
	// inv_scale = scale.double().reciprocal().float(), as torch.
	inv := float32(1 / float64(s.scale))
	var grads []*tensor.Tensor
	for _, g := range opt.ParamGroups() {
		for _, p := range g.Params {
			if p.Grad != nil {
				grads = append(grads, p.Grad)
			}
		}
	}
	found, err := tensor.NonFiniteCheckAndUnscale(grads, inv)
	if err != nil {
		return fmt.Errorf("amp: unscale: %w", err)
	}
	if s.pg != nil && s.pg.Size() > 1 {
		flag := []float32{0}
		if found {
			flag[0] = 1
		}
		if err := s.pg.AllReduce(backend.Float32s(flag), backend.Max).Wait(ctx); err != nil {
			return fmt.Errorf("amp: all-reduce of the overflow flag: %w", err)
		}
		found = flag[0] != 0
	}
	s.unscaled, s.foundInf = true, found
	return nil
}

// Step unscales the gradients if Unscale has not run this step, then runs
// opt.Step unless a gradient overflowed; it reports whether the step was
// skipped (torch's scaler.step(optimizer)).
func (s *GradScaler) Step(ctx context.Context, opt optim.Optimizer) (skipped bool, err error) {
	if s.cfg.Disabled {
		return false, opt.Step()
	}
	if s.stepped {
		return false, fmt.Errorf("%w: Step was already called since the last Update", ErrConfig)
	}
	if !s.unscaled {
		if err := s.Unscale(ctx, opt); err != nil {
			return false, err
		}
	}
	s.stepped = true
	if s.foundInf {
		return true, nil
	}
	return false, opt.Step()
}

// Update adjusts the scale after a step (torch's scaler.update(), whose
// rule is the kernel amp_update_scale): an overflow multiplies it by
// BackoffFactor and restarts the count; GrowthInterval clean steps in a row
// multiply it by GrowthFactor, unless that would overflow float32.
func (s *GradScaler) Update() {
	if s.cfg.Disabled {
		return
	}
	s.scale, s.tracker = updateScale(s.scale, s.tracker, s.foundInf, s.cfg)
	s.unscaled, s.foundInf, s.stepped = false, false, false
}

// updateScale is torch's amp_update_scale kernel: the products are formed
// in double and rounded to the float32 scale.
func updateScale(scale float32, tracker int, foundInf bool, c GradScalerConfig) (float32, int) {
	if foundInf {
		return float32(float64(scale) * c.BackoffFactor), 0
	}
	successful := tracker + 1
	if successful == c.GrowthInterval {
		next := float32(float64(scale) * c.GrowthFactor)
		if !math.IsInf(float64(next), 0) && !math.IsNaN(float64(next)) {
			scale = next
		}
		return scale, 0
	}
	return scale, successful
}

// State is what a checkpoint keeps of a GradScaler (torch's
// scaler.state_dict()).
type State struct {
	Scale          float32 `json:"scale"`
	GrowthFactor   float64 `json:"growth_factor"`
	BackoffFactor  float64 `json:"backoff_factor"`
	GrowthInterval int     `json:"growth_interval"`
	GrowthTracker  int     `json:"_growth_tracker"`
}

// State returns the scaler's state for a checkpoint.
func (s *GradScaler) State() State {
	return State{Scale: s.scale, GrowthFactor: s.cfg.GrowthFactor, BackoffFactor: s.cfg.BackoffFactor,
		GrowthInterval: s.cfg.GrowthInterval, GrowthTracker: s.tracker}
}

// LoadState restores a state saved by State (torch's load_state_dict:
// the factors and interval come from the checkpoint too).
func (s *GradScaler) LoadState(st State) error {
	c := GradScalerConfig{InitScale: float64(st.Scale), GrowthFactor: st.GrowthFactor,
		BackoffFactor: st.BackoffFactor, GrowthInterval: st.GrowthInterval, Disabled: s.cfg.Disabled}
	if _, err := c.withDefaults(); err != nil || st.Scale == 0 {
		return fmt.Errorf("%w: GradScaler state %+v: %v", ErrConfig, st, err)
	}
	if st.GrowthTracker < 0 || st.GrowthTracker >= st.GrowthInterval {
		return fmt.Errorf("%w: GradScaler state: growth tracker %d outside [0, %d)", ErrConfig, st.GrowthTracker, st.GrowthInterval)
	}
	s.cfg.GrowthFactor, s.cfg.BackoffFactor, s.cfg.GrowthInterval = st.GrowthFactor, st.BackoffFactor, st.GrowthInterval
	s.scale, s.tracker = st.Scale, st.GrowthTracker
	s.unscaled, s.foundInf, s.stepped = false, false, false
	return nil
}
