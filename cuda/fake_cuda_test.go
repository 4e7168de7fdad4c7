//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// fakeDevice stands for a GPU: it hands out fake addresses, records every
// call, and fails the calls a test asks it to. It checks what a real
// device would reject: freeing unknown or freed memory, calls after close.
type fakeDevice struct {
	mu       sync.Mutex
	next     uint64
	live     map[uint64]int64
	calls    []string
	launches []fakeLaunch
	gemms    int
	gemmFail int   // fail the next gemmFail sgemm calls
	limit    int64 // when > 0, alloc fails past limit bytes live, as cuMemAlloc out of memory
	closed   bool
	t        *testing.T
}

type fakeLaunch struct {
	kernel      string
	grid, block uint32
	args        []uint64
}

func newFake(t *testing.T) (*Context, *fakeDevice) {
	f := &fakeDevice{next: 1 << 40, live: map[uint64]int64{}, t: t}
	return &Context{ordinal: 0, dev: f}, f
}

func (f *fakeDevice) note(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		f.t.Errorf("fake device: %s after close", fmt.Sprintf(format, args...))
	}
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeDevice) alloc(bytes int64) (uint64, error) {
	f.note("alloc %d", bytes)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limit > 0 {
		var live int64
		for _, n := range f.live {
			live += n
		}
		if live+bytes > f.limit {
			return 0, fmt.Errorf("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (%d bytes live of %d)", live, f.limit)
		}
	}
	p := f.next
	f.next += uint64(bytes+255) &^ 255
	f.live[p] = bytes
	return p, nil
}

func (f *fakeDevice) free(p uint64) error {
	f.note("free %#x", p)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[p]; !ok {
		f.t.Errorf("fake device: free of %#x, which is not allocated", p)
	}
	delete(f.live, p)
	return nil
}

func (f *fakeDevice) zero(p uint64, bytes int64) error { f.note("zero %#x %d", p, bytes); return nil }
func (f *fakeDevice) htod(dst uint64, src unsafe.Pointer, bytes int64) error {
	f.note("htod %d", bytes)
	return nil
}
func (f *fakeDevice) dtoh(dst unsafe.Pointer, src uint64, bytes int64) error {
	f.note("dtoh %d", bytes)
	return nil
}
func (f *fakeDevice) sync() error { f.note("sync"); return nil }
func (f *fakeDevice) launch(kernel string, grid, block uint32, args []uint64) error {
	f.note("launch %s", kernel)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.launches = append(f.launches, fakeLaunch{kernel, grid, block, append([]uint64(nil), args...)})
	return nil
}

func (f *fakeDevice) sgemm(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, b uint64, ldb int, beta float32, c uint64, ldc int) error {
	f.note("sgemm %d %d %d", m, n, k)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gemms++
	if f.gemmFail > 0 {
		f.gemmFail--
		return fmt.Errorf("%w: cublasSgemm: CUBLAS_STATUS_EXECUTION_FAILED (code 13)", ErrCUBLAS)
	}
	return nil
}

func (f *fakeDevice) sgemv(t bool, m, n int, alpha float32, a uint64, lda int, x uint64, beta float32, y uint64) error {
	f.note("sgemv %d %d", m, n)
	return nil
}
func (f *fakeDevice) sasum(n int, x uint64) (float32, error) { f.note("sasum %d", n); return 1, nil }
func (f *fakeDevice) sscal(n int, alpha float32, x uint64) error {
	f.note("sscal %d", n)
	return nil
}
func (f *fakeDevice) setMathMode(tf32 bool) error {
	f.note("cublasSetMathMode tf32=%v", tf32)
	return nil
}
func (f *fakeDevice) stream() uintptr { return 0x5eed }
func (f *fakeDevice) info() Info      { return Info{Name: "fake"} }
func (f *fakeDevice) close() error {
	f.note("close")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeDevice) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if len(c) >= len(prefix) && c[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// Free after Close, and Free concurrent with Close, return ErrClosed or
// nil; they used to send on a closed channel and panic.
func TestFreeAfterClose(t *testing.T) {
	c, f := newFake(t)
	x, err := c.Alloc(tensor.Float32, 4)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.NotPanics(t, func() { assert.ErrorIs(t, x.Free(), ErrClosed) })
	assert.NoError(t, c.Close(), "Close is idempotent")
	assert.Equal(t, 1, f.count("close"))
	_, err = c.Alloc(tensor.Float32, 2)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, c.Synchronize(), ErrClosed)
}

func TestFreeConcurrentWithClose(t *testing.T) {
	for range 20 {
		c, f := newFake(t)
		var ts []*Tensor
		for range 16 {
			x, err := c.Alloc(tensor.Float32, 8)
			require.NoError(t, err)
			ts = append(ts, x)
		}
		var wg sync.WaitGroup
		for _, x := range ts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NotPanics(t, func() {
					if err := x.Free(); err != nil {
						assert.ErrorIs(t, err, ErrClosed)
					}
				})
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, c.Close()) }()
		wg.Wait()
		assert.Equal(t, 1, f.count("close"))
	}
}

// A failed GEMM fails only itself: the next one runs (gorgonia's cuBLAS
// wrapper kept the first error and skipped every later call).
func TestCUBLASErrorsAreNotSticky(t *testing.T) {
	c, f := newFake(t)
	a, _ := c.Alloc(tensor.Float32, 2, 3)
	b, _ := c.Alloc(tensor.Float32, 3, 4)
	out, _ := c.Alloc(tensor.Float32, 2, 4)
	f.gemmFail = 1
	err := c.MatMul(out, a, b, false, false, 1, 0)
	require.ErrorIs(t, err, ErrCUBLAS)
	assert.Contains(t, err.Error(), "MatMul [2 3] x [3 4]")
	require.NoError(t, c.MatMul(out, a, b, false, false, 1, 0))
	require.NoError(t, c.MatMul(out, a, b, false, false, 1, 0))
	assert.Equal(t, 3, f.gemms, "every MatMul reached cuBLAS")
}

// An empty shard's bias gradient is zeros; SumRows over zero rows used to
// panic.
func TestSumRowsZeroRows(t *testing.T) {
	c, f := newFake(t)
	x, _ := c.Alloc(tensor.Float32, 0, 5)
	out, _ := c.Alloc(tensor.Float32, 5)
	assert.NotPanics(t, func() { require.NoError(t, c.SumRows(out, x)) })
	assert.Equal(t, 0, f.count("sgemv"))
	assert.Contains(t, f.calls, fmt.Sprintf("zero %#x 20", out.ptr), "out set to zeros")

	// And with rows the ones vector is filled once and reused.
	y, _ := c.Alloc(tensor.Float32, 3, 5)
	require.NoError(t, c.SumRows(out, y))
	require.NoError(t, c.SumRows(out, y))
	assert.Equal(t, 2, f.count("sgemv"))
	assert.Equal(t, 1, f.count("launch fill_f32"))
}

// Element counts of 2^31 and more reach the kernels whole: they used to
// be truncated to 32 bits (and the kernels indexed in 32 bits).
func TestKernelArgsAre64Bit(t *testing.T) {
	c, f := newFake(t)
	const n = 3 << 30 // 12 GiB of float32s: the fake allocates nothing
	x, err := c.Alloc(tensor.Float32, n)
	require.NoError(t, err)
	require.NoError(t, c.Fill(x, 2))
	y, _ := c.Alloc(tensor.Float32, 1<<16, 1<<16) // rows·cols = 2^32
	b, _ := c.Alloc(tensor.Float32, 1<<16)
	require.NoError(t, c.AddBias(y, b))
	require.Len(t, f.launches, 2)
	fill := f.launches[0]
	assert.Equal(t, []uint64{x.ptr, uint64(math.Float32bits(2)), n}, fill.args)
	assert.Equal(t, uint32(maxGrid), fill.grid, "grid capped; the kernel strides over the rest")
	assert.Equal(t, uint32(block), fill.block)
	assert.Equal(t, []uint64{y.ptr, b.ptr, 1 << 16, 1 << 16}, f.launches[1].args)
	assert.Equal(t, uint32(1), grid(1))
	assert.Equal(t, uint32(2), grid(block+1))
}

// cuBLAS takes 32-bit dimensions: larger ones are refused with an error.
func TestMatMulTooLarge(t *testing.T) {
	c, _ := newFake(t)
	a, _ := c.Alloc(tensor.Float32, 1, 1<<31)
	b, _ := c.Alloc(tensor.Float32, 1<<31, 1)
	out, _ := c.Alloc(tensor.Float32, 1, 1)
	assert.ErrorIs(t, c.MatMul(out, a, b, false, false, 1, 0), ErrTooLarge)
}

// MatMul with k = 0 scales out by beta (zeros for beta 0), as cuBLAS.
func TestMatMulEmptyInner(t *testing.T) {
	c, f := newFake(t)
	a, _ := c.Alloc(tensor.Float32, 2, 0)
	b, _ := c.Alloc(tensor.Float32, 0, 3)
	out, _ := c.Alloc(tensor.Float32, 2, 3)
	require.NoError(t, c.MatMul(out, a, b, false, false, 1, 0))
	require.NoError(t, c.MatMul(out, a, b, false, false, 1, 0.5))
	assert.Equal(t, 0, f.gemms)
	assert.Equal(t, 1, f.count("sscal 6"))
}

// The losses sum their terms with Sasum and free nothing twice; CommBuffer
// names the compute stream for the nccl backend's event ordering.
func TestLossesAndCommBuffer(t *testing.T) {
	c, f := newFake(t)
	p, _ := c.Alloc(tensor.Float32, 4, 3)
	q, _ := c.Alloc(tensor.Float32, 4, 3)
	g, _ := c.Alloc(tensor.Float32, 4, 3)
	loss, err := c.MSE(g, p, q)
	require.NoError(t, err)
	assert.InDelta(t, 1.0/12, loss, 1e-9) // the fake's Sasum returns 1
	loss, err = c.SoftmaxCrossEntropy(g, p, []int{0, 1, 2, 0})
	require.NoError(t, err)
	assert.InDelta(t, 0.25, loss, 1e-9)
	assert.Equal(t, 1, f.count("launch softmax_ce_f32"))
	cb := g.CommBuffer()
	assert.Equal(t, uintptr(0x5eed), cb.Stream)
	assert.Equal(t, 12, cb.Count)
	require.NoError(t, c.Close())
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Len(t, f.live, 3, "Close freed the scratch, not the tensors (the context release does)")
	n := len(f.calls)
	assert.Equal(t, []string{"sync"}, f.calls[n-4:n-3], "Close waits for the stream before freeing: %v", f.calls[n-5:])
	assert.Equal(t, "close", f.calls[n-1])
}
