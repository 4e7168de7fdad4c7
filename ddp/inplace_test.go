package ddp

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/comm/shm"
	"github.com/goddp/goddp/tensor"
)

// inPlaceRun trains a dotNet for steps iterations on one rank and returns
// every parameter's Grad after each backward. prep, if set, runs before
// each backward (to plant aliased or strided gradients). With check set,
// it also asserts after each backward that every slot was reduced where
// its gradient lies (direct) and that no bucket memory was written.
func inPlaceRun(t *testing.T, rank int, pg comm.ProcessGroup, shapes [][]int, steps int, inPlace, check bool,
	prep func(net *testNet, step int), opts ...Option) ([][][]float32, error) {
	net := dotNet(shapes)
	opts = append([]Option{ReduceInPlace(inPlace), FirstBucketCapMB(0.001), BucketCapMB(1)}, opts...)
	d, err := Wrap(context.Background(), net, pg, opts...)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var out [][][]float32
	for step := 0; step < steps; step++ {
		if step == 0 {
			for _, p := range net.params {
				p.Grad = nil
			}
		} else {
			for _, p := range net.params {
				tensor.Fill(p.Grad, 0) // accumulate into an existing Grad
			}
		}
		if prep != nil {
			prep(net, step)
		}
		loss, err := d.ForwardFunc(func() *autograd.Variable {
			terms := make([]*autograd.Variable, len(net.params))
			for i, p := range net.params {
				c := fill(func(k int) float32 { return gradConst(rank, i, k) * float32(step+1) / 3 }, p.Value.Shape()...)
				terms[i] = dot(p, c)
			}
			return addAll(terms...)
		})
		if err != nil {
			return nil, err
		}
		if err := loss.Backward(); err != nil {
			return nil, err
		}
		var gs [][]float32
		for _, p := range net.params {
			gs = append(gs, f32s(p.Grad))
		}
		out = append(out, gs)
		if check {
			for _, b := range d.r.buckets {
				for slot, ok := range b.direct {
					if !ok {
						return nil, fmt.Errorf("step %d: bucket %d slot %d (%s) was copied, not reduced in place", step, b.index, slot, d.r.params[b.params[slot]].name)
					}
				}
				for k, v := range b.f32 {
					if v != 0 {
						return nil, fmt.Errorf("step %d: bucket %d memory written at %d: the gradients were copied in", step, b.index, k)
					}
				}
			}
		}
	}
	return out, nil
}

// runBoth trains with ReduceInPlace(true) and (false) at world and returns
// rank-indexed results of each.
func runBoth(t *testing.T, world int, shapes [][]int, check bool, prep func(*testNet, int), opts ...Option) (in, cp [][][][]float32) {
	t.Helper()
	for _, on := range []bool{true, false} {
		res := make([][][][]float32, world)
		errs := runRanks(t, world, func(rank int, pg comm.ProcessGroup) error {
			var err error
			res[rank], err = inPlaceRun(t, rank, pg, shapes, 3, on, check && on, prep, opts...)
			return err
		})
		requireNoErrs(t, errs)
		if on {
			in = res
		} else {
			cp = res
		}
	}
	return in, cp
}

func TestReduceInPlaceBitIdenticalToCopies(t *testing.T) {
	shapes := [][]int{{3, 4}, {5}, {300, 1000}, {2, 2}, {700}, {1}, {65, 129}}
	// At world 3 every slot is copied (torch's division before the sum),
	// so check asserts in place only at 2 and 4.
	for _, world := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			in, cp := runBoth(t, world, shapes, world != 3, nil)
			for r := range in {
				require.Equal(t, cp[r], in[r], "rank %d: in-place and copying reductions differ", r)
				require.Equal(t, in[0], in[r], "rank %d differs from rank 0", r)
			}
			// And the value is the average of the ranks' gradients.
			for step, gs := range in[0] {
				for i, g := range gs {
					for k := range g {
						var sum float64
						for r := 0; r < world; r++ {
							sum += float64(gradConst(r, i, k) * float32(step+1) / 3)
						}
						require.InDelta(t, sum/float64(world), float64(g[k]), 1e-5*max(1, sum), "step %d param %d elem %d", step, i, k)
					}
				}
			}
		})
	}
}

// Two parameters of one bucket whose Grad shares memory (a user's doing)
// must not both be reduced in place in one collective (overlapping
// buffers); the second is copied, and the result equals the copying
// path's. (Across buckets, or at world sizes where the gradient is divided
// before the sum, gradients sharing memory give order-dependent results on
// both paths, as in torch.)
func TestReduceInPlaceAliasedGradients(t *testing.T) {
	shapes := [][]int{{6}, {6}, {4}}
	prep := func(net *testNet, step int) {
		shared := tensor.Zeros(tensor.Float32, 6)
		net.params[0].Grad = shared
		net.params[1].Grad = shared
	}
	for _, world := range []int{2, 4} {
		in, cp := runBoth(t, world, shapes, false, prep, BucketCapMB(25), FirstBucketCapMB(25))
		for r := range in {
			require.Equal(t, cp[r], in[r], "world %d rank %d", world, r)
		}
	}
}

func TestReduceInPlaceOffWithoutVectorGroup(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		d, err := Wrap(context.Background(), dotNet([][]int{{4}}), &recordingGroup{ProcessGroup: pg})
		if err != nil {
			return err
		}
		defer d.Close()
		if d.r.vec != nil {
			return fmt.Errorf("a group without AllReduceV got the in-place path")
		}
		return nil
	})
	requireNoErrs(t, errs)
}

// shmRanks runs fn on world shm groups in this process (one goroutine and
// thread each), the backend DDP meets on one host.
func shmRanks(t *testing.T, world int, fn func(rank int, pg comm.ProcessGroup) error) []error {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2*world+2)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := commtest.NewStore()
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Go(func() {
			pg, err := shm.New(ctx, backend.Options{Rank: r, Size: world, Store: store, Timeout: 30 * time.Second})
			if err != nil {
				errs[r] = err
				return
			}
			defer pg.Close()
			errs[r] = fn(r, pg)
		})
	}
	wg.Wait()
	return errs
}

// With GradientAsBucketView on the shm backend the buckets live in memory
// every rank maps (the all-reduce then copies nothing); the gradients are
// bit-identical to those of buckets in ordinary memory, across the rebuild
// after the first iteration, at worlds 2 and 3.
func TestSharedBucketsOnShm(t *testing.T) {
	shapes := [][]int{{3, 4}, {5}, {300, 1000}, {2, 2}, {700}, {1}, {65, 129}}
	for _, world := range []int{2, 3} {
		res := map[bool][][][][]float32{}
		for _, shared := range []bool{true, false} {
			got := make([][][][]float32, world)
			errs := shmRanks(t, world, func(rank int, pg comm.ProcessGroup) error {
				var err error
				got[rank], err = inPlaceRun(t, rank, pg, shapes, 3, shared, false, func(net *testNet, step int) {}, GradientAsBucketView(true))
				return err
			})
			for r, err := range errs {
				require.NoError(t, err, "world %d rank %d shared %v", world, r, shared)
			}
			res[shared] = got
		}
		for r := 0; r < world; r++ {
			require.Equal(t, res[false][r], res[true][r], "world %d rank %d", world, r)
		}
	}
	// And the buckets really are in the shared region.
	errs := shmRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		d, err := Wrap(context.Background(), dotNet(shapes), pg, GradientAsBucketView(true), BucketCapMB(1))
		if err != nil {
			return err
		}
		defer d.Close()
		region := d.cfg.shared[tensor.Float32]
		if region == nil {
			return fmt.Errorf("no shared bucket memory on shm")
		}
		lo, hi := uintptr(unsafe.Pointer(&region[0])), uintptr(unsafe.Pointer(&region[0]))+uintptr(len(region))
		for _, b := range d.r.buckets {
			if p := uintptr(unsafe.Pointer(&b.f32[0])); p < lo || p >= hi {
				return fmt.Errorf("bucket %d is not in the shared region", b.index)
			}
		}
		return nil
	})
	requireNoErrs(t, errs)
}

// Close gives the shared buckets back: the gradients get memory of their
// own, and the next Wrap on the group reuses the region instead of mapping
// another.
func TestSharedBucketsReusedAfterClose(t *testing.T) {
	shapes := [][]int{{3, 4}, {300, 1000}, {700}}
	errs := shmRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		var first uintptr
		for round := 0; round < 3; round++ {
			net := dotNet(shapes)
			d, err := Wrap(context.Background(), net, pg, GradientAsBucketView(true))
			if err != nil {
				return err
			}
			region := d.cfg.shared[tensor.Float32]
			if region == nil {
				return fmt.Errorf("round %d: no shared buckets", round)
			}
			lo := uintptr(unsafe.Pointer(&region[0]))
			if round == 0 {
				first = lo
			} else if lo != first {
				return fmt.Errorf("round %d: a new shared region instead of the freed one", round)
			}
			loss, err := d.ForwardFunc(func() *autograd.Variable {
				var ts []*autograd.Variable
				for i, p := range net.params {
					ts = append(ts, dot(p, constant(float32(rank+i), p.Value.Shape()...)))
				}
				return addAll(ts...)
			})
			if err != nil {
				return err
			}
			if err := loss.Backward(); err != nil {
				return err
			}
			if err := d.Close(); err != nil {
				return err
			}
			for i, p := range net.params {
				g := uintptr(unsafe.Pointer(&p.Grad.F32()[0]))
				if g >= lo && g < lo+uintptr(len(region)) {
					return fmt.Errorf("round %d: parameter %d's Grad still views the freed buckets", round, i)
				}
				if want := float32(i) + 0.5; p.Grad.F32()[0] != want {
					return fmt.Errorf("round %d: parameter %d's Grad = %v after Close, want %v", round, i, p.Grad.F32()[0], want)
				}
			}
		}
		return nil
	})
	requireNoErrs(t, errs)
}

func TestStatsReduction(t *testing.T) {
	cases := []struct {
		world int
		opts  []Option
		want  string
	}{
		{2, nil, "in place"},
		{4, nil, "in place"},
		{3, nil, "copies"}, // torch's division before the sum needs the copy
		{2, []Option{ReduceInPlace(false)}, "copies"},
		{2, []Option{GradientAsBucketView(true)}, "bucket view"}, // the in-memory group has no shared memory
		{2, []Option{WithCommHook(FP16CompressHook())}, "copies"},
	}
	for _, c := range cases {
		errs := runRanks(t, c.world, func(rank int, pg comm.ProcessGroup) error {
			d, err := Wrap(context.Background(), dotNet([][]int{{4}}), pg, c.opts...)
			if err != nil {
				return err
			}
			defer d.Close()
			if got := d.Stats().Reduction; got != c.want {
				return fmt.Errorf("world %d: Reduction %q, want %q", c.world, got, c.want)
			}
			return nil
		})
		requireNoErrs(t, errs)
	}
	errs := shmRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		d, err := Wrap(context.Background(), dotNet([][]int{{4}}), pg, GradientAsBucketView(true))
		if err != nil {
			return err
		}
		defer d.Close()
		if got := d.Stats().Reduction; got != "shared buckets" {
			return fmt.Errorf("shm with bucket view: Reduction %q", got)
		}
		return nil
	})
	requireNoErrs(t, errs)
}

// The rebuild after the first iteration lays the buckets out again in the
// same shared memory: gradients that view the old layout move out first,
// and every iteration's average is right (the all-reduces here are large
// enough for shm's shared-buffer path).
func TestRebuildWithSharedBuckets(t *testing.T) {
	const n = 4096
	errs := shmRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := newTestNet()
		for i := 0; i < 4; i++ {
			net.add(fmt.Sprintf("p%d", i), constant(0, n))
		}
		net.fwd = func(m *testNet, _ *autograd.Variable) *autograd.Variable {
			ps := m.params
			c := func(i int) *tensor.Tensor { return constant(float32(i+1)*float32(rank+1), n) }
			if rank == 0 {
				return addAll(dot(ps[3], c(3)), dot(ps[2], c(2)), dot(ps[1], c(1)), dot(ps[0], c(0)))
			}
			return addAll(dot(ps[2], c(2)), dot(ps[3], c(3)), dot(ps[0], c(0)), dot(ps[1], c(1)))
		}
		d, err := Wrap(context.Background(), net, pg, FirstBucketCapMB(4.0*n/(1<<20)), BucketCapMB(8.0*n/(1<<20)), GradientAsBucketView(true))
		if err != nil {
			return err
		}
		defer d.Close()
		if got := d.Stats().Reduction; got != "shared buckets" {
			return fmt.Errorf("Reduction %q", got)
		}
		initial := [][]string{{"p3"}, {"p2", "p1"}, {"p0"}}
		for it := 0; it < 3; it++ {
			loss, err := d.Forward(nil)
			if err != nil {
				return err
			}
			want := initial
			if it > 0 {
				want = [][]string{{"p0"}, {"p1", "p2"}, {"p3"}}
			}
			if got := d.Buckets(); fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("iteration %d: buckets %v, want %v", it, got, want)
			}
			// No zeroing: each iteration adds the same average to what the
			// rebuild carried over, so a gradient lost or mangled in the move
			// shows.
			if err := loss.Backward(); err != nil {
				return err
			}
			for i, p := range net.params {
				want := float32(it+1) * float32(i+1) * 1.5
				for k, v := range p.Grad.F32() {
					if v != want {
						return fmt.Errorf("iteration %d param %d elem %d: %v, want %v", it, i, k, v, want)
					}
				}
				if d.r.views[i] != p.Grad {
					return fmt.Errorf("iteration %d: param %d's Grad is not its bucket view", it, i)
				}
			}
		}
		return nil
	})
	requireNoErrs(t, errs)
}

// Join on the shm backend: joined ranks shadow each bucket with AllReduce on
// zeros while the others reduce in place (AllReduceV) or in shared buckets;
// the two must meet as one collective.
func TestJoinUnevenInputsOnShm(t *testing.T) {
	checkJoinCases(t, func(t *testing.T, world int, fn func(int, comm.ProcessGroup) error, _ ...commtest.Option) []error {
		return shmRanks(t, world, fn)
	})
}
