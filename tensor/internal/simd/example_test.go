package simd_test

import (
	"fmt"
	"runtime"

	"github.com/goddp/goddp/tensor/internal/simd"
)

// A kernel does the longest multiple of its block it can and reports how
// much; the caller's scalar loop finishes the rest.
func ExampleReLUF32() {
	src := make([]float32, 20)
	for i := range src {
		src[i] = float32(i - 10)
	}
	dst := make([]float32, len(src))
	done := simd.ReLUF32(dst, src)
	for i := done; i < len(src); i++ {
		dst[i] = max(src[i], 0)
	}
	fmt.Println("whole blocks:", done%16 == 0, "vector part on amd64:", runtime.GOARCH != "amd64" || done == 16)
	fmt.Println(dst[8:14])
	// Output:
	// whole blocks: true vector part on amd64: true
	// [0 0 0 1 2 3]
}
