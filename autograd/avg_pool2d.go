package autograd

import "github.com/goddp/goddp/tensor"

// AvgPool2d is torch.nn.functional.avg_pool2d over x [N, C, H, W]: the mean
// of each kernel window. With countIncludePad (torch's default) padding
// counts as zeros in the divisor, so it is always kh*kw; without it, the
// divisor is the number of input elements in the window.
func AvgPool2d(x *Variable, p PoolParams, countIncludePad bool) *Variable {
	g := newPoolGeom("AvgPool2d", x.Value.Shape(), p)
	xc := x.Value.Contiguous()
	if y := tensor.AvgPool2dDevice(xc, g.shape(), countIncludePad, false); y != nil {
		return FromOp(y, &avgPool2dOp{inputs: ins(x), g: g, incl: countIncludePad})
	}
	y := tensor.New(xc.DType(), g.n, g.c, g.oh, g.ow)
	if xc.DType() == tensor.Float64 {
		avgPoolFwd(&g, y.F64(), xc.F64(), countIncludePad)
	} else {
		avgPoolFwd(&g, y.F32(), xc.F32(), countIncludePad)
	}
	return FromOp(y, &avgPool2dOp{inputs: ins(x), g: g, incl: countIncludePad})
}

type avgPool2dOp struct {
	inputs
	g    poolGeom
	incl bool
}

func (o *avgPool2dOp) Name() string { return "AvgPool2d" }
func (o *avgPool2dOp) freshGrads()  {}

// window returns output (oy, ox)'s input rows [ylo, yhi), columns [xlo,
// xhi) and the divisor.
func (g *poolGeom) window(oy, ox int, incl bool) (ylo, yhi, xlo, xhi int, div float64) {
	y0, x0 := oy*g.sh-g.ph, ox*g.sw-g.pw
	ylo, yhi = max(y0, 0), min(y0+g.kh, g.h)
	xlo, xhi = max(x0, 0), min(x0+g.kw, g.w)
	if incl {
		// The window clipped to the padded input, as torch computes pool_size.
		return ylo, yhi, xlo, xhi, float64((min(y0+g.kh, g.h+g.ph) - y0) * (min(x0+g.kw, g.w+g.pw) - x0))
	}
	return ylo, yhi, xlo, xhi, float64((yhi - ylo) * (xhi - xlo))
}

func avgPoolFwd[T float](g *poolGeom, y, x []T, incl bool) {
	hw, ohw := g.h*g.w, g.oh*g.ow
	for pl := 0; pl < g.n*g.c; pl++ {
		xp, yp := x[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw]
		for oy := 0; oy < g.oh; oy++ {
			for ox := 0; ox < g.ow; ox++ {
				ylo, yhi, xlo, xhi, div := g.window(oy, ox, incl)
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

func (o *avgPool2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	if gx := tensor.AvgPool2dBackwardDevice(gy, o.g.shape(), o.incl, false); gx != nil {
		return []*tensor.Tensor{gx}
	}
	gx := tensor.New(gy.DType(), o.g.n, o.g.c, o.g.h, o.g.w)
	if gy.DType() == tensor.Float64 {
		avgPoolBwd(&o.g, gx.F64(), gy.F64(), o.incl)
	} else {
		avgPoolBwd(&o.g, gx.F32(), gy.F32(), o.incl)
	}
	return []*tensor.Tensor{gx}
}

func avgPoolBwd[T float](g *poolGeom, gx, gy []T, incl bool) {
	hw, ohw := g.h*g.w, g.oh*g.ow
	for pl := 0; pl < g.n*g.c; pl++ {
		gp, yp := gx[pl*hw:(pl+1)*hw], gy[pl*ohw:(pl+1)*ohw]
		for oy := 0; oy < g.oh; oy++ {
			for ox := 0; ox < g.ow; ox++ {
				ylo, yhi, xlo, xhi, div := g.window(oy, ox, incl)
				v := T(float64(yp[oy*g.ow+ox]) / div)
				for iy := ylo; iy < yhi; iy++ {
					row := gp[iy*g.w+xlo : iy*g.w+xhi]
					for i := range row {
						row[i] += v
					}
				}
			}
		}
	}
}
