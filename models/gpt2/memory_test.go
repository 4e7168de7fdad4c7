package gpt2

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// GELUTanh's backward writes the gradient over its saved derivative and
// returns that tensor: no activation-sized buffer per block per step is
// left to the garbage collector (the engine recycles only its own ops'
// gradients). The values are gy·GELU'(x), as before.
func TestGELUTanhBackwardReusesDerivative(t *testing.T) {
	rng := tensor.NewRNG(7)
	x := autograd.Param(tensor.Randn(rng, tensor.Float32, 64, 96))
	y := GELUTanh(x)
	op, ok := y.Creator().(*geluTanhOp)
	require.True(t, ok, "GELUTanh on a host float32 input is one gpt2.GELUTanh op")
	d := op.deriv.F32()
	gy := tensor.Randn(rng, tensor.Float32, 64, 96)
	want := make([]float32, len(d))
	for i := range want {
		want[i] = gy.F32()[i] * d[i]
	}
	gx := op.Backward(gy)[0]
	require.Same(t, &d[0], &gx.F32()[0], "the gradient must reuse the derivative's storage")
	require.Equal(t, want, gx.F32())
	require.PanicsWithValue(t, "gpt2: GELUTanh: backward through the same graph a second time: its saved derivative became the first backward's gradient; run the forward again",
		func() { op.Backward(gy) })
}
