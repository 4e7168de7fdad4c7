package ddp

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"goddp/autograd"
	"goddp/comm"
	"goddp/optim"
	"goddp/tensor"
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

func TestJoinUnevenInputs(t *testing.T) {
	sizes := []int{5, 8, 3}
	const world, n = 3, 4
	nb := []int{1, 4, 3} // batches per rank: rank 0 joins before the bucket rebuild
	tests := []struct {
		name         string
		opts         []Option
		divideActive bool
		tol          float64
	}{
		{"default", nil, false, 1e-5},
		{"small buckets, bucket view", []Option{BucketCapMB(1e-4), FirstBucketCapMB(1e-4), GradientAsBucketView(true)}, false, 1e-5},
		{"divide by active ranks", nil, true, 1e-5},
		{"find unused", []Option{FindUnusedParameters(true)}, false, 1e-5},
		{"fp16", []Option{WithCommHook(FP16CompressHook())}, false, 2e-3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Reference: one process summing the active ranks' gradients.
			ref := mlpNet(sizes, 3)
			opt, err := optim.NewSGD(ref.params, optim.SGDConfig{LR: 0.1})
			require.NoError(t, err)
			for step := 0; step < 4; step++ {
				opt.ZeroGrad()
				active := 0
				for r := 0; r < world; r++ {
					if step < nb[r] {
						active++
						x, y := batch(r, step, n, sizes[0], sizes[2])
						require.NoError(t, autograd.MSELoss(ref.Forward(x), y, autograd.ReductionMean).Backward())
					}
				}
				div := float64(world)
				if tc.divideActive {
					div = float64(active)
				}
				for _, p := range ref.params {
					g := p.Grad.F32()
					for i := range g {
						g[i] /= float32(div)
					}
				}
				require.NoError(t, opt.Step())
			}
			want := paramsOf(ref)

			got := make([][][]float32, world)
			errs := runRanks(t, world, func(rank int, pg comm.ProcessGroup) error {
				net := mlpNet(sizes, uint64(3+rank)) // Wrap broadcasts rank 0's init
				d, err := Wrap(net, pg, tc.opts...)
				if err != nil {
					return err
				}
				opt, err := optim.NewSGD(d.Parameters(), optim.SGDConfig{LR: 0.1})
				if err != nil {
					return err
				}
				err = d.Join(context.Background(), func() error {
					for step := 0; step < nb[rank]; step++ {
						x, y := batch(rank, step, n, sizes[0], sizes[2])
						if err := mseStep(d, opt, x, y); err != nil {
							return err
						}
					}
					return nil
				}, DivideByInitialWorldSize(!tc.divideActive))
				got[rank] = paramsOf(net)
				return err
			})
			requireNoErrs(t, errs)
			for r := 0; r < world; r++ {
				requireClose(t, want, got[r], tc.tol, fmt.Sprintf("rank %d", r))
			}
		})
	}
}

func TestJoinThrowOnEarlyTermination(t *testing.T) {
	nb := []int{1, 3}
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		net := mlpNet([]int{3, 2}, 1)
		d, err := Wrap(net, pg)
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
		assert.ErrorIs(t, err, ErrJoinedEarly, "rank %d", r)
		assert.ErrorContains(t, err, "[0]", "rank %d", r)
	}
}

func TestJoinAllRanksWithoutData(t *testing.T) {
	errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
		d, err := Wrap(mlpNet([]int{3, 2}, 1), pg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return d.Join(ctx, func() error { return nil })
	})
	requireNoErrs(t, errs)
}
