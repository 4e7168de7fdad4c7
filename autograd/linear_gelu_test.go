package autograd

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// LinearGELU gives GELU(LinearWith(...))'s output and gradients to the bit,
// in float32 and under bf16 products, with and without a bias, with batch
// dimensions, and on a second backward that accumulates into the
// parameters' gradients; its output gradient is not uniform (w), so that
// the derivative's product is visible in every gradient.
func TestLinearGELUMatchesTheTwoOps(t *testing.T) {
	for _, prec := range []tensor.Precision{tensor.PrecisionFloat32, tensor.PrecisionBFloat16} {
		for _, bias := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/bias=%v", prec, bias), func(t *testing.T) {
				const in, out = 40, 48 // the bf16 kernel's 32-value steps and a tail
				rng := tensor.NewRNG(51)
				xv := tensor.Randn(rng, tensor.Float32, 3, 7, in)
				wv, bv := tensor.Randn(rng, tensor.Float32, out, in), tensor.Randn(rng, tensor.Float32, out)
				gy := tensor.Randn(rng, tensor.Float32, 3, 7, out)
				run := func(fused bool) (y *tensor.Tensor, grads []*tensor.Tensor) {
					x, w, b := Param(xv.Clone()), Param(wv.Clone()), Param(bv.Clone())
					if !bias {
						b = nil
					}
					for range 2 { // the second backward accumulates
						var v *Variable
						if fused {
							v = LinearGELU(x, w, b, prec)
							require.Equal(t, "LinearGELU", v.creator.Name())
						} else {
							v = GELU(LinearWith(x, w, b, prec))
						}
						require.NoError(t, v.BackwardWith(gy))
						y = v.Value
					}
					grads = []*tensor.Tensor{x.Grad, w.Grad}
					if bias {
						grads = append(grads, b.Grad)
					}
					return y, grads
				}
				y1, g1 := run(false)
				y2, g2 := run(true)
				require.Equal(t, bits(y1), bits(y2), "output")
				for i := range g1 {
					require.Equal(t, bits(g1[i]), bits(g2[i]), "gradient of input %d", i)
				}
			})
		}
	}
}

// Where it is not the host's float32 (float64 here) LinearGELU is the two
// ops, checked against finite differences.
func TestLinearGELUGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable {
		return LinearGELU(xs[0], xs[1], xs[2], tensor.PrecisionFloat32)
	}, randT(1, 1, 0, 2, 3, 5), randT(2, 1, 0, 4, 5), randT(3, 1, 0, 4))
}

func bits(t *tensor.Tensor) []uint32 {
	b := make([]uint32, t.Numel())
	for i, v := range t.F32() {
		b[i] = math.Float32bits(v)
	}
	return b
}
