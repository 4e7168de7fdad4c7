package nn

import "goddp/autograd"

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
// class indices (torch's nn.CrossEntropyLoss). The zero value averages over
// the batch (reduction='mean').
type CrossEntropyLoss struct {
	Reduction autograd.Reduction
}

// Forward returns the loss of logits [N, C] against N class indices in [0, C).
// ReductionNone gives the N per-sample losses.
func (l CrossEntropyLoss) Forward(logits *autograd.Variable, target []int) *autograd.Variable {
	return autograd.CrossEntropy(logits, target, l.Reduction)
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
