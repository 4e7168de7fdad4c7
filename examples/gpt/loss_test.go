package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// Sample i is the corpus at stride·i as int64 token ids, and its targets
// the same window one token later.
func TestDatasetRowsAreShiftedWindows(t *testing.T) {
	text := make([]byte, 300)
	for i := range text {
		text[i] = "abcdefg"[i*i%7]
	}
	c := newCorpus(text)
	ds, err := c.dataset()
	require.NoError(t, err)
	idx := []int{ds.Len() - 1, 0, 2}
	b, err := ds.GetBatch(idx)
	require.NoError(t, err)
	require.Equal(t, tensor.Int64, b.Inputs.DType())
	require.Equal(t, tensor.Int64, b.Targets.DType())
	x, y := b.Inputs.I64(), b.Targets.I64()
	for k, i := range idx {
		for j := range ctxLen {
			require.Equal(t, int64(c.ids[stride*i+j]), x[k*ctxLen+j], "input %d, %d", i, j)
			require.Equal(t, int64(c.ids[stride*i+j+1]), y[k*ctxLen+j], "target %d, %d", i, j)
		}
	}
}
