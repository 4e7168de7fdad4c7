package backend

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestChecks(t *testing.T) {
	assert.NoError(t, CheckBuffer(Float32s(make([]float32, 3))))
	assert.NoError(t, CheckBuffer(Buffer{DType: BFloat16, Bytes: []byte{}}))
	assert.EqualError(t, CheckBuffer(Buffer{DType: BFloat16 + 1, Bytes: make([]byte, 4)}), "unknown dtype DType(6)")
	assert.EqualError(t, CheckBuffer(Buffer{DType: Float64, Bytes: make([]byte, 12)}), "12 bytes is not a whole number of float64 elements")
	assert.NoError(t, CheckReduceOp(Product))
	assert.EqualError(t, CheckReduceOp(Product+1), "unknown reduce op ReduceOp(5)")
	assert.NoError(t, CheckRoot(0, 1))
	assert.NoError(t, CheckRoot(3, 4))
	assert.EqualError(t, CheckRoot(4, 4), "root 4 outside world size 4")
	assert.EqualError(t, CheckRoot(-1, 4), "root -1 outside world size 4")
}
