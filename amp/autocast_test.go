package amp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

func mlp(seed uint64) *nn.Sequential {
	rng := tensor.NewRNG(seed)
	return nn.NewSequential(nn.NewLinear(rng, 16, 64), nn.NewReLU(), nn.NewLinear(rng, 64, 4))
}

func TestAutocastLowersLinearsAndRestores(t *testing.T) {
	m := mlp(1)
	x := autograd.Const(tensor.NewRNG(2).Normal(tensor.Float32, 0, 1, 32, 16))
	f32 := m.Forward(x).Value.Contiguous().F32()
	restore := Autocast(m, BFloat16)
	require.Equal(t, 2, Lowered(m))
	bf := m.Forward(x).Value.Contiguous().F32()
	restore()
	require.Equal(t, 0, Lowered(m))
	require.Equal(t, f32, m.Forward(x).Value.Contiguous().F32(), "restore gave back float32")
	var maxd float64
	for i := range f32 {
		maxd = max(maxd, math.Abs(float64(f32[i]-bf[i])))
		require.InDelta(t, f32[i], bf[i], 0.05, "element %d: bf16 too far from float32", i)
	}
	require.Greater(t, maxd, 1e-4, "autocast changed nothing: the products were not lowered")
}

// TestBF16LinearGradients checks the lowered layer's three gradients
// against float64 products of the bf16-rounded operands.
func TestBF16LinearGradients(t *testing.T) {
	rng := tensor.NewRNG(3)
	const n, in, out = 24, 40, 12
	x := autograd.Param(rng.Normal(tensor.Float32, 0, 1, n, in))
	w := autograd.Param(rng.Normal(tensor.Float32, 0, 1, out, in))
	b := autograd.Param(rng.Normal(tensor.Float32, 0, 1, out))
	gy := rng.Normal(tensor.Float32, 0, 1, n, out)
	y := autograd.LinearWith(x, w, b, tensor.PrecisionBFloat16)
	require.NoError(t, autograd.SumAll(autograd.Mul(y, autograd.Const(gy))).Backward())
	r := func(v float32) float64 { return float64(tensor.RoundBF16(v)) }
	X, W, G := x.Value.F32(), w.Value.F32(), gy.F32()
	for i := range n {
		for j := range out {
			var s float64
			for p := range in {
				s += r(X[i*in+p]) * r(W[j*in+p])
			}
			require.InDelta(t, s+float64(b.Value.F32()[j]), y.Value.F32()[i*out+j], 1e-4, "y[%d,%d]", i, j)
		}
		for p := range in {
			var s float64
			for j := range out {
				s += r(G[i*out+j]) * r(W[j*in+p])
			}
			require.InDelta(t, s, x.Grad.F32()[i*in+p], 1e-4, "dx[%d,%d]", i, p)
		}
	}
	for j := range out {
		for p := range in {
			var s float64
			for i := range n {
				s += r(G[i*out+j]) * r(X[i*in+p])
			}
			require.InDelta(t, s, w.Grad.F32()[j*in+p], 1e-4, "dw[%d,%d]", j, p)
		}
		var s float64
		for i := range n {
			s += float64(G[i*out+j])
		}
		require.InDelta(t, s, b.Grad.F32()[j], 1e-4, "db[%d]: the bias gradient is a float32 sum", j)
	}
}

// TestBF16TrainsLikeFloat32 fits a small regression with and without
// autocast: bf16 products must not cost the fit.
func TestBF16TrainsLikeFloat32(t *testing.T) {
	rng := tensor.NewRNG(9)
	x := rng.Normal(tensor.Float32, 0, 1, 256, 16)
	teacher := mlp(100)
	y := teacher.Forward(autograd.Const(x)).Value
	final := map[DType]float64{}
	for _, dt := range []DType{Float32, BFloat16} {
		m := mlp(7)
		Autocast(m, dt)
		cfg := optim.DefaultAdam()
		cfg.LR = 3e-3
		opt, err := optim.NewAdam(nn.Parameters(m), cfg)
		require.NoError(t, err)
		var loss float64
		for range 300 {
			opt.ZeroGrad()
			l := autograd.MSELoss(m.Forward(autograd.Const(x)), autograd.Const(y), autograd.ReductionMean)
			require.NoError(t, l.Backward())
			require.NoError(t, opt.Step())
			loss = float64(l.Value.Contiguous().F32()[0])
		}
		final[dt] = loss
	}
	t.Logf("final loss: float32 %.5f, bf16 %.5f", final[Float32], final[BFloat16])
	require.Less(t, final[Float32], 0.05, "the float32 fit itself failed")
	require.Less(t, final[BFloat16], 1.5*final[Float32]+0.01)
}

func TestParseDType(t *testing.T) {
	for in, want := range map[string]DType{"bf16": BFloat16, "bfloat16": BFloat16, "fp16": Float16, "float16": Float16,
		"": Float32, "fp32": Float32, "off": Float32} {
		got, err := ParseDType(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ParseDType("int8")
	require.ErrorIs(t, err, ErrConfig)
}
