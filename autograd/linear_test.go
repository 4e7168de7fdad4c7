package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestLinearFixture(t *testing.T) {
	runFixture(t, "linear", plain(func(c *fixCase, in []*Variable) *Variable {
		if len(in) == 2 {
			return Linear(in[0], in[1], nil)
		}
		return Linear(in[0], in[1], in[2])
	}))
}

func TestLinearGradCheck(t *testing.T) {
	tests := []struct {
		name string
		x, w []int
		bias bool
	}{
		{"bias", []int{5, 4}, []int{3, 4}, true},
		{"nobias", []int{2, 3}, []int{4, 3}, false},
		{"3d", []int{2, 3, 4}, []int{2, 4}, true},
		{"big", []int{9, 33}, []int{17, 33}, true}, // takes the BLAS path
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []*tensor.Tensor{randT(uint64(i), 1, 0, tc.x...), randT(uint64(i+10), 1, 0, tc.w...)}
			if tc.bias {
				in = append(in, randT(uint64(i+20), 1, 0, tc.w[0]))
			}
			gradCheck(t, func(xs []*Variable) *Variable {
				if tc.bias {
					return Linear(xs[0], xs[1], xs[2])
				}
				return Linear(xs[0], xs[1], nil)
			}, in...)
		})
	}
}

// TestLinearAccumulatesIntoGrad checks that a second backward adds dW and db
// into the existing Grad buffers in place (no new buffer), as a training loop
// with ZeroGrad relies on.
func TestLinearAccumulatesIntoGrad(t *testing.T) {
	x := Const(randT(1, 1, 0, 4, 3))
	w := Param(randT(2, 1, 0, 2, 3))
	b := Param(randT(3, 1, 0, 2))
	require.NoError(t, SumAll(Linear(x, w, b)).Backward())
	gw, gb := w.Grad, b.Grad
	first := append([]float64(nil), gw.F64()...)
	firstB := append([]float64(nil), gb.F64()...)
	require.NoError(t, SumAll(Linear(x, w, b)).Backward())
	require.Same(t, gw, w.Grad)
	require.Same(t, gb, b.Grad)
	for i, v := range first {
		require.InDelta(t, 2*v, gw.F64()[i], 1e-12)
	}
	for i, v := range firstB {
		require.InDelta(t, 2*v, gb.F64()[i], 1e-12)
	}
	require.Nil(t, x.Grad)
}

func TestLinearBadShapesPanic(t *testing.T) {
	require.PanicsWithValue(t, "autograd: Linear: input shape [4 3] does not match weight shape [2 5]", func() {
		Linear(Const(tensor.New(tensor.Float32, 4, 3)), Param(tensor.New(tensor.Float32, 2, 5)), nil)
	})
}
