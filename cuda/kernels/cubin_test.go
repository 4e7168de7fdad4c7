package kernels_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda/kernels"
)

// The cubins gen_ptx.go wrote come from this kernels.cu: a kernels.cu
// changed without `go generate` would leave every A100 and H100 on the
// PTX (kernels.Cubin refuses stale machine code), so it fails here.
func TestCubinsAreCurrent(t *testing.T) {
	stamp, err := os.ReadFile("cubin/SOURCE")
	if os.IsNotExist(err) {
		t.Skip("no cubins: gen_ptx.go's NVRTC could not build machine code; every GPU JIT-compiles the PTX")
	}
	require.NoError(t, err)
	require.Equal(t, kernels.SourceHash(), strings.TrimSpace(string(stamp)),
		"cubin/ was built from another kernels.cu: run (cd cuda/kernels && go generate)")
	assert.Equal(t, []int{80, 90}, kernels.Arches())
}

// Cubin picks the newest machine code of the device's major version that
// is not newer than the device (NVIDIA's binary compatibility), else
// none; every kernel is in it.
func TestCubinChoice(t *testing.T) {
	have := kernels.Arches()
	if len(have) == 0 {
		t.Skip("no current cubins in this tree")
	}
	tests := []struct {
		major, minor int
		want         string
	}{
		{9, 0, "sm_90"}, {8, 0, "sm_80"}, {8, 6, "sm_80"}, {8, 9, "sm_80"},
		{7, 5, ""}, {10, 0, ""}, {12, 0, ""},
	}
	for _, tc := range tests {
		img, arch, ok, err := kernels.Cubin(tc.major, tc.minor)
		require.NoError(t, err)
		assert.Equal(t, tc.want, arch, "compute capability %d.%d", tc.major, tc.minor)
		assert.Equal(t, tc.want != "", ok)
		if !ok {
			continue
		}
		assert.True(t, bytes.HasPrefix(img, []byte("\x7fELF")), "%s is an ELF image", arch)
		for _, name := range kernels.Names() {
			assert.True(t, bytes.Contains(img, []byte(name+"\x00")), "%s has kernel %s", arch, name)
		}
	}
}
