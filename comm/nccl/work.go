package nccl

import "context"

// work is the future every op returns; the watcher completes it once.
type work struct {
	done chan struct{}
	err  error
}

func newWork() *work { return &work{done: make(chan struct{})} }

func failed(err error) *work {
	w := newWork()
	w.finish(err)
	return w
}

func (w *work) finish(err error) {
	w.err = err
	close(w.done)
}

// Wait blocks until the op completes or ctx ends; every op also carries
// the group's timeout.
func (w *work) Wait(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		select {
		case <-w.done:
			return w.err
		default:
			return ctx.Err()
		}
	}
}

func (w *work) IsCompleted() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
