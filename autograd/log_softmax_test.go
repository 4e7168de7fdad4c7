package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestLogSoftmaxFixture(t *testing.T) {
	runFixture(t, "log_softmax", plain(func(c *fixCase, in []*Variable) *Variable { return LogSoftmax(in[0], c.int("axis")) }))
}

func TestLogSoftmaxGradCheck(t *testing.T) {
	for i, axis := range []int{-1, 0, 1} {
		gradCheck(t, func(xs []*Variable) *Variable { return LogSoftmax(xs[0], axis) }, randT(uint64(i), 1, 0, 2, 3, 4))
	}
}

func TestLogSoftmaxStable(t *testing.T) {
	y := LogSoftmax(Const(tensor.FromF32([]float32{1000, 0}, 2)), 0)
	require.InDeltaSlice(t, []float32{0, -1000}, y.Value.F32(), 1e-3)
}
