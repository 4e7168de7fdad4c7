package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestViewFixture(t *testing.T) {
	runFixture(t, "view", plain(func(c *fixCase, in []*Variable) *Variable { return View(in[0], c.ints("shape")...) }))
}

func TestViewGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Exp(View(xs[0], 3, -1)) }, randT(1, 1, 0, 2, 3, 2))
}

func TestViewSharesStorageAndRefusesStrided(t *testing.T) {
	x := Param(randT(1, 1, 0, 2, 3))
	y := View(x, 6)
	y.Value.Set(42, 4)
	require.Equal(t, 42.0, x.Value.At(1, 1), "View must share storage")
	require.Panics(t, func() { View(Transpose(x, 0, 1), 6) })
	require.Equal(t, "View", y.Creator().Name())
}
