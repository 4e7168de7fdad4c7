package tensor

import (
	"fmt"
	"math"
	"sync"
)

// GELU's tanh approximation (Hendrycks and Gimpel), GPT-2's activation:
// ½x(1 + tanh(√(2/π)(x + 0.044715x³))), torch's F.gelu(x,
// approximate='tanh') and HF's "gelu_new". An op on the one-table seam
// (doc.go, "Adding an op"): the Kernels entries GELUTanh,
// GELUTanhBackward and GELUTanhWithGrad, the host's below.
const (
	geluTanhBeta   = 0.7978845608028654 // √(2/π)
	geluTanhKappa  = 0.044715
	geluTanhBeta2  = 1.5957691216057308 // 2·√(2/π), written out as gelu_tanh_kernels.c has it
	geluTanhKappa3 = 0.134145           // 3·0.044715, likewise
	// geluTanhClamp bounds |x|: beyond 20 the results are saturated in
	// float32 (GELU is x or -0, its derivative 1 or -0), and the clamp
	// keeps e**(-2|u|) a normal float64 (|u| ≤ 302).
	geluTanhClamp = 20
)

// GELUTanh returns GELU's tanh approximation of x (torch's F.gelu(x,
// approximate='tanh')) by the GELUTanh entry of x's device table.
func GELUTanh(x *Tensor) *Tensor {
	const name = "GELUTanh"
	k := table(name, x)
	need(k.GELUTanh != nil, name, x)
	x = x.Contiguous()
	y := EmptyAs(x, x.shape...) // every entry writes each element
	k.GELUTanh(y, x)
	return y
}

// GELUTanhWithGrad returns GELUTanh(x) and its derivative at x, for the
// backward of an x that needs a gradient: one activation-sized tensor
// more, and the backward is one product (GELUTanhGradFromDeriv) rather
// than a second evaluation. d is nil where x's device keeps no derivative
// (no GELUTanhWithGrad entry, or float64 on the host, which serves the
// gradient checks); the caller then keeps x for GELUTanhBackward.
func GELUTanhWithGrad(x *Tensor) (y, d *Tensor) {
	const name = "GELUTanh"
	k := table(name, x)
	if k.GELUTanhWithGrad == nil || x.dtype != Float32 {
		return GELUTanh(x), nil
	}
	x = x.Contiguous()
	y = EmptyAs(x, x.shape...)
	d = EmptyAs(x, x.shape...)
	k.GELUTanhWithGrad(y, d, x)
	return y, d
}

// GELUTanhBackward returns dy·GELUTanh'(x) in a new tensor, by the
// GELUTanhBackward entry of the operands' device table.
func GELUTanhBackward(dy, x *Tensor) *Tensor {
	const name = "GELUTanh backward"
	k := table(name, dy, x)
	need(k.GELUTanhBackward != nil, name, x)
	checkGELUTanhShapes(name, dy, x)
	x = x.Contiguous()
	if dy.dtype != x.dtype { // a float64 gradient reaching a float32 op
		dy = AsType(dy, x.dtype)
	}
	dy = dy.Contiguous()
	dx := EmptyAs(x, x.shape...)
	k.GELUTanhBackward(dx, dy, x)
	return dx
}

// GELUTanhGradFromDeriv writes dx = dy·d, d being GELUTanhWithGrad's
// derivative, by the Mul entry of the operands' device table, and returns
// dx; dx nil is a new tensor, and dx may be d (a backward that frees the
// graph writes the gradient over the derivative, allocating nothing).
func GELUTanhGradFromDeriv(dx, dy, d *Tensor) *Tensor {
	const name = "GELUTanh backward"
	k := table(name, dy, d, dx)
	need(k.Mul != nil, name, d)
	checkGELUTanhShapes(name, dy, d)
	if dy.dtype != d.dtype {
		dy = AsType(dy, d.dtype)
	}
	dy = dy.Contiguous()
	if dx == nil {
		dx = EmptyAs(d, d.shape...)
	} else {
		checkGELUTanhShapes(name, dx, d)
	}
	k.Mul(dx, dy, d)
	return dx
}

func checkGELUTanhShapes(op string, a, b *Tensor) {
	if !sameShape(a, b) {
		panic(fmt.Sprintf("tensor: %s: shapes %v and %v differ", op, a.shape, b.shape))
	}
}

// The host's entries: float32 by the C kernels (gelu_tanh_kernels.c) or
// geluTanhF32Go, split over Threads() goroutines; float64 by math.Tanh,
// for the gradient checks.

func cpuGELUTanh(y, x *Tensor) {
	if y.dtype == Float64 {
		geluTanh64(f64s(y), nil, f64s(x))
		return
	}
	ys, xs := f32s(y), f32s(x)
	geluTanhParallel(len(xs), func(lo, hi int) { geluTanhF32(ys[lo:hi], nil, xs[lo:hi]) })
}

// cpuGELUTanhWithGrad is float32 only (GELUTanhWithGrad calls it for
// float32 operands).
func cpuGELUTanhWithGrad(y, d, x *Tensor) {
	ys, ds, xs := f32s(y), f32s(d), f32s(x)
	geluTanhParallel(len(xs), func(lo, hi int) { geluTanhF32(ys[lo:hi], ds[lo:hi], xs[lo:hi]) })
}

func cpuGELUTanhBackward(dx, dy, x *Tensor) {
	if dx.dtype == Float64 {
		g, gy, xs := f64s(dx), f64s(dy), f64s(x)
		d := make([]float64, len(xs))
		geluTanh64(nil, d, xs)
		for i := range g {
			g[i] = gy[i] * d[i]
		}
		return
	}
	g, gy, xs := f32s(dx), f32s(dy), f32s(x)
	geluTanhParallel(len(xs), func(lo, hi int) { geluTanhGradF32(g[lo:hi], gy[lo:hi], xs[lo:hi]) })
}

// geluTanhParMin is the length from which the host kernels split over
// Threads() goroutines: starting one costs about a microsecond, a chunk of
// 64K elements about 60.
const geluTanhParMin = 1 << 16

// geluTanhParallel runs work over [0, n) in Threads() contiguous chunks
// (the caller's goroutine taking the last), or whole here when n is small
// or the host runs one thread (GODDP_NUM_THREADS=1, a rank per core).
func geluTanhParallel(n int, work func(lo, hi int)) {
	w := min(Threads(), n/geluTanhParMin)
	if w <= 1 {
		work(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := range w - 1 {
		lo, hi := k*n/w, (k+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(lo, hi)
		}()
	}
	work((w-1)*n/w, n)
	wg.Wait()
}

// geluTanhF32 writes GELUTanh(x) to y and, when d is not nil, its
// derivative to d (y may alias x; d may not): by the C kernels from
// geluCMin elements, else geluTanhF32Go, to the same bits.
func geluTanhF32(y, d, x []float32) {
	y = y[:len(x)]
	if d != nil {
		d = d[:len(x)]
	}
	if len(x) >= geluCMin && geluTanhC(y, d, x) {
		return
	}
	geluTanhF32Go(y, d, x)
}

// geluTanhGradF32 writes dx = dy·GELUTanh'(x), the derivative rounded to
// float32 first (the product of geluTanhF32's d and dy); dx may alias dy
// or x.
func geluTanhGradF32(dx, dy, x []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	if len(x) >= geluCMin && geluTanhGradC(dx, dy, x) {
		return
	}
	for i, v := range x {
		s, oms, c := geluTanhParts(float64(v))
		dx[i] = dy[i] * geluTanhDeriv(s, oms, c)
	}
}

// geluTanhF32Go is geluTanhF32's Go loop, gelu_tanh_kernels.c's algorithm
// operation for operation (see there): with s = σ(2u) = ½(1 + tanh u),
// u = √(2/π)(x + 0.044715x³),
//
//	y = x·s,  GELU'(x) = s·(1 + 2√(2/π)·x·(1 - s)·(1 + 3·0.044715x²)),
//
// s and 1 - s both from w = e**(-2|u|) as 1/(1+w) and w/(1+w), in float64,
// so that neither tail cancels and the results are within an ulp of
// float64 math (TestGELUTanhAccuracy). Go does not fuse a product into an
// addition on amd64, as the C is compiled without contraction.
func geluTanhF32Go(y, d, x []float32) {
	for i, v := range x {
		xd := float64(v)
		s, oms, c := geluTanhParts(xd)
		if d != nil {
			d[i] = geluTanhDeriv(s, oms, c)
		}
		xl := xd
		if xl < -geluTanhClamp {
			xl = -geluTanhClamp
		}
		y[i] = float32(xl * s)
	}
}

// geluTanhParts returns s = σ(2u), 1 - s and x clamped to ±20; the
// comparisons let NaN through every clamp.
func geluTanhParts(x float64) (s, oms, c float64) {
	c = x
	if c < -geluTanhClamp {
		c = -geluTanhClamp
	}
	if c > geluTanhClamp {
		c = geluTanhClamp
	}
	u := geluTanhBeta * (c + geluTanhKappa*c*c*c)
	e, r := expReduce(-2 * math.Abs(u))
	w := e + e*expm1Poly(r)
	q := 1 / (1 + w)
	wq := w * q
	if x < 0 {
		return wq, q, c
	}
	return q, wq, c
}

func geluTanhDeriv(s, oms, c float64) float32 {
	return float32(s * (1 + geluTanhBeta2*c*oms*(1+geluTanhKappa3*c*c)))
}

// geluTanh64 writes GELUTanh(x) to y and its derivative
//
//	½(1 + t) + ½x(1 - t²)·√(2/π)(1 + 3·0.044715x²),  t = tanh(√(2/π)(x + 0.044715x³))
//
// to d (either nil: not wanted), by math.Tanh, in float64 for the
// gradient checks.
func geluTanh64(y, d, x []float64) {
	for i, v := range x {
		t := math.Tanh(geluTanhBeta * (v + geluTanhKappa*v*v*v))
		if d != nil {
			d[i] = 0.5*(1+t) + 0.5*v*(1-t*t)*geluTanhBeta*(1+3*geluTanhKappa*v*v)
		}
		if y != nil {
			y[i] = 0.5 * v * (1 + t)
		}
	}
}
