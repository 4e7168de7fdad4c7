package autograd

import "testing"

func TestLayerNormFixture(t *testing.T) {
	runFixture(t, "layer_norm", plain(func(c *fixCase, in []*Variable) *Variable {
		if len(in) == 1 {
			return LayerNorm(in[0], nil, nil, c.float("eps"))
		}
		return LayerNorm(in[0], in[1], in[2], c.float("eps"))
	}))
}

func TestLayerNormGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], xs[1], xs[2], 1e-5) },
		randT(1, 1, 0, 4, 6), randT(2, 0.3, 1, 6), randT(3, 1, 0, 6))
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], nil, nil, 1e-5) }, randT(4, 1, 0, 3, 5))
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], xs[1], nil, 1e-5) }, randT(5, 1, 0, 2, 3, 4), randT(6, 0.3, 1, 4))
	// Normalized over the two trailing dims.
	gradCheck(t, func(xs []*Variable) *Variable { return LayerNorm(xs[0], xs[1], xs[2], 1e-5) },
		randT(7, 1, 0, 2, 3, 4), randT(8, 0.3, 1, 3, 4), randT(9, 1, 0, 3, 4))
}
