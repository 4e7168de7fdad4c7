package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// PrefetchRowsF32 is a hint: it never changes x and takes any row count,
// stride and width, rows past x's end included (they are left out), and
// empty input. Its effect is speed (attention's heads in the gpt profile,
// docs/benchmarks.md), not values.
func TestPrefetchRowsF32(t *testing.T) {
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
	}
	want := append([]float32(nil), x...)
	for _, c := range []struct{ rows, ld, cols int }{{4, 384, 32}, {64, 384, 32}, {1, 0, 1000}, {3, 0, 5000}, {0, 10, 10}, {10, 10, 0}} {
		require.NotPanics(t, func() { PrefetchRowsF32(x, c.rows, c.ld, c.cols) }, "%+v", c)
		require.NotPanics(t, func() { PrefetchRowsF32(x[990:], c.rows, c.ld, c.cols) }, "%+v at the end", c)
	}
	PrefetchRowsF32(nil, 3, 3, 3)
	require.Equal(t, want, x)
	h := RoundToBF16(x, 1, len(x)).Halves()
	hw := append([]uint16(nil), h...)
	for _, c := range []struct{ rows, ld, cols int }{{4, 384, 32}, {64, 384, 32}, {1, 0, 1000}, {3, 0, 5000}, {0, 10, 10}, {10, 10, 0}} {
		require.NotPanics(t, func() { PrefetchRowsBF16(h, c.rows, c.ld, c.cols) }, "%+v", c)
		require.NotPanics(t, func() { PrefetchRowsBF16(h[990:], c.rows, c.ld, c.cols) }, "%+v at the end", c)
	}
	PrefetchRowsBF16(nil, 3, 3, 3)
	require.Equal(t, hw, h)
}
