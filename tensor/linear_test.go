package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// LinearBackwardWith overwrites fresh gradient buffers whole (BLAS's beta
// 0 semantics, the bias sums cleared): buffers full of NaN, as an
// uninitialized block from the cache may be, give the gradients of zeroed
// ones.
func TestLinearBackwardOverwritesFreshBuffers(t *testing.T) {
	rng := NewRNG(2)
	x, w, gy := Randn(rng, Float32, 5, 7), Randn(rng, Float32, 3, 7), Randn(rng, Float32, 5, 3)
	for _, p := range []Precision{PrecisionFloat32, PrecisionBFloat16} {
		want := []*Tensor{New(Float32, 5, 7), New(Float32, 3, 7), New(Float32, 3)}
		LinearBackwardWith(gy, x, w, want[0], want[1], want[2], false, false, false, p)
		got := []*Tensor{New(Float32, 5, 7), New(Float32, 3, 7), New(Float32, 3)}
		for _, g := range got {
			Fill(g, math.NaN())
		}
		LinearBackwardWith(gy, x, w, got[0], got[1], got[2], false, false, false, p)
		for i := range want {
			require.Equal(t, want[i].F32(), got[i].F32(), "precision %v, gradient %d", p, i)
		}
	}
}
