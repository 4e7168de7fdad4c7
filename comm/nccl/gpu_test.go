package nccl_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/nccl"
)

// TestGPUCollectives runs the host-buffer collectives on a one-rank NCCL
// communicator. It passed on an H100 (the GPU kit, docs/gpu.md); CI has no
// GPU.
func TestGPUCollectives(t *testing.T) {
	if _, err := nccl.Probe(); err != nil {
		if os.Getenv("GODDP_GPU_KIT") == "1" { // set by the GPU kit's run.sh
			t.Fatalf("the GPU kit found a GPU, but NCCL cannot run: %v", err)
		}
		t.Skipf("no NCCL/GPU here, so the GPU test cannot run: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg, err := nccl.New(ctx, nccl.Options{Size: 1, Store: fileStore(t), Timeout: 30 * time.Second})
	require.NoError(t, err)
	defer func() { assert.NoError(t, pg.Close()) }()

	x := []float32{1, 2, 3, 4}
	require.NoError(t, pg.AllReduce(comm.Float32s(x), comm.Sum).Wait(ctx))
	assert.Equal(t, []float32{1, 2, 3, 4}, x)
	require.NoError(t, pg.Broadcast(comm.Float32s(x), 0).Wait(ctx))
	out := make([]float32, 4)
	require.NoError(t, comm.AllGather(pg, comm.Float32s(out), comm.Float32s(x)).Wait(ctx))
	assert.Equal(t, x, out)
	rs := make([]float32, 4)
	require.NoError(t, comm.ReduceScatter(pg, comm.Float32s(rs), comm.Float32s(x), comm.Avg).Wait(ctx))
	assert.Equal(t, x, rs)
	require.NoError(t, pg.Barrier().Wait(ctx))
	_, ok := nccl.AsDevice(pg)
	assert.True(t, ok)
}
