package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTriuTril(t *testing.T) {
	a := FromF64([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 3, 4)
	cases := []struct {
		name string
		got  *Tensor
		want []float64
	}{
		// torch.triu / torch.tril of the same matrix.
		{"triu0", Triu(a, 0), []float64{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}},
		{"triu1", Triu(a, 1), []float64{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}},
		{"triu-1", Triu(a, -1), []float64{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}},
		{"tril0", Tril(a, 0), []float64{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}},
		{"tril1", Tril(a, 1), []float64{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}},
		{"tril-2", Tril(a, -2), []float64{0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, []int{3, 4}, c.got.Shape())
			require.Equal(t, c.want, c.got.F64())
		})
	}
	require.Equal(t, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, a.F64(), "input untouched")
}

func TestTriuBatchedAndViews(t *testing.T) {
	// Every matrix of a batch, float32, from a transposed (strided) input.
	x := Transpose(Ones(Float32, 2, 3, 3), 1, 2)
	got := Triu(x, 1)
	require.Equal(t, []float32{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0}, got.F32())
	require.Panics(t, func() { Triu(Ones(Float32, 3), 0) })
}
