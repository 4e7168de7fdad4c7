package optim

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// foreachRun trains parameters of dtype dt for five steps from fixed values
// and gradients, some parameters going without a gradient at some steps
// (so that Adam's step counts differ within a group), and returns the
// parameters' elements as float64.
func foreachRun(t *testing.T, dt tensor.DType, mk func([]*autograd.Variable) (Optimizer, error)) [][]float64 {
	shapes := [][]int{{1}, {7}, {17, 241}, {4097}, {3, 5}}
	rng := tensor.NewRNG(3)
	ps := make([]*autograd.Variable, len(shapes))
	for i, s := range shapes {
		ps[i] = autograd.Param(tensor.Randn(rng, dt, s...))
	}
	opt, err := mk(ps)
	require.NoError(t, err)
	for step := range 5 {
		for i, s := range shapes {
			ps[i].Grad = tensor.Randn(rng, dt, s...)
			if (i+step)%4 == 1 {
				ps[i].Grad = nil
			}
		}
		require.NoError(t, opt.Step())
	}
	out := make([][]float64, len(ps))
	for i, p := range ps {
		if dt == tensor.Float64 {
			out[i] = append([]float64(nil), p.Value.F64()...)
			continue
		}
		for _, v := range p.Value.F32() {
			out[i] = append(out[i], float64(v))
		}
	}
	return out
}

// On the host the multi-tensor path (Foreach on, and auto) gives the
// per-parameter path's parameters bit for bit, for every option, in
// float32 and float64, over groups and step counts that differ.
func TestForeachMatchesPerParameter(t *testing.T) {
	adam := func(kind string, cfg AdamConfig) func(Foreach) func([]*autograd.Variable) (Optimizer, error) {
		return func(f Foreach) func([]*autograd.Variable) (Optimizer, error) {
			return func(ps []*autograd.Variable) (Optimizer, error) {
				c := cfg
				c.Foreach = f
				if kind == "AdamW" {
					return NewAdamWGroups(DecayGroups(ps, 1e-2, 0.1), c)
				}
				return NewAdam(ps, c)
			}
		}
	}
	sgd := func(cfg SGDConfig) func(Foreach) func([]*autograd.Variable) (Optimizer, error) {
		return func(f Foreach) func([]*autograd.Variable) (Optimizer, error) {
			return func(ps []*autograd.Variable) (Optimizer, error) {
				c := cfg
				c.Foreach = f
				o, err := NewSGD(ps[:2], c)
				if err != nil {
					return nil, err
				}
				return o, o.AddParamGroup(ParamGroup{Params: ps[2:], LR: c.LR / 2, WeightDecay: 0.03})
			}
		}
	}
	cases := []struct {
		name string
		mk   func(Foreach) func([]*autograd.Variable) (Optimizer, error)
	}{
		{"adamw", adam("AdamW", AdamConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})},
		{"adam l2 amsgrad maximize", adam("Adam", AdamConfig{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.05, AMSGrad: true, Maximize: true})},
		{"sgd", sgd(SGDConfig{LR: 0.1})},
		{"sgd momentum", sgd(SGDConfig{LR: 0.1, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01})},
		{"sgd nesterov maximize", sgd(SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true, Maximize: true})},
	}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				want := foreachRun(t, dt, tc.mk(ForeachOff))
				for _, f := range []Foreach{ForeachOn, ForeachAuto} {
					got := foreachRun(t, dt, tc.mk(f))
					for i := range want {
						for j := range want[i] {
							if math.Float64bits(got[i][j]) != math.Float64bits(want[i][j]) {
								t.Fatalf("foreach %v: parameter %d element %d: %v, per parameter %v", f, i, j, got[i][j], want[i][j])
							}
						}
					}
				}
			})
		}
	}
}

// A bad gradient anywhere in a group fails the multi-tensor step before any
// parameter moves, naming the parameter; an unknown Foreach is a
// configuration error.
func TestForeachErrors(t *testing.T) {
	a := autograd.Param(tensor.Ones(tensor.Float32, 3))
	b := autograd.Param(tensor.Ones(tensor.Float32, 4))
	a.Grad, b.Grad = tensor.Ones(tensor.Float32, 3), tensor.Ones(tensor.Float32, 5)
	o, err := NewAdamW([]*autograd.Variable{a, b}, AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Foreach: ForeachOn})
	require.NoError(t, err)
	err = o.Step()
	require.ErrorIs(t, err, ErrBadGrad)
	require.ErrorContains(t, err, "parameter 1")
	require.Equal(t, []float32{1, 1, 1}, a.Value.F32(), "nothing moved")
	_, err = NewAdam(nil, AdamConfig{LR: 0.1, Foreach: 7})
	require.True(t, errors.Is(err, ErrInvalidConfig), "%v", err)
	_, err = NewSGD(nil, SGDConfig{LR: 0.1, Foreach: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
