//go:build cuda

package ptxcheck_test

import (
	"fmt"

	"github.com/goddp/goddp/cuda/kernels"
	"github.com/goddp/goddp/cuda/kernels/ptxcheck"
)

// Assemble reports whether the driver would accept the kernels on an
// Ampere GPU, without one.
func ExampleAssemble() {
	n, err := ptxcheck.Assemble(kernels.PTX, "sm_80")
	fmt.Println(err == nil, n > 0)
	// Output: true true
}
