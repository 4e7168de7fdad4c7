package nn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// int64 ids (torch's long) look up the same rows as whole-number floats.
func TestEmbeddingInt64Ids(t *testing.T) {
	e := NewEmbedding(tensor.NewRNG(2), 7, 3)
	ids := []int{6, 0, 3, 3, 1, 5}
	fl := make([]float32, len(ids))
	for i, v := range ids {
		fl[i] = float32(v)
	}
	a := e.Forward(autograd.Const(tensor.FromInts(ids, 2, 3)))
	b := e.Forward(autograd.Const(tensor.FromF32(fl, 2, 3)))
	require.Equal(t, []int{2, 3, 3}, a.Value.Shape())
	require.Equal(t, b.Value.Contiguous().F32(), a.Value.Contiguous().F32())
}
