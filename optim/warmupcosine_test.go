package optim

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// The schedule's values at the warm-up, the cosine and after the decay,
// computed by hand from nanoGPT's get_lr with learning_rate 6e-4, min_lr
// 6e-5, warmup_iters 10, lr_decay_iters 110; the second group (peak 3e-4)
// follows the same formula from its own peak.
func TestWarmupCosineLRValues(t *testing.T) {
	o := twoGroupSGD(t, []float64{6e-4, 3e-4})
	s, err := NewWarmupCosineLR(o, 10, 110, 6e-5)
	require.NoError(t, err)
	want := map[int][2]float64{
		0:   {6e-4 * 1 / 11, 3e-4 * 1 / 11}, // warm-up: lr*(it+1)/(warmup+1), never 0
		9:   {6e-4 * 10 / 11, 3e-4 * 10 / 11},
		10:  {6e-4, 3e-4},                                                                 // the peak: cos(0)
		35:  {6e-5 + 0.8535533905932737*5.4e-4, 6e-5 + 0.8535533905932737*2.4e-4},         // (1+cos(pi/4))/2
		60:  {3.3e-4, 1.8e-4},                                                             // half way: (peak+min)/2
		109: {6e-5 + 0.00024671981713420024*5.4e-4, 6e-5 + 0.00024671981713420024*2.4e-4}, // (1+cos(99pi/100))/2
		110: {6e-5, 6e-5},                                                                 // the end of the decay
		150: {6e-5, 6e-5},                                                                 // after it
	}
	for it := 0; it <= 150; it++ {
		require.Equal(t, it, s.LastEpoch())
		if w, ok := want[it]; ok {
			got := lrs(o)
			assert.InDelta(t, w[0], got[0], 1e-15, "step %d group 0", it)
			assert.InDelta(t, w[1], got[1], 1e-15, "step %d group 1", it)
			assert.InDelta(t, w[0], WarmupCosine(it, 10, 110, 6e-4, 6e-5), 1e-15, "WarmupCosine at step %d", it)
		}
		s.Step()
	}
}

// A decay that ends with (or before) the warm-up has no cosine: minLR
// follows the warm-up, with no division by zero.
func TestWarmupCosineLREmptyDecay(t *testing.T) {
	for _, decay := range []int{0, 3, 5} {
		assert.InDelta(t, 1.0*3/6, WarmupCosine(2, 5, decay, 1, 0.1), 1e-15)
		assert.Equal(t, 0.1, WarmupCosine(5, 5, decay, 1, 0.1), "decay %d", decay)
		assert.Equal(t, 0.1, WarmupCosine(9, 5, decay, 1, 0.1), "decay %d", decay)
	}
	// No warm-up: step 0 is the peak.
	assert.Equal(t, 1.0, WarmupCosine(0, 0, 10, 1, 0.1))
}

// A scheduler loaded from a state dict mid-schedule continues it: the
// next Step gives the next step's rate, from the saved peak.
func TestWarmupCosineLRStateDict(t *testing.T) {
	o := twoGroupSGD(t, []float64{6e-4, 3e-4})
	s, err := NewWarmupCosineLR(o, 10, 110, 6e-5)
	require.NoError(t, err)
	for range 60 {
		s.Step()
	}
	sd := s.StateDict()
	assert.Equal(t, "WarmupCosineLR", sd.Kind)

	o2 := twoGroupSGD(t, []float64{1, 1}) // other peaks: the state's base lrs win
	s2, err := NewWarmupCosineLR(o2, 0, 1, 0)
	require.NoError(t, err)
	require.NoError(t, s2.LoadStateDict(sd))
	assert.Equal(t, 60, s2.LastEpoch())
	s2.Step()
	assert.InDelta(t, WarmupCosine(61, 10, 110, 6e-4, 6e-5), o2.ParamGroups()[0].LR, 1e-15)
	assert.InDelta(t, WarmupCosine(61, 10, 110, 3e-4, 6e-5), o2.ParamGroups()[1].LR, 1e-15)

	bad := s.StateDict()
	bad.Scalars["warmup_steps"] = -1
	assert.True(t, errors.Is(s2.LoadStateDict(bad), ErrStateDict))
	_, err = NewWarmupCosineLR(o, -1, 10, 0)
	assert.True(t, errors.Is(err, ErrInvalidConfig))
	_, err = NewWarmupCosineLR(o, 1, 10, -1)
	assert.True(t, errors.Is(err, ErrInvalidConfig))
}

// DecayGroups puts the weights of two or more dimensions in the decayed
// group and biases and LayerNorm's parameters in the other, as nanoGPT's
// configure_optimizers; AdamW then decays the first group only.
func TestDecayGroups(t *testing.T) {
	w := autograd.Param(tensor.FromF32([]float32{1, 1, 1, 1}, 2, 2)) // Linear weight
	b := autograd.Param(tensor.FromF32([]float32{1, 1}, 2))          // its bias
	ln := autograd.Param(tensor.FromF32([]float32{1, 1}, 2))         // LayerNorm weight
	emb := autograd.Param(tensor.FromF32([]float32{1, 1, 1}, 3, 1))  // an embedding table
	gs := DecayGroups([]*autograd.Variable{w, b, ln, emb}, 0.5, 0.1)
	require.Len(t, gs, 2)
	assert.Equal(t, []*autograd.Variable{w, emb}, gs[0].Params)
	assert.Equal(t, 0.1, gs[0].WeightDecay)
	assert.Equal(t, []*autograd.Variable{b, ln}, gs[1].Params)
	assert.Equal(t, 0.0, gs[1].WeightDecay)
	assert.Equal(t, 0.5, gs[1].LR)

	o, err := NewAdamWGroups(gs, AdamConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	require.NoError(t, err)
	for _, p := range []*autograd.Variable{w, b, ln, emb} {
		p.Grad = tensor.ZerosAs(p.Value, p.Value.Shape()...) // zero gradient: only the decay moves
	}
	require.NoError(t, o.Step())
	assert.InDelta(t, 1-0.5*0.1, float64(w.Value.F32()[0]), 1e-7, "a 2-D weight decays by lr*wd")
	assert.InDelta(t, 1-0.5*0.1, float64(emb.Value.F32()[2]), 1e-7)
	assert.Equal(t, float32(1), b.Value.F32()[0], "a bias does not decay")
	assert.Equal(t, float32(1), ln.Value.F32()[1], "a LayerNorm weight does not decay")
	assert.Equal(t, "AdamW", o.StateDict().Kind)

	// A model without 1-D parameters still gets both groups.
	gs = DecayGroups([]*autograd.Variable{w}, 0.5, 0.1)
	assert.Len(t, gs, 2)
	assert.Empty(t, gs[1].Params)
}
