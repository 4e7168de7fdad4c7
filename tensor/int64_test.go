package tensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Int64 tensors hold values float64 cannot (past 2^53) exactly through
// views, Contiguous, Clone and the host cache.
func TestInt64Tensors(t *testing.T) {
	big := int64(1)<<60 + 3
	x := FromI64([]int64{0, -1, big, 7, 1 << 53, -(1 << 62)}, 2, 3)
	assert.Equal(t, Int64, x.DType())
	assert.Equal(t, "int64", x.DType().String())
	assert.Equal(t, 8, Int64.Size())
	assert.Equal(t, float64(big), x.At(0, 2))
	tr := Transpose(x, 0, 1) // [3, 2], not contiguous
	require.False(t, tr.IsContiguous())
	assert.Equal(t, []int64{0, 7, -1, 1 << 53, big, -(1 << 62)}, tr.Contiguous().I64())
	assert.Equal(t, Int64, tr.Contiguous().DType())
	c := x.Clone()
	c.I64()[0] = 42
	assert.Equal(t, int64(0), x.I64()[0], "Clone copies")
	assert.Equal(t, []int64{7, 1 << 53, -(1 << 62)}, Narrow(x, 0, 1, 1).Contiguous().I64())
	assert.Equal(t, []int{0, -1, int(big), 7, 1 << 53, -(1 << 62)}, x.Reshape(-1).Ints())

	// New, from the host cache (large) and not (small), is zeroed int64.
	for _, n := range []int{3, 1 << 16} {
		z := New(Int64, n)
		require.Equal(t, Int64, z.DType())
		require.Len(t, z.I64(), n)
		for _, v := range z.I64() {
			require.Zero(t, v)
		}
	}
	s := New(Int64)
	s.Set(5, nil...)
	s.I64()[0]++
	assert.Equal(t, 6.0, s.Item())
	assert.Equal(t, []int64{1, 2, 3}, FromInts([]int{1, 2, 3}, 3).I64())

	assert.PanicsWithValue(t, "tensor: F32 on a int64 tensor", func() { x.F32() })
	assert.PanicsWithValue(t, "tensor: I64 on a float32 tensor", func() { New(Float32, 2).I64() })
}
