package gpt2

import (
	"math"
	"runtime"
	"sync"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// transposed returns wᵀ of a 2-D parameter as a contiguous tensor, the
// operand autograd.LinearWith takes, and transposes its gradient back to
// w's layout in the backward. It is how a Conv1D weight, stored [in, out]
// as HF's files and nn.StateDict have it, reaches the Linear kernels
// (fused bias, bf16 products, device GEMMs) that want [out, in]: one pass
// over the weight forward and one over its gradient backward, against a
// product that reads the weight once per row block of the batch.
func transposed(w *autograd.Variable) *autograd.Variable {
	return autograd.FromOp(transpose2D(w.Value), &transposeOp{in: []*autograd.Variable{w}})
}

type transposeOp struct{ in []*autograd.Variable }

func (o *transposeOp) Name() string                 { return "gpt2.Conv1DWeight" }
func (o *transposeOp) Inputs() []*autograd.Variable { return o.in }
func (o *transposeOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{transpose2D(gy)}
}

// transposeBlock is the tile edge of the host transpose: 32×32 float32
// tiles (4 KiB read, 4 KiB written) stay in L1 while the strided side is
// walked.
const transposeBlock = 32

// transpose2D returns a contiguous copy of the transpose of the 2-D t. A
// device tensor goes through the device's strided copy.
func transpose2D(t *tensor.Tensor) *tensor.Tensor {
	if !t.IsCPU() {
		return tensor.Transpose(t, 0, 1).Contiguous()
	}
	t = t.Contiguous()
	r, c := t.Size(0), t.Size(1)
	out := tensor.Empty(t.DType(), c, r) // every element written below
	if t.DType() == tensor.Float64 {
		transposeRows(out.F64(), t.F64(), r, c)
	} else {
		transposeRows(out.F32(), t.F32(), r, c)
	}
	return out
}

// transposeRows writes dst [c, r] = srcᵀ for src [r, c], tiled, the row
// tiles split over the cores when the matrix is large enough to pay for
// the goroutines.
func transposeRows[T float32 | float64](dst, src []T, r, c int) {
	tiles := (r + transposeBlock - 1) / transposeBlock
	work := func(t0, t1 int) {
		for i0 := t0 * transposeBlock; i0 < min(r, t1*transposeBlock); i0 += transposeBlock {
			i1 := min(i0+transposeBlock, r)
			for j0 := 0; j0 < c; j0 += transposeBlock {
				j1 := min(j0+transposeBlock, c)
				for i := i0; i < i1; i++ {
					row := src[i*c : i*c+c]
					for j := j0; j < j1; j++ {
						dst[j*r+i] = row[j]
					}
				}
			}
		}
	}
	parallel(tiles, r*c, work)
}

// parallelMin is the element count below which the elementwise loops run
// on the calling goroutine: starting workers costs microseconds, a pass
// over 64K float32s about as much.
const parallelMin = 1 << 16

// parallel splits [0, n) into one contiguous range per core and runs
// work on each, when size (the elements the whole call touches) is worth
// it; otherwise work(0, n) here.
func parallel(n, size int, work func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n, size/parallelMin)
	if w <= 1 {
		work(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := range w {
		lo, hi := k*n/w, (k+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(lo, hi)
		}()
	}
	wg.Wait()
}

// GELU's tanh approximation (Hendrycks and Gimpel), GPT-2's activation:
// ½x(1 + tanh(√(2/π)(x + 0.044715x³))), torch's
// F.gelu(x, approximate='tanh') and HF's "gelu_new".
const (
	geluBeta  = 0.7978845608028654 // √(2/π)
	geluKappa = 0.044715
)

// GELUTanh returns GELU's tanh approximation of a, GPT-2's activation
// (torch's F.gelu(a, approximate='tanh'); autograd.GELU is the exact erf
// form, which GPT-2 does not use). On the host a float32 input keeps the
// derivative for the backward, one activation-sized tensor, as
// autograd.GELU does; a device input is the composition of autograd's
// Tanh, Mul, Scale and Add, which run there.
func GELUTanh(a *autograd.Variable) *autograd.Variable {
	if !a.Value.IsCPU() {
		x := a
		inner := autograd.Scale(autograd.Add(x, autograd.Scale(autograd.Mul(autograd.Mul(x, x), x), geluKappa)), geluBeta)
		h := autograd.Scale(x, 0.5)
		return autograd.Add(h, autograd.Mul(h, autograd.Tanh(inner)))
	}
	x := a.Value.Contiguous()
	y := tensor.Empty(x.DType(), x.Shape()...)
	var d *tensor.Tensor
	if a.RequiresGrad() {
		d = tensor.Empty(x.DType(), x.Shape()...)
	}
	n := x.Numel()
	if x.DType() == tensor.Float64 {
		var dd []float64
		if d != nil {
			dd = d.F64()
		}
		geluTanh64(y.F64(), dd, x.F64())
	} else {
		ys, xs := y.F32(), x.F32()
		var ds []float32
		if d != nil {
			ds = d.F32()
		}
		parallel(n, n, func(lo, hi int) {
			var dc []float32
			if ds != nil {
				dc = ds[lo:hi]
			}
			geluTanh32(ys[lo:hi], dc, xs[lo:hi])
		})
	}
	return autograd.FromOp(y, &geluTanhOp{in: []*autograd.Variable{a}, deriv: d})
}

// geluTanh32 writes y = GELU(x) and, when d is not nil, d = GELU'(x):
//
//	d = ½(1 + t) + ½x(1 - t²)·√(2/π)(1 + 3·0.044715x²),  t = tanh(√(2/π)(x + 0.044715x³))
//
// in float32 as torch's CPU kernel computes the forward, the tanh from
// tensor.TanhF32 (within about an ulp).
func geluTanh32(y, d, x []float32) {
	for i, v := range x {
		y[i] = geluBeta * (v + geluKappa*v*v*v)
	}
	tensor.TanhF32(y, y)
	for i, v := range x {
		t := y[i]
		if d != nil {
			d[i] = 0.5*(1+t) + 0.5*v*(1-t*t)*geluBeta*(1+3*geluKappa*v*v)
		}
		y[i] = 0.5 * v * (1 + t)
	}
}

// geluTanh64 is geluTanh32 in float64 with math.Tanh, for the gradient
// checks.
func geluTanh64(y, d, x []float64) {
	for i, v := range x {
		t := math.Tanh(geluBeta * (v + geluKappa*v*v*v))
		if d != nil {
			d[i] = 0.5*(1+t) + 0.5*v*(1-t*t)*geluBeta*(1+3*geluKappa*v*v)
		}
		y[i] = 0.5 * v * (1 + t)
	}
}

type geluTanhOp struct {
	in    []*autograd.Variable
	deriv *tensor.Tensor
}

func (o *geluTanhOp) Name() string                 { return "gpt2.GELUTanh" }
func (o *geluTanhOp) Inputs() []*autograd.Variable { return o.in }

// FreshGrads: Backward's gradient is a new tensor, BackwardFreeing's the
// derivative's block, which nothing else reads then; autograd recycles it
// once the next op has read it.
func (o *geluTanhOp) FreshGrads() {}

// SavedTensors lets the graph's owner recycle the derivative (nil once
// BackwardFreeing made it the gradient).
func (o *geluTanhOp) SavedTensors() []*tensor.Tensor { return []*tensor.Tensor{o.deriv} }

// Backward returns gy·d in a new tensor, keeping the derivative for
// another backward through the graph (autograd's Backward retains it).
func (o *geluTanhOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	if o.deriv == nil {
		panic(errGELUTwice)
	}
	return []*tensor.Tensor{o.mulDeriv(tensor.Empty(o.deriv.DType(), o.deriv.Shape()...), gy)}
}

// BackwardFreeing writes the gradient over the saved derivative (d ← gy·d)
// and hands that tensor back, so the backward allocates nothing: the
// graph is being freed (autograd's BackwardAndFree), so nothing reads the
// derivative again. At GPT-2 124M, T=1024, batch 2 that is 12 tensors of
// B·T·4C floats (302 MB) a step. A later backward panics, as torch's
// does through a freed graph.
func (o *geluTanhOp) BackwardFreeing(gy *tensor.Tensor, _ []*tensor.Tensor) []*tensor.Tensor {
	if o.deriv == nil {
		panic(errGELUTwice)
	}
	gx := o.mulDeriv(o.deriv, gy)
	o.deriv = nil
	return []*tensor.Tensor{gx}
}

const errGELUTwice = "gpt2: GELUTanh: backward through the same graph a second time: its saved derivative became the first backward's gradient; run the forward again"

// mulDeriv writes gx = gy·d elementwise (gx may be d) and returns gx.
func (o *geluTanhOp) mulDeriv(gx, gy *tensor.Tensor) *tensor.Tensor {
	gy = gy.Contiguous()
	n := gx.Numel()
	if gx.DType() == tensor.Float64 {
		g, d, dy := gx.F64(), o.deriv.F64(), gy.F64()
		for i := range g {
			g[i] = d[i] * dy[i]
		}
	} else {
		g, d, dy := gx.F32(), o.deriv.F32(), gy.F32()
		parallel(n, n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				g[i] = d[i] * dy[i]
			}
		})
	}
	return gx
}
