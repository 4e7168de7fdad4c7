package sim

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// Collectives gives a process group the shape the nccl backend has on a
// GPU: collectives on device memory, enqueued on a stream of the group's
// own and ordered against other streams by events only. It stands in for
// NCCL so that code which hands device buffers to the group (DDP's
// buckets with OnDevice) can be tested without a GPU; the data itself
// moves through the wrapped group on the host (the simulated device's
// memory is host memory). Every other method is the wrapped group's.
//
// As NCCL's communicator does, the group issues every collective, device
// or host, on its stream in the order of the calls: a host collective
// (AllReduce, Broadcast, Barrier on host buffers, which NCCL stages onto
// its stream) waits behind the device collectives called before it, so
// that every rank issues the same sequence to the wrapped group even when
// the device collectives run later than the calls (ddp's stream-ordered
// buckets, then the next Forward's broadcasts).
type Collectives struct {
	backend.ProcessGroup
	dev     *Device
	stream  *Stream
	timeout time.Duration

	// ctx ends at Abort: the collective running on the stream, and every
	// later one, fails at once (ncclCommAbort).
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// NewCollectives wraps pg for device collectives on dev, each bounded by
// timeout (0: 10 minutes, comm's default).
func NewCollectives(pg backend.ProcessGroup, dev *Device, timeout time.Duration) *Collectives {
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Collectives{ProcessGroup: pg, dev: dev, stream: dev.NewStream("collectives"), timeout: timeout, ctx: ctx, cancel: cancel}
}

// Abort fails the collective the group's stream is running and every
// later one, with cause (ncclCommAbort, which torch's watchdog calls on a
// timed-out collective): the stream's events still complete, so no stream
// waiting for them hangs. The group is unusable afterwards.
func (c *Collectives) Abort(cause error) { c.cancel(cause) }

// opContext bounds one collective on the stream by the timeout and Abort.
func (c *Collectives) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, c.timeout)
}

// onStream runs the wrapped group's host collective start on the group's
// stream, in call order after the device collectives (see Collectives);
// the Work completes when it has.
func (c *Collectives) onStream(name string, start func() backend.Work) backend.Work {
	w := work{backend.NewFuture()}
	var opErr error
	ran := false // the stream skips the op after an earlier failure
	c.stream.Enqueue(name, func() error {
		ran = true
		ctx, cancel := c.opContext()
		defer cancel()
		opErr = start().Wait(ctx)
		if opErr != nil && c.ctx.Err() != nil {
			opErr = fmt.Errorf("%w: sim: %s aborted: %w", backend.ErrPeerFailed, name, context.Cause(c.ctx))
		}
		return opErr
	})
	done := c.dev.NewEvent()
	done.Record(c.stream)
	go func() {
		done.Synchronize()
		if !ran {
			opErr = fmt.Errorf("sim: %s skipped: %w", name, c.stream.Err())
		}
		w.Complete(opErr)
	}()
	return w
}

// AllReduce reduces a host buffer on the group's stream, in call order.
func (c *Collectives) AllReduce(buf backend.Buffer, op backend.ReduceOp) backend.Work {
	return c.onStream("host all-reduce", func() backend.Work { return c.ProcessGroup.AllReduce(buf, op) })
}

// Broadcast broadcasts a host buffer on the group's stream, in call order.
func (c *Collectives) Broadcast(buf backend.Buffer, root int) backend.Work {
	return c.onStream("host broadcast", func() backend.Work { return c.ProcessGroup.Broadcast(buf, root) })
}

// Barrier runs on the group's stream, in call order.
func (c *Collectives) Barrier() backend.Work {
	return c.onStream("barrier", c.ProcessGroup.Barrier)
}

// Unwrap returns the wrapped group.
func (c *Collectives) Unwrap() backend.ProcessGroup { return c.ProcessGroup }

// Device is the simulated device whose memory the group reduces.
func (c *Collectives) Device() *Device { return c.dev }

// Stream is the group's own stream (NCCL's).
func (c *Collectives) Stream() *Stream { return c.stream }

// AllReduceDevice enqueues on the group's stream, after after completes, an
// in-place all-reduce of n elements of dtype (Float32, Float16 or
// BFloat16) of b from byte offset off. done completes with it; so does
// the Work, which also carries its error.
func (c *Collectives) AllReduceDevice(b *Buffer, off, n int, dtype backend.DType, op backend.ReduceOp, after *Event) (backend.Work, *Event) {
	w := work{backend.NewFuture()}
	var err error
	switch {
	case b.Device() != c.dev:
		err = fmt.Errorf("%w: buffer on %v, group's device %v", backend.ErrBadArgument, b.Device(), c.dev)
	case dtype != backend.Float32 && dtype != backend.Float16 && dtype != backend.BFloat16:
		err = fmt.Errorf("%w: device all-reduce of %v", backend.ErrBadArgument, dtype)
	}
	if err != nil {
		w.Complete(err)
		return w, c.dev.NewEvent()
	}
	var opErr error // written by the stream's job, read after done fires
	ran := false    // the stream skips the job after an earlier failure
	c.stream.WaitEvent(after)
	c.stream.Enqueue("all-reduce", func() error {
		ran = true
		if err := b.check(off, n*dtype.Size(), "all-reduce"); err != nil {
			opErr = err
			return err
		}
		var buf backend.Buffer
		switch p := unsafe.Add(b.p, off); dtype {
		case backend.Float16:
			buf = backend.Float16s(unsafe.Slice((*uint16)(p), n))
		case backend.BFloat16:
			buf = backend.BFloat16s(unsafe.Slice((*uint16)(p), n))
		default:
			buf = backend.Float32s(unsafe.Slice((*float32)(p), n))
		}
		ctx, cancel := c.opContext()
		defer cancel()
		opErr = c.ProcessGroup.AllReduce(buf, op).Wait(ctx)
		if opErr != nil && c.ctx.Err() != nil {
			opErr = fmt.Errorf("%w: sim: device all-reduce aborted: %w", backend.ErrPeerFailed, context.Cause(c.ctx))
		}
		return opErr
	})
	done := c.dev.NewEvent()
	done.Record(c.stream)
	go func() {
		done.Synchronize()
		if !ran {
			// Skipped: the stream failed before it (the op that
			// completed before a later one failed keeps its result).
			opErr = fmt.Errorf("sim: device all-reduce skipped: %w", c.stream.Err())
		}
		w.Complete(opErr)
	}()
	return w, done
}

// AsCollectives returns the Collectives pg is or wraps (through Unwrap).
func AsCollectives(pg backend.ProcessGroup) (*Collectives, bool) {
	return backend.As[*Collectives](pg)
}

// work is backend's Future, except that a Wait whose ctx ends first
// says ErrTimeout, so that a caller's deadline reads as a timeout as any
// collective's does (errors.Is(err, backend.ErrTimeout)).
type work struct{ *backend.Future }

func (w work) Wait(ctx context.Context) error {
	err := w.Future.Wait(ctx)
	select {
	case <-w.Done():
		return w.Err()
	default:
		return fmt.Errorf("%w: %w", backend.ErrTimeout, err)
	}
}
