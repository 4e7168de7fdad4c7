package tensor

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRNGDeterminism(t *testing.T) {
	draw := func(g *RNG) []float64 {
		var out []float64
		out = append(out, values(Rand(g, Float32, 5))...)
		out = append(out, values(Randn(g, Float64, 5))...)
		out = append(out, values(g.Uniform(Float32, -2, 3, 5))...)
		out = append(out, g.Float64())
		for _, p := range g.Perm(6) {
			out = append(out, float64(p))
		}
		return out
	}
	a, b := draw(NewRNG(42)), draw(NewRNG(42))
	assert.Equal(t, a, b, "same seed, same stream")
	assert.NotEqual(t, a, draw(NewRNG(43)))

	// State round trip: a restored generator continues the same stream.
	g := NewRNG(7)
	_ = Rand(g, Float32, 3)
	st := g.State()
	want := draw(g)
	h := NewRNG(999)
	require.NoError(t, h.SetState(st))
	assert.Equal(t, want, draw(h))
	assert.Error(t, h.SetState([]byte("junk")))
}

func TestRNGDistributions(t *testing.T) {
	g := NewRNG(1)
	cases := []struct {
		name           string
		x              *Tensor
		lo, hi         float64
		mean, std, tol float64
	}{
		{"rand f32", Rand(g, Float32, 20000), 0, 1, 0.5, math.Sqrt(1.0 / 12), 0.02},
		{"uniform f64", g.Uniform(Float64, -3, 1, 20000), -3, 1, -1, 4 / math.Sqrt(12), 0.05},
		{"randn f32", Randn(g, Float32, 20000), math.Inf(-1), math.Inf(1), 0, 1, 0.03},
		{"normal f64", g.Normal(Float64, 2, 0.5, 20000), math.Inf(-1), math.Inf(1), 2, 0.5, 0.02},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := values(tc.x)
			var s, s2 float64
			for _, e := range v {
				require.True(t, e >= tc.lo && e < tc.hi, "value %v outside [%v, %v)", e, tc.lo, tc.hi)
				s += e
			}
			m := s / float64(len(v))
			for _, e := range v {
				s2 += (e - m) * (e - m)
			}
			assert.InDelta(t, tc.mean, m, tc.tol)
			assert.InDelta(t, tc.std, math.Sqrt(s2/float64(len(v))), tc.tol)
		})
	}
	for _, n := range []int{0, 1, 10} {
		t.Run(fmt.Sprintf("perm %d", n), func(t *testing.T) {
			p := g.Perm(n)
			slices.Sort(p)
			for i, v := range p {
				assert.Equal(t, i, v)
			}
		})
	}
}

// Float64s gives what as many Float64 calls give, across the state's
// regenerations (624 outputs each) and from any position in it: a second
// generator draws one at a time from the same seed.
func TestFloat64sMatchesFloat64(t *testing.T) {
	for _, lens := range [][]int{{1, 2000}, {311, 312, 313}, {5000}, {0, 7, 623, 624, 625}} {
		a, b := NewRNG(42), NewRNG(42)
		for _, n := range lens {
			got := make([]float64, n)
			a.Float64s(got)
			for i := range got {
				require.Equal(t, b.Float64(), got[i], "lengths %v: draw %d of %d", lens, i, n)
			}
		}
		// Both generators are at the same place afterwards.
		require.Equal(t, b.Random(), a.Random(), "lengths %v: next output", lens)
	}
}

// DropoutF32 (and DropoutF64) is the rule it documents, bit for bit, element by element
// from a second generator's Float64 draws: over more elements than one
// block of draws and one state (624 outputs), with infinities, NaN and
// negative values among x (a dropped one gives x·0), keep = 0 drawing
// nothing, and both generators at the same place afterwards.
func TestDropoutF32MatchesTheRule(t *testing.T) {
	x := Randn(NewRNG(3), Float32, 1500).F32()
	x[7], x[8], x[9], x[10] = float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -2
	for _, keep := range []float64{0.6, 1e-9, 1, 0} {
		scale := float32(0)
		if keep > 0 {
			scale = 1 / float32(keep)
		}
		a, b := NewRNG(77), NewRNG(77)
		y, mask := make([]float32, len(x)), make([]float32, len(x))
		a.DropoutF32(y, mask, x, keep, scale)
		for i, v := range x {
			var s float32
			if keep > 0 && b.Float64() < keep {
				s = scale
			}
			require.Equal(t, math.Float32bits(s), math.Float32bits(mask[i]), "keep %v: mask[%d]", keep, i)
			require.Equal(t, math.Float32bits(v*s), math.Float32bits(y[i]), "keep %v: y[%d]", keep, i)
		}
		require.Equal(t, b.Random(), a.Random(), "keep %v: next output", keep)
	}
	require.Panics(t, func() { NewRNG(1).DropoutF32(make([]float32, 3), make([]float32, 2), make([]float32, 3), 0.5, 2) })
	// DropoutF64 follows the same rule in float64.
	x64 := make([]float64, len(x))
	for i, v := range x {
		x64[i] = float64(v)
	}
	for _, keep := range []float64{0.6, 0} {
		a, b := NewRNG(78), NewRNG(78)
		y, mask := make([]float64, len(x64)), make([]float64, len(x64))
		a.DropoutF64(y, mask, x64, keep, 1/keep)
		for i, v := range x64 {
			var s float64
			if keep > 0 && b.Float64() < keep {
				s = 1 / keep
			}
			require.Equal(t, math.Float64bits(s), math.Float64bits(mask[i]), "float64 keep %v: mask[%d]", keep, i)
			require.Equal(t, math.Float64bits(v*s), math.Float64bits(y[i]), "float64 keep %v: y[%d]", keep, i)
		}
		require.Equal(t, b.Random(), a.Random(), "float64 keep %v: next output", keep)
	}
}
