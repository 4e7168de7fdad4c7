package autograd

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

func TestSumAllFixture(t *testing.T) {
	runFixture(t, "sum_all", plain(func(_ *fixCase, in []*Variable) *Variable { return SumAll(in[0]) }))
}

func TestSumAllGradCheck(t *testing.T) {
	gradCheck(t, func(xs []*Variable) *Variable { return SumAll(xs[0]) }, randT(1, 1, 0, 2, 3, 2))
}

// denseSumAll is SumAll with the backward it had before the broadcast view:
// a materialised tensor filled with gy, handed over as a fresh gradient.
type denseSumAllOp struct{ inputs }

func (o *denseSumAllOp) Name() string { return "denseSumAll" }
func (o *denseSumAllOp) freshGrads()  {}
func (o *denseSumAllOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gx := tensor.New(gy.DType(), o.in(0).Value.Shape()...)
	if gx.DType() == tensor.Float64 {
		for i := range gx.F64() {
			gx.F64()[i] = gy.Item()
		}
	} else {
		for i := range gx.F32() {
			gx.F32()[i] = float32(gy.Item())
		}
	}
	return []*tensor.Tensor{gx}
}

func denseSumAll(a *Variable) *Variable {
	return FromOp(SumAll(a).Value, &denseSumAllOp{ins(a)})
}

// SumAll's broadcast gradient must leave every leaf gradient bit for bit
// where the materialised one did, through each kind of consumer: Mul by a
// scalar (the product stays a broadcast), Mul by a tensor, ops that need a
// dense gy (ReLU, Linear, Transpose), Add fan-out, non-leaf accumulation,
// and a leaf whose Grad already exists (second backward).
func TestSumAllBroadcastGradBitIdentical(t *testing.T) {
	type graph struct {
		name   string
		shapes [][]int
		build  func(sum func(*Variable) *Variable, p []*Variable) *Variable
	}
	graphs := []graph{
		{"mul-scalar", [][]int{{7}, {}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return sum(Mul(p[0], p[1]))
		}},
		{"scalar-mul", [][]int{{1}, {3, 11}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return sum(Mul(p[0], p[1]))
		}},
		{"mul-tensor", [][]int{{3, 11}, {3, 11}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return sum(Mul(p[0], p[1]))
		}},
		{"leaf", [][]int{{33}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable { return sum(p[0]) }},
		{"add-fanout", [][]int{{4, 5}, {}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return Add(sum(Mul(p[0], p[1])), sum(Add(p[0], p[0])))
		}},
		{"nonleaf", [][]int{{2, 3, 5}, {}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			y := Mul(p[0], p[1])
			return Add(sum(y), sum(Mul(y, p[1])))
		}},
		{"relu-transpose", [][]int{{6, 4}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return Add(sum(ReLU(p[0])), sum(Transpose(p[0], 0, 1)))
		}},
		{"linear", [][]int{{5, 3}, {4, 3}, {4}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return sum(Linear(p[0], p[1], p[2]))
		}},
		{"meanall-sub-div", [][]int{{9}, {9}}, func(_ func(*Variable) *Variable, p []*Variable) *Variable {
			return MeanAll(Div(Sub(p[0], p[1]), p[1]))
		}},
		{"empty", [][]int{{0, 3}, {}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return sum(Mul(p[0], p[1]))
		}},
		{"large", [][]int{{1000003}, {}}, func(sum func(*Variable) *Variable, p []*Variable) *Variable {
			return sum(Mul(p[0], p[1]))
		}},
	}
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, g := range graphs {
			t.Run(fmt.Sprintf("%s/%v", g.name, dt), func(t *testing.T) {
				run := func(sum func(*Variable) *Variable, seed float64) []*tensor.Tensor {
					ps := make([]*Variable, len(g.shapes))
					for i, s := range g.shapes {
						ps[i] = Param(tensor.AsType(randT(uint64(40+i), 1, 0.5, s...), dt))
					}
					for range 2 { // the second pass adds into existing Grads
						loss := g.build(sum, ps)
						require.NoError(t, loss.BackwardWith(tensor.Full(dt, seed)))
					}
					out := make([]*tensor.Tensor, len(ps))
					for i, p := range ps {
						out[i] = p.Grad
					}
					return out
				}
				for _, seed := range []float64{1, -0.3, math.Copysign(0, -1)} {
					want, got := run(denseSumAll, seed), run(SumAll, seed)
					for i := range want {
						require.NotNil(t, got[i])
						require.Equal(t, want[i].Shape(), got[i].Shape())
						w, gg := want[i].Contiguous(), got[i].Contiguous()
						for k := range w.Numel() {
							wb, gb := math.Float64bits(w.At(unravel(k, w.Shape())...)), math.Float64bits(gg.At(unravel(k, w.Shape())...))
							if wb != gb {
								t.Fatalf("seed %v grad %d element %d: %v, want %v", seed, i, k, gg.At(unravel(k, w.Shape())...), w.At(unravel(k, w.Shape())...))
							}
						}
					}
				}
			})
		}
	}
}

func unravel(k int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = k % shape[d]
		k /= shape[d]
	}
	return idx
}

// The backward really is a view: no tensor of the input's size is filled,
// and Mul by a scalar keeps it one.
func TestSumAllBackwardIsBroadcastView(t *testing.T) {
	p := Param(tensor.New(tensor.Float32, 4, 6))
	x := Const(tensor.Scalar(tensor.Float32, 3))
	y := Mul(p, x)
	s := SumAll(y)
	g := s.creator.Backward(tensor.Scalar(tensor.Float32, 2))[0]
	require.Equal(t, []int{4, 6}, g.Shape())
	require.Equal(t, []int{0, 0}, g.Strides())
	gp := y.creator.Backward(g)[0]
	require.Equal(t, []int{0, 0}, gp.Strides())
	require.Equal(t, 6.0, gp.At(3, 5))
}

// SumAll and MeanAll accumulate in float64 in tensor.SumAll's documented
// order (lane i%16, pairwise combination, then the tail), on contiguous and
// strided inputs.
func TestSumAllOrder(t *testing.T) {
	ref := func(v []float64) float64 {
		var s [16]float64
		i := 0
		for ; i+16 <= len(v); i += 16 {
			for j := range 16 {
				s[j] += v[i+j]
			}
		}
		for w := 8; w >= 1; w /= 2 {
			for j := range w {
				s[j] += s[j+w]
			}
		}
		r := s[0]
		for ; i < len(v); i++ {
			r += v[i]
		}
		return r
	}
	for _, n := range []int{0, 1, 7, 33, 1000003} {
		x := randT(uint64(n), 1e3, 0.1, n)
		d := x.F64()
		for i := range d {
			d[i] *= math.Pow(10, float64(i%17-8)) // wide exponents: order matters
		}
		want := ref(d)
		require.Equal(t, math.Float64bits(want), math.Float64bits(SumAll(Const(x)).Value.Item()), "n=%d", n)
		if n > 0 {
			require.Equal(t, math.Float64bits(want/float64(n)), math.Float64bits(MeanAll(Const(x)).Value.Item()), "mean n=%d", n)
		}
		x32 := tensor.AsType(x, tensor.Float32)
		v32 := x32.F32()
		w64 := make([]float64, n)
		for i, v := range v32 {
			w64[i] = float64(v)
		}
		require.Equal(t, float32(ref(w64)), float32(SumAll(Const(x32)).Value.Item()), "float32 n=%d", n)
	}
	// A strided view sums in its element order.
	m := randT(3, 1, 0, 5, 7)
	tr := tensor.Transpose(m, 0, 1)
	require.Equal(t, math.Float64bits(ref(tr.Contiguous().F64())), math.Float64bits(SumAll(Const(tr)).Value.Item()))
}

// A one-element input gets a plain gradient (row-major strides), never a
// stride-0 view that could be adopted as a leaf's Grad.
func TestSumAllOneElementGradIsPlain(t *testing.T) {
	for _, shape := range [][]int{{}, {1}, {1, 1, 1}} {
		p := Param(tensor.Full(tensor.Float32, 2, shape...))
		require.NoError(t, SumAll(p).Backward())
		require.True(t, p.Grad.IsContiguous())
		want := make([]int, len(shape))
		for i := range want {
			want[i] = 1
		}
		require.Equal(t, want, append([]int{}, p.Grad.Strides()...), "shape %v", shape)
		require.Equal(t, 1.0, p.Grad.Item())
	}
}
