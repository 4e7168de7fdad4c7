package gpt2

import (
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

// GELUTanh returns GELU's tanh approximation of a, GPT-2's activation:
// ½a(1 + tanh(√(2/π)(a + 0.044715a³))), torch's F.gelu(a,
// approximate='tanh') and HF's "gelu_new" (autograd.GELU is the exact erf
// form, which GPT-2 does not use). It is autograd.GELUTanh, the op
// table's GELUTanh entries on every device: on the host a float32 input
// keeps the derivative, whose storage the freeing backward
// (BackwardAndFree) turns into the gradient.
func GELUTanh(a *autograd.Variable) *autograd.Variable { return autograd.GELUTanh(a) }
