package nn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// crossEntropyOptionsCase is a case of testdata/nn/cross_entropy_options.json:
// a lossCase with torch's ignore_index (absent for the default) and
// label_smoothing.
type crossEntropyOptionsCase struct {
	lossCase
	IgnoreIndex    *int    `json:"ignore_index"`
	LabelSmoothing float64 `json:"label_smoothing"`
}

func TestCrossEntropyLossOptionsMatchTorch(t *testing.T) {
	var fx struct{ Cases []crossEntropyOptionsCase }
	loadFixture(t, "cross_entropy_options.json", &fx)
	require.NotEmpty(t, fx.Cases)
	for _, c := range fx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			red, ok := fixtureReductions[c.Reduction]
			require.True(t, ok)
			x := autograd.Param(c.Input.f32())
			loss := CrossEntropyLoss{Reduction: red, IgnoreIndex: c.IgnoreIndex, LabelSmoothing: c.LabelSmoothing}
			out := loss.Forward(x, c.Classes)
			requireClose(t, &c.Out, out.Value, 1e-6, 1e-5, "forward")
			require.NoError(t, out.BackwardWith(c.GradOut.f32()))
			requireClose(t, &c.GradInput, x.Grad, 1e-6, 1e-4, "grad input")
		})
	}
}

func TestCrossEntropyLossZeroValueIgnoresMinus100(t *testing.T) {
	x := autograd.Param(tensor.FromF32([]float32{1, 2, 3, 0, 0, 0, -1, 4, 2}, 3, 3))
	var l CrossEntropyLoss
	both := l.Forward(x, []int{2, -100, 1}).Value.Item()
	first := l.Forward(autograd.Const(tensor.FromF32([]float32{1, 2, 3}, 1, 3)), []int{2}).Value.Item()
	last := l.Forward(autograd.Const(tensor.FromF32([]float32{-1, 4, 2}, 1, 3)), []int{1}).Value.Item()
	require.InDelta(t, (first+last)/2, both, 1e-6, "the mean counts only the kept targets")

	zero := CrossEntropyLoss{IgnoreIndex: new(0)}
	require.Panics(t, func() { zero.Forward(x, []int{2, -100, 1}) }, "-100 is a bad target once the ignore index is 0")
	require.InDelta(t, last, zero.Forward(x, []int{0, 0, 1}).Value.Item(), 1e-6)
}

func TestCrossEntropyLossBadLabelSmoothingPanics(t *testing.T) {
	x := autograd.Param(tensor.New(tensor.Float32, 2, 3))
	require.PanicsWithValue(t, "autograd: CrossEntropy: label smoothing 1.5 outside [0, 1]",
		func() { CrossEntropyLoss{LabelSmoothing: 1.5}.Forward(x, []int{0, 1}) })
	require.PanicsWithValue(t, "autograd: CrossEntropy: label smoothing -0.1 outside [0, 1]",
		func() { CrossEntropyLoss{LabelSmoothing: -0.1}.Forward(x, []int{0, 1}) })
}
