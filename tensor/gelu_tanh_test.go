package tensor

import (
	"math"
	"runtime"
	"testing"
)

// geluTanhRef is GELU's tanh approximation and its derivative in float64
// by math.Exp, in the form that does not cancel (x·σ(2u), σ(2u)·σ(-2u)):
// the reference the float32 kernels are held to.
func geluTanhRef(x float64) (y, d float64) {
	u := geluTanhBeta * (x + geluTanhKappa*x*x*x)
	s := 1 / (1 + math.Exp(-2*u))
	oms := 1 / (1 + math.Exp(2*u))
	return x * s, s + 2*geluTanhBeta*x*s*oms*(1+3*geluTanhKappa*x*x)
}

// ulps32 is |got - want| in float32 ulps at want (2**-149 in the
// subnormals).
func ulps32(got float32, want float64) float64 {
	e := math.Max(math.Abs(want), 0x1p-126)
	_, exp := math.Frexp(e)
	ulp := math.Ldexp(1, exp-24)
	return math.Abs(float64(got)-want) / ulp
}

// geluTanhSweep is every 4099th float32 bit pattern (both signs, the
// subnormals, NaNs and infinities among them) and the values where the
// kernel's branches and clamps change.
func geluTanhSweep() []float32 {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 4099 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	inf := float32(math.Inf(1))
	xs = append(xs, 0, float32(math.Copysign(0, -1)), inf, -inf, float32(math.NaN()),
		math.Float32frombits(1), math.Float32frombits(1|1<<31), 0x1p-126, -0x1p-126, 1e-30, -1e-30,
		20, -20, math.Nextafter32(20, 30), math.Nextafter32(-20, -30), 9, -9, 10.3, -10.3, -0.75, 3.4e38, -3.4e38)
	return xs
}

// The C kernels are the Go loop's algorithm compiled by GCC with
// vectorisation: the same bits over the sweep, for the value, the
// derivative and the backward's product.
func TestGELUTanhKernelsMatchGoLoop(t *testing.T) {
	xs := geluTanhSweep()
	n := len(xs)
	y, d, g := make([]float32, n), make([]float32, n), make([]float32, n)
	if !geluTanhC(y, d, xs) || !geluTanhGradC(g, xs, xs) {
		t.Skip("no C kernels in this build (!cgo or noblas)")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("Go fuses products into additions on " + runtime.GOARCH + "; the C is built without contraction")
	}
	y1 := make([]float32, n)
	geluTanhC(y1, nil, xs)
	yg, dg := make([]float32, n), make([]float32, n)
	geluTanhF32Go(yg, dg, xs)
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for i, x := range xs {
		gg := xs[i] * dg[i]
		if !same(y[i], yg[i]) || !same(y1[i], yg[i]) || !same(d[i], dg[i]) || !same(g[i], gg) {
			t.Fatalf("x=%v (%#08x): C y %v / %v, d %v, dy·d %v; Go y %v, d %v, dy·d %v",
				x, math.Float32bits(x), y[i], y1[i], d[i], g[i], yg[i], dg[i], gg)
		}
	}
}

// The float32 kernel against float64 math: within an ulp and a half of
// the value everywhere, and of the derivative wherever it is not near its
// root at x ≈ -0.7525, where s·(1 + ...) cancels: there within 1e-9
// absolute (e**(-2|u|)'s polynomial, 2.3e-10 relative, is the most of
// it), where torch's float32 ½(1+t) + ... is off by about 1e-7.
func TestGELUTanhAccuracy(t *testing.T) {
	xs := geluTanhSweep()
	for b := math.Float32bits(-0.74); b <= math.Float32bits(-0.76); b++ { // every float32 near the root
		xs = append(xs, math.Float32frombits(b))
	}
	y, d := make([]float32, len(xs)), make([]float32, len(xs))
	geluTanhF32Go(y, d, xs)
	worstY, worstD := 0.0, 0.0
	for i, x := range xs {
		if x != x || math.IsInf(float64(x), 0) {
			continue
		}
		wy, wd := geluTanhRef(float64(x))
		if float64(x) < -20 {
			wy, wd = 0, 0 // 0·NaN-free limits: the reference's exp overflows
		}
		uy := ulps32(y[i], wy)
		worstY = max(worstY, uy)
		if uy > 1.5 {
			t.Fatalf("GELUTanh(%v) = %v, float64 %v: %.2f ulps", x, y[i], wy, uy)
		}
		if math.Abs(wd) > 1e-2 {
			ud := ulps32(d[i], wd)
			worstD = max(worstD, ud)
			if ud > 1.5 {
				t.Fatalf("GELUTanh'(%v) = %v, float64 %v: %.2f ulps", x, d[i], wd, ud)
			}
		} else if e := math.Abs(float64(d[i]) - wd); e > 1e-9 {
			t.Fatalf("GELUTanh'(%v) = %v, float64 %v: off by %v", x, d[i], wd, e)
		}
	}
	t.Logf("worst: value %.3f ulps, derivative %.3f ulps (|d| > 0.01)", worstY, worstD)
}

// The ends and the sign of zero: GELU(±0) = ±0, GELU(+Inf) = +Inf and
// GELU(-Inf) = -0 (the limits, where ½x(1 + tanh u) gives NaN at -Inf),
// derivative 1 at +Inf and -0 at -Inf, NaN through both.
func TestGELUTanhSpecialValues(t *testing.T) {
	inf := float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct{ x, y, d float32 }{
		{0, 0, 0.5}, {negZero, negZero, 0.5}, {inf, inf, 1}, {-inf, negZero, negZero},
		{3.4e38, 3.4e38, 1}, {-3.4e38, negZero, negZero}, {30, 30, 1}, {-30, negZero, negZero},
	} {
		for _, k := range []struct {
			name string
			f    func(y, d, x []float32)
		}{{"Go", geluTanhF32Go}, {"C", func(y, d, x []float32) {
			if !geluTanhC(y, d, x) {
				geluTanhF32Go(y, d, x)
			}
		}}} {
			y, d := []float32{0}, []float32{0}
			k.f(y, d, []float32{c.x})
			if math.Float32bits(y[0]) != math.Float32bits(c.y) || math.Float32bits(d[0]) != math.Float32bits(c.d) {
				t.Errorf("%s: GELUTanh(%v) = %v, derivative %v; want %v, %v", k.name, c.x, y[0], d[0], c.y, c.d)
			}
		}
	}
	y, d := []float32{0}, []float32{0}
	geluTanhF32Go(y, d, []float32{float32(math.NaN())})
	if y[0] == y[0] || d[0] == d[0] {
		t.Errorf("GELUTanh(NaN) = %v, derivative %v", y[0], d[0])
	}
}

// The table's entries and the tensor functions: the forward alone, with
// the derivative, and the two backward forms give the same bits over
// lengths that run the Go loop, one C call and several goroutines; the
// float64 entries are geluTanh64's.
func TestGELUTanhTable(t *testing.T) {
	rng := NewRNG(5)
	for _, n := range []int{7, 1000, 3*geluTanhParMin + 5} {
		x := rng.Normal(Float32, 0, 4, n)
		y, d := GELUTanhWithGrad(x)
		if d == nil {
			t.Fatal("the host keeps no float32 derivative")
		}
		y1 := GELUTanh(x)
		gy := rng.Normal(Float32, 0, 1, n)
		g1 := GELUTanhBackward(gy, x)
		g2 := GELUTanhGradFromDeriv(nil, gy, d)
		wy, wd := make([]float32, n), make([]float32, n)
		geluTanhF32Go(wy, wd, x.F32())
		for i := range n {
			wg := gy.F32()[i] * wd[i]
			if y.F32()[i] != wy[i] || y1.F32()[i] != wy[i] || d.F32()[i] != wd[i] || g1.F32()[i] != wg || g2.F32()[i] != wg {
				t.Fatalf("n=%d, x[%d]=%v: y %v %v, d %v, dx %v %v; want %v, %v, %v",
					n, i, x.F32()[i], y.F32()[i], y1.F32()[i], d.F32()[i], g1.F32()[i], g2.F32()[i], wy[i], wd[i], wg)
			}
		}
		if g3 := GELUTanhGradFromDeriv(d, gy, d); &g3.F32()[0] != &d.F32()[0] || g3.F32()[n-1] != g2.F32()[n-1] {
			t.Fatal("GELUTanhGradFromDeriv into d: not in place or not the product")
		}
	}
	x := rng.Normal(Float64, 0, 3, 50)
	y, d := GELUTanhWithGrad(x)
	if d != nil {
		t.Fatal("float64 keeps a derivative; the gradient checks want GELUTanhBackward")
	}
	gy := rng.Normal(Float64, 0, 1, 50)
	g := GELUTanhBackward(gy, x)
	wy, wd := make([]float64, 50), make([]float64, 50)
	geluTanh64(wy, wd, x.F64())
	for i := range 50 {
		if y.F64()[i] != wy[i] || g.F64()[i] != gy.F64()[i]*wd[i] {
			t.Fatalf("float64 x=%v: y %v, dx %v; want %v, %v", x.F64()[i], y.F64()[i], g.F64()[i], wy[i], gy.F64()[i]*wd[i])
		}
	}
}

// oldGELUTanh32 is models/gpt2's float32 loop before GELUTanh became a
// table op (the scalar Go loop around TanhF32), kept as the benchmark's
// baseline.
func oldGELUTanh32(y, d, x []float32) {
	for i, v := range x {
		y[i] = geluTanhBeta * (v + geluTanhKappa*v*v*v)
	}
	TanhF32(y, y)
	for i, v := range x {
		t := y[i]
		if d != nil {
			d[i] = 0.5*(1+t) + 0.5*v*(1-t*t)*geluTanhBeta*(1+3*geluTanhKappa*v*v)
		}
		y[i] = 0.5 * v * (1 + t)
	}
}

// BenchmarkGELUTanh is GPT-2 124M's MLP activation at T=1024, batch 2
// ([2048, 3072] float32) with its derivative, as training runs it, on
// one thread (the kernels alone, as GODDP_NUM_THREADS=1 runs them):
//
//	go test -run '^$' -bench GELUTanh -benchtime 20x ./tensor/
func BenchmarkGELUTanh(b *testing.B) {
	const n = 2048 * 3072
	x := NewRNG(1).Normal(Float32, 0, 2, n).F32()
	y, d := make([]float32, n), make([]float32, n)
	report := func(b *testing.B) {
		b.SetBytes(4 * n)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
	}
	b.Run("old-with-grad", func(b *testing.B) {
		for range b.N {
			oldGELUTanh32(y, d, x)
		}
		report(b)
	})
	b.Run("with-grad", func(b *testing.B) {
		for range b.N {
			geluTanhF32(y, d, x)
		}
		report(b)
	})
	b.Run("old-forward", func(b *testing.B) {
		for range b.N {
			oldGELUTanh32(y, nil, x)
		}
		report(b)
	})
	b.Run("forward", func(b *testing.B) {
		for range b.N {
			geluTanhF32(y, nil, x)
		}
		report(b)
	})
	b.Run("backward", func(b *testing.B) {
		for range b.N {
			geluTanhGradF32(d, y, x)
		}
		report(b)
	})
}
