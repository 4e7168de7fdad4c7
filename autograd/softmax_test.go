package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestSoftmaxFixture(t *testing.T) {
	runFixture(t, "softmax", plain(func(c *fixCase, in []*Variable) *Variable { return Softmax(in[0], c.int("axis")) }))
}

func TestSoftmaxGradCheck(t *testing.T) {
	for i, axis := range []int{-1, 0, 1} {
		gradCheck(t, func(xs []*Variable) *Variable { return Softmax(xs[0], axis) }, randT(uint64(i), 1, 0, 2, 3, 4))
	}
}

func TestSoftmaxStable(t *testing.T) {
	y := Softmax(Const(tensor.FromF32([]float32{1000, 1000, -1000}, 3)), 0)
	require.InDeltaSlice(t, []float32{0.5, 0.5, 0}, y.Value.F32(), 1e-6)
}
