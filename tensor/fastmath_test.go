package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The references are float64 math, evaluated on the float32 input. GELU's
// uses Erfc rather than 1+Erf: the latter cancels to 0 below x ≈ -8 in
// float64 too, so it would not be a reference for the left tail.
const fmInvSqrt2, fmInvSqrt2Pi = 0.70710678118654752440, 0.39894228040143267794

func refExp(x float64) float64     { return math.Exp(x) }
func refSigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func refTanh(x float64) float64    { return math.Tanh(x) }
func refGELU(x float64) float64 {
	if math.IsInf(x, -1) {
		return math.Copysign(0, -1) // the limit; the formula gives -Inf·0
	}
	return 0.5 * x * math.Erfc(-x*fmInvSqrt2)
}
func refGELUGrad(x float64) (g, scale float64) {
	if math.IsInf(x, 0) {
		return max(0, math.Copysign(1, x)), 1 // the limits: 1 at +Inf, 0 at -Inf
	}
	cdf, xpdf := 0.5*math.Erfc(-x*fmInvSqrt2), x*fmInvSqrt2Pi*math.Exp(-0.5*x*x)
	return cdf + xpdf, math.Abs(cdf) + math.Abs(xpdf)
}

// ulp32 is the spacing of float32 values at |w| (2**-149 in the subnormals).
func ulp32(w float64) float64 {
	_, e := math.Frexp(math.Abs(w))
	return math.Ldexp(1, max(e-24, -149))
}

// ulpErr is |got - want| in float32 ulps of want. A float32 infinity counts
// as ±2**128, the next power of two after MaxFloat32, so that rounding just
// past the overflow threshold is an ordinary one-ulp error; a want that
// rounds to infinity needs that infinity. NaN must meet NaN.
func ulpErr(got float32, want float64) float64 {
	g := float64(got)
	switch {
	case math.IsNaN(want) || math.IsNaN(g):
		if math.IsNaN(want) && math.IsNaN(g) {
			return 0
		}
		return math.Inf(1)
	case math.IsInf(float64(float32(want)), 0): // past float32's range, overflow is exact
		if g == float64(float32(want)) {
			return 0
		}
		return math.Inf(1)
	case math.IsInf(g, 0):
		g = math.Copysign(math.Ldexp(1, 128), g)
	}
	return math.Abs(g-want) / ulp32(want)
}

type fastKernel struct {
	name  string
	fast  func(dst, src []float32)
	ref   func(float64) float64
	dense float32 // |x| up to which every stride-th bit pattern is checked
	ulps  float64 // the bound on the error
}

var fastKernels = []fastKernel{
	{"Exp", ExpF32, refExp, 110, 4},
	{"Sigmoid", SigmoidF32, refSigmoid, 120, 4},
	{"Tanh", TanhF32, refTanh, 20, 4},
	// GELU's arithmetic is float32 (geluParts), and reaches about 7 ulps.
	{"GELU", GELUF32, refGELU, 20, 8},
}

// sweepInputs calls fn with batches of float32 inputs: every stride-th bit
// pattern of both signs from 0 (through the subnormals) up to dense, every
// 10007th beyond it up to MaxFloat32, and the special values.
func sweepInputs(dense float32, stride uint32, fn func(xs []float32)) {
	const batch = 1 << 16
	xs := make([]float32, 0, batch)
	flush := func() {
		if len(xs) > 0 {
			fn(xs)
			xs = xs[:0]
		}
	}
	add := func(v float32) {
		xs = append(xs, v)
		if len(xs) == batch {
			flush()
		}
	}
	top, inf := math.Float32bits(dense), math.Float32bits(float32(math.Inf(1)))
	for _, sign := range []uint32{0, 1 << 31} {
		for b := uint32(0); b <= top; b += stride {
			add(math.Float32frombits(b | sign))
		}
		for b := top; b < inf; b += 10007 {
			add(math.Float32frombits(b | sign))
		}
		add(math.Float32frombits(inf - 1 | sign)) // ±MaxFloat32
		add(math.Float32frombits(1 | sign))       // ±smallest subnormal
	}
	for _, v := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00000), math.Float32frombits(0x7f800001)} {
		add(v)
	}
	flush()
}

func sweepStride() uint32 {
	if testing.Short() {
		return 9973
	}
	return 97
}

// TestFastMathAccuracy checks the kernels against float64 math over a dense
// sweep of float32 inputs: at most 4 ulps anywhere for the kernels whose
// arithmetic is float64 (they reach about 1), 8 for GELU's float32,
// NaN for NaN.
func TestFastMathAccuracy(t *testing.T) {
	for _, k := range fastKernels {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel() // tens of millions of float64 references each
			var worst float64
			var worstX float32
			n := 0
			sweepInputs(k.dense, sweepStride(), func(xs []float32) {
				got := make([]float32, len(xs))
				k.fast(got, xs)
				for i, x := range xs {
					if e := ulpErr(got[i], k.ref(float64(x))); !(e <= worst) {
						worst, worstX = e, x
					}
				}
				n += len(xs)
			})
			t.Logf("%s: %d inputs, max error %.3f ulp at x = %g", k.name, n, worst, worstX)
			require.LessOrEqual(t, worst, k.ulps, "%s: %.3f ulp at x = %g (bits %#x)", k.name, worst, worstX, math.Float32bits(worstX))
		})
	}
}

// The gradient Φ(x) + xφ(x) cancels around its root at x ≈ -0.75, where no
// float32 evaluation can be accurate relative to the result; the bound there
// is ulps of the terms' magnitude, which is what float32 itself can resolve:
// 8 of them, as for GELU (its arithmetic is float32).
// GELUWithGradF32's derivative output is held to the same bound.
func TestGELUGradF32Accuracy(t *testing.T) {
	ones := func(n int) []float32 {
		gy := make([]float32, n)
		for i := range gy {
			gy[i] = 1
		}
		return gy
	}
	for _, k := range []struct {
		name string
		grad func(got, xs []float32)
	}{
		{"GELUGradF32", func(got, xs []float32) { GELUGradF32(got, ones(len(xs)), xs) }},
		{"GELUWithGradF32", func(got, xs []float32) { GELUWithGradF32(make([]float32, len(xs)), got, xs) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			geluGradAccuracy(t, k.grad)
		})
	}
}

func geluGradAccuracy(t *testing.T, grad func(got, xs []float32)) {
	var worst, worstRel float64
	var worstX float32
	sweepInputs(20, sweepStride(), func(xs []float32) {
		got := make([]float32, len(xs))
		grad(got, xs)
		for i, x := range xs {
			want, scale := refGELUGrad(float64(x))
			e := ulpErr(got[i], want)
			if math.IsNaN(want) || math.IsInf(e, 0) {
				require.True(t, e == 0, "x = %g: got %g want %g", x, got[i], want)
				continue
			}
			// Error in ulps of max(|result|, 2**-24·(|Φ| + |xφ|)).
			rel := e * ulp32(want) / max(ulp32(want), 0x1p-24*scale)
			if rel > worstRel {
				worstRel, worstX = rel, x
			}
			worst = max(worst, rel)
		}
	})
	t.Logf("GELUGrad: max error %.3f ulp (of the result, or of the terms near the root) at x = %g", worstRel, worstX)
	require.LessOrEqual(t, worst, 8.0, "x = %g", worstX)
}

func TestFastMathSpecialValues(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	cases := []struct {
		name string
		fn   func(dst, src []float32)
		in   []float32
		want []float32
	}{
		{"Exp", ExpF32, []float32{0, negZero, inf, -inf, 89, 88.7, -104, -200, 1},
			[]float32{1, 1, inf, 0, inf, float32(math.Exp(float64(float32(88.7)))), 0, 0, float32(math.E)}},
		{"Sigmoid", SigmoidF32, []float32{0, negZero, inf, -inf, 17.4, 50, -200},
			[]float32{0.5, 0.5, 1, 0, 1, 1, 0}},
		{"Tanh", TanhF32, []float32{0, negZero, inf, -inf, 9.1, -9.1, 1e-30, -1e-30},
			[]float32{0, negZero, 1, -1, 1, -1, 1e-30, -1e-30}},
		{"GELU", GELUF32, []float32{0, negZero, inf, -inf, 20, -20, 1e6},
			[]float32{0, negZero, inf, negZero, 20, negZero, 1e6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := make([]float32, len(c.in))
			c.fn(got, c.in)
			for i := range c.in {
				require.Equal(t, math.Float32bits(c.want[i]), math.Float32bits(got[i]),
					"%s(%g) = %g, want %g (sign of zero included)", c.name, c.in[i], got[i], c.want[i])
			}
			nans := []float32{nan, -nan, math.Float32frombits(0x7f800001), math.Float32frombits(0xffc01234)}
			out := make([]float32, len(nans))
			c.fn(out, nans)
			for i, v := range out {
				require.True(t, v != v, "%s(NaN %#x) = %g", c.name, math.Float32bits(nans[i]), v)
			}
		})
	}
	g := make([]float32, 5)
	GELUGradF32(g, []float32{2, 2, 2, 2, 2}, []float32{inf, -inf, 0, 30, -30})
	require.Equal(t, []float32{2, 0, 1, 2, 0}, g)
	GELUGradF32(g[:1], g[:1], []float32{nan})
	require.True(t, g[0] != g[0])

	// The derivative's limits, and NaN through both outputs.
	y, d := make([]float32, 6), make([]float32, 6)
	GELUWithGradF32(y, d, []float32{inf, -inf, 0, 30, -30, nan})
	require.Equal(t, []float32{inf, negZero, 0, 30, negZero}, y[:5])
	require.Equal(t, []float32{1, 0, 0.5, 1, 0}, d[:5])
	require.True(t, y[5] != y[5] && d[5] != d[5], "NaN: %g, %g", y[5], d[5])
}

func TestFastMathInPlaceAndLengths(t *testing.T) {
	xs := []float32{-3, -0.5, 0, 0.25, 4}
	for _, k := range fastKernels {
		want := make([]float32, len(xs))
		k.fast(want, xs)
		in := append([]float32(nil), xs...)
		k.fast(in, in)
		require.Equal(t, want, in, "%s in place", k.name)
		require.PanicsWithValue(t, fmt.Sprintf("tensor: %sF32: lengths 4 and 5 differ", k.name),
			func() { k.fast(make([]float32, 4), xs) })
	}
	require.PanicsWithValue(t, "tensor: GELUGradF32: lengths 5 and 4 differ",
		func() { GELUGradF32(make([]float32, 5), make([]float32, 4), xs) })
	require.PanicsWithValue(t, "tensor: GELUWithGradF32: lengths 5 and 4 differ",
		func() { GELUWithGradF32(make([]float32, 5), make([]float32, 4), xs) })
	require.PanicsWithValue(t, "tensor: GELUBackwardF32: lengths 5 and 4 differ",
		func() { GELUBackwardF32(make([]float32, 5), make([]float32, 5), make([]float32, 4)) })
}

// The loops the float32 ops ran before the fast kernels: float64 math.* per
// element. They are the benchmark's baseline.
func mathExpF32(dst, src []float32) {
	for i, v := range src {
		dst[i] = float32(math.Exp(float64(v)))
	}
}

func mathSigmoidF32(dst, src []float32) {
	for i, v := range src {
		x := float64(v)
		if x >= 0 {
			dst[i] = float32(1 / (1 + math.Exp(-x)))
		} else {
			e := math.Exp(x)
			dst[i] = float32(e / (1 + e))
		}
	}
}

func mathTanhF32(dst, src []float32) {
	for i, v := range src {
		dst[i] = float32(math.Tanh(float64(v)))
	}
}

func mathGELUF32(dst, src []float32) {
	for i, v := range src {
		f := float64(v)
		dst[i] = float32(0.5 * f * (1 + math.Erf(f*fmInvSqrt2)))
	}
}

func mathGELUGradF32(dst, gy, x []float32) {
	for i, g := range gy {
		v := float64(x[i])
		cdf := 0.5 * (1 + math.Erf(v*fmInvSqrt2))
		pdf := fmInvSqrt2Pi * math.Exp(-0.5*v*v)
		dst[i] = float32(float64(g) * (cdf + v*pdf))
	}
}

// BenchmarkActivationF32 compares the fast kernels with the math.* loops on
// 4096 activations drawn from N(0, 2²).
//
//	go test ./tensor -run '^$' -bench ActivationF32 -benchtime 200ms
func BenchmarkActivationF32(b *testing.B) {
	const n = 4096
	r := rand.New(rand.NewPCG(1, 2))
	x, gy, dst := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], gy[i] = float32(2*r.NormFloat64()), float32(r.NormFloat64())
	}
	grad := func(k func(dst, gy, x []float32)) func(dst, src []float32) {
		return func(dst, src []float32) { k(dst, gy, src) }
	}
	for _, c := range []struct {
		name       string
		math, fast func(dst, src []float32)
	}{
		{"Exp", mathExpF32, ExpF32},
		{"Sigmoid", mathSigmoidF32, SigmoidF32},
		{"Tanh", mathTanhF32, TanhF32},
		{"GELU", mathGELUF32, GELUF32},
		{"GELUGrad", grad(mathGELUGradF32), grad(GELUGradF32)},
	} {
		for _, impl := range []struct {
			name string
			fn   func(dst, src []float32)
		}{{"math", c.math}, {"fast", c.fast}} {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(4 * n)
				for b.Loop() {
					impl.fn(dst, x)
				}
			})
		}
	}
}
