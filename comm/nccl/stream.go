package nccl

import (
	"fmt"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// StreamCollectives is what the nccl group offers a caller that orders
// its streams after a collective on the device, without the host waiting
// (ddp's stream-ordered buckets, through goddp/cuda's queues): as torch's
// ProcessGroupNCCL does on the calling thread, the all-reduce is on the
// group's stream when the call returns, and an event the caller gave is
// recorded right after it there, so another stream can wait for it at
// once (cuStreamWaitEvent) and a watchdog can poll it (cuEventQuery).
type StreamCollectives interface {
	DeviceCollectives
	// AllReduceDeviceOn makes the group's stream wait for ready (a CUevent
	// the caller recorded on the stream that produced buf; 0: no wait, and
	// buf.Stream is not used), enqueues ncclAllReduce on buf in place, and
	// records end (a CUevent the caller created on the group's device and
	// keeps) right after it, all before it returns and in order after
	// every op called before it. The Work completes when the all-reduce
	// has on the device, or fails; a failed enqueue leaves end unrecorded,
	// and an event never recorded counts as complete (cuEventQuery,
	// cuStreamWaitEvent), so a caller that waits for end must check the
	// Work. It may block, as NCCL's enqueue does (lazy connection setup
	// waits for the peers), for at most the group's timeout and the abort
	// that ends it.
	AllReduceDeviceOn(buf DeviceBuffer, op backend.ReduceOp, ready, end uintptr) backend.Work
	// Abort aborts the communicator (ncclCommAbort): the collective
	// running and every later one fail with backend.ErrPeerFailed, and
	// their events complete, so no stream waiting for them hangs. ddp's
	// watchdog calls it (ddp.Aborter) on an all-reduce past its timeout.
	Abort(cause error)
}

// AsStream returns pg's stream-ordered collectives when pg is (or wraps)
// an nccl group.
func AsStream(pg backend.ProcessGroup) (StreamCollectives, bool) {
	return backend.As[StreamCollectives](pg)
}

// Abort aborts the communicator with cause (ncclCommAbort), as a failed
// or overdue op does: pending and later ops fail with ErrPeerFailed. Only
// the first abort does anything, and none after Close.
func (e *engine) Abort(cause error) {
	if cause == nil {
		cause = fmt.Errorf("aborted by the caller")
	}
	e.abort(cause)
}

// enqueueNow queues an op as submit does and returns once the issuer has
// made its library calls (or failed it): the op is then on the stream,
// after every op queued before it. The wait is bounded by the op's
// deadline and the abort that ends a call blocked inside NCCL; past that
// the Work has failed with ErrTimeout.
func (e *engine) enqueueNow(name string, bytes int, launch func() error) backend.Work {
	launched := make(chan struct{})
	o := e.queue(name, bytes, launch, nil, nil, launched)
	t := time.NewTimer(time.Until(o.deadline) + 2*abortGrace)
	defer t.Stop()
	select {
	case <-launched:
	case <-t.C:
	}
	return o.w
}

// allReduceOn is AllReduceDeviceOn's order on the stream: the wait for
// ready, the collective, then end recorded, issued before it returns.
func (e *engine) allReduceOn(name string, bytes int, ready, end uintptr, collective func() error) backend.Work {
	return e.enqueueNow(name, bytes, func() error {
		if ready != 0 {
			if err := e.lib.waitFor(ready); err != nil {
				return err
			}
		}
		if err := collective(); err != nil {
			return err
		}
		return e.lib.recordInto(end)
	})
}
