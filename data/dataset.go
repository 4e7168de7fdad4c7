package data

import (
	"fmt"
	"sort"

	"github.com/goddp/goddp/tensor"
)

// Sample is one example. Input is required. A regression or multi-output
// target goes in Target; a class index goes in Label (with Target nil).
// Default collation decides per batch: if every sample has a Target they are
// stacked into Batch.Targets, otherwise the Labels are gathered into
// Batch.Labels.
type Sample struct {
	Input  *tensor.Tensor
	Target *tensor.Tensor
	Label  int
}

// Dataset is a map-style dataset (torch.utils.data.Dataset): Len samples,
// addressed by index. Get must be safe for concurrent use when a DataLoader
// runs with NumWorkers > 0.
type Dataset interface {
	Len() int
	Get(i int) (Sample, error)
}

// BatchGetter is an optional fast path: a dataset that can assemble a whole
// batch at once (one copy per row into the batch tensor, no per-sample
// tensors). The DataLoader uses it when no custom collate is set. The result
// must equal DefaultCollate applied to the samples Get would return.
type BatchGetter interface {
	GetBatch(indices []int) (Batch, error)
}

// TensorDataset holds its samples as the rows of tensors (torch's
// TensorDataset): sample i is Inputs[i] with Targets[i] or Labels[i].
type TensorDataset struct {
	inputs  *tensor.Tensor // contiguous, first dim = N
	targets *tensor.Tensor // contiguous or nil
	labels  []int          // len N or nil
	n       int
	inShape []int // shape of one input row
	tgShape []int
	inRow   int // elements per input row
	tgRow   int
}

// NewTensorDataset returns a dataset over the rows of inputs. targets may be
// nil (no targets; samples then carry Label 0). Tensors are made contiguous
// (copied if they are not) and otherwise shared, not copied.
func NewTensorDataset(inputs, targets *tensor.Tensor) (*TensorDataset, error) {
	d, err := newTensorDataset(inputs)
	if err != nil {
		return nil, err
	}
	if targets != nil {
		if targets.Dim() == 0 || targets.Size(0) != d.n {
			return nil, fmt.Errorf("%w: inputs have %d rows, targets have shape %v", ErrShape, d.n, targets.Shape())
		}
		d.targets = targets.Contiguous()
		d.tgShape = append([]int(nil), targets.Shape()[1:]...)
		d.tgRow = rowSize(d.tgShape)
	}
	return d, nil
}

// NewLabeledDataset returns a classification dataset: sample i is inputs[i]
// with class index labels[i]. labels is kept, not copied.
func NewLabeledDataset(inputs *tensor.Tensor, labels []int) (*TensorDataset, error) {
	d, err := newTensorDataset(inputs)
	if err != nil {
		return nil, err
	}
	if len(labels) != d.n {
		return nil, fmt.Errorf("%w: inputs have %d rows, labels have %d", ErrShape, d.n, len(labels))
	}
	d.labels = labels
	return d, nil
}

func newTensorDataset(inputs *tensor.Tensor) (*TensorDataset, error) {
	if inputs == nil || inputs.Dim() == 0 {
		return nil, fmt.Errorf("%w: inputs must have at least one dimension", ErrShape)
	}
	in := inputs.Contiguous()
	shape := append([]int(nil), in.Shape()[1:]...)
	return &TensorDataset{inputs: in, n: in.Size(0), inShape: shape, inRow: rowSize(shape)}, nil
}

func rowSize(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Len is the number of samples.
func (d *TensorDataset) Len() int { return d.n }

// Inputs returns the input tensor (all rows).
func (d *TensorDataset) Inputs() *tensor.Tensor { return d.inputs }

// Targets returns the target tensor, or nil.
func (d *TensorDataset) Targets() *tensor.Tensor { return d.targets }

// Labels returns the class labels, or nil.
func (d *TensorDataset) Labels() []int { return d.labels }

// Get returns sample i. Its tensors are views sharing the dataset's storage;
// do not modify them.
func (d *TensorDataset) Get(i int) (Sample, error) {
	if i < 0 || i >= d.n {
		return Sample{}, fmt.Errorf("%w: index %d, dataset has %d samples", ErrIndex, i, d.n)
	}
	s := Sample{Input: rowView(d.inputs, i, d.inRow, d.inShape)}
	if d.targets != nil {
		s.Target = rowView(d.targets, i, d.tgRow, d.tgShape)
	}
	if d.labels != nil {
		s.Label = d.labels[i]
	}
	return s, nil
}

// rowView returns row i of a contiguous tensor as a tensor sharing storage.
func rowView(t *tensor.Tensor, i, row int, shape []int) *tensor.Tensor {
	if t.DType() == tensor.Int64 {
		return tensor.FromI64(t.I64()[i*row:(i+1)*row:(i+1)*row], shape...)
	}
	if t.DType() == tensor.Float64 {
		return tensor.FromF64(t.F64()[i*row:(i+1)*row:(i+1)*row], shape...)
	}
	return tensor.FromF32(t.F32()[i*row:(i+1)*row:(i+1)*row], shape...)
}

// GetBatch gathers the rows at indices into new batch tensors.
func (d *TensorDataset) GetBatch(indices []int) (Batch, error) {
	for _, i := range indices {
		if i < 0 || i >= d.n {
			return Batch{}, fmt.Errorf("%w: index %d, dataset has %d samples", ErrIndex, i, d.n)
		}
	}
	b := Batch{Indices: append([]int(nil), indices...)}
	b.Inputs = gatherRows(d.inputs, indices, d.inRow, d.inShape)
	if d.targets != nil {
		b.Targets = gatherRows(d.targets, indices, d.tgRow, d.tgShape)
	} else {
		b.Labels = make([]int, len(indices))
		if d.labels != nil {
			for k, i := range indices {
				b.Labels[k] = d.labels[i]
			}
		}
	}
	return b, nil
}

func gatherRows(t *tensor.Tensor, indices []int, row int, shape []int) *tensor.Tensor {
	bshape := append([]int{len(indices)}, shape...)
	if t.DType() == tensor.Int64 {
		src := t.I64()
		dst := make([]int64, len(indices)*row)
		for k, i := range indices {
			copy(dst[k*row:(k+1)*row], src[i*row:(i+1)*row])
		}
		return tensor.FromI64(dst, bshape...)
	}
	if t.DType() == tensor.Float64 {
		src := t.F64()
		dst := make([]float64, len(indices)*row)
		for k, i := range indices {
			copy(dst[k*row:(k+1)*row], src[i*row:(i+1)*row])
		}
		return tensor.FromF64(dst, bshape...)
	}
	src := t.F32()
	dst := make([]float32, len(indices)*row)
	for k, i := range indices {
		copy(dst[k*row:(k+1)*row], src[i*row:(i+1)*row])
	}
	return tensor.FromF32(dst, bshape...)
}

// Subset is the samples of a dataset at the given indices (torch's Subset).
type Subset struct {
	ds      Dataset
	indices []int
}

// NewSubset returns the view of ds at indices. Every index must be in range.
func NewSubset(ds Dataset, indices []int) (*Subset, error) {
	n := ds.Len()
	for k, i := range indices {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("%w: subset index %d (position %d), dataset has %d samples", ErrIndex, i, k, n)
		}
	}
	return &Subset{ds: ds, indices: append([]int(nil), indices...)}, nil
}

// Len is the number of indices.
func (s *Subset) Len() int { return len(s.indices) }

// Get returns the underlying sample indices[i].
func (s *Subset) Get(i int) (Sample, error) {
	if i < 0 || i >= len(s.indices) {
		return Sample{}, fmt.Errorf("%w: index %d, subset has %d samples", ErrIndex, i, len(s.indices))
	}
	return s.ds.Get(s.indices[i])
}

// GetBatch delegates to the underlying dataset's batch getter when it has
// one, so a Subset of a TensorDataset stays on the fast path. Batch.Indices
// are the subset's indices.
func (s *Subset) GetBatch(indices []int) (Batch, error) {
	mapped := make([]int, len(indices))
	for k, i := range indices {
		if i < 0 || i >= len(s.indices) {
			return Batch{}, fmt.Errorf("%w: index %d, subset has %d samples", ErrIndex, i, len(s.indices))
		}
		mapped[k] = s.indices[i]
	}
	var b Batch
	var err error
	if bg, ok := s.ds.(BatchGetter); ok {
		b, err = bg.GetBatch(mapped)
	} else {
		b, err = collateFrom(s.ds, mapped, DefaultCollate)
	}
	if err != nil {
		return Batch{}, err
	}
	b.Indices = append(b.Indices[:0], indices...)
	return b, nil
}

// ConcatDataset chains datasets (torch's ConcatDataset): index i addresses
// the first dataset's samples, then the second's, and so on.
type ConcatDataset struct {
	parts []Dataset
	ends  []int // cumulative sizes
}

// NewConcatDataset chains parts in order.
func NewConcatDataset(parts ...Dataset) *ConcatDataset {
	c := &ConcatDataset{parts: append([]Dataset(nil), parts...)}
	total := 0
	for _, p := range parts {
		total += p.Len()
		c.ends = append(c.ends, total)
	}
	return c
}

// Len is the total number of samples.
func (c *ConcatDataset) Len() int {
	if len(c.ends) == 0 {
		return 0
	}
	return c.ends[len(c.ends)-1]
}

// Get returns sample i of the chain.
func (c *ConcatDataset) Get(i int) (Sample, error) {
	if i < 0 || i >= c.Len() {
		return Sample{}, fmt.Errorf("%w: index %d, concatenation has %d samples", ErrIndex, i, c.Len())
	}
	p := sort.SearchInts(c.ends, i+1)
	start := 0
	if p > 0 {
		start = c.ends[p-1]
	}
	return c.parts[p].Get(i - start)
}
