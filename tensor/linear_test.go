package tensor

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// LinearBackwardWith overwrites fresh gradient buffers whole (BLAS's beta
// 0 semantics, the bias sums cleared): buffers full of NaN, as an
// uninitialized block from the cache may be, give the gradients of zeroed
// ones.
func TestLinearBackwardOverwritesFreshBuffers(t *testing.T) {
	rng := NewRNG(2)
	x, w, gy := Randn(rng, Float32, 5, 7), Randn(rng, Float32, 3, 7), Randn(rng, Float32, 5, 3)
	for _, p := range []Precision{PrecisionFloat32, PrecisionBFloat16} {
		want := []*Tensor{New(Float32, 5, 7), New(Float32, 3, 7), New(Float32, 3)}
		LinearBackwardWith(gy, x, w, want[0], want[1], want[2], false, false, false, p)
		got := []*Tensor{New(Float32, 5, 7), New(Float32, 3, 7), New(Float32, 3)}
		for _, g := range got {
			Fill(g, math.NaN())
		}
		LinearBackwardWith(gy, x, w, got[0], got[1], got[2], false, false, false, p)
		for i := range want {
			require.Equal(t, want[i].F32(), got[i].F32(), "precision %v, gradient %d", p, i)
		}
	}
}

// A Linear with few rows against a wide weight runs transposed (yᵀ = w·xᵀ,
// linearSwapped); it gives the product and bias of the plain loop, with
// and without bias, at sizes that are not multiples of the transpose tile.
func TestLinearSwappedShape(t *testing.T) {
	const n, in, out = 5, 1030, 67
	require.True(t, linearSwapped(n, in, out))
	require.False(t, linearSwapped(64, 784, 512), "a weight that ran the same both ways keeps the one product")
	rng := NewRNG(3)
	x, w, b := Randn(rng, Float32, n, in), Randn(rng, Float32, out, in), Randn(rng, Float32, out)
	for _, bias := range []*Tensor{b, nil} {
		y := Linear(x, w, bias)
		require.Equal(t, []int{n, out}, y.Shape())
		for i := range n {
			for j := range out {
				var want float64
				if bias != nil {
					want = float64(b.F32()[j])
				}
				for k := range in {
					want += float64(x.F32()[i*in+k]) * float64(w.F32()[j*in+k])
				}
				require.InDelta(t, want, float64(y.F32()[i*out+j]), 1e-3, "y[%d][%d] bias=%v", i, j, bias != nil)
			}
		}
	}
}

// LinearF32 adds the bias in oneDNN's matmul epilogue where the engine runs
// the shape through oneDNN (engineLinearFused), and fills the rows first
// elsewhere; both give the float64 product plus bias within float32's
// rounding, on one thread and sliced over two (cut along the outputs,
// where each slice takes its own part of the bias, and along the rows).
// A slice of the bias that went to the wrong columns, or a bias added
// twice, is off by whole values.
func TestLinearF32Bias(t *testing.T) {
	defer SetThreads(Threads())
	rng := NewRNG(4)
	for _, sh := range []struct{ n, in, out int }{{64, 96, 520}, {520, 96, 128}, {2048, 128, 76}, {64, 512, 10}} {
		x, w, b := Randn(rng, Float32, sh.n, sh.in), Randn(rng, Float32, sh.out, sh.in), Randn(rng, Float32, sh.out)
		want := make([]float64, sh.n*sh.out)
		for i := range sh.n {
			for j := range sh.out {
				acc := float64(b.F32()[j])
				for k := range sh.in {
					acc += float64(x.F32()[i*sh.in+k]) * float64(w.F32()[j*sh.in+k])
				}
				want[i*sh.out+j] = acc
			}
		}
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			y := make([]float32, sh.n*sh.out)
			for i := range y {
				y[i] = float32(math.NaN()) // the output is written whole
			}
			LinearF32(y, x.F32(), w.F32(), b.F32(), sh.n, sh.in, sh.out)
			for i, v := range want {
				require.InDelta(t, v, float64(y[i]), 1e-4*math.Sqrt(float64(sh.in)), "%v, %d threads, y[%d][%d] (fused %v)",
					sh, threads, i/sh.out, i%sh.out, engineLinearFused(sh.n, sh.out, sh.in))
			}
		}
	}
	if BLASName() == "onednn+openblas" {
		require.True(t, engineLinearFused(2048, 512, 128), "a GPT's Linear adds its bias in the epilogue")
		require.False(t, engineLinearFused(512, 10, 512), "a narrow output keeps sgemm")
	}
}

// A bf16 Linear with a bias adds it in the bf16 matmul's epilogue: the
// float64 product of the rounded operands plus the bias, within float32's
// rounding, on one thread and on two (slices cut along the outputs take
// their part of the bias).
func TestLinearBF16Bias(t *testing.T) {
	defer SetThreads(Threads())
	rng := NewRNG(5)
	for _, sh := range []struct{ n, in, out int }{{64, 96, 520}, {520, 96, 128}, {64, 512, 10}} {
		x, w, b := Randn(rng, Float32, sh.n, sh.in), Randn(rng, Float32, sh.out, sh.in), Randn(rng, Float32, sh.out)
		for _, threads := range []int{1, 2} {
			SetThreads(threads)
			y := LinearWith(x, w, b, PrecisionBFloat16).F32()
			for i := range sh.n {
				for j := range sh.out {
					want := float64(b.F32()[j])
					for k := range sh.in {
						want += float64(RoundBF16(x.F32()[i*sh.in+k])) * float64(RoundBF16(w.F32()[j*sh.in+k]))
					}
					require.InDelta(t, want, float64(y[i*sh.out+j]), 1e-4*math.Sqrt(float64(sh.in)), "%v, %d threads, y[%d][%d]", sh, threads, i, j)
				}
			}
		}
	}
}
