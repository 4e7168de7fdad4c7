//go:build cgo

package nccl

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"github.com/goddp/goddp/comm/backend"
)

var _ StreamCollectives = (*group)(nil)

func (c cCalls) waitFor(ev uintptr) error {
	if rc := C.gdn_stream_wait_for(c.g.lib.l, c.g.ctx, c.g.stream, C.uintptr_t(ev)); rc != 0 {
		return c.g.lib.cuErr("cuStreamWaitEvent (the caller's ready event)", rc)
	}
	return nil
}

func (c cCalls) recordInto(ev uintptr) error {
	if rc := C.gdn_event_record_into(c.g.lib.l, c.g.ctx, C.uintptr_t(ev), c.g.stream); rc != 0 {
		return c.g.lib.cuErr("cuEventRecord (the caller's end event)", rc)
	}
	return nil
}

// AllReduceDeviceOn implements StreamCollectives: the wait for ready,
// ncclAllReduce and the record of end are on the group's stream when it
// returns (the issuer makes the calls, in order after the ops queued
// before; this call waits for it).
func (g *group) AllReduceDeviceOn(buf DeviceBuffer, rop backend.ReduceOp, ready, end uintptr) backend.Work {
	dt, op, err := g.types(buf.DType, rop, true)
	if err == nil {
		err = checkDevice(buf)
	}
	if err == nil && end == 0 {
		err = fmt.Errorf("%w: no end event for a stream-ordered all-reduce", backend.ErrBadArgument)
	}
	if err != nil {
		return g.badArg("allreduce", buf.Bytes(), err)
	}
	p := C.gdn_devptr(buf.Ptr)
	return g.allReduceOn("allreduce", buf.Bytes(), ready, end, func() error {
		if rc := C.gdn_allreduce(g.lib.l, g.ctx, p, p, C.size_t(buf.Count), dt, op, g.comm, g.stream); rc != 0 {
			return g.lib.ncclErr("allreduce", rc)
		}
		return nil
	})
}
