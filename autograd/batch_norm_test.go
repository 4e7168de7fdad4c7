package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestBatchNormFixture(t *testing.T) { runFixture(t, "batch_norm", batchNormCase(false)) }

func TestBatchNorm2dFixture(t *testing.T) { runFixture(t, "batch_norm2d", batchNormCase(false)) }

// batchNormCase runs a case of torch's batch_norm fixtures through
// BatchNorm, or, for the training cases when sync, through a one-replica
// SyncBatchNorm (which must match them: it is BatchNorm in training).
func batchNormCase(sync bool) fixtureFn {
	alone := func([]float64) error { return nil }
	return func(c *fixCase, dt tensor.DType, in []*Variable) (*Variable, map[string]*tensor.Tensor) {
		rm := fixTensor{Shape: []int{len(c.floats("running_mean"))}, Data: c.floats("running_mean")}.tensor(dt)
		rv := fixTensor{Shape: []int{len(c.floats("running_var"))}, Data: c.floats("running_var")}.tensor(dt)
		var w, b *Variable
		if len(in) == 3 {
			w, b = in[1], in[2]
		}
		stats := map[string]*tensor.Tensor{"running_mean": rm, "running_var": rv}
		if sync && c.bool("training") {
			return SyncBatchNorm(in[0], w, b, rm, rv, c.float("momentum"), c.float("eps"), alone), stats
		}
		return BatchNorm(in[0], w, b, rm, rv, c.bool("training"), c.float("momentum"), c.float("eps")), stats
	}
}

func TestBatchNormGradCheck(t *testing.T) {
	for _, training := range []bool{true, false} {
		rm, rv := randT(9, 0.1, 0, 3), absShift(randT(10, 1, 0, 3), 0.5)
		gradCheck(t, func(xs []*Variable) *Variable { return BatchNorm(xs[0], xs[1], xs[2], rm, rv, training, 0.1, 1e-5) },
			randT(1, 1.5, 0.3, 6, 3), randT(2, 0.3, 1, 3), randT(3, 0.2, 0, 3))
		gradCheck(t, func(xs []*Variable) *Variable { return BatchNorm(xs[0], nil, nil, rm, rv, training, 0.1, 1e-5) },
			randT(4, 1, 0, 4, 3, 5))
	}
	gradCheck(t, func(xs []*Variable) *Variable { return BatchNorm(xs[0], xs[1], nil, nil, nil, true, 0.1, 1e-5) },
		randT(5, 1, 0, 4, 2, 3), randT(6, 0.3, 1, 2))
}

func TestBatchNormBadInputPanics(t *testing.T) {
	x := Const(tensor.New(tensor.Float32, 1, 3))
	require.Panics(t, func() { BatchNorm(x, nil, nil, nil, nil, true, 0.1, 1e-5) }, "one value per channel")
	require.Panics(t, func() { BatchNorm(x, nil, nil, nil, nil, false, 0.1, 1e-5) }, "eval needs running stats")
	require.Panics(t, func() {
		BatchNorm(Const(tensor.New(tensor.Float32, 4, 3)), nil, nil, tensor.New(tensor.Float32, 2), tensor.New(tensor.Float32, 2), true, 0.1, 1e-5)
	})
}
