package ddp

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/commtest"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// batch returns a deterministic regression batch for (rank, step).
func batch(rank, step, n, in, out int) (*autograd.Variable, *autograd.Variable) {
	rng := tensor.NewRNG(uint64(1000*rank + step + 1))
	x := rng.Uniform(tensor.Float32, -1, 1, n, in)
	y := rng.Uniform(tensor.Float32, -1, 1, n, out)
	return autograd.Const(x), autograd.Const(y)
}

func mseStep(d *DDP, opt optim.Optimizer, x, y *autograd.Variable) error {
	opt.ZeroGrad()
	out, err := d.Forward(x)
	if err != nil {
		return err
	}
	if err := autograd.MSELoss(out, y, autograd.ReductionMean).Backward(); err != nil {
		return err
	}
	return opt.Step()
}

func paramsOf(n *testNet) [][]float32 {
	out := make([][]float32, len(n.params))
	for i, p := range n.params {
		out[i] = f32s(p.Value)
	}
	return out
}

func requireClose(t *testing.T, want, got [][]float32, tol float64, msg string) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.Equal(t, len(want[i]), len(got[i]))
		for k := range want[i] {
			if d := math.Abs(float64(want[i][k] - got[i][k])); d > tol*(1+math.Abs(float64(want[i][k]))) {
				t.Fatalf("%s: param %d elem %d: want %v got %v", msg, i, k, want[i][k], got[i][k])
			}
		}
	}
}

// joinCase is an uneven-inputs scenario, shared with the multi-process test.
type joinCase struct {
	Name         string
	Batches      []int // per rank; rank 0 joins before the bucket rebuild
	Small        bool  // small buckets and gradient_as_bucket_view
	DivideActive bool
	FindUnused   bool
	FP16         bool
	Buffers      bool // a buffer that drifts per rank, broadcast each Forward
	Tol          float64
}

var joinCases = []joinCase{
	{Name: "default", Batches: []int{1, 4, 3}, Tol: 1e-5},
	{Name: "small buckets, bucket view", Batches: []int{1, 4, 3}, Small: true, Tol: 1e-5},
	{Name: "divide by active ranks", Batches: []int{1, 4, 3}, DivideActive: true, Tol: 1e-5},
	{Name: "bucket view, divide by active ranks", Batches: []int{2, 4, 3}, Small: true, DivideActive: true, Tol: 1e-5},
	{Name: "find unused", Batches: []int{1, 4, 3}, FindUnused: true, Tol: 1e-5},
	{Name: "fp16", Batches: []int{1, 4, 3}, FP16: true, Tol: 2e-3},
	{Name: "buffers", Batches: []int{3, 1, 2}, Buffers: true, Tol: 1e-5},
}

var joinSizes = []int{5, 8, 3}

const joinRows = 4

// joinReference is one process summing the active ranks' gradients each step.
func joinReference(tc joinCase) ([][]float32, error) {
	world := len(tc.Batches)
	ref := mlpNet(joinSizes, 3)
	opt, err := optim.NewSGD(ref.params, optim.SGDConfig{LR: 0.1})
	if err != nil {
		return nil, err
	}
	steps := 0
	for _, b := range tc.Batches {
		steps = max(steps, b)
	}
	for step := 0; step < steps; step++ {
		opt.ZeroGrad()
		active := 0
		for r := 0; r < world; r++ {
			if step < tc.Batches[r] {
				active++
				x, y := batch(r, step, joinRows, joinSizes[0], joinSizes[2])
				if err := autograd.MSELoss(ref.Forward(x), y, autograd.ReductionMean).Backward(); err != nil {
					return nil, err
				}
			}
		}
		div := float32(world)
		if tc.DivideActive {
			div = float32(active)
		}
		for _, p := range ref.params {
			g := p.Grad.F32()
			for i := range g {
				g[i] /= div
			}
		}
		if err := opt.Step(); err != nil {
			return nil, err
		}
	}
	out := paramsOf(ref)
	if tc.Buffers {
		// Broadcast from the lowest active rank at the last step.
		out = append(out, []float32{float32(100*minActive(tc.Batches, steps-1) + steps - 1), 0})
	}
	return out, nil
}

// minActive is the lowest rank that still has a batch at step.
func minActive(batches []int, step int) int {
	for r, b := range batches {
		if step < b {
			return r
		}
	}
	return -1
}

// joinTrain is one rank's side: its own number of batches under Join.
func joinTrain(tc joinCase, pg comm.ProcessGroup) ([][]float32, error) {
	rank := pg.Rank()
	net := mlpNet(joinSizes, uint64(3+rank)) // Wrap broadcasts rank 0's init
	running := tensor.FromF32([]float32{0, 0}, 2)
	if tc.Buffers {
		net.bufs = append(net.bufs, nnBuffer("running", running))
	}
	var opts []Option
	if tc.Small {
		opts = append(opts, BucketCapMB(1e-4), FirstBucketCapMB(1e-4), GradientAsBucketView(true))
	}
	if tc.FindUnused {
		opts = append(opts, FindUnusedParameters(true))
	}
	if tc.FP16 {
		opts = append(opts, WithCommHook(FP16CompressHook()))
	}
	d, err := Wrap(context.Background(), net, pg, opts...)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1})
	if err != nil {
		return nil, err
	}
	err = d.Join(context.Background(), func() error {
		for step := 0; step < tc.Batches[rank]; step++ {
			x, y := batch(rank, step, joinRows, joinSizes[0], joinSizes[2])
			running.F32()[0] = float32(100*rank + step) // local statistics drift
			if err := mseStep(d, opt, x, y); err != nil {
				return err
			}
			if tc.Buffers && running.F32()[0] != float32(100*minActive(tc.Batches, step)+step) {
				return fmt.Errorf("step %d: buffer %v not taken from the lowest active rank", step, running.F32()[0])
			}
		}
		return nil
	}, DivideByInitialWorldSize(!tc.DivideActive))
	out := paramsOf(net)
	if tc.Buffers {
		out = append(out, f32s(running)) // the last joiner's, on every rank
	}
	return out, err
}

func TestJoinUnevenInputs(t *testing.T) { checkJoinCases(t, runRanks) }

// checkJoinCases trains every join case on the ranks run starts and checks
// each rank against the single-process reference.
func checkJoinCases(t *testing.T, run func(*testing.T, int, func(int, comm.ProcessGroup) error, ...commtest.Option) []error) {
	for _, tc := range joinCases {
		t.Run(tc.Name, func(t *testing.T) {
			want, err := joinReference(tc)
			require.NoError(t, err)
			world := len(tc.Batches)
			got := make([][][]float32, world)
			errs := run(t, world, func(rank int, pg comm.ProcessGroup) error {
				var err error
				got[rank], err = joinTrain(tc, pg)
				return err
			})
			requireNoErrs(t, errs)
			for r := 0; r < world; r++ {
				requireClose(t, want, got[r], tc.Tol, fmt.Sprintf("rank %d", r))
			}
		})
	}
}

func TestJoinThrowOnEarlyTermination(t *testing.T) {
	for _, nb := range [][]int{{1, 3}, {2, 2}} {
		t.Run(fmt.Sprint(nb), func(t *testing.T) { testThrowOnEarly(t, nb) })
	}
}

func testThrowOnEarly(t *testing.T, nb []int) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := mlpNet([]int{3, 2}, 1)
		d, err := Wrap(context.Background(), net, pg)
		if err != nil {
			return err
		}
		opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1})
		if err != nil {
			return err
		}
		return d.Join(context.Background(), func() error {
			for step := 0; step < nb[rank]; step++ {
				x, y := batch(rank, step, 2, 3, 2)
				if err := mseStep(d, opt, x, y); err != nil {
					return err
				}
			}
			return nil
		}, ThrowOnEarlyTermination(true))
	})
	for r, err := range errs {
		if nb[0] == nb[1] {
			assert.NoError(t, err, "rank %d: equal inputs never terminate early", r)
			continue
		}
		assert.ErrorIs(t, err, ErrJoinedEarly, "rank %d", r)
		assert.ErrorContains(t, err, "[0]", "rank %d", r)
	}
}

func TestJoinAllRanksWithoutData(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		d, err := Wrap(context.Background(), mlpNet([]int{3, 2}, 1), pg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return d.Join(ctx, func() error { return nil })
	})
	requireNoErrs(t, errs)
}

func TestJoinWithGradientAccumulation(t *testing.T) {
	steps := []int{1, 3}
	got := make([][][]float32, 2)
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := mlpNet(joinSizes, 3)
		d, err := Wrap(context.Background(), net, pg)
		if err != nil {
			return err
		}
		opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1})
		if err != nil {
			return err
		}
		micro := func(step, m int) error {
			x, y := batch(rank, 10*step+m, joinRows, joinSizes[0], joinSizes[2])
			out, err := d.Forward(x)
			if err != nil {
				return err
			}
			return autograd.MSELoss(out, y, autograd.ReductionMean).Backward()
		}
		err = d.Join(context.Background(), func() error {
			for step := 0; step < steps[rank]; step++ {
				opt.ZeroGrad()
				if err := d.NoSync(func() error { return micro(step, 0) }); err != nil {
					return err
				}
				if err := micro(step, 1); err != nil {
					return err
				}
				if err := opt.Step(); err != nil {
					return err
				}
			}
			return nil
		})
		got[rank] = paramsOf(net)
		return err
	}, commtest.WithTimeout(10*time.Second))
	requireNoErrs(t, errs)
	requireClose(t, got[1], got[0], 0, "ranks agree after Join")
}
