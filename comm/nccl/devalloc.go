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

// AllocDevice allocates device memory on an nccl group's GPU (pg as
// backend.Init returns it) and copies init, a host buffer, into it; the
// buffer's Stream is 0 (the copy is complete when AllocDevice returns).
// It is for programs without a device layer of their own, such as
// ddpbench's -mem device; free releases it. A pg that is not an nccl
// group is an error.
func AllocDevice(pg backend.ProcessGroup, init backend.Buffer) (buf DeviceBuffer, free func() error, err error) {
	d, ok := AsDevice(pg)
	g, ok2 := d.(*group)
	if !ok || !ok2 {
		return DeviceBuffer{}, nil, fmt.Errorf("%w: nccl: AllocDevice needs an nccl process group, got %q", backend.ErrBadArgument, pg.Backend())
	}
	n := max(len(init.Bytes), 1)
	var dev C.gdn_devptr
	var host unsafe.Pointer
	if rc := C.gdn_alloc(g.lib.l, g.ctx, C.size_t(n), &dev, &host); rc != 0 {
		return DeviceBuffer{}, nil, g.lib.cuErr(fmt.Sprintf("allocating %d bytes on device %d", n, g.device), rc)
	}
	free = func() error {
		if rc := C.gdn_free(g.lib.l, g.ctx, dev, host); rc != 0 {
			return g.lib.cuErr("freeing device memory", rc)
		}
		return nil
	}
	copy(unsafe.Slice((*byte)(host), n), init.Bytes)
	rc := C.gdn_h2d(g.lib.l, g.ctx, dev, host, C.size_t(len(init.Bytes)), g.stream)
	if rc == 0 {
		rc = C.gdn_stream_sync(g.lib.l, g.ctx, g.stream)
	}
	if rc != 0 {
		free()
		return DeviceBuffer{}, nil, g.lib.cuErr("copying to the device", rc)
	}
	return DeviceBuffer{DType: init.DType, Ptr: uintptr(dev), Count: init.Len()}, free, nil
}
