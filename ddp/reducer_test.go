package ddp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/tensor"
)

func mkParams(sizes []int, dts ...tensor.DType) []param {
	ps := make([]param, len(sizes))
	for i, n := range sizes {
		dt := tensor.Float32
		if i < len(dts) {
			dt = dts[i]
		}
		ps[i] = param{name: fmt.Sprintf("p%d", i), dtype: dt, numel: n, shape: []int{n}}
	}
	return ps
}

func TestAssignBuckets(t *testing.T) {
	const MiB = 1 << 20
	f32, f64 := tensor.Float32, tensor.Float64
	tests := []struct {
		name     string
		sizes    []int // elements
		dts      []tensor.DType
		order    []int // nil = reverse registration order
		first    int
		cap      int
		expected [][]int
	}{
		{"one small bucket", []int{10, 10, 10}, nil, nil, MiB, 25 * MiB, [][]int{{2, 1, 0}}},
		{"first bucket closes at 1 MiB",
			[]int{MiB / 4, MiB / 4, MiB / 8, MiB / 8, MiB / 8}, nil, nil, MiB, 25 * MiB,
			// reverse order: p4 (0.5 MiB) + p3 (0.5 MiB) reaches 1 MiB and closes
			[][]int{{4, 3}, {2, 1, 0}}},
		{"cap after the first", []int{100, 100, 100, 100, 100}, nil, nil, 400, 800,
			[][]int{{4}, {3, 2}, {1, 0}}},
		{"one parameter larger than the cap", []int{1000, 10, 10}, nil, nil, 40, 80,
			[][]int{{2}, {1, 0}}},
		{"large parameter alone", []int{10, 1000, 10}, nil, nil, 40, 80,
			[][]int{{2}, {1}, {0}}},
		{"observed order", []int{100, 100, 100, 100}, nil, []int{0, 1, 2, 3}, 400, 800,
			[][]int{{0}, {1, 2}, {3}}},
		{"dtypes never share a bucket", []int{10, 10, 10, 10}, []tensor.DType{f32, f64, f32, f64}, nil, MiB, MiB,
			[][]int{{3, 1}, {2, 0}}},
		{"dtype buckets ordered by first ready", []int{100, 2, 2}, []tensor.DType{f32, f64, f64}, []int{0, 1, 2}, 40, 80,
			[][]int{{0}, {1, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps := mkParams(tc.sizes, tc.dts...)
			order := tc.order
			if order == nil {
				order = reverseOrder(len(ps))
			}
			assert.Equal(t, tc.expected, assignBuckets(order, ps, tc.first, tc.cap))
		})
	}
}

func TestCompleteOrder(t *testing.T) {
	assert.Equal(t, []int{2, 0, 3, 1}, completeOrder([]int{2, 0, 2, 9, -1}, 4))
	assert.Equal(t, []int{3, 2, 1, 0}, completeOrder(nil, 4))
}

// mlpNet builds 784-512-512-10 (or any sizes) with autograd.Linear and ReLU.
func mlpNet(sizes []int, seed uint64) *testNet {
	n := newTestNet()
	rng := tensor.NewRNG(seed)
	for l := 0; l+1 < len(sizes); l++ {
		in, out := sizes[l], sizes[l+1]
		bound := 1 / math.Sqrt(float64(in))
		n.add(fmt.Sprintf("%d.weight", 2*l), rng.Uniform(tensor.Float32, -bound, bound, out, in))
		n.add(fmt.Sprintf("%d.bias", 2*l), rng.Uniform(tensor.Float32, -bound, bound, out))
	}
	n.fwd = func(n *testNet, x *autograd.Variable) *autograd.Variable {
		h := x
		for l := 0; l < len(n.params)/2; l++ {
			h = autograd.Linear(h, n.params[2*l], n.params[2*l+1])
			if l+1 < len(n.params)/2 {
				h = autograd.ReLU(h)
			}
		}
		return h
	}
	return n
}

func TestMLPBucketLayout(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		d, err := Wrap(context.Background(), mlpNet([]int{784, 512, 512, 10}, 1), pg)
		if err != nil {
			return err
		}
		// Reverse order; the first bucket closes once it reaches 1 MiB (at
		// 2.weight, 1 MiB alone), the rest fit the 25 MiB cap.
		assert.Equal(t, [][]string{{"4.bias", "4.weight", "2.bias", "2.weight"}, {"0.bias", "0.weight"}}, d.Buckets())
		return nil
	})
	requireNoErrs(t, errs)
}

// fourParams: p0..p3 of 1000 float32 each, caps giving buckets [p3] [p2 p1] [p0].
func fourParams() *testNet {
	n := newTestNet()
	for i := 0; i < 4; i++ {
		n.add(fmt.Sprintf("p%d", i), constant(0, 1000))
	}
	return n
}

var fourCaps = []Option{FirstBucketCapMB(4000.0 / (1 << 20)), BucketCapMB(8000.0 / (1 << 20))}

func TestLaunchOrderStrictlyByIndex(t *testing.T) {
	recs := make([]*recordingGroup, 2)
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		rec := &recordingGroup{ProcessGroup: pg}
		recs[rank] = rec
		net := fourParams()
		d, err := Wrap(context.Background(), net, rec, append(fourCaps, rebuildBuckets(false))...)
		if err != nil {
			return err
		}
		assert.Equal(t, [][]string{{"p3"}, {"p2", "p1"}, {"p0"}}, d.Buckets())
		base := len(rec.snapshot())
		r := d.r
		r.prepare(nil, 2)
		pass := &autograd.Pass{}
		ready := func(i int) {
			net.params[i].Grad = constant(float32((rank*2+1)*(i+1)), 1000)
			r.gradReady(i, pass)
		}
		if rank == 0 {
			// Out of order: the last bucket and the middle one become ready
			// before bucket 0; nothing may launch until bucket 0 is ready.
			ready(0)
			ready(1)
			ready(2)
			assert.Len(t, rec.snapshot(), base, "no bucket may launch before bucket 0")
			ready(3)
		} else {
			for i := 3; i >= 0; i-- {
				ready(i)
			}
		}
		sent := rec.snapshot()[base:]
		if !assert.Len(t, sent, 3) {
			return errors.New("wrong number of all-reduces")
		}
		for b, want := range [][2]int{{1000, 3}, {2000, 2}, {1000, 0}} {
			if !assert.Len(t, sent[b], want[0], "bucket %d", b) {
				continue
			}
			// Copied as is: at a power-of-two world size the collective
			// divides (comm.Avg; see TestBucketViewAveragesInTheCollective).
			assert.InDelta(t, float64((rank*2+1)*(want[1]+1)), sent[b][0], 1e-6, "bucket %d", b)
		}
		if err := r.finalize(); err != nil {
			return err
		}
		for i, p := range net.params {
			// mean over ranks of (2r+1)(i+1) = 2(i+1)
			assert.Equal(t, float32(2*(i+1)), p.Grad.F32()[999], "param %d", i)
		}
		return nil
	})
	requireNoErrs(t, errs)
	// Both ranks issued the same sequence of all-reduce sizes.
	assert.Equal(t, lensOf(recs[0].snapshot()), lensOf(recs[1].snapshot()))
}

func lensOf(x [][]float32) []int {
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = len(v)
	}
	return out
}

// dotNet: loss = sum_i dot(p_i, c_i) with per-rank constants, so each
// parameter's gradient is exactly c_i.
func dotNet(shapes [][]int) *testNet {
	n := newTestNet()
	for i, s := range shapes {
		n.add(fmt.Sprintf("layer%d.weight", i), constant(0.5, s...))
	}
	return n
}

func gradConst(rank, i, k int) float32 { return float32(rank+1)*0.25 + float32(i) + float32(k%7)*0.01 }

func TestBackwardAveragesGradients(t *testing.T) {
	shapes := [][]int{{3, 4}, {5}, {300, 1000}, {2, 2}, {700}}
	tests := []struct {
		name  string
		world int
		opts  []Option
		tol   float64 // relative
	}{
		{"world1", 1, nil, 0},
		{"world2", 2, nil, 1e-6},
		{"world3 small buckets", 3, []Option{FirstBucketCapMB(0.001), BucketCapMB(0.01)}, 1e-6},
		{"world2 bucket view", 2, []Option{GradientAsBucketView(true)}, 1e-6},
		{"world3 bucket view small buckets", 3, []Option{GradientAsBucketView(true), BucketCapMB(0.002)}, 1e-6},
		{"world2 fp16", 2, []Option{WithCommHook(FP16CompressHook())}, 2e-3},
		{"world3 bf16", 3, []Option{WithCommHook(BF16CompressHook())}, 1.6e-2},
		{"world2 find unused (all used)", 2, []Option{FindUnusedParameters(true)}, 1e-6},
		{"world2 static graph", 2, []Option{StaticGraph(true)}, 1e-6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := runRanks(t, tc.world, func(rank int, pg comm.ProcessGroup) error {
				net := dotNet(shapes)
				net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
					terms := make([]*autograd.Variable, len(n.params))
					for i, p := range n.params {
						terms[i] = dot(p, fill(func(k int) float32 { return gradConst(rank, i, k) }, p.Value.Shape()...))
					}
					return addAll(terms...)
				}
				d, err := Wrap(context.Background(), net, pg, tc.opts...)
				if err != nil {
					return err
				}
				for it := 0; it < 3; it++ {
					for _, p := range d.Parameters() {
						p.ZeroGrad()
					}
					loss, err := d.Forward(nil)
					if err != nil {
						return err
					}
					if err := loss.Backward(); err != nil {
						return err
					}
					for i, p := range net.params {
						g := p.Grad.Contiguous().F32()
						for k := range g {
							var want float64
							for r := 0; r < tc.world; r++ {
								want += float64(gradConst(r, i, k))
							}
							want /= float64(tc.world)
							if math.Abs(float64(g[k])-want) > tc.tol*math.Abs(want)+1e-7 {
								return fmt.Errorf("iteration %d param %d elem %d: got %v want %v", it, i, k, g[k], want)
							}
						}
					}
				}
				if d.cfg.gradAsBucketView {
					for i, p := range net.params {
						if p.Grad != d.r.views[i] {
							return fmt.Errorf("param %d: Grad is not the bucket view", i)
						}
					}
				}
				return nil
			})
			requireNoErrs(t, errs)
		})
	}
}

func TestGradientAsBucketViewAliasesBucket(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{4}, {6}})
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return addAll(dot(n.params[0], constant(1, 4)), dot(n.params[1], constant(2, 6)))
		}
		// An existing Grad moves into the bucket at Wrap.
		net.params[0].Grad = constant(7, 4)
		d, err := Wrap(context.Background(), net, pg, GradientAsBucketView(true))
		if err != nil {
			return err
		}
		g0 := net.params[0].Grad
		assert.Same(t, d.r.views[0], g0)
		assert.Equal(t, []float32{7, 7, 7, 7}, f32s(g0))
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		if err := loss.Backward(); err != nil {
			return err
		}
		// (7+1) accumulated, averaged over 2 identical ranks.
		assert.Same(t, g0, net.params[0].Grad, "Grad stays the same view")
		assert.Equal(t, []float32{8, 8, 8, 8}, f32s(g0))
		l := d.r.loc[0]
		d.r.buckets[l.bucket].f32[d.r.buckets[l.bucket].offsets[l.slot]] = 42
		assert.Equal(t, float32(42), g0.F32()[0], "Grad aliases the bucket memory")
		return nil
	})
	requireNoErrs(t, errs)
}

func TestUnusedParameterErrorListsNames(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{4}, {4}, {4}})
		net.names = []string{"enc.weight", "head_a.weight", "head_b.weight"}
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return dot(n.params[0], constant(1, 4))
		}
		d, err := Wrap(context.Background(), net, pg)
		if err != nil {
			return err
		}
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		err = loss.Backward()
		if err == nil {
			return errors.New("expected an unused-parameter error")
		}
		assert.True(t, errors.Is(err, ErrUnusedParameters), "%v", err)
		msg := err.Error()
		assert.Contains(t, msg, "head_a.weight, head_b.weight")
		assert.Contains(t, msg, "FindUnusedParameters(true)")
		assert.Contains(t, msg, fmt.Sprintf("rank %d", rank))
		assert.NotContains(t, msg, "enc.weight")
		// The reducer is reusable after the error.
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return addAll(dot(n.params[0], constant(1, 4)), dot(n.params[1], constant(1, 4)), dot(n.params[2], constant(1, 4)))
		}
		loss, err = d.Forward(nil)
		if err != nil {
			return err
		}
		return loss.Backward()
	})
	requireNoErrs(t, errs)
}

func TestFindUnusedParameters(t *testing.T) {
	for _, view := range []bool{false, true} {
		t.Run(fmt.Sprintf("view=%v", view), func(t *testing.T) {
			errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
				net := dotNet([][]int{{4}, {4}, {4}})
				net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
					// p0 everywhere, p1 only on rank 0, p2 nowhere.
					if rank == 0 {
						return addAll(dot(n.params[0], constant(2, 4)), dot(n.params[1], constant(6, 4)))
					}
					return dot(n.params[0], constant(4, 4))
				}
				d, err := Wrap(context.Background(), net, pg, FindUnusedParameters(true), GradientAsBucketView(view), BucketCapMB(1e-5), FirstBucketCapMB(1e-5))
				if err != nil {
					return err
				}
				for it := 0; it < 2; it++ {
					for _, p := range net.params {
						p.ZeroGrad()
					}
					loss, err := d.Forward(nil)
					if err != nil {
						return err
					}
					if err := loss.Backward(); err != nil {
						return err
					}
					assert.Equal(t, []float32{3, 3, 3, 3}, f32s(net.params[0].Grad))
					if net.params[1].Grad == nil {
						return errors.New("used on rank 0 only: must be averaged everywhere")
					}
					assert.Equal(t, []float32{3, 3, 3, 3}, f32s(net.params[1].Grad))
					assert.Nil(t, net.params[2].Grad, "unused on every rank: Grad untouched")
				}
				return nil
			})
			requireNoErrs(t, errs)
		})
	}
}

func TestFindUnusedReachedOutsideForward(t *testing.T) {
	// p1 enters the loss outside Forward's output: the graph walk marks it
	// unused and its bucket leaves before its gradient arrives. Like torch
	// ("marked ready twice"), that is an error naming the parameter.
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{4}, {4}})
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return dot(n.params[0], constant(1, 4))
		}
		d, err := Wrap(context.Background(), net, pg, FindUnusedParameters(true))
		if err != nil {
			return err
		}
		out, err := d.Forward(nil)
		if err != nil {
			return err
		}
		loss := addAll(dot(net.params[1], constant(float32(rank+1), 4)), out)
		err = loss.Backward()
		assert.ErrorIs(t, err, ErrReduction)
		assert.ErrorContains(t, err, `"layer1.weight"`)
		return nil
	})
	requireNoErrs(t, errs)
}

func TestNoSyncAccumulates(t *testing.T) {
	for _, view := range []bool{false, true} {
		t.Run(fmt.Sprintf("view=%v", view), func(t *testing.T) {
			errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
				net := dotNet([][]int{{4}, {3}})
				scale := float32(1)
				net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
					c := scale * float32(rank+1)
					return addAll(dot(n.params[0], constant(c, 4)), dot(n.params[1], constant(10*c, 3)))
				}
				d, err := Wrap(context.Background(), net, pg, GradientAsBucketView(view))
				if err != nil {
					return err
				}
				before := len(allReduceLens(pg))
				err = d.NoSync(func() error {
					loss, err := d.Forward(nil)
					if err != nil {
						return err
					}
					return loss.Backward()
				})
				if err != nil {
					return err
				}
				assert.Len(t, allReduceLens(pg), before, "no all-reduce under NoSync")
				// Local, unsynchronised gradient.
				assert.Equal(t, []float32{float32(rank + 1)}, f32s(net.params[0].Grad)[:1])
				scale = 2
				loss, err := d.Forward(nil)
				if err != nil {
					return err
				}
				if err := loss.Backward(); err != nil {
					return err
				}
				// mean over ranks of (1+2)(r+1) = 3 * 1.5
				assert.Equal(t, []float32{4.5, 4.5, 4.5, 4.5}, f32s(net.params[0].Grad))
				assert.Equal(t, []float32{45, 45, 45}, f32s(net.params[1].Grad))

				// The manual form.
				for _, p := range net.params {
					p.ZeroGrad()
				}
				d.EnterNoSync()
				loss, err = d.Forward(nil)
				if err != nil {
					return err
				}
				if err := loss.Backward(); err != nil {
					return err
				}
				d.ExitNoSync()
				assert.Equal(t, float32(2*(rank+1)), f32s(net.params[0].Grad)[0])
				return nil
			})
			requireNoErrs(t, errs)
		})
	}
}

func TestRebuildBucketsFromObservedOrder(t *testing.T) {
	for _, view := range []bool{false, true} {
		t.Run(fmt.Sprintf("view=%v", view), func(t *testing.T) {
			errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
				net := fourParams()
				net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
					// The engine fires hooks in reverse order of the add's
					// inputs: rank 0 sees p0,p1,p2,p3; rank 1 sees p1,p0,p3,p2.
					ps := n.params
					c := func(i int) *tensor.Tensor { return constant(float32(i+1)*float32(rank+1), 1000) }
					if rank == 0 {
						return addAll(dot(ps[3], c(3)), dot(ps[2], c(2)), dot(ps[1], c(1)), dot(ps[0], c(0)))
					}
					return addAll(dot(ps[2], c(2)), dot(ps[3], c(3)), dot(ps[0], c(0)), dot(ps[1], c(1)))
				}
				d, err := Wrap(context.Background(), net, pg, append(fourCaps, GradientAsBucketView(view))...)
				if err != nil {
					return err
				}
				initial := [][]string{{"p3"}, {"p2", "p1"}, {"p0"}}
				assert.Equal(t, initial, d.Buckets())
				for it := 0; it < 3; it++ {
					for _, p := range net.params {
						p.ZeroGrad()
					}
					loss, err := d.Forward(nil)
					if err != nil {
						return err
					}
					if it == 0 {
						assert.Equal(t, initial, d.Buckets(), "no rebuild before the first backward")
					} else {
						assert.Equal(t, [][]string{{"p0"}, {"p1", "p2"}, {"p3"}}, d.Buckets(), "rank 0's observed order wins")
					}
					if err := loss.Backward(); err != nil {
						return err
					}
					for i, p := range net.params {
						assert.Equal(t, float32(i+1)*1.5, p.Grad.F32()[0], "iteration %d param %d", it, i)
						if view {
							assert.Same(t, d.r.views[i], p.Grad)
						}
					}
				}
				return nil
			})
			requireNoErrs(t, errs)
		})
	}
}

func TestStaticGraphRemembersUnused(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{4}, {4}, {4}})
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return addAll(dot(n.params[0], constant(float32(rank+1), 4)), dot(n.params[2], constant(2, 4)))
		}
		d, err := Wrap(context.Background(), net, pg, StaticGraph(true))
		if err != nil {
			return err
		}
		for it := 0; it < 3; it++ {
			loss, err := d.Forward(nil)
			if err != nil {
				return err
			}
			if err := loss.Backward(); err != nil {
				return err
			}
			for _, p := range net.params {
				p.ZeroGrad()
			}
		}
		assert.True(t, d.r.staticKnown)
		assert.Equal(t, []bool{false, true, false}, d.r.staticUnused)
		assert.Nil(t, net.params[1].Grad)
		// Using the remembered-unused parameter later breaks the static graph.
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return addAll(dot(n.params[1], constant(1, 4)), dot(n.params[0], constant(1, 4)), dot(n.params[2], constant(2, 4)))
		}
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		err = loss.Backward()
		if err == nil {
			return errors.New("expected a static-graph violation")
		}
		assert.ErrorIs(t, err, ErrReduction)
		return nil
	}, commtest.WithLatency(0))
	requireNoErrs(t, errs)
}

func TestWrapBroadcastsRank0State(t *testing.T) {
	errs := runRanks(t, 3, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{2, 3}, {4}})
		for _, p := range net.params {
			for i := range p.Value.F32() {
				p.Value.F32()[i] = float32(rank*100 + i)
			}
		}
		buf := tensor.FromF64([]float64{float64(rank), float64(rank)}, 2)
		net.bufs = append(net.bufs, nnBuffer("bn.running_mean", buf))
		if _, err := Wrap(context.Background(), net, pg); err != nil {
			return err
		}
		assert.Equal(t, []float32{0, 1, 2, 3, 4, 5}, f32s(net.params[0].Value))
		assert.Equal(t, []float64{0, 0}, buf.F64())
		return nil
	})
	requireNoErrs(t, errs)
}

func TestBroadcastBuffersBeforeForward(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("broadcast=%v", on), func(t *testing.T) {
			errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
				net := dotNet([][]int{{2}})
				buf := tensor.FromF32([]float32{0}, 1)
				net.bufs = append(net.bufs, nnBuffer("running", buf))
				net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
					return dot(n.params[0], constant(1, 2))
				}
				d, err := Wrap(context.Background(), net, pg, BroadcastBuffers(on))
				if err != nil {
					return err
				}
				buf.F32()[0] = float32(10 + rank) // ranks' statistics drift apart
				loss, err := d.Forward(nil)
				if err != nil {
					return err
				}
				if on {
					assert.Equal(t, float32(10), buf.F32()[0])
				} else {
					assert.Equal(t, float32(10+rank), buf.F32()[0])
				}
				return loss.Backward()
			})
			requireNoErrs(t, errs)
		})
	}
}

func TestParameterMismatchNamesParamAndRanks(t *testing.T) {
	tests := []struct {
		name   string
		shapes func(rank int) [][]int
		want   []string
	}{
		{"shape", func(rank int) [][]int {
			if rank == 2 {
				return [][]int{{3, 4}, {5, 6}, {7}}
			}
			return [][]int{{3, 4}, {5, 5}, {7}}
		}, []string{`"layer1.weight"`, "[5 5]", "ranks disagreeing with rank 0: [2]"}},
		{"count", func(rank int) [][]int {
			if rank == 1 {
				return [][]int{{3, 4}, {5, 5}}
			}
			return [][]int{{3, 4}, {5, 5}, {7}}
		}, []string{"#2", "[1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := runRanks(t, 3, func(rank int, pg comm.ProcessGroup) error {
				_, err := Wrap(context.Background(), dotNet(tc.shapes(rank)), pg)
				return err
			})
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				assert.ErrorIs(t, err, ErrParamMismatch)
				for _, w := range tc.want {
					assert.Contains(t, err.Error(), w, "rank %d", r)
				}
			}
		})
	}
}

func TestOptionValidation(t *testing.T) {
	pg := commtest.NewGroups(1)[0]
	for _, o := range []Option{BucketCapMB(0), FirstBucketCapMB(-1), Timeout(0)} {
		_, err := Wrap(context.Background(), dotNet([][]int{{2}}), pg, o)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
	frozen := dotNet([][]int{{2}})
	frozen.params[0].SetRequiresGrad(false)
	_, err := Wrap(context.Background(), frozen, pg)
	assert.ErrorIs(t, err, ErrInvalidOption)
}

func TestFrozenParametersAreSkipped(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{2}, {3}})
		net.params[0].SetRequiresGrad(false)
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return dot(n.params[1], constant(float32(rank), 3))
		}
		d, err := Wrap(context.Background(), net, pg)
		if err != nil {
			return err
		}
		assert.Len(t, d.Parameters(), 1)
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		if err := loss.Backward(); err != nil {
			return err
		}
		assert.Equal(t, []float32{0.5, 0.5, 0.5}, f32s(net.params[1].Grad))
		return nil
	})
	requireNoErrs(t, errs)
}

func TestFloat64Parameters(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := newTestNet()
		net.add("a", tensor.New(tensor.Float64, 3))
		net.add("b", constant(0, 2))
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			c := tensor.FromF64([]float64{1, 2, float64(rank)}, 3)
			s := dot(n.params[0], c)
			t := dot(n.params[1], constant(float32(rank), 2))
			return addAll(autograd.FromOp(tensor.FromF32([]float32{float32(s.Value.Item())}), &castOp{s}), t)
		}
		d, err := Wrap(context.Background(), net, pg)
		if err != nil {
			return err
		}
		assert.Len(t, d.Buckets(), 2, "one bucket per dtype")
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		if err := loss.Backward(); err != nil {
			return err
		}
		assert.Equal(t, []float64{1, 2, 0.5}, net.params[0].Grad.F64())
		assert.Equal(t, []float32{0.5, 0.5}, f32s(net.params[1].Grad))
		return nil
	})
	requireNoErrs(t, errs)
}

// castOp turns a float64 scalar into a float32 one.
type castOp struct{ in *autograd.Variable }

func (o *castOp) Name() string                 { return "testCast" }
func (o *castOp) Inputs() []*autograd.Variable { return []*autograd.Variable{o.in} }
func (o *castOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{tensor.FromF64([]float64{gy.Item()})}
}

func TestUnusedOnOneRankDoesNotHangTheOthers(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{4}, {4}})
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			if rank == 0 {
				return dot(n.params[0], constant(1, 4)) // layer1 unused here only
			}
			return addAll(dot(n.params[0], constant(1, 4)), dot(n.params[1], constant(1, 4)))
		}
		d, err := Wrap(context.Background(), net, pg, FirstBucketCapMB(1e-6))
		if err != nil {
			return err
		}
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		err = loss.Backward()
		if rank == 0 {
			assert.ErrorIs(t, err, ErrUnusedParameters)
			return nil
		}
		return err
	}, commtest.WithTimeout(5*time.Second))
	requireNoErrs(t, errs)
}

func TestPeerFailureSurfacesFromBackward(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{4}})
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return dot(n.params[0], constant(1, 4))
		}
		d, err := Wrap(context.Background(), net, pg)
		if err != nil {
			return err
		}
		if rank == 1 {
			return pg.Close() // this rank dies before backward
		}
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		err = loss.Backward()
		assert.ErrorIs(t, err, comm.ErrPeerFailed)
		assert.ErrorContains(t, err, "[1]")
		assert.ErrorContains(t, err, "bucket 0")
		return nil
	})
	requireNoErrs(t, errs)
}

func TestTiedParametersCountOnce(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := dotNet([][]int{{3}})
		net.names = append(net.names, "tied.weight")
		net.params = append(net.params, net.params[0])
		net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
			return dot(n.params[0], constant(float32(rank+1), 3))
		}
		d, err := Wrap(context.Background(), net, pg)
		if err != nil {
			return err
		}
		assert.Len(t, d.Parameters(), 1)
		loss, err := d.Forward(nil)
		if err != nil {
			return err
		}
		if err := loss.Backward(); err != nil {
			return err
		}
		assert.Equal(t, []float32{1.5, 1.5, 1.5}, f32s(net.params[0].Grad))
		return nil
	})
	requireNoErrs(t, errs)
}

func TestBucketViewAveragesInTheCollective(t *testing.T) {
	for _, tc := range []struct {
		world int
		view  bool
		want  comm.ReduceOp
	}{
		{2, false, comm.Avg}, // power of two: a plain copy in, the collective divides (exact)
		{2, true, comm.Avg},  // no copy to fuse the division into
		{4, false, comm.Avg},
		{3, false, comm.Sum}, // pre-divided while copying into the bucket, as torch rounds
		{3, true, comm.Avg},
	} {
		t.Run(fmt.Sprintf("world=%d/view=%v", tc.world, tc.view), func(t *testing.T) {
			errs := runRanks(t, tc.world, func(rank int, pg comm.ProcessGroup) error {
				net := dotNet([][]int{{4}})
				net.fwd = func(n *testNet, _ *autograd.Variable) *autograd.Variable {
					return dot(n.params[0], constant(float32(rank), 4))
				}
				d, err := Wrap(context.Background(), net, pg, GradientAsBucketView(tc.view))
				if err != nil {
					return err
				}
				loss, err := d.Forward(nil)
				if err != nil {
					return err
				}
				if err := loss.Backward(); err != nil {
					return err
				}
				mean := float32(tc.world-1) / 2 // mean of 0..world-1
				assert.InDeltaSlice(t, []float32{mean, mean, mean, mean}, f32s(net.params[0].Grad), 1e-6)
				ops := pg.(*commtest.Group).Ops()
				assert.Equal(t, tc.want, ops[len(ops)-1].Op)
				return nil
			})
			requireNoErrs(t, errs)
		})
	}
}

// TestPowerOfTwoAverageIsExact: at world 2 and 4 the reduced gradients equal,
// bit for bit, what torch's path gives (each rank's gradient times 1/n
// while copied into the bucket, then a Sum through the same group), although
// the division now happens in the collective (comm.Avg).
func TestPowerOfTwoAverageIsExact(t *testing.T) {
	const n = 1000
	grads := func(rank int) []float32 {
		rng := tensor.NewRNG(uint64(rank + 7))
		g := make([]float32, n)
		for i := range g {
			g[i] = float32((rng.Float64()*2 - 1) * math.Pow(10, float64(i%20)-10))
		}
		return g
	}
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			errs := runRanks(t, world, func(rank int, pg comm.ProcessGroup) error {
				want := grads(rank)
				for i := range want {
					want[i] *= float32(1 / float64(world))
				}
				if err := pg.AllReduce(comm.Float32s(want), comm.Sum).Wait(context.Background()); err != nil {
					return err
				}
				net := dotNet([][]int{{n}})
				net.fwd = func(p *testNet, _ *autograd.Variable) *autograd.Variable {
					return dot(p.params[0], tensor.FromF32(grads(rank), n))
				}
				d, err := Wrap(context.Background(), net, pg)
				if err != nil {
					return err
				}
				loss, err := d.Forward(nil)
				if err != nil {
					return err
				}
				if err := loss.Backward(); err != nil {
					return err
				}
				ops := pg.(*commtest.Group).Ops()
				assert.Equal(t, comm.Avg, ops[len(ops)-1].Op)
				got := f32s(net.params[0].Grad)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Errorf("rank %d element %d: %g, want %g", rank, i, got[i], want[i])
						break
					}
				}
				return nil
			})
			requireNoErrs(t, errs)
		})
	}
}

func TestScaledCopy(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 17, 64, 1001} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i) - 3.25
		}
		dst := make([]float32, n)
		scaledCopy(dst, src, float32(1.0/3))
		for i, v := range src {
			if dst[i] != v*float32(1.0/3) {
				t.Fatalf("n=%d: dst[%d] = %g, want %g", n, i, dst[i], v*float32(1.0/3))
			}
		}
		d64 := make([]float64, n)
		s64 := make([]float64, n)
		for i := range s64 {
			s64[i] = float64(i) + 0.5
		}
		scaledCopy(d64, s64, 0.25)
		for i, v := range s64 {
			if d64[i] != v*0.25 {
				t.Fatalf("n=%d float64: dst[%d] = %g", n, i, d64[i])
			}
		}
	}
}

// TestOverlapCommOff: with OverlapComm(false) each bucket is reduced before
// the hook that completed it returns (so before backward goes on), in index
// order, with the same result, and the stats count the wait as not hidden.
func TestOverlapCommOff(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := fourParams()
		d, err := Wrap(context.Background(), net, pg, append(fourCaps, rebuildBuckets(false), OverlapComm(false))...)
		if err != nil {
			return err
		}
		r := d.r
		r.prepare(nil, 2)
		pass := &autograd.Pass{}
		for i := 3; i >= 0; i-- {
			net.params[i].Grad = constant(float32((rank*2+1)*(i+1)), 1000)
			r.gradReady(i, pass)
			b := r.buckets[r.loc[i].bucket]
			if b.pending == 0 {
				select {
				case <-b.done:
				default:
					t.Errorf("rank %d: bucket %d not reduced when its last gradient's hook returned", rank, b.index)
				}
			}
		}
		if err := r.finalize(); err != nil {
			return err
		}
		for i, p := range net.params {
			assert.Equal(t, float32(2*(i+1)), p.Grad.F32()[999], "param %d", i)
		}
		st := d.Stats()
		assert.Greater(t, st.Last.CommWait, time.Duration(0))
		assert.GreaterOrEqual(t, st.Last.CommWait, st.Last.Comm-time.Millisecond, "the inline waits cover the all-reduces")
		return nil
	})
	requireNoErrs(t, errs)
}

// besideGroup records, for every all-reduce's Wait, whether its context
// was marked comm.WaitBeside.
type besideGroup struct {
	comm.ProcessGroup
	mu    sync.Mutex
	waits []bool
}

type besideWork struct {
	comm.Work
	g *besideGroup
}

func (w besideWork) Wait(ctx context.Context) error {
	w.g.mu.Lock()
	w.g.waits = append(w.g.waits, backend.IsWaitBeside(ctx))
	w.g.mu.Unlock()
	return w.Work.Wait(ctx)
}

func (g *besideGroup) AllReduce(buf comm.Buffer, op comm.ReduceOp) comm.Work {
	return besideWork{g.ProcessGroup.AllReduce(buf, op), g}
}

// The reducer's bucket watchers wait beside backward, and say so
// (comm.WaitBeside), so that a backend does not spin long on their behalf.
func TestBucketWatchersWaitBeside(t *testing.T) {
	groups := make([]*besideGroup, 2)
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		g := &besideGroup{ProcessGroup: pg}
		groups[rank] = g
		net := fourParams()
		d, err := Wrap(context.Background(), net, g, append(fourCaps, rebuildBuckets(false))...)
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.waits = nil // Wrap's own collectives
		g.mu.Unlock()
		r := d.r
		r.prepare(nil, 2)
		pass := &autograd.Pass{}
		for i := 3; i >= 0; i-- {
			net.params[i].Grad = constant(1, 1000)
			r.gradReady(i, pass)
		}
		return r.finalize()
	})
	requireNoErrs(t, errs)
	for rank, g := range groups {
		require.Equal(t, []bool{true, true, true}, g.waits, "rank %d: one marked Wait per bucket", rank)
	}
}
