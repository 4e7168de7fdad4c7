package ddp

import (
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// Typed views of a comm.Buffer's bytes. The buffers come from comm.Float32s
// and friends, so their memory is suitably aligned for the element type.

func bufView[T any](b backend.Buffer) []T {
	var z T
	n := len(b.Bytes) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b.Bytes[0])), n)
}

func bufF32(b backend.Buffer) []float32 { return bufView[float32](b) }
func bufF64(b backend.Buffer) []float64 { return bufView[float64](b) }
func bufI32(b backend.Buffer) []int32   { return bufView[int32](b) }
func bufI64(b backend.Buffer) []int64   { return bufView[int64](b) }
func bufU16(b backend.Buffer) []uint16  { return bufView[uint16](b) }
