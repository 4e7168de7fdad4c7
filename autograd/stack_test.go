package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestStackFixture(t *testing.T) {
	runFixture(t, "stack", plain(func(c *fixCase, in []*Variable) *Variable { return Stack(c.int("axis"), in...) }))
}

func TestStackGradCheck(t *testing.T) {
	for _, axis := range []int{0, 1, 2, -1} {
		gradCheck(t, func(xs []*Variable) *Variable { return Stack(axis, xs...) }, randT(1, 1, 0, 2, 3), randT(2, 1, 0, 2, 3))
	}
}

func TestStackShape(t *testing.T) {
	y := Stack(1, Const(tensor.New(tensor.Float32, 2, 3)), Const(tensor.New(tensor.Float32, 2, 3)))
	require.Equal(t, []int{2, 2, 3}, y.Shape())
}
