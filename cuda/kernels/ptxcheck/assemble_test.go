//go:build cuda

package ptxcheck_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda/kernels"
	"github.com/goddp/goddp/cuda/kernels/ptxcheck"
)

// TestPTXAssembles assembles the kernels' PTX for Volta, Ampere and Hopper,
// as the driver does when goddp/cuda loads it. No GPU is needed.
func TestPTXAssembles(t *testing.T) {
	for _, arch := range []string{"sm_70", "sm_80", "sm_90"} {
		t.Run(arch, func(t *testing.T) {
			n, err := ptxcheck.Assemble(kernels.PTX, arch)
			require.NoError(t, err)
			assert.Positive(t, n)
		})
	}
}

// Broken PTX is reported with the compiler's log.
func TestBadPTX(t *testing.T) {
	_, err := ptxcheck.Assemble(strings.Replace(kernels.PTX, "ld.global", "ld.glbal", 1), "sm_80")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sm_80")
}

func TestEveryKernelIsInPTX(t *testing.T) {
	for _, name := range kernels.Names() {
		assert.Contains(t, kernels.PTX, ".entry "+name+"(", name)
	}
}
