package optim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// fixTensor is a tensor as scripts/gen_fixtures_nn.py writes it.
type fixTensor struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

func (f *fixTensor) f32() *tensor.Tensor {
	d := make([]float32, len(f.Data))
	for i, v := range f.Data {
		d[i] = float32(v)
	}
	return tensor.FromF32(d, f.Shape...)
}

func loadFixture(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "optim", name))
	require.NoError(t, err, "fixtures come from /usr/bin/python3 scripts/gen_fixtures_nn.py")
	require.NoError(t, json.Unmarshal(b, v))
}

// requireClose compares got against want elementwise with a mixed tolerance.
func requireClose(t *testing.T, want []float64, got []float32, atol, rtol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		d := float64(got[i]) - want[i]
		if d < 0 {
			d = -d
		}
		lim := atol + rtol*abs(want[i])
		if d > lim {
			require.Failf(t, "mismatch", "%s: element %d: got %v want %v (|diff| %g > %g)", msg, i, got[i], want[i], d, lim)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func paramsFrom(init []fixTensor) []*autograd.Variable {
	ps := make([]*autograd.Variable, len(init))
	for i := range init {
		ps[i] = autograd.Param(init[i].f32())
	}
	return ps
}
