//go:build cuda

package cuda

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeUploads is a stream whose copies run only when the test says so
// (run), reading the pinned memory then, as DMA does.
type fakeUploads struct {
	mu      sync.Mutex
	pinned  map[unsafe.Pointer][]byte
	done    map[unsafe.Pointer]bool // event completed
	queue   []func()                // copies and records not yet run
	dev     map[uint64][]byte       // what reached the device, by address
	allocs  int
	frees   int
	syncs   int
	evFrees int
}

func newFakeUploads() *fakeUploads {
	return &fakeUploads{pinned: map[unsafe.Pointer][]byte{}, done: map[unsafe.Pointer]bool{}, dev: map[uint64][]byte{}}
}

func (f *fakeUploads) hostAlloc(n int64) (unsafe.Pointer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := make([]byte, n)
	p := unsafe.Pointer(&b[0])
	f.pinned[p] = b
	f.allocs++
	return p, nil
}

func (f *fakeUploads) hostFree(p unsafe.Pointer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pinned, p)
	f.frees++
	return nil
}

func (f *fakeUploads) newEvent() (unsafe.Pointer, error) {
	b := new(byte)
	f.mu.Lock()
	f.done[unsafe.Pointer(b)] = true // a new event is complete
	f.mu.Unlock()
	return unsafe.Pointer(b), nil
}

func (f *fakeUploads) destroyEvent(unsafe.Pointer) error {
	f.mu.Lock()
	f.evFrees++
	f.mu.Unlock()
	return nil
}

func (f *fakeUploads) recordCompute(e unsafe.Pointer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done[e] = false
	f.queue = append(f.queue, func() { f.done[e] = true })
	return nil
}

func (f *fakeUploads) queryEvent(e unsafe.Pointer) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done[e], nil
}

func (f *fakeUploads) syncEvent(e unsafe.Pointer) error {
	f.mu.Lock()
	f.syncs++
	f.mu.Unlock()
	for {
		f.mu.Lock()
		d := f.done[e]
		f.mu.Unlock()
		if d {
			return nil
		}
		f.run(1)
	}
}

func (f *fakeUploads) htodCompute(dst uint64, src unsafe.Pointer, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pinned[src]; !ok {
		panic("fakeUploads: asynchronous copy from memory that is not pinned")
	}
	f.queue = append(f.queue, func() { f.dev[dst] = append([]byte(nil), unsafe.Slice((*byte)(src), n)...) })
	return nil
}

// run runs the next n queued operations (all when n < 0).
func (f *fakeUploads) run(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n != 0 && len(f.queue) > 0 {
		f.queue[0]()
		f.queue = f.queue[1:]
		n--
	}
}

// Uploads return before the stream runs them, from a copy of the caller's
// bytes (which the caller may overwrite at once); a staging chunk is
// reused only after its copy completed; past the in-flight bound an
// upload waits for the oldest; close frees every chunk.
func TestUploaderAsyncFromPinned(t *testing.T) {
	f := newFakeUploads()
	u := &uploader{calls: f, max: 64}
	src := []byte{1, 2, 3, 4}
	require.NoError(t, u.htod(0x100, unsafe.Pointer(&src[0]), 4))
	src[0] = 9 // the caller reuses its buffer
	require.NoError(t, u.htod(0x200, unsafe.Pointer(&src[0]), 4))
	assert.Empty(t, f.dev, "no copy ran: htod did not wait for the stream")
	assert.Equal(t, 2, f.allocs, "the first chunk is still in flight, so the second upload has its own")
	assert.Zero(t, f.syncs)

	f.run(-1)
	assert.Equal(t, []byte{1, 2, 3, 4}, f.dev[0x100], "the first copy has the bytes of its call")
	assert.Equal(t, []byte{9, 2, 3, 4}, f.dev[0x200])
	require.NoError(t, u.htod(0x300, unsafe.Pointer(&src[0]), 4))
	assert.Equal(t, 2, f.allocs, "a completed chunk is reused")

	// 64 bytes in flight at most: 40 more wait for the oldest.
	big := make([]byte, 40)
	require.NoError(t, u.htod(0x400, unsafe.Pointer(&big[0]), 40))
	assert.Zero(t, f.syncs)
	require.NoError(t, u.htod(0x500, unsafe.Pointer(&big[0]), 40))
	assert.Positive(t, f.syncs, "past the bound an upload waits for the oldest copy")

	f.run(-1)
	require.NoError(t, u.close())
	assert.Equal(t, f.allocs, f.frees, "close frees every chunk")
	assert.Equal(t, f.allocs, f.evFrees)
	assert.Empty(t, f.pinned)
}
