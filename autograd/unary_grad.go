package autograd

import "github.com/goddp/goddp/tensor"

// unaryGrad allocates an elementwise op's input gradient, or reuses gy when
// the engine owns it (inPlace), and runs the op's kernel over plain slices.
func unaryGrad(gy *tensor.Tensor, inPlace bool, k32 func(gx, gy []float32), k64 func(gx, gy []float64)) []*tensor.Tensor {
	gy = gy.Contiguous()
	gx := gy
	if !inPlace {
		gx = tensor.New(gy.DType(), gy.Shape()...)
	}
	if gy.DType() == tensor.Float64 {
		k64(gx.F64(), gy.F64())
	} else {
		k32(gx.F32(), gy.F32())
	}
	return []*tensor.Tensor{gx}
}
