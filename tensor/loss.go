package tensor

import (
	"fmt"
	"math"
)

// Reduction is how a loss combines its per-element values, as torch's
// reduction argument, in goddp/autograd's order (it converts).
type Reduction int

const (
	ReductionMean Reduction = iota
	ReductionSum
	ReductionNone
)

// The fused losses return their loss and a value that holds what their
// backward needs: on the host what the CPU arithmetic reads (the softmax
// probabilities, pred - target), on a device the gradient its one kernel
// already wrote, scaled by the upstream gradient there.

// MSE is an MSELoss forward, for its backward.
type MSE struct {
	d         *Tensor // pred - target (host)
	grad      *Tensor // the scaled gradient (device)
	reduction Reduction
}

// MSELoss returns the squared error (pred - target)² reduced as asked
// (torch's mse_loss; pred and target of one shape, the caller's check),
// accumulated in float64 on the host. Devices serve mean and sum.
func MSELoss(pred, target *Tensor, r Reduction) (*Tensor, *MSE) {
	p, t := pred.Contiguous(), target.Contiguous()
	if onDevice(p, t) {
		k := kernelsFor("MSELoss", p, t)
		NeedKernel(k.MSE != nil, "MSELoss", p.Device())
		if r == ReductionNone {
			panic(NoKernel("MSELoss with reduction none", p.Device()))
		}
		n := p.Numel()
		gs, ls := float32(2), float32(1)
		if r == ReductionMean {
			gs, ls = 2/float32(n), 1/float32(n)
		}
		grad := MustZerosOn(p.Device(), p.shape...)
		y := MustZerosOn(p.Device())
		k.MSE(grad, y, p, t, gs, ls)
		return y, &MSE{grad: grad, reduction: r}
	}
	d := New(p.dtype, p.shape...)
	var y *Tensor
	if r == ReductionNone {
		y = New(p.dtype, p.shape...)
	} else {
		y = New(p.dtype)
	}
	if p.dtype == Float64 {
		mseFwd(y.F64(), d.F64(), p.F64(), t.F64(), r)
	} else {
		mseFwd(y.F32(), d.F32(), p.F32(), t.F32(), r)
	}
	return y, &MSE{d: d, reduction: r}
}

func mseFwd[T float](y, d, p, t []T, r Reduction) {
	t = t[:len(p)]
	d = d[:len(p)]
	s := 0.0
	for i, v := range p {
		e := v - t[i]
		d[i] = e
		if r == ReductionNone {
			y[i] = e * e
		} else {
			s += float64(e) * float64(e)
		}
	}
	switch r {
	case ReductionMean:
		y[0] = T(s / float64(len(p)))
	case ReductionSum:
		y[0] = T(s)
	}
}

// Backward returns the gradients of pred (when wantPred) and target (when
// wantTarget; the negation of pred's) for the upstream gradient gy.
func (m *MSE) Backward(gy *Tensor, wantPred, wantTarget bool) (gp, gt *Tensor) {
	if m.grad != nil {
		gp = scaledGrad("MSELoss backward", m.grad, gy)
	} else {
		gy = gy.Contiguous()
		gp = New(m.d.dtype, m.d.shape...)
		if gp.dtype == Float64 {
			mseBwd(gp.F64(), m.d.F64(), gy.F64(), m.reduction)
		} else {
			mseBwd(gp.F32(), m.d.F32(), gy.F32(), m.reduction)
		}
	}
	if wantTarget {
		gt = gp
		if wantPred {
			gt = gp.Clone()
		}
		negate(gt)
	}
	if !wantPred {
		gp = nil
	}
	return gp, gt
}

func mseBwd[T float](gp, d, gy []T, r Reduction) {
	n := len(d)
	g := T(2)
	if r != ReductionNone {
		g *= gy[0]
		if r == ReductionMean {
			g /= T(n)
		}
	}
	for i, v := range d {
		if r == ReductionNone {
			gp[i] = 2 * gy[i] * v
		} else {
			gp[i] = g * v
		}
	}
}

// scaledGrad returns grad times the one-element upstream gradient gy on
// their device, gy never read on the host.
func scaledGrad(op string, grad, gy *Tensor) *Tensor {
	k := kernelsFor(op, grad, gy)
	NeedKernel(k.Copy != nil && k.ScaleBy != nil, op, grad.Device())
	g := MustZerosOn(grad.Device(), grad.shape...)
	k.Copy(g, grad)
	k.ScaleBy(g, gy)
	return g
}

// CrossEntropy is a CrossEntropyLoss forward, for its backward.
type CrossEntropy struct {
	p    *Tensor // softmax of the kept rows (host)
	grad *Tensor // the scaled gradient (device)
	ce   crossEntropy
}

// crossEntropy is what forward and backward share about one call.
type crossEntropy struct {
	target    []int
	c         int
	ignore    int
	eps       float64 // label smoothing
	reduction Reduction
	kept      int // samples whose target is not ignored: the mean's divisor
}

// CrossEntropyLoss returns the cross-entropy of logits [N, C] (contiguous)
// against class indices target, with torch's ignore_index and
// label_smoothing (see goddp/autograd's CrossEntropyWith, which checks the
// arguments), accumulated in float64 on the host. Devices serve mean and
// sum without label smoothing or ignored targets, loss and gradient in one
// kernel.
func CrossEntropyLoss(logits *Tensor, target []int, ignore int, eps float64, r Reduction) (*Tensor, *CrossEntropy) {
	x := logits.Contiguous()
	n, c := x.Size(0), x.Size(1)
	if x.dev != nil {
		return crossEntropyDevice(x, target, ignore, eps, r)
	}
	p := New(x.dtype, n, c)
	var y *Tensor
	if r == ReductionNone {
		y = New(x.dtype, n)
	} else {
		y = New(x.dtype)
	}
	ce := crossEntropy{target: target, c: c, ignore: ignore, eps: eps, reduction: r}
	if x.dtype == Float64 {
		ce.kept = crossEntropyFwd(ce, y.F64(), p.F64(), x.F64())
	} else {
		ce.kept = crossEntropyFwd(ce, y.F32(), p.F32(), x.F32())
	}
	return y, &CrossEntropy{p: p, ce: ce}
}

// CrossEntropyLossInPlace is CrossEntropyLoss on host logits [N, C]
// (contiguous, float32 or float64) that become the saved probabilities:
// the softmax of each kept row is written over it, an ignored row is
// zeroed, so the loss keeps no [N, C] tensor of its own. The caller must
// not read the logits afterwards (a model's head, fused with its loss).
// The loss and probabilities are CrossEntropyLoss's to the bit.
func CrossEntropyLossInPlace(logits *Tensor, target []int, ignore int, eps float64, r Reduction) (*Tensor, *CrossEntropy) {
	if logits.dev != nil || !logits.IsContiguous() || logits.Dim() != 2 {
		panic(fmt.Sprintf("tensor: CrossEntropyLossInPlace: logits of shape %v on %v (contiguous): want [N, C] contiguous on the host", logits.shape, logits.Device()))
	}
	n, c := logits.Size(0), logits.Size(1)
	var y *Tensor
	if r == ReductionNone {
		y = New(logits.dtype, n)
	} else {
		y = New(logits.dtype)
	}
	ce := crossEntropy{target: target, c: c, ignore: ignore, eps: eps, reduction: r}
	row := Empty(logits.dtype, c) // each row's logits, while the row becomes probabilities
	if logits.dtype == Float64 {
		ce.kept = crossEntropyFwdInPlace(ce, y.F64(), logits.F64(), row.F64())
	} else {
		ce.kept = crossEntropyFwdInPlace(ce, y.F32(), logits.F32(), row.F32())
	}
	ReleaseScratch(row)
	return y, &CrossEntropy{p: logits, ce: ce}
}

// crossEntropyFwdInPlace is crossEntropyFwd with p = x: each kept row is
// copied to scratch and its softmax written back from there (the softmax
// kernel takes distinct input and output); ignored rows are zeroed.
func crossEntropyFwdInPlace[T float](ce crossEntropy, y, x, scratch []T) int {
	c := ce.c
	row := scratch[:c]
	total, kept := 0.0, 0
	for i, t := range ce.target {
		pr := x[i*c : (i+1)*c]
		if t == ce.ignore {
			clear(pr)
			continue
		}
		kept++
		copy(row, pr)
		loss := crossEntropyRow(ce, pr, row, t)
		if ce.reduction == ReductionNone {
			y[i] = T(loss)
		}
		total += loss
	}
	crossEntropyReduce(ce, y, total, kept)
	return kept
}

func crossEntropyDevice(x *Tensor, target []int, ignore int, eps float64, r Reduction) (*Tensor, *CrossEntropy) {
	k := kernelsFor("CrossEntropyLoss", x)
	NeedKernel(k.SoftmaxCrossEntropy != nil, "CrossEntropyLoss", x.Device())
	if r == ReductionNone || eps != 0 {
		panic(NoKernel(fmt.Sprintf("CrossEntropyLoss with reduction %v and label smoothing %v", reductionNames[r], eps), x.Device()))
	}
	for i, t := range target {
		if t == ignore {
			panic(NoKernel(fmt.Sprintf("CrossEntropyLoss with an ignored target (target[%d])", i), x.Device()))
		}
	}
	n, c := x.Size(0), x.Size(1)
	scale := float32(1)
	if r == ReductionMean {
		scale = 1 / float32(n)
	}
	grad := MustZerosOn(x.Device(), n, c)
	y := MustZerosOn(x.Device())
	k.SoftmaxCrossEntropy(grad, y, x, target, scale)
	return y, &CrossEntropy{grad: grad}
}

var reductionNames = [...]string{"mean", "sum", "none"}

// crossEntropyFwd writes the loss to y and the softmax of each kept row to
// p (ignored rows stay zero), accumulating in float64 for both dtypes, and
// returns the number of kept rows.
func crossEntropyFwd[T float](ce crossEntropy, y, p, x []T) int {
	c := ce.c
	total, kept := 0.0, 0
	for i, t := range ce.target {
		if t == ce.ignore {
			continue // y[i] stays 0 for ReductionNone
		}
		kept++
		loss := crossEntropyRow(ce, p[i*c:(i+1)*c], x[i*c:(i+1)*c], t)
		if ce.reduction == ReductionNone {
			y[i] = T(loss)
		}
		total += loss
	}
	crossEntropyReduce(ce, y, total, kept)
	return kept
}

// crossEntropyRow writes the softmax of the logits row into p and returns
// the row's loss against target t, in float64.
func crossEntropyRow[T float](ce crossEntropy, p, row []T, t int) float64 {
	m, s := softmaxRow(p, row)
	lse := m + math.Log(s)
	loss := lse - float64(row[t])
	// Only with ε > 0: a -Inf logit makes the smoothing sum +Inf, and
	// 0·Inf would turn an otherwise finite loss into NaN (torch takes
	// the plain nll path for ε = 0 too).
	if ce.eps > 0 {
		smooth := 0.0 // Σ_j -lp[j]; every term is >= 0, so no cancellation
		for _, v := range row {
			smooth += lse - float64(v)
		}
		loss = (1-ce.eps)*loss + ce.eps/float64(ce.c)*smooth
	}
	return loss
}

// crossEntropyReduce writes the mean or sum of the kept rows' losses.
func crossEntropyReduce[T float](ce crossEntropy, y []T, total float64, kept int) {
	switch ce.reduction {
	case ReductionMean:
		y[0] = T(total / float64(kept)) // 0/0 = NaN when every target is ignored, as torch
	case ReductionSum:
		y[0] = T(total)
	}
}

// Saved lists the tensors the loss keeps for Backward, for an owner that
// recycles them once no backward will run (autograd's FreeGraph). Entries
// may be nil.
func (o *CrossEntropy) Saved() []*Tensor { return []*Tensor{o.p, o.grad} }

// Backward returns the logits' gradient for the upstream gradient gy;
// ignored rows get zero.
func (o *CrossEntropy) Backward(gy *Tensor) *Tensor {
	if o.grad != nil {
		return scaledGrad("CrossEntropyLoss backward", o.grad, gy)
	}
	if o.p == nil {
		panic("tensor: CrossEntropyLoss backward after BackwardInPlace wrote the gradient over the saved probabilities")
	}
	gy = gy.Contiguous()
	gx := New(o.p.dtype, o.p.shape...)
	if gx.dtype == Float64 {
		crossEntropyBwd(o.ce, gx.F64(), o.p.F64(), gy.F64())
	} else {
		crossEntropyBwd(o.ce, gx.F32(), o.p.F32(), gy.F32())
	}
	return gx
}

// BackwardInPlace is Backward writing the gradient over the probabilities
// it saved (on a device, scaling the saved gradient in place) and handing
// that tensor back, so that the gradient, as large as the logits, costs no
// memory of its own: for an owner that runs the backward once (autograd's
// BackwardAndFree). A second call, or Backward afterwards, panics.
func (o *CrossEntropy) BackwardInPlace(gy *Tensor) *Tensor {
	if o.grad != nil {
		g := o.grad
		o.grad = nil
		k := kernelsFor("CrossEntropyLoss backward", g, gy)
		NeedKernel(k.ScaleBy != nil, "CrossEntropyLoss backward", g.Device())
		k.ScaleBy(g, gy)
		return g
	}
	if o.p == nil {
		panic("tensor: CrossEntropyLoss backward a second time: the first wrote the gradient over the saved probabilities")
	}
	gx := o.p
	o.p = nil
	gy = gy.Contiguous()
	// Element by element, each gradient is written where its probability
	// was read; ignored rows stay the zero rows the forward left in p.
	if gx.dtype == Float64 {
		crossEntropyBwd(o.ce, gx.F64(), gx.F64(), gy.F64())
	} else {
		crossEntropyBwd(o.ce, gx.F32(), gx.F32(), gy.F32())
	}
	return gx
}

// crossEntropyBwd writes the logits' gradient; ignored rows stay zero.
func crossEntropyBwd[T float](ce crossEntropy, gx, p, gy []T) {
	c := ce.c
	if ce.kept == 0 {
		return // also keeps the mean's gy/0 from being formed
	}
	g := gy[0]
	if ce.reduction == ReductionMean {
		g /= T(ce.kept)
	}
	uniform, onehot := T(ce.eps/float64(c)), T(1-ce.eps)
	for i, t := range ce.target {
		if t == ce.ignore {
			continue
		}
		if ce.reduction == ReductionNone {
			g = gy[i]
		}
		row, pr := gx[i*c:(i+1)*c], p[i*c:(i+1)*c]
		for j, v := range pr {
			row[j] = (v - uniform) * g
		}
		row[t] -= onehot * g
	}
}

// negate flips the sign of t's elements in place (a sign flip, not a
// multiply by -1, which would leave a NaN's sign as it is).
func negate(t *Tensor) {
	if t.dev != nil {
		k := kernelsFor("negate", t)
		NeedKernel(k.Scale != nil, "negate", t.Device())
		k.Scale(t, t, -1)
		return
	}
	if t.dtype == Float64 {
		d := t.F64()
		for i, v := range d {
			d[i] = -v
		}
		return
	}
	d := t.F32()
	for i, v := range d {
		d[i] = -v
	}
}

// softmaxRow writes the softmax of the logits row into p with float64
// accumulation and returns the row's maximum and Σ e**(row-max); float32
// runs the vectorised kernel (e**x to about 2.3e-10, summed in lanes).
func softmaxRow[T float](p, row []T) (m, s float64) {
	if m, s, ok := softmaxRowC(p, row); ok {
		return m, s
	}
	m = math.Inf(-1)
	for _, v := range row {
		m = math.Max(m, float64(v))
	}
	for j, v := range row {
		e := math.Exp(float64(v) - m)
		p[j] = T(e)
		s += e
	}
	inv := 1 / s
	for j := range p {
		p[j] = T(float64(p[j]) * inv)
	}
	return m, s
}
