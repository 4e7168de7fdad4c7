package gpt2

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// ForwardLoss returns Loss(Forward(idx), targets), nanoGPT's model(idx,
// targets), with the head and the loss as one op: the head's product is
// written into the tensor in which the loss keeps its softmax (and, under
// autograd's BackwardAndFree, its gradient), so a step holds one [B·T,
// PaddedVocab] tensor where Forward then Loss hold the logits beside it
// (at 124M, T=1024, batch 2: 412 MB less). The loss and the gradients are
// Forward and Loss's to the bit. Host float32 and float64 models take the
// fused op; bf16 products and devices run Forward and Loss.
func (m *Model) ForwardLoss(idx *autograd.Variable, targets *tensor.Tensor) *autograd.Variable {
	h := m.Hidden(idx)
	wte := m.Transformer.WTE.Weight
	hv := h.Value
	if m.headPrecision == tensor.PrecisionBFloat16 || !hv.IsCPU() || !wte.Value.IsCPU() ||
		(hv.DType() != tensor.Float32 && hv.DType() != tensor.Float64) || wte.Value.DType() != hv.DType() {
		return m.Loss(autograd.LinearWith(h, wte, nil, m.headPrecision), targets)
	}
	if targets.DType() != tensor.Int64 {
		panic(fmt.Sprintf("gpt2: ForwardLoss: targets of %v; token ids are an int64 tensor", targets.DType()))
	}
	target := targets.Ints()
	hc := hv.Contiguous()
	v := wte.Value.Size(0)
	n := hc.Numel() / hc.Size(hc.Dim()-1)
	if len(target) != n {
		panic(fmt.Sprintf("gpt2: ForwardLoss: %d targets for hidden states of shape %v", len(target), hv.Shape()))
	}
	for i, t := range target {
		if t != IgnoreIndex && (t < 0 || t >= v) {
			panic(fmt.Sprintf("gpt2: ForwardLoss: target[%d] = %d outside [0, %d) and not the ignore index %d", i, t, v, IgnoreIndex))
		}
	}
	// The head as autograd.LinearWith computes it, then the loss as
	// autograd.CrossEntropyWith, its softmax over the logits.
	logits := tensor.LinearWith(hc, wte.Value, nil, m.headPrecision).Reshape(n, v)
	y, ce := tensor.CrossEntropyLossInPlace(logits, target, IgnoreIndex, 0, tensor.ReductionMean)
	return autograd.FromOp(y, &headLossOp{in: []*autograd.Variable{h, wte}, h: hc, ce: ce, prec: m.headPrecision})
}

// headLossOp is ForwardLoss's op: the tied head's product and the mean
// cross-entropy.
type headLossOp struct {
	in   []*autograd.Variable // hidden states, wte
	h    *tensor.Tensor       // the hidden states, contiguous
	ce   *tensor.CrossEntropy // its saved softmax is the head's product's storage
	prec tensor.Precision
}

func (o *headLossOp) Name() string                 { return "gpt2.HeadLoss" }
func (o *headLossOp) Inputs() []*autograd.Variable { return o.in }

// FreshGrads: the hidden states' gradient is a new tensor.
func (o *headLossOp) FreshGrads() {}

// SavedTensors lets the graph's owner recycle the softmax (none once the
// freeing backward made it the gradient and gave it back).
func (o *headLossOp) SavedTensors() []*tensor.Tensor { return o.ce.Saved() }

func (o *headLossOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.BackwardInto(gy, nil) }

// BackwardInto implements autograd.GradAccumulator: wte's gradient is
// added into its Grad when dst offers it, as the head Linear's is.
func (o *headLossOp) BackwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	dl := o.ce.Backward(gy) // the logits' gradient, a new tensor
	grads := o.linearBackward(dl, dst)
	tensor.ReleaseScratch(dl)
	return grads
}

// BackwardFreeing implements autograd.FreeingBackward: the logits'
// gradient is written over the saved softmax, and that block goes back to
// the cache once the head's products have read it.
func (o *headLossOp) BackwardFreeing(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	dl := o.ce.BackwardInPlace(gy)
	grads := o.linearBackward(dl, dst)
	tensor.ReleaseScratch(dl)
	return grads
}

// linearBackward is the head Linear's backward for the logits' gradient
// dl [N, V]: dh = dl·wte, dwte = dlᵀ·h (added into dst[1] when given).
func (o *headLossOp) linearBackward(dl *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	h, w := o.in[0], o.in[1]
	grads := make([]*tensor.Tensor, 2)
	into := func(i int, shape []int) (*tensor.Tensor, bool) {
		if i < len(dst) && dst[i] != nil {
			return dst[i], true
		}
		grads[i] = tensor.Empty(dl.DType(), shape...) // overwritten whole (beta 0)
		return grads[i], false
	}
	var dh, dw *tensor.Tensor
	var accH, accW bool
	if h.RequiresGrad() {
		dh, accH = into(0, h.Value.Shape())
	}
	if w.RequiresGrad() {
		dw, accW = into(1, w.Value.Shape())
	}
	tensor.LinearBackwardWith(dl, o.h, w.Value, dh, dw, nil, accH, accW, false, o.prec)
	return grads
}
