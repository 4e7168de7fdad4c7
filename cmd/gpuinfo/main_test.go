package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda"
)

// Without a GPU gpuinfo exits 3 and says what is missing; with one it
// lists the libraries.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	code := run(nil, &out)
	t.Log(out.String())
	if _, err := cuda.Probe(); err == nil {
		assert.Contains(t, []int{0, 4}, code)
		return
	}
	require.Contains(t, []int{3, 4}, code)
	assert.Contains(t, out.String(), "CUDA driver:")
	assert.Contains(t, out.String(), "NCCL candidates")
	assert.Contains(t, out.String(), "libnccl.so.2")
	var cnt bytes.Buffer
	if code == 3 {
		assert.Equal(t, 3, run([]string{"-count"}, &cnt))
		assert.Equal(t, "0\n", cnt.String())
	}
	assert.Equal(t, 2, run([]string{"-bogus"}, &cnt))
}
