package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestMaskedFillFixture(t *testing.T) {
	runFixture(t, "masked_fill", plain(func(c *fixCase, in []*Variable) *Variable {
		return MaskedFill(in[0], in[1].Value, c.float("value"))
	}))
}

// The anchor's causal masking, masked_fill(triu(ones, 1), -inf).softmax(-1),
// with the mask built by tensor.Triu / tensor.Tril.
func TestMaskedSoftmaxFixture(t *testing.T) {
	runFixture(t, "masked_softmax", func(c *fixCase, dt tensor.DType, in []*Variable) (*Variable, map[string]*tensor.Tensor) {
		var mask *tensor.Tensor
		if c.has("t") {
			n := c.int("t")
			mask = tensor.Triu(tensor.Ones(dt, n, n), c.int("diagonal"))
		} else {
			keep := tensor.Tril(tensor.Ones(dt, c.int("rows"), c.int("cols")), c.int("tril"))
			mask = tensor.RSubScalar(1, keep) // keep == 0
		}
		return Softmax(MaskedFill(in[0], mask, math.Inf(-1)), -1), nil
	})
}

func TestMaskedFillGradCheck(t *testing.T) {
	mask := tensor.FromF64([]float64{1, 0, 0, 1}, 4)
	gradCheck(t, func(xs []*Variable) *Variable { return Exp(MaskedFill(xs[0], mask, 0.5)) }, randT(1, 1, 0, 3, 4))
	causal := tensor.Triu(tensor.Ones(tensor.Float64, 4, 4), 1)
	gradCheck(t, func(xs []*Variable) *Variable {
		return Softmax(MaskedFill(xs[0], causal, math.Inf(-1)), -1)
	}, randT(2, 1, 0, 2, 4, 4))
}

func TestMaskedFillBadMaskPanics(t *testing.T) {
	x := Param(randT(1, 1, 0, 3, 4))
	require.Panics(t, func() { MaskedFill(x, tensor.Ones(tensor.Float64, 3), 0) })
	require.Panics(t, func() { MaskedFill(x, tensor.Ones(tensor.Float64, 2, 3, 4), 0) }, "a mask may not add dimensions")
}
