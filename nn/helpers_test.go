package nn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"goddp/autograd"
	"goddp/optim"
)

func newTestSGD(t testing.TB, ps []*autograd.Variable, lr, momentum, wd float64) *optim.SGD {
	t.Helper()
	o, err := optim.NewSGD(ps, optim.SGDConfig{LR: lr, Momentum: momentum, WeightDecay: wd})
	require.NoError(t, err)
	return o
}
