package tensor

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// dirtyHeap leaves freed, NaN-filled float memory for the next large
// allocations to reuse, so that an element an op forgot to write shows.
func dirtyHeap() {
	for range 4 {
		g := make([]float32, 1<<21)
		for i := range g {
			g[i] = float32(math.NaN())
		}
		runtime.KeepAlive(g)
	}
	runtime.GC()
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
			dirtyHeap()
			out := f()
			require.GreaterOrEqual(t, out.Numel()*out.DType().Size(), newFullMin, "the unzeroed path must run")
			require.True(t, out.IsContiguous())
			for k, v := range AsType(out, Float64).F64() {
				if math.IsNaN(v) {
					t.Fatalf("element %d left unwritten", k)
				}
			}
		})
	}
}
