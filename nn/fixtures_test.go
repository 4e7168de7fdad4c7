package nn

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

func (f *fixTensor) ints() []int {
	out := make([]int, len(f.Data))
	for i, v := range f.Data {
		out[i] = int(v)
	}
	return out
}

func loadFixture(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "nn", name))
	require.NoError(t, err, "fixtures come from /usr/bin/python3 scripts/gen_fixtures_nn.py")
	require.NoError(t, json.Unmarshal(b, v))
}

// requireClose compares got with want elementwise within atol + rtol*|want|.
func requireClose(t *testing.T, want *fixTensor, got *tensor.Tensor, atol, rtol float64, msg string) {
	t.Helper()
	require.Equal(t, want.Shape, got.Shape(), "%s: shape", msg)
	g := got.Contiguous().F32()
	for i, w := range want.Data {
		d := float64(g[i]) - w
		if d < 0 {
			d = -d
		}
		aw := w
		if aw < 0 {
			aw = -aw
		}
		if d > atol+rtol*aw {
			require.Failf(t, "mismatch", "%s: element %d: got %v want %v", msg, i, g[i], w)
		}
	}
}

func constOf(f *fixTensor) *autograd.Variable { return autograd.Const(f.f32()) }
