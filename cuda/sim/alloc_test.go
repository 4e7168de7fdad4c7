package sim_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// The simulated device's memory comes from the caching allocator: a tensor
// the collector takes gives its block back, the next tensor of that size
// class reuses it (a hit) and reads zeros, the stats are readable through
// tensor.MemoryStatsOf, and EmptyCache frees the cached blocks.
func TestDeviceCachingAllocator(t *testing.T) {
	d := newDevice(t)
	dev := d.Tensors()
	st0, ok := tensor.MemoryStatsOf(dev)
	require.True(t, ok, "sim's tensor device reports memory stats")

	x, err := tensor.ZerosOn(dev, tensor.Float32, 1000)
	require.NoError(t, err)
	tensor.Fill(x, 7)
	require.Equal(t, 7.0, tensor.Narrow(x, 0, 999, 1).Item())
	st, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st0.Misses+1, st.Misses)
	require.EqualValues(t, 4096, st.Allocated-st0.Allocated, "4000 bytes round up to the 4096-byte class")

	x = nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if st, _ = tensor.MemoryStatsOf(dev); st.Frees > st0.Frees || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Greater(t, st.Frees, st0.Frees, "the collected tensor's block went back to the cache")
	require.Equal(t, st0.Allocated, st.Allocated)
	require.EqualValues(t, 4096, st.Reserved-st0.Reserved, "the block stays reserved, cached")

	y, err := tensor.ZerosOn(dev, tensor.Float32, 1000)
	require.NoError(t, err)
	st2, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st.Hits+1, st2.Hits, "the same class reuses the cached block")
	require.Equal(t, st.Misses, st2.Misses)
	host, err := y.To(tensor.CPU())
	require.NoError(t, err)
	for i, v := range host.F32() {
		require.Zero(t, v, "element %d of a reused block was not zeroed", i)
	}
	runtime.KeepAlive(y)

	y = nil
	for {
		runtime.GC()
		if st, _ = tensor.MemoryStatsOf(dev); st.Allocated == st0.Allocated || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	tensor.EmptyCache(dev)
	st, _ = tensor.MemoryStatsOf(dev)
	require.Equal(t, st0.Reserved, st.Reserved, "EmptyCache frees the cached blocks")
	require.NoError(t, dev.Synchronize())
}

// The host device reports its allocator through the same interface.
func TestCPUMemoryStats(t *testing.T) {
	_, ok := tensor.MemoryStatsOf(tensor.CPU())
	require.True(t, ok)
	tensor.EmptyCache(tensor.CPU())
}

// A block used on another stream (tensor.RecordStream with an event
// recorded there) is not reused when its tensor is collected until that
// event completes; then the same class reuses it.
func TestDeviceCachingAllocatorRecordStream(t *testing.T) {
	d := newDevice(t)
	dev := d.Tensors()
	side := d.NewStream("side")
	gate := make(chan struct{})
	side.Enqueue("held", func() error { <-gate; return nil }) // the side stream is busy until gate
	func() {
		x, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
		require.NoError(t, err)
		ev := d.NewEvent()
		ev.Record(side)
		tensor.RecordStream(x, ev)
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
	require.Equal(t, st.Misses+1, st2.Misses, "the block is still in use on the side stream: not reused")
	runtime.KeepAlive(y)

	close(gate)
	require.NoError(t, side.Synchronize())
	z, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
	require.NoError(t, err)
	st3, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st2.Hits+1, st3.Hits, "once the side stream's event completed, the block is reused")
	require.Equal(t, st2.Misses, st3.Misses)
	runtime.KeepAlive(z)
}
