package tensor

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCreation(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			assert.Equal(t, []float64{1, 1, 1, 1, 1, 1}, values(Ones(dt, 2, 3)))
			assert.Equal(t, []float64{2.5, 2.5}, values(Full(dt, 2.5, 2)))
			assert.Equal(t, []float64{0, 0}, values(Zeros(dt, 1, 2)))
			assert.Equal(t, []float64{0, 1, 2, 3}, values(Arange(dt, 0, 4, 1)))
			assert.Equal(t, []float64{1, 1.5, 2, 2.5}, values(Arange(dt, 1, 3, 0.5)))
			assert.Equal(t, []float64{5, 3}, values(Arange(dt, 5, 1, -2)))
			assert.Equal(t, 0, Arange(dt, 3, 1, 1).Numel())
			s := Scalar(dt, 4)
			assert.Equal(t, 0, s.Dim())
			assert.Equal(t, 4.0, s.Item())
			assert.Equal(t, dt, OnesLike(s).DType())
		})
	}
	x := FromF32([]float32{1.5, -2}, 2)
	assert.Equal(t, []float64{1.5, -2}, AsType(x, Float64).F64())
	assert.Equal(t, []float32{1.5, -2}, AsType(AsType(x, Float64), Float32).F32())
	requirePanics(t, func() { Arange(Float32, 0, 1, 0) }, "Arange")
}

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

func TestInPlace(t *testing.T) {
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			dst := New(dt, 2, 3)
			CopyFrom(dst, Arange(dt, 0, 6, 1).Reshape(2, 3))
			assert.Equal(t, []float64{0, 1, 2, 3, 4, 5}, values(dst))

			AddInto(dst, Full(dt, 10, 3)) // row broadcast
			assert.Equal(t, []float64{10, 11, 12, 13, 14, 15}, values(dst))

			Axpy(dst, -2, Ones(dt, 2, 3))
			assert.Equal(t, []float64{8, 9, 10, 11, 12, 13}, values(dst))

			ScaleInto(dst, 0.5)
			assert.Equal(t, []float64{4, 4.5, 5, 5.5, 6, 6.5}, values(dst))

			// Into a strided view: only the view's elements change.
			col := Narrow(dst, 1, 1, 1)
			CopyFrom(col, Full(dt, -1, 2, 1))
			Axpy(col, 3, Full(dt, 1, 1))
			ScaleInto(dst.T(), 2)
			assert.Equal(t, []float64{8, 4, 10, 11, 4, 13}, values(dst))

			Fill(dst.T(), 7)
			assert.Equal(t, []float64{7, 7, 7, 7, 7, 7}, values(dst))
			Fill(dst, 0)
			assert.Equal(t, []float64{0, 0, 0, 0, 0, 0}, values(dst))
		})
	}
	requirePanics(t, func() { AddInto(New(Float32, 2, 3), New(Float32, 3, 3)) }, "Axpy", "[3 3]", "[2 3]")
	requirePanics(t, func() { CopyFrom(New(Float32, 2), New(Float64, 2)) }, "CopyFrom", "float32", "float64")
}

func TestInPlaceAllocatesNothing(t *testing.T) {
	p, g := New(Float32, 512, 512), Ones(Float32, 512, 512)
	b := Ones(Float32, 512)
	cases := map[string]func(){
		"Axpy":      func() { Axpy(p, -0.01, g) },
		"AddInto":   func() { AddInto(p, g) },
		"ScaleInto": func() { ScaleInto(p, 0.9) },
		"Fill":      func() { Fill(p, 0) },
		"CopyFrom":  func() { CopyFrom(p, g) },
		"bias add":  func() { AddInto(p, b) },
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) { assert.Zero(t, testing.AllocsPerRun(5, fn)) })
	}
}

func TestDenseRoundTrip(t *testing.T) {
	x := seqTensor(Float32, 2, 3)
	d := x.T().Dense()
	assert.Equal(t, []int{3, 2}, []int(d.Shape()))
	y, err := FromDense(d)
	require.NoError(t, err)
	assert.Equal(t, values(x.T()), values(y))
}
