package sim_test

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/devtensor"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// countingLauncher counts a device's kernel launches by name.
type countingLauncher struct {
	devtensor.Launcher
	mu sync.Mutex
	n  map[string]int
}

func (c *countingLauncher) Launch(kernel string, grid, block int, args ...uint64) error {
	c.mu.Lock()
	c.n[kernel]++
	c.mu.Unlock()
	return c.Launcher.Launch(kernel, grid, block, args...)
}

// take returns the launches since the last take, fill_f32 (the zeroing
// and poisoning of allocations) apart.
func (c *countingLauncher) take() (launches, fills int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.n {
		if k == "fill_f32" {
			fills += n
		} else {
			launches += n
		}
	}
	clear(c.n)
	return launches, fills
}

// countedDevice is simulated device id as a tensor device whose launches
// are counted. Results allocated without zeroing start as NaN, as on
// Tensors().
func countedDevice(t *testing.T, id int) (*devtensor.Device, *countingLauncher) {
	d := sim.New(id)
	t.Cleanup(func() { _ = d.Close() })
	dt, ok := devtensor.Of(d.Tensors())
	require.True(t, ok)
	c := &countingLauncher{Launcher: dt.Launcher(), n: map[string]int{}}
	dev := devtensor.New(c)
	dev.PoisonEmpty()
	return dev, c
}

// multiShapes are parameters of odd sizes (1, 7, 4097 and 70000
// elements: chunks of 16384 cut inside the last two) in nanoGPT's two
// groups, the 2-D ones decayed.
var multiShapes = [][]int{{1}, {7}, {17, 241}, {4097}, {280, 250}, {3, 1}}

// multiRun trains parameters of the shapes on dev for steps steps from
// fixed values and gradients, parameter 1 going without a gradient at
// step 1 (so that its step count lags, as torch counts), and returns the
// parameters on the host and the launches of each step's Step.
func multiRun(t *testing.T, dev tensor.Device, c *countingLauncher, shapes [][]int, steps int,
	mk func([]*autograd.Variable) (optim.Optimizer, error)) ([][]float32, []int) {
	rng := tensor.NewRNG(11)
	ps := make([]*autograd.Variable, len(shapes))
	grads := make([]*tensor.Tensor, len(shapes))
	for i, s := range shapes {
		ps[i] = autograd.Param(tensor.Randn(rng, tensor.Float32, s...).MustTo(dev))
		grads[i] = tensor.ZerosAs(ps[i].Value, s...)
	}
	opt, err := mk(ps)
	require.NoError(t, err)
	var launches []int
	for step := range steps {
		for i, s := range shapes {
			g := tensor.Randn(rng, tensor.Float32, s...)
			require.NoError(t, tensor.Copy(grads[i], g))
			ps[i].Grad = grads[i]
		}
		if step == 1 {
			ps[1].Grad = nil
		}
		if c != nil {
			c.take()
		}
		require.NoError(t, opt.Step())
		if c != nil {
			n, _ := c.take()
			launches = append(launches, n)
		}
	}
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = p.Value.MustTo(tensor.CPU()).F32()
	}
	return out, launches
}

var multiOptimizers = []struct {
	name string
	mk   func(f optim.Foreach) func([]*autograd.Variable) (optim.Optimizer, error)
}{
	{"adamw groups", func(f optim.Foreach) func([]*autograd.Variable) (optim.Optimizer, error) {
		return func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewAdamWGroups(optim.DecayGroups(ps, 1e-2, 0.1), optim.AdamConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Foreach: f})
		}
	}},
	{"adam l2", func(f optim.Foreach) func([]*autograd.Variable) (optim.Optimizer, error) {
		return func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewAdam(ps, optim.AdamConfig{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.05, Foreach: f})
		}
	}},
	{"sgd nesterov", func(f optim.Foreach) func([]*autograd.Variable) (optim.Optimizer, error) {
		return func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9, WeightDecay: 0.01, Nesterov: true, Foreach: f})
		}
	}},
	{"sgd momentum dampening", func(f optim.Foreach) func([]*autograd.Variable) (optim.Optimizer, error) {
		return func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.8, Dampening: 0.1, WeightDecay: 0.02, Foreach: f})
		}
	}},
	{"sgd plain maximize", func(f optim.Foreach) func([]*autograd.Variable) (optim.Optimizer, error) {
		return func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, WeightDecay: 0.01, Maximize: true, Foreach: f})
		}
	}},
}

// The multi-tensor updates (kernels.cu's multi_tensor_*) leave the
// parameters bit for bit where the per-tensor kernels leave them, over
// several steps of tensors of odd sizes, and close to the host's update;
// a step is a launch or two per group (one per step count) instead of one
// per parameter.
func TestMultiTensorUpdatesMatchPerTensor(t *testing.T) {
	const steps = 4
	for _, o := range multiOptimizers {
		t.Run(o.name, func(t *testing.T) {
			fused, c := countedDevice(t, 1)
			each, ce := countedDevice(t, 2)
			got, launches := multiRun(t, fused, c, multiShapes, steps, o.mk(optim.ForeachOn))
			want, eachLaunches := multiRun(t, each, ce, multiShapes, steps, o.mk(optim.ForeachOff))
			host, _ := multiRun(t, tensor.CPU(), nil, multiShapes, steps, o.mk(optim.ForeachOff))
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("parameter %d %v element %d: multi-tensor %v, per-tensor %v", i, multiShapes[i], j, got[i][j], want[i][j])
					}
				}
				close32(t, host[i], got[i], 1e-5, fmt.Sprintf("parameter %d %v against the host", i, multiShapes[i]))
			}
			t.Logf("launches per step: multi-tensor %v, per-tensor %v", launches, eachLaunches)
			for s, n := range launches {
				// Two groups (Adam's or SGD's first step, whose fresh
				// momentum buffers are a batch of their own) times two
				// step counts at most; the per-tensor path launches for
				// every parameter with a gradient, or twice for plain SGD.
				require.LessOrEqual(t, n, 3, "step %d", s)
				require.Greater(t, n, 0, "step %d", s)
				require.GreaterOrEqual(t, eachLaunches[s], len(multiShapes)-1, "step %d", s)
			}
		})
	}
}

// However many parameters, an AdamW step is one launch per group: 148
// tensors (GPT-2 124M's count) cost what 3 do.
func TestMultiTensorLaunchesIndependentOfCount(t *testing.T) {
	for _, n := range []int{3, 148} {
		shapes := make([][]int, n)
		for i := range shapes {
			shapes[i] = []int{1 + (i*37)%300}
		}
		mk := func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, WeightDecay: 0.1})
		}
		dev, c := countedDevice(t, 1)
		_, launches := multiRun(t, dev, c, shapes, 3, mk)
		// Step 1 has two step counts (parameter 1 skipped a gradient).
		require.Equal(t, []int{1, 1, 2}, launches, "%d tensors", n)
		each, ce := countedDevice(t, 2)
		off := func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, WeightDecay: 0.1, Foreach: optim.ForeachOff})
		}
		_, eachLaunches := multiRun(t, each, ce, shapes, 3, off)
		require.Equal(t, []int{n, n - 1, n}, eachLaunches, "%d tensors, per tensor", n)
	}
}

// clip_grad_norm_ on a device with the multi-tensor entries is four
// launches (two for the sum of squares, the coefficient, the scaling)
// whatever the number of gradients, deterministic (no atomics), and agrees
// with the host's float64 norm; without the entries it was two launches a
// gradient and one.
func TestMultiTensorClipGradNorm(t *testing.T) {
	rng := tensor.NewRNG(5)
	shapes := append(append([][]int(nil), multiShapes...), []int{0}, []int{65536})
	host := make([]*tensor.Tensor, len(shapes))
	for i, s := range shapes {
		host[i] = tensor.Randn(rng, tensor.Float32, s...)
	}
	clip := func(dev tensor.Device, host []*tensor.Tensor, maxNorm float64) (float64, []*tensor.Tensor) {
		gs := make([]*tensor.Tensor, len(host))
		for i, h := range host {
			gs[i] = h.Clone().MustTo(dev)
		}
		norm := tensor.ClipGradNorm(gs, maxNorm)
		for i, g := range gs {
			gs[i] = g.MustTo(tensor.CPU())
		}
		return norm, gs
	}
	fused, c := countedDevice(t, 1)
	for _, maxNorm := range []float64{1, 1e6} {
		wantNorm, want := clip(tensor.CPU(), host, maxNorm)
		c.take()
		norm, got := clip(fused, host, maxNorm)
		launches, _ := c.take()
		require.Equal(t, 4, launches, "max norm %v", maxNorm)
		require.InDelta(t, wantNorm, norm, 1e-5*wantNorm)
		for i := range want {
			close32(t, want[i].F32(), got[i].F32(), 1e-5, fmt.Sprintf("gradient %d %v, max norm %v", i, shapes[i], maxNorm))
		}
		again, _ := clip(fused, host, maxNorm)
		require.Equal(t, math.Float64bits(norm), math.Float64bits(again), "the same gradients, the same norm")
	}

	// The per-tensor kernels (a device without the entries), on small
	// gradients: sum_squares_f32 simulates slowly, and the count does not
	// depend on the sizes.
	each, ce := countedDevice(t, 2)
	k := each.Kernels()
	k.SumSquaresMulti, k.ScaleByMulti = nil, nil
	small := make([]*tensor.Tensor, len(host))
	for i := range small {
		small[i] = tensor.Randn(rng, tensor.Float32, 1+i)
	}
	ce.take()
	clip(each, small, 1)
	eachLaunches, _ := ce.take()
	t.Logf("clip_grad_norm_ of %d gradients: 4 launches multi-tensor, %d per tensor", len(small), eachLaunches)
	require.Equal(t, 2*len(small)+1, eachLaunches)
}
