package sim_test

import (
	"fmt"
	"testing"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// The elementwise ops on sim (tensor's binaryDevice and unaryDevice over
// kernels.cu) against the CPU: output and gradients, broadcasting
// included.
func TestElementwiseOpsOnSim(t *testing.T) {
	rng := tensor.NewRNG(4)
	a := tensor.Randn(rng, tensor.Float32, 3, 4, 5)
	pos := tensor.AddScalar(tensor.Rand(rng, tensor.Float32, 3, 4, 5), 0.5)
	row := tensor.AddScalar(tensor.Rand(rng, tensor.Float32, 4, 1), 0.5) // broadcasts over dims 0 and 2
	for _, tc := range []struct {
		name string
		f    func(xs []*autograd.Variable) *autograd.Variable
		xs   []*tensor.Tensor
	}{
		{"sub", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Sub(xs[0], xs[1]) }, []*tensor.Tensor{a, pos}},
		{"sub broadcast", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Sub(xs[0], xs[1]) }, []*tensor.Tensor{a, row}},
		{"mul broadcast", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Mul(xs[1], xs[0]) }, []*tensor.Tensor{a, row}},
		{"div", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Div(xs[0], xs[1]) }, []*tensor.Tensor{a, pos}},
		{"div broadcast", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Div(xs[0], xs[1]) }, []*tensor.Tensor{a, row}},
		{"add broadcast", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Add(xs[0], xs[1]) }, []*tensor.Tensor{a, row}},
		{"exp", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Exp(xs[0]) }, []*tensor.Tensor{a}},
		{"log", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Log(xs[0]) }, []*tensor.Tensor{pos}},
		{"sqrt", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Sqrt(xs[0]) }, []*tensor.Tensor{pos}},
		{"tanh", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Tanh(xs[0]) }, []*tensor.Tensor{a}},
		{"sigmoid", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Sigmoid(xs[0]) }, []*tensor.Tensor{a}},
		{"neg", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Neg(xs[0]) }, []*tensor.Tensor{a}},
	} {
		t.Run(fmt.Sprint(tc.name), func(t *testing.T) { requireSameOnSim(t, tc.f, 1e-5, tc.xs...) })
	}
}
