package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// refReduce sums g (shape gs) into shape by brute force.
func refReduce(g []float64, gs, shape []int) []float64 {
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]float64, n)
	idx := make([]int, len(gs))
	lead := len(gs) - len(shape)
	for k := range g {
		rem := k
		for d := len(gs) - 1; d >= 0; d-- {
			idx[d] = rem % gs[d]
			rem /= gs[d]
		}
		o := 0
		for i, d := range shape {
			v := idx[lead+i]
			if d == 1 {
				v = 0
			}
			o = o*d + v
		}
		out[o] += g[k]
	}
	return out
}

func TestReduceToShapeAndBroadcastTo(t *testing.T) {
	tests := []struct {
		name      string
		gs, shape []int
	}{
		{"same", []int{2, 3}, []int{2, 3}},
		{"bias", []int{4, 3}, []int{3}},
		{"col", []int{4, 3}, []int{4, 1}},
		{"scalar", []int{2, 3, 4}, []int{}},
		{"one", []int{2, 3, 4}, []int{1}},
		{"mid", []int{2, 3, 4}, []int{2, 1, 4}},
		{"outer_inner", []int{2, 3, 4}, []int{1, 3, 1}},
		{"lead_and_one", []int{5, 2, 3, 4}, []int{2, 1, 4}},
		{"unit_dims", []int{2, 1, 3}, []int{1, 1, 3}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := randT(uint64(i), 1, 0, tc.gs...)
			want := refReduce(g.F64(), tc.gs, tc.shape)
			got := reduceToShape(g, tc.shape, "test")
			require.Equal(t, tc.shape, nonNilShape(got.Shape()))
			require.InDeltaSlice(t, want, got.F64(), 1e-12)

			g32 := to32T(g)
			got32 := reduceToShape(g32, tc.shape, "test")
			require.InDeltaSlice(t, want, toF64(got32), 1e-5)

			// reduceInto adds.
			dst := got.Clone()
			reduceInto(dst, g, "test")
			for k := range want {
				require.InDelta(t, 2*want[k], dst.F64()[k], 1e-12)
			}

			// broadcastTo is the adjoint: <broadcast(h), g> == <h, reduce(g)>.
			h := randT(uint64(i+100), 1, 0, tc.shape...)
			b := broadcastTo(h, tc.gs)
			require.Equal(t, tc.gs, b.Shape())
			lhs, rhs := 0.0, 0.0
			for k, v := range b.F64() {
				lhs += v * g.F64()[k]
			}
			for k, v := range h.F64() {
				rhs += v * want[k]
			}
			require.InDelta(t, lhs, rhs, 1e-9)
		})
	}
}

func TestReduceToShapeBadShapePanics(t *testing.T) {
	require.Panics(t, func() { reduceToShape(tensor.New(tensor.Float32, 2, 3), []int{2}, "op") })
	require.Panics(t, func() { reduceToShape(tensor.New(tensor.Float32, 3), []int{2, 3}, "op") })
}
