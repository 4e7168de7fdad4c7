package sim_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// Batch norm, SyncBatchNorm, masked_fill and where on sim (kernels.cu's
// bn_* and where_f32 through tensor/device_norm.go) against the CPU ops:
// outputs, gradients of every input (accumulated into Grad buffers that
// start at ones) and the running statistics, on odd shapes.

// bnRun runs BatchNorm (sum nil) or SyncBatchNorm on dev over copies of
// x, w, b and the running statistics, back-propagates dy, and returns on
// the host the output, the gradients of x, w and b, and the running mean
// and variance after the step.
func bnRun(t *testing.T, dev tensor.Device, x, w, b, rm, rv, dy *tensor.Tensor, training bool, sum autograd.SumAcrossReplicas) []*tensor.Tensor {
	t.Helper()
	param := func(v *tensor.Tensor) *autograd.Variable {
		if v == nil {
			return nil
		}
		p := autograd.Param(v.Clone().MustTo(dev))
		g := tensor.New(tensor.Float32, v.Shape()...)
		tensor.Fill(g, 1)
		p.Grad = g.MustTo(dev)
		return p
	}
	onDev := func(v *tensor.Tensor) *tensor.Tensor {
		if v == nil {
			return nil
		}
		return v.Clone().MustTo(dev)
	}
	xv, wv, bv := param(x), param(w), param(b)
	rmd, rvd := onDev(rm), onDev(rv)
	var y *autograd.Variable
	if sum != nil {
		y = autograd.SyncBatchNorm(xv, wv, bv, rmd, rvd, 0.1, 1e-5, sum)
	} else {
		y = autograd.BatchNorm(xv, wv, bv, rmd, rvd, training, 0.1, 1e-5)
	}
	require.Equal(t, dev.String(), y.Value.Device().String())
	require.NoError(t, y.BackwardWith(dy.MustTo(dev)))
	host := func(v *tensor.Tensor) *tensor.Tensor {
		if v == nil {
			return nil
		}
		return v.MustTo(tensor.CPU())
	}
	grad := func(v *autograd.Variable) *tensor.Tensor {
		if v == nil {
			return nil
		}
		return host(v.Grad)
	}
	return []*tensor.Tensor{host(y.Value), grad(xv), grad(wv), grad(bv), host(rmd), host(rvd)}
}

var bnNames = []string{"output", "input gradient", "weight gradient", "bias gradient", "running mean", "running variance"}

func requireSameTensors(t *testing.T, want, got []*tensor.Tensor, tol float64, prefix string) {
	t.Helper()
	for i := range want {
		if want[i] == nil {
			require.Nil(t, got[i], "%s: %s", prefix, bnNames[i])
			continue
		}
		require.NotNil(t, got[i], "%s: %s", prefix, bnNames[i])
		close32(t, want[i].F32(), got[i].F32(), tol, prefix+": "+bnNames[i])
	}
}

func TestBatchNormOnSim(t *testing.T) {
	d := newDevice(t)
	for _, tc := range []struct {
		shape            []int
		affine, tracking bool
		training         bool
	}{
		{[]int{5, 3, 7, 3}, true, true, true}, // BatchNorm2d, odd spatial size
		{[]int{4, 6}, true, true, true},       // BatchNorm1d on [N, C]
		{[]int{3, 2, 11}, false, true, true},  // [N, C, L], no affine
		{[]int{2, 5, 3, 1}, true, false, true},
		{[]int{5, 3, 7, 3}, true, true, false}, // evaluation
		{[]int{3, 4, 2}, false, true, false},
	} {
		t.Run(fmt.Sprintf("%v affine=%v tracking=%v training=%v", tc.shape, tc.affine, tc.tracking, tc.training), func(t *testing.T) {
			rng := tensor.NewRNG(5)
			c := tc.shape[1]
			x := tensor.Randn(rng, tensor.Float32, tc.shape...)
			x = shifted(x, 3) // a mean well off zero, as after a ReLU
			dy := tensor.Randn(rng, tensor.Float32, tc.shape...)
			var w, b, rm, rv *tensor.Tensor
			if tc.affine {
				w, b = tensor.Randn(rng, tensor.Float32, c), tensor.Randn(rng, tensor.Float32, c)
			}
			if tc.tracking || !tc.training {
				rm, rv = tensor.Randn(rng, tensor.Float32, c), tensor.Rand(rng, tensor.Float32, c)
				rv = shifted(rv, 0.5)
			}
			want := bnRun(t, tensor.CPU(), x, w, b, rm, rv, dy, tc.training, nil)
			got := bnRun(t, d.Tensors(), x, w, b, rm, rv, dy, tc.training, nil)
			requireSameTensors(t, want, got, 2e-5, "BatchNorm")
		})
	}
}

// replicaSum is a SumAcrossReplicas for world goroutines in one process:
// each call waits for every replica's buffer and gets their sum, added in
// rank order (so the CPU and sim runs add in the same order).
type replicaSum struct {
	mu      sync.Mutex
	cond    *sync.Cond
	world   int
	arrived int
	gen     int
	bufs    [][]float64
	result  []float64
}

func newReplicaSum(world int) *replicaSum {
	s := &replicaSum{world: world, bufs: make([][]float64, world)}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *replicaSum) forRank(r int) autograd.SumAcrossReplicas {
	return func(buf []float64) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		gen := s.gen
		s.bufs[r] = buf
		s.arrived++
		if s.arrived == s.world {
			sum := make([]float64, len(buf))
			for _, b := range s.bufs {
				if len(b) != len(sum) {
					return fmt.Errorf("replica buffers of %d and %d values", len(b), len(sum))
				}
				for i, v := range b {
					sum[i] += v
				}
			}
			s.result, s.arrived = sum, 0
			s.gen++
			s.cond.Broadcast()
		} else {
			for gen == s.gen {
				s.cond.Wait()
			}
		}
		copy(buf, s.result)
		return nil
	}
}

// SyncBatchNorm at world 2 (two goroutines, uneven local batches) on sim
// against the same on the CPU: every replica's output, gradients and
// running statistics.
func TestSyncBatchNormOnSim(t *testing.T) {
	d := newDevice(t)
	const c = 3
	rng := tensor.NewRNG(9)
	shapes := [][]int{{4, c, 5, 3}, {2, c, 5, 3}}
	var xs, dys []*tensor.Tensor
	for _, s := range shapes {
		x := tensor.Randn(rng, tensor.Float32, s...)
		x = shifted(x, 2)
		xs, dys = append(xs, x), append(dys, tensor.Randn(rng, tensor.Float32, s...))
	}
	w, b := tensor.Randn(rng, tensor.Float32, c), tensor.Randn(rng, tensor.Float32, c)
	rm, rv := tensor.Randn(rng, tensor.Float32, c), tensor.Rand(rng, tensor.Float32, c)
	run := func(dev tensor.Device) [][]*tensor.Tensor {
		sums := newReplicaSum(len(shapes))
		out := make([][]*tensor.Tensor, len(shapes))
		var wg sync.WaitGroup
		for r := range shapes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[r] = bnRun(t, dev, xs[r], w, b, rm, rv, dys[r], true, sums.forRank(r))
			}()
		}
		wg.Wait()
		return out
	}
	want, got := run(tensor.CPU()), run(d.Tensors())
	for r := range shapes {
		requireSameTensors(t, want[r], got[r], 2e-5, fmt.Sprintf("SyncBatchNorm rank %d", r))
	}
	// The replicas normalized with the same statistics: equal running
	// statistics on both.
	require.Equal(t, got[0][4].F32(), got[1][4].F32())
	require.Equal(t, got[0][5].F32(), got[1][5].F32())
}

func TestMaskedFillAndWhereOnSim(t *testing.T) {
	rng := tensor.NewRNG(3)
	// A causal mask [T, T] broadcast over [B, T, T], given on the host.
	mask := tensor.Triu(tensor.Ones(tensor.Float32, 5, 5), 1)
	requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
		return autograd.MaskedFill(xs[0], mask, -1e9)
	}, 1e-6, tensor.Randn(rng, tensor.Float32, 3, 5, 5))
	cond := tensor.Rand(rng, tensor.Float32, 4, 1, 7)
	cond = tensor.ReLU(shifted(cond, -0.5)) // zero about half the time
	requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
		return autograd.Where(cond, xs[0], xs[1])
	}, 1e-6, tensor.Randn(rng, tensor.Float32, 4, 3, 7), tensor.Randn(rng, tensor.Float32, 4, 3, 7))
}

// shifted is x + v.
func shifted(x *tensor.Tensor, v float64) *tensor.Tensor {
	return tensor.Add(x, tensor.Full(x.DType(), v, 1))
}
