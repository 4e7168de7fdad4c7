package libfind_test

import (
	"fmt"

	"github.com/goddp/goddp/internal/libfind"
)

// The cuBLAS files goddp/cuda would try on a machine whose driver supports
// CUDA 12.4, before looking at the environment.
func ExampleCUBLASSonames() {
	fmt.Println(libfind.CUBLASSonames(12040))
	// Output: [libcublas.so.12 libcublas.so.11]
}
