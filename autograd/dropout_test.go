package autograd

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestDropoutIdentity(t *testing.T) {
	x := Param(randT(1, 1, 0, 3, 4))
	require.Same(t, x, Dropout(x, 0.5, tensor.NewRNG(1), false), "eval mode returns the input")
	require.Same(t, x, Dropout(x, 0, tensor.NewRNG(1), true), "p = 0 returns the input")
}

func TestDropoutMaskAndScale(t *testing.T) {
	const p = 0.25
	x := Param(to32T(absShift(randT(1, 1, 0, 100, 100), 0.1)))
	y := Dropout(x, p, tensor.NewRNG(7), true)
	zeros := 0
	xd, yd := x.Value.F32(), y.Value.F32()
	for i, v := range yd {
		if v == 0 {
			zeros++
		} else {
			require.InDelta(t, xd[i]/(1-p), v, 1e-5)
		}
	}
	require.InDelta(t, p, float64(zeros)/float64(len(yd)), 0.02)
	require.NoError(t, SumAll(y).Backward())
	for i, v := range yd {
		if v == 0 {
			require.Zero(t, x.Grad.F32()[i])
		} else {
			require.InDelta(t, 1/(1-p), x.Grad.F32()[i], 1e-6)
		}
	}
	all := Dropout(x, 1, tensor.NewRNG(7), true)
	require.Equal(t, make([]float32, 10000), all.Value.F32())
	require.Panics(t, func() { Dropout(x, 1.5, tensor.NewRNG(7), true) })
}

// The mask over more elements than one block of draws and one state of
// the generator (624 outputs) is torch's rule element by element (the
// rule the 50-element torch fixture in nn checks): kept where that
// element's Float64 is below 1-p, drawn in order from the same seed.
func TestDropoutDrawsOnePerElement(t *testing.T) {
	const p = 0.3
	x := Const(to32T(absShift(randT(1, 1, 0, 1500), 0.1)))
	y := Dropout(x, p, tensor.NewRNG(11), true).Value.F32()
	ref := tensor.NewRNG(11)
	for i, v := range y {
		kept := ref.Float64() < 1-p
		require.Equal(t, kept, v != 0, "element %d", i)
	}
}

func TestDropoutDeterministicPerSeed(t *testing.T) {
	x := Const(randT(1, 1, 0, 50))
	a := Dropout(x, 0.5, tensor.NewRNG(3), true).Value.F64()
	b := Dropout(x, 0.5, tensor.NewRNG(3), true).Value.F64()
	require.Equal(t, a, b)
}

func TestDropoutGradCheck(t *testing.T) {
	// Reseeding inside f keeps the mask fixed across the perturbed forwards.
	gradCheck(t, func(xs []*Variable) *Variable { return Dropout(xs[0], 0.4, tensor.NewRNG(5), true) }, randT(1, 1, 0, 4, 5))
	gradCheck(t, func(xs []*Variable) *Variable { return Dropout(Exp(xs[0]), 0.4, tensor.NewRNG(5), true) }, randT(1, 1, 0, 4, 5))
}

// FreeGraph gives Dropout's mask back with the graph, so that a steady
// training loop through a Dropout stops missing the host cache: the mask
// held a block of the cache's size class, which the next step missed.
func TestDropoutMaskRecycled(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	rng := tensor.NewRNG(3)
	w1, w2 := Param(randF32(r, 0.05, 1024, 256)), Param(randF32(r, 0.05, 10, 1024))
	x := Const(randF32(r, 1, 64, 256))
	step := func() *dropoutOp {
		h := Dropout(ReLU(Linear(x, w1, nil)), 0.4, rng, true)
		op := h.Creator().(*dropoutOp)
		loss := SumAll(Linear(h, w2, nil))
		require.NoError(t, loss.Backward())
		loss.FreeGraph()
		return op
	}
	op := step()
	require.Panics(t, func() { op.st.Scratch().F32() }, "the mask's storage was recycled")
	step()
	before := tensor.Host().Stats().Misses
	for range 5 {
		step()
	}
	require.Equal(t, before, tensor.Host().Stats().Misses, "steady steps missed the host cache")
}
