package data

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckedElemsEveryDim: a zero dimension must not end the check before a
// negative one is seen ([0, -1] used to pass as 0 elements).
func TestCheckedElemsEveryDim(t *testing.T) {
	for _, tc := range []struct {
		dims  []int
		limit int
		n     int
		ok    bool
	}{
		{nil, 5, 1, true},
		{[]int{2, 3}, 6, 6, true},
		{[]int{2, 3}, 5, 0, false},
		{[]int{0, 7}, 0, 0, true},
		{[]int{0, -1}, 10, 0, false},
		{[]int{-1, 0}, 10, 0, false},
		{[]int{3, 0, 0, -7}, 10, 0, false},
		{[]int{0, math.MaxInt, math.MaxInt}, 10, 0, true},
		{[]int{math.MaxInt, math.MaxInt}, math.MaxInt, 0, false},
	} {
		n, ok := checkedElems(tc.dims, tc.limit)
		assert.Equal(t, tc.ok, ok, "dims %v", tc.dims)
		if ok {
			assert.Equal(t, tc.n, n, "dims %v", tc.dims)
		}
	}
}

// TestWriteRejectsNegativeShape: the writers refuse an Array whose shape has
// a negative dimension next to a zero, instead of writing a file whose
// header says 2^32-1 (IDX) or -1 (npy).
func TestWriteRejectsNegativeShape(t *testing.T) {
	a := &Array{Shape: []int{0, -1}, Data: []float32{}}
	var b bytes.Buffer
	require.ErrorIs(t, WriteIDX(&b, a), ErrShape)
	require.ErrorIs(t, WriteNPY(&b, a), ErrShape)
	assert.Zero(t, b.Len(), "nothing written")
}
