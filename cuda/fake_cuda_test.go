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

// Close is idempotent and later calls fail with ErrClosed instead of
// reaching a released context.
func TestCloseIdempotent(t *testing.T) {
	c, f := newFake(t)
	require.NoError(t, c.Close())
	assert.NoError(t, c.Close(), "Close is idempotent")
	assert.Equal(t, 1, f.count("close"))
	assert.ErrorIs(t, c.Synchronize(), ErrClosed)
	assert.ErrorIs(t, c.launch("fill_f32", 4, 0, f32Arg(1), intArg(4)), ErrClosed)
}

// Element counts of 2^31 and more reach the kernels whole (they were once
// truncated to 32 bits), and the grid is capped: the kernels stride over
// the rest.
func TestKernelArgsAre64Bit(t *testing.T) {
	c, f := newFake(t)
	const n = 3 << 30 // 12 GiB of float32s: the fake allocates nothing
	require.NoError(t, c.launch("fill_f32", n, 0xd0, f32Arg(2), intArg(n)))
	require.Len(t, f.launches, 1)
	fill := f.launches[0]
	assert.Equal(t, []uint64{0xd0, uint64(math.Float32bits(2)), n}, fill.args)
	assert.Equal(t, uint32(maxGrid), fill.grid, "grid capped; the kernel strides over the rest")
	assert.Equal(t, uint32(block), fill.block)
	assert.Equal(t, uint32(1), grid(1))
	assert.Equal(t, uint32(2), grid(block+1))
}
