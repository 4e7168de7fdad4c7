package optim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// ones32 is a float32 tensor of ones (kept local so the tests depend only on
// the core tensor type).
func ones32(shape ...int) *tensor.Tensor {
	t := tensor.New(tensor.Float32, shape...)
	for i := range t.F32() {
		t.F32()[i] = 1
	}
	return t
}

type optCase struct {
	Name   string         `json:"name"`
	Kind   string         `json:"kind"`
	Config map[string]any `json:"config"`
	Groups []optGroup     `json:"groups"`
	Init   []fixTensor    `json:"init"`
	Steps  []optStep      `json:"steps"`
	State  map[string]any `json:"state"`
}

type optGroup struct {
	Params      []int   `json:"params"`
	LR          float64 `json:"lr"`
	WeightDecay float64 `json:"weight_decay"`
}

type optStep struct {
	Grads  []*fixTensor `json:"grads"`
	Params []fixTensor  `json:"params"`
}

func cfgF(c map[string]any, k string, def float64) float64 {
	if v, ok := c[k]; ok {
		return v.(float64)
	}
	return def
}

func cfgB(c map[string]any, k string) bool {
	v, ok := c[k]
	return ok && v.(bool)
}

// buildOptimizer makes the Go optimizer a fixture case describes.
func buildOptimizer(t *testing.T, oc optCase, ps []*autograd.Variable) Optimizer {
	t.Helper()
	c := oc.Config
	first := ps
	if oc.Groups != nil {
		first = nil
	}
	var opt Optimizer
	switch oc.Kind {
	case "SGD":
		o, err := NewSGD(first, SGDConfig{LR: cfgF(c, "lr", 0), Momentum: cfgF(c, "momentum", 0),
			Dampening: cfgF(c, "dampening", 0), WeightDecay: cfgF(c, "weight_decay", 0),
			Nesterov: cfgB(c, "nesterov"), Maximize: cfgB(c, "maximize")})
		require.NoError(t, err)
		for _, g := range oc.Groups {
			var gp []*autograd.Variable
			for _, i := range g.Params {
				gp = append(gp, ps[i])
			}
			require.NoError(t, o.AddParamGroup(ParamGroup{Params: gp, LR: g.LR, WeightDecay: g.WeightDecay}))
		}
		opt = o
	case "Adam", "AdamW":
		cfg := DefaultAdam()
		if oc.Kind == "AdamW" {
			cfg = DefaultAdamW()
		}
		cfg.LR = cfgF(c, "lr", cfg.LR)
		cfg.Beta1 = cfgF(c, "beta1", cfg.Beta1)
		cfg.Beta2 = cfgF(c, "beta2", cfg.Beta2)
		cfg.Eps = cfgF(c, "eps", cfg.Eps)
		cfg.WeightDecay = cfgF(c, "weight_decay", cfg.WeightDecay)
		cfg.AMSGrad = cfgB(c, "amsgrad")
		var err error
		if oc.Kind == "Adam" {
			opt, err = NewAdam(first, cfg)
		} else {
			opt, err = NewAdamW(first, cfg)
		}
		require.NoError(t, err)
	default:
		t.Fatalf("unknown kind %q", oc.Kind)
	}
	return opt
}

func TestOptimizersMatchTorch(t *testing.T) {
	var fx struct{ Cases []optCase }
	loadFixture(t, "optimizers.json", &fx)
	require.NotEmpty(t, fx.Cases)
	for _, oc := range fx.Cases {
		t.Run(oc.Name, func(t *testing.T) {
			ps := paramsFrom(oc.Init)
			opt := buildOptimizer(t, oc, ps)
			for s, st := range oc.Steps {
				for i, g := range st.Grads {
					if g == nil {
						ps[i].Grad = nil
						continue
					}
					ps[i].Grad = g.f32()
				}
				require.NoError(t, opt.Step())
				for i := range ps {
					requireClose(t, st.Params[i].Data, ps[i].Value.F32(), 1e-6, 1e-5,
						fmt.Sprintf("step %d param %d", s+1, i))
				}
			}
			// The state dict holds what torch's does, with the same values.
			sd := opt.StateDict()
			require.Equal(t, oc.Kind, sd.Kind)
			for k, v := range oc.State {
				switch w := v.(type) {
				case float64:
					require.Contains(t, sd.Scalars, k)
					require.Equal(t, w, sd.Scalars[k], k)
				case map[string]any:
					require.Contains(t, sd.Tensors, k)
					var want []float64
					for _, x := range w["data"].([]any) {
						want = append(want, x.(float64))
					}
					requireClose(t, want, sd.Tensors[k].F32(), 1e-6, 1e-4, k)
				}
			}
			for k := range sd.Tensors {
				require.Contains(t, oc.State, k, "Go has state torch lacks")
			}
		})
	}
}

// TestStateDictRoundTrip checks that an optimizer resumed from a state dict
// continues exactly like the original.
func TestStateDictRoundTrip(t *testing.T) {
	var fx struct{ Cases []optCase }
	loadFixture(t, "optimizers.json", &fx)
	for _, oc := range fx.Cases {
		t.Run(oc.Name, func(t *testing.T) {
			ps := paramsFrom(oc.Init)
			opt := buildOptimizer(t, oc, ps)
			setGrads := func(ps []*autograd.Variable, s int) {
				for i, g := range oc.Steps[s].Grads {
					if g == nil {
						ps[i].Grad = nil
					} else {
						ps[i].Grad = g.f32()
					}
				}
			}
			for s := 0; s < 2; s++ {
				setGrads(ps, s)
				require.NoError(t, opt.Step())
			}
			// Fresh params with the same values, fresh optimizer, load state.
			ps2 := make([]*autograd.Variable, len(ps))
			for i, p := range ps {
				ps2[i] = autograd.Param(p.Value.Clone())
			}
			opt2 := buildOptimizer(t, oc, ps2)
			for _, g := range opt2.ParamGroups() {
				g.LR = 12345 // must be overwritten by the load
			}
			require.NoError(t, opt2.LoadStateDict(opt.StateDict()))
			for s := 2; s < len(oc.Steps); s++ {
				setGrads(ps, s)
				setGrads(ps2, s)
				require.NoError(t, opt.Step())
				require.NoError(t, opt2.Step())
				for i := range ps {
					require.Equal(t, ps[i].Value.F32(), ps2[i].Value.F32(), "step %d param %d", s+1, i)
				}
			}
		})
	}
}

func TestLoadStateDictErrors(t *testing.T) {
	mk := func() []*autograd.Variable {
		return []*autograd.Variable{autograd.Param(tensor.New(tensor.Float32, 2, 3)), autograd.Param(tensor.New(tensor.Float32, 3))}
	}
	sgd, err := NewSGD(mk(), SGDConfig{LR: 0.1, Momentum: 0.9})
	require.NoError(t, err)
	for _, p := range sgd.ParamGroups()[0].Params {
		p.Grad = ones32(p.Value.Shape()...)
	}
	require.NoError(t, sgd.Step())
	good := sgd.StateDict()

	adam, err := NewAdam(mk(), DefaultAdam())
	require.NoError(t, err)
	other, err := NewSGD(mk()[:1], SGDConfig{LR: 0.1, Momentum: 0.9})
	require.NoError(t, err)

	badShape := NewStateDict("SGD")
	for k, v := range good.Scalars {
		badShape.Scalars[k] = v
	}
	badShape.Tensors["state.0.momentum_buffer"] = tensor.New(tensor.Float32, 5)

	tests := []struct {
		name string
		opt  Optimizer
		sd   *StateDict
		want string
	}{
		{"wrong kind", adam, good, `kind "SGD" loaded into Adam`},
		{"wrong param count", other, good, "group 0 has 2 parameters in the state dict, 1 in the optimizer"},
		{"mis-shaped state", sgd, badShape, "state.0.momentum_buffer is float32 [5]"},
		{"nil", sgd, nil, "nil state dict"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opt.LoadStateDict(tc.sd)
			require.ErrorIs(t, err, ErrStateDict)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestInvalidConfig(t *testing.T) {
	p := []*autograd.Variable{autograd.Param(tensor.New(tensor.Float32, 2))}
	tests := []struct {
		name string
		make func() error
	}{
		{"sgd negative lr", func() error { _, err := NewSGD(p, SGDConfig{LR: -1}); return err }},
		{"sgd nesterov without momentum", func() error { _, err := NewSGD(p, SGDConfig{LR: 1, Nesterov: true}); return err }},
		{"sgd nesterov with dampening", func() error {
			_, err := NewSGD(p, SGDConfig{LR: 1, Momentum: 0.9, Dampening: 0.1, Nesterov: true})
			return err
		}},
		{"adam beta1", func() error { c := DefaultAdam(); c.Beta1 = 1; _, err := NewAdam(p, c); return err }},
		{"adamw eps", func() error { c := DefaultAdamW(); c.Eps = -1; _, err := NewAdamW(p, c); return err }},
		{"duplicate param", func() error { _, err := NewSGD([]*autograd.Variable{p[0], p[0]}, SGDConfig{LR: 1}); return err }},
		// A literal that sets only the learning rate: betas and eps 0.
		{"adamw only lr", func() error { _, err := NewAdamW(p, AdamConfig{LR: 1e-3}); return err }},
		{"adam only lr and decay", func() error { _, err := NewAdam(p, AdamConfig{LR: 1e-3, WeightDecay: 0.1}); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.make(), ErrInvalidConfig)
		})
	}
	_, err := NewAdamW(p, AdamConfig{LR: 1e-3})
	require.ErrorContains(t, err, "AdamW beta1, beta2 and eps are all 0")
	require.ErrorContains(t, err, "DefaultAdamW()")
	c := DefaultAdam()
	c.Beta1 = 0 // betas (0, 0.999) with eps 1e-8 are torch's and fine
	_, err = NewAdam(p, c)
	require.NoError(t, err)
}

func TestStepBadGrad(t *testing.T) {
	p := autograd.Param(tensor.New(tensor.Float32, 2, 2))
	p.Grad = tensor.New(tensor.Float32, 3)
	o, err := NewSGD([]*autograd.Variable{p}, SGDConfig{LR: 1})
	require.NoError(t, err)
	require.ErrorIs(t, o.Step(), ErrBadGrad)
}

func TestZeroGradKeepsBuffers(t *testing.T) {
	p := autograd.Param(tensor.New(tensor.Float32, 4))
	p.Grad = ones32(4)
	buf := p.Grad
	o, err := NewAdamW([]*autograd.Variable{p}, DefaultAdamW())
	require.NoError(t, err)
	o.ZeroGrad()
	require.Same(t, buf, p.Grad)
	require.Equal(t, []float32{0, 0, 0, 0}, p.Grad.F32())
}

func TestStepFloat64(t *testing.T) {
	// float64 parameters take the same code path with float64 arithmetic.
	p := autograd.Param(tensor.FromF64([]float64{1, 2}, 2))
	p.Grad = tensor.FromF64([]float64{0.5, -1}, 2)
	o, err := NewSGD([]*autograd.Variable{p}, SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 0.1})
	require.NoError(t, err)
	require.NoError(t, o.Step())
	require.InDeltaSlice(t, []float64{1 - 0.1*(0.5+0.1), 2 - 0.1*(-1+0.2)}, p.Value.F64(), 1e-15)
}
