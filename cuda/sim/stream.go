package sim

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Stream is an asynchronous, in-order queue of device work, as a CUDA
// stream: each call enqueues and returns at once, and one goroutine runs
// the queue in order. Streams of a device run concurrently; only events
// order them (Event, WaitEvent). The first failing operation's error is
// sticky: later operations are skipped and Synchronize returns it.
type Stream struct {
	dev  *Device
	name string

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []op
	running bool // the goroutine holds an operation
	closed  bool
	err     error
	delay   time.Duration

	trace atomic.Pointer[Trace] // Device.StartTrace; nil: not traced
}

type op struct {
	name   string
	run    func() error
	always bool // runs even after an error: an event record, so no waiter hangs
}

func newStream(dev *Device, name string) *Stream {
	s := &Stream{dev: dev, name: name}
	s.cond = sync.NewCond(&s.mu)
	go s.loop()
	return s
}

func (s *Stream) String() string { return s.name }

func (s *Stream) loop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			return
		}
		o := s.queue[0]
		s.queue[0] = op{}
		s.queue = s.queue[1:]
		s.running = true
		delay, skip := s.delay, s.err != nil && !o.always
		s.mu.Unlock()
		var err error
		if !skip {
			if delay > 0 {
				time.Sleep(delay)
			}
			if t := s.trace.Load(); t != nil {
				start := time.Now()
				err = o.run()
				t.add(s.name, o.name, start, time.Now())
			} else {
				err = o.run()
			}
		}
		s.mu.Lock()
		s.running = false
		if err != nil && s.err == nil {
			s.err = fmt.Errorf("sim: %s on stream %s: %w", o.name, s.name, err)
		}
		s.cond.Broadcast()
	}
}

// Enqueue adds host work to the stream (cuLaunchHostFunc): f runs after
// everything enqueued before it and before anything enqueued after it.
// The simulated device's own operations are built on it.
func (s *Stream) Enqueue(name string, f func() error) { s.enqueue(op{name: name, run: f}) }

func (s *Stream) enqueue(o op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		if s.err == nil {
			s.err = fmt.Errorf("sim: %s on stream %s: %w", o.name, s.name, ErrClosed)
		}
		if o.always {
			_ = o.run()
		}
		return
	}
	s.queue = append(s.queue, o)
	s.cond.Broadcast()
}

// Synchronize blocks until every operation enqueued so far has run and
// returns the stream's sticky error.
func (s *Stream) Synchronize() error {
	e := s.dev.NewEvent()
	e.Record(s)
	e.Synchronize()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Err returns the stream's sticky error without waiting.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Sleep enqueues d of simulated device time: the stream is busy for d, as
// if running a long kernel (overlap tests use it for compute time).
func (s *Stream) Sleep(d time.Duration) {
	s.Enqueue("sleep", func() error { time.Sleep(d); return nil })
}

// SetDelay makes every operation the stream starts from now on wait d
// first: a slow device. A test injects it to show a missing event wait as
// stale data in the other stream's view.
func (s *Stream) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// WaitEvent makes work enqueued on s after this call wait until e
// completes (cuStreamWaitEvent). It takes e's most recent Record at the
// time of the call; an event never recorded is complete.
func (s *Stream) WaitEvent(e *Event) {
	done := e.current()
	s.Enqueue("wait event", func() error { <-done; return nil })
}

func (s *Stream) close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	for s.running || len(s.queue) > 0 {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// Event marks a point in a stream (a CUDA event): Record captures the work
// enqueued on a stream so far, and the event completes when the stream has
// run it. Re-recording moves the event to a new point, as cuEventRecord.
type Event struct {
	mu   sync.Mutex
	done chan struct{}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// NewEvent returns an event that has never been recorded (so is complete).
func (d *Device) NewEvent() *Event { return &Event{done: closedChan} }

// Record moves e to the end of the work enqueued on s so far.
func (e *Event) Record(s *Stream) {
	c := make(chan struct{})
	e.mu.Lock()
	e.done = c
	e.mu.Unlock()
	s.enqueue(op{name: "record event", run: func() error { close(c); return nil }, always: true})
}

func (e *Event) current() chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.done
}

// Synchronize blocks the host until e's most recent Record completes.
func (e *Event) Synchronize() { <-e.current() }

// Query reports whether e has completed, without blocking.
func (e *Event) Query() bool {
	select {
	case <-e.current():
		return true
	default:
		return false
	}
}
