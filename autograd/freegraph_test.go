package autograd_test

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// poisoned turns on the host allocator's debug mode, in which every block
// given back to the cache is filled with NaN, for the test's duration.
func poisoned(t *testing.T) {
	tensor.Host().SetPoison(true)
	t.Cleanup(func() { tensor.Host().SetPoison(false) })
}

func bits32(x *tensor.Tensor) []uint32 {
	var out []uint32
	for _, v := range x.Contiguous().F32() {
		out = append(out, math.Float32bits(v))
	}
	return out
}

// FreeGraph recycles intermediates only: a parameter, a view of it in the
// graph, its Grad, the root and a kept output keep their numbers, while a
// freed intermediate can no longer be read.
func TestFreeGraphKeepsWhatTheCallerHolds(t *testing.T) {
	poisoned(t)
	rng := tensor.NewRNG(3)
	w := autograd.Param(tensor.Rand(rng, tensor.Float32, 32, 64))
	b := autograd.Param(tensor.Rand(rng, tensor.Float32, 32))
	x := autograd.Const(tensor.Rand(rng, tensor.Float32, 16, 64))
	h := autograd.Linear(x, w, b)                                   // intermediate
	out := autograd.ReLU(h)                                         // the output the caller keeps
	wv := autograd.Reshape(w, 64, 32)                               // a node sharing the parameter's storage
	prod := autograd.Linear(out, autograd.Reshape(wv, 64, 32), nil) // [16, 64]
	loss := autograd.SumAll(autograd.Mul(prod, prod))
	require.NoError(t, loss.Backward())

	keep := map[string]*tensor.Tensor{"w": w.Value, "w.Grad": w.Grad, "b.Grad": b.Grad, "x": x.Value, "out": out.Value, "loss": loss.Value}
	want := map[string][]uint32{}
	for k, v := range keep {
		want[k] = bits32(v)
	}
	loss.FreeGraph(out)
	// Make the cache hand the freed blocks out again and overwrite them.
	for range 8 {
		tensor.Fill(tensor.New(tensor.Float32, 16, 64), 7)
		tensor.Fill(tensor.New(tensor.Float32, 16, 32), 7)
	}
	for k, v := range keep {
		require.Equal(t, want[k], bits32(v), "%s changed after FreeGraph", k)
	}
	require.Panics(t, func() { h.Value.F32() }, "a freed intermediate is still readable")
	require.Panics(t, func() { _ = loss.Backward() }, "backward through a freed graph")
	require.Equal(t, []int{16, 32}, h.Value.Shape(), "shape survives for error messages")
}

// Training with the graph freed every step (FreeGraph after Backward, or
// BackwardAndFree as the pass goes), recycled blocks poisoned with NaN,
// gives bit for bit the parameters of training without recycling: no
// tensor is read after its storage went back to the cache.
func TestFreeGraphTrainingIsBitIdentical(t *testing.T) {
	train := func(free freeMode) [][]uint32 {
		rng := tensor.NewRNG(5)
		w1 := autograd.Param(tensor.Rand(rng, tensor.Float32, 128, 96))
		b1 := autograd.Param(tensor.Rand(rng, tensor.Float32, 128))
		w2 := autograd.Param(tensor.Rand(rng, tensor.Float32, 10, 128))
		x := tensor.Rand(rng, tensor.Float32, 32, 96)
		y := make([]int, 32)
		for i := range y {
			y[i] = i % 10
		}
		params := []*autograd.Variable{w1, b1, w2}
		opt, err := optim.NewAdamW(params, optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
		require.NoError(t, err)
		for range 6 {
			opt.ZeroGrad()
			h := autograd.ReLU(autograd.Linear(autograd.Const(x), w1, b1))
			h = autograd.Add(h, autograd.Mul(h, h)) // a pass-through op and a shared gradient
			logits := autograd.Linear(h, w2, nil)
			loss := autograd.CrossEntropy(logits, y, autograd.ReductionMean)
			require.NoError(t, free.backward(loss))
			require.NoError(t, opt.Step())
		}
		var out [][]uint32
		for _, p := range params {
			out = append(out, bits32(p.Value))
		}
		return out
	}
	want := train(keepGraph)
	poisoned(t)
	for _, mode := range []freeMode{freeAfter, freeDuring} {
		before := tensor.Host().Stats()
		got := train(mode)
		after := tensor.Host().Stats()
		require.Greater(t, after.Hits-before.Hits, int64(20), "%v: the steps must reuse recycled blocks", mode)
		for i := range want {
			require.True(t, slices.Equal(want[i], got[i]), "%v: parameter %d differs", mode, i)
		}
	}
}

// freeMode is how a training step of the tests ends its graph.
type freeMode int

const (
	keepGraph  freeMode = iota // Backward; the garbage collector takes the graph
	freeAfter                  // Backward, then FreeGraph
	freeDuring                 // BackwardAndFree
)

func (m freeMode) String() string {
	return [...]string{"Backward", "Backward+FreeGraph", "BackwardAndFree"}[m]
}

func (m freeMode) backward(loss *autograd.Variable) error {
	switch m {
	case freeAfter:
		if err := loss.Backward(); err != nil {
			return err
		}
		loss.FreeGraph()
		return nil
	case freeDuring:
		return loss.BackwardAndFree()
	}
	return loss.Backward()
}

// Backward alone recycles the gradients private to the pass, but never a
// leaf's Grad, which the caller reads afterwards.
func TestBackwardRecyclesPassGradients(t *testing.T) {
	poisoned(t)
	rng := tensor.NewRNG(9)
	w := autograd.Param(tensor.Rand(rng, tensor.Float32, 64, 64))
	x := autograd.Param(tensor.Rand(rng, tensor.Float32, 32, 64))
	h := autograd.ReLU(autograd.Linear(x, w, nil))
	loss := autograd.SumAll(autograd.Mul(h, h))
	before := tensor.Host().Stats().Frees
	require.NoError(t, loss.Backward())
	require.Greater(t, tensor.Host().Stats().Frees, before, "nothing was recycled")
	for _, g := range []*tensor.Tensor{w.Grad, x.Grad} {
		for _, v := range g.F32() {
			require.False(t, math.IsNaN(float64(v)), "a leaf's Grad was recycled")
		}
	}
}

// SelfAttention's own saved tensors (probabilities, the qkv copy) are
// recycled with the graph, and training still matches bit for bit.
func TestFreeGraphAttentionIsBitIdentical(t *testing.T) {
	const b, tt, d, e, heads = 4, 16, 24, 32, 4
	train := func(free freeMode) [][]uint32 {
		rng := tensor.NewRNG(7)
		wqkv := autograd.Param(tensor.Rand(rng, tensor.Float32, 3*e, d))
		wo := autograd.Param(tensor.Rand(rng, tensor.Float32, 10, e))
		x := tensor.Rand(rng, tensor.Float32, b*tt, d)
		y := make([]int, b*tt)
		for i := range y {
			y[i] = i % 10
		}
		params := []*autograd.Variable{wqkv, wo}
		opt, err := optim.NewSGD(params, optim.SGDConfig{LR: 0.1})
		require.NoError(t, err)
		for range 4 {
			opt.ZeroGrad()
			qkv := autograd.Reshape(autograd.Linear(autograd.Const(x), wqkv, nil), b, tt, 3*e)
			att := autograd.SelfAttention(qkv, heads, autograd.AttentionOptions{Causal: true})
			logits := autograd.Linear(autograd.Reshape(att, b*tt, e), wo, nil)
			loss := autograd.CrossEntropy(logits, y, autograd.ReductionMean)
			require.NoError(t, free.backward(loss))
			require.NoError(t, opt.Step())
		}
		var out [][]uint32
		for _, p := range params {
			out = append(out, bits32(p.Value))
		}
		return out
	}
	want := train(keepGraph)
	poisoned(t)
	for _, mode := range []freeMode{freeAfter, freeDuring} {
		got := train(mode)
		for i := range want {
			require.True(t, slices.Equal(want[i], got[i]), "%v: parameter %d differs", mode, i)
		}
	}
}

// A steady training step allocates nothing once the graph is freed each
// step: the tensors LayerNorm and CrossEntropy keep for backward (the
// normalized input, the softmax) go back to the cache with the graph, so
// the next step's forward finds them there instead of missing.
func TestFreeGraphSteadyStepMissesNothing(t *testing.T) {
	poisoned(t)
	rng := tensor.NewRNG(3)
	w := autograd.Param(tensor.Rand(rng, tensor.Float32, 48, 64))
	g := autograd.Param(tensor.Full(tensor.Float32, 1, 48))
	b := autograd.Param(tensor.Zeros(tensor.Float32, 48))
	x := autograd.Const(tensor.Rand(rng, tensor.Float32, 40, 64))
	target := make([]int, 40)
	for i := range target {
		target[i] = i % 48
	}
	step := func() {
		h := autograd.LayerNorm(autograd.Linear(x, w, nil), g, b, 1e-5)
		loss := autograd.CrossEntropy(h, target, autograd.ReductionMean)
		require.NoError(t, loss.Backward())
		loss.FreeGraph()
	}
	for range 3 {
		step()
	}
	before := tensor.Host().Stats()
	for range 5 {
		step()
	}
	after := tensor.Host().Stats()
	require.Greater(t, after.Hits-before.Hits, int64(10))
	require.Zero(t, after.Misses-before.Misses, "a steady step allocated: a tensor kept for backward was not recycled")
}
