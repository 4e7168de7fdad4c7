package reduce

import (
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDivideIntoMatchesScalar checks that the vector AVG division (a
// multiply for powers of two) is bit-identical to dividing element by
// element, so ranks agree whichever kernel they run.
func TestDivideIntoMatchesScalar(t *testing.T) {
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
		math.SmallestNonzeroFloat32, 3 * math.SmallestNonzeroFloat32, math.MaxFloat32, 1e-38}
	rng := rand.New(rand.NewPCG(3, 4))
	val := func() float64 {
		if rng.IntN(5) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
	}
	for _, d := range []int{1, 2, 3, 4, 7, 8, 64} {
		for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 33, 257} {
			for _, off := range []int{0, 1} {
				t.Run(fmt.Sprintf("d=%d/n=%d/off=%d", d, n, off), func(t *testing.T) {
					x32 := make([]float32, n+off)[off:]
					x64 := make([]float64, n+off)[off:]
					for i := range x32 {
						x32[i], x64[i] = float32(val()), val()
					}
					want32, want64 := append([]float32(nil), x32...), append([]float64(nil), x64...)
					for i := range want32 {
						want32[i] /= float32(d)
						want64[i] /= float64(d)
					}
					Divide(backend.Float32s(x32), d)
					Divide(backend.Float64s(x64), d)
					for i := range x32 {
						if want32[i] != want32[i] {
							require.True(t, x32[i] != x32[i], "f32 element %d", i)
						} else {
							require.Equal(t, math.Float32bits(want32[i]), math.Float32bits(x32[i]), "f32 element %d", i)
						}
						if want64[i] != want64[i] {
							require.True(t, x64[i] != x64[i], "f64 element %d", i)
						} else {
							require.Equal(t, math.Float64bits(want64[i]), math.Float64bits(x64[i]), "f64 element %d", i)
						}
					}
				})
			}
		}
	}
}

// BenchmarkDivideInto is AVG's division over the MLP's 2.7 MB of gradients.
func BenchmarkDivideInto(b *testing.B) {
	x := make([]float32, 669706)
	for _, d := range []int{2, 3} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				Divide(backend.Float32s(x), d)
			}
		})
	}
}
