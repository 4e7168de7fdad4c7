package sim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// The ops along one axis and the pointwise gradients (tensor/op_grads.go
// and index.go over the kernels of kernels.cu's "Ops along one axis"
// section) against the CPU's table: output and every input's gradient.

func TestAxisOpsOnSim(t *testing.T) {
	rng := tensor.NewRNG(5)
	randn := func(shape ...int) *tensor.Tensor { return tensor.Randn(rng, tensor.Float32, shape...) }
	positive := func(shape ...int) *tensor.Tensor { return tensor.AddScalar(tensor.Abs(randn(shape...)), 0.5) }
	type op = func(xs []*autograd.Variable) *autograd.Variable
	cases := []struct {
		name string
		f    op
		tol  float64
		xs   []*tensor.Tensor
	}{
		{"gather-last", func(xs []*autograd.Variable) *autograd.Variable {
			return autograd.Gather(xs[0], 1, []int{2, 0, 4, 4})
		}, 1e-6, []*tensor.Tensor{randn(4, 5)}},
		{"gather-middle", func(xs []*autograd.Variable) *autograd.Variable {
			return autograd.Gather(xs[0], 1, []int{0, 2, 2, 1, 0, 0})
		}, 1e-6, []*tensor.Tensor{randn(2, 3, 3)}},
		{"max-0", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Max(xs[0], 0, false) }, 1e-6, []*tensor.Tensor{randn(7, 5)}},
		{"max-middle-keep", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Max(xs[0], 1, true) }, 1e-6, []*tensor.Tensor{randn(3, 6, 4)}},
		{"max-last", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Max(xs[0], -1, false) }, 1e-6, []*tensor.Tensor{randn(5, 9)}},
		{"concat-middle", func(xs []*autograd.Variable) *autograd.Variable {
			return autograd.Concat(1, xs...)
		}, 1e-6, []*tensor.Tensor{randn(2, 3, 4), randn(2, 1, 4), randn(2, 5, 4)}},
		{"stack", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Stack(1, xs...) }, 1e-6, []*tensor.Tensor{randn(3, 2), randn(3, 2)}},
		{"clamp", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Clamp(xs[0], -0.5, 0.75) }, 1e-6, []*tensor.Tensor{randn(6, 7)}},
		{"clamp-open", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Clamp(xs[0], 0, math.Inf(1)) }, 1e-6, []*tensor.Tensor{randn(33)}},
		{"pow-2", func(xs []*autograd.Variable) *autograd.Variable { return autograd.PowScalar(xs[0], 2) }, 1e-6, []*tensor.Tensor{randn(4, 5)}},
		{"pow-1.5", func(xs []*autograd.Variable) *autograd.Variable { return autograd.PowScalar(xs[0], 1.5) }, 1e-5, []*tensor.Tensor{positive(4, 5)}},
		{"sum-axes", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Sum(xs[0], []int{0, 2}, false) }, 1e-5, []*tensor.Tensor{randn(3, 4, 5)}},
		{"mean-keep", func(xs []*autograd.Variable) *autograd.Variable { return autograd.Mean(xs[0], []int{1}, true) }, 1e-5, []*tensor.Tensor{randn(3, 4, 5)}},
	}
	for _, r := range []autograd.Reduction{autograd.ReductionNone, autograd.ReductionSum, autograd.ReductionMean} {
		cases = append(cases, struct {
			name string
			f    op
			tol  float64
			xs   []*tensor.Tensor
		}{fmt.Sprint("bce-", r), func(xs []*autograd.Variable) *autograd.Variable {
			return autograd.BCEWithLogits(xs[0], xs[1], r)
		}, 1e-5, []*tensor.Tensor{tensor.MulScalar(randn(5, 7), 3), tensor.Sigmoid(randn(5, 7))}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { requireSameOnSim(t, c.f, c.tol, c.xs...) })
	}
}
