//go:build cgo

package nccl

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// ncclType is NCCL's ncclDataType_t for a dtype (nccl.h, NCCL 2.x).
func ncclType(dt backend.DType) (C.int, bool) {
	switch dt {
	case backend.Float32:
		return 7, true
	case backend.Float64:
		return 8, true
	case backend.Int32:
		return 2, true
	case backend.Int64:
		return 4, true
	case backend.Float16:
		return 6, true
	case backend.BFloat16:
		return 9, true
	}
	return 0, false
}

// ncclOp is NCCL's ncclRedOp_t for a reduce op.
func ncclOp(op backend.ReduceOp) (C.int, bool) {
	switch op {
	case backend.Sum:
		return 0, true
	case backend.Product:
		return 1, true
	case backend.Max:
		return 2, true
	case backend.Min:
		return 3, true
	case backend.Avg:
		return 4, true
	}
	return 0, false
}

// types maps a dtype and op to NCCL's, checking the library version for
// bfloat16 and average (NCCL 2.10).
func (g *group) types(dt backend.DType, rop backend.ReduceOp, reduces bool) (C.int, C.int, error) {
	t, ok := ncclType(dt)
	if !ok {
		return 0, 0, fmt.Errorf("%w: dtype %v", backend.ErrBadArgument, dt)
	}
	if dt == backend.BFloat16 && g.lib.ncclVersion < ncclVersionAvgBF16 {
		return 0, 0, fmt.Errorf("%w: bfloat16 needs NCCL 2.10 or later (loaded %d)", backend.ErrUnsupported, g.lib.ncclVersion)
	}
	if !reduces {
		return t, 0, nil
	}
	o, ok := ncclOp(rop)
	if !ok {
		return 0, 0, fmt.Errorf("%w: reduce op %v", backend.ErrBadArgument, rop)
	}
	if rop == backend.Avg && g.lib.ncclVersion < ncclVersionAvgBF16 {
		return 0, 0, fmt.Errorf("%w: avg needs NCCL 2.10 or later (loaded %d)", backend.ErrUnsupported, g.lib.ncclVersion)
	}
	return t, o, nil
}

func (g *group) badArg(name string, bytes int, err error) backend.Work {
	return failed(&backend.OpError{Kind: backend.ErrBadArgument, Op: name, Bytes: bytes, Rank: g.rank, Err: err})
}

// ragged is backend.CheckBuffer wrapping ErrBadArgument.
func ragged(b backend.Buffer) error {
	if err := backend.CheckBuffer(b); err != nil {
		return fmt.Errorf("%w: %w", backend.ErrBadArgument, err)
	}
	return nil
}

// staged runs a collective on host buffers: in is copied into pinned
// memory and to the device, launch runs on the device copies (src holds
// in, dst receives out; they are one region when inPlace), and out is
// copied back when the op completes.
func (g *group) staged(name string, in, out backend.Buffer, inPlace bool, launch func(src, dst C.gdn_devptr) C.int) backend.Work {
	inBytes, outBytes := len(in.Bytes), len(out.Bytes)
	off := 0
	if !inPlace {
		off = (inBytes + 255) &^ 255
	}
	st, err := g.pool.get(off + max(outBytes, inBytes-off, 1))
	if err != nil {
		return failed(&backend.OpError{Kind: backend.ErrPeerFailed, Op: name, Bytes: inBytes, Rank: g.rank, Err: err})
	}
	host := st.hostBytes()
	copy(host, in.Bytes)
	src, dst := st.dev, st.dev+C.gdn_devptr(off)
	launchAll := func() error {
		if rc := C.gdn_h2d(g.lib.l, g.ctx, src, st.host, C.size_t(inBytes), g.stream); rc != 0 {
			return g.lib.cuErr("cuMemcpyHtoDAsync", rc)
		}
		if rc := launch(src, dst); rc != 0 {
			return g.lib.ncclErr(name, rc)
		}
		if rc := C.gdn_d2h(g.lib.l, g.ctx, offsetPtr(st, off), dst, C.size_t(outBytes), g.stream); rc != 0 {
			return g.lib.cuErr("cuMemcpyDtoHAsync", rc)
		}
		return nil
	}
	done := func() {
		copy(out.Bytes, host[off:off+outBytes])
		g.pool.put(st)
	}
	return g.submit(name, inBytes, launchAll, done, func() { g.pool.put(st) })
}

func (g *group) AllReduce(buf backend.Buffer, rop backend.ReduceOp) backend.Work {
	dt, op, err := g.types(buf.DType, rop, true)
	if err == nil {
		err = ragged(buf)
	}
	if err != nil {
		return g.badArg("allreduce", len(buf.Bytes), err)
	}
	n := C.size_t(buf.Len())
	return g.staged("allreduce", buf, buf, true, func(src, dst C.gdn_devptr) C.int {
		return C.gdn_allreduce(g.lib.l, g.ctx, src, dst, n, dt, op, g.comm, g.stream)
	})
}

func (g *group) Broadcast(buf backend.Buffer, root int) backend.Work {
	dt, _, err := g.types(buf.DType, 0, false)
	if err == nil {
		err = ragged(buf)
	}
	if err == nil && (root < 0 || root >= g.size) {
		err = fmt.Errorf("%w: root %d outside world size %d", backend.ErrBadArgument, root, g.size)
	}
	if err != nil {
		return g.badArg("broadcast", len(buf.Bytes), err)
	}
	n := C.size_t(buf.Len())
	return g.staged("broadcast", buf, buf, true, func(src, dst C.gdn_devptr) C.int {
		return C.gdn_broadcast(g.lib.l, g.ctx, src, dst, n, dt, C.int(root), g.comm, g.stream)
	})
}

// Barrier all-reduces one element, as torch's NCCL barrier does.
func (g *group) Barrier() backend.Work {
	one := []int32{1}
	return g.AllReduce(backend.Int32s(one), backend.Sum)
}

func (g *group) AllGather(out, in backend.Buffer) backend.Work {
	dt, _, err := g.types(in.DType, 0, false)
	switch {
	case err != nil:
	case ragged(in) != nil:
		err = ragged(in)
	case out.DType != in.DType || out.Len() != in.Len()*g.size:
		err = fmt.Errorf("%w: output %v[%d], want %v[%d] (%d ranks)", backend.ErrBadArgument, out.DType, out.Len(), in.DType, in.Len()*g.size, g.size)
	}
	if err != nil {
		return g.badArg("allgather", len(in.Bytes), err)
	}
	n := C.size_t(in.Len())
	return g.staged("allgather", in, out, false, func(src, dst C.gdn_devptr) C.int {
		return C.gdn_allgather(g.lib.l, g.ctx, src, dst, n, dt, g.comm, g.stream)
	})
}

func (g *group) ReduceScatter(out, in backend.Buffer, rop backend.ReduceOp) backend.Work {
	dt, op, err := g.types(in.DType, rop, true)
	switch {
	case err != nil:
	case ragged(out) != nil:
		err = ragged(out)
	case out.DType != in.DType || in.Len() != out.Len()*g.size:
		err = fmt.Errorf("%w: input %v[%d], want %v[%d] (%d ranks)", backend.ErrBadArgument, in.DType, in.Len(), out.DType, out.Len()*g.size, g.size)
	}
	if err != nil {
		return g.badArg("reducescatter", len(in.Bytes), err)
	}
	n := C.size_t(out.Len())
	return g.staged("reducescatter", in, out, false, func(src, dst C.gdn_devptr) C.int {
		return C.gdn_reduce_scatter(g.lib.l, g.ctx, src, dst, n, dt, op, g.comm, g.stream)
	})
}

// ---- device buffers: straight to NCCL on the group's stream.

func checkDevice(b DeviceBuffer) error {
	if b.Count < 0 || (b.Ptr == 0 && b.Count > 0) {
		return fmt.Errorf("%w: device buffer %#x with %d elements", backend.ErrBadArgument, b.Ptr, b.Count)
	}
	return nil
}

// direct queues a collective on device buffers. The ordering against the
// streams that produced them is taken now, in the caller: an event is
// recorded on each buffer's stream, and the issuer makes the group's
// stream wait for those events before the NCCL call (on the GPU; the host
// does not block). Work queued on those streams after this call is not
// ordered after the collective: Wait for its Work first.
func (g *group) direct(name string, bytes int, streams []uintptr, launch func() C.int) backend.Work {
	var events []unsafe.Pointer
	release := func() {
		for _, ev := range events {
			C.gdn_event_destroy(g.lib.l, g.ctx, ev)
		}
		events = nil
	}
	if g.isClosed() {
		return failed(&backend.OpError{Kind: backend.ErrClosed, Op: name, Bytes: bytes, Rank: g.rank})
	}
	for i, s := range streams {
		if i > 0 && s == streams[0] {
			continue
		}
		var ev unsafe.Pointer
		if rc := C.gdn_event_record_on(g.lib.l, g.ctx, C.uintptr_t(s), &ev); rc != 0 {
			release()
			return failed(&backend.OpError{Kind: backend.ErrBadArgument, Op: name, Bytes: bytes, Rank: g.rank,
				Detail: fmt.Sprintf("recording an event on the buffer's stream %#x", s), Err: g.lib.cuErr("cuEventRecord", rc)})
		}
		events = append(events, ev)
	}
	return g.submit(name, bytes, func() error {
		for _, ev := range events {
			if rc := C.gdn_stream_wait(g.lib.l, g.ctx, g.stream, ev); rc != 0 {
				return g.lib.cuErr("cuStreamWaitEvent", rc)
			}
		}
		release() // the waits are queued; the events may go
		if rc := launch(); rc != 0 {
			return g.lib.ncclErr(name, rc)
		}
		return nil
	}, func() {}, release)
}

func (g *group) AllReduceDevice(buf DeviceBuffer, rop backend.ReduceOp) backend.Work {
	dt, op, err := g.types(buf.DType, rop, true)
	if err == nil {
		err = checkDevice(buf)
	}
	if err != nil {
		return g.badArg("allreduce", buf.Bytes(), err)
	}
	p := C.gdn_devptr(buf.Ptr)
	return g.direct("allreduce", buf.Bytes(), []uintptr{buf.Stream}, func() C.int {
		return C.gdn_allreduce(g.lib.l, g.ctx, p, p, C.size_t(buf.Count), dt, op, g.comm, g.stream)
	})
}

func (g *group) BroadcastDevice(buf DeviceBuffer, root int) backend.Work {
	dt, _, err := g.types(buf.DType, 0, false)
	if err == nil {
		err = checkDevice(buf)
	}
	if err == nil && (root < 0 || root >= g.size) {
		err = fmt.Errorf("%w: root %d outside world size %d", backend.ErrBadArgument, root, g.size)
	}
	if err != nil {
		return g.badArg("broadcast", buf.Bytes(), err)
	}
	p := C.gdn_devptr(buf.Ptr)
	return g.direct("broadcast", buf.Bytes(), []uintptr{buf.Stream}, func() C.int {
		return C.gdn_broadcast(g.lib.l, g.ctx, p, p, C.size_t(buf.Count), dt, C.int(root), g.comm, g.stream)
	})
}

func (g *group) AllGatherDevice(out, in DeviceBuffer) backend.Work {
	dt, _, err := g.types(in.DType, 0, false)
	switch {
	case err != nil:
	case checkDevice(in) != nil || checkDevice(out) != nil:
		err = fmt.Errorf("%w: null device pointer", backend.ErrBadArgument)
	case out.DType != in.DType || out.Count != in.Count*g.size:
		err = fmt.Errorf("%w: output %v[%d], want %v[%d] (%d ranks)", backend.ErrBadArgument, out.DType, out.Count, in.DType, in.Count*g.size, g.size)
	}
	if err != nil {
		return g.badArg("allgather", in.Bytes(), err)
	}
	return g.direct("allgather", in.Bytes(), []uintptr{in.Stream, out.Stream}, func() C.int {
		return C.gdn_allgather(g.lib.l, g.ctx, C.gdn_devptr(in.Ptr), C.gdn_devptr(out.Ptr), C.size_t(in.Count), dt, g.comm, g.stream)
	})
}

func (g *group) ReduceScatterDevice(out, in DeviceBuffer, rop backend.ReduceOp) backend.Work {
	dt, op, err := g.types(in.DType, rop, true)
	switch {
	case err != nil:
	case checkDevice(in) != nil || checkDevice(out) != nil:
		err = fmt.Errorf("%w: null device pointer", backend.ErrBadArgument)
	case out.DType != in.DType || in.Count != out.Count*g.size:
		err = fmt.Errorf("%w: input %v[%d], want %v[%d] (%d ranks)", backend.ErrBadArgument, in.DType, in.Count, out.DType, out.Count*g.size, g.size)
	}
	if err != nil {
		return g.badArg("reducescatter", in.Bytes(), err)
	}
	return g.direct("reducescatter", in.Bytes(), []uintptr{in.Stream, out.Stream}, func() C.int {
		return C.gdn_reduce_scatter(g.lib.l, g.ctx, C.gdn_devptr(in.Ptr), C.gdn_devptr(out.Ptr), C.size_t(out.Count), dt, op, g.comm, g.stream)
	})
}
