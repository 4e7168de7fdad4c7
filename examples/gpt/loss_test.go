package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// The loss reads each sample's targets from the corpus by its dataset
// index: the same numbers as the dataset's target rows, which on a device
// live in device memory.
func TestSeqLossTargetsAreTheDatasetRows(t *testing.T) {
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
	l := &seqLoss{vocab: len(c.vocab), ids: c.ids}
	logits := autograd.Const(tensor.New(tensor.Float32, len(idx), ctxLen, len(c.vocab)))
	l.loss(logits, b)
	want := b.Targets.Contiguous().F32()
	require.Len(t, l.target, len(want))
	for i, v := range want {
		require.Equal(t, int(v), l.target[i], "target %d", i)
	}
}
