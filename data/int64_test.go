package data

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// Int64 targets (token ids) travel through a TensorDataset, its batches and
// the default collate as int64; labelled batches give their labels as an
// int64 tensor.
func TestInt64TargetsAndLabelTensor(t *testing.T) {
	x := tensor.FromF32([]float32{0, 1, 2, 3, 4, 5, 6, 7}, 4, 2)
	y := tensor.FromI64([]int64{10, 11, 20, 21, 30, 31, 1 << 40, 41}, 4, 2)
	ds, err := NewTensorDataset(x, y)
	require.NoError(t, err)
	b, err := ds.GetBatch([]int{3, 1})
	require.NoError(t, err)
	require.Equal(t, tensor.Int64, b.Targets.DType())
	require.Equal(t, []int64{1 << 40, 41, 20, 21}, b.Targets.I64())
	s, err := ds.Get(2)
	require.NoError(t, err)
	require.Equal(t, []int64{30, 31}, s.Target.I64())
	c, err := DefaultCollate([]Sample{s, s})
	require.NoError(t, err)
	require.Equal(t, []int64{30, 31, 30, 31}, c.Targets.I64())

	lds, err := NewLabeledDataset(x, []int{3, 1, 4, 1})
	require.NoError(t, err)
	loader, err := NewDataLoader(lds, BatchSize(4))
	require.NoError(t, err)
	for lb, err := range loader.All(context.Background()) {
		require.NoError(t, err)
		lt := lb.LabelTensor()
		require.Equal(t, tensor.Int64, lt.DType())
		require.Equal(t, []int64{3, 1, 4, 1}, lt.I64())
	}
	require.Nil(t, b.LabelTensor(), "a batch with targets has no labels")
}
