package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// reluSpecials are the values where a vector max or compare could differ
// from the scalar definition.
var reluSpecials = []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)),
	float32(math.Inf(-1)), float32(math.NaN()), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32}

func reluInputs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		if rng.IntN(4) == 0 {
			x[i] = reluSpecials[rng.IntN(len(reluSpecials))]
		} else {
			x[i] = float32(rng.NormFloat64())
		}
	}
	return x
}

// sameBits compares float32 slices bit for bit, except that any NaN equals
// any NaN.
func sameBits(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		w, g := want[i], got[i]
		if w != w && g != g {
			continue
		}
		require.Equalf(t, math.Float32bits(w), math.Float32bits(g), "%s: element %d: want %v got %v", msg, i, w, g)
	}
}

func TestReLUF32MatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 1027} {
		for _, off := range []int{0, 1, 3} { // unaligned starts
			t.Run(fmt.Sprintf("n=%d/off=%d", n, off), func(t *testing.T) {
				x := reluInputs(rng, n+off)[off:]
				gy := reluInputs(rng, n+off)[off:]
				want := make([]float32, n)
				for i, v := range x {
					if !(v < 0) {
						want[i] = v
					}
				}
				got := make([]float32, n)
				ReLUF32(got, x)
				sameBits(t, want, got, "ReLUF32")

				wantG := make([]float32, n)
				for i := range got {
					if got[i] > 0 {
						wantG[i] = gy[i]
					}
				}
				gotG := make([]float32, n)
				ReLUBackwardF32(gotG, gy, got)
				sameBits(t, wantG, gotG, "ReLUBackwardF32")

				inPlace := append([]float32(nil), x...)
				ReLUF32(inPlace, inPlace)
				sameBits(t, want, inPlace, "ReLUF32 in place")
			})
		}
	}
}

func TestReLUF32LengthMismatchPanics(t *testing.T) {
	require.PanicsWithValue(t, "tensor: ReLUF32: length mismatch 3 vs 4", func() {
		ReLUF32(make([]float32, 3), make([]float32, 4))
	})
	require.Panics(t, func() { ReLUBackwardF32(make([]float32, 3), make([]float32, 3), make([]float32, 2)) })
}

// BenchmarkReLU is forward and backward at the MLP's hidden activation
// (64x512).
func BenchmarkReLU(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, gy := reluInputs(rng, 64*512), reluInputs(rng, 64*512)
	y, gx := make([]float32, len(x)), make([]float32, len(x))
	b.Run("fwd", func(b *testing.B) {
		for b.Loop() {
			ReLUF32(y, x)
		}
	})
	b.Run("bwd", func(b *testing.B) {
		for b.Loop() {
			ReLUBackwardF32(gx, gy, y)
		}
	})
	b.Run("scalar-fwd", func(b *testing.B) {
		for b.Loop() {
			for i, v := range x {
				if v > 0 {
					y[i] = v
				} else {
					y[i] = 0
				}
			}
		}
	})
}
