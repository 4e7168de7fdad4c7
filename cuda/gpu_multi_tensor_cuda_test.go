//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// multiGPUShapes are parameters of odd sizes (1, 7, 4097 and 70000
// elements) in nanoGPT's two groups, the 2-D ones decayed.
var multiGPUShapes = [][]int{{1}, {7}, {17, 241}, {4097}, {280, 250}, {3, 1}}

// multiGPURun trains parameters of the shapes on dev from fixed values and
// gradients, parameter 1 without a gradient at step 1, clipping the
// gradients first when clip > 0, and returns the parameters on the host
// and the norms.
func multiGPURun(t *testing.T, dev tensor.Device, shapes [][]int, steps int, clip float64,
	mk func([]*autograd.Variable) (optim.Optimizer, error)) ([][]float32, []float64) {
	rng := tensor.NewRNG(11)
	ps := make([]*autograd.Variable, len(shapes))
	grads := make([]*tensor.Tensor, len(shapes))
	for i, s := range shapes {
		ps[i] = autograd.Param(tensor.Randn(rng, tensor.Float32, s...).MustTo(dev))
		grads[i] = tensor.ZerosAs(ps[i].Value, s...)
	}
	opt, err := mk(ps)
	require.NoError(t, err)
	var norms []float64
	for step := range steps {
		for i, s := range shapes {
			require.NoError(t, tensor.Copy(grads[i], tensor.Randn(rng, tensor.Float32, s...)))
			ps[i].Grad = grads[i]
		}
		if step == 1 {
			ps[1].Grad = nil
		}
		if clip > 0 {
			norms = append(norms, optim.ClipGradNorm(ps, clip))
		}
		require.NoError(t, opt.Step())
	}
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = host(t, p.Value)
	}
	return out, norms
}

// On a GPU the multi-tensor updates (multi_tensor_adam_f32, ...) leave the
// parameters bit for bit where the per-tensor kernels leave them (the same
// NVRTC contraction of the same expressions), a step is one launch per
// group, and clip_grad_norm_ over every gradient is four launches that
// agree with the host's float64 norm.
func TestMultiTensorOptimizersMatchPerTensor(t *testing.T) {
	c := newContext(t)
	dev := c.Tensors()
	const steps = 4
	for _, tc := range []struct {
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
		{"sgd plain", func(f optim.Foreach) func([]*autograd.Variable) (optim.Optimizer, error) {
			return func(ps []*autograd.Variable) (optim.Optimizer, error) {
				return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, WeightDecay: 0.01, Foreach: f})
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := c.StartOpTimes()
			got, _ := multiGPURun(t, dev, multiGPUShapes, steps, 0, tc.mk(optim.ForeachOn))
			launches := 0
			for _, o := range stop() {
				if len(o.Name) > 13 && o.Name[:13] == "multi_tensor_" {
					launches += int(o.Calls)
				}
			}
			want, _ := multiGPURun(t, dev, multiGPUShapes, steps, 0, tc.mk(optim.ForeachOff))
			cpu, _ := multiGPURun(t, tensor.CPU(), multiGPUShapes, steps, 0, tc.mk(optim.ForeachOff))
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("parameter %d %v element %d: multi-tensor %v, per-tensor %v", i, multiGPUShapes[i], j, got[i][j], want[i][j])
					}
					if w, g := float64(cpu[i][j]), float64(got[i][j]); math.Abs(w-g) > 1e-5*(1+math.Abs(w)) {
						t.Fatalf("parameter %d element %d: GPU %v, host %v", i, j, g, w)
					}
				}
			}
			t.Logf("%d multi-tensor launches in %d steps", launches, steps)
			require.LessOrEqual(t, launches, 3*steps)
		})
	}
	t.Run("clip", func(t *testing.T) {
		mk := func(ps []*autograd.Variable) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
		}
		stop := c.StartOpTimes()
		_, norms := multiGPURun(t, dev, multiGPUShapes, 2, 1, mk)
		var calls []string
		for _, o := range stop() {
			calls = append(calls, fmt.Sprintf("%s×%d", o.Name, o.Calls))
		}
		t.Logf("calls: %v", calls)
		_, want := multiGPURun(t, tensor.CPU(), multiGPUShapes, 2, 1, mk)
		for i := range want {
			require.InDelta(t, want[i], norms[i], 1e-5*want[i], "step %d", i)
		}
		_, again := multiGPURun(t, dev, multiGPUShapes, 2, 1, mk)
		require.Equal(t, norms, again, "deterministic: no atomics in the sum of squares")
	})
}

// gpt2Shapes are GPT-2 124M's 148 parameters (nanoGPT's order).
func gpt2Shapes() [][]int {
	const d, layers = 768, 12
	s := [][]int{{50257, d}, {1024, d}}
	for range layers {
		s = append(s, []int{d}, []int{d}, []int{3 * d, d}, []int{3 * d}, []int{d, d}, []int{d},
			[]int{d}, []int{d}, []int{4 * d, d}, []int{4 * d}, []int{d, 4 * d}, []int{d})
	}
	return append(s, []int{d}, []int{d})
}

// BenchmarkAdamWStepGPT2 is nanoGPT's AdamW step (weight decay on the 2-D
// parameters) and clip_grad_norm_ over GPT-2 124M's 148 parameters:
// multi-tensor (2 + 4 launches) against per-tensor (148 + 297).
func BenchmarkAdamWStepGPT2(b *testing.B) {
	c, err := cuda.NewContext(0)
	if err != nil {
		b.Skipf("no GPU: %v", err)
	}
	defer c.Close()
	dev := c.Tensors()
	shapes := gpt2Shapes()
	for _, f := range []optim.Foreach{optim.ForeachOn, optim.ForeachOff} {
		b.Run("foreach="+f.String(), func(b *testing.B) {
			ps := make([]*autograd.Variable, len(shapes))
			for i, s := range shapes {
				z, err := tensor.ZerosOn(dev, tensor.Float32, s...)
				require.NoError(b, err)
				ps[i] = autograd.Param(z)
				ps[i].Grad = tensor.ZerosAs(z, s...)
			}
			opt, err := optim.NewAdamWGroups(optim.DecayGroups(ps, 6e-4, 0.1), optim.AdamConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Foreach: f})
			require.NoError(b, err)
			if f == optim.ForeachOff {
				// clip_grad_norm_'s per-tensor kernels too.
				k := dev.Kernels()
				sq, sc := k.SumSquaresMulti, k.ScaleByMulti
				k.SumSquaresMulti, k.ScaleByMulti = nil, nil
				defer func() { k.SumSquaresMulti, k.ScaleByMulti = sq, sc }()
			}
			step := func() {
				optim.ClipGradNorm(ps, 1)
				require.NoError(b, opt.Step())
			}
			step()
			require.NoError(b, dev.Synchronize())
			b.ResetTimer()
			t0 := time.Now()
			for range b.N {
				step()
			}
			require.NoError(b, dev.Synchronize())
			b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(b.N), "µs/step")
		})
	}
}
