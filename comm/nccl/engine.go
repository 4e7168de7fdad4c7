package nccl

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// libCalls is what the engine needs from CUDA and NCCL: group.go
// implements it with cgo, engine_test.go with a fake. Events are recorded
// on the group's stream.
type libCalls interface {
	recordEvent() (unsafe.Pointer, error)
	queryEvent(ev unsafe.Pointer) (done bool, err error)
	syncEvent(ev unsafe.Pointer) error // blocks until the event completes
	destroyEvent(ev unsafe.Pointer)
	syncStream() error
	asyncError() error // ncclCommGetAsyncError: nil while healthy
	// waitFor makes the group's stream wait for a caller's CUevent
	// (cuStreamWaitEvent); recordInto records a caller's CUevent on it
	// (cuEventRecord). The stream-ordered all-reduce uses both (stream.go).
	waitFor(ev uintptr) error
	recordInto(ev uintptr) error
	abortComm() error // ncclCommAbort
	destroyComm() error
}

// engine orders, issues, watches and times out a group's ops.
//
// A caller only queues an op (under mu, which is never held across a
// library call). One issuer goroutine makes the library calls that put
// ops on the stream, in order; they can block inside NCCL (its lazy
// connection setup waits for the peers), so each is bounded by a timer
// that aborts the communicator when the op's deadline passes, which
// fails the op with backend.ErrTimeout and makes the blocked call return. A
// watcher goroutine then completes the issued ops in stream order: it
// blocks in cuEventSynchronize on the event recorded after each op, so a
// Work completes when the stream reaches it, not at the next tick of a
// polling loop, while a supervisor checks NCCL's asynchronous error and
// the deadline beside it and aborts the communicator on either (the abort
// ends the pending kernels, and with them the synchronisation).
//
// Every use of the communicator goes through a guard (gmu): once abort
// has begun no new call starts, and ncclCommAbort waits for the calls in
// flight, so it never frees the communicator under an enqueue or a
// status query. The one exception is a call that is blocked inside NCCL:
// abort waits abortGrace for it, then aborts anyway, since that is what
// unblocks it.
type engine struct {
	lib     libCalls
	rank    int
	timeout time.Duration
	logf    func(format string, args ...any)

	mu     sync.Mutex // protects seq, closed and sending on issue
	seq    uint64
	closed bool
	issue  chan *op
	issued chan *op      // issuer -> watcher
	idone  chan struct{} // closed when the issuer returns
	wdone  chan struct{} // closed when the watcher returns

	gmu    sync.Mutex // the communicator guard
	broken error      // why the communicator was aborted (or closed)
	short  int        // status queries in flight (never block)
	long   int        // enqueue calls in flight (may block in NCCL)

	once    sync.Once
	closeEr error
}

// abortGrace is how long abort lets an enqueue call in flight return
// before it aborts the communicator under it.
const abortGrace = time.Second

// op is one queued collective.
type op struct {
	name     string
	bytes    int
	seq      uint64
	deadline time.Time
	launch   func() error   // puts the op on the stream (issuer only)
	done     func()         // on success, before the Work completes (copy-out, staging release)
	undo     func()         // when the op never reached the stream
	event    unsafe.Pointer // a CUevent
	w        *work
	// launched, when not nil, is closed once the issuer has made the
	// op's library calls or given up on them (enqueueNow waits for it).
	launched chan struct{}
}

func newEngine(lib libCalls, rank int, timeout time.Duration, logf func(string, ...any)) *engine {
	e := &engine{lib: lib, rank: rank, timeout: timeout, logf: logf,
		issue: make(chan *op, 1024), issued: make(chan *op, 1024),
		idone: make(chan struct{}), wdone: make(chan struct{})}
	go e.issuer()
	go e.watcher()
	return e
}

// stderrLogf is the logger when Options.Logf is nil: rank 0 writes to
// stderr, the others are silent, as comm's tcp and shm backends do.
func stderrLogf(rank int, w io.Writer) func(string, ...any) {
	if rank != 0 {
		return func(string, ...any) {}
	}
	return func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
}

func (e *engine) opErr(o *op, kind error, detail string, cause error) error {
	return &backend.OpError{Kind: kind, Op: o.name, Seq: o.seq, Bytes: o.bytes, Rank: e.rank, Detail: detail, Err: cause}
}

// submit queues an op and returns its Work at once.
func (e *engine) submit(name string, bytes int, launch func() error, done, undo func()) backend.Work {
	return e.queue(name, bytes, launch, done, undo, nil).w
}

// queue queues an op; launched, when not nil, is closed once the issuer
// has made its library calls or given up on them.
func (e *engine) queue(name string, bytes int, launch func() error, done, undo func(), launched chan struct{}) *op {
	if undo == nil {
		undo = func() {}
	}
	if done == nil {
		done = func() {}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	o := &op{name: name, bytes: bytes, seq: e.seq, deadline: time.Now().Add(e.timeout),
		launch: launch, done: done, undo: undo, w: newWork(), launched: launched}
	if e.closed {
		undo()
		o.w.Complete(e.opErr(o, backend.ErrClosed, "", nil))
		if launched != nil {
			close(launched)
		}
		return o
	}
	e.issue <- o
	return o
}

func (e *engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// enter starts a use of the communicator, unless it was aborted.
func (e *engine) enter(long bool) error {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	if e.broken != nil {
		return e.broken
	}
	if long {
		e.long++
	} else {
		e.short++
	}
	return nil
}

func (e *engine) leave(long bool) {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	if long {
		e.long--
	} else {
		e.short--
	}
}

func (e *engine) brokenErr() error {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	return e.broken
}

// issuer puts the queued ops on the stream, in order.
func (e *engine) issuer() {
	defer close(e.idone)
	defer close(e.issued)
	for o := range e.issue {
		e.issueOne(o)
		if o.launched != nil {
			close(o.launched)
		}
	}
}

// issueOne makes o's library calls, bounded by its deadline, and hands
// it to the watcher.
func (e *engine) issueOne(o *op) {
	if err := e.enter(true); err != nil {
		o.undo()
		o.w.Complete(e.opErr(o, backend.ErrPeerFailed, "the communicator was aborted by an earlier failure", err))
		return
	}
	timer := time.AfterFunc(time.Until(o.deadline), func() {
		err := fmt.Errorf("still inside NCCL after %v (a rank did not issue it, or connection setup is stuck); communicator aborted", e.timeout)
		o.w.Complete(e.opErr(o, backend.ErrTimeout, "a rank did not issue it, or is stuck", err))
		e.abort(err)
	})
	err := o.launch()
	var ev unsafe.Pointer
	if err == nil {
		var rerr error
		if ev, rerr = e.lib.recordEvent(); rerr != nil {
			// On the stream but not watchable: wait for it here.
			if serr := e.lib.syncStream(); serr != nil {
				err = errors.Join(rerr, serr)
			}
		}
	}
	e.leave(true)
	if !timer.Stop() {
		// Timed out inside the call: the Work has failed. Its
		// staging memory is not reused (the stream may still hold it).
		if ev != nil {
			e.lib.destroyEvent(ev)
		}
		return
	}
	switch {
	case err != nil:
		o.undo()
		o.w.Complete(e.opErr(o, backend.ErrPeerFailed, "enqueueing failed", err))
	case ev == nil: // completed by the stream synchronisation
		o.done()
		o.w.Complete(nil)
	default:
		o.event = ev
		e.issued <- o
	}
}

// watcher completes the issued ops in stream order.
func (e *engine) watcher() {
	defer close(e.wdone)
	for o := range e.issued {
		err := e.await(o)
		e.lib.destroyEvent(o.event)
		if err == nil {
			o.done()
		}
		o.w.Complete(err)
	}
}

// superviseEvery is how often await checks NCCL's asynchronous error and
// the op's deadline while it blocks on the op's event. It bounds how late
// a peer's failure or a timeout is noticed, not when a healthy op
// completes.
const superviseEvery = 2 * time.Millisecond

// await waits for o's event; a supervisor watches NCCL's asynchronous
// error and o's deadline meanwhile.
func (e *engine) await(o *op) error {
	if broken := e.brokenErr(); broken != nil {
		return e.opErr(o, backend.ErrPeerFailed, "the communicator was aborted by an earlier failure", broken)
	}
	done, err := e.lib.queryEvent(o.event)
	if err != nil {
		e.abort(err)
		return e.opErr(o, backend.ErrPeerFailed, "", err)
	}
	if done {
		return nil
	}
	stop := make(chan struct{})
	verdict := make(chan error, 1) // the supervisor's reason for aborting, or nil
	go func() { verdict <- e.supervise(o, stop) }()
	err = e.lib.syncEvent(o.event)
	close(stop)
	if why := <-verdict; why != nil {
		return why
	}
	if broken := e.brokenErr(); broken != nil {
		return e.opErr(o, backend.ErrPeerFailed, "the communicator was aborted by an earlier failure", broken)
	}
	if err != nil {
		e.abort(err)
		return e.opErr(o, backend.ErrPeerFailed, "", err)
	}
	return nil
}

// supervise runs beside await's blocking wait until stop is closed. On
// NCCL's asynchronous error or o's deadline it aborts the communicator,
// which ends the wait, and returns o's error.
func (e *engine) supervise(o *op, stop <-chan struct{}) error {
	tick := time.NewTicker(superviseEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		if err := e.enter(false); err == nil {
			aerr := e.lib.asyncError()
			e.leave(false)
			if aerr != nil {
				e.abort(aerr)
				return e.opErr(o, backend.ErrPeerFailed, "a peer failed or the network broke", aerr)
			}
		}
		if time.Now().After(o.deadline) {
			err := fmt.Errorf("not completed after %v; communicator aborted", e.timeout)
			e.abort(err)
			return e.opErr(o, backend.ErrTimeout, "a rank did not issue it, or is stuck", err)
		}
	}
}

// abort makes the communicator unusable and ends its pending kernels;
// only the first call does anything.
func (e *engine) abort(cause error) {
	e.gmu.Lock()
	if e.broken != nil {
		e.gmu.Unlock()
		return
	}
	e.broken = cause
	grace := time.Now().Add(abortGrace)
	for e.short > 0 || (e.long > 0 && time.Now().Before(grace)) {
		e.gmu.Unlock()
		time.Sleep(100 * time.Microsecond)
		e.gmu.Lock()
	}
	e.gmu.Unlock()
	if err := e.lib.abortComm(); err != nil {
		e.logf("nccl: rank %d: ncclCommAbort: %v", e.rank, err)
	}
	e.logf("nccl: rank %d: communicator aborted: %v", e.rank, cause)
}

// close stops taking ops, lets the queued ones finish (each bounded by
// its deadline), and destroys the communicator unless it was aborted.
// healthy: it was destroyed normally (the staging memory is idle);
// leaked: a call is still blocked inside NCCL, so nothing it may use
// (stream, context) can be freed.
func (e *engine) close() (healthy, leaked bool, err error) {
	e.mu.Lock()
	e.closed = true
	close(e.issue)
	e.mu.Unlock()
	select {
	case <-e.idone:
	case <-time.After(e.timeout + 2*abortGrace):
		// A call stayed blocked inside NCCL even after the abort: leave
		// the communicator and its memory alone rather than free them
		// under it.
		return false, true, fmt.Errorf("%w: nccl: rank %d: an NCCL call did not return after ncclCommAbort; the communicator is leaked", backend.ErrTimeout, e.rank)
	}
	<-e.wdone
	e.gmu.Lock()
	broken := e.broken
	if broken == nil {
		e.broken = backend.ErrClosed
	}
	e.gmu.Unlock()
	if broken != nil {
		return false, false, nil
	}
	return true, false, e.lib.destroyComm()
}
