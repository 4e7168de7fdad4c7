//go:build cuda

package cuda_test

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/tensor"
)

// These tests need a GPU. They ran and passed on an H100 (the GPU kit,
// docs/gpu.md); CI has no GPU, so there they are compiled, vetted, and skip
// saying why. A
// missing driver or device skips; anything else, a missing cuBLAS
// included, fails.

func newContext(t *testing.T) *cuda.Context {
	t.Helper()
	c, err := cuda.NewContext(0)
	if (errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice)) && os.Getenv("GODDP_GPU_KIT") != "1" {
		t.Skipf("no GPU: %v", err) // the GPU kit's run.sh sets GODDP_GPU_KIT=1: there, no GPU fails
	}
	require.NoError(t, err)
	t.Logf("%+v", c.Info())
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// onGPU copies h to c's device (cuda:N), torch's h.to("cuda:N").
func onGPU(t *testing.T, c *cuda.Context, h *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	d, err := h.To(c.Tensors())
	require.NoError(t, err)
	return d
}

// host copies d back, torch's d.cpu(), and returns its elements.
func host(t *testing.T, d *tensor.Tensor) []float32 {
	t.Helper()
	h, err := d.To(tensor.CPU())
	require.NoError(t, err)
	return h.F32()
}

func TestRoundTripAndZeros(t *testing.T) {
	c := newContext(t)
	dev := c.Tensors()
	h := tensor.Randn(tensor.NewRNG(1), tensor.Float32, 3, 5)
	d := onGPU(t, c, h)
	assert.Equal(t, []int{3, 5}, d.Shape())
	assert.Equal(t, dev, d.Device())
	assert.Equal(t, "cuda:0", d.Device().String())
	assert.Equal(t, h.F32(), host(t, d))
	z, err := tensor.ZerosOn(dev, tensor.Float32, 4)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0, 0, 0}, host(t, z))
}

// MatMul of cuda:0 tensors, transposed views included (cuBLAS's
// transposes), matches the CPU's.
func TestMatMul(t *testing.T) {
	c := newContext(t)
	rng := tensor.NewRNG(2)
	for _, tc := range []struct {
		name           string
		transA, transB bool
	}{{"NN", false, false}, {"NT", false, true}, {"TN", true, false}, {"TT", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			m, k, n := 5, 7, 3
			ha, hb := tensor.Randn(rng, tensor.Float32, m, k), tensor.Randn(rng, tensor.Float32, k, n)
			da, db := onGPU(t, c, ha), onGPU(t, c, hb)
			if tc.transA {
				da = tensor.Transpose(onGPU(t, c, tensor.Transpose(ha, 0, 1).Contiguous()), 0, 1)
			}
			if tc.transB {
				db = tensor.Transpose(onGPU(t, c, tensor.Transpose(hb, 0, 1).Contiguous()), 0, 1)
			}
			assert.InDeltaSlice(t, tensor.MatMul(ha, hb).F32(), host(t, tensor.MatMul(da, db)), 1e-4)
		})
	}
}

// ReLU and its backward, a broadcast bias add, a column sum and an SGD
// update (Axpy) on cuda:0 tensors match the CPU's.
func TestElementwiseKernels(t *testing.T) {
	c := newContext(t)
	rng := tensor.NewRNG(3)
	x := tensor.Randn(rng, tensor.Float32, 4, 6)
	b := tensor.Randn(rng, tensor.Float32, 6)
	dx := onGPU(t, c, x)

	assert.InDeltaSlice(t, tensor.ReLU(x).F32(), host(t, tensor.ReLU(dx)), 0)

	dy := onGPU(t, c, tensor.Ones(tensor.Float32, 4, 6))
	g := tensor.EmptyAs(dx, 4, 6)
	tensor.ReLUBackward(g, dy, tensor.ReLU(dx))
	gh := host(t, g)
	for i, v := range x.F32() {
		want := float32(0)
		if v > 0 {
			want = 1
		}
		assert.Equal(t, want, gh[i])
	}

	assert.InDeltaSlice(t, tensor.Add(x, b).F32(), host(t, tensor.Add(dx, onGPU(t, c, b))), 1e-6)
	assert.InDeltaSlice(t, tensor.Sum(x, []int{0}, false).F32(), host(t, tensor.Sum(dx, []int{0}, false)), 1e-5)

	w := onGPU(t, c, x)
	tensor.Axpy(w, -0.5, dx)
	assert.InDeltaSlice(t, tensor.MulScalar(x, 0.5).F32(), host(t, w), 1e-6)
}

// The losses on cuda:0 match the CPU's (values and gradients).
func TestLosses(t *testing.T) {
	c := newContext(t)
	rng := tensor.NewRNG(4)
	pred, target := tensor.Randn(rng, tensor.Float32, 8, 3), tensor.Randn(rng, tensor.Float32, 8, 3)
	labels := []int{0, 2, 1, 1, 0, 2, 2, 1}
	run := func(dev tensor.Device) (mse, ce float64, gm, gc []float32) {
		p := autograd.Param(pred.Clone().MustTo(dev))
		l := autograd.MSELoss(p, autograd.Const(target.MustTo(dev)), autograd.ReductionMean)
		require.NoError(t, l.Backward())
		q := autograd.Param(pred.Clone().MustTo(dev))
		e := autograd.CrossEntropy(q, labels, autograd.ReductionMean)
		require.NoError(t, e.Backward())
		return l.Value.Item(), e.Value.Item(), host(t, p.Grad), host(t, q.Grad)
	}
	wm, wc, wgm, wgc := run(tensor.CPU())
	m, ce, gm, gc := run(c.Tensors())
	assert.InDelta(t, wm, m, 1e-5)
	assert.InDelta(t, wc, ce, 1e-5)
	assert.InDeltaSlice(t, wgm, gm, 1e-5)
	assert.InDeltaSlice(t, wgc, gc, 1e-5)
}

// Three SGD steps of a 2-layer MLP with cross-entropy on cuda:0 follow the
// same steps on the CPU.
func TestMLPTrainingMatchesCPU(t *testing.T) {
	c := newContext(t)
	rng := tensor.NewRNG(5)
	const n, in, hid, out, lr = 16, 4, 8, 3, 0.5
	x := tensor.Randn(rng, tensor.Float32, n, in)
	labels := make([]int, n)
	for i := range labels {
		labels[i] = i % out
	}
	init := []*tensor.Tensor{tensor.Randn(rng, tensor.Float32, hid, in), tensor.Randn(rng, tensor.Float32, hid),
		tensor.Randn(rng, tensor.Float32, out, hid), tensor.Randn(rng, tensor.Float32, out)}
	train := func(dev tensor.Device) ([]float64, [][]float32) {
		ps := make([]*autograd.Variable, len(init))
		for i, w := range init {
			ps[i] = autograd.Param(w.Clone().MustTo(dev))
		}
		xd := x.MustTo(dev)
		var losses []float64
		for range 3 {
			for _, p := range ps {
				p.Grad = nil
			}
			h := autograd.ReLU(autograd.Linear(autograd.Const(xd), ps[0], ps[1]))
			loss := autograd.CrossEntropy(autograd.Linear(h, ps[2], ps[3]), labels, autograd.ReductionMean)
			require.NoError(t, loss.Backward())
			losses = append(losses, loss.Value.Item())
			for _, p := range ps {
				tensor.Axpy(p.Value, -lr, p.Grad)
			}
		}
		var w [][]float32
		for _, p := range ps {
			w = append(w, host(t, p.Value))
		}
		return losses, w
	}
	cpuLoss, cpuW := train(tensor.CPU())
	gpuLoss, gpuW := train(c.Tensors())
	assert.InDeltaSlice(t, cpuLoss, gpuLoss, 1e-4)
	for i := range cpuW {
		for j, v := range cpuW[i] {
			assert.False(t, math.Abs(float64(v-gpuW[i][j])) > 1e-4, "param %d element %d: %v vs %v", i, j, gpuW[i][j], v)
		}
	}
}

// Asking for a GPU where there is none fails with an error that names what
// is missing; nothing exits (gorgonia.org/cu's init used to end the
// process with status 1 before any test ran).
func TestNoGPUErrorNamesWhatIsMissing(t *testing.T) {
	c, err := cuda.NewContext(0)
	if err == nil {
		c.Close()
		t.Skip("this machine has a GPU")
	}
	if os.Getenv("GODDP_GPU_KIT") == "1" {
		t.Fatalf("the GPU kit found a GPU, but NewContext(0) fails: %v", err)
	}
	t.Logf("NewContext: %v", err)
	switch {
	case errors.Is(err, cuda.ErrNoDriver):
		assert.Contains(t, err.Error(), "libcuda.so.1")
	case errors.Is(err, cuda.ErrNoDevice):
		assert.True(t, strings.Contains(err.Error(), "cuInit") || strings.Contains(err.Error(), "visible"), err.Error())
	case errors.Is(err, cuda.ErrNoCUBLAS):
		assert.Contains(t, err.Error(), "GODDP_CUBLAS_LIBRARY")
	default:
		t.Fatalf("error %q wraps none of ErrNoDriver, ErrNoDevice, ErrNoCUBLAS", err)
	}
	_, perr := cuda.Probe()
	assert.Error(t, perr)
	_, err = cuda.NewContext(-1)
	assert.Error(t, err)
}
