package optim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

func TestClipGradNormMatchesTorch(t *testing.T) {
	var fx struct {
		Cases []struct {
			Name      string      `json:"name"`
			MaxNorm   float64     `json:"max_norm"`
			Grads     []fixTensor `json:"grads"`
			TotalNorm float64     `json:"total_norm"`
			Clipped   []fixTensor `json:"clipped"`
		}
	}
	loadFixture(t, "clip.json", &fx)
	require.NotEmpty(t, fx.Cases)
	for _, c := range fx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var ps []*autograd.Variable
			for _, g := range c.Grads {
				p := autograd.Param(tensor.New(tensor.Float32, g.Shape...))
				p.Grad = g.f32()
				ps = append(ps, p)
			}
			// A parameter without a gradient is ignored.
			ps = append(ps, autograd.Param(tensor.New(tensor.Float32, 3)))
			norm := ClipGradNorm(ps, c.MaxNorm)
			require.InDelta(t, c.TotalNorm, norm, 1e-5*c.TotalNorm)
			for i, want := range c.Clipped {
				requireClose(t, want.Data, ps[i].Grad.F32(), 1e-7, 1e-6, c.Name)
			}
			require.Nil(t, ps[len(ps)-1].Grad)
		})
	}
}

func TestClipGradNormNonFinite(t *testing.T) {
	p := autograd.Param(tensor.New(tensor.Float32, 2))
	p.Grad = tensor.FromF32([]float32{float32(math.Inf(1)), 1}, 2)
	norm := ClipGradNorm([]*autograd.Variable{p}, 1)
	require.True(t, math.IsInf(norm, 1), "the norm is reported as is")
}
