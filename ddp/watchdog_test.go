package ddp

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
)

// flagEvent is an event the test completes by hand.
type flagEvent struct{ done atomic.Bool }

func (e *flagEvent) Synchronize() {
	for !e.done.Load() {
		time.Sleep(time.Millisecond)
	}
}
func (e *flagEvent) Query() bool { return e.done.Load() }

// abortingGroup records the watchdog's aborts.
type abortingGroup struct {
	comm.ProcessGroup
	aborts []error
}

func (g *abortingGroup) Abort(cause error) { g.aborts = append(g.aborts, cause) }

// The watchdog's verdicts, driven by hand (check at chosen instants, no
// goroutine timing): completed all-reduces retire in launch order, one
// whose event is late is not judged before its deadline, one past it fails
// the reducer once, naming bucket and rank, and aborts the group once.
func TestWatchdogDeadlineAndOrder(t *testing.T) {
	pg := &abortingGroup{ProcessGroup: commtest.NewGroups(1)[0]}
	wd := newWatchdog(pg, time.Second, nil)
	// No add, so no goroutine: the test calls check itself.
	t0 := time.Now()
	e0, e1 := &flagEvent{}, &flagEvent{}
	wd.pending = []watched{
		{bucket: 0, bytes: 8, done: e0.Query, launch: t0, deadline: t0.Add(time.Second)},
		{bucket: 1, bytes: 16, done: e1.Query, launch: t0, deadline: t0.Add(time.Second)},
	}
	e0.done.Store(true)
	wd.check(t0.Add(500 * time.Millisecond))
	require.NoError(t, wd.failure())
	require.Len(t, wd.pending, 1, "bucket 0 retired")
	wd.check(t0.Add(999 * time.Millisecond))
	require.NoError(t, wd.failure(), "not past the deadline yet")
	wd.check(t0.Add(1001 * time.Millisecond))
	err := wd.failure()
	require.ErrorIs(t, err, ErrTimeout)
	assert.Contains(t, err.Error(), "ddp: bucket 1 all-reduce on rank 0 did not complete within 1s")
	require.Len(t, pg.aborts, 1)
	assert.Equal(t, err, pg.aborts[0])
	select {
	case <-wd.failed:
	default:
		t.Fatal("failed not closed")
	}
	wd.check(t0.Add(2 * time.Second))
	assert.Len(t, pg.aborts, 1, "one abort")
}

// A completed all-reduce whose Work failed fails the reducer at once,
// naming the bucket, the rank and the cause.
func TestWatchdogWorkFailure(t *testing.T) {
	pg := &abortingGroup{ProcessGroup: commtest.NewGroups(1)[0]}
	wd := newWatchdog(pg, time.Hour, nil)
	t0 := time.Now()
	e := &flagEvent{}
	e.done.Store(true)
	boom := errors.New("boom")
	wd.pending = []watched{{bucket: 3, bytes: 4, done: e.Query, w: backend.FailedFuture(boom), launch: t0, deadline: t0.Add(time.Hour)}}
	wd.check(t0)
	err := wd.failure()
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "ddp: bucket 3 all-reduce (4 bytes) on rank 0 failed")
	assert.Len(t, pg.aborts, 1)
}

// The goroutine: an all-reduce that never completes is reported by the
// polling loop itself (the 10 s is only a guard against a hang), and
// close stops it with work still pending.
func TestWatchdogLoop(t *testing.T) {
	pg := &abortingGroup{ProcessGroup: commtest.NewGroups(1)[0]}
	wd := newWatchdog(pg, 20*time.Millisecond, nil)
	wd.add(0, 4, &flagEvent{}, nil, time.Now())
	select {
	case <-wd.failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog never reported the stuck all-reduce")
	}
	assert.Contains(t, wd.failure().Error(), "bucket 0 all-reduce on rank 0 did not complete within 20ms")

	wd2 := newWatchdog(pg, time.Hour, nil)
	e := &flagEvent{}
	wd2.add(1, 4, e, nil, time.Now())
	wd2.close()
	wd2.add(2, 4, e, nil, time.Now()) // after close: ignored
	assert.Empty(t, wd2.pending)
	assert.NoError(t, wd2.failure())
}
