package caching

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeBackend hands out numbered blocks and records real frees.
// It is safe for concurrent use, as a device's backend is.
type fakeBackend struct {
	mu    sync.Mutex
	next  int
	live  map[int]int // block -> size
	fail  bool
	freed []int
}

func (f *fakeBackend) Alloc(size int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return 0, errors.New("out of memory")
	}
	f.next++
	f.live[f.next] = size
	return f.next, nil
}

func (f *fakeBackend) Free(b, size int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live[b] != size {
		panic("freed with the wrong size")
	}
	delete(f.live, b)
	f.freed = append(f.freed, b)
}

func newFake() (*fakeBackend, *Allocator[int]) {
	f := &fakeBackend{live: map[int]int{}}
	return f, New[int](f)
}

func TestClass(t *testing.T) {
	for _, c := range []struct{ size, class int }{
		{1, 64}, {64, 64}, {65, 128}, {1000, 1024}, {1024, 1024},
		{1025, 1152}, {2048, 2048}, {2049, 2304}, {96 << 20, 96 << 20}, {100 << 20, 104 << 20},
		{(1 << 20) + 1, (1 << 20) + (1 << 17)},
	} {
		require.Equal(t, c.class, Class(c.size), "size %d", c.size)
	}
	for size := 1; size < 1<<16; size += 37 {
		c := Class(size)
		require.GreaterOrEqual(t, c, size)
		require.LessOrEqual(t, c, size+max(63, size/8), "size %d", size)
		require.Equal(t, c, Class(c), "a class is its own class")
	}
}

func TestReuseAndStats(t *testing.T) {
	f, a := newFake()
	b1, c1, err := a.Alloc(1000, DefaultStream)
	require.NoError(t, err)
	require.Equal(t, 1024, c1)
	b2, _, err := a.Alloc(1000, DefaultStream)
	require.NoError(t, err)
	require.NotEqual(t, b1, b2)
	a.Free(b1, c1, DefaultStream)
	b3, _, err := a.Alloc(990, DefaultStream) // same class
	require.NoError(t, err)
	require.Equal(t, b1, b3, "a freed block serves the next request of its class")
	_, _, err = a.Alloc(5000, DefaultStream) // another class misses
	require.NoError(t, err)
	s := a.Stats()
	require.Equal(t, Stats{Allocated: 1024*2 + 5120, Reserved: 1024*2 + 5120, PeakAllocated: 1024*2 + 5120,
		PeakReserved: 1024*2 + 5120, Hits: 1, Misses: 3, Frees: 1}, s)
	require.Len(t, f.live, 3)
}

func TestEmptyCacheFreesOnlyCachedBlocks(t *testing.T) {
	f, a := newFake()
	b1, c, _ := a.Alloc(4096, DefaultStream)
	b2, _, _ := a.Alloc(4096, DefaultStream)
	a.Free(b1, c, DefaultStream)
	a.EmptyCache()
	require.Equal(t, []int{b1}, f.freed)
	require.Contains(t, f.live, b2)
	s := a.Stats()
	require.Equal(t, int64(4096), s.Allocated)
	require.Equal(t, int64(4096), s.Reserved)
	require.Equal(t, int64(8192), s.PeakReserved)
	b3, _, _ := a.Alloc(4096, DefaultStream)
	require.NotEqual(t, b1, b3, "an emptied block is not handed out again")
}

type flag struct{ done bool }

func (f *flag) Done() bool { return f.done }

// A block is reused on its own stream at once, never on another stream, and
// after use on another stream only once that stream's event is done.
func TestStreams(t *testing.T) {
	_, a := newFake()
	b, c, _ := a.Alloc(256, 1)
	a.Free(b, c, 1)
	other, _, _ := a.Alloc(256, 2)
	require.NotEqual(t, b, other, "a block freed on stream 1 went to stream 2")
	again, _, _ := a.Alloc(256, 1)
	require.Equal(t, b, again)

	ev := &flag{}
	a.FreeAfter(again, c, 1, []Event{ev})
	fresh, _, _ := a.Alloc(256, 1)
	require.NotEqual(t, b, fresh, "reused before the other stream's event completed")
	ev.done = true
	require.Equal(t, b, must(a.Alloc(256, 1)))
}

func must(b int, _ int, err error) int {
	if err != nil {
		panic(err)
	}
	return b
}

func TestBackendErrorIsWrapped(t *testing.T) {
	f, a := newFake()
	f.fail = true
	_, _, err := a.Alloc(100, DefaultStream)
	require.ErrorContains(t, err, "caching: allocating 100 bytes")
	require.ErrorContains(t, err, "out of memory")
	require.Equal(t, int64(0), a.Stats().Reserved)
}

// TestTickReleasesIdleClasses: a class unused for more than idleTicks ticks
// gives its blocks back to the backend; a class used every tick keeps them.
func TestTickReleasesIdleClasses(t *testing.T) {
	f, a := newFake()
	busy, cb, err := a.Alloc(4096, DefaultStream)
	require.NoError(t, err)
	idle, ci, err := a.Alloc(100, DefaultStream)
	require.NoError(t, err)
	a.Free(busy, cb, DefaultStream)
	a.Free(idle, ci, DefaultStream)
	for range 2 {
		require.Zero(t, a.Tick(2), "released within idleTicks")
		b, c, err := a.Alloc(4096, DefaultStream) // the busy class serves every tick
		require.NoError(t, err)
		require.Equal(t, busy, b)
		a.Free(b, c, DefaultStream)
	}
	require.Equal(t, []int(nil), f.freed)
	require.EqualValues(t, ci, a.Tick(2), "the idle class goes after idleTicks ticks")
	require.Equal(t, []int{idle}, f.freed)
	st := a.Stats()
	require.EqualValues(t, cb, st.Reserved, "only the busy class stays reserved")
	require.Zero(t, st.Allocated)
}

// TestAllocRetriesAfterEmptyCache: when the backend fails, the cache is
// emptied and the request tried once more; a second failure names the bytes
// requested, in use and reserved.
func TestAllocRetriesAfterEmptyCache(t *testing.T) {
	lim := &limitBackend{fakeBackend: fakeBackend{live: map[int]int{}}, limit: 5120}
	a := New[int](lim)
	b1, c1, err := a.Alloc(2048, DefaultStream)
	require.NoError(t, err)
	_, _, err = a.Alloc(2048, DefaultStream)
	require.NoError(t, err)
	a.Free(b1, c1, DefaultStream) // cached, too small for what follows: the backend is still full
	_, c3, err := a.Alloc(3072, DefaultStream)
	require.NoError(t, err, "the cached block was freed and the request retried")
	require.Equal(t, 3072, c3)
	require.Equal(t, []int{b1}, lim.freed)
	_, _, err = a.Alloc(4096, DefaultStream)
	require.Error(t, err)
	require.Contains(t, err.Error(), "allocating 4096 bytes")
	require.Contains(t, err.Error(), "5120 bytes in use and 5120 reserved")
}

// TestAllocBestFit: with its own class empty, a request takes an idle block
// of a larger class up to twice its size, which goes back to its own class.
func TestAllocBestFit(t *testing.T) {
	f, a := newFake()
	big, cb, err := a.Alloc(4096, DefaultStream)
	require.NoError(t, err)
	huge, ch, err := a.Alloc(16384, DefaultStream)
	require.NoError(t, err)
	a.Free(big, cb, DefaultStream)
	a.Free(huge, ch, DefaultStream)
	b, c, err := a.Alloc(2100, DefaultStream) // class 2304: 4096 fits, 16384 is more than twice
	require.NoError(t, err)
	require.Equal(t, big, b)
	require.Equal(t, cb, c)
	_, c2, err := a.Alloc(2100, DefaultStream) // no fit left: a new block
	require.NoError(t, err)
	require.Equal(t, Class(2100), c2)
	require.Equal(t, 3, f.next)
	a.Free(b, c, DefaultStream)
	b, _, err = a.Alloc(4096, DefaultStream)
	require.NoError(t, err)
	require.Equal(t, big, b, "the block went back to its own class")
}

// limitBackend fails allocations past limit bytes live.
type limitBackend struct {
	fakeBackend
	limit, used int
}

func (l *limitBackend) Alloc(size int) (int, error) {
	if l.used+size > l.limit {
		return 0, errors.New("out of memory")
	}
	l.used += size
	return l.fakeBackend.Alloc(size)
}

func (l *limitBackend) Free(b, size int) {
	l.used -= size
	l.fakeBackend.Free(b, size)
}

// capBackend has room for cap bytes.
type capBackend struct {
	mu        sync.Mutex
	cap, used int
	next      int
}

func (c *capBackend) Alloc(size int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used+size > c.cap {
		return 0, errors.New("out of memory")
	}
	c.used += size
	c.next++
	return c.next, nil
}

func (c *capBackend) Free(_, size int) {
	c.mu.Lock()
	c.used -= size
	c.mu.Unlock()
}

// Blocks held by garbage (tensors nothing references, whose cleanups give
// their blocks back) are found by a collection when the device is full.
func TestAllocCollectsGarbageWhenFull(t *testing.T) {
	be := &capBackend{cap: 4 << 20}
	a := New[int](be)
	type holder struct{ pad [64]byte }
	for range 4 { // fill the device with blocks only garbage holds
		b, class, err := a.Alloc(1<<20, DefaultStream)
		require.NoError(t, err)
		h := &holder{}
		runtime.AddCleanup(h, func(b int) { a.Free(b, class, DefaultStream) }, b)
	}
	b, _, err := a.Alloc(1<<20, DefaultStream)
	require.NoError(t, err, "the collected holders' blocks serve the request")
	require.NotZero(t, b)

	// Memory that is really in use still fails, naming the attempt.
	for {
		if _, _, err = a.Alloc(1<<20, DefaultStream); err != nil {
			break
		}
	}
	require.ErrorContains(t, err, "failed after emptying the cache and collecting garbage")
}

// Under a limit, a request that would cross it is served by what the
// collector frees (the holders' blocks come back to the cache: the request
// is a hit, and nothing more is reserved); memory really in use fails with
// ErrLimit, and the limit is never crossed, with requests from several
// goroutines too.
func TestLimitCollectsGarbageFirst(t *testing.T) {
	f, a := newFake()
	const mib = 1 << 20
	a.SetLimit(4 * mib)
	require.EqualValues(t, 4*mib, a.Limit())
	type holder struct{ pad [64]byte }
	for range 4 {
		b, class, err := a.Alloc(mib, DefaultStream)
		require.NoError(t, err)
		runtime.AddCleanup(&holder{}, func(b int) { a.Free(b, class, DefaultStream) }, b)
	}
	b, _, fresh, err := a.AllocFresh(mib, DefaultStream)
	require.NoError(t, err, "the collected holders' blocks serve the request")
	require.False(t, fresh, "the block comes from the cache")
	require.Contains(t, f.live, b)
	require.Len(t, f.live, 4, "nothing more was taken from the backend")
	st := a.Stats()
	require.EqualValues(t, 4*mib, st.PeakReserved)
	require.EqualValues(t, 4, st.Misses, "the request counts as a hit")

	held := []int{b}
	for {
		b, _, err := a.Alloc(mib, DefaultStream)
		if err != nil {
			require.ErrorIs(t, err, ErrLimit)
			require.ErrorContains(t, err, "pass the limit of 4194304")
			break
		}
		held = append(held, b)
	}
	require.Len(t, held, 4, "the limit holds 4 blocks of 1 MiB")
	require.EqualValues(t, 4*mib, a.Stats().PeakReserved)

	// Concurrent requests of mixed sizes, half of them dropped as garbage.
	for _, b := range held {
		a.Free(b, mib, DefaultStream)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				size := (1 + (g+i)%3) * mib / 2
				b, class, err := a.Alloc(size, DefaultStream)
				if err != nil {
					continue // the other goroutines hold the rest
				}
				if i%2 == 0 {
					runtime.AddCleanup(&holder{}, func(b int) { a.Free(b, class, DefaultStream) }, b)
				} else {
					a.Free(b, class, DefaultStream)
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, a.Stats().PeakReserved, int64(4*mib))
	total := 0
	for _, size := range f.live {
		total += size
	}
	require.LessOrEqual(t, total, 4*mib, "the backend holds no more than the limit")

	a.SetLimit(0)
	for range 8 {
		_, _, err := a.Alloc(mib, DefaultStream)
		require.NoError(t, err, "without a limit the backend is the only bound")
	}
}
