package kernels_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"goddp/cuda/kernels"
)

func TestEveryKernelIsInPTX(t *testing.T) {
	for _, name := range kernels.Names() {
		t.Run(name, func(t *testing.T) {
			assert.Contains(t, kernels.PTX, ".visible .entry "+name+"(")
		})
	}
	assert.Equal(t, len(kernels.Names()), strings.Count(kernels.PTX, ".visible .entry "))
}

// The PTX is plain text that cu.LoadData hands to the driver's JIT.
func Example() {
	fmt.Println(strings.Contains(kernels.PTX, ".target sm_52"), len(kernels.Names()))
	// Output: true 7
}
