package tensor

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoftmax(t *testing.T) {
	for _, dt := range dtypes {
		for _, axis := range []int{0, 1, -1} {
			t.Run(fmt.Sprintf("%v/axis=%d", dt, axis), func(t *testing.T) {
				x := MulScalar(seqTensor(dt, 3, 4), 3)
				sm, lsm := Softmax(x, axis), LogSoftmax(x, axis)
				ax := normAxis("test", axis, 2, x.shape)
				sums := Sum(sm, []int{ax}, false)
				for _, s := range values(sums) {
					assert.InDelta(t, 1, s, 1e-6)
				}
				// Reference: exp(x) / sum(exp(x)) in float64.
				forEachIndex(x.Shape(), func(idx []int) {
					var z float64
					j := cloneInts(idx)
					for r := 0; r < x.shape[ax]; r++ {
						j[ax] = r
						z += math.Exp(x.At(j...))
					}
					assert.InDelta(t, math.Exp(x.At(idx...))/z, sm.At(idx...), tol(dt))
					assert.InDelta(t, x.At(idx...)-math.Log(z), lsm.At(idx...), 10*tol(dt))
				})
			})
		}
	}
	// Stability: huge logits must not overflow.
	big := FromF32([]float32{1000, 1001, 1002}, 1, 3)
	lsm := LogSoftmax(big, 1)
	require.False(t, math.IsNaN(lsm.At(0, 0)) || math.IsInf(lsm.At(0, 0), 0))
	assert.InDelta(t, -0.40760596, lsm.At(0, 2), 1e-6)
	assert.InDelta(t, 0.66524096, Softmax(big, 1).At(0, 2), 1e-6)
}
