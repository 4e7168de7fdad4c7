package tensor

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dirtyCache leaves NaN-filled blocks of the class of a [300, 700] tensor
// of each dtype on the host cache's free lists, so that the next outputs of
// that size get them and an element an op forgot to write shows. It returns
// the blocks' first elements, to check that the output did get one.
func dirtyCache() map[any]bool {
	var r Recycler
	dirty := map[any]bool{}
	for range 4 {
		for _, dt := range []DType{Float32, Float64} {
			d := New(dt, 300, 700)
			if dt == Float64 {
				dirty[&d.blk.f64[0]] = true
			} else {
				dirty[&d.blk.f32[0]] = true
			}
			r.Free(d)
		}
	}
	Host().SetPoison(true)
	defer Host().SetPoison(false)
	r.Flush()
	return dirty
}

// Every path of binary, unary and Contiguous writes every element of its
// unzeroed output.
func TestBinaryWritesEveryElementOfUnzeroedOutput(t *testing.T) {
	rng := NewRNG(11)
	big := Rand(rng, Float32, 300, 700)
	col := Rand(rng, Float32, 300, 1)
	row := Rand(rng, Float32, 700)
	sc := Rand(rng, Float32)
	cases := map[string]func() *Tensor{
		"vv":         func() *Tensor { return Add(big, big) },
		"vs":         func() *Tensor { return Mul(big, sc) },
		"sv":         func() *Tensor { return Div(sc, big) },
		"row":        func() *Tensor { return Sub(big, row) },
		"column":     func() *Tensor { return Sub(big, col) },
		"transposed": func() *Tensor { return Add(Transpose(big, 0, 1), Transpose(big, 0, 1)) },
		"both-bcast": func() *Tensor { return Mul(Expand(sc, 300, 700), sc) },
		"pow":        func() *Tensor { return Pow(big, sc) },
		"float64":    func() *Tensor { return Mul(AsType(big, Float64), AsType(sc, Float64)) },
		// unary: the float32 kernels (SIMD ReLU, C GELU, fastmath) and the Go loops
		"relu":        func() *Tensor { return ReLU(big) },
		"gelu":        func() *Tensor { return GELU(big) },
		"exp":         func() *Tensor { return Exp(big) },
		"sigmoid":     func() *Tensor { return Sigmoid(big) },
		"tanh":        func() *Tensor { return Tanh(big) },
		"neg-strided": func() *Tensor { return Neg(Transpose(big, 0, 1)) },
		"clamp64":     func() *Tensor { return Clamp(AsType(big, Float64), 0.2, 0.7) },
		"powscalar":   func() *Tensor { return PowScalar(big, 2) },
		"powscalar1":  func() *Tensor { return PowScalar(big, 1) },
		"relu64":      func() *Tensor { return ReLU(AsType(big, Float64)) },
		"addscalar64": func() *Tensor { return AddScalar(AsType(big, Float64), 3) },
		// Contiguous copies of views
		"contiguous-transposed": func() *Tensor { return Transpose(big, 0, 1).Contiguous() },
		"contiguous-expanded":   func() *Tensor { return Expand(sc, 300, 700).Contiguous() },
		"contiguous-column":     func() *Tensor { return Expand(col, 300, 700).Contiguous() },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			dirty := dirtyCache()
			out := f()
			require.NotNil(t, out.blk)
			var first any
			if out.DType() == Float64 {
				first = &out.blk.f64[0]
			} else {
				first = &out.blk.f32[0]
			}
			require.True(t, dirty[first], "the output must be a recycled, NaN-filled block")
			require.True(t, out.IsContiguous())
			for k, v := range AsType(out, Float64).F64() {
				if math.IsNaN(v) {
					t.Fatalf("element %d left unwritten", k)
				}
			}
		})
	}
}

// New hands out zeros even when its block comes back NaN-poisoned from the
// cache; the stats count the hit, and EmptyCache gives cached blocks up.
func TestHostCacheReuseZeroAndEmpty(t *testing.T) {
	h := Host()
	h.SetPoison(true)
	defer h.SetPoison(false)
	h.EmptyCache()
	a := New(Float32, 123, 457)
	Fill(a, 3)
	var r Recycler
	r.Free(a)
	require.Equal(t, int64(a.blk.class), r.Flush())
	before := h.Stats()
	b := New(Float32, 123, 457)
	after := h.Stats()
	require.Equal(t, before.Hits+1, after.Hits, "the recycled block serves the next tensor of its class")
	require.Same(t, &a.blk.f32[0], &b.blk.f32[0])
	for i, v := range b.F32() {
		if v != 0 {
			t.Fatalf("element %d of New is %v", i, v)
		}
	}
	require.Panics(t, func() { a.F32() }, "a recycled tensor is still readable")

	// A kept view protects its storage; a second Flush of the same tensor
	// recycles nothing.
	v := b.Reshape(-1)
	r.Free(b)
	r.Keep(v)
	require.Zero(t, r.Flush())
	require.NotPanics(t, func() { b.F32() })

	var r2 Recycler
	r2.Free(b)
	r2.Free(b)
	require.Equal(t, int64(b.blk.class), r2.Flush(), "recycled once")
	reserved := h.Stats().Reserved
	h.EmptyCache()
	require.Equal(t, reserved-int64(b.blk.class), h.Stats().Reserved)

	// Small tensors come from make and are never recycled.
	s := New(Float32, 3)
	var r3 Recycler
	r3.Free(s)
	require.Zero(t, r3.Flush())
}

// A tensor dropped without being recycled stops counting as allocated and
// reserved once the garbage collector takes it: the stats describe memory
// that exists.
func TestDroppedTensorLeavesStats(t *testing.T) {
	h := Host()
	settle := func() {
		// Cleanups of earlier tests' tensors run after some GC, on their own
		// goroutine: wait until the counters stop moving.
		for range 20 {
			before := h.Stats().Allocated
			runtime.GC()
			time.Sleep(20 * time.Millisecond)
			if h.Stats().Allocated == before {
				return
			}
		}
	}
	settle()
	base := h.Stats()
	func() {
		x := New(Float64, 1000, 100)
		require.Equal(t, base.Allocated+int64(x.blk.class), h.Stats().Allocated)
	}()
	for range 50 {
		runtime.GC()
		if h.Stats().Allocated == base.Allocated {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s := h.Stats()
	require.Equal(t, base.Allocated, s.Allocated)
	require.Equal(t, base.Reserved, s.Reserved)
}
