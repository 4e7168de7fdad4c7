package nn

import "github.com/goddp/goddp/autograd"

// MSELoss is the mean squared error between prediction and target (torch's
// nn.MSELoss). The zero value averages (reduction='mean').
type MSELoss struct {
	Reduction autograd.Reduction
}

// Forward returns the loss; pred and target have the same shape.
func (l MSELoss) Forward(pred, target *autograd.Variable) *autograd.Variable {
	return autograd.MSELoss(pred, target, l.Reduction)
}

// CrossEntropyLoss is log-softmax followed by negative log-likelihood over
// class indices (torch's nn.CrossEntropyLoss). The zero value has torch's
// defaults: it averages over the batch (reduction='mean'), ignores targets
// equal to -100 and does no label smoothing.
type CrossEntropyLoss struct {
	Reduction autograd.Reduction
	// IgnoreIndex is the target value that adds no loss or gradient and is
	// not counted by the mean; nil means torch's default -100
	// (autograd.DefaultIgnoreIndex). IgnoreIndex: new(0) ignores class 0.
	IgnoreIndex *int
	// LabelSmoothing in [0, 1] mixes the one-hot target with the uniform
	// distribution over the C classes, (1-ε)·onehot + ε/C, as torch's
	// label_smoothing; Forward panics on a value outside [0, 1].
	LabelSmoothing float64
}

// Forward returns the loss of logits [N, C] against N class indices, each in
// [0, C) or equal to the ignore index (see autograd.CrossEntropyWith).
// ReductionNone gives the N per-sample losses, 0 for ignored samples.
func (l CrossEntropyLoss) Forward(logits *autograd.Variable, target []int) *autograd.Variable {
	return autograd.CrossEntropyWith(logits, target, autograd.CrossEntropyOptions{
		Reduction: l.Reduction, IgnoreIndex: l.IgnoreIndex, LabelSmoothing: l.LabelSmoothing,
	})
}

// BCEWithLogitsLoss is sigmoid followed by binary cross-entropy, computed in
// the numerically stable fused form (torch's nn.BCEWithLogitsLoss). The zero
// value averages (reduction='mean').
type BCEWithLogitsLoss struct {
	Reduction autograd.Reduction
}

// Forward returns the loss of logits against targets in [0, 1] of the same shape.
func (l BCEWithLogitsLoss) Forward(logits, target *autograd.Variable) *autograd.Variable {
	return autograd.BCEWithLogits(logits, target, l.Reduction)
}
