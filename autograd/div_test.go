package autograd

import "testing"

func TestDivFixture(t *testing.T) {
	runFixture(t, "div", plain(func(_ *fixCase, in []*Variable) *Variable { return Div(in[0], in[1]) }))
}

func TestDivGradCheck(t *testing.T) {
	for i, tc := range binaryShapes {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return Div(xs[0], xs[1]) }, randT(uint64(i), 1, 0, tc.a...), awayFrom(randT(uint64(i+50), 1, 0, tc.b...), 0.4, 0))
		})
	}
	t.Run("same_input", func(t *testing.T) {
		gradCheck(t, func(xs []*Variable) *Variable { return Div(xs[0], xs[0]) }, randT(9, 1, 0, 3, 2))
	})
}
