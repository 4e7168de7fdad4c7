package sim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// gemmCase is one GEMM of the bf16 tests: op(A) m×k, op(B) k×n, with row
// strides past the rows' ends (pad elements) to check the strides hold.
type gemmCase struct {
	transA, transB bool
	m, n, k, pad   int
	alpha, beta    float32
}

func (c gemmCase) String() string {
	return fmt.Sprintf("tA=%v/tB=%v/%dx%dx%d/pad%d/alpha%g/beta%g", c.transA, c.transB, c.m, c.n, c.k, c.pad, c.alpha, c.beta)
}

// operands are the case's A, B and C as host slices with their row strides.
func (c gemmCase) operands(rng *tensor.RNG) (a, b, cc []float32, lda, ldb, ldc int) {
	ar, ac := c.m, c.k
	if c.transA {
		ar, ac = ac, ar
	}
	br, bc := c.k, c.n
	if c.transB {
		br, bc = bc, br
	}
	lda, ldb, ldc = ac+c.pad, bc+c.pad, c.n+c.pad
	a = tensor.Randn(rng, tensor.Float32, ar*lda).F32()
	b = tensor.Randn(rng, tensor.Float32, br*ldb).F32()
	cc = tensor.Randn(rng, tensor.Float32, c.m*ldc).F32()
	return
}

// absProducts is Σ_k |alpha·op(A)ik·op(B)kj| + |beta·Cij| per element of C,
// the scale of the rounding error of a float32 sum in any order.
func (c gemmCase) absProducts(a, b, cc []float32, lda, ldb, ldc int) []float64 {
	at := func(i, p int) float64 {
		if c.transA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if c.transB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	s := make([]float64, len(cc))
	for i := range c.m {
		for j := range c.n {
			v := math.Abs(float64(c.beta) * float64(cc[i*ldc+j]))
			for p := range c.k {
				v += math.Abs(float64(c.alpha) * at(i, p) * bt(p, j))
			}
			s[i*ldc+j] = v
		}
	}
	return s
}

// The device's bf16 GEMM (Kernels.GemmBF16: the operands narrowed to
// bfloat16 on the device, the product in float32) gives the CPU's
// tensor.GemmBF16 on odd shapes, every transpose, row strides with padding,
// alpha and beta, up to the order of the float32 sums: and so differs from
// the float32 GEMM by far more than that wherever the rounding matters.
func TestGemmBF16OnSimMatchesCPU(t *testing.T) {
	dev := newDevice(t).Tensors()
	k := dev.Kernels()
	require.NotNil(t, k.GemmBF16)
	var cases []gemmCase
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			cases = append(cases,
				gemmCase{tA, tB, 7, 13, 33, 0, 1, 0},
				gemmCase{tA, tB, 1, 17, 129, 3, 0.5, 1},
				gemmCase{tA, tB, 31, 1, 5, 1, -2, 0.25},
				gemmCase{tA, tB, 65, 47, 300, 2, 1, 1})
		}
	}
	cases = append(cases, gemmCase{false, true, 3, 5, 0, 1, 1, 0.5}) // k = 0: C = beta*C
	rng := tensor.NewRNG(29)
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			a, b, cc, lda, ldb, ldc := c.operands(rng)
			want := append([]float32(nil), cc...)
			tensor.GemmBF16(c.transA, c.transB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, want, ldc)
			f32 := append([]float32(nil), cc...)
			tensor.Gemm(c.transA, c.transB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, f32, ldc)

			da, db, dc := tensor.FromF32(a, len(a)).MustTo(dev), tensor.FromF32(b, len(b)).MustTo(dev), tensor.FromF32(cc, len(cc)).MustTo(dev)
			k.GemmBF16(c.transA, c.transB, c.m, c.n, c.k, c.alpha, da, lda, db, ldb, c.beta, dc, ldc)
			got := dc.MustTo(tensor.CPU()).F32()
			require.Equal(t, a, da.MustTo(tensor.CPU()).F32(), "the operands stay float32: only copies are narrowed")

			scale := c.absProducts(a, b, cc, lda, ldb, ldc)
			const eps = 1.0 / (1 << 23) // float32's unit roundoff ×2
			farther := 0
			for i := range got {
				if i%ldc >= c.n {
					require.Equal(t, cc[i], got[i], "element %d is in C's padding: untouched", i)
					continue
				}
				// Two float32 sums of the same k+1 exact terms in
				// different orders differ by at most about (k+1)·eps·Σ|terms|.
				tol := float64(c.k+2) * eps * scale[i]
				d := math.Abs(float64(got[i]) - float64(want[i]))
				require.LessOrEqual(t, d, tol, "element %d (row %d, column %d): sim %v, CPU %v", i, i/ldc, i%ldc, got[i], want[i])
				if math.Abs(float64(f32[i])-float64(want[i])) > 4*tol {
					farther++
				}
			}
			if c.k >= 5 {
				require.Positive(t, farther, "the float32 product should differ from the bf16 one beyond the tolerance somewhere, or the test tells nothing")
			}
		})
	}
}

// bf16Losses trains a small convnet (Conv2d, ReLU, Linear) under bf16
// autocast on dev for steps SGD steps and returns the loss of each, and
// the final weights on the host; bf16 false trains in float32.
func bf16Losses(t *testing.T, dev tensor.Device, bf16 bool, steps int) ([]float64, [][]float32) {
	rng := tensor.NewRNG(11)
	model := nn.NewSequential(
		nn.NewConv2d(rng, 2, 6, 3), nn.NewReLU(), nn.NewFlatten(),
		nn.NewLinear(rng, 6*5*5, 32), nn.NewReLU(), nn.NewLinear(rng, 32, 5))
	if bf16 {
		amp.Autocast(model, amp.BFloat16)
		require.Equal(t, 3, amp.Lowered(model))
	}
	require.NoError(t, nn.To(model, dev))
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
	require.NoError(t, err)
	x := tensor.Randn(rng, tensor.Float32, 16, 2, 7, 7)
	labels := make([]int, 16)
	for i := range labels {
		labels[i] = rng.IntN(5)
	}
	xd := x.MustTo(dev)
	var losses []float64
	for range steps {
		opt.ZeroGrad()
		loss := autograd.CrossEntropy(model.Forward(autograd.Const(xd)), labels, autograd.ReductionMean)
		require.NoError(t, loss.Backward())
		require.NoError(t, opt.Step())
		losses = append(losses, loss.Value.Item())
	}
	var w [][]float32
	for _, p := range nn.Parameters(model) {
		w = append(w, p.Value.MustTo(tensor.CPU()).Contiguous().F32())
	}
	return losses, w
}

// A small model under bf16 autocast trains on sim as on the CPU: the
// losses of 10 steps agree to well within what bf16 changes against
// float32 (before this, a device silently ran autocast's products in
// float32, which this test would catch: that run is the float32 one).
func TestAutocastBF16OnSimTracksCPU(t *testing.T) {
	dev := newDevice(t).Tensors()
	// Few steps: the CPU's oneDNN bf16 kernels sum in another order, and
	// once a sum tips a later bf16 rounding the runs drift apart (by 1e-5
	// at step 10, 6e-4 at step 20 here), as any two bf16 runs do.
	const steps = 10
	cpu, cpuW := bf16Losses(t, tensor.CPU(), true, steps)
	sim, simW := bf16Losses(t, dev, true, steps)
	f32, _ := bf16Losses(t, dev, false, steps)
	var maxBF16, maxF32 float64
	for i := range cpu {
		maxBF16 = max(maxBF16, math.Abs(cpu[i]-sim[i])/cpu[i])
		maxF32 = max(maxF32, math.Abs(cpu[i]-f32[i])/cpu[i])
	}
	t.Logf("losses: cpu bf16 %.6f → %.6f, sim bf16 %.6f → %.6f, sim fp32 %.6f → %.6f; max relative gap sim bf16 %.2g, fp32 %.2g",
		cpu[0], cpu[steps-1], sim[0], sim[steps-1], f32[0], f32[steps-1], maxBF16, maxF32)
	require.Less(t, cpu[steps-1], cpu[0], "the model trains")
	// Only the order of float32 sums differs (and, rarely, a bf16 rounding
	// it tips over), so the runs stay far closer than bf16 is to float32.
	require.InEpsilon(t, cpu[0], sim[0], 1e-6, "the first forward pass")
	require.Less(t, maxBF16, 1e-4, "sim bf16 against CPU bf16")
	require.Greater(t, maxF32, 10*maxBF16, "bf16 should move the losses measurably, or the test tells nothing")
	for i := range cpuW {
		for j := range cpuW[i] {
			require.InDelta(t, cpuW[i][j], simW[i][j], 1e-3, "parameter %d element %d", i, j)
		}
	}
}
