package autograd

import "testing"

func TestAddFixture(t *testing.T) {
	runFixture(t, "add", plain(func(_ *fixCase, in []*Variable) *Variable { return Add(in[0], in[1]) }))
}

func TestAddGradCheck(t *testing.T) {
	for i, tc := range binaryShapes {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return Add(xs[0], xs[1]) }, randT(uint64(i), 1, 0, tc.a...), randT(uint64(i+50), 1, 0, tc.b...))
		})
	}
	t.Run("same_input", func(t *testing.T) {
		gradCheck(t, func(xs []*Variable) *Variable { return Add(xs[0], xs[0]) }, randT(9, 1, 0, 3, 2))
	})
}
