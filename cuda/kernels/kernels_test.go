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
	// Output: true 91
}

// Every count and index is 64-bit: no kernel takes a 32-bit integer, and
// the thread index is widened before it is multiplied (32-bit indices
// wrapped from 2^31 elements on and wrote before the buffer). The kernels
// in guarded32 also compute in 32 bits, on a path they take only when
// every index fits.
func TestKernels64BitIndexing(t *testing.T) {
	guarded32 := map[string]bool{"max_pool2d_bwd_f32": true}
	assert.NotContains(t, kernels.PTX, ".param .u32", "a kernel takes a 32-bit count")
	assert.NotContains(t, kernels.PTX, ".param .s32", "a kernel takes a 32-bit count")
	bodies := strings.Split(kernels.PTX, ".entry ")[1:]
	assert.Len(t, bodies, len(kernels.Names()))
	for _, body := range bodies {
		name := body[:strings.Index(body, "(")]
		if !guarded32[name] {
			assert.NotContains(t, body, "mad.lo.s32", "%s: a 32-bit index computation", name)
		}
	}
	assert.NotContains(t, kernels.PTX, ".func ", "a device function outside the kernels escapes the check above")
	for _, name := range kernels.Names() {
		entry := kernels.PTX[strings.Index(kernels.PTX, ".entry "+name+"("):]
		entry = entry[:strings.Index(entry, ")")]
		assert.Contains(t, entry, ".param .u64", name)
	}
}
