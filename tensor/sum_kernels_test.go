package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas/gonum"
)

// sumRef is SumAll's documented order written out plainly: lane i%16,
// pairwise combination, then the tail.
func sumRef[T float](x []T) float64 {
	var lane [16]float64
	whole := len(x) / 16 * 16
	for i := 0; i < whole; i++ {
		lane[i%16] += float64(x[i])
	}
	for w := 8; w >= 1; w /= 2 {
		for j := 0; j < w; j++ {
			lane[j] = lane[j] + lane[j+w]
		}
	}
	s := lane[0]
	for i := whole; i < len(x); i++ {
		s += float64(x[i])
	}
	return s
}

func testSumOrder[T float](t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{0, 1, 7, 15, 16, 17, 33, 255, 256, 257, 4111, 1000003} {
		for _, off := range []int{0, 1, 3} {
			x := kernelValues[T](rng, n+off, false)[off:]
			for i := range x {
				x[i] *= T(math.Pow(10, float64(i%13-6))) // wide exponents: the order shows
			}
			want := sumRef(x)
			require.Equal(t, math.Float64bits(want), math.Float64bits(sumSlice(x)), "n=%d off=%d", n, off)
			require.Equal(t, math.Float64bits(want), math.Float64bits(sumSliceGo(x)), "Go loop n=%d off=%d", n, off)
			if n > 40 {
				x[n/2], x[n/3] = T(math.Inf(1)), T(math.Copysign(0, -1))
				require.True(t, math.IsInf(sumSlice(x), 1))
				x[n/5] = T(math.NaN())
				require.True(t, math.IsNaN(sumSlice(x)))
			}
		}
	}
}

func TestSumAllOrderAllPaths(t *testing.T) {
	t.Run("float32", testSumOrder[float32])
	t.Run("float64", testSumOrder[float64])
	// Through the public function, on a strided view (summed in its element order).
	m := Rand(NewRNG(2), Float64, 37, 29)
	tr := Transpose(m, 0, 1)
	require.Equal(t, math.Float64bits(sumRef(tr.Contiguous().F64())), math.Float64bits(SumAll(tr)))
}

// BenchmarkSumKernels compares SumAll's Go loop with the C kernel; sumCMin
// is where "vec" should start to win.
//
//	go test -run '^$' -bench SumKernels ./tensor/
func BenchmarkSumKernels(b *testing.B) {
	for _, n := range []int{64, 128, 256, 1024, 1 << 20} {
		x := make([]float32, n)
		b.Run(fmt.Sprintf("go/%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for range b.N {
				sumSliceGo(x)
			}
		})
		if sumCMin < 1<<62 {
			b.Run(fmt.Sprintf("vec/%d", n), func(b *testing.B) {
				b.SetBytes(int64(4 * n))
				for range b.N {
					sumC(x)
				}
			})
		}
	}
}

// TestSumSquaresOrderAllPaths: ClipGradNorm's sum of squares gives the
// bits of SumAll's lane order over the squares on every path (the C
// kernel's clones and the Go loop), which also makes it independent of the
// CPU: the squares are exact in float64.
func TestSumSquaresOrderAllPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for _, n := range []int{0, 1, 15, 16, 17, 127, 128, 129, 4111, 1000003} {
		x := kernelValues[float32](rng, n, false)
		for i := range x {
			x[i] *= float32(math.Pow(10, float64(i%13-6)))
		}
		sq := make([]float64, n)
		for i, v := range x {
			sq[i] = float64(v) * float64(v)
		}
		want := sumRef(sq)
		require.Equal(t, math.Float64bits(want), math.Float64bits(sumSquares32(x)), "n=%d", n)
		require.Equal(t, math.Float64bits(want), math.Float64bits(sumSquaresGo(x)), "Go loop n=%d", n)
		if n > 40 {
			x[n/3] = float32(math.Inf(-1))
			require.True(t, math.IsInf(sumSquares32(x), 1), "n=%d: an infinite gradient", n)
			x[n/5] = float32(math.NaN())
			require.True(t, math.IsNaN(sumSquares32(x)), "n=%d: a NaN gradient", n)
		}
	}
}

// BenchmarkSumSquares: ClipGradNorm's sum of squares over 16M float32
// gradients, the kernel against gonum's Dsdot (what it replaced).
func BenchmarkSumSquares(b *testing.B) {
	x := make([]float32, 16<<20)
	for i := range x {
		x[i] = float32(i%1000) * 1e-3
	}
	b.Run("kernel", func(b *testing.B) {
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			sumSquares32(x)
		}
	})
	b.Run("dsdot", func(b *testing.B) {
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			gonum.Implementation{}.Dsdot(len(x), x, 1, x, 1)
		}
	})
}
