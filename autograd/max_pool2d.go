package autograd

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// PoolParams are a 2-d pooling window's kernel, stride and padding (torch's
// kernel_size, stride, padding). A zero Stride means the kernel size, as in
// torch. ceil_mode and dilation are not supported (torch's defaults: off, 1).
type PoolParams struct {
	Kernel  [2]int
	Stride  [2]int
	Padding [2]int
}

// poolGeom is one pooling's resolved shapes.
type poolGeom struct {
	n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow int
}

func newPoolGeom(op string, xs []int, p PoolParams) poolGeom {
	if len(xs) != 4 {
		panic(fmt.Sprintf("autograd: %s: input shape %v, want [N, C, H, W]", op, xs))
	}
	g := poolGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], kh: p.Kernel[0], kw: p.Kernel[1],
		sh: p.Stride[0], sw: p.Stride[1], ph: p.Padding[0], pw: p.Padding[1]}
	if g.sh == 0 {
		g.sh = g.kh
	}
	if g.sw == 0 {
		g.sw = g.kw
	}
	if g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.ph < 0 || g.pw < 0 {
		panic(fmt.Sprintf("autograd: %s: invalid params %+v", op, p))
	}
	if 2*g.ph > g.kh || 2*g.pw > g.kw {
		panic(fmt.Sprintf("autograd: %s: padding %v should be at most half of kernel %v, as torch requires", op, p.Padding, p.Kernel))
	}
	g.oh = (g.h+2*g.ph-g.kh)/g.sh + 1
	g.ow = (g.w+2*g.pw-g.kw)/g.sw + 1
	if g.h+2*g.ph < g.kh || g.w+2*g.pw < g.kw {
		panic(fmt.Sprintf("autograd: %s: kernel %v larger than the padded input %v", op, p.Kernel, xs))
	}
	return g
}

// MaxPool2d is torch.nn.functional.max_pool2d over x [N, C, H, W]: the
// maximum of each kernel window, padding counting as -inf. Backward routes
// each output's gradient to the input element that was the maximum (the
// first one in row-major window order on ties, as torch's CPU kernel).
func MaxPool2d(x *Variable, p PoolParams) *Variable {
	g := newPoolGeom("MaxPool2d", x.Value.Shape(), p)
	xc := x.Value.Contiguous()
	if y, didx := tensor.MaxPool2dDevice(xc, g.shape()); y != nil {
		return FromOp(y, &maxPool2dOp{inputs: ins(x), didx: didx, g: g})
	}
	y := tensor.Empty(xc.DType(), g.n, g.c, g.oh, g.ow) // every output is written
	// The indices are an int64 tensor, as torch's max_pool2d_with_indices
	// returns, from the host cache: FreeGraph recycles its block, where a
	// make per step cost the GC a zeroed 3.2 MB for a convnet's first
	// pooling.
	idxT := tensor.Empty(tensor.Int64, g.n, g.c, g.oh, g.ow)
	idx := idxT.I64()
	if xc.DType() == tensor.Float64 {
		maxPoolFwd(&g, y.F64(), xc.F64(), idx)
	} else {
		maxPoolFwd(&g, y.F32(), xc.F32(), idx)
	}
	return FromOp(y, &maxPool2dOp{inputs: ins(x), idx: idxT, g: g})
}

type maxPool2dOp struct {
	inputs
	idx  *tensor.Tensor // host: per output, the argmax's offset in its [H, W] plane (int64)
	didx *tensor.Tensor // the same on the input's device (nil on the host)
	g    poolGeom
}

// savedTensors lets FreeGraph recycle the indices' block (on the host, or
// on the input's device).
func (o *maxPool2dOp) savedTensors() []*tensor.Tensor {
	var s []*tensor.Tensor
	for _, t := range []*tensor.Tensor{o.idx, o.didx} {
		if t != nil {
			s = append(s, t)
		}
	}
	return s
}

func (o *maxPool2dOp) Name() string { return "MaxPool2d" }
func (o *maxPool2dOp) freshGrads()  {}

func maxPoolFwd[T float](g *poolGeom, y, x []T, idx []int64) {
	hw, ohw := g.h*g.w, g.oh*g.ow
	window2x2 := g.window2x2()
	if y32, ok := any(y).([]float32); ok && window2x2 {
		tensor.MaxPool2x2F32(y32, idx, any(x).([]float32), g.n*g.c, g.h, g.w)
		return
	}
	for pl := 0; pl < g.n*g.c; pl++ {
		xp, yp, ip := x[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw], idx[pl*ohw:(pl+1)*ohw]
		if window2x2 {
			maxPool2x2(g, yp, xp, ip)
			continue
		}
		for oy := 0; oy < g.oh; oy++ {
			y0 := oy*g.sh - g.ph
			ylo, yhi := max(y0, 0), min(y0+g.kh, g.h)
			for ox := 0; ox < g.ow; ox++ {
				x0 := ox*g.sw - g.pw
				xlo, xhi := max(x0, 0), min(x0+g.kw, g.w)
				best, bi := xp[ylo*g.w+xlo], ylo*g.w+xlo
				for iy := ylo; iy < yhi; iy++ {
					for ix := xlo; ix < xhi; ix++ {
						if v := xp[iy*g.w+ix]; v > best || v != v {
							best, bi = v, iy*g.w+ix
						}
					}
				}
				yp[oy*g.ow+ox], ip[oy*g.ow+ox] = best, int64(bi)
			}
		}
	}
}

// maxPool2x2 is the common 2x2, stride 2, unpadded window (float64; float32
// runs tensor.MaxPool2x2F32), with the general loop's rule: the first
// maximum, or the last NaN.
func maxPool2x2[T float](g *poolGeom, y, x []T, idx []int64) {
	w := g.w
	for oy := 0; oy < g.oh; oy++ {
		r0, r1 := x[2*oy*w:(2*oy+1)*w], x[(2*oy+1)*w:(2*oy+2)*w]
		yr, ir := y[oy*g.ow:(oy+1)*g.ow], idx[oy*g.ow:(oy+1)*g.ow]
		for ox := range yr {
			i := 2 * ox
			best, bi := r0[i], 2*oy*w+i
			if v := r0[i+1]; v > best || v != v {
				best, bi = v, 2*oy*w+i+1
			}
			if v := r1[i]; v > best || v != v {
				best, bi = v, (2*oy+1)*w+i
			}
			if v := r1[i+1]; v > best || v != v {
				best, bi = v, (2*oy+1)*w+i+1
			}
			yr[ox], ir[ox] = best, int64(bi)
		}
	}
}

func (o *maxPool2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	if gx := tensor.MaxPool2dBackwardDevice(gy, o.didx, o.g.shape()); gx != nil {
		return []*tensor.Tensor{gx}
	}
	idx := o.idx.I64()
	if o.g.window2x2() {
		// Disjoint windows: every input element is written once, with its
		// window's gradient or 0, so gx needs no zeroing pass first.
		gx := tensor.Empty(gy.DType(), o.g.n, o.g.c, o.g.h, o.g.w)
		if gy.DType() == tensor.Float64 {
			maxPool2x2Bwd(&o.g, gx.F64(), gy.F64(), idx)
		} else {
			tensor.MaxPool2x2BackwardF32(gx.F32(), gy.F32(), idx, o.g.n*o.g.c, o.g.h, o.g.w)
		}
		return []*tensor.Tensor{gx}
	}
	gx := tensor.New(gy.DType(), o.g.n, o.g.c, o.g.h, o.g.w)
	if gy.DType() == tensor.Float64 {
		maxPoolBwd(&o.g, gx.F64(), gy.F64(), idx)
	} else {
		maxPoolBwd(&o.g, gx.F32(), gy.F32(), idx)
	}
	return []*tensor.Tensor{gx}
}

func maxPoolBwd[T float](g *poolGeom, gx, gy []T, idx []int64) {
	hw, ohw := g.h*g.w, g.oh*g.ow
	for pl := 0; pl < g.n*g.c; pl++ {
		gp := gx[pl*hw : (pl+1)*hw]
		for j, v := range gy[pl*ohw : (pl+1)*ohw] {
			gp[idx[pl*ohw+j]] += v
		}
	}
}

// maxPool2x2Bwd is maxPoolBwd for the 2x2, stride-2, unpadded window
// (float64; float32 runs tensor.MaxPool2x2BackwardF32), writing all of gx: each window's four elements get 0 but the argmax,
// which gets the output's gradient; an odd size's last row or column,
// in no window, gets 0.
func maxPool2x2Bwd[T float](g *poolGeom, gx, gy []T, idx []int64) {
	hw, ohw, w := g.h*g.w, g.oh*g.ow, g.w
	for pl := 0; pl < g.n*g.c; pl++ {
		gp, yp, ip := gx[pl*hw:(pl+1)*hw], gy[pl*ohw:(pl+1)*ohw], idx[pl*ohw:(pl+1)*ohw]
		for oy := 0; oy < g.oh; oy++ {
			r0, r1 := gp[2*oy*w:(2*oy+1)*w], gp[(2*oy+1)*w:(2*oy+2)*w]
			for ox := range g.ow {
				r0[2*ox], r0[2*ox+1], r1[2*ox], r1[2*ox+1] = 0, 0, 0, 0
			}
			clear(r0[2*g.ow:])
			clear(r1[2*g.ow:])
			for ox, v := range yp[oy*g.ow : (oy+1)*g.ow] {
				gp[ip[oy*g.ow+ox]] = v
			}
		}
		clear(gp[2*g.oh*w:])
	}
}

// window2x2 reports the common 2x2, stride-2, unpadded window, whose
// windows are disjoint and which the fast paths handle.
func (g *poolGeom) window2x2() bool {
	return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0
}

// shape is g in tensor's terms.
func (g *poolGeom) shape() *tensor.Pool2dShape {
	return &tensor.Pool2dShape{N: g.n, C: g.c, H: g.h, W: g.w, KH: g.kh, KW: g.kw, StrideH: g.sh, StrideW: g.sw,
		PadH: g.ph, PadW: g.pw, OH: g.oh, OW: g.ow}
}
