package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forEachIndex calls fn with every multi-index of shape in row-major order.
func forEachIndex(shape []int, fn func(idx []int)) {
	n := numel(shape)
	idx := make([]int, len(shape))
	for k := 0; k < n; k++ {
		fn(idx)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// bcastIndex maps an index of the broadcast shape to t's own index.
func bcastIndex(t *Tensor, out []int) []int {
	off := len(out) - t.Dim()
	idx := make([]int, t.Dim())
	for i := range idx {
		if t.shape[i] != 1 {
			idx[i] = out[off+i]
		}
	}
	return idx
}

// values returns t's elements in row-major order as float64.
func values(t *Tensor) []float64 {
	out := make([]float64, 0, t.Numel())
	forEachIndex(t.shape, func(idx []int) { out = append(out, t.At(idx...)) })
	return out
}

// seqTensor returns a tensor of the given shape holding deterministic,
// distinct, non-integer values (offset so none is zero).
func seqTensor(dt DType, shape ...int) *Tensor {
	t := New(dt, shape...)
	i := 0
	forEachIndex(shape, func(idx []int) {
		t.Set(math.Sin(float64(i)*0.7+0.3)*2, idx...)
		i++
	})
	return t
}

// requirePanics asserts that fn panics with a message containing every part.
func requirePanics(t *testing.T, fn func(), parts ...string) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "expected a panic")
		msg := fmt.Sprint(r)
		for _, p := range parts {
			assert.Contains(t, msg, p)
		}
	}()
	fn()
}

func tol(dt DType) float64 {
	if dt == Float64 {
		return 1e-12
	}
	return 1e-5
}

var dtypes = []DType{Float32, Float64}

// stored is the shape of an operand whose op(X) is rows×cols, as stored
// (transposed when trans).
func stored(trans bool, rows, cols int) (int, int) {
	if trans {
		return cols, rows
	}
	return rows, cols
}
