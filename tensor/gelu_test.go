package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vectorised C kernels (cgo builds, from geluCMin elements) agree with
// the Go loops within one float32 ulp, and exactly on the special values.
func TestGELUKernelsMatchGoLoops(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	xs := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, nan, 20, -20, 1e6, -1e6, 15, -15, 1e-40, -1e-40}
	for i := 0; len(xs) < 5000; i++ {
		xs = append(xs, float32(i-2500)*0.0037)
	}
	gy := make([]float32, len(xs))
	for i := range gy {
		gy[i] = float32(i%7) - 3.25
	}
	for _, k := range []struct {
		name         string
		fast, goLoop func(dst []float32)
	}{
		{"GELU", func(d []float32) { GELUF32(d, xs) }, func(d []float32) { geluF32Go(d, xs) }},
		{"GELUGrad", func(d []float32) { GELUGradF32(d, gy, xs) }, func(d []float32) { geluGradF32Go(d, gy, xs) }},
	} {
		got, want := make([]float32, len(xs)), make([]float32, len(xs))
		k.fast(got)
		k.goLoop(want)
		for i := range xs {
			if math.IsNaN(float64(want[i])) {
				require.True(t, math.IsNaN(float64(got[i])), "%s(%v)", k.name, xs[i])
				continue
			}
			if i < 13 {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s(%v): %v vs %v", k.name, xs[i], got[i], want[i])
				continue
			}
			ulp := math.Abs(float64(math.Nextafter32(want[i], float32(math.Inf(1))) - want[i]))
			require.LessOrEqual(t, math.Abs(float64(got[i]-want[i])), ulp, "%s(%v): %v vs %v", k.name, xs[i], got[i], want[i])
		}
	}
}
