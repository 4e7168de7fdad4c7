package backend

import (
	"context"
	"sync"
)

// Future is the Work every backend returns: a future completed exactly once
// with an error (nil on success). Completion closes a channel, so any
// number of goroutines may Wait, before or after completion. Backends embed
// it (or return it) so that all of them share one implementation of Work's
// semantics.
type Future struct {
	once sync.Once
	done chan struct{}
	err  error
}

// NewFuture returns a pending Future.
func NewFuture() *Future { return &Future{done: make(chan struct{})} }

// FailedFuture returns a Future already completed with err (an op refused
// before it started).
func FailedFuture(err error) *Future {
	f := NewFuture()
	f.Complete(err)
	return f
}

// Complete finishes the future with err (nil on success); later calls are
// ignored. It reports whether this call was the one that completed it.
func (f *Future) Complete(err error) bool {
	first := false
	f.once.Do(func() {
		f.err = err
		close(f.done)
		first = true
	})
	return first
}

// Wait blocks until the future completes or ctx ends. The op itself carries
// the group timeout, so a nil-deadline ctx still never waits forever on a
// dead peer.
func (f *Future) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	default:
	}
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsCompleted reports whether the future has completed.
func (f *Future) IsCompleted() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// Done exposes the completion channel (closed on completion), for select loops.
func (f *Future) Done() <-chan struct{} { return f.done }

// Err returns the result; valid only after Done is closed.
func (f *Future) Err() error { return f.err }

// besideKey marks a context with WaitBeside.
type besideKey struct{}

// WaitBeside returns ctx marked for a Wait that runs beside other work of
// the same process: DDP's bucket watchers wait on their all-reduces while
// backward computes. A backend should then wait without holding a core for
// long (a short spin, then yield or block), since a long spin takes the
// core from that work. An unmarked Wait is one whose caller has nothing else
// to do, which may spin for the fastest answer.
func WaitBeside(ctx context.Context) context.Context {
	return context.WithValue(ctx, besideKey{}, true)
}

// IsWaitBeside reports whether ctx (or a context derived from it) was
// marked by WaitBeside.
func IsWaitBeside(ctx context.Context) bool {
	b, _ := ctx.Value(besideKey{}).(bool)
	return b
}
