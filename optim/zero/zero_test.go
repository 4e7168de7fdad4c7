package zero_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/tcp"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/optim/zero"
	"github.com/goddp/goddp/tensor"
)

// Parameter shapes whose total (98) no world size here divides, and whose
// parts straddle rank boundaries.
var shapes = [][]int{{7, 5}, {5}, {13, 3}, {1}, {4, 4}, {2}}

func newParams() []*autograd.Variable {
	var ps []*autograd.Variable
	for i, sh := range shapes {
		n := 1
		for _, d := range sh {
			n *= d
		}
		v := make([]float32, n)
		for k := range v {
			v[k] = float32(math.Sin(float64(i*31+k))) * 0.5
		}
		ps = append(ps, autograd.Param(tensor.FromF32(v, sh...)))
	}
	return ps
}

// grad is rank r's gradient of parameter values p at step s: it depends on
// the parameters, so that trajectories that drift apart show it.
func grad(p []float32, r, s int) []float32 {
	g := make([]float32, len(p))
	for k, x := range p {
		g[k] = float32(math.Sin(float64(x)*float64(r+1) + 0.1*float64(s) + float64(k)))
	}
	return g
}

// meanGrad is the average of every rank's grad as the in-memory group
// computes it (float64 sum in rank order, divided, rounded).
func meanGrad(p []float32, world, s int) []float32 {
	acc := make([]float64, len(p))
	for r := range world {
		for k, v := range grad(p, r, s) {
			acc[k] += float64(v)
		}
	}
	out := make([]float32, len(p))
	for k := range acc {
		out[k] = float32(acc[k] / float64(world))
	}
	return out
}

var adamw = optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2}

// reference steps an unsharded AdamW with the mean gradient.
func reference(t *testing.T, world, steps int) ([]*autograd.Variable, *optim.Adam) {
	ps := newParams()
	o, err := optim.NewAdamW(ps, adamw)
	require.NoError(t, err)
	for s := range steps {
		for _, p := range ps {
			p.Grad = tensor.FromF32(meanGrad(p.Value.F32(), world, s), p.Value.Shape()...)
		}
		require.NoError(t, o.Step())
	}
	return ps, o
}

// train steps a ZeRO AdamW on every rank of pgs from the first step to
// steps, each rank with its own gradient, and returns each rank's
// parameters and optimizer.
func train(t *testing.T, pgs []backend.ProcessGroup, from, steps int, load *optim.StateDict, params [][]*autograd.Variable) ([][]*autograd.Variable, []*zero.Optimizer) {
	t.Helper()
	w := len(pgs)
	opts := make([]*zero.Optimizer, w)
	if params == nil {
		params = make([][]*autograd.Variable, w)
		for r := range w {
			params[r] = newParams()
		}
	}
	errs := commtest.Run(pgs, func(pg backend.ProcessGroup) error {
		r := pg.Rank()
		o, err := zero.NewAdamW(pg, params[r], adamw, zero.Config{ReduceGrads: true, Timeout: 30 * time.Second})
		if err != nil {
			return err
		}
		opts[r] = o
		if load != nil {
			if err := o.LoadStateDict(load); err != nil {
				return err
			}
		}
		for s := from; s < steps; s++ {
			for _, p := range params[r] {
				p.Grad = tensor.FromF32(grad(p.Value.F32(), r, s), p.Value.Shape()...)
			}
			if err := o.Step(); err != nil {
				return fmt.Errorf("step %d: %w", s, err)
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	return params, opts
}

func requireClose(t *testing.T, want, got []*autograd.Variable, tol float64, what string) {
	t.Helper()
	for i := range want {
		for k, v := range want[i].Value.F32() {
			if d := math.Abs(float64(v - got[i].Value.F32()[k])); d > tol {
				t.Fatalf("%s: parameter %d element %d: %v, unsharded %v", what, i, k, got[i].Value.F32()[k], v)
			}
		}
	}
}

// ZeRO-1 AdamW steps the parameters as unsharded AdamW with the averaged
// gradients does, and each rank keeps its share of the state.
func TestMatchesUnshardedAdamW(t *testing.T) {
	const steps = 100
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			want, ref := reference(t, world, steps)
			params, opts := train(t, commtest.NewGroups(world), 0, steps, nil, nil)
			full := 0
			for _, tt := range ref.StateDict().Tensors {
				full += tt.Numel() * 4
			}
			for r := range world {
				requireClose(t, want, params[r], 1e-6, fmt.Sprintf("rank %d", r))
				share := float64(opts[r].StateBytes()) / float64(full)
				t.Logf("rank %d: %d of %d state bytes (%.3f)", r, opts[r].StateBytes(), full, share)
				require.LessOrEqual(t, share, 1/float64(world)+0.05, "rank %d holds too much state", r)
			}
		})
	}
}

// Consolidated on rank 0, the state dict is unsharded AdamW's (same keys,
// same values); it loads into unsharded AdamW, and into ZeRO at another
// world size, and training goes on as if uninterrupted.
func TestConsolidateAndReshard(t *testing.T) {
	const world, steps, more = 3, 40, 20
	_, ref := reference(t, world, steps)
	params, opts := train(t, commtest.NewGroups(world), 0, steps, nil, nil)
	errs := commtest.Run(commtestGroupsOf(opts), func(pg backend.ProcessGroup) error {
		return opts[pg.Rank()].ConsolidateStateDict(context.Background(), 0)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	got, want := opts[0].StateDict(), ref.StateDict()
	require.Equal(t, want.Kind, got.Kind)
	require.Equal(t, want.ScalarKeys(), got.ScalarKeys())
	require.Equal(t, want.TensorKeys(), got.TensorKeys())
	for k, v := range want.Scalars {
		require.Equal(t, v, got.Scalars[k], k)
	}
	for k, v := range want.Tensors {
		require.Equal(t, v.Shape(), got.Tensors[k].Shape(), k)
		for i, x := range v.F32() {
			require.InDelta(t, x, got.Tensors[k].F32()[i], 1e-6, "%s[%d]", k, i)
		}
	}
	require.Contains(t, opts[1].StateDict().Kind, "zero shard of")

	// It loads into unsharded AdamW.
	plain, err := optim.NewAdamW(newParams(), adamw)
	require.NoError(t, err)
	require.NoError(t, plain.LoadStateDict(got))

	// Resumed at world 2 (the gradients now averaged over 2 ranks), it
	// matches unsharded AdamW resumed from its own state dict.
	refParams := params[0]
	resumed, err := optim.NewAdamW(refParams, adamw)
	require.NoError(t, err)
	require.NoError(t, resumed.LoadStateDict(want))
	two := make([][]*autograd.Variable, 2)
	for r := range two {
		two[r] = cloneParams(refParams)
	}
	for s := steps; s < steps+more; s++ {
		for _, p := range refParams {
			p.Grad = tensor.FromF32(meanGrad(p.Value.F32(), 2, s), p.Value.Shape()...)
		}
		require.NoError(t, resumed.Step())
	}
	after, _ := train(t, commtest.NewGroups(2), steps, steps+more, got, two)
	for r := range after {
		requireClose(t, refParams, after[r], 1e-6, fmt.Sprintf("world 2 rank %d", r))
	}
}

func cloneParams(ps []*autograd.Variable) []*autograd.Variable {
	var out []*autograd.Variable
	for _, p := range ps {
		out = append(out, autograd.Param(tensor.FromF32(append([]float32(nil), p.Value.F32()...), p.Value.Shape()...)))
	}
	return out
}

// commtestGroupsOf are the groups the optimizers were built on: the test
// keeps them through the optimizers' ranks.
func commtestGroupsOf(opts []*zero.Optimizer) []backend.ProcessGroup {
	pgs := make([]backend.ProcessGroup, len(opts))
	for r, o := range opts {
		pgs[r] = o.Group()
	}
	return pgs
}

// Over a real backend the gradients go through its reduce-scatter and the
// consolidation through its gather: the same result.
func TestOverTCP(t *testing.T) {
	const world, steps = 3, 30
	want, ref := reference(t, world, steps)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := commtest.NewStore()
	pgs := make([]backend.ProcessGroup, world)
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r := range world {
		wg.Go(func() {
			pgs[r], errs[r] = tcp.New(ctx, backend.Options{Rank: r, Size: world, Store: st, Prefix: "z", Timeout: 30 * time.Second})
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		defer pgs[r].Close()
	}
	params, opts := train(t, pgs, 0, steps, nil, nil)
	for r := range world {
		// tcp averages in float32: within rounding of the float64 mean.
		requireClose(t, want, params[r], 1e-5, fmt.Sprintf("rank %d", r))
	}
	errs = commtest.Run(pgs, func(pg backend.ProcessGroup) error {
		return opts[pg.Rank()].ConsolidateStateDict(ctx, 1)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Equal(t, ref.StateDict().TensorKeys(), opts[1].StateDict().TensorKeys())
}

// Under ddp the gradients arrive averaged: without ReduceGrads, ZeRO takes
// them as they are and still matches unsharded AdamW.
func TestGradientsAveragedByDDP(t *testing.T) {
	const world, steps = 3, 50
	want, _ := reference(t, world, steps)
	pgs := commtest.NewGroups(world)
	params := make([][]*autograd.Variable, world)
	errs := commtest.Run(pgs, func(pg backend.ProcessGroup) error {
		r := pg.Rank()
		params[r] = newParams()
		o, err := zero.NewAdamW(pg, params[r], adamw, zero.Config{})
		if err != nil {
			return err
		}
		for s := range steps {
			for _, p := range params[r] {
				g := grad(p.Value.F32(), r, s)
				// What ddp's bucket all-reduce does.
				if err := pg.AllReduce(backend.Float32s(g), backend.Avg).Wait(context.Background()); err != nil {
					return err
				}
				p.Grad = tensor.FromF32(g, p.Value.Shape()...)
			}
			if err := o.Step(); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		requireClose(t, want, params[r], 1e-6, fmt.Sprintf("rank %d", r))
	}
}
