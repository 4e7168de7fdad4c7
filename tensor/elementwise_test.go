package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBinaryHandValues(t *testing.T) {
	a := FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	row := FromF32([]float32{10, 20, 30}, 3)
	col := FromF32([]float32{100, 200}, 2, 1)
	cases := []struct {
		name string
		got  *Tensor
		want []float64
		sh   []int
	}{
		{"add row", Add(a, row), []float64{11, 22, 33, 14, 25, 36}, []int{2, 3}},
		{"add col", Add(a, col), []float64{101, 102, 103, 204, 205, 206}, []int{2, 3}},
		{"sub row rev", Sub(row, a), []float64{9, 18, 27, 6, 15, 24}, []int{2, 3}},
		{"mul scalar tensor", Mul(a, FromF32([]float32{2})), []float64{2, 4, 6, 8, 10, 12}, []int{2, 3}},
		{"div", Div(a, a), []float64{1, 1, 1, 1, 1, 1}, []int{2, 3}},
		{"pow", Pow(a, FromF32([]float32{2})), []float64{1, 4, 9, 16, 25, 36}, []int{2, 3}},
		{"outer col+row", Add(col, row), []float64{110, 120, 130, 210, 220, 230}, []int{2, 3}},
		{"add scalar", AddScalar(a, 0.5), []float64{1.5, 2.5, 3.5, 4.5, 5.5, 6.5}, []int{2, 3}},
		{"mul scalar", MulScalar(a, -1), []float64{-1, -2, -3, -4, -5, -6}, []int{2, 3}},
		{"pow scalar", PowScalar(a, 3), []float64{1, 8, 27, 64, 125, 216}, []int{2, 3}},
		{"rsub scalar", RSubScalar(1, a), []float64{0, -1, -2, -3, -4, -5}, []int{2, 3}},
		{"maximum", Maximum(a, FromF32([]float32{3.5})), []float64{3.5, 3.5, 3.5, 4, 5, 6}, []int{2, 3}},
		{"transposed view", Add(a.T(), FromF32([]float32{1, 2}, 2)), []float64{2, 6, 3, 7, 4, 8}, []int{3, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.sh, tc.got.Shape())
			assert.InDeltaSlice(t, tc.want, values(tc.got), 1e-5)
			assert.True(t, tc.got.IsContiguous())
		})
	}
}

func TestBinaryBroadcastAgainstReference(t *testing.T) {
	type fn func(x, y float64) float64
	ops := []struct {
		name string
		op   func(a, b *Tensor) *Tensor
		ref  fn
	}{
		{"Add", Add, func(x, y float64) float64 { return x + y }},
		{"Sub", Sub, func(x, y float64) float64 { return x - y }},
		{"Mul", Mul, func(x, y float64) float64 { return x * y }},
		{"Div", Div, func(x, y float64) float64 { return x / y }},
		{"Pow", func(a, b *Tensor) *Tensor { return Pow(Abs(a), b) }, func(x, y float64) float64 { return math.Pow(math.Abs(x), y) }},
	}
	shapes := []struct{ a, b []int }{
		{[]int{4, 5}, []int{4, 5}},
		{[]int{4, 5}, []int{5}},
		{[]int{4, 5}, []int{4, 1}},
		{[]int{4, 1}, []int{1, 5}},
		{[]int{2, 3, 4}, []int{3, 1}},
		{[]int{2, 1, 4}, []int{3, 4}},
		{[]int{}, []int{3, 2}},
		{[]int{3, 2}, []int{}},
		{[]int{1}, []int{2, 2, 2}},
		{[]int{2, 3, 4, 5}, []int{1, 3, 1, 5}},
		{[]int{0, 3}, []int{3}},
	}
	for _, dt := range dtypes {
		for _, op := range ops {
			for _, sh := range shapes {
				t.Run(fmt.Sprintf("%v/%s/%v_%v", dt, op.name, sh.a, sh.b), func(t *testing.T) {
					a, b := seqTensor(dt, sh.a...), AddScalar(seqTensor(dt, sh.b...), 3)
					got := op.op(a, b)
					want := broadcastShape("test", sh.a, sh.b)
					require.Equal(t, want, got.Shape())
					forEachIndex(want, func(idx []int) {
						ref := op.ref(a.At(bcastIndex(a, idx)...), b.At(bcastIndex(b, idx)...))
						assert.InDelta(t, ref, got.At(idx...), tol(dt)*(1+math.Abs(ref)), "at %v", idx)
					})
				})
			}
		}
	}
}

func TestBinaryStridedOperands(t *testing.T) {
	// Non-contiguous views on both sides go through the general path.
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			base := seqTensor(dt, 4, 6)
			a := Narrow(Transpose(base, 0, 1), 0, 1, 4) // [4,4] strided
			b := Narrow(base, 1, 2, 4)                  // [4,4] with row stride 6
			got := Mul(a, b)
			forEachIndex([]int{4, 4}, func(idx []int) {
				assert.InDelta(t, a.At(idx...)*b.At(idx...), got.At(idx...), tol(dt))
			})
		})
	}
}

func TestBinaryPanics(t *testing.T) {
	cases := []struct {
		name  string
		fn    func()
		parts []string
	}{
		{"shape", func() { Add(New(Float32, 2, 3), New(Float32, 4)) }, []string{"Add", "[2 3]", "[4]"}},
		{"shape sub", func() { Sub(New(Float32, 2, 3), New(Float32, 3, 2)) }, []string{"Sub", "[2 3]", "[3 2]"}},
		{"dtype", func() { Mul(New(Float32, 2), New(Float64, 2)) }, []string{"Mul", "float32", "float64", "[2]"}},
		{"clamp", func() { Clamp(New(Float32, 2), 1, 0) }, []string{"Clamp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { requirePanics(t, tc.fn, tc.parts...) })
	}
}

func TestUnaryAgainstReference(t *testing.T) {
	erfGELU := func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }
	ops := []struct {
		name string
		op   func(*Tensor) *Tensor
		ref  func(float64) float64
		in   func(float64) float64 // maps the test input into the op's domain
	}{
		{"Neg", Neg, func(x float64) float64 { return -x }, nil},
		{"Exp", Exp, math.Exp, nil},
		{"Log", Log, math.Log, math.Abs},
		{"Sqrt", Sqrt, math.Sqrt, math.Abs},
		{"Abs", Abs, math.Abs, nil},
		{"ReLU", ReLU, func(x float64) float64 { return math.Max(x, 0) }, nil},
		{"GELU", GELU, erfGELU, nil},
		{"Sigmoid", Sigmoid, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, nil},
		{"Tanh", Tanh, math.Tanh, nil},
		{"Clamp", func(a *Tensor) *Tensor { return Clamp(a, -0.5, 1) }, func(x float64) float64 { return math.Min(math.Max(x, -0.5), 1) }, nil},
		{"PowScalar2", func(a *Tensor) *Tensor { return PowScalar(a, 2) }, func(x float64) float64 { return x * x }, nil},
		{"PowScalar1.5", func(a *Tensor) *Tensor { return PowScalar(a, 1.5) }, func(x float64) float64 { return math.Pow(x, 1.5) }, math.Abs},
		{"PowScalar-1", func(a *Tensor) *Tensor { return PowScalar(a, -1) }, func(x float64) float64 { return 1 / x }, nil},
		{"RDivScalar", func(a *Tensor) *Tensor { return RDivScalar(2, a) }, func(x float64) float64 { return 2 / x }, nil},
	}
	for _, dt := range dtypes {
		for _, op := range ops {
			t.Run(dt.String()+"/"+op.name, func(t *testing.T) {
				x := seqTensor(dt, 3, 7)
				if op.in != nil {
					for i, v := range values(x) {
						x.Set(op.in(v)+0.01, i/7, i%7)
					}
				}
				xt := Transpose(x, 0, 1) // exercise the non-contiguous input path
				got := op.op(xt)
				require.Equal(t, []int{7, 3}, got.Shape())
				forEachIndex(got.Shape(), func(idx []int) {
					ref := op.ref(xt.At(idx...))
					assert.InDelta(t, ref, got.At(idx...), tol(dt)*(1+math.Abs(ref)), "at %v", idx)
				})
			})
		}
	}
}

func TestUnaryEdgeValues(t *testing.T) {
	x := FromF64([]float64{-1000, 1000, math.NaN(), 0}, 4)
	s := Sigmoid(x)
	assert.Equal(t, 0.0, s.At(0))
	assert.Equal(t, 1.0, s.At(1))
	assert.True(t, math.IsNaN(s.At(2)))
	r := ReLU(x)
	assert.True(t, math.IsNaN(r.At(2)), "ReLU propagates NaN like torch")
	assert.Equal(t, []float64{0, 1000}, []float64{r.At(0), r.At(1)})
	assert.InDelta(t, 0.8413447460685429, GELU(FromF64([]float64{1}, 1)).At(0), 1e-15)
}

// TestBinaryRandomViews checks the collapsing iterator on random layouts:
// random shapes, permuted and narrowed views, random broadcast patterns.
func TestBinaryRandomViews(t *testing.T) {
	g := NewRNG(3)
	randView := func(dt DType, shape []int) *Tensor {
		// Build a larger tensor, narrow each dim, then permute back so the
		// logical shape is `shape` but the strides are not C order.
		r := len(shape)
		perm := g.Perm(r)
		big := make([]int, r)
		for i, p := range perm {
			big[i] = shape[p] + g.IntN(2)
		}
		x := seqTensor(dt, big...)
		for i, p := range perm {
			x = Narrow(x, i, big[i]-shape[p], shape[p])
		}
		inv := make([]int, r)
		for i, p := range perm {
			inv[p] = i
		}
		return Permute(x, inv...)
	}
	for trial := 0; trial < 60; trial++ {
		dt := dtypes[trial%2]
		r := 1 + g.IntN(4)
		shape := make([]int, r)
		for i := range shape {
			shape[i] = 1 + g.IntN(4)
		}
		bshape := cloneInts(shape)
		for i := range bshape {
			if g.IntN(3) == 0 {
				bshape[i] = 1
			}
		}
		bshape = bshape[g.IntN(r):]
		t.Run(fmt.Sprintf("%d/%v/%v_%v", trial, dt, shape, bshape), func(t *testing.T) {
			a, b := randView(dt, shape), randView(dt, bshape)
			if g.IntN(2) == 0 {
				a, b = b, a
			}
			got := Sub(a, b)
			out := broadcastShape("test", a.Shape(), b.Shape())
			require.Equal(t, out, got.Shape())
			forEachIndex(out, func(idx []int) {
				assert.InDelta(t, a.At(bcastIndex(a, idx)...)-b.At(bcastIndex(b, idx)...), got.At(idx...), 1e-6)
			})
			// The in-place path over the same layouts.
			dst := randView(dt, out)
			before := values(dst)
			Axpy(dst, 2, b)
			i := 0
			forEachIndex(out, func(idx []int) {
				assert.InDelta(t, before[i]+2*b.At(bcastIndex(b, idx)...), dst.At(idx...), 1e-5)
				i++
			})
		})
	}
}
