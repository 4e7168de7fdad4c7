package autograd

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestGELUFixture(t *testing.T) {
	runFixture(t, "gelu", plain(func(_ *fixCase, in []*Variable) *Variable { return GELU(in[0]) }))
}

func TestGELUGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return GELU(xs[0]) }, randT(1, 2, 0, 3, 4))
	// After a fresh op the engine owns gy and the backward runs in place.
	gradCheck(t, func(xs []*Variable) *Variable { return GELU(Mul(xs[0], xs[1])) }, randT(1, 2, 0, 3, 4), randT(2, 0.5, 1, 3, 4))
}

// checkF32MatchesF64 runs op forward and backward on float32 values and on
// the same values widened to float64, and requires the float32 results to be
// within ulps float32 ulps of the float64 ones: the float32 path runs the
// fast kernels of tensor/fastmath.go, the float64 path math.*. Gradients
// that cancel to near zero (GELU's at x ≈ -0.75) get an absolute slack of
// ulps·2**-24, float32's resolution at the terms' size.
func checkF32MatchesF64(t *testing.T, op func(*Variable) *Variable, x64 *tensor.Tensor, ulps float64) {
	t.Helper()
	x32 := tensor.AsType(x64, tensor.Float32)
	x64 = tensor.AsType(x32, tensor.Float64) // the same values exactly
	for _, inPlace := range []bool{false, true} {
		run := func(x *tensor.Tensor) (y, g []float64) {
			v := Param(x)
			in := v
			if inPlace { // after a fresh op the engine owns gy and the backward runs in place
				in = Mul(v, Const(tensor.OnesLike(x)))
			}
			out := op(in)
			require.NoError(t, out.BackwardWith(tensor.AsType(randT(9, 1, 0, x.Shape()...), x.DType())))
			return toF64(out.Value), toF64(v.Grad)
		}
		y32, g32 := run(x32)
		y64, g64 := run(x64)
		for i := range y64 {
			ulp := func(w float64) float64 { _, e := math.Frexp(w); return math.Ldexp(1, max(e-24, -149)) }
			require.LessOrEqual(t, math.Abs(y32[i]-y64[i]), ulps*ulp(y64[i]), "forward at x = %g (in place %v)", x64.F64()[i], inPlace)
			require.LessOrEqual(t, math.Abs(g32[i]-g64[i]), ulps*(ulp(g64[i])+0x1p-24), "gradient at x = %g (in place %v)", x64.F64()[i], inPlace)
		}
	}
}

// sweepT is a float64 tensor of n values spread over [-lo, hi] plus the
// points where the kernels switch regimes or saturate.
func sweepT(lo, hi float64, n int, extra ...float64) *tensor.Tensor {
	d := make([]float64, 0, n+len(extra))
	for i := range n {
		d = append(d, -lo+(hi+lo)*float64(i)/float64(n-1))
	}
	d = append(d, extra...)
	return tensor.FromF64(d, len(d))
}

func TestGELUFloat32MatchesFloat64(t *testing.T) {
	// Below x ≈ -6 float64's 1+erf(x/√2) itself loses the relative
	// accuracy the float32 kernel keeps, so compare where the reference holds.
	// The kernel's arithmetic is float32 (tensor.GELUF32: within 8 ulps).
	checkF32MatchesF64(t, GELU, sweepT(5, 20, 2001, -0.7517916, 1e-30, -1e-30, 0), 8)
}

// A float32 GELU that needs a gradient keeps GELU'(x), not x, so that its
// backward is one product; one that needs none keeps nothing.
func TestGELUKeepsItsDerivative(t *testing.T) {
	x := tensor.AsType(sweepT(3, 3, 64), tensor.Float32)
	op, ok := GELU(Param(x)).Creator().(*unaryOp)
	require.True(t, ok)
	require.NotNil(t, op.saved.Scratch(), "the derivative, the op's own")
	want := make([]float32, x.Numel())
	tensor.GELUGradF32(want, tensor.OnesLike(x).F32(), x.F32())
	require.Equal(t, want, op.saved.Scratch().F32(), "the derivative equals the gradient at gy = 1")
	require.Nil(t, GELU(Const(x)).Creator(), "no gradient, no op")

	// FreeGraph gives the derivative back with the graph's values (a
	// tensor large enough to come from the cache).
	big := tensor.AsType(sweepT(3, 3, 1<<14), tensor.Float32)
	y := GELU(Param(big))
	d := y.Creator().(*unaryOp).saved.Scratch()
	loss := SumAll(y)
	require.NoError(t, loss.Backward())
	loss.FreeGraph()
	require.Panics(t, func() { d.F32() }, "the derivative's storage was recycled")
}
