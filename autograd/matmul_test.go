package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestMatMulFixture(t *testing.T) {
	runFixture(t, "matmul", plain(func(_ *fixCase, in []*Variable) *Variable { return MatMul(in[0], in[1]) }))
}

func TestMatMulGradCheck(t *testing.T) {
	tests := []struct {
		name string
		a, b []int
	}{
		{"2d", []int{3, 4}, []int{4, 5}},
		{"batched", []int{2, 3, 4}, []int{2, 4, 5}},
		{"flat_b2d", []int{2, 3, 4}, []int{4, 5}},
		{"broadcast_a", []int{3, 4}, []int{2, 4, 5}},
		{"broadcast_both", []int{2, 1, 3, 4}, []int{3, 4, 2}},
		{"big", []int{24, 20}, []int{20, 30}}, // BLAS path
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return MatMul(xs[0], xs[1]) },
				randT(uint64(i), 1, 0, tc.a...), randT(uint64(i+9), 1, 0, tc.b...))
		})
	}
}

func TestMatMulAccumulatesIntoGrad(t *testing.T) {
	x := Const(randT(1, 1, 0, 2, 3, 4))
	w := Param(randT(2, 1, 0, 4, 2))
	require.NoError(t, SumAll(MatMul(x, w)).Backward())
	g := w.Grad
	first := append([]float64(nil), g.F64()...)
	require.NoError(t, SumAll(MatMul(x, w)).Backward())
	require.Same(t, g, w.Grad)
	for i, v := range first {
		require.InDelta(t, 2*v, g.F64()[i], 1e-12)
	}
}

func TestMatMulBadShapesPanic(t *testing.T) {
	require.PanicsWithValue(t, "autograd: MatMul: shapes [2 3] and [4 5] do not multiply (want [..., m, k] @ [..., k, n])", func() {
		MatMul(Const(tensor.New(tensor.Float32, 2, 3)), Const(tensor.New(tensor.Float32, 4, 5)))
	})
}
