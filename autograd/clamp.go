package autograd

import "github.com/goddp/goddp/tensor"

// Clamp limits a to [lo, hi] elementwise (math.Inf bounds leave a side open).
// The gradient passes where lo <= a <= hi, bounds included, as in torch.
func Clamp(a *Variable, lo, hi float64) *Variable {
	return FromOp(tensor.Clamp(a.Value, lo, hi), &clampOp{inputs: ins(a), x: a.Value.Contiguous(), lo: lo, hi: hi})
}

type clampOp struct {
	inputs
	x      *tensor.Tensor
	lo, hi float64
}

func (o *clampOp) Name() string { return "Clamp" }
func (o *clampOp) freshGrads()  {}

func (o *clampOp) Backward(gy *tensor.Tensor) []*tensor.Tensor        { return o.run(gy, false) }
func (o *clampOp) backwardInPlace(gy *tensor.Tensor) []*tensor.Tensor { return o.run(gy, true) }

func (o *clampOp) run(gy *tensor.Tensor, inPlace bool) []*tensor.Tensor {
	return unaryGrad(gy, inPlace,
		func(gx, gy []float32) { clampBwd(gx, gy, o.x.F32(), o.lo, o.hi) },
		func(gx, gy []float64) { clampBwd(gx, gy, o.x.F64(), o.lo, o.hi) })
}

func clampBwd[T float](gx, gy, x []T, lo, hi float64) {
	gy, x = gy[:len(gx)], x[:len(gx)]
	for i, g := range gy {
		v := float64(x[i])
		if v >= lo && v <= hi {
			gx[i] = g
		} else {
			gx[i] = 0
		}
	}
}
