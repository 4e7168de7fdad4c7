package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// DefaultIgnoreIndex is torch's default ignore_index: a target equal to it
// adds no loss and no gradient. Being negative, it never collides with a
// class, so plain CrossEntropy can use it unconditionally.
const DefaultIgnoreIndex = -100

// CrossEntropyOptions are torch.nn.functional.cross_entropy's optional
// arguments. The zero value is torch's defaults: mean reduction,
// ignore_index -100, no label smoothing.
type CrossEntropyOptions struct {
	Reduction Reduction
	// IgnoreIndex is the target value that contributes neither loss nor
	// gradient and is not counted by the mean; nil means DefaultIgnoreIndex.
	// It is a pointer because 0 is a real class one may want to ignore:
	// IgnoreIndex: new(0).
	IgnoreIndex *int
	// LabelSmoothing ε in [0, 1] replaces the one-hot target by
	// (1-ε)·onehot + ε/C, as torch's label_smoothing.
	LabelSmoothing float64
}

func (o CrossEntropyOptions) ignoreIndex() int {
	if o.IgnoreIndex == nil {
		return DefaultIgnoreIndex
	}
	return *o.IgnoreIndex
}

// Targets are class indices: a []int, or an int64 tensor (torch's long
// target tensor; any shape holding the indices in C order).
type Targets interface{ []int | *tensor.Tensor }

// targetInts returns the class indices of a Targets value.
func targetInts[T Targets](target T) []int {
	switch t := any(target).(type) {
	case []int:
		return t
	case *tensor.Tensor:
		if t.DType() != tensor.Int64 {
			panic(fmt.Sprintf("autograd: CrossEntropy: a target tensor of %v; class indices are an int64 tensor (as torch's long)", t.DType()))
		}
		return t.Ints()
	}
	panic("unreachable")
}

// CrossEntropy returns the cross-entropy loss of logits [N, C] against class
// indices target (N of them, each in [0, C) or DefaultIgnoreIndex; a []int
// or an int64 tensor such as data.Batch.LabelTensor), fused as
// log_softmax + nll_loss like torch.nn.functional.cross_entropy with its
// default options. ReductionMean and ReductionSum give a 0-d loss,
// ReductionNone the N per-sample losses. See CrossEntropyWith.
func CrossEntropy[T Targets](logits *Variable, target T, reduction Reduction) *Variable {
	return CrossEntropyWith(logits, target, CrossEntropyOptions{Reduction: reduction})
}

// CrossEntropyWith is CrossEntropy with torch's ignore_index and
// label_smoothing, in torch 1.13's semantics: with log-probabilities
// lp = log_softmax(logits) and ε = LabelSmoothing, a kept sample i costs
//
//	(1-ε)·(-lp[i, target[i]]) + ε/C · Σ_j -lp[i, j]
//
// and an ignored one (target[i] == IgnoreIndex) costs 0 under every
// reduction. The mean divides by the number of kept samples, so it is NaN
// when all are ignored, as in torch. LabelSmoothing outside [0, 1] panics,
// as does a target outside [0, C) that is not IgnoreIndex.
//
// Forward keeps the softmax probabilities p; the gradient of a kept row is
// w·(p - ε/C - (1-ε)·onehot) with w the row's share of gy.
//
// Logits of rank k > 2 take torch's K-dimensional form: [N, C, d1, ...]
// with the classes along dimension 1 (a sequence model's [B, V, T]) and
// target holding N·d1·... indices in the C order of [N, d1, ...]. The loss
// is that of the logits moved to [N·d1·..., C]; ReductionNone returns it
// shaped [N, d1, ...]. Logits [B, T, V] go through Reshape(logits, -1, V)
// instead, with target in the order of [B, T].
func CrossEntropyWith[T Targets](logits *Variable, targets T, o CrossEntropyOptions) *Variable {
	o.Reduction.check("CrossEntropy")
	target := targetInts(targets)
	s := logits.Value.Shape()
	if len(s) > 2 {
		return crossEntropyKD(logits, target, o)
	}
	if len(s) != 2 || len(target) != s[0] {
		panic(fmt.Sprintf("autograd: CrossEntropy: logits shape %v does not match %d targets (want [N, C])", s, len(target)))
	}
	if eps := o.LabelSmoothing; !(eps >= 0 && eps <= 1) {
		panic(fmt.Sprintf("autograd: CrossEntropy: label smoothing %v outside [0, 1]", eps))
	}
	c := s[1]
	ignore := o.ignoreIndex()
	for i, t := range target {
		if t != ignore && (t < 0 || t >= c) {
			panic(fmt.Sprintf("autograd: CrossEntropy: target[%d] = %d outside [0, %d) and not the ignore index %d", i, t, c, ignore))
		}
	}
	y, saved := tensor.CrossEntropyLoss(logits.Value, target, ignore, o.LabelSmoothing, tensor.Reduction(o.Reduction))
	return FromOp(y, &crossEntropyOp{inputs: ins(logits), saved: saved})
}

type crossEntropyOp struct {
	inputs
	saved *tensor.CrossEntropy
}

func (o *crossEntropyOp) Name() string { return "CrossEntropy" }
func (o *crossEntropyOp) freshGrads()  {}

// savedTensors: the softmax kept for backward goes back to the cache with
// the graph (FreeGraph).
func (o *crossEntropyOp) savedTensors() []*tensor.Tensor { return o.saved.Saved() }

func (o *crossEntropyOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{o.saved.Backward(gy)}
}

// BackwardFreeing writes the logits' gradient over the saved softmax
// (BackwardAndFree): a language model's head so holds one [N, V] tensor
// through the loss's backward, not the probabilities and a gradient.
func (o *crossEntropyOp) BackwardFreeing(gy *tensor.Tensor, _ []*tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{o.saved.BackwardInPlace(gy)}
}

// crossEntropyKD is CrossEntropyWith for logits [N, C, d1, ...]: it moves the
// class dimension last, flattens to [N·d1·..., C] and, for ReductionNone,
// shapes the per-element losses back to [N, d1, ...].
func crossEntropyKD(logits *Variable, target []int, o CrossEntropyOptions) *Variable {
	s := logits.Value.Shape()
	perm := make([]int, 0, len(s))
	perm = append(perm, 0)
	for d := 2; d < len(s); d++ {
		perm = append(perm, d)
	}
	perm = append(perm, 1)
	rows := logits.Value.Numel() / max(s[1], 1)
	if len(target) != rows {
		panic(fmt.Sprintf("autograd: CrossEntropy: logits shape %v does not match %d targets (want [N, C, d1, ...] with N·d1·... = %d targets)", s, len(target), rows))
	}
	flat := Reshape(Permute(logits, perm...), rows, s[1])
	loss := CrossEntropyWith(flat, target, o)
	if o.Reduction != ReductionNone {
		return loss
	}
	return Reshape(loss, append([]int{s[0]}, s[2:]...)...)
}
