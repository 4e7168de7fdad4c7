package autograd

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// userAdd is an op defined outside the package's conventions: its Backward
// hands the same gy to both inputs, so the engine must not write into it.
type userAdd struct{ a, b *Variable }

func (o *userAdd) Name() string        { return "userAdd" }
func (o *userAdd) Inputs() []*Variable { return []*Variable{o.a, o.b} }
func (o *userAdd) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{gy, gy}
}

func plus(a, b *Variable) *Variable {
	x, y := a.Value.Contiguous(), b.Value.Contiguous()
	out := x.Clone()
	addIntoExisting(out, y)
	return FromOp(out, &userAdd{a: a, b: b})
}

type mlp struct {
	w, b [3]*Variable
}

func newMLP(dt tensor.DType) *mlp {
	m := &mlp{}
	sizes := []int{5, 6, 4, 3}
	for l := 0; l < 3; l++ {
		w := randT(uint64(10+l), 0.5, 0, sizes[l+1], sizes[l])
		b := randT(uint64(20+l), 0.1, 0, sizes[l+1])
		if dt == tensor.Float32 {
			w, b = to32T(w), to32T(b)
		}
		m.w[l], m.b[l] = Param(w), Param(b)
	}
	return m
}

func to32T(t *tensor.Tensor) *tensor.Tensor {
	d := make([]float32, t.Numel())
	for i, v := range t.F64() {
		d[i] = float32(v)
	}
	return tensor.FromF32(d, t.Shape()...)
}

func (m *mlp) loss(x *Variable, target []int) *Variable {
	h := x
	for l := 0; l < 3; l++ {
		h = Linear(h, m.w[l], m.b[l])
		if l < 2 {
			h = ReLU(h)
		}
	}
	return CrossEntropy(h, target, ReductionMean)
}

func (m *mlp) params() []*Variable {
	return []*Variable{m.w[0], m.b[0], m.w[1], m.b[1], m.w[2], m.b[2]}
}

// TestGradReadyHooks is the contract DDP relies on: on a 3-layer MLP every
// leaf's hook fires exactly once per backward, while backward is still
// running (before callbacks queued on the pass, before Backward returns),
// with the leaf's final gradient, and the last layer's parameters first.
func TestGradReadyHooks(t *testing.T) {
	m := newMLP(tensor.Float32)
	x := Const(to32T(randT(1, 1, 0, 8, 5)))
	target := []int{0, 1, 2, 0, 1, 2, 0, 1}

	type event struct {
		layer     int
		name      string
		snapshot  []float32
		afterCB   bool
		inPass    bool
		samePass  bool
		grad      *tensor.Tensor
		paramSeen *Variable
	}
	var (
		events   []event
		cbRan    bool
		returned bool
		passSeen *Pass
	)
	for l := 0; l < 3; l++ {
		for _, p := range []struct {
			v    *Variable
			name string
		}{{m.w[l], fmt.Sprintf("%d.weight", l)}, {m.b[l], fmt.Sprintf("%d.bias", l)}} {
			p.v.RegisterGradReadyHook(func(leaf *Variable, pass *Pass) {
				if passSeen == nil {
					passSeen = pass
					pass.QueueCallback(func() error { cbRan = true; return nil })
				}
				events = append(events, event{
					layer: l, name: p.name, snapshot: append([]float32(nil), leaf.Grad.F32()...),
					afterCB: cbRan, inPass: !returned, samePass: pass == passSeen, grad: leaf.Grad, paramSeen: leaf,
				})
			})
		}
	}

	for step := 0; step < 2; step++ {
		events, cbRan, returned, passSeen = nil, false, false, nil
		for _, p := range m.params() {
			p.ZeroGrad()
		}
		require.NoError(t, m.loss(x, target).Backward())
		returned = true
		require.True(t, cbRan, "queued callback did not run before Backward returned")

		require.Len(t, events, 6, "each of the 6 leaves fires exactly once per backward")
		seen := map[string]int{}
		for i, e := range events {
			seen[e.name]++
			assert.False(t, e.afterCB, "hook %s ran after the pass callback", e.name)
			assert.True(t, e.inPass, "hook %s ran after Backward returned", e.name)
			assert.True(t, e.samePass, "hook %s saw another pass", e.name)
			assert.Equal(t, e.grad.F32(), e.snapshot, "hook %s saw a gradient that changed later", e.name)
			if i > 0 {
				assert.LessOrEqual(t, e.layer, events[i-1].layer, "hooks must fire last layer first: %s after %s", e.name, events[i-1].name)
			}
		}
		for name, n := range seen {
			assert.Equal(t, 1, n, "hook for %s", name)
		}
		assert.Equal(t, 2, events[0].layer, "the first hook belongs to the last layer")
		assert.Equal(t, 0, events[5].layer)
	}
}

// TestHookRemoveAndCallbackError checks removing a hook and that a queued
// callback's error comes back from Backward, wrapped.
func TestHookRemoveAndCallbackError(t *testing.T) {
	w := Param(randT(1, 1, 0, 2, 3))
	x := Const(randT(2, 1, 0, 4, 3))
	calls := 0
	remove := w.RegisterGradReadyHook(func(*Variable, *Pass) { calls++ })
	boom := errors.New("boom")
	w.RegisterGradReadyHook(func(_ *Variable, p *Pass) { p.QueueCallback(func() error { return boom }) })
	err := SumAll(Linear(x, w, nil)).Backward()
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, calls)
	remove()
	_ = SumAll(Linear(x, w, nil)).Backward()
	require.Equal(t, 1, calls)
}

// TestHookWaitsForAllUses: a leaf used by two ops fires once, after both
// contributions are in, and its gradient is their sum.
func TestHookWaitsForAllUses(t *testing.T) {
	w := Param(randT(1, 1, 0, 3, 3))
	x := Const(randT(2, 1, 0, 2, 3))
	var fired int
	var atHook []float64
	w.RegisterGradReadyHook(func(l *Variable, _ *Pass) {
		fired++
		atHook = append([]float64(nil), l.Grad.F64()...)
	})
	h := Linear(x, w, nil)
	out := SumAll(Linear(ReLU(h), w, nil))
	require.NoError(t, out.Backward())
	require.Equal(t, 1, fired)
	require.Equal(t, w.Grad.F64(), atHook)
	gradCheck(t, func(xs []*Variable) *Variable {
		return SumAll(Linear(ReLU(Linear(x, xs[0], nil)), xs[0], nil))
	}, randT(1, 1, 0, 3, 3))
}

// TestReusedNodeAccumulates: a non-leaf consumed several times receives the
// sum of its consumers' gradients, also when a user op aliases gy.
func TestReusedNodeAccumulates(t *testing.T) {
	tests := []struct {
		name string
		f    func(x *Variable) *Variable
		want func(x float64) float64 // d/dx of sum(f(x)) elementwise
	}{
		{"x+x", func(x *Variable) *Variable { return SumAll(plus(x, x)) }, func(float64) float64 { return 2 }},
		{"h+h+h", func(x *Variable) *Variable {
			h := ReLU(x)
			return SumAll(plus(plus(h, h), h))
		}, func(x float64) float64 {
			if x > 0 {
				return 3
			}
			return 0
		}},
		{"relu(h)+h", func(x *Variable) *Variable {
			h := plus(x, x)
			return SumAll(plus(ReLU(h), h))
		}, func(x float64) float64 {
			if x > 0 {
				return 4
			}
			return 2
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := Param(awayFrom(randT(3, 1, 0, 7), 0.01, 0))
			require.NoError(t, tc.f(x).Backward())
			for i, v := range x.Value.F64() {
				require.InDelta(t, tc.want(v), x.Grad.F64()[i], 1e-12, "element %d", i)
			}
			// A second pass accumulates into the same buffer.
			g := x.Grad
			require.NoError(t, tc.f(x).Backward())
			require.Same(t, g, x.Grad)
			for i, v := range x.Value.F64() {
				require.InDelta(t, 2*tc.want(v), x.Grad.F64()[i], 1e-12)
			}
		})
	}
}

func TestBackwardErrors(t *testing.T) {
	x := Param(randT(1, 1, 0, 2, 3))
	y := ReLU(x)
	err := y.Backward()
	require.ErrorIs(t, err, ErrNonScalar)
	require.Contains(t, err.Error(), "[2 3]")
	require.Nil(t, x.Grad)

	require.ErrorIs(t, SumAll(Const(randT(1, 1, 0, 2))).Backward(), ErrNoGrad)

	err = y.BackwardWith(tensor.New(tensor.Float64, 3, 2))
	require.Error(t, err)
	require.Contains(t, err.Error(), "seed gradient shape [3 2]")

	// With a seed, a non-scalar output backpropagates.
	seed := randT(5, 1, 0, 2, 3)
	require.NoError(t, y.BackwardWith(seed))
	require.NotNil(t, x.Grad)
}

func TestBackwardOnLeaf(t *testing.T) {
	x := Param(randT(1, 1, 0))
	fired := 0
	x.RegisterGradReadyHook(func(*Variable, *Pass) { fired++ })
	require.NoError(t, x.Backward())
	require.Equal(t, 1.0, x.Grad.Item())
	require.Equal(t, 1, fired)
}

func TestNoGradAndDetachRecordNothing(t *testing.T) {
	w := Param(randT(1, 1, 0, 2, 3))
	x := Const(randT(2, 1, 0, 4, 3))
	var y *Variable
	NoGrad([]*Variable{w}, func() { y = Linear(x, w, nil) })
	require.False(t, y.RequiresGrad())
	require.True(t, y.IsLeaf())
	require.Nil(t, y.Creator())
	require.True(t, w.RequiresGrad(), "NoGrad restores the flag")
	require.ErrorIs(t, SumAll(y).Backward(), ErrNoGrad)

	z := Linear(x, w, nil)
	require.False(t, z.IsLeaf())
	d := z.Detach()
	require.True(t, d.IsLeaf())
	require.False(t, d.RequiresGrad())
	require.Same(t, z.Value, d.Value)
	w2 := Param(randT(3, 1, 0, 1, 2))
	out := SumAll(Linear(d, w2, nil))
	require.NoError(t, out.Backward())
	require.NotNil(t, w2.Grad)
	require.Nil(t, w.Grad, "nothing flows through a detached value")
	require.Nil(t, d.Grad)
	require.Nil(t, x.Grad)

	require.Panics(t, func() { z.SetRequiresGrad(false) })
}

// TestPassReleasesGraphState: after Backward no node keeps per-pass state,
// so a graph can be run backward again and nothing is kept alive.
func TestPassReleasesGraphState(t *testing.T) {
	m := newMLP(tensor.Float64)
	x := Const(randT(1, 1, 0, 4, 5))
	loss := m.loss(x, []int{0, 1, 2, 0})
	require.NoError(t, loss.Backward())
	var walk func(v *Variable)
	walk = func(v *Variable) {
		assert.Nil(t, v.mark)
		assert.Nil(t, v.pending)
		assert.Zero(t, v.deps)
		if v.creator != nil {
			for _, in := range v.creator.Inputs() {
				walk(in)
			}
		}
	}
	walk(loss)
	g := m.w[0].Grad.Clone()
	require.NoError(t, loss.Backward())
	for i, v := range g.F64() {
		require.InDelta(t, 2*v, m.w[0].Grad.F64()[i], 1e-12)
	}
}

func TestMLPGradCheck(t *testing.T) {
	m := newMLP(tensor.Float64)
	x := Const(randT(1, 1, 0, 4, 5))
	ps := m.params()
	in := make([]*tensor.Tensor, len(ps))
	for i, p := range ps {
		in[i] = p.Value
	}
	gradCheck(t, func(xs []*Variable) *Variable {
		mm := &mlp{w: [3]*Variable{xs[0], xs[2], xs[4]}, b: [3]*Variable{xs[1], xs[3], xs[5]}}
		return mm.loss(x, []int{0, 2, 1, 1})
	}, in...)
}

func TestDeepChainIterative(t *testing.T) {
	x := Param(randT(1, 1, 1, 3))
	h := x
	for i := 0; i < 20000; i++ {
		h = plus(h, Const(randT(uint64(i), 0, 0, 3)))
	}
	require.NoError(t, SumAll(h).Backward())
	require.Equal(t, []float64{1, 1, 1}, x.Grad.F64())
}

// denseOnly is an op outside the broadcastGrads set; the engine must hand it
// a contiguous gy even when SumAll produced a broadcast view.
type denseOnly struct {
	in  *Variable
	got []bool
}

func (o *denseOnly) Name() string        { return "denseOnly" }
func (o *denseOnly) Inputs() []*Variable { return []*Variable{o.in} }
func (o *denseOnly) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	o.got = append(o.got, gy.IsContiguous())
	return []*tensor.Tensor{gy.Clone()}
}

func TestEngineMaterialisesBroadcastGradForOtherOps(t *testing.T) {
	p := Param(tensor.Full(tensor.Float32, 2, 3, 4))
	op := &denseOnly{in: p}
	y := FromOp(p.Value.Clone(), op)
	require.NoError(t, SumAll(y).Backward())
	require.Equal(t, []bool{true}, op.got)
	for _, v := range p.Grad.F32() {
		require.Equal(t, float32(1), v)
	}
}

// addIntoExisting takes contiguous, reshaped, transposed and broadcast
// gradients, each giving d[i] + s[i] bit for bit.
func TestAddIntoExistingLayouts(t *testing.T) {
	base := tensor.AsType(randT(5, 1, 0, 6, 35), tensor.Float32)
	src := tensor.AsType(randT(6, 1, 0, 6, 35), tensor.Float32)
	want := func(s *tensor.Tensor) []float32 {
		s = s.Contiguous()
		w := append([]float32(nil), base.F32()...)
		for i, v := range s.F32() {
			w[i] += v
		}
		return w
	}
	cases := map[string]*tensor.Tensor{
		"contiguous": src,
		"reshaped":   src.Reshape(210),
		"transposed": tensor.Transpose(src.Reshape(35, 6), 0, 1).Contiguous().Reshape(6, 35),
		"strided":    tensor.Transpose(tensor.Transpose(src, 0, 1).Contiguous(), 0, 1),
		"broadcast":  tensor.Expand(tensor.Scalar(tensor.Float32, 0.7), 6, 35),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			dst := base.Clone()
			w := want(s.Contiguous().Reshape(6, 35))
			addIntoExisting(dst, s)
			for i, v := range dst.F32() {
				require.Equal(t, math.Float32bits(w[i]), math.Float32bits(v), "element %d", i)
			}
		})
	}
}
