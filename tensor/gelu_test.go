package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vectorised C kernels (cgo builds, from geluCMin elements) give the Go
// loops' bits: the same float32 operations, rounded the same way.
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
		{"GELUWithGrad's GELU", func(d []float32) { GELUWithGradF32(d, make([]float32, len(xs)), xs) },
			func(d []float32) { geluWithGradF32Go(d, make([]float32, len(xs)), xs) }},
		{"GELUWithGrad's derivative", func(d []float32) { GELUWithGradF32(make([]float32, len(xs)), d, xs) },
			func(d []float32) { geluWithGradF32Go(make([]float32, len(xs)), d, xs) }},
	} {
		got, want := make([]float32, len(xs)), make([]float32, len(xs))
		k.fast(got)
		k.goLoop(want)
		for i := range xs {
			if math.IsNaN(float64(want[i])) {
				require.True(t, math.IsNaN(float64(got[i])), "%s(%v)", k.name, xs[i])
				continue
			}
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s(%v): %v vs %v", k.name, xs[i], got[i], want[i])
		}
	}
}

// GELUWithGradF32's GELU is GELUF32's, bit for bit (one algorithm), and
// the backward it serves, gy times the rounded derivative, stays within
// one ulp of the terms of GELUGradF32's single rounding.
func TestGELUWithGradMatchesGELU(t *testing.T) {
	var xs, gy []float32
	for i := range 20000 {
		xs = append(xs, float32(i-10000)*0.00173)
		gy = append(gy, float32(i%13)*0.37-2.1)
	}
	for _, n := range []int{7, len(xs)} { // the Go loop, the C kernel
		y, want := make([]float32, n), make([]float32, n)
		d, gx, wantGx := make([]float32, n), make([]float32, n), make([]float32, n)
		GELUWithGradF32(y, d, xs[:n])
		GELUF32(want, xs[:n])
		for i := range n {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(y[i]), "GELU(%v): %v vs %v", xs[i], y[i], want[i])
		}
		GELUBackwardF32(gx, gy[:n], d)
		GELUGradF32(wantGx, gy[:n], xs[:n])
		for i := range n {
			_, scale := refGELUGrad(float64(xs[i]))
			tol := ulp32(max(math.Abs(float64(wantGx[i])), math.Abs(float64(gy[i]))*scale))
			require.LessOrEqual(t, math.Abs(float64(gx[i]-wantGx[i])), tol, "grad at %v, gy %v: %v vs %v", xs[i], gy[i], gx[i], wantGx[i])
		}
	}
}

// BenchmarkGELUWithGradF32 runs a GPT MLP's GELU forward (its value and
// derivative) over [2048, 512], from memory as in a step.
func BenchmarkGELUWithGradF32(b *testing.B) {
	const n = 2048 * 512
	xs := Randn(NewRNG(1), Float32, n).F32()
	y, d := make([]float32, n), make([]float32, n)
	for b.Loop() {
		GELUWithGradF32(y, d, xs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
}

// GELUInPlaceWithGrad gives GELUWithGradF32's values, in place, and its
// derivative; float64 and a transposed view are left alone (nil).
func TestGELUInPlaceWithGrad(t *testing.T) {
	x := Randn(NewRNG(3), Float32, 7, 19)
	y, d := make([]float32, x.Numel()), make([]float32, x.Numel())
	GELUWithGradF32(y, d, x.F32())
	g := GELUInPlaceWithGrad(x)
	require.NotNil(t, g)
	require.Equal(t, y, x.F32())
	require.Equal(t, d, g.F32())
	require.Equal(t, x.Shape(), g.Shape())

	x64 := Randn(NewRNG(4), Float64, 5)
	before := append([]float64(nil), x64.F64()...)
	require.Nil(t, GELUInPlaceWithGrad(x64))
	require.Equal(t, before, x64.F64())
	v := Randn(NewRNG(5), Float32, 3, 4).T()
	require.Nil(t, GELUInPlaceWithGrad(v))
}

// GELUToBF16WithGrad gives RoundToBF16 of GELUWithGradF32's values, and
// its derivative, as matrices of x's rows; over more than one of the
// kernel's 1024-value blocks, and a tail. float64 is left alone (nil).
func TestGELUToBF16WithGrad(t *testing.T) {
	x := Randn(NewRNG(6), Float32, 3, 5, 97)
	y, d := make([]float32, x.Numel()), make([]float32, x.Numel())
	GELUWithGradF32(y, d, x.F32())
	want := RoundToBF16(y, 15, 97).Halves()
	h, g := GELUToBF16WithGrad(x)
	require.Equal(t, 15, h.Rows())
	require.Equal(t, 97, h.Cols())
	require.Equal(t, want, h.Halves())
	require.Equal(t, []int{15, 97}, g.Shape())
	require.Equal(t, d, g.F32())
	h, g = GELUToBF16WithGrad(Randn(NewRNG(7), Float64, 4))
	require.Nil(t, h)
	require.Nil(t, g)
}
