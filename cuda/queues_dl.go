//go:build cuda

package cuda

/*
#include "driver_dl.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// The real device's streams, events, asynchronous copies and host
// functions, for the queues ddp's buckets use (queues_cuda.go). Run on an
// H100 by the GPU kit (docs/gpu.md); the queues' logic is also tested over
// a fake in CI (queues_fake_cuda_test.go).

func (d *dlDevice) newStream() (unsafe.Pointer, error) {
	var s unsafe.Pointer
	if rc := C.gcu_stream_new(d.l, d.ctx, &s); rc != 0 {
		return nil, d.cuErr("cuStreamCreate", rc)
	}
	return s, nil
}

func (d *dlDevice) destroyStream(s unsafe.Pointer) error {
	return d.cu("cuStreamDestroy", C.gcu_stream_destroy(d.l, d.ctx, s))
}

func (d *dlDevice) syncStream(s unsafe.Pointer) error {
	return d.cu("cuStreamSynchronize", C.gcu_sync(d.l, d.ctx, s))
}

func (d *dlDevice) newEvent() (unsafe.Pointer, error) {
	var e unsafe.Pointer
	if rc := C.gcu_event_new(d.l, d.ctx, &e); rc != 0 {
		return nil, d.cuErr("cuEventCreate", rc)
	}
	return e, nil
}

func (d *dlDevice) recordEvent(e, s unsafe.Pointer) error {
	return d.cu("cuEventRecord", C.gcu_event_record(d.l, d.ctx, e, s))
}

func (d *dlDevice) syncEvent(e unsafe.Pointer) error {
	return d.cu("cuEventSynchronize", C.gcu_event_sync(d.l, d.ctx, e))
}

func (d *dlDevice) destroyEvent(e unsafe.Pointer) error {
	return d.cu("cuEventDestroy", C.gcu_event_destroy(d.l, d.ctx, e))
}

func (d *dlDevice) waitEvent(s, e unsafe.Pointer) error {
	return d.cu("cuStreamWaitEvent", C.gcu_stream_wait(d.l, d.ctx, s, e))
}

func (d *dlDevice) htodOn(s unsafe.Pointer, dst uint64, src unsafe.Pointer, n int64) error {
	return d.cu("cuMemcpyHtoDAsync", C.gcu_htod_async(d.l, d.ctx, C.gcu_devptr(dst), src, C.size_t(n), s))
}

func (d *dlDevice) dtohOn(s unsafe.Pointer, dst unsafe.Pointer, src uint64, n int64) error {
	return d.cu("cuMemcpyDtoHAsync", C.gcu_dtoh_async(d.l, d.ctx, dst, C.gcu_devptr(src), C.size_t(n), s))
}

func (d *dlDevice) dtodOn(s unsafe.Pointer, dst, src uint64, n int64) error {
	return d.cu("cuMemcpyDtoDAsync", C.gcu_dtod_async(d.l, d.ctx, C.gcu_devptr(dst), C.gcu_devptr(src), C.size_t(n), s))
}

func (d *dlDevice) zeroOn(s unsafe.Pointer, p uint64, n int64) error {
	return d.cu("cuMemsetD8Async", C.gcu_zero(d.l, d.ctx, C.gcu_devptr(p), C.size_t(n), s))
}

func (d *dlDevice) launchOn(s unsafe.Pointer, kernel string, grid, block uint32, args []uint64) error {
	fn, ok := d.fns[kernel]
	if !ok {
		return fmt.Errorf("%w: no kernel %s", ErrCUDA, kernel)
	}
	cargs := make([]C.ulonglong, len(args))
	for i, a := range args {
		cargs[i] = C.ulonglong(a)
	}
	return d.cu("kernel "+kernel, C.gcu_launch(d.l, d.ctx, fn, C.uint(grid), C.uint(block), s, &cargs[0], C.int(len(cargs))))
}

func (d *dlDevice) hostFuncOn(s unsafe.Pointer, h cgo.Handle) error {
	return d.cu("cuLaunchHostFunc", C.gcu_host_func(d.l, d.ctx, s, C.size_t(h)))
}

func (d *dlDevice) hostAlloc(n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if rc := C.gcu_host_alloc(d.l, d.ctx, C.size_t(n), &p); rc != 0 {
		return nil, d.cuErr("cuMemHostAlloc (pinned staging)", rc)
	}
	return p, nil
}

func (d *dlDevice) hostFree(p unsafe.Pointer) error {
	return d.cu("cuMemFreeHost", C.gcu_host_free(d.l, d.ctx, p))
}

func (d *dlDevice) computeStream() unsafe.Pointer { return d.strm }

func (d *dlDevice) queryEvent(e unsafe.Pointer) (bool, error) { return dlUploads{d}.queryEvent(e) }

// goddpCUDAHostFunc runs a queue's host function (cuLaunchHostFunc's
// callback, on the driver's thread).
//
//export goddpCUDAHostFunc
func goddpCUDAHostFunc(h C.size_t) { runHostFunc(cgo.Handle(h)) }
