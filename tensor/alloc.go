package tensor

import "unsafe"

// newFull returns a tensor whose elements are not zeroed: the caller must
// write every one of them before the tensor is returned or read. Large
// outputs of ops that overwrite all their elements (binary's) use it,
// because zeroing a fresh 100 MB tensor costs as much as writing it.
//
// The memory comes from the runtime's allocator without the clearing pass
// (mallocgc with needzero false and no type, as the runtime itself makes
// []byte for string conversions): garbage-collected, pointer-free, and
// holding whatever an earlier float or byte object left there until the
// op overwrites it. Below newFullMin the clear is cheap and make is used.
func newFull(dt DType, shape ...int) *Tensor {
	n := numel(shape)
	size := uintptr(n) * uintptr(dt.Size())
	if size < newFullMin {
		return New(dt, shape...)
	}
	p := mallocgc(size, nil, false)
	if dt == Float64 {
		return FromF64(unsafe.Slice((*float64)(p), n), shape...)
	}
	return FromF32(unsafe.Slice((*float32)(p), n), shape...)
}

// newFullMin is the size in bytes from which newFull skips zeroing.
const newFullMin = 64 << 10

// mallocgc is the runtime's allocator (typ nil: no pointers). Go keeps it
// reachable by linkname for existing users (go.dev/issue/67401).
//
//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer
