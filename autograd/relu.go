package autograd

import "goddp/tensor"

// ReLU returns max(a, 0) elementwise. Its gradient at 0 is 0, as in torch.
func ReLU(a *Variable) *Variable {
	if !a.Value.IsCPU() {
		k := kernels("ReLU", a)
		needKernel(k.ReLU != nil, "ReLU", a.Value)
		x := a.Value.Contiguous()
		y := zerosLike(x, x.Shape()...)
		k.ReLU(y, x)
		return FromOp(y, &reluOp{inputs: ins(a), y: y})
	}
	y := tensor.ReLU(a.Value)
	return FromOp(y, &reluOp{inputs: ins(a), y: y})
}

type reluOp struct {
	inputs
	y *tensor.Tensor
}

func (o *reluOp) Name() string { return "ReLU" }
func (o *reluOp) freshGrads()  {}

func (o *reluOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	return o.backwardTo(gy, zerosLike(gy, gy.Shape()...))
}

// backwardInPlace masks an owned gy in place.
func (o *reluOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardTo(gy, gy) }

func (o *reluOp) backwardTo(gy, gx *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	if !gy.IsCPU() {
		k := tensor.KernelsOf("autograd: ReLU backward", gx, gy, o.y)
		needKernel(k.ReLUBackward != nil, "ReLU backward", gy)
		k.ReLUBackward(gx, gy, o.y)
		return []*tensor.Tensor{gx}
	}
	if gy.DType() == tensor.Float64 {
		reluBwd(gx.F64(), gy.F64(), o.y.F64())
	} else {
		tensor.ReLUBackwardF32(gx.F32(), gy.F32(), o.y.F32())
	}
	return []*tensor.Tensor{gx}
}

// reluBwd serves float64 (gradient checks); float32 uses tensor's vector
// kernel.
func reluBwd(gx, gy, y []float64) {
	gy, y = gy[:len(gx)], y[:len(gx)]
	for i, v := range y {
		if v > 0 {
			gx[i] = gy[i]
		} else {
			gx[i] = 0
		}
	}
}
