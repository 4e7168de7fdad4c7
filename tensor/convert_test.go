package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// CopyConvert converts between float32, float64 and int64 (floats
// truncated toward zero, as torch's .long()), keeping an int64's exact
// value past 2^53; Float64s and CopyFloat64s round-trip a tensor through a
// host []float64.
func TestCopyConvert(t *testing.T) {
	f := FromF64([]float64{1.75, -2.5, 3}, 3)
	i := New(Int64, 3)
	require.NoError(t, CopyConvert(i, f))
	require.Equal(t, []int64{1, -2, 3}, i.I64())
	big := New(Int64, 1)
	big.I64()[0] = 1<<60 + 1
	exact := New(Int64, 1)
	require.NoError(t, CopyConvert(exact, big))
	require.Equal(t, int64(1<<60+1), exact.I64()[0])
	s := New(Float32, 3)
	require.NoError(t, CopyConvert(s, i))
	require.Equal(t, []float32{1, -2, 3}, s.F32())
	require.NoError(t, CopyConvert(s, f))
	require.Equal(t, []float32{1.75, -2.5, 3}, s.F32())
	require.Error(t, CopyConvert(New(Float32, 2), f))

	buf, err := Float64s(s)
	require.NoError(t, err)
	require.Equal(t, []float64{1.75, -2.5, 3}, buf)
	buf[0] = 4
	require.NoError(t, CopyFloat64s(s, buf))
	require.Equal(t, []float32{4, -2.5, 3}, s.F32())
	require.Error(t, CopyFloat64s(s, buf[:2]))
	require.True(t, sameDevice(s, f))
}
