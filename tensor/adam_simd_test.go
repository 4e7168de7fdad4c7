package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor/internal/simd"
)

// TestAdamVectorMatchesScalar: the SSE2 kernel must give the scalar loop's
// bits exactly, over lengths with and without a tail, for Adam and AdamW,
// minimising and maximising.
func TestAdamVectorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 3, 4, 5, 8, 31, 1027} {
		for _, h := range []adamHyper{
			{lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, stepSize: 1e-3 / 0.1, bc2Sqrt: math.Sqrt(0.001), beta1Sign: 1},
			{lr: 3e-4, wd: 0.01, beta1: 0.8, beta2: 0.99, eps: 1e-6, stepSize: 3e-4 / 0.36, bc2Sqrt: 0.2, beta1Sign: 1, decoupled: true},
			{lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, stepSize: 0.1, bc2Sqrt: 0.05, beta1Sign: 1, maximize: true},
		} {
			t.Run(fmt.Sprintf("n=%d/wd=%v/max=%v", n, h.wd, h.maximize), func(t *testing.T) {
				p, g, m, v := adamInputs(rng, n)
				p2, m2, v2 := append([]float32(nil), p...), append([]float32(nil), m...), append([]float32(nil), v...)
				adamUpdate(p, g, m, v, nil, h)
				scalarAdam(p2, g, m2, v2, h)
				for i := range p {
					require.Equal(t, math.Float32bits(p2[i]), math.Float32bits(p[i]), "p[%d]", i)
					require.Equal(t, math.Float32bits(m2[i]), math.Float32bits(m[i]), "m[%d]", i)
					require.Equal(t, math.Float32bits(v2[i]), math.Float32bits(v[i]), "v[%d]", i)
				}
			})
		}
	}
}

// TestAdamFusedMatchesScalar: adam_kernels.c's one pass (decay and update)
// must give the two-pass scalar loop's bits on each of its paths (AVX-512,
// AVX and scalar, as far as this CPU has them), over lengths that leave tails
// for every vector width, with and without the decay, and for parameters
// that are infinite or NaN (the decay must not run when wd is 0: 0·Inf).
func TestAdamFusedMatchesScalar(t *testing.T) {
	for level := range 3 {
		t.Run(fmt.Sprintf("level=%d", level), func(t *testing.T) { testAdamFusedLevel(t, level) })
	}
}

func testAdamFusedLevel(t *testing.T, level int) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 15, 16, 17, 33, 100, 1027} {
		for _, h := range []adamHyper{
			{lr: 6e-4, wd: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, stepSize: 6e-4 / 0.1, bc2Sqrt: math.Sqrt(0.05), beta1Sign: 1, decoupled: true},
			{lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, stepSize: 1e-3 / 0.19, bc2Sqrt: math.Sqrt(0.002), beta1Sign: 1, decoupled: true},
			{lr: 1e-2, wd: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, stepSize: 0.1, bc2Sqrt: 0.05, beta1Sign: -1, decoupled: true, maximize: true},
		} {
			t.Run(fmt.Sprintf("n=%d/wd=%v/max=%v", n, h.wd, h.maximize), func(t *testing.T) {
				p, g, m, v := adamInputs(rng, n)
				p[0] = float32(math.Inf(1))
				if n > 2 {
					p[2] = float32(math.NaN())
				}
				p2, m2, v2 := append([]float32(nil), p...), append([]float32(nil), m...), append([]float32(nil), v...)
				c := simd.AdamConsts{B1: float32(h.beta1), Omb1: float32((1 - h.beta1) * h.beta1Sign), B2: float32(h.beta2),
					Omb2: float32(1 - h.beta2), InvBc2: float32(1 / h.bc2Sqrt), Eps: float32(h.eps), Step: float32(h.stepSize)}
				if !adamFusedF32Level(p, g, m, v, h.wd != 0, float32(-h.lr*h.wd), c, level) {
					t.Skip("no fused kernel in this build (cgo off or noblas)")
				}
				scalarAdam(p2, g, m2, v2, h)
				for i := range p {
					require.Equal(t, math.Float32bits(p2[i]), math.Float32bits(p[i]), "p[%d]", i)
					require.Equal(t, math.Float32bits(m2[i]), math.Float32bits(m[i]), "m[%d]", i)
					require.Equal(t, math.Float32bits(v2[i]), math.Float32bits(v[i]), "v[%d]", i)
				}
			})
		}
	}
}

// adamInputs draws n parameters, gradients and moments at the scales of a
// training step (v a square, so non-negative).
func adamInputs(rng *rand.Rand, n int) (p, g, m, v []float32) {
	mk := func(scale float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * scale)
		}
		return x
	}
	p, g, m, v = mk(1), mk(1e-2), mk(1e-3), mk(1e-3)
	for i := range v {
		v[i] = v[i] * v[i]
	}
	return p, g, m, v
}

// scalarAdam is adamUpdate's common path without the vector kernel: the
// reference.
func scalarAdam(p, g, m, v []float32, h adamHyper) {
	sign := float32(1)
	if h.maximize {
		sign = -1
	}
	if h.decoupled && h.wd != 0 {
		s := float32(-h.lr * h.wd)
		for i := range p {
			p[i] += s * p[i]
		}
	}
	b1, b2 := float32(h.beta1), float32(h.beta2)
	omb1, omb2 := float32((1-h.beta1)*float64(sign)), float32(1-h.beta2)
	invBc2, eps, stepSize := float32(1/h.bc2Sqrt), float32(h.eps), float32(h.stepSize)
	for j := range p {
		gj := g[j]
		mj := b1*m[j] + omb1*gj
		vj := b2*v[j] + omb2*gj*gj
		m[j], v[j] = mj, vj
		p[j] -= stepSize * mj / (float32(math.Sqrt(float64(vj)))*invBc2 + eps)
	}
}

// BenchmarkAdamW: one AdamW step (decay 0.1) over 16M float32 parameters,
// the size of one of GPT-2 124M's larger groups, as adamUpdate runs it:
// one fused pass with cgo, the decay's axpy then the SSE2 kernel without.
// GODDP_NUM_THREADS does not matter (one thread); compare with
// -tags noblas for the two-pass figure.
func BenchmarkAdamW(b *testing.B) {
	const n = 16 << 20
	p, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range p {
		p[i], g[i], m[i], v[i] = 1, 1e-3, 1e-4, 1e-8
	}
	h := adamHyper{lr: 6e-4, wd: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, stepSize: 6e-4, bc2Sqrt: 1, beta1Sign: 1, decoupled: true}
	b.SetBytes(7 * 4 * n)
	for b.Loop() {
		adamUpdate(p, g, m, v, nil, h)
	}
}
