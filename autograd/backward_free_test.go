package autograd_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// chainLoss is a deep stack of Linear + Tanh layers on rows×width
// activations (64 KiB each) under a cross-entropy, with narrow weights so
// that the activations and their gradients are what a backward's memory
// is made of.
func chainLoss(x *autograd.Variable, ws []*autograd.Variable, target []int) *autograd.Variable {
	h := x
	for _, w := range ws {
		h = autograd.Tanh(autograd.Linear(h, w, nil))
	}
	return autograd.CrossEntropy(h, target, autograd.ReductionMean)
}

// A backward pass gives each intermediate gradient back to the cache as
// soon as the op that reads it has run, so the live bytes it adds over the
// forward's are a few activations' worth, not one per op (every gradient
// used to stay until the pass ended: 2·layers activations here). With
// BackwardAndFree the values go too, as the pass reaches them. The bytes
// are the host allocator's, counted exactly.
func TestBackwardPeakLiveBytes(t *testing.T) {
	const rows, width, layers = 256, 64, 16
	const act = rows * width * 4
	rng := tensor.NewRNG(11)
	ws := make([]*autograd.Variable, layers)
	for i := range ws {
		ws[i] = autograd.Param(tensor.Randn(rng, tensor.Float32, width, width))
		tensor.ScaleInto(ws[i].Value, 1/math.Sqrt(width))
	}
	x := autograd.Const(tensor.Randn(rng, tensor.Float32, rows, width))
	target := make([]int, rows)
	for i := range target {
		target[i] = i % width
	}
	// One step first, so that every Grad exists and the measured passes
	// add into them instead of allocating them.
	require.NoError(t, chainLoss(x, ws, target).BackwardAndFree())
	for _, free := range []bool{false, true} {
		for _, w := range ws {
			w.ZeroGrad()
		}
		loss := chainLoss(x, ws, target)
		h := tensor.Host()
		h.ResetPeak()
		base := h.Stats().Allocated
		if free {
			require.NoError(t, loss.BackwardAndFree())
		} else {
			require.NoError(t, loss.Backward())
		}
		added := h.Stats().PeakAllocated - base
		t.Logf("free=%v: backward's peak added %d bytes (%.1f activations) over the forward's %d", free, added, float64(added)/act, base)
		require.LessOrEqual(t, added, int64(4*act), "free=%v: the backward held %.1f activations' worth of gradients at once", free, float64(added)/act)
		if !free {
			loss.FreeGraph()
		}
	}
}

// BackwardAndFree keeps what the caller holds (the root, keep, leaves and
// their Grad) and gives the same gradients as Backward; the freed
// intermediates can no longer be read, and a second backward panics.
func TestBackwardAndFreeKeepsWhatTheCallerHolds(t *testing.T) {
	poisoned(t)
	run := func(free bool) (w, x, loss, out, h *autograd.Variable) {
		w = autograd.Param(tensor.Randn(tensor.NewRNG(4), tensor.Float32, 32, 64))
		x = autograd.Param(tensor.Randn(tensor.NewRNG(5), tensor.Float32, 16, 64))
		h = autograd.Linear(x, w, nil)
		out = autograd.Tanh(h)
		wv := autograd.Reshape(w, 64, 32)                                       // a node sharing the parameter's storage
		loss = autograd.MeanAll(autograd.Mul(autograd.Linear(out, wv, nil), x)) // [16, 64]
		if free {
			require.NoError(t, loss.BackwardAndFree(out))
		} else {
			require.NoError(t, loss.Backward())
		}
		return
	}
	w0, x0, loss0, out0, _ := run(false)
	w1, x1, loss1, out1, h1 := run(true)
	for range 8 { // hand the freed blocks out again and overwrite them
		tensor.Fill(tensor.New(tensor.Float32, 16, 32), 7)
		tensor.Fill(tensor.New(tensor.Float32, 16, 64), 7)
	}
	require.Equal(t, bits32(w0.Grad), bits32(w1.Grad), "w.Grad")
	require.Equal(t, bits32(x0.Grad), bits32(x1.Grad), "x.Grad")
	require.Equal(t, bits32(w0.Value), bits32(w1.Value), "w")
	require.Equal(t, bits32(loss0.Value), bits32(loss1.Value), "the root")
	require.Equal(t, bits32(out0.Value), bits32(out1.Value), "a kept output")
	require.Panics(t, func() { h1.Value.F32() }, "a freed intermediate is still readable")
	require.Panics(t, func() { _ = loss1.Backward() }, "backward through a freed graph")
}

// Under BackwardAndFree the cross-entropy writes the logits' gradient over
// the softmax it saved: the same numbers as Backward's fresh gradient,
// ignored rows zero, label smoothing and both reductions included.
func TestCrossEntropyGradientOverSoftmax(t *testing.T) {
	poisoned(t)
	ignore := 2
	for _, o := range []autograd.CrossEntropyOptions{
		{Reduction: autograd.ReductionMean, IgnoreIndex: &ignore},
		{Reduction: autograd.ReductionSum, LabelSmoothing: 0.1},
	} {
		grad := func(free bool) []uint32 {
			logits := autograd.Param(tensor.Randn(tensor.NewRNG(6), tensor.Float32, 24, 40))
			h := autograd.Scale(logits, 1.5) // a non-leaf under the loss
			loss := autograd.CrossEntropyWith(h, []int{2, 0, 5, 2, 9, 39, 2, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2, 14, 15, 16, 17, 18}, o)
			if free {
				require.NoError(t, loss.BackwardAndFree())
			} else {
				require.NoError(t, loss.Backward())
			}
			return bits32(logits.Grad)
		}
		want := grad(false)
		require.Equal(t, want, grad(true), "%+v", o)
		if o.IgnoreIndex != nil {
			require.Equal(t, make([]uint32, 40), want[:40], "an ignored row's gradient")
		}
	}
}
