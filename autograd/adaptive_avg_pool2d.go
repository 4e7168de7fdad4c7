package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// AdaptiveAvgPool2d is torch.nn.functional.adaptive_avg_pool2d over x [N,
// C, H, W] to [N, C, oh, ow]: output row i averages input rows
// [floor(i*H/oh), ceil((i+1)*H/oh)), and likewise for columns, so windows
// may overlap or differ in size.
func AdaptiveAvgPool2d(x *Variable, oh, ow int) *Variable {
	xs := x.Value.Shape()
	if len(xs) != 4 || oh < 1 || ow < 1 {
		panic(fmt.Sprintf("autograd: AdaptiveAvgPool2d: input %v to output %dx%d, want a [N, C, H, W] input and a positive size", xs, oh, ow))
	}
	g := poolGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], oh: oh, ow: ow}
	xc := x.Value.Contiguous()
	if y := tensor.AvgPool2dDevice(xc, g.shape(), false, true); y != nil {
		return FromOp(y, &adaptiveAvgPool2dOp{inputs: ins(x), g: g})
	}
	y := tensor.New(xc.DType(), g.n, g.c, oh, ow)
	if xc.DType() == tensor.Float64 {
		adaptivePool(&g, y.F64(), xc.F64(), false)
	} else {
		adaptivePool(&g, y.F32(), xc.F32(), false)
	}
	return FromOp(y, &adaptiveAvgPool2dOp{inputs: ins(x), g: g})
}

type adaptiveAvgPool2dOp struct {
	inputs
	g poolGeom
}

func (o *adaptiveAvgPool2dOp) Name() string { return "AdaptiveAvgPool2d" }
func (o *adaptiveAvgPool2dOp) freshGrads()  {}

func (o *adaptiveAvgPool2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	if gx := tensor.AvgPool2dBackwardDevice(gy, o.g.shape(), false, true); gx != nil {
		return []*tensor.Tensor{gx}
	}
	gx := tensor.New(gy.DType(), o.g.n, o.g.c, o.g.h, o.g.w)
	if gy.DType() == tensor.Float64 {
		adaptivePool(&o.g, gy.F64(), gx.F64(), true)
	} else {
		adaptivePool(&o.g, gy.F32(), gx.F32(), true)
	}
	return []*tensor.Tensor{gx}
}

// adaptivePool averages x into y, or with back set spreads the gradient y
// back over x (adding into x).
func adaptivePool[T float](g *poolGeom, y, x []T, back bool) {
	hw, ohw := g.h*g.w, g.oh*g.ow
	for pl := 0; pl < g.n*g.c; pl++ {
		xp, yp := x[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw]
		for oy := 0; oy < g.oh; oy++ {
			ylo, yhi := oy*g.h/g.oh, ((oy+1)*g.h+g.oh-1)/g.oh
			for ox := 0; ox < g.ow; ox++ {
				xlo, xhi := ox*g.w/g.ow, ((ox+1)*g.w+g.ow-1)/g.ow
				div := float64((yhi - ylo) * (xhi - xlo))
				if back {
					v := T(float64(yp[oy*g.ow+ox]) / div)
					for iy := ylo; iy < yhi; iy++ {
						row := xp[iy*g.w+xlo : iy*g.w+xhi]
						for i := range row {
							row[i] += v
						}
					}
					continue
				}
				var s T
				for iy := ylo; iy < yhi; iy++ {
					for _, v := range xp[iy*g.w+xlo : iy*g.w+xhi] {
						s += v
					}
				}
				yp[oy*g.ow+ox] = T(float64(s) / div)
			}
		}
	}
}
