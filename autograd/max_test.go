package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestMaxFixture(t *testing.T) {
	runFixture(t, "max", plain(func(c *fixCase, in []*Variable) *Variable {
		return Max(in[0], c.int("axis"), c.bool("keepdim"))
	}))
}

func TestMaxGradCheck(t *testing.T) {
	tests := []struct {
		name    string
		shape   []int
		axis    int
		keepDim bool
	}{
		{"axis1", []int{3, 5}, 1, false},
		{"axis0_keep", []int{4, 3}, 0, true},
		{"mid", []int{2, 3, 4}, 1, false},
		{"neg", []int{2, 3, 4}, -1, true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return Max(xs[0], tc.axis, tc.keepDim) }, randT(uint64(i), 1, 0, tc.shape...))
		})
	}
}

func TestMaxTiesGoToFirst(t *testing.T) {
	x := Param(tensor.FromF32([]float32{1, 3, 3, 2}, 1, 4))
	y := Max(x, 1, false)
	require.Equal(t, float64(3), y.Value.Item())
	require.NoError(t, y.Backward())
	require.Equal(t, []float32{0, 1, 0, 0}, x.Grad.F32())
}
