//go:build cuda

package cuda

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// On cuda, tensors' memory comes from the caching allocator: a collected
// tensor's block is cached, not cuMemFree'd. When cuMemAlloc runs out of
// memory, the cache is freed and the allocation retried once; when that
// fails too, the error names the bytes requested, in use and reserved.
func TestTensorsOutOfMemoryFreesCacheAndRetries(t *testing.T) {
	c, f := newFake(t)
	f.limit = 1 << 20
	dev := c.Tensors()

	func() {
		x, err := tensor.ZerosOn(dev, tensor.Float32, 160<<10) // 640 KiB
		require.NoError(t, err)
		runtime.KeepAlive(x)
	}()
	deadline := time.Now().Add(10 * time.Second)
	var st tensor.MemoryStats
	for {
		runtime.GC()
		if st, _ = tensor.MemoryStatsOf(dev); st.Frees == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.EqualValues(t, 1, st.Frees, "the collected tensor's block went back to the cache")
	require.Zero(t, f.count("free"), "a collected tensor is cached, not freed")
	require.EqualValues(t, 640<<10, st.Reserved)

	// A size the cached block is too small to serve.
	y, err := tensor.ZerosOn(dev, tensor.Float32, 192<<10) // 768 KiB: 640 + 768 > 1 MiB
	require.NoError(t, err, "the cache is emptied and the allocation retried")
	require.Equal(t, 1, f.count("free"), "the cached block was freed for the retry")
	st, _ = tensor.MemoryStatsOf(dev)
	require.EqualValues(t, 768<<10, st.Allocated)
	require.EqualValues(t, 768<<10, st.Reserved)

	_, err = tensor.ZerosOn(dev, tensor.Float32, 100<<10) // 400 KiB more: no cache left to free
	require.Error(t, err)
	require.ErrorContains(t, err, "allocating 409600 bytes")
	require.ErrorContains(t, err, "786432 bytes in use and 786432 reserved")
	require.ErrorContains(t, err, "OUT_OF_MEMORY")
	runtime.KeepAlive(y)
}

// On the Context's queues, a tensor used on another stream
// (tensor.RecordStream with that stream's event) keeps its block out of
// the cache until cuEventQuery says the event completed.
func TestTensorsRecordStreamDefersReuse(t *testing.T) {
	c, g := newSimGPU(t, 0)
	defer c.Close()
	dev := c.Tensors()
	qd, err := c.Queues()
	require.NoError(t, err)
	side := qd.NewQueue("side")
	gate := make(chan struct{})
	stream(side.(*queue).s).Enqueue("held", func() error { <-gate; return nil })
	func() {
		x, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
		require.NoError(t, err)
		tensor.RecordStream(x, side.Record())
	}()
	st0, _ := tensor.MemoryStatsOf(dev)
	deadline := time.Now().Add(10 * time.Second)
	st := st0
	for st.Allocated >= st0.Allocated && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		st, _ = tensor.MemoryStatsOf(dev)
	}
	require.Less(t, st.Allocated, st0.Allocated, "the collected tensor was given back")
	y, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
	require.NoError(t, err)
	st2, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st.Misses+1, st2.Misses, "the side stream still uses the block: not reused")
	close(gate)
	require.NoError(t, side.Synchronize())
	z, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
	require.NoError(t, err)
	st3, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st2.Hits+1, st3.Hits, "after the event the block is reused")
	runtime.KeepAlive(y)
	runtime.KeepAlive(z)
	_ = g
}
