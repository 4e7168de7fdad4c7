package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Dropout zeroes each element of a with probability p and scales the rest by
// 1/(1-p), drawing from rng (inverted dropout, as torch). When training is
// false or p is 0 it returns a itself. The gradient is gy times the same mask.
//
// The mask is torch's CPU one, bit for bit: torch computes
// noise = bernoulli_(1-p) (one float64 uniform per element, kept when it is
// below 1-p), noise /= (1-p) in the tensor's dtype, and returns a·noise; so
// the same generator state gives the same zeros and the same scaled values.
//
// On a device the mask is not the CPU's: each call draws one seed from rng
// and the device keeps element i where a counter-based hash of (seed, i)
// says so (tensor.DropoutDevice), so sim and cuda draw the same masks, and
// backward regenerates the mask from the seed rather than storing it.
func Dropout(a *Variable, p float64, rng *tensor.RNG, training bool) *Variable {
	if p < 0 || p > 1 {
		panic(fmt.Sprintf("autograd: Dropout: probability %v not in [0, 1]", p))
	}
	if !training || p == 0 {
		return a
	}
	x := a.Value.Contiguous()
	if y, seed := tensor.DropoutDevice(x, p, rng); y != nil {
		return FromOp(y, &dropoutOp{inputs: ins(a), p: p, seed: seed})
	}
	// RNG.DropoutF32 and DropoutF64 write every element of both.
	mask := tensor.Empty(x.DType(), x.Shape()...)
	y := tensor.Empty(x.DType(), x.Shape()...)
	keep := 1 - p
	if x.DType() == tensor.Float64 {
		rng.DropoutF64(y.F64(), mask.F64(), x.F64(), keep, 1/keep)
	} else {
		// torch divides the float32 noise by the float32 scalar 1-p.
		rng.DropoutF32(y.F32(), mask.F32(), x.F32(), keep, 1/float32(keep))
	}
	return FromOp(y, &dropoutOp{inputs: ins(a), mask: mask})
}

type dropoutOp struct {
	inputs
	mask *tensor.Tensor // 0 or 1/(1-p) per element; nil on a device
	p    float64        // on a device: the probability and the mask's seed
	seed uint64
}

func (o *dropoutOp) Name() string { return "Dropout" }
func (o *dropoutOp) freshGrads()  {}

// savedTensors lets FreeGraph recycle the mask. Left to the garbage
// collector, it held a block of the host cache's size class that the next
// step then missed: a convnet's Dropout(1024) at batch 64 cost a fresh,
// zeroed 256 KB allocation every step.
func (o *dropoutOp) savedTensors() []*tensor.Tensor {
	if o.mask == nil {
		return nil
	}
	return []*tensor.Tensor{o.mask}
}

func (o *dropoutOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *dropoutOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *dropoutOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	if o.mask == nil {
		gx := gy
		if !inPlace {
			gx = zerosLike(gy, gy.Shape()...)
		}
		tensor.DropoutMaskDevice(gx, gy.Contiguous(), o.p, o.seed)
		return []*tensor.Tensor{gx}
	}
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { mulKernel(gx, gy, o.mask.F32()) },
		func(gx, gy []float64) { mulKernel(gx, gy, o.mask.F64()) })
}

// mulKernel writes gx = gy * s.
func mulKernel[T float](gx, gy, s []T) {
	gy, s = gy[:len(gx)], s[:len(gx)]
	for i, g := range gy {
		gx[i] = g * s[i]
	}
}
