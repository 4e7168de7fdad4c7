package gpt2

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// memConfig is a GPT-2 whose tensors all come from the host allocator's
// cache (1 KiB and up) at batch 4: B·T = 256 rows, logits 512 KiB.
var memConfig = Config{VocabSize: 512, BlockSize: 64, Layers: 4, Heads: 4, Embd: 64}

func memBatch() (x *autograd.Variable, y *tensor.Tensor) {
	const b, t = 4, 64
	idx, tgt := make([]int64, b*t), make([]int64, b*t)
	for i := range idx {
		idx[i] = int64((i * 37) % memConfig.VocabSize)
		tgt[i] = int64((i*37 + 5) % memConfig.VocabSize)
	}
	return autograd.Const(tensor.FromI64(idx, b, t)), tensor.FromI64(tgt, b, t)
}

// Training with BackwardAndFree (the graph freed as the pass goes, the
// loss's and GELU's gradients written over what they saved, every freed
// block poisoned with NaN) takes the steps of Backward without freeing,
// bit for bit, dropout included.
func TestBackwardAndFreeTrainsBitIdentical(t *testing.T) {
	train := func(free bool) [][]uint32 {
		cfg := memConfig
		cfg.Dropout = 0.1
		m := newTiny(t, cfg, 3)
		params := nn.Parameters(m)
		opt, err := optim.NewAdamW(params, optim.DefaultAdamW())
		require.NoError(t, err)
		x, y := memBatch()
		for range 3 {
			opt.ZeroGrad()
			loss := m.Loss(m.Forward(x), y)
			if free {
				require.NoError(t, loss.BackwardAndFree())
			} else {
				require.NoError(t, loss.Backward())
			}
			require.NoError(t, opt.Step())
		}
		var out [][]uint32
		for _, p := range params {
			var b []uint32
			for _, v := range p.Value.F32() {
				b = append(b, math.Float32bits(v))
			}
			out = append(out, b)
		}
		return out
	}
	want := train(false)
	tensor.Host().SetPoison(true)
	t.Cleanup(func() { tensor.Host().SetPoison(false) })
	got := train(true)
	for i := range want {
		require.True(t, slices.Equal(want[i], got[i]), "parameter %d differs", i)
	}
}

// The memory bar of a training step: a backward adds to the forward's
// live bytes one logits-sized tensor and a few activations, not the
// gradient of every op (all of them lived until the pass ended) nor a
// gradient beside the softmax the loss saved. Bytes are the host
// allocator's, counted exactly.
func TestBackwardPeakLiveBytesGPT2(t *testing.T) {
	m := newTiny(t, memConfig, 3)
	opt, err := optim.NewAdamW(nn.Parameters(m), optim.DefaultAdamW())
	require.NoError(t, err)
	x, y := memBatch()
	step := func(measure bool) (added, logits int64) {
		opt.ZeroGrad()
		out := m.Forward(x)
		loss := m.Loss(out, y)
		h := tensor.Host()
		h.ResetPeak()
		base := h.Stats().Allocated
		require.NoError(t, loss.BackwardAndFree())
		require.NoError(t, opt.Step())
		return h.Stats().PeakAllocated - base, int64(out.Value.Numel() * 4)
	}
	step(false) // Grads and the optimizer's state exist from here on
	added, logits := step(true)
	const act = 256 * 64 * 4 // B·T × C float32
	t.Logf("backward added %d bytes over the forward's: %.2f logits + %.1f activations", added, float64(added)/float64(logits), float64(added-logits)/act)
	require.LessOrEqual(t, added, logits+8*act, "the backward's live bytes over the forward's")
}

// ForwardLoss is Loss(Forward(·)) to the bit, loss and every parameter's
// gradient, under Backward and under BackwardAndFree, ignored targets
// included; and its step holds one logits-sized tensor less.
func TestForwardLossMatchesForwardThenLoss(t *testing.T) {
	x, y := memBatch()
	tg := y.Ints()
	tg[3], tg[100] = IgnoreIndex, IgnoreIndex
	y = tensor.FromI64(func() []int64 {
		out := make([]int64, len(tg))
		for i, v := range tg {
			out[i] = int64(v)
		}
		return out
	}(), y.Shape()...)
	run := func(fused, free bool) (loss []uint32, grads [][]uint32) {
		m := newTiny(t, memConfig, 5)
		var l *autograd.Variable
		if fused {
			l = m.ForwardLoss(x, y)
			require.Equal(t, "gpt2.HeadLoss", l.Creator().Name())
		} else {
			l = m.Loss(m.Forward(x), y)
		}
		loss = []uint32{math.Float32bits(l.Value.F32()[0])}
		for range 2 { // the second step adds into existing Grads
			if free {
				require.NoError(t, l.BackwardAndFree())
				if fused {
					l = m.ForwardLoss(x, y)
				} else {
					l = m.Loss(m.Forward(x), y)
				}
			} else {
				require.NoError(t, l.Backward())
			}
		}
		for _, p := range nn.Parameters(m) {
			var b []uint32
			for _, v := range p.Grad.F32() {
				b = append(b, math.Float32bits(v))
			}
			grads = append(grads, b)
		}
		return loss, grads
	}
	tensor.Host().SetPoison(true)
	t.Cleanup(func() { tensor.Host().SetPoison(false) })
	for _, free := range []bool{false, true} {
		wantLoss, want := run(false, free)
		gotLoss, got := run(true, free)
		require.Equal(t, wantLoss, gotLoss, "free=%v: the loss", free)
		for i := range want {
			require.True(t, slices.Equal(want[i], got[i]), "free=%v: parameter %d's gradient differs", free, i)
		}
	}

	m := newTiny(t, memConfig, 5)
	peak := func(fused bool) int64 {
		h := tensor.Host()
		h.ResetPeak()
		base := h.Stats().Allocated
		var l *autograd.Variable
		if fused {
			l = m.ForwardLoss(x, y)
		} else {
			l = m.Loss(m.Forward(x), y)
		}
		require.NoError(t, l.BackwardAndFree())
		return h.Stats().PeakAllocated - base
	}
	peak(false) // every Grad exists from here on
	unfused, fused := peak(false), peak(true)
	logits := int64(256 * memConfig.PaddedVocab() * 4)
	t.Logf("a step's peak: %d bytes with Forward and Loss, %d with ForwardLoss (logits %d)", unfused, fused, logits)
	require.LessOrEqual(t, fused, unfused-logits, "ForwardLoss must hold one logits-sized tensor less")
}
