package nn

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/optim"
)

func newTestSGD(t testing.TB, ps []*autograd.Variable, lr, momentum, wd float64) *optim.SGD {
	t.Helper()
	o, err := optim.NewSGD(ps, optim.SGDConfig{LR: lr, Momentum: momentum, WeightDecay: wd})
	require.NoError(t, err)
	return o
}
