package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestGELUTanhGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return GELUTanh(xs[0]) }, randT(1, 2, 0, 3, 7))
	// After a fresh op the engine owns gy.
	gradCheck(t, func(xs []*Variable) *Variable { return GELUTanh(Mul(xs[0], xs[1])) }, randT(2, 2, 0, 3, 4), randT(3, 0.5, 1, 3, 4))
}

// torch 1.13's F.gelu(x, approximate='tanh') and its gradient in float64
// at these points (printed by torch, read here as facts).
var torchGELUTanh = []struct{ x, y, d float64 }{
	{-30, math.Copysign(0, -1), 0},
	{-4, -7.024594819227126e-05, -0.00033512319712218684},
	{-3, -0.0036373920817729943, -0.011584166630969648},
	{-0.75, -0.17003944483437966, 0.001061743862585618},
	{-1e-3, -0.000499601057786418, 0.499202115706475},
	{0, 0, 0.5},
	{0.5, 0.34571400982514394, 0.8673699035346424},
	{1, 0.8411919906082768, 1.0829640838457826},
	{2.5, 2.484915733910001, 1.037951576212666},
	{6, 5.9999999999156035, 1.0000000007709977},
}

// GELUTanh is torch's: float64 (the gradient checks' math.Tanh) to 1e-12,
// float32 (the host's C kernel with its kept derivative) to
// an ulp, relative to the value, or to 2**-23 for a derivative near its
// root at -0.7525.
func TestGELUTanhMatchesTorch(t *testing.T) {
	xs := make([]float64, len(torchGELUTanh))
	for i, c := range torchGELUTanh {
		xs[i] = c.x
	}
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		x := Param(tensor.AsType(tensor.FromF64(xs, len(xs)), dt))
		y := GELUTanh(x)
		require.NoError(t, SumAll(y).Backward())
		gotY, gotD := toF64(y.Value), toF64(x.Grad)
		tol := 1e-12 // float64's 1 + tanh u cancels in the left tail, torch's and math.Tanh's alike
		if dt == tensor.Float32 {
			tol = 0x1p-23
		}
		for i, c := range torchGELUTanh {
			require.InDelta(t, c.y, gotY[i], tol*math.Abs(c.y), "%v GELUTanh(%v)", dt, c.x)
			require.InDelta(t, c.d, gotD[i], tol*math.Max(math.Abs(c.d), 1), "%v GELUTanh'(%v)", dt, c.x)
		}
	}
}

// The float32 path (the host's vectorised kernel) against the float64 one
// (math.Tanh) over [-4, 10], where float64's ½x(1 + tanh u) still holds
// its relative accuracy (further left 1 + tanh u cancels in float64 too),
// with and without the engine owning gy.
func TestGELUTanhFloat32MatchesFloat64(t *testing.T) {
	checkF32MatchesF64(t, GELUTanh, sweepT(4, 10, 2001, -0.7524614, 1e-30, -1e-30, 0), 1)
}

// A float32 GELUTanh that needs a gradient keeps GELUTanh'(x); its
// freeing backward (BackwardAndFree) writes the gradient over that
// derivative and returns it, no activation-sized buffer per block per
// step, while the plain backward keeps it for another pass. The values
// are gy·GELUTanh'(x) both ways. One that needs no gradient keeps nothing.
func TestGELUTanhBackwardReusesDerivative(t *testing.T) {
	rng := tensor.NewRNG(7)
	x := Param(tensor.Randn(rng, tensor.Float32, 64, 96))
	y := GELUTanh(x)
	op, ok := y.Creator().(*geluTanhOp)
	require.True(t, ok, "GELUTanh on a float32 input that needs a gradient is one op")
	require.NotNil(t, op.deriv, "the host keeps the float32 derivative")
	require.Nil(t, op.x)
	d := op.deriv.F32()
	deriv := append([]float32(nil), d...)
	gy := tensor.Randn(rng, tensor.Float32, 64, 96)
	want := make([]float32, len(d))
	for i := range want {
		want[i] = gy.F32()[i] * d[i]
	}
	for range 2 {
		gx := op.Backward(gy)[0]
		require.NotSame(t, &d[0], &gx.F32()[0], "the retaining backward must keep the derivative")
		require.Equal(t, want, gx.F32())
	}
	gx := op.BackwardFreeing(gy, nil)[0]
	require.Same(t, &d[0], &gx.F32()[0], "the gradient must reuse the derivative's storage")
	require.Equal(t, want, gx.F32())
	require.Empty(t, op.savedTensors(), "the derivative became the gradient: nothing left to recycle")
	require.PanicsWithValue(t, errGELUTanhTwice, func() { op.Backward(gy) })

	// The engine takes the freeing path under BackwardAndFree.
	x2 := Param(x.Value)
	require.NoError(t, SumAll(GELUTanh(x2)).BackwardAndFree())
	require.Equal(t, deriv, x2.Grad.F32(), "gy = 1: the gradient is the derivative")

	require.Nil(t, GELUTanh(Const(x.Value)).Creator(), "no gradient: nothing kept")
}
