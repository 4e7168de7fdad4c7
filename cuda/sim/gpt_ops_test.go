package sim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/tensor"
)

// The transformer ops' device paths (tensor/device_gpt.go over the
// kernels of kernels.cu) against the CPU ops: the output and the gradient
// of every input, for odd shapes, with gradients accumulated into existing
// Grad buffers as the engine does for parameters.

// onDevice runs f on copies of xs placed on dev, back-propagates dy and
// returns the output and each input's gradient on the host (nil where an
// input got none). Each input's Grad starts at ones, so that the ops that
// accumulate into Grad are checked to add, not overwrite.
func onDevice(t *testing.T, dev tensor.Device, f func(xs []*autograd.Variable) *autograd.Variable, dy *tensor.Tensor, xs ...*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
	t.Helper()
	vs := make([]*autograd.Variable, len(xs))
	for i, x := range xs {
		vs[i] = autograd.Param(x.Clone().MustTo(dev))
		g := tensor.New(tensor.Float32, x.Shape()...)
		tensor.Fill(g, 1)
		vs[i].Grad = g.MustTo(dev)
	}
	y := f(vs)
	require.Equal(t, dev.String(), y.Value.Device().String())
	require.NoError(t, y.BackwardWith(dy.MustTo(dev)))
	out := y.Value.MustTo(tensor.CPU())
	grads := make([]*tensor.Tensor, len(vs))
	for i, v := range vs {
		if v.Grad != nil {
			grads[i] = v.Grad.MustTo(tensor.CPU())
		}
	}
	return out, grads
}

// requireSameOnSim checks f on sim against f on the CPU within tol
// relative (to 1 + |want|).
func requireSameOnSim(t *testing.T, f func(xs []*autograd.Variable) *autograd.Variable, tol float64, xs ...*tensor.Tensor) {
	t.Helper()
	d := newDevice(t)
	rng := tensor.NewRNG(11)
	wantY, wantG := onDevice(t, tensor.CPU(), f, tensor.Randn(rng, tensor.Float32, f(constants(xs)).Value.Shape()...), xs...)
	rng = tensor.NewRNG(11)
	gotY, gotG := onDevice(t, d.Tensors(), f, tensor.Randn(rng, tensor.Float32, wantY.Shape()...), xs...)
	require.Equal(t, wantY.Shape(), gotY.Shape())
	close32(t, wantY.F32(), gotY.F32(), tol, "output")
	for i := range wantG {
		close32(t, wantG[i].F32(), gotG[i].F32(), tol, fmt.Sprintf("gradient of input %d", i))
	}
}

func constants(xs []*tensor.Tensor) []*autograd.Variable {
	vs := make([]*autograd.Variable, len(xs))
	for i, x := range xs {
		vs[i] = autograd.Const(x)
	}
	return vs
}

func TestIndexSelectOnSim(t *testing.T) {
	rng := tensor.NewRNG(1)
	for _, tc := range []struct {
		shape []int
		axis  int
		idx   []int
	}{
		{[]int{13, 7}, 0, []int{3, 0, 12, 3, 3, 5, 0}}, // an embedding lookup with repeats
		{[]int{5, 1}, 0, []int{4}},
		{[]int{2, 9, 3}, 1, []int{8, 1, 1, 0, 8}}, // a middle axis: outer 2, inner 3
		{[]int{3, 4}, 1, []int{}},
	} {
		t.Run(fmt.Sprint(tc.shape, tc.axis, len(tc.idx)), func(t *testing.T) {
			requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
				return autograd.IndexSelect(xs[0], tc.axis, tc.idx)
			}, 1e-6, tensor.Randn(rng, tensor.Float32, tc.shape...))
		})
	}
}

func TestLayerNormOnSim(t *testing.T) {
	rng := tensor.NewRNG(2)
	for _, shape := range [][]int{{1, 1}, {3, 7}, {2, 5, 130}, {17, 1027}} {
		d := shape[len(shape)-1]
		x := tensor.AddScalar(tensor.MulScalar(tensor.Randn(rng, tensor.Float32, shape...), 3), 1)
		w, b := tensor.Randn(rng, tensor.Float32, d), tensor.Randn(rng, tensor.Float32, d)
		t.Run(fmt.Sprint(shape, "/affine"), func(t *testing.T) {
			requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
				return autograd.LayerNorm(xs[0], xs[1], xs[2], 1e-5)
			}, 1e-5, x, w, b)
		})
		t.Run(fmt.Sprint(shape, "/plain"), func(t *testing.T) {
			requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
				return autograd.LayerNorm(xs[0], nil, nil, 1e-5)
			}, 1e-5, x)
		})
	}
	// A normalized shape of two dimensions: rows of 4*5.
	x, w := tensor.Randn(rng, tensor.Float32, 3, 4, 5), tensor.Randn(rng, tensor.Float32, 4, 5)
	requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
		return autograd.LayerNorm(xs[0], xs[1], nil, 1e-3)
	}, 1e-5, x, w)
}

// LayerNorm keeps, on a device as on the host, x and each row's mean and
// rstd (float32, [rows]) for its backward, as torch's layer_norm: no
// activation-sized xhat. The statistics match the CPU entry's.
func TestLayerNormKeepsStatisticsOnSim(t *testing.T) {
	d := newDevice(t).Tensors()
	rng := tensor.NewRNG(12)
	x := tensor.AddScalar(tensor.Randn(rng, tensor.Float32, 6, 5, 33), 2)
	w, b := tensor.Randn(rng, tensor.Float32, 33), tensor.Randn(rng, tensor.Float32, 33)
	y, mean, rstd := tensor.LayerNorm(x.MustTo(d), w.MustTo(d), b.MustTo(d), 33, 1e-5)
	wantY, wantMean, wantRstd := tensor.LayerNorm(x, w, b, 33, 1e-5)
	for _, c := range []struct {
		name      string
		got, want *tensor.Tensor
	}{{"y", y, wantY}, {"mean", mean, wantMean}, {"rstd", rstd, wantRstd}} {
		require.Equal(t, d.String(), c.got.Device().String(), c.name)
		require.Equal(t, c.want.Shape(), c.got.Shape(), c.name)
		close32(t, c.want.F32(), c.got.MustTo(tensor.CPU()).F32(), 1e-5, c.name)
	}
	require.Equal(t, []int{30}, rstd.Shape())
	// The backward from the statistics: dx, and dw and db added into.
	gy := tensor.Randn(rng, tensor.Float32, 6, 5, 33)
	dw, db := tensor.Ones(tensor.Float32, 33), tensor.Ones(tensor.Float32, 33)
	dwD, dbD := dw.Clone().MustTo(d), db.Clone().MustTo(d)
	dx := tensor.LayerNormBackward(gy.MustTo(d), x.MustTo(d), mean, rstd, w.MustTo(d), dwD, dbD, true)
	wantDX := tensor.LayerNormBackward(gy, x, wantMean, wantRstd, w, dw, db, true)
	close32(t, wantDX.F32(), dx.MustTo(tensor.CPU()).F32(), 1e-5, "dx")
	close32(t, dw.F32(), dwD.MustTo(tensor.CPU()).F32(), 1e-5, "dw")
	close32(t, db.F32(), dbD.MustTo(tensor.CPU()).F32(), 1e-5, "db")
	require.Nil(t, tensor.LayerNormBackward(gy.MustTo(d), x.MustTo(d), mean, rstd, nil, nil, nil, false))
}

func TestGELUOnSim(t *testing.T) {
	rng := tensor.NewRNG(3)
	for _, n := range sizes {
		x := tensor.MulScalar(tensor.Randn(rng, tensor.Float32, n), 3)
		requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable { return autograd.GELU(xs[0]) }, 1e-5, x)
	}
}

func TestSoftmaxOnSim(t *testing.T) {
	rng := tensor.NewRNG(4)
	for _, s := range shapes {
		x := tensor.MulScalar(tensor.Randn(rng, tensor.Float32, s[0], s[1]), 4)
		requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable { return autograd.Softmax(xs[0], -1) }, 1e-5, x)
	}
	// Another axis runs the same entries between two transposes (issue 44:
	// one table on every device), forward and backward.
	x := tensor.MulScalar(tensor.Randn(rng, tensor.Float32, 3, 4, 5), 4)
	for _, axis := range []int{0, 1} {
		requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable { return autograd.Softmax(xs[0], axis) }, 1e-5, x)
		requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable { return autograd.LogSoftmax(xs[0], axis) }, 1e-5, x)
	}
}

func TestSelfAttentionOnSim(t *testing.T) {
	rng := tensor.NewRNG(5)
	for _, tc := range []struct {
		b, t, heads, dh int
		causal          bool
		scale           float64
	}{
		{2, 7, 3, 4, true, 0},
		{2, 7, 3, 4, false, 0},
		{1, 1, 1, 3, true, 0.7},
		{3, 13, 2, 5, true, 0},
	} {
		t.Run(fmt.Sprintf("B%d_T%d_H%d_D%d_causal%v", tc.b, tc.t, tc.heads, tc.dh, tc.causal), func(t *testing.T) {
			qkv := tensor.Randn(rng, tensor.Float32, tc.b, tc.t, 3*tc.heads*tc.dh)
			requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
				return autograd.SelfAttention(xs[0], tc.heads, autograd.AttentionOptions{Causal: tc.causal, Scale: tc.scale})
			}, 1e-5, qkv)
		})
	}
	d := newDevice(t)
	qkv := tensor.Randn(rng, tensor.Float32, 1, 3, 6).MustTo(d.Tensors())
	require.PanicsWithValue(t, "SelfAttention with an explicit Mask has no kernel on sim:0; copy its operands to the host with To(tensor.CPU())",
		func() {
			autograd.SelfAttention(autograd.Const(qkv), 1, autograd.AttentionOptions{Mask: tensor.New(tensor.Float32, 3, 3)})
		})
}

// A position embedding [T, C] added to token embeddings [B, T, C] (either
// order) and its gradient summed over the batch.
func TestAddBroadcastOnSim(t *testing.T) {
	rng := tensor.NewRNG(6)
	a, p := tensor.Randn(rng, tensor.Float32, 3, 5, 7), tensor.Randn(rng, tensor.Float32, 5, 7)
	requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable { return autograd.Add(xs[0], xs[1]) }, 1e-6, a, p)
	requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable { return autograd.Add(xs[1], xs[0]) }, 1e-6, a, p)
}

// The row kernels are correct for any launch shape: layer norm and the
// causal softmax under one-thread blocks, blocks that do not divide a row,
// and fewer blocks than rows.
func TestTransformerRowKernelsAnyLaunch(t *testing.T) {
	forLaunches(t, func(t *testing.T, grid, block int) {
		e := newEnv(t)
		rows, d := 6, 37
		x := e.randn(rows, d)
		w, b := e.randn(d), e.randn(d)
		want, wantMean, wantRstd := tensor.LayerNorm(x, w, b, d, 1e-5)
		y, mean, rs := e.zeros(rows*d), e.zeros(rows), e.zeros(rows)
		xb, wb, bb := e.up(x.F32()), e.up(w.F32()), e.up(b.F32())
		e.launch("layer_norm_f32", grid, block, sim.Ptr(y), sim.Ptr(mean), sim.Ptr(rs), sim.Ptr(xb), sim.Ptr(wb), sim.Ptr(bb), sim.I64(rows), sim.I64(d), sim.F32(1e-5))
		close32(t, want.F32(), y.F32(), 1e-5, "layer norm")
		close32(t, wantMean.F32(), mean.F32(), 1e-5, "layer norm's mean")
		close32(t, wantRstd.F32(), rs.F32(), 1e-5, "layer norm's rstd")
		// The backward's xhat, recomputed from the kept statistics.
		xh := e.zeros(rows * d)
		e.launch("layer_norm_xhat_f32", grid, block, sim.Ptr(xh), sim.Ptr(xb), sim.Ptr(mean), sim.Ptr(rs), sim.I64(rows), sim.I64(d))
		wantH, m, r := make([]float32, rows*d), mean.F32(), rs.F32()
		for i, v := range x.F32() {
			wantH[i] = (v - m[i/d]) * r[i/d]
		}
		require.Equal(t, wantH, xh.F32(), "xhat")

		l := 5
		s := e.randn(2*l, l)
		p := e.up(s.Clone().F32())
		e.launch("attn_softmax_f32", grid, block, sim.Ptr(p), sim.I64(2*l), sim.I64(l), sim.I64(l), sim.F32(1))
		got := p.F32()
		for r := range 2 * l {
			i := r % l
			row := s.F32()[r*l : (r+1)*l]
			m := math.Inf(-1)
			for _, v := range row[:i+1] {
				m = math.Max(m, float64(v))
			}
			sum := 0.0
			for _, v := range row[:i+1] {
				sum += math.Exp(float64(v) - m)
			}
			for j := range l {
				w := 0.0
				if j <= i {
					w = math.Exp(float64(row[j])-m) / sum
				}
				require.InDelta(t, w, got[r*l+j], 1e-6, "row %d col %d", r, j)
			}
		}
	})
}

// The elementwise transformer kernels under every launch shape:
// index_select_f32 and index_add_f32 (rows grouped by the host, repeats
// summed in order) against the CPU's IndexSelect and its gradient, and
// gelu_f32 / gelu_bwd_f32 against the CPU's GELU.
func TestTransformerElementwiseKernelsAnyLaunch(t *testing.T) {
	forLaunches(t, func(t *testing.T, grid, block int) {
		e := newEnv(t)
		outer, n, inner := 2, 9, 3
		idx := []int{8, 1, 1, 0, 8, 4}
		m := len(idx)
		x, gy := e.randn(outer, n, inner), e.randn(outer, m, inner)
		vx := autograd.Param(x)
		want := autograd.IndexSelect(vx, 1, idx)
		require.NoError(t, want.BackwardWith(gy))
		i32 := make([]float32, m)
		for k, j := range idx {
			i32[k] = math.Float32frombits(uint32(int32(j)))
		}
		y := e.zeros(outer * m * inner)
		e.launch("index_select_f32", grid, block, sim.Ptr(y), sim.Ptr(e.up(x.F32())), sim.Ptr(e.up(i32)), sim.I64(outer), sim.I64(n), sim.I64(m), sim.I64(inner))
		close32(t, want.Value.F32(), y.F32(), 0, "index select")

		// Rows 0, 1, 4 and 8 hold positions {3}, {1, 2}, {5}, {0, 4}.
		start := []int32{0, 1, 3, 3, 3, 4, 4, 4, 4, 6}
		pos := []int32{3, 1, 2, 5, 0, 4}
		bits := func(v []int32) []float32 {
			f := make([]float32, len(v))
			for i, u := range v {
				f[i] = math.Float32frombits(uint32(u))
			}
			return f
		}
		gx := e.zeros(outer * n * inner)
		e.launch("index_add_f32", grid, block, sim.Ptr(gx), sim.Ptr(e.up(gy.F32())), sim.Ptr(e.up(bits(start))), sim.Ptr(e.up(bits(pos))),
			sim.I64(outer), sim.I64(n), sim.I64(m), sim.I64(inner))
		close32(t, vx.Grad.F32(), gx.F32(), 0, "index add")

		g := tensor.MulScalar(e.randn(1027), 3)
		dy := e.randn(1027)
		vg := autograd.Param(g)
		wantG := autograd.GELU(vg)
		require.NoError(t, wantG.BackwardWith(dy))
		gb, out, dx := e.up(g.F32()), e.zeros(1027), e.zeros(1027)
		e.launch("gelu_f32", grid, block, sim.Ptr(out), sim.Ptr(gb), sim.I64(1027))
		close32(t, wantG.Value.F32(), out.F32(), 1e-6, "gelu")
		e.launch("gelu_bwd_f32", grid, block, sim.Ptr(dx), sim.Ptr(e.up(dy.F32())), sim.Ptr(gb), sim.I64(1027))
		close32(t, vg.Grad.F32(), dx.F32(), 1e-6, "gelu backward")
	})
}

// GemmStridedBatched (attention's per-head products in one call) equals one
// CPU GEMM per matrix, for every transposition, with operands that start
// at offsets and matrices spaced by strides larger than a matrix.
func TestGemmStridedBatchedOnSim(t *testing.T) {
	d := newDevice(t).Tensors()
	k := d.Kernels()
	require.NotNil(t, k.GemmStridedBatched)
	rng := tensor.NewRNG(5)
	const m, n, kk, batch = 5, 3, 7, 4
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		ta, tb := tr[0], tr[1]
		lda, ldb, ldc := kk+2, n+1, n+3
		if ta {
			lda = m + 2
		}
		if tb {
			ldb = kk + 1
		}
		sa, sb, sc := 60, 50, 40 // elements between matrices: more than each one spans
		a := tensor.Randn(rng, tensor.Float32, 3+batch*sa)
		b := tensor.Randn(rng, tensor.Float32, 1+batch*sb)
		c := tensor.Randn(rng, tensor.Float32, 2+batch*sc)
		want := c.Clone()
		for i := range batch {
			tensor.Gemm(ta, tb, m, n, kk, 0.5, a.F32()[3+i*sa:], lda, b.F32()[1+i*sb:], ldb, 0.25, want.F32()[2+i*sc:], ldc)
		}
		ad, bd, cd := a.MustTo(d), b.MustTo(d), c.MustTo(d)
		k.GemmStridedBatched(ta, tb, m, n, kk, 0.5, tensor.Narrow(ad, 0, 3, ad.Numel()-3), lda, sa,
			tensor.Narrow(bd, 0, 1, bd.Numel()-1), ldb, sb, 0.25, tensor.Narrow(cd, 0, 2, cd.Numel()-2), ldc, sc, batch)
		close32(t, want.F32(), cd.MustTo(tensor.CPU()).F32(), 1e-5, fmt.Sprintf("transposes %v", tr))
	}
}

// MatMul runs its GEMMs on the operands' device (tensor.GemmBatch over the
// table's Gemm entries): x @ W with the batch folded into rows, its weight
// gradient added into the Grad buffer, and a broadcast batch.
func TestMatMulOnSim(t *testing.T) {
	rng := tensor.NewRNG(13)
	mm := func(xs []*autograd.Variable) *autograd.Variable { return autograd.MatMul(xs[0], xs[1]) }
	requireSameOnSim(t, mm, 1e-5, tensor.Randn(rng, tensor.Float32, 2, 3, 4), tensor.Randn(rng, tensor.Float32, 4, 5))
	requireSameOnSim(t, mm, 1e-5, tensor.Randn(rng, tensor.Float32, 2, 1, 3, 4), tensor.Randn(rng, tensor.Float32, 3, 4, 5))
	requireSameOnSim(t, mm, 1e-5, tensor.Randn(rng, tensor.Float32, 3, 2, 4), tensor.Randn(rng, tensor.Float32, 3, 4, 6))
}

// ScaledDotProductAttention runs on a device too: the plan of tensor.Attention
// as GEMMs and the attention softmax, with and without the causal mask,
// and keys and values of another length than the queries.
func TestScaledDotProductAttentionOnSim(t *testing.T) {
	rng := tensor.NewRNG(14)
	for _, causal := range []bool{false, true} {
		q := tensor.Randn(rng, tensor.Float32, 2, 3, 5, 4)
		k, v := tensor.Randn(rng, tensor.Float32, 2, 3, 5, 4), tensor.Randn(rng, tensor.Float32, 2, 3, 5, 7)
		requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
			return autograd.ScaledDotProductAttention(xs[0], xs[1], xs[2], autograd.AttentionOptions{Causal: causal})
		}, 1e-5, q, k, v)
	}
	q := tensor.Randn(rng, tensor.Float32, 3, 2, 4)
	k, v := tensor.Randn(rng, tensor.Float32, 3, 6, 4), tensor.Randn(rng, tensor.Float32, 3, 6, 5)
	requireSameOnSim(t, func(xs []*autograd.Variable) *autograd.Variable {
		return autograd.ScaledDotProductAttention(xs[0], xs[1], xs[2], autograd.AttentionOptions{Scale: 0.3})
	}, 1e-5, q, k, v)
}
