//go:build cuda

package cuda_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/ddp"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/tensor"
)

// DDP over a one-rank NCCL communicator on GPU 0, its buckets on the GPU:
// the stream-ordered path (the all-reduce on NCCL's stream before
// AllReduceOn returns, the compute stream waiting for its end event, no
// host wait at finalize) gives the gradients of two steps that the
// host-waited path (OverlapComm(false): each bucket's Work waited for on
// the host) gives. Written on a machine without a GPU: it has not run on
// one yet (the GPU kit runs it; CI runs the same logic over a fake driver
// and a fake NCCL, stream_reduce_fake_cuda_test.go).
func TestGPUDDPStreamOrderedNCCL(t *testing.T) {
	c := newContext(t) // skips without a GPU
	if _, err := nccl.Probe(); err != nil {
		if os.Getenv("GODDP_GPU_KIT") == "1" {
			t.Fatalf("the GPU kit found a GPU, but NCCL cannot run: %v", err)
		}
		t.Skipf("no NCCL here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := comm.NewFileStore(filepath.Join(t.TempDir(), "store"))
	require.NoError(t, err)
	defer store.Close()
	pg, err := nccl.New(ctx, nccl.Options{Size: 1, Store: store, Device: 0, Timeout: time.Minute})
	require.NoError(t, err)
	defer func() { assert.NoError(t, pg.Close()) }()
	_, ok := nccl.AsStream(pg)
	require.True(t, ok, "the nccl group offers the stream-ordered all-reduce")

	train := func(streamOrdered bool) (grads [][]float32, reduction string) {
		net := nn.NewSequential(nn.NewLinear(tensor.NewRNG(1), 33, 65), nn.NewReLU(), nn.NewLinear(tensor.NewRNG(2), 65, 7))
		require.NoError(t, nn.To(net, c.Tensors()))
		d, err := ddp.Wrap(ctx, net, pg, ddp.FirstBucketCapMB(0.005), ddp.BucketCapMB(0.005), ddp.OverlapComm(streamOrdered))
		require.NoError(t, err)
		defer d.Close()
		for step := range 2 {
			rng := tensor.NewRNG(uint64(10 + step))
			x := tensor.Randn(rng, tensor.Float32, 16, 33).MustTo(c.Tensors())
			y := tensor.Randn(rng, tensor.Float32, 16, 7).MustTo(c.Tensors())
			for _, p := range d.Parameters() {
				p.Grad = nil
			}
			out, err := d.Forward(autograd.Const(x))
			require.NoError(t, err)
			require.NoError(t, autograd.MSELoss(out, autograd.Const(y), autograd.ReductionMean).Backward())
			for _, p := range d.Parameters() {
				g, err := p.Grad.To(tensor.CPU())
				require.NoError(t, err)
				grads = append(grads, append([]float32(nil), g.F32()...))
			}
		}
		require.Greater(t, len(d.Stats().BucketBytes), 1, "several buckets")
		return grads, d.Stats().Reduction
	}
	want, how := train(false)
	require.Equal(t, "device", how)
	got, how := train(true)
	require.Equal(t, "device, stream-ordered", how)
	require.Len(t, got, len(want))
	for i := range want {
		assert.InDeltaSlice(t, want[i], got[i], 1e-6, "gradient %d", i)
	}
}
