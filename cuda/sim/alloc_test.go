package sim_test

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
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

// A Recycler gives a device tensor's block back at once (no collection):
// the next tensor of its class reuses it, the header it detached and every
// view sharing it are refused as operands, and a kept tensor's storage,
// shared by a freed view, stays. The autograd engine and FreeGraph recycle
// a step's intermediates this way.
func TestRecyclerReleasesDeviceStorage(t *testing.T) {
	d := newDevice(t)
	dev := d.Tensors()
	x, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
	require.NoError(t, err)
	view := x.Reshape(100, 30)
	s, _ := x.Storage()
	alias := tensor.FromStorage(s, 3000) // a header the Recycler does not know
	kept, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
	require.NoError(t, err)
	tensor.Fill(kept, 2)
	keptView := kept.Reshape(30, 100)
	st0, _ := tensor.MemoryStatsOf(dev)

	var rec tensor.Recycler
	rec.Free(x)
	rec.Free(keptView)
	rec.Keep(kept)
	require.EqualValues(t, 12288, rec.Flush(), "x's block (the 12288-byte class) and only it")
	st, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st0.Allocated-12288, st.Allocated)
	require.Equal(t, st0.Reserved, st.Reserved, "the block is cached, not freed")

	y, err := tensor.ZerosOn(dev, tensor.Float32, 3000)
	require.NoError(t, err)
	st2, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st.Hits+1, st2.Hits, "the next tensor of the class reuses the block")
	require.Equal(t, st.Misses, st2.Misses)
	for _, dead := range []*tensor.Tensor{x, view} {
		require.PanicsWithValue(t, "devtensor: fill: devtensor: storage of sim:0 used on sim:0 (a tensor whose storage was released: the autograd graph that made it was freed)",
			func() { tensor.Fill(dead, 1) })
	}
	require.PanicsWithValue(t, "devtensor: fill: devtensor: storage on sim:0 used after it was released (a tensor whose storage was released: the autograd graph that made it was freed)",
		func() { tensor.Fill(alias, 1) })
	_, err = x.To(tensor.CPU())
	require.ErrorContains(t, err, "storage was released")
	_, err = alias.To(tensor.CPU())
	require.ErrorContains(t, err, "used after it was released")
	host, err := kept.To(tensor.CPU())
	require.NoError(t, err)
	require.Equal(t, float32(2), host.F32()[2999], "the kept tensor's storage was not released")

	// ReleaseScratch, for an op's own temporaries, does the same at once.
	tensor.ReleaseScratch(y)
	st3, _ := tensor.MemoryStatsOf(dev)
	require.Equal(t, st2.Allocated-12288, st3.Allocated)
	require.Panics(t, func() { tensor.Fill(y, 1) })
	require.NoError(t, dev.Synchronize())
}

// Under a memory limit the device reserves no more than it allows: blocks
// of collected tensors serve new requests, and live tensors past the limit
// fail with an error naming it.
func TestDeviceMemoryLimit(t *testing.T) {
	d := newDevice(t)
	dev := d.Tensors()
	const mib = 1 << 20
	require.NoError(t, tensor.SetMemoryLimit(dev, 16*mib))
	for range 20 { // 80 MiB in all, 4 MiB at a time, each dropped at once
		x, err := tensor.ZerosOn(dev, tensor.Float32, mib)
		require.NoError(t, err)
		runtime.KeepAlive(x)
	}
	st, _ := tensor.MemoryStatsOf(dev)
	require.LessOrEqual(t, st.PeakReserved, int64(16*mib))
	var live []*tensor.Tensor
	for {
		x, err := tensor.ZerosOn(dev, tensor.Float32, mib)
		if err != nil {
			require.ErrorContains(t, err, "would pass the limit of 16777216")
			break
		}
		live = append(live, x)
	}
	require.Len(t, live, 4, "four live tensors of 4 MiB fill 16 MiB")
	require.NoError(t, tensor.SetMemoryLimit(dev, 0))
	x, err := tensor.ZerosOn(dev, tensor.Float32, mib)
	require.NoError(t, err, "without the limit the device serves the request")
	runtime.KeepAlive(x)
	runtime.KeepAlive(live)

	require.ErrorContains(t, tensor.SetMemoryLimit(tensor.CPU(), mib), "GOMEMLIMIT")
	require.NoError(t, dev.Synchronize())
}

// Training steps on a device reuse the blocks of the steps before them
// without the garbage collector: with it switched off, a step's graph
// (FreeGraph) and the ops' temporaries (the convolution's im2col columns,
// the bf16 products' rounded copies) give their blocks back, so after the
// first steps the device reserves nothing more and every request is a
// hit. Before device storage was released, each step took new blocks
// until a collection ran.
func TestTrainingStepsReuseDeviceMemory(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		t.Run(map[bool]string{false: "float32", true: "bf16 autocast"}[bf16], func(t *testing.T) {
			d := newDevice(t)
			dev := d.Tensors()
			rng := tensor.NewRNG(3)
			m := nn.NewSequential(
				nn.NewConv2d(rng, 2, 4, 3, nn.Padding(1)), nn.NewReLU(), nn.NewMaxPool2d(2),
				nn.NewFlatten(), nn.NewLinear(rng, 4*4*4, 32), nn.NewGELU(), nn.NewLayerNorm(32), nn.NewLinear(rng, 32, 5))
			require.NoError(t, nn.To(m, dev))
			if bf16 {
				amp.Autocast(m, amp.BFloat16)
			}
			opt, err := optim.NewAdam(nn.Parameters(m), optim.DefaultAdam())
			require.NoError(t, err)
			x := tensor.Randn(rng, tensor.Float32, 8, 2, 8, 8).MustTo(dev)
			labels := []int{0, 1, 2, 3, 4, 0, 1, 2}
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			runtime.GC() // nothing from before the test is left to collect
			var warm tensor.MemoryStats
			for step := range 12 {
				opt.ZeroGrad()
				loss := autograd.CrossEntropy(m.Forward(autograd.Const(x)), labels, autograd.ReductionMean)
				require.NoError(t, loss.Backward())
				require.NoError(t, opt.Step())
				require.False(t, math.IsNaN(loss.Value.Item()))
				loss.FreeGraph()
				// The loss is the caller's, as in torch, where dropping
				// the last reference frees it; so is its block here.
				tensor.ReleaseScratch(loss.Value)
				if step == 3 {
					warm, _ = tensor.MemoryStatsOf(dev)
				}
			}
			st, _ := tensor.MemoryStatsOf(dev)
			require.Equal(t, warm.Reserved, st.Reserved, "the device reserved more after the first steps: %v, then %v", warm, st)
			require.Equal(t, warm.Misses, st.Misses, "steps 5 to 12 took blocks from the driver: %v, then %v", warm, st)
			require.Greater(t, st.Hits, warm.Hits)
			require.NoError(t, dev.Synchronize())
		})
	}
}

// A result allocated without zeroing (tensor.MustEmptyOn: sim's device is
// a tensor.EmptyAllocator) starts as NaN on sim, fresh or from the cache,
// while MustZerosOn's starts at zero even in a block whose last owner
// wrote it.
func TestEmptyResultsArePoisoned(t *testing.T) {
	d := newDevice(t)
	dev := d.Tensors()
	_, ok := dev.(tensor.EmptyAllocator)
	require.True(t, ok)
	for range 2 { // the first block is fresh, the second comes from the cache
		e := tensor.MustEmptyOn(dev, 300)
		for _, v := range e.MustTo(tensor.CPU()).F32() {
			require.True(t, math.IsNaN(float64(v)))
		}
		tensor.Fill(e, 5)
		tensor.ReleaseScratch(e)
		z := tensor.MustZerosOn(dev, 300)
		for _, v := range z.MustTo(tensor.CPU()).F32() {
			require.Zero(t, v)
		}
		tensor.Fill(z, 6)
		tensor.ReleaseScratch(z)
	}
	st, _ := tensor.MemoryStatsOf(dev)
	require.Positive(t, st.Hits, "a block came back from the cache")
	require.Equal(t, []float32{0, 0, 0}, tensor.MustEmptyOn(tensor.CPU(), 3).F32(), "on the host it is zeroed")
}
