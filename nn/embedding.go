package nn

import (
	"fmt"
	"math"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// Embedding maps integer indices to rows of Weight [num, dim] (torch's
// nn.Embedding). Its gradient is dense: every row is part of Weight.Grad.
type Embedding struct {
	mode
	Weight *autograd.Variable
}

// NewEmbedding returns a float32 Embedding(num, dim) initialised from N(0, 1)
// drawn from rng as torch's reset_parameters (init.normal_) draws it, so the
// same seed and construction order give torch's weights bit for bit.
func NewEmbedding(rng *tensor.RNG, num, dim int) *Embedding {
	if num <= 0 || dim <= 0 {
		panic(fmt.Sprintf("nn: Embedding(%d, %d): sizes must be positive", num, dim))
	}
	w := tensor.New(tensor.Float32, num, dim)
	Normal_(rng, w, 0, 1)
	return &Embedding{Weight: autograd.Param(w)}
}

// NamedParameters implements Module: "weight".
func (e *Embedding) NamedParameters() []NamedParameter {
	return []NamedParameter{{Name: "weight", Param: e.Weight}}
}

// NamedBuffers implements Module (none).
func (e *Embedding) NamedBuffers() []NamedBuffer { return nil }

// Lookup returns the rows of Weight at idx, shaped [shape..., dim]; with no
// shape the result is [len(idx), dim]. An index out of range panics.
func (e *Embedding) Lookup(idx []int, shape ...int) *autograd.Variable {
	num, dim := e.Weight.Value.Size(0), e.Weight.Value.Size(1)
	for i, v := range idx {
		if v < 0 || v >= num {
			panic(fmt.Sprintf("nn: Embedding: index %d at position %d out of range for %d rows", v, i, num))
		}
	}
	rows := autograd.IndexSelect(e.Weight, 0, idx)
	if len(shape) == 0 {
		return rows
	}
	return autograd.Reshape(rows, append(append([]int(nil), shape...), dim)...)
}

// Forward implements Layer: x of shape [...] gives [..., dim]. x is an int64
// tensor of ids (torch's long, which lives on the host and is read without
// waiting for any device), or floats holding whole numbers. Float ids on a
// device are read back to the host (which waits for the device's queued
// work): the lookup's kernels take host indices, checked there, as
// Lookup's.
func (e *Embedding) Forward(x *autograd.Variable) *autograd.Variable {
	if x.Value.DType() == tensor.Int64 { // torch's long ids, on the host: read as they are
		return e.Lookup(x.Value.Ints(), x.Value.Shape()...)
	}
	v := x.Value.MustTo(tensor.CPU()).Contiguous() // x itself on the host
	idx := make([]int, v.Numel())
	if v.DType() == tensor.Float64 {
		for i, f := range v.F64() {
			idx[i] = wholeIndex(f)
		}
	} else {
		for i, f := range v.F32() {
			idx[i] = wholeIndex(float64(f))
		}
	}
	return e.Lookup(idx, v.Shape()...)
}

func wholeIndex(f float64) int {
	if f != math.Trunc(f) {
		panic(fmt.Sprintf("nn: Embedding: index %v is not a whole number", f))
	}
	return int(f)
}
