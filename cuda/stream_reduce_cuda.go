//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	comm "github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/nccl"
	"github.com/goddp/goddp/tensor"
)

// AllReduceOn implements ddp.StreamReducer with an nccl group on this GPU
// (nccl.AsStream): an event is recorded on q's stream (after the bucket's
// ready event, which ddp made q wait for, and the 16-bit narrowing of a
// compression hook), and the group makes its stream wait for it, enqueues
// ncclAllReduce on m and records done, a fresh event, right after it, all
// before AllReduceOn returns (as torch's ProcessGroupNCCL records its
// work's end event). done is a marker of q's device: a queue Waits for it
// on the GPU (cuStreamWaitEvent) and ddp's watchdog Queries it
// (cuEventQuery); the Work completes when the nccl backend's watcher has
// seen the all-reduce end. The group's Abort (ncclCommAbort) is what
// ddp's watchdog calls on a timeout. ok is false for a group that is not
// nccl's on this GPU.
func (d *queueDevice) AllReduceOn(pg comm.ProcessGroup, q tensor.Queue, m tensor.Mem, n int, dtype comm.DType, op comm.ReduceOp) (comm.Work, tensor.Event, bool) {
	sc, ok := nccl.AsStream(pg)
	cq, qok := q.(*queue)
	dm, mok := m.(*mem)
	if !ok || !qok || !mok || cq.d != d || dm.d != d || sc.Device() != d.c.ordinal {
		return nil, nil, false
	}
	ready := cq.Record().(*marker)
	done := cq.unrecorded()
	if ready.e == nil || done.e == nil {
		// The queue has failed (its error says why); done, never
		// recorded, is complete.
		err := cq.failed()
		if err == nil {
			err = fmt.Errorf("cuda: no events for a stream-ordered all-reduce on %v", d)
		}
		return comm.FailedFuture(err), done, true
	}
	w := sc.AllReduceDeviceOn(nccl.DeviceBuffer{DType: dtype, Ptr: uintptr(dm.p), Count: n, Stream: uintptr(cq.s)}, op,
		uintptr(ready.e), uintptr(done.e))
	runtime.KeepAlive(ready) // its event may go once the group's stream waits for it
	return w, done, true
}

// unrecorded returns a marker with a new event that is not recorded yet
// (someone else records it: the nccl group, after its all-reduce); its
// errors go to q, and the event is destroyed when the marker is collected.
func (q *queue) unrecorded() *marker {
	m := &marker{q: q}
	err := q.d.call(func() error {
		var err error
		m.e, err = q.d.qd.newEvent()
		return err
	})
	if err != nil {
		q.fail(fmt.Errorf("creating an event: %w", err))
		return m
	}
	d := q.d
	runtime.AddCleanup(m, func(e unsafe.Pointer) { _ = d.call(func() error { return d.qd.destroyEvent(e) }) }, m.e)
	return m
}
