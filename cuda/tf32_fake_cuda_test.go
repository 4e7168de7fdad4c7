//go:build cuda

package cuda

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SetAllowTF32 sets cuBLAS's math mode on the context's handle, and
// AllowTF32 reports it; a context starts with TF32 off.
func TestAllowTF32ReachesCUBLAS(t *testing.T) {
	c, f := newFake(t)
	assert.False(t, c.AllowTF32())
	require.NoError(t, c.SetAllowTF32(true))
	assert.True(t, c.AllowTF32())
	require.NoError(t, c.SetAllowTF32(false))
	assert.False(t, c.AllowTF32())
	var modes []string
	for _, call := range f.calls {
		if strings.HasPrefix(call, "cublasSetMathMode") {
			modes = append(modes, call)
		}
	}
	assert.Equal(t, []string{"cublasSetMathMode tf32=true", "cublasSetMathMode tf32=false"}, modes)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.SetAllowTF32(true), ErrClosed)
	assert.False(t, c.AllowTF32(), "a failed switch leaves the setting")
}
