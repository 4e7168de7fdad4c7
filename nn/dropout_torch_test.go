package nn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// TestDropoutMatchesTorch checks Dropout's output against torch's
// F.dropout(x, p, training=True) after torch.manual_seed(seed): the same
// elements are zeroed and the survivors scaled to the same bits.
func TestDropoutMatchesTorch(t *testing.T) {
	f := loadTorchInit(t)
	require.NotEmpty(t, f.Dropout)
	for _, c := range f.Dropout {
		rng := tensor.NewRNG(c.Seed)
		if !c.LinearThenDropout {
			d := NewDropout(rng, c.P)
			y := d.Forward(autograd.Const(c.X.tensor(t)))
			requireBitEqual(t, c.Y.tensor(t), y.Value, "dropout")
			continue
		}
		// torch.manual_seed(3); Sequential(Linear(4, 6), Dropout(0.25)): the
		// dropout mask continues the stream that initialised the Linear.
		lin := NewLinear(rng, 4, 6)
		requireBitEqual(t, c.Weight.tensor(t), lin.Weight.Value, "linear weight")
		requireBitEqual(t, c.Bias.tensor(t), lin.Bias.Value, "linear bias")
		d := NewDropout(rng, c.P)
		y := d.Forward(lin.Forward(autograd.Const(c.X.tensor(t)))).Value.Contiguous().F32()
		want := c.Y.tensor(t).F32()
		require.Len(t, y, len(want))
		dropped := 0
		for i := range want {
			// The zeros must coincide exactly; the survivors are the Linear's
			// output (a GEMM whose summation order may differ from torch's in
			// the last bit) times the same scale.
			require.Equal(t, want[i] == 0, y[i] == 0, "element %d: got %v want %v", i, y[i], want[i])
			require.InDelta(t, want[i], y[i], 1e-6*math.Max(1, math.Abs(float64(want[i]))), "element %d", i)
			if want[i] == 0 {
				dropped++
			}
		}
		require.Positive(t, dropped, "the fixture must drop something")
	}
}
