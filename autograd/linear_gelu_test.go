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

// LinearGELULinear gives fc2(GELU(fc1(x)))'s output and gradients to the
// bit, under bf16 products (one op) and float32 (LinearGELU, then Linear),
// on a second backward that accumulates, with the second Linear frozen, and
// with the first frozen (then there is no op to fuse into: the three ops).
func TestLinearGELULinearMatchesTheOps(t *testing.T) {
	for _, prec := range []tensor.Precision{tensor.PrecisionBFloat16, tensor.PrecisionFloat32} {
		for _, frozen := range []string{"none", "fc1", "fc2"} {
			t.Run(fmt.Sprintf("%v/frozen=%s", prec, frozen), func(t *testing.T) {
				isFrozen := func(i int) bool { return (frozen == "fc1" && i < 3) || (frozen == "fc2" && i >= 3) }
				const in, hidden, out = 24, 80, 40
				rng := tensor.NewRNG(61)
				vals := []*tensor.Tensor{tensor.Randn(rng, tensor.Float32, 2, 9, in),
					tensor.Randn(rng, tensor.Float32, hidden, in), tensor.Randn(rng, tensor.Float32, hidden),
					tensor.Randn(rng, tensor.Float32, out, hidden), tensor.Randn(rng, tensor.Float32, out)}
				gy := tensor.Randn(rng, tensor.Float32, 2, 9, out)
				run := func(fused bool) (y *tensor.Tensor, grads []*tensor.Tensor) {
					vs := make([]*Variable, len(vals))
					for i, v := range vals {
						if isFrozen(i) {
							vs[i] = Const(v.Clone())
						} else {
							vs[i] = Param(v.Clone())
						}
					}
					for range 2 {
						var v *Variable
						if fused {
							v = LinearGELULinear(vs[0], vs[1], vs[2], vs[3], vs[4], prec)
							if prec == tensor.PrecisionBFloat16 && frozen != "fc1" {
								require.Equal(t, "LinearGELULinear", v.creator.Name())
							}
						} else {
							v = LinearWith(GELU(LinearWith(vs[0], vs[1], vs[2], prec)), vs[3], vs[4], prec)
						}
						require.NoError(t, v.BackwardWith(gy))
						y = v.Value
					}
					for _, v := range vs {
						grads = append(grads, v.Grad)
					}
					return y, grads
				}
				y1, g1 := run(false)
				y2, g2 := run(true)
				require.Equal(t, y1.Shape(), y2.Shape())
				require.Equal(t, bits(y1), bits(y2), "output")
				for i := range g1 {
					if isFrozen(i) {
						require.Nil(t, g2[i])
						continue
					}
					require.Equal(t, bits(g1[i]), bits(g2[i]), "gradient of input %d", i)
				}
			})
		}
	}
	require.PanicsWithValue(t, "autograd: LinearGELULinear: second weight [3 5] and bias [3] do not take the first Linear's output [2 4]", func() {
		LinearGELULinear(Param(tensor.New(tensor.Float32, 2, 6)), Param(tensor.New(tensor.Float32, 4, 6)), Param(tensor.New(tensor.Float32, 4)),
			Param(tensor.New(tensor.Float32, 3, 5)), Param(tensor.New(tensor.Float32, 3)), tensor.PrecisionBFloat16)
	})
}
