package sim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/cuda/sim"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
)

// Every kernel of kernels.cu runs here against goddp's CPU op, over odd
// sizes and several launch shapes: one-thread blocks, blocks that do not
// divide the size, grids smaller than the work (grid-stride loops) and
// larger.
var launches = []struct{ grid, block int }{{1, 1}, {3, 1}, {2, 7}, {5, 32}, {64, 256}}

var sizes = []int{1, 7, 130, 1027}

var shapes = [][2]int{{1, 1}, {3, 7}, {5, 130}, {17, 1027}}

type env struct {
	t   *testing.T
	dev *sim.Device
	rng *tensor.RNG
}

func newEnv(t *testing.T) *env {
	return &env{t: t, dev: newDevice(t), rng: tensor.NewRNG(7)}
}

func (e *env) up(x []float32) *sim.Buffer {
	b, err := e.dev.Alloc(4 * len(x))
	require.NoError(e.t, err)
	e.t.Cleanup(b.Free)
	copy(b.F32(), x)
	return b
}

func (e *env) zeros(n int) *sim.Buffer { return e.up(make([]float32, n)) }

func (e *env) randn(shape ...int) *tensor.Tensor {
	return tensor.Randn(e.rng, tensor.Float32, shape...)
}

// positive draws from [0.5, 2.5), for log, sqrt and divisors.
func (e *env) positive(shape ...int) *tensor.Tensor {
	return tensor.AddScalar(tensor.MulScalar(tensor.Rand(e.rng, tensor.Float32, shape...), 2), 0.5)
}

func (e *env) launch(kernel string, grid, block int, args ...uint64) {
	s := e.dev.Compute()
	require.NoError(e.t, s.Launch(kernel, grid, block, args...))
	require.NoError(e.t, s.Synchronize())
}

func close32(t *testing.T, want, got []float32, tol float64, msg string) {
	t.Helper()
	require.Equal(t, len(want), len(got), msg)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.Abs(w-g) > tol*(1+math.Abs(w)) {
			t.Fatalf("%s: element %d: got %v, want %v", msg, i, g, w)
		}
	}
}

func forLaunches(t *testing.T, f func(t *testing.T, grid, block int)) {
	for _, l := range launches {
		t.Run(fmt.Sprintf("grid%d_block%d", l.grid, l.block), func(t *testing.T) { f(t, l.grid, l.block) })
	}
}

// grad returns autograd's gradient of sum(f(x) * dy) with respect to each input.
func grad(f func(xs []*autograd.Variable) *autograd.Variable, dy *tensor.Tensor, xs ...*tensor.Tensor) []*tensor.Tensor {
	vs := make([]*autograd.Variable, len(xs))
	for i, x := range xs {
		vs[i] = autograd.Param(x.Clone())
	}
	y := f(vs)
	if err := y.BackwardWith(dy); err != nil {
		panic(err)
	}
	out := make([]*tensor.Tensor, len(vs))
	for i, v := range vs {
		out[i] = v.Grad
	}
	return out
}

func TestElementwiseKernels(t *testing.T) {
	type unary struct {
		kernel string
		in     func(e *env, n int) *tensor.Tensor
		fwd    func(*tensor.Tensor) *tensor.Tensor
		bwd    string // gradient kernel, from (dy, x) or (dy, y)
		fromY  bool
		ag     func(*autograd.Variable) *autograd.Variable
	}
	randn := func(e *env, n int) *tensor.Tensor { return e.randn(n) }
	pos := func(e *env, n int) *tensor.Tensor { return e.positive(n) }
	unaries := []unary{
		{"relu_f32", randn, tensor.ReLU, "relu_bwd_f32", false, autograd.ReLU},
		{"tanh_f32", randn, tensor.Tanh, "tanh_bwd_f32", true, autograd.Tanh},
		{"sigmoid_f32", func(e *env, n int) *tensor.Tensor { return tensor.MulScalar(e.randn(n), 20) }, tensor.Sigmoid, "sigmoid_bwd_f32", true, autograd.Sigmoid},
		{"sqrt_f32", pos, tensor.Sqrt, "sqrt_bwd_f32", true, autograd.Sqrt},
		{"exp_f32", randn, tensor.Exp, "mul_f32", true, autograd.Exp},
		{"log_f32", pos, tensor.Log, "div_f32", false, autograd.Log},
	}
	for _, u := range unaries {
		t.Run(u.kernel, func(t *testing.T) {
			forLaunches(t, func(t *testing.T, grid, block int) {
				e := newEnv(t)
				for _, n := range sizes {
					x, dy := u.in(e, n), e.randn(n)
					xb, yb, dyb, dxb := e.up(x.F32()), e.zeros(n), e.up(dy.F32()), e.zeros(n)
					e.launch(u.kernel, grid, block, sim.Ptr(yb), sim.Ptr(xb), sim.I64(n))
					close32(t, u.fwd(x).F32(), yb.F32(), 1e-6, u.kernel)
					from := xb
					if u.fromY {
						from = yb
					}
					e.launch(u.bwd, grid, block, sim.Ptr(dxb), sim.Ptr(dyb), sim.Ptr(from), sim.I64(n))
					want := grad(func(v []*autograd.Variable) *autograd.Variable { return u.ag(v[0]) }, dy, x)[0]
					close32(t, want.F32(), dxb.F32(), 1e-5, u.bwd)
				}
			})
		})
	}
	binaries := []struct {
		kernel string
		fwd    func(a, b *tensor.Tensor) *tensor.Tensor
	}{{"add_f32", tensor.Add}, {"sub_f32", tensor.Sub}, {"mul_f32", tensor.Mul}, {"div_f32", tensor.Div}}
	for _, bi := range binaries {
		t.Run(bi.kernel, func(t *testing.T) {
			forLaunches(t, func(t *testing.T, grid, block int) {
				e := newEnv(t)
				for _, n := range sizes {
					a, b := e.randn(n), e.positive(n)
					ab, bb, yb := e.up(a.F32()), e.up(b.F32()), e.zeros(n)
					e.launch(bi.kernel, grid, block, sim.Ptr(yb), sim.Ptr(ab), sim.Ptr(bb), sim.I64(n))
					close32(t, bi.fwd(a, b).F32(), yb.F32(), 1e-6, bi.kernel)
					// In place: y aliases a.
					e.launch(bi.kernel, grid, block, sim.Ptr(ab), sim.Ptr(ab), sim.Ptr(bb), sim.I64(n))
					close32(t, bi.fwd(a, b).F32(), ab.F32(), 1e-6, bi.kernel+" in place")
				}
			})
		})
	}
	t.Run("div_bwd_b_f32", func(t *testing.T) {
		forLaunches(t, func(t *testing.T, grid, block int) {
			e := newEnv(t)
			for _, n := range sizes {
				a, b, dy := e.randn(n), e.positive(n), e.randn(n)
				db := e.zeros(n)
				e.launch("div_bwd_b_f32", grid, block, sim.Ptr(db), sim.Ptr(e.up(dy.F32())), sim.Ptr(e.up(a.F32())), sim.Ptr(e.up(b.F32())), sim.I64(n))
				want := grad(func(v []*autograd.Variable) *autograd.Variable { return autograd.Div(v[0], v[1]) }, dy, a, b)[1]
				close32(t, want.F32(), db.F32(), 1e-5, "div_bwd_b_f32")
			}
		})
	})
	t.Run("scale_axpy_fill", func(t *testing.T) {
		forLaunches(t, func(t *testing.T, grid, block int) {
			e := newEnv(t)
			for _, n := range sizes {
				x, y := e.randn(n), e.randn(n)
				xb, yb := e.up(x.F32()), e.up(y.F32())
				e.launch("axpy_f32", grid, block, sim.Ptr(yb), sim.Ptr(xb), sim.I64(n), sim.F32(-0.5))
				want := y.Clone()
				tensor.Axpy(want, -0.5, x)
				close32(t, want.F32(), yb.F32(), 1e-6, "axpy_f32")
				e.launch("scale_f32", grid, block, sim.Ptr(yb), sim.Ptr(xb), sim.I64(n), sim.F32(0.25))
				close32(t, tensor.MulScalar(x, 0.25).F32(), yb.F32(), 1e-7, "scale_f32")
				coef := e.up([]float32{-3})
				e.launch("scale_by_f32", grid, block, sim.Ptr(yb), sim.Ptr(coef), sim.I64(n))
				close32(t, tensor.MulScalar(x, -0.75).F32(), yb.F32(), 1e-6, "scale_by_f32")
				e.launch("fill_f32", grid, block, sim.Ptr(yb), sim.F32(1.5), sim.I64(n))
				close32(t, tensor.Full(tensor.Float32, 1.5, n).F32(), yb.F32(), 0, "fill_f32")
			}
		})
	})
}

func TestRowKernels(t *testing.T) {
	forLaunches(t, func(t *testing.T, grid, block int) {
		e := newEnv(t)
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			x, dy := e.randn(rows, cols), e.randn(rows, cols)
			xb, dyb := e.up(x.F32()), e.up(dy.F32())
			name := fmt.Sprintf("%dx%d", rows, cols)

			// Column sums in two stages: partial sums over chunks of 10
			// rows (blocks of 256 threads, any grid), then their sum; with
			// y, of x*y, added to what out holds.
			const chunk = 10
			chunks := max(1, (rows+chunk-1)/chunk)
			part, out := e.zeros(chunks*cols), e.zeros(cols)
			e.launch("col_sums_part_f32", grid, 256, sim.Ptr(part), sim.Ptr(xb), 0, sim.I64(rows), sim.I64(cols), sim.I64(chunk))
			e.launch("col_sums_f32", grid, block, sim.Ptr(out), sim.Ptr(part), sim.I64(chunks), sim.I64(cols), sim.F32(0))
			close32(t, tensor.Sum(x, []int{0}, false).F32(), out.F32(), 1e-5, "col_sums "+name)
			e.launch("col_sums_part_f32", grid, 256, sim.Ptr(part), sim.Ptr(xb), sim.Ptr(dyb), sim.I64(rows), sim.I64(cols), sim.I64(chunk))
			e.launch("col_sums_f32", grid, block, sim.Ptr(out), sim.Ptr(part), sim.I64(chunks), sim.I64(cols), sim.F32(1))
			close32(t, tensor.Add(tensor.Sum(x, []int{0}, false), tensor.Sum(tensor.Mul(x, dy), []int{0}, false)).F32(), out.F32(), 1e-5, "col_sums of products, accumulated "+name)
			out = e.zeros(rows)
			e.launch("sum_cols_f32", grid, block, sim.Ptr(out), sim.Ptr(xb), sim.I64(rows), sim.I64(cols))
			close32(t, tensor.Sum(x, []int{1}, false).F32(), out.F32(), 1e-5, "sum_cols_f32 "+name)

			bias := e.randn(cols)
			yb := e.up(x.Clone().F32())
			e.launch("add_bias_f32", grid, block, sim.Ptr(yb), sim.Ptr(e.up(bias.F32())), sim.I64(rows), sim.I64(cols))
			close32(t, tensor.Add(x, bias).F32(), yb.F32(), 1e-6, "add_bias_f32 "+name)

			for _, sm := range []struct {
				fwd, bwd string
				cpu      func(*tensor.Tensor, int) *tensor.Tensor
				ag       func(*autograd.Variable, int) *autograd.Variable
			}{
				{"softmax_f32", "softmax_bwd_f32", tensor.Softmax, autograd.Softmax},
				{"log_softmax_f32", "log_softmax_bwd_f32", tensor.LogSoftmax, autograd.LogSoftmax},
			} {
				y, dx := e.zeros(rows*cols), e.zeros(rows*cols)
				e.launch(sm.fwd, grid, block, sim.Ptr(y), sim.Ptr(xb), sim.I64(rows), sim.I64(cols))
				close32(t, sm.cpu(x, 1).F32(), y.F32(), 1e-5, sm.fwd+" "+name)
				e.launch(sm.bwd, grid, block, sim.Ptr(dx), sim.Ptr(dyb), sim.Ptr(y), sim.I64(rows), sim.I64(cols))
				want := grad(func(v []*autograd.Variable) *autograd.Variable { return sm.ag(v[0], 1) }, dy, x)[0]
				close32(t, want.F32(), dx.F32(), 1e-5, sm.bwd+" "+name)
			}

			// Cross-entropy (mean) against autograd.CrossEntropy.
			labels := make([]int32, rows)
			ilabels := make([]int, rows)
			for r := range labels {
				ilabels[r] = (r * 7919) % cols
				labels[r] = int32(ilabels[r])
			}
			lb, err := e.dev.Alloc(4 * rows)
			require.NoError(t, err)
			t.Cleanup(lb.Free)
			for r, l := range labels {
				lb.Bytes()[4*r], lb.Bytes()[4*r+1] = byte(l), byte(l>>8)
			}
			g, loss := e.zeros(rows*cols), e.zeros(rows)
			e.launch("softmax_ce_f32", grid, block, sim.Ptr(g), sim.Ptr(loss), sim.Ptr(xb), sim.Ptr(lb), sim.I64(rows), sim.I64(cols), sim.F32(1/float32(rows)))
			v := autograd.Param(x.Clone())
			l := autograd.CrossEntropy(v, ilabels, autograd.ReductionMean)
			require.NoError(t, l.Backward())
			var sum float64
			for _, x := range loss.F32() {
				sum += float64(x)
			}
			require.InDelta(t, l.Value.Item(), sum/float64(rows), 1e-5*(1+math.Abs(l.Value.Item())), "softmax_ce_f32 loss "+name)
			close32(t, v.Grad.F32(), g.F32(), 1e-5, "softmax_ce_f32 grad "+name)
		}
	})
}

func TestLossAndNormKernels(t *testing.T) {
	forLaunches(t, func(t *testing.T, grid, block int) {
		e := newEnv(t)
		for _, n := range sizes {
			p, q := e.randn(n), e.randn(n)
			g, sq := e.zeros(n), e.zeros(n)
			e.launch("mse_f32", grid, block, sim.Ptr(g), sim.Ptr(sq), sim.Ptr(e.up(p.F32())), sim.Ptr(e.up(q.F32())), sim.I64(n), sim.F32(2/float32(n)))
			tot := e.zeros(1)
			e.launch("sum_f32", grid, block, sim.Ptr(tot), sim.Ptr(sq), sim.I64(n))
			pv := autograd.Param(p.Clone())
			l := autograd.MSELoss(pv, autograd.Const(q), autograd.ReductionMean)
			require.NoError(t, l.Backward())
			require.InDelta(t, l.Value.Item(), float64(tot.F32()[0])/float64(n), 1e-5*(1+l.Value.Item()), "mse_f32 + sum_f32")
			close32(t, pv.Grad.F32(), g.F32(), 1e-5, "mse_f32 grad")

			// Grad-norm clipping, device-side, against optim.ClipGradNorm
			// over two gradients, for a clipping and a non-clipping norm.
			for _, maxNorm := range []float64{0.5, 1e6} {
				g1, g2 := e.randn(n), e.randn(n+3)
				b1, b2 := e.up(g1.F32()), e.up(g2.F32())
				ss, coef, norm := e.zeros(1), e.zeros(1), e.zeros(1)
				e.launch("sum_squares_f32", grid, block, sim.Ptr(ss), sim.Ptr(b1), sim.I64(n))
				e.launch("sum_squares_f32", grid, block, sim.Ptr(ss), sim.Ptr(b2), sim.I64(n+3))
				e.launch("clip_coef_f32", grid, block, sim.Ptr(coef), sim.Ptr(norm), sim.Ptr(ss), sim.F32(float32(maxNorm)))
				e.launch("scale_by_f32", grid, block, sim.Ptr(b1), sim.Ptr(coef), sim.I64(n))
				e.launch("scale_by_f32", grid, block, sim.Ptr(b2), sim.Ptr(coef), sim.I64(n+3))
				v1, v2 := autograd.Param(tensor.New(tensor.Float32, n)), autograd.Param(tensor.New(tensor.Float32, n+3))
				v1.Grad, v2.Grad = g1.Clone(), g2.Clone()
				want := optim.ClipGradNorm([]*autograd.Variable{v1, v2}, maxNorm)
				require.InDelta(t, want, float64(norm.F32()[0]), 1e-5*want, "clip norm")
				close32(t, v1.Grad.F32(), b1.F32(), 1e-5, "clip grad 1")
				close32(t, v2.Grad.F32(), b2.F32(), 1e-5, "clip grad 2")
			}
		}
	})
}

// The fused optimizer kernels against goddp/optim over three steps.
func TestOptimizerKernels(t *testing.T) {
	sgds := []optim.SGDConfig{
		{LR: 0.1},
		{LR: 0.1, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.8, Nesterov: true, WeightDecay: 0.02},
	}
	adams := []struct {
		cfg   optim.AdamConfig
		adamW bool
	}{
		{optim.DefaultAdamW(), true},
		{optim.AdamConfig{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1}, true},
		{optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.05}, false},
	}
	forLaunches(t, func(t *testing.T, grid, block int) {
		e := newEnv(t)
		for _, n := range sizes {
			for ci, cfg := range sgds {
				w := e.randn(n)
				v := autograd.Param(w.Clone())
				opt, err := optim.NewSGD([]*autograd.Variable{v}, cfg)
				require.NoError(t, err)
				wb, bufb := e.up(w.F32()), e.zeros(n)
				for step := range 3 {
					g := e.randn(n)
					v.Grad = g.Clone()
					require.NoError(t, opt.Step())
					gb := e.up(g.F32())
					if cfg.Momentum == 0 && cfg.WeightDecay == 0 {
						e.launch("sgd_f32", grid, block, sim.Ptr(wb), sim.Ptr(gb), sim.I64(n), sim.F32(float32(cfg.LR)))
					} else {
						first, nest := float32(0), float32(0)
						if step == 0 {
							first = 1
						}
						if cfg.Nesterov {
							nest = 1
						}
						e.launch("sgd_momentum_f32", grid, block, sim.Ptr(wb), sim.Ptr(gb), sim.Ptr(bufb), sim.I64(n),
							sim.F32(float32(cfg.LR)), sim.F32(float32(cfg.Momentum)), sim.F32(float32(cfg.Dampening)),
							sim.F32(float32(cfg.WeightDecay)), sim.F32(nest), sim.F32(first))
					}
					close32(t, v.Value.F32(), wb.F32(), 1e-5, fmt.Sprintf("sgd config %d step %d n %d", ci, step, n))
				}
			}
			for ci, a := range adams {
				w := e.randn(n)
				v := autograd.Param(w.Clone())
				var opt optim.Optimizer
				var err error
				if a.adamW {
					opt, err = optim.NewAdamW([]*autograd.Variable{v}, a.cfg)
				} else {
					opt, err = optim.NewAdam([]*autograd.Variable{v}, a.cfg)
				}
				require.NoError(t, err)
				wb, mb, vb := e.up(w.F32()), e.zeros(n), e.zeros(n)
				dec := float32(0)
				if a.adamW {
					dec = 1
				}
				for step := 1; step <= 3; step++ {
					g := e.randn(n)
					v.Grad = g.Clone()
					require.NoError(t, opt.Step())
					stepSize := a.cfg.LR / (1 - math.Pow(a.cfg.Beta1, float64(step)))
					invBc2 := 1 / math.Sqrt(1-math.Pow(a.cfg.Beta2, float64(step)))
					e.launch("adam_f32", grid, block, sim.Ptr(wb), sim.Ptr(e.up(g.F32())), sim.Ptr(mb), sim.Ptr(vb), sim.I64(n),
						sim.F32(float32(a.cfg.LR)), sim.F32(float32(a.cfg.Beta1)), sim.F32(float32(a.cfg.Beta2)), sim.F32(float32(a.cfg.Eps)),
						sim.F32(float32(a.cfg.WeightDecay)), sim.F32(dec), sim.F32(float32(stepSize)), sim.F32(float32(invBc2)))
					close32(t, v.Value.F32(), wb.F32(), 1e-5, fmt.Sprintf("adam config %d step %d n %d", ci, step, n))
				}
			}
		}
	})
}

// GEMM on sim is the CPU engine, with every transpose.
func TestSgemm(t *testing.T) {
	e := newEnv(t)
	m, n, k := 5, 7, 3
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			a, b := e.randn(m, k), e.randn(k, n)
			as, bs := a, b
			lda, ldb := k, n
			if ta {
				as, lda = tensor.Transpose(a, 0, 1).Contiguous(), m
			}
			if tb {
				bs, ldb = tensor.Transpose(b, 0, 1).Contiguous(), k
			}
			c := e.zeros(m * n)
			e.dev.Compute().Sgemm(ta, tb, m, n, k, 1, e.up(as.F32()), lda, e.up(bs.F32()), ldb, 0, c, n)
			require.NoError(t, e.dev.Compute().Synchronize())
			close32(t, tensor.MatMul(a, b).F32(), c.F32(), 1e-5, fmt.Sprintf("sgemm ta=%v tb=%v", ta, tb))
		}
	}
}
