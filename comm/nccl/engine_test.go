package nccl

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
)

// fakeLib stands for CUDA and NCCL: events complete when the test says,
// and any use of the communicator after ncclCommAbort started is an error
// (on real NCCL, a use after free).
type fakeLib struct {
	t        *testing.T
	aborted  atomic.Bool
	aborts   atomic.Int32
	unblock  chan struct{} // closed by abortComm: what ends a call blocked in NCCL
	asyncErr atomic.Pointer[error]
	events   atomic.Int64
	late     atomic.Int32 // calls that started after the abort
	stuck    atomic.Bool  // events recorded from now on never complete
	queries  atomic.Int64 // cuEventQuery calls
	mu       sync.Mutex
	ready    map[unsafe.Pointer]bool
	wake     chan struct{} // closed and replaced when an event completes
	trace    []string      // the stream-ordered calls, in order (stream_test.go)
}

func newFakeLib(t *testing.T) *fakeLib {
	return &fakeLib{t: t, unblock: make(chan struct{}), ready: map[unsafe.Pointer]bool{}, wake: make(chan struct{})}
}

func (f *fakeLib) use(what string) {
	if f.aborted.Load() {
		f.late.Add(1)
		f.t.Errorf("%s on an aborted communicator", what)
	}
}

func (f *fakeLib) recordEvent() (unsafe.Pointer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := unsafe.Pointer(&[1]byte{}) // a distinct non-nil handle
	f.ready[ev] = !f.stuck.Load()
	f.events.Add(1)
	return ev, nil
}

func (f *fakeLib) queryEvent(ev unsafe.Pointer) (bool, error) {
	f.queries.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready[ev], nil
}

// syncEvent blocks until the event completes or the communicator is
// aborted (ncclCommAbort ends the pending kernels).
func (f *fakeLib) syncEvent(ev unsafe.Pointer) error {
	for {
		f.mu.Lock()
		ready, wake := f.ready[ev], f.wake
		f.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-wake:
		case <-f.unblock:
			return nil
		}
	}
}

// complete lets every pending event complete, as a kernel finishing would.
func (f *fakeLib) complete() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ev := range f.ready {
		f.ready[ev] = true
	}
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *fakeLib) destroyEvent(ev unsafe.Pointer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ready, ev)
	f.events.Add(-1)
}

func (f *fakeLib) syncStream() error { return nil }

func (f *fakeLib) asyncError() error {
	f.use("ncclCommGetAsyncError")
	if p := f.asyncErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (f *fakeLib) abortComm() error {
	if f.aborts.Add(1) == 1 {
		f.aborted.Store(true)
		close(f.unblock)
	}
	return nil
}

func (f *fakeLib) destroyComm() error { f.use("ncclCommDestroy"); return nil }

// launch is a collective's enqueue call: it uses the communicator.
func (f *fakeLib) launch() error { f.use("ncclAllReduce"); return nil }

func waitErr(t *testing.T, w backend.Work, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := w.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the Work did not complete within %v", within)
	return err
}

// A collective blocked inside NCCL (lazy connection setup waiting for a
// peer) neither holds the group's lock nor escapes the timeout: other
// callers queue at once, the blocked op fails with ErrTimeout near its
// deadline, and the abort is what unblocks the call. (The old enqueue made
// the NCCL call under the group's mutex, outside any deadline.)
func TestBlockedCallTimesOut(t *testing.T) {
	f := newFakeLib(t)
	e := newEngine(f, 0, 200*time.Millisecond, func(string, ...any) {})
	start := time.Now()
	blocked := e.submit("allreduce", 4, func() error { <-f.unblock; return errors.New("ncclSystemError") }, nil, nil)

	queued := make(chan backend.Work)
	go func() { queued <- e.submit("allreduce", 4, f.launch, nil, nil) }()
	var second backend.Work
	select {
	case second = <-queued:
	case <-time.After(100 * time.Millisecond):
		t.Fatal("a second op could not be queued while the first was blocked inside NCCL")
	}

	err := waitErr(t, blocked, 5*time.Second)
	require.ErrorIs(t, err, backend.ErrTimeout)
	assert.Less(t, time.Since(start), 2*time.Second)
	err = waitErr(t, second, 5*time.Second)
	require.ErrorIs(t, err, backend.ErrPeerFailed)
	assert.Contains(t, err.Error(), "aborted by an earlier failure")
	assert.EqualValues(t, 1, f.aborts.Load())
	healthy, leaked, err := e.close()
	assert.False(t, healthy)
	assert.False(t, leaked)
	assert.NoError(t, err)
}

// However ops and an abort interleave, nothing touches the communicator
// once ncclCommAbort has begun (it used to race a concurrent enqueue on
// the freed communicator), and every Work completes.
func TestNoCallAfterAbort(t *testing.T) {
	for round := range 20 {
		f := newFakeLib(t)
		e := newEngine(f, 1, 10*time.Second, func(string, ...any) {})
		var wg sync.WaitGroup
		var works sync.Map
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					works.Store([2]int{g, i}, e.submit("allreduce", 4, f.launch, nil, nil))
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		boom := errors.New("ncclRemoteError: a peer left")
		f.asyncErr.Store(&boom)
		e.abort(boom)
		wg.Wait()
		works.Range(func(_, w any) bool {
			err := waitErr(t, w.(backend.Work), 5*time.Second)
			if err != nil {
				assert.ErrorIs(t, err, backend.ErrPeerFailed)
			}
			return true
		})
		_, _, err := e.close()
		require.NoError(t, err)
		assert.Zero(t, f.late.Load(), "calls on the aborted communicator")
		assert.EqualValues(t, 1, f.aborts.Load())
	}
}

// Ops complete in order, run their copy-out, and free their events; Close
// destroys a healthy communicator and later ops fail with ErrClosed.
func TestOrderAndClose(t *testing.T) {
	f := newFakeLib(t)
	e := newEngine(f, 0, 10*time.Second, func(string, ...any) {})
	var order []int
	var mu sync.Mutex
	var ws []backend.Work
	for i := range 10 {
		ws = append(ws, e.submit("allreduce", 4, f.launch, func() { mu.Lock(); order = append(order, i); mu.Unlock() }, nil))
	}
	for _, w := range ws {
		require.NoError(t, waitErr(t, w, 5*time.Second))
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, order)
	healthy, leaked, err := e.close()
	require.NoError(t, err)
	assert.True(t, healthy)
	assert.False(t, leaked)
	assert.Zero(t, f.events.Load(), "every event destroyed")
	undone := false
	w := e.submit("allreduce", 4, f.launch, nil, func() { undone = true })
	assert.ErrorIs(t, waitErr(t, w, time.Second), backend.ErrClosed)
	assert.True(t, undone, "the refused op's staging was released")
}

// An op whose kernel never finishes times out and aborts the communicator.
func TestStuckKernelTimesOut(t *testing.T) {
	f := newFakeLib(t)
	f.stuck.Store(true)
	e := newEngine(f, 0, 100*time.Millisecond, func(string, ...any) {})
	err := waitErr(t, e.submit("allreduce", 4, f.launch, nil, nil), 5*time.Second)
	require.ErrorIs(t, err, backend.ErrTimeout)
	assert.Contains(t, err.Error(), "not completed after 100ms")
	assert.EqualValues(t, 1, f.aborts.Load())
	_, _, err = e.close()
	assert.NoError(t, err)
}

// With a nil Logf the backend logs on rank 0 to stderr, like tcp and shm;
// other ranks stay silent (it used to discard everything).
func TestDefaultLogf(t *testing.T) {
	var b0, b1 bytes.Buffer
	stderrLogf(0, &b0)("nccl: rank %d: communicator aborted: %v", 0, "boom")
	stderrLogf(1, &b1)("nccl: rank %d: communicator aborted: %v", 1, "boom")
	assert.Equal(t, "nccl: rank 0: communicator aborted: boom\n", b0.String())
	assert.Empty(t, b1.String())
}

// A pending op completes when its event does, through one blocking wait,
// not a polling loop: while the kernel runs for 100 ms, cuEventQuery is
// called once (the fast path), where the old loop queried every 5 us to
// 1 ms, and added up to a millisecond to every completion.
func TestPendingOpWaitsOnItsEvent(t *testing.T) {
	f := newFakeLib(t)
	f.stuck.Store(true)
	e := newEngine(f, 0, 10*time.Second, func(string, ...any) {})
	w := e.submit("allreduce", 4, f.launch, nil, nil)
	time.Sleep(100 * time.Millisecond)
	f.stuck.Store(false)
	f.complete()
	require.NoError(t, waitErr(t, w, 5*time.Second))
	assert.LessOrEqual(t, f.queries.Load(), int64(2), "cuEventQuery calls while one op was pending")
	assert.Zero(t, f.aborts.Load())
	healthy, _, err := e.close()
	require.NoError(t, err)
	assert.True(t, healthy)
}
