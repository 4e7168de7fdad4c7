package reduce

import (
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
)

// AVX sums for the reductions that dominate data-parallel training
// (float32/float64 Sum and Avg). reduce.go's portable kernels are scalar
// (Go does not vectorise): about one element per cycle, so a 4 KiB float32
// sum took 537ns there, most of a 4 KiB all-reduce between two ranks on
// one host, where the copies themselves stay in L1. The vector adds round
// exactly as the scalar ones, element by element, so results stay
// bit-identical whichever kernel a rank uses; every backend sums through
// them (Into).

//go:noescape
func addF32AVX(dst, src *float32, n int)

//go:noescape
func addF64AVX(dst, src *float64, n int)

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

// HasAVX reports whether the CPU has AVX and the OS saves YMM state.
func HasAVX() bool {
	_, _, c, _ := cpuid(1, 0)
	if c&(1<<27) == 0 || c&(1<<28) == 0 { // OSXSAVE, AVX
		return false
	}
	a, _ := xgetbv()
	return a&6 == 6 // XMM and YMM state enabled
}

// AddFast adds src into dst with AVX for float32/float64 and reports
// whether it handled the dtype. Lengths must match (as for Into).
func AddFast(dst, src backend.Buffer) bool {
	var block int
	switch dst.DType {
	case backend.Float32:
		block = 32
	case backend.Float64:
		block = 16
	default:
		return false
	}
	if src.DType != dst.DType || len(src.Bytes) != len(dst.Bytes) {
		return false // let Into report the programmer error
	}
	n := dst.Len()
	m := n - n%block
	if m > 0 {
		if dst.DType == backend.Float32 {
			addF32AVX((*float32)(unsafe.Pointer(&dst.Bytes[0])), (*float32)(unsafe.Pointer(&src.Bytes[0])), m)
		} else {
			addF64AVX((*float64)(unsafe.Pointer(&dst.Bytes[0])), (*float64)(unsafe.Pointer(&src.Bytes[0])), m)
		}
	}
	if m < n {
		es := dst.DType.Size()
		Into(backend.Buffer{DType: dst.DType, Bytes: dst.Bytes[m*es:]}, backend.Buffer{DType: src.DType, Bytes: src.Bytes[m*es:]}, backend.Sum)
	}
	return true
}
