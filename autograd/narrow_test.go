package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNarrowFixture(t *testing.T) {
	runFixture(t, "narrow", plain(func(c *fixCase, in []*Variable) *Variable {
		return Narrow(in[0], c.int("axis"), c.int("start"), c.int("length"))
	}))
}

func TestNarrowGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return Narrow(xs[0], 1, 1, 2) }, randT(1, 1, 0, 2, 4, 3))
	// Two overlapping slices of one input accumulate.
	gradCheck(t, func(xs []*Variable) *Variable {
		return Mul(Narrow(xs[0], 0, 0, 3), Narrow(xs[0], 0, 1, 3))
	}, randT(2, 1, 0, 4, 2))
}

func TestNarrowOutOfRangePanics(t *testing.T) {
	x := Param(randT(1, 1, 0, 2, 3))
	require.Panics(t, func() { Narrow(x, 1, 2, 2) })
	require.Panics(t, func() { Narrow(x, 1, -1, 1) })
	require.Panics(t, func() { Narrow(x, 2, 0, 1) })
}
