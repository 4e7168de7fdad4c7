package ddp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/tensor"
)

// Aborter is an optional interface of a process group (or of a group it
// wraps) whose communicator can be aborted (ncclCommAbort): the collective
// running and every later one fail at once, and events recorded after them
// complete, so no stream waiting for them hangs. The watchdog calls it on
// a bucket's all-reduce that outlived the timeout, as torch's NCCL
// watchdog does; goddp/cuda/sim's Collectives and comm/nccl's groups
// (ncclCommAbort) implement it.
type Aborter interface {
	Abort(cause error)
}

// watchdog watches the all-reduces that the stream-ordered device path
// (deviceBuckets.launch with a StreamReducer) queued without the host
// waiting for them: finalize made the compute queue wait for their events
// on the device and returned. One goroutine polls the pending events, in
// launch order, every poll interval; an all-reduce whose event has not
// completed by its deadline (launch + the process group's timeout), or
// whose Work failed, fails the reducer: the error names the bucket and the
// rank, the group is aborted (Aborter) so the device queues waiting on it
// drain, and the next Forward returns the error (as torch's
// ProcessGroupNCCL watchdog aborts the communicator and the next
// collective raises). It never waits for an event, so it cannot hang.
type watchdog struct {
	rank    int
	timeout time.Duration
	every   time.Duration
	abort   func(error)
	tl      *Timeline

	mu      sync.Mutex
	pending []watched
	running bool
	err     error
	failed  chan struct{} // closed when err is set
	wake    chan struct{}
	stop    chan struct{}
	stopped bool
}

// watched is one bucket's all-reduce on the device.
type watched struct {
	bucket   int
	bytes    int
	done     func() bool // its event has completed
	w        backend.Work
	launch   time.Time
	deadline time.Time
}

// pollEvery is how often the watchdog looks at the pending events: a
// fiftieth of the timeout, so that a timeout is reported at most 2% late,
// within [0.5 ms, 50 ms], so that it costs nothing next to a step at the
// default timeout (torch's watchdog sleeps 100 ms between looks).
func pollEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/50, 500*time.Microsecond), 50*time.Millisecond)
}

func newWatchdog(pg backend.ProcessGroup, timeout time.Duration, tl *Timeline) *watchdog {
	wd := &watchdog{rank: pg.Rank(), timeout: timeout, every: pollEvery(timeout), tl: tl,
		failed: make(chan struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if a, ok := backend.As[Aborter](pg); ok {
		wd.abort = a.Abort
	}
	return wd
}

// add watches bucket's all-reduce: done is the event after it (on the
// device), w its Work.
func (wd *watchdog) add(bucket, bytes int, done tensor.Event, w backend.Work, launch time.Time) {
	e := watched{bucket: bucket, bytes: bytes, done: querier(done), w: w, launch: launch, deadline: launch.Add(wd.timeout)}
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if wd.stopped || wd.err != nil {
		return
	}
	wd.pending = append(wd.pending, e)
	if !wd.running {
		wd.running = true
		go wd.loop()
	}
	select {
	case wd.wake <- struct{}{}:
	default:
	}
}

// querier returns a non-blocking completion test for e: its Query, or,
// for an event without one, a goroutine that waits for it once.
func querier(e tensor.Event) func() bool {
	if q, ok := e.(tensor.EventQuerier); ok {
		return q.Query
	}
	ch := make(chan struct{})
	go func() { e.Synchronize(); close(ch) }()
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

func (wd *watchdog) loop() {
	tick := time.NewTicker(wd.every)
	defer tick.Stop()
	for {
		wd.mu.Lock()
		idle := len(wd.pending) == 0
		wd.mu.Unlock()
		if idle {
			select {
			case <-wd.wake:
			case <-wd.stop:
				return
			}
		}
		select {
		case <-tick.C:
		case <-wd.stop:
			return
		}
		wd.check(time.Now())
	}
}

// check retires the completed all-reduces in launch order and fails on
// the first that failed or is past its deadline.
func (wd *watchdog) check(now time.Time) {
	wd.mu.Lock()
	pending := append([]watched(nil), wd.pending...)
	wd.mu.Unlock()
	retired := 0
	var failure error
	for _, e := range pending {
		if e.done() && (e.w == nil || e.w.IsCompleted()) {
			if e.w != nil {
				if err := e.w.Wait(context.Background()); err != nil { // completed: returns at once
					failure = fmt.Errorf("ddp: bucket %d all-reduce (%d bytes) on rank %d failed: %w", e.bucket, e.bytes, wd.rank, err)
					break
				}
			}
			if wd.tl != nil {
				wd.tl.record(fmt.Sprintf("allreduce bucket %d", e.bucket), "comm", tidComm, e.launch, now.Sub(e.launch),
					map[string]any{"bytes": e.bytes, "stream ordered": true})
			}
			retired++
			continue
		}
		if now.After(e.deadline) {
			then := "the process group was aborted"
			if wd.abort == nil {
				then = "the process group cannot be aborted, so the device queues may still wait for it"
			}
			failure = fmt.Errorf("ddp: bucket %d all-reduce on rank %d did not complete within %v (%d bytes; %s): %w",
				e.bucket, wd.rank, wd.timeout, e.bytes, then, ErrTimeout)
			break
		}
		// Later all-reduces run after this one on the group's stream.
		break
	}
	wd.mu.Lock()
	if retired <= len(wd.pending) { // close may have dropped them meanwhile
		wd.pending = wd.pending[retired:]
	}
	if failure != nil && wd.err == nil && !wd.stopped {
		wd.err = failure
		wd.pending = nil
		close(wd.failed)
	} else {
		failure = nil
	}
	wd.mu.Unlock()
	if failure != nil && wd.abort != nil {
		wd.abort(failure)
	}
}

// failure returns the error that failed the reducer, or nil.
func (wd *watchdog) failure() error {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	return wd.err
}

// close stops the goroutine; pending all-reduces are no longer watched.
func (wd *watchdog) close() {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if !wd.stopped {
		wd.stopped = true
		close(wd.stop)
	}
	wd.pending = nil
}

// syncQueue waits for q, or for the watchdog to fail the reducer first:
// a queue that waits on the device for an all-reduce that never
// completes (and a group that cannot be aborted) does not hang the host.
func (wd *watchdog) syncQueue(q Queue) error {
	ch := make(chan error, 1)
	go func() { ch <- q.Synchronize() }()
	select {
	case err := <-ch:
		return err
	case <-wd.failed:
		return wd.failure()
	}
}
