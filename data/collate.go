package data

import (
	"fmt"
	"slices"

	"github.com/goddp/goddp/tensor"
)

// Batch is what a DataLoader yields.
//
//   - Inputs stacks the samples' inputs: shape [B, ...input shape].
//   - Targets stacks the samples' Target tensors when every sample has one
//     (regression); otherwise it is nil.
//   - Labels holds the samples' class indices when they have no Target
//     (classification, e.g. for autograd.CrossEntropy); otherwise nil.
//   - Indices are the dataset indices of the samples, in batch order.
//
// A custom CollateFunc may fill the fields however it likes; the loader
// always sets Indices.
type Batch struct {
	Inputs  *tensor.Tensor
	Targets *tensor.Tensor
	Labels  []int
	Indices []int
}

// LabelTensor returns the batch's class labels as an int64 tensor [N]
// (torch's long label tensor), for autograd.CrossEntropy and the like; nil
// when the batch has Targets instead.
func (b Batch) LabelTensor() *tensor.Tensor {
	if b.Labels == nil {
		return nil
	}
	return tensor.FromInts(b.Labels, len(b.Labels))
}

// Size is the number of samples in the batch.
func (b Batch) Size() int { return len(b.Indices) }

// CollateFunc merges samples into a batch (torch's collate_fn).
type CollateFunc func(samples []Sample) (Batch, error)

// DefaultCollate stacks inputs (and targets, if every sample has one) along a
// new leading dimension, and gathers labels otherwise. Every input must have
// the same shape and dtype, and likewise every target.
func DefaultCollate(samples []Sample) (Batch, error) {
	if len(samples) == 0 {
		return Batch{}, nil
	}
	ins := make([]*tensor.Tensor, len(samples))
	allTargets := true
	for k, s := range samples {
		if s.Input == nil {
			return Batch{}, fmt.Errorf("%w: collate: sample %d of the batch has no input", ErrShape, k)
		}
		ins[k] = s.Input
		if s.Target == nil {
			allTargets = false
		}
	}
	var b Batch
	var err error
	if b.Inputs, err = stack(ins, "input"); err != nil {
		return Batch{}, err
	}
	if allTargets {
		tgs := make([]*tensor.Tensor, len(samples))
		for k, s := range samples {
			tgs[k] = s.Target
		}
		if b.Targets, err = stack(tgs, "target"); err != nil {
			return Batch{}, err
		}
	} else {
		b.Labels = make([]int, len(samples))
		for k, s := range samples {
			b.Labels[k] = s.Label
		}
	}
	return b, nil
}

// stack copies same-shaped tensors into one new contiguous tensor [len(ts), ...].
func stack(ts []*tensor.Tensor, what string) (*tensor.Tensor, error) {
	first := ts[0]
	shape := first.Shape()
	row := first.Numel()
	for k, t := range ts[1:] {
		if t.DType() != first.DType() || !slices.Equal(t.Shape(), shape) {
			return nil, fmt.Errorf("%w: collate: %s %d of the batch is %v %v, %s 0 is %v %v",
				ErrShape, what, k+1, t.DType(), t.Shape(), what, first.DType(), shape)
		}
	}
	bshape := append([]int{len(ts)}, shape...)
	if first.DType() == tensor.Int64 {
		dst := make([]int64, len(ts)*row)
		for k, t := range ts {
			copy(dst[k*row:], t.Contiguous().I64())
		}
		return tensor.FromI64(dst, bshape...), nil
	}
	if first.DType() == tensor.Float64 {
		dst := make([]float64, len(ts)*row)
		for k, t := range ts {
			copy(dst[k*row:], t.Contiguous().F64())
		}
		return tensor.FromF64(dst, bshape...), nil
	}
	dst := make([]float32, len(ts)*row)
	for k, t := range ts {
		copy(dst[k*row:], t.Contiguous().F32())
	}
	return tensor.FromF32(dst, bshape...), nil
}

// collateFrom fetches the samples at indices from ds and collates them. An
// error from Get names the index.
func collateFrom(ds Dataset, indices []int, collate CollateFunc) (Batch, error) {
	samples := make([]Sample, len(indices))
	for k, i := range indices {
		s, err := ds.Get(i)
		if err != nil {
			return Batch{}, fmt.Errorf("data: get sample %d: %w", i, err)
		}
		samples[k] = s
	}
	b, err := collate(samples)
	if err != nil {
		return Batch{}, err
	}
	b.Indices = append([]int(nil), indices...)
	return b, nil
}
