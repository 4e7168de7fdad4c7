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

// GELUWithGradF32 gives GELUF32's outputs and GELUGradF32's gradient at
// gy = 1 (the C kernel and the Go loop each against their own single
// versions), NaN for NaN and the limits at ±Inf.
func TestGELUWithGradMatchesSeparateKernels(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	xs := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, nan, 20, -20, 1e6, -1e6, 15, -15, 1e-40, -1e-40}
	for i := 0; len(xs) < 5000; i++ {
		xs = append(xs, float32(i-2500)*0.0041)
	}
	ones := make([]float32, len(xs))
	for i := range ones {
		ones[i] = 1
	}
	for _, impl := range []struct {
		name               string
		both               func(y, g []float32)
		single, singleGrad func(d []float32)
	}{
		{"kernels", func(y, g []float32) { GELUWithGradF32(y, g, xs) },
			func(d []float32) { GELUF32(d, xs) }, func(d []float32) { GELUGradF32(d, ones, xs) }},
		{"Go loops", func(y, g []float32) { geluWithGradF32Go(y, g, xs) },
			func(d []float32) { geluF32Go(d, xs) }, func(d []float32) { geluGradF32Go(d, ones, xs) }},
	} {
		y, g := make([]float32, len(xs)), make([]float32, len(xs))
		impl.both(y, g)
		wy, wg := make([]float32, len(xs)), make([]float32, len(xs))
		impl.single(wy)
		impl.singleGrad(wg)
		for i, x := range xs {
			for _, c := range []struct {
				what      string
				got, want float32
			}{{"GELU", y[i], wy[i]}, {"GELU'", g[i], wg[i]}} {
				if c.want != c.want {
					require.True(t, c.got != c.got, "%s %s(%g) = %g, want NaN", impl.name, c.what, x, c.got)
					continue
				}
				if math.IsInf(float64(c.want), 0) {
					require.Equal(t, c.want, c.got, "%s %s(%g)", impl.name, c.what, x)
					continue
				}
				ulp := math.Abs(float64(math.Nextafter32(c.want, inf) - c.want))
				require.LessOrEqual(t, math.Abs(float64(c.got-c.want)), ulp, "%s %s(%g) = %g, want %g", impl.name, c.what, x, c.got, c.want)
			}
		}
		require.Equal(t, math.Float32bits(float32(math.Copysign(0, -1))), math.Float32bits(y[3]), "%s: GELU(-Inf) = -0", impl.name)
		require.Equal(t, []float32{1, 0}, g[2:4], "%s: GELU'(±Inf)", impl.name)
	}
}
