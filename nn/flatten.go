package nn

import (
	"fmt"

	"github.com/goddp/goddp/autograd"
)

// Flatten merges the dimensions StartDim..EndDim into one (torch's
// nn.Flatten, defaults start_dim=1, end_dim=-1): [N, C, H, W] becomes
// [N, C*H*W]. The result shares the input's storage when it is contiguous.
type Flatten struct {
	stateless
	StartDim, EndDim int
}

// NewFlatten returns Flatten(start_dim=1, end_dim=-1).
func NewFlatten() *Flatten { return &Flatten{StartDim: 1, EndDim: -1} }

// Forward implements Layer.
func (f *Flatten) Forward(x *autograd.Variable) *autograd.Variable {
	s := x.Value.Shape()
	lo, hi := f.StartDim, f.EndDim
	if lo < 0 {
		lo += len(s)
	}
	if hi < 0 {
		hi += len(s)
	}
	if len(s) == 0 {
		lo, hi = 0, 0
		s = []int{1}
	}
	if lo < 0 || hi >= len(s) || lo > hi {
		panic(fmt.Sprintf("nn: Flatten(start_dim=%d, end_dim=%d) of input shape %v", f.StartDim, f.EndDim, x.Value.Shape()))
	}
	shape := make([]int, 0, len(s)-(hi-lo))
	shape = append(shape, s[:lo]...)
	n := 1
	for _, d := range s[lo : hi+1] {
		n *= d
	}
	shape = append(shape, n)
	shape = append(shape, s[hi+1:]...)
	return autograd.Reshape(x, shape...)
}
