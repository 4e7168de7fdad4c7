package nccl

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
)

// The fake's stream-ordered calls append to its trace, as they would
// reach the group's stream.
func (f *fakeLib) note(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trace = append(f.trace, call)
}

func (f *fakeLib) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.trace...)
}

func (f *fakeLib) waitFor(ev uintptr) error {
	f.use("cuStreamWaitEvent")
	f.note(fmt.Sprintf("cuStreamWaitEvent %#x", ev))
	return nil
}

func (f *fakeLib) recordInto(ev uintptr) error {
	f.use("cuEventRecord")
	f.note(fmt.Sprintf("cuEventRecord %#x", ev))
	return nil
}

func (f *fakeLib) allReduce() error {
	f.use("ncclAllReduce")
	f.note("ncclAllReduce")
	return nil
}

// The stream-ordered all-reduce is on the group's stream when the call
// returns: the wait for the caller's ready event, ncclAllReduce, then the
// caller's end event recorded right after it, in order after an op called
// before it that was still inside NCCL (its launch is held for 30 ms).
// The old device path (direct) returned at once and issued later.
func TestStreamAllReduceIssuedBeforeReturn(t *testing.T) {
	f := newFakeLib(t)
	e := newEngine(f, 0, 10*time.Second, func(string, ...any) {})
	gate := make(chan struct{})
	time.AfterFunc(30*time.Millisecond, func() { close(gate) })
	first := e.submit("allreduce", 4, func() error { <-gate; f.note("earlier op"); return nil }, nil, nil)
	w := e.allReduceOn("allreduce", 16, 0xead, 0xe0d, f.allReduce)
	f.note("returned")
	assert.Equal(t, []string{"earlier op", "cuStreamWaitEvent 0xead", "ncclAllReduce", "cuEventRecord 0xe0d", "returned"}, f.calls())
	require.NoError(t, waitErr(t, first, 5*time.Second))
	require.NoError(t, waitErr(t, w, 5*time.Second))

	// Without a ready event the stream waits for nothing.
	require.NoError(t, waitErr(t, e.allReduceOn("allreduce", 16, 0, 0xe1d, f.allReduce), 5*time.Second))
	assert.Equal(t, []string{"ncclAllReduce", "cuEventRecord 0xe1d"}, f.calls()[5:])
	healthy, _, err := e.close()
	require.NoError(t, err)
	assert.True(t, healthy)
	assert.Zero(t, f.events.Load(), "the engine's own events destroyed (the caller's are the caller's)")

	// After Close the call returns a failed Work at once, touching nothing.
	n := len(f.calls())
	err = waitErr(t, e.allReduceOn("allreduce", 16, 0xead, 0xe2d, f.allReduce), time.Second)
	assert.ErrorIs(t, err, backend.ErrClosed)
	assert.Len(t, f.calls(), n)
}

// A failed enqueue fails the Work and leaves the end event unrecorded.
func TestStreamAllReduceEnqueueFails(t *testing.T) {
	f := newFakeLib(t)
	e := newEngine(f, 0, 10*time.Second, func(string, ...any) {})
	w := e.allReduceOn("allreduce", 16, 0xead, 0xe0d, func() error { return errors.New("ncclInvalidArgument") })
	err := waitErr(t, w, time.Second)
	require.ErrorIs(t, err, backend.ErrPeerFailed)
	assert.ErrorContains(t, err, "ncclInvalidArgument")
	assert.Equal(t, []string{"cuStreamWaitEvent 0xead"}, f.calls())
	_, _, err = e.close()
	require.NoError(t, err)
}

// Abort (ddp's watchdog, on an all-reduce past its timeout) calls
// ncclCommAbort once: the pending stream-ordered all-reduce fails with
// ErrPeerFailed, and a later one fails without touching the communicator.
func TestStreamAbortCallsCommAbort(t *testing.T) {
	f := newFakeLib(t)
	f.stuck.Store(true)
	e := newEngine(f, 0, 10*time.Second, func(string, ...any) {})
	w := e.allReduceOn("allreduce", 16, 0xead, 0xe0d, f.allReduce)
	assert.False(t, w.IsCompleted(), "its kernel never ends")
	cause := errors.New("ddp: bucket 0 all-reduce on rank 0 did not complete within 1s")
	e.Abort(cause)
	e.Abort(cause)
	assert.EqualValues(t, 1, f.aborts.Load(), "ncclCommAbort")
	err := waitErr(t, w, 5*time.Second)
	require.ErrorIs(t, err, backend.ErrPeerFailed)
	assert.ErrorContains(t, err, "did not complete within 1s")

	n := len(f.calls())
	err = waitErr(t, e.allReduceOn("allreduce", 16, 0xead, 0xe1d, f.allReduce), 5*time.Second)
	require.ErrorIs(t, err, backend.ErrPeerFailed)
	assert.Len(t, f.calls(), n, "no call on the aborted communicator")
	assert.Zero(t, f.late.Load())
	_, _, err = e.close()
	require.NoError(t, err)
}

// NCCL's asynchronous error (a peer failed) fails the pending
// stream-ordered all-reduce and aborts the communicator, so its end event
// completes: ddp's watchdog sees the event done and the Work failed.
func TestStreamAsyncErrorFailsTheWork(t *testing.T) {
	f := newFakeLib(t)
	f.stuck.Store(true)
	e := newEngine(f, 0, 10*time.Second, func(string, ...any) {})
	w := e.allReduceOn("allreduce", 16, 0xead, 0xe0d, f.allReduce)
	boom := errors.New("ncclRemoteError: a peer left")
	f.asyncErr.Store(&boom)
	err := waitErr(t, w, 5*time.Second)
	require.ErrorIs(t, err, backend.ErrPeerFailed)
	assert.ErrorContains(t, err, "a peer left")
	assert.EqualValues(t, 1, f.aborts.Load())
	_, _, err = e.close()
	require.NoError(t, err)
}
