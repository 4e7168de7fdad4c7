package kernels_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goddp/goddp/cuda/kernels"
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
	// Output: true 64
}

// Every count and index is 64-bit: no kernel takes a 32-bit integer, and
// the thread index is widened before it is multiplied (32-bit indices
// wrapped from 2^31 elements on and wrote before the buffer).
func TestKernels64BitIndexing(t *testing.T) {
	assert.NotContains(t, kernels.PTX, ".param .u32", "a kernel takes a 32-bit count")
	assert.NotContains(t, kernels.PTX, ".param .s32", "a kernel takes a 32-bit count")
	assert.NotContains(t, kernels.PTX, "mad.lo.s32", "a 32-bit index computation")
	for _, name := range kernels.Names() {
		entry := kernels.PTX[strings.Index(kernels.PTX, ".entry "+name+"("):]
		entry = entry[:strings.Index(entry, ")")]
		assert.Contains(t, entry, ".param .u64", name)
	}
}
