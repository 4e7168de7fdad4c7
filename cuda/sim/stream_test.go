package sim_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda/sim"
)

func newDevice(t *testing.T) *sim.Device {
	d := sim.New(0)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// Enqueue returns before the work runs, and a stream runs its work in order.
func TestStreamIsAsynchronousAndOrdered(t *testing.T) {
	d := newDevice(t)
	s := d.NewStream("s")
	gate := make(chan struct{})
	var order []int
	s.Enqueue("gate", func() error { <-gate; return nil })
	for i := range 5 {
		s.Enqueue("step", func() error { order = append(order, i); return nil })
	}
	close(gate) // had Enqueue blocked on the gate, this line would never run
	require.NoError(t, s.Synchronize())
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
}

// Streams run concurrently: one stream's busy time does not hold another.
func TestStreamsRunConcurrently(t *testing.T) {
	d := newDevice(t)
	a, b := d.NewStream("a"), d.NewStream("b")
	a.Sleep(time.Second)
	start := time.Now()
	b.Enqueue("quick", func() error { return nil })
	require.NoError(t, b.Synchronize())
	assert.Less(t, time.Since(start), 500*time.Millisecond)
}

// The CUDA-event contract, and the injected delay that exposes a missing
// wait: the consumer sees the producer's write only through the event.
func TestEventOrdersStreams(t *testing.T) {
	for _, wait := range []bool{true, false} {
		d := newDevice(t)
		prod, cons := d.NewStream("producer"), d.NewStream("consumer")
		buf, err := d.Alloc(4)
		require.NoError(t, err)
		defer buf.Free()
		prod.SetDelay(50 * time.Millisecond)
		prod.CopyHtoD(buf, 0, []byte{1, 2, 3, 4})
		ev := d.NewEvent()
		ev.Record(prod)
		if wait {
			cons.WaitEvent(ev)
		}
		got := make([]byte, 4)
		cons.CopyDtoH(got, buf, 0)
		require.NoError(t, cons.Synchronize())
		if wait {
			assert.Equal(t, []byte{1, 2, 3, 4}, got)
		} else {
			assert.Equal(t, []byte{0, 0, 0, 0}, got, "stale data: without the wait the consumer ran first")
		}
		require.NoError(t, prod.Synchronize())
	}
}

// A wait takes the event's latest Record at the time of the call; an
// event never recorded is complete.
func TestEventSemantics(t *testing.T) {
	d := newDevice(t)
	s := d.NewStream("s")
	ev := d.NewEvent()
	assert.True(t, ev.Query())
	gate := make(chan struct{})
	s.Enqueue("gate", func() error { <-gate; return nil })
	ev.Record(s)
	assert.False(t, ev.Query())
	var ran atomic.Bool
	other := d.NewStream("other")
	other.WaitEvent(ev)
	other.Enqueue("after", func() error { ran.Store(true); return nil })
	ev.Record(d.Compute()) // re-recording does not change what other waits for
	require.NoError(t, d.Compute().Synchronize())
	time.Sleep(20 * time.Millisecond)
	assert.False(t, ran.Load(), "other passed a wait whose event has not completed")
	close(gate)
	require.NoError(t, other.Synchronize())
	assert.True(t, ran.Load())
	ev.Synchronize()
	assert.True(t, ev.Query())
}

// The first error sticks: later work is skipped and Synchronize reports it.
func TestStreamErrorIsSticky(t *testing.T) {
	d := newDevice(t)
	s := d.NewStream("s")
	boom := errors.New("boom")
	var after bool
	s.Enqueue("fail", func() error { return boom })
	s.Enqueue("later", func() error { after = true; return nil })
	err := s.Synchronize()
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "fail on stream s")
	assert.False(t, after)

	buf, err := d.Alloc(8)
	require.NoError(t, err)
	defer buf.Free()
	s2 := d.NewStream("s2")
	s2.CopyHtoD(buf, 4, make([]byte, 8))
	assert.ErrorContains(t, s2.Synchronize(), "outside a 8-byte buffer")
}
