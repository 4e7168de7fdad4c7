package comm

import (
	"context"
	"sync"
)

// work is the Work every backend returns: a future completed exactly once
// with an error (nil on success). Completion closes a channel, so any
// number of goroutines may Wait, before or after completion.
type work struct {
	once sync.Once
	done chan struct{}
	err  error
	// onDone, when set, runs once right after completion (e.g. to copy a
	// result out of a staging buffer before waiters wake). Set it before
	// the work is handed to anyone else.
	onDone func(err error) error
}

// newWork returns a pending work.
func newWork() *work { return &work{done: make(chan struct{})} }

// failedWork returns a work already completed with err.
func failedWork(err error) *work {
	w := newWork()
	w.complete(err)
	return w
}

// complete finishes the work with err; later calls are ignored. It reports
// whether this call was the one that completed it.
func (w *work) complete(err error) bool {
	first := false
	w.once.Do(func() {
		if w.onDone != nil {
			err = w.onDone(err)
		}
		w.err = err
		close(w.done)
		first = true
	})
	return first
}

// Wait blocks until the work completes or ctx ends. The op itself carries
// the group timeout, so a nil-deadline ctx still never waits forever on a
// dead peer.
func (w *work) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	default:
	}
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsCompleted reports whether the work has finished.
func (w *work) IsCompleted() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// Done exposes the completion channel (closed on completion), for select loops.
func (w *work) Done() <-chan struct{} { return w.done }

// Err returns the result; valid only after Done is closed.
func (w *work) Err() error { return w.err }

// Future is the Work of backends that live outside this package (comm/mpi,
// comm/nccl): a future completed exactly once by Complete, so every backend
// shares one implementation of Work's semantics.
type Future struct{ w *work }

// NewFuture returns a pending Future.
func NewFuture() *Future { return &Future{w: newWork()} }

// FailedFuture returns a Future already completed with err (an op refused
// before it started).
func FailedFuture(err error) *Future { return &Future{w: failedWork(err)} }

// Complete finishes the future with err (nil on success); later calls are
// ignored. It reports whether this call completed it.
func (f *Future) Complete(err error) bool { return f.w.complete(err) }

// Wait blocks until the future completes or ctx ends.
func (f *Future) Wait(ctx context.Context) error { return f.w.Wait(ctx) }

// IsCompleted reports whether the future has completed.
func (f *Future) IsCompleted() bool { return f.w.IsCompleted() }
