package gorgoniatensor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/goddp/goddp/tensor"
)

// A transposed (non-contiguous) tensor goes to gorgonia as a copy in C
// order and comes back with the same shape and values.
func TestDenseRoundTrip(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			x := tensor.AsType(tensor.FromF64([]float64{0, 1, 2, 3, 4, 5}, 2, 3), dt)
			d := ToDense(tensor.Transpose(x, 0, 1))
			assert.Equal(t, []int{3, 2}, []int(d.Shape()))
			y, err := FromDense(d)
			require.NoError(t, err)
			assert.Equal(t, dt, y.DType())
			assert.Equal(t, []int{3, 2}, y.Shape())
			assert.Equal(t, []float64{0, 3, 1, 4, 2, 5}, tensor.AsType(y, tensor.Float64).F64())
		})
	}
}

// ToDense of a contiguous tensor aliases its storage; FromDense copies.
func TestDenseAliasing(t *testing.T) {
	x := tensor.FromF32([]float32{1, 2, 3, 4}, 2, 2)
	d := ToDense(x)
	x.F32()[0] = 9
	assert.Equal(t, []float32{9, 2, 3, 4}, d.Data())
	y, err := FromDense(d)
	require.NoError(t, err)
	y.F32()[1] = 7
	assert.Equal(t, []float32{9, 2, 3, 4}, x.F32(), "FromDense copies")
}

// Int64 tensors reach gorgonia exactly, past float64's 2^53; a 0-d tensor
// becomes gorgonia's vector of one, and a gorgonia scalar a 0-d tensor.
func TestDenseInt64AndScalars(t *testing.T) {
	big := int64(1)<<60 + 3
	x := tensor.FromI64([]int64{0, -1, big, 7, 1 << 53, -(1 << 62)}, 2, 3)
	assert.Equal(t, []int64{0, -1, big, 7, 1 << 53, -(1 << 62)}, ToDense(x).Data())

	d := ToDense(tensor.FromF32([]float32{2.5}))
	assert.Equal(t, []int{1}, []int(d.Shape()))

	s, err := FromDense(gt.New(gt.FromScalar(float64(1.5))))
	require.NoError(t, err)
	assert.Empty(t, s.Shape())
	assert.Equal(t, 1.5, s.Item())

	_, err = FromDense(gt.New(gt.WithShape(2), gt.WithBacking([]int64{1, 2})))
	assert.ErrorContains(t, err, "gorgoniatensor: unsupported dense dtype int64")
}
