//go:build cuda

package cuda_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/commtest"
	"github.com/goddp/goddp/cuda"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// GPU tests of Context.Queues, ddp's device over CUDA streams and events.
// They passed on an H100 (the GPU kit, docs/gpu.md); in CI, without a GPU,
// the same logic runs on a fake driver built from cuda/sim
// (queues_fake_cuda_test.go).

func f32bytes(x []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x)) }

// Copies, the scale kernel, events between two streams and host functions
// on a real GPU, and a failing host function's error.
func TestGPUQueues(t *testing.T) {
	c := newContext(t)
	qd, err := c.Queues()
	require.NoError(t, err)
	n := 1<<20 + 3
	m, err := qd.Alloc(4 * n)
	require.NoError(t, err)
	defer m.Free()
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i%1000) - 500
	}
	comp, other := qd.Compute(), qd.NewQueue("comm")
	comp.Upload(m, 0, f32bytes(src))
	other.Wait(comp.Record())
	other.Scale(m, 1, n-1, 0.5)
	ran := false
	other.Host("mark", func() error { ran = true; return nil })
	comp.Wait(other.Record())
	out := make([]float32, n)
	comp.Download(f32bytes(out), m, 0)
	require.NoError(t, comp.Synchronize())
	require.True(t, ran)
	assert.Equal(t, src[0], out[0])
	for i := 1; i < n; i++ {
		if out[i] != src[i]*0.5 {
			t.Fatalf("element %d: %v, want %v", i, out[i], src[i]*0.5)
		}
	}
	other.Host("fail", func() error { return fmt.Errorf("boom") })
	assert.ErrorContains(t, other.Synchronize(), "fail: boom")
}

// DDP with its buckets on the GPU through the Context's queues: two ranks
// on GPU 0 (an in-memory group, so the buckets are staged through pinned
// memory), the gradients of two steps equal to DDP on the CPU within
// cuBLAS's rounding.
func TestGPUDDPOnQueues(t *testing.T) {
	newContext(t) // skips without a GPU
	train := func(device bool) [][]float32 {
		pgs := commtest.NewGroups(2)
		res := make([][]float32, 0)
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = func(pg comm.ProcessGroup) error {
					net := nn.NewSequential(nn.NewLinear(tensor.NewRNG(1), 33, 65), nn.NewReLU(), nn.NewLinear(tensor.NewRNG(2), 65, 7))
					var dev tensor.Device = tensor.CPU()
					if device {
						c, err := cuda.NewContext(0)
						if err != nil {
							return err
						}
						defer c.Close()
						dev = c.Tensors()
						if err := nn.To(net, dev); err != nil {
							return err
						}
					}
					d, err := ddp.Wrap(context.Background(), net, pg, ddp.FirstBucketCapMB(0.005), ddp.BucketCapMB(0.005))
					if err != nil {
						return err
					}
					defer d.Close()
					for step := range 2 {
						rng := tensor.NewRNG(uint64(10*r + step))
						x := tensor.Randn(rng, tensor.Float32, 16, 33).MustTo(dev)
						y := tensor.Randn(rng, tensor.Float32, 16, 7).MustTo(dev)
						for _, p := range d.Parameters() {
							p.Grad = nil
						}
						out, err := d.Forward(autograd.Const(x))
						if err != nil {
							return err
						}
						if err := autograd.MSELoss(out, autograd.Const(y), autograd.ReductionMean).Backward(); err != nil {
							return err
						}
						if r == 0 {
							for _, p := range d.Parameters() {
								g, err := p.Grad.To(tensor.CPU())
								if err != nil {
									return err
								}
								mu.Lock()
								res = append(res, append([]float32(nil), g.F32()...))
								mu.Unlock()
							}
						}
					}
					return nil
				}(pgs[r])
			}()
		}
		wg.Wait()
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		return res
	}
	want, got := train(false), train(true)
	require.Len(t, got, len(want))
	for i := range want {
		assert.InDeltaSlice(t, want[i], got[i], 1e-4, "gradient %d", i)
	}
}
