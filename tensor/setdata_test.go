package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// SetData makes t share src's storage whatever its dtype: an Int64 source
// once lost its values (a struct literal that named f32 and f64 only).
func TestSetDataEveryDType(t *testing.T) {
	for _, src := range []*Tensor{
		FromF32([]float32{1, 2, 3}, 3),
		FromF64([]float64{1, 2, 3}, 3),
		FromI64([]int64{1, -2, 1 << 40}, 3),
	} {
		dst := New(Float32, 1)
		dst.SetData(src)
		require.Equal(t, src.DType(), dst.DType())
		require.Equal(t, []int{3}, dst.Shape())
		for i := range 3 {
			require.Equal(t, src.At(i), dst.At(i), "%v element %d", src.DType(), i)
		}
	}
}
