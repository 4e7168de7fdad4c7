package simd_test

import (
	"fmt"
	"runtime"

	"goddp/tensor/internal/simd"
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
	if runtime.GOARCH == "amd64" {
		fmt.Println("vector part:", done)
	} else {
		fmt.Println("vector part:", 16)
	}
	fmt.Println(dst[8:14])
	// Output:
	// vector part: 16
	// [0 0 0 1 2 3]
}
