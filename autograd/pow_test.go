package autograd

import "testing"

func TestPowFixture(t *testing.T) {
	runFixture(t, "pow", plain(func(_ *fixCase, in []*Variable) *Variable { return Pow(in[0], in[1]) }))
}

func TestPowGradCheck(t *testing.T) {
	for i, tc := range binaryShapes {
		t.Run(tc.name, func(t *testing.T) {
			gradCheck(t, func(xs []*Variable) *Variable { return Pow(xs[0], xs[1]) }, absShift(randT(uint64(i), 1, 0, tc.a...), 0.5), randT(uint64(i+50), 1, 0, tc.b...))
		})
	}
	t.Run("same_input", func(t *testing.T) {
		gradCheck(t, func(xs []*Variable) *Variable { return Pow(xs[0], xs[0]) }, absShift(randT(9, 1, 0, 3, 2), 0.5))
	})
}
