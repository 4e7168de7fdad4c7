package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// PrefetchRowsF32 and PrefetchRowsBF16 are hints: they never change x,
// and take any row count, stride and width, rows past x's end included
// (they are left out), and empty input. Their effect is speed (attention's
// heads in gpt's step), not values.
func TestPrefetchRowsF32(t *testing.T) {
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
	}
	h := RoundToBF16(x, 1, len(x)).Halves()
	want, hw := append([]float32(nil), x...), append([]uint16(nil), h...)
	for _, c := range []struct{ rows, ld, cols int }{{4, 384, 32}, {64, 384, 32}, {1, 0, 1000}, {3, 0, 5000}, {0, 10, 10}, {10, 10, 0}} {
		for _, at := range []int{0, 990} { // from the start, and rows past the end
			require.NotPanics(t, func() { PrefetchRowsF32(x[at:], c.rows, c.ld, c.cols) }, "%+v from %d", c, at)
			require.NotPanics(t, func() { PrefetchRowsBF16(h[at:], c.rows, c.ld, c.cols) }, "bf16 %+v from %d", c, at)
		}
	}
	PrefetchRowsF32(nil, 3, 3, 3)
	PrefetchRowsBF16(nil, 3, 3, 3)
	require.Equal(t, want, x)
	require.Equal(t, hw, h)
}
