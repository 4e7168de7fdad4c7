package autograd

import (
	"fmt"
	"sync"

	"github.com/goddp/goddp/tensor"
)

// ConvParams are the geometry arguments of Conv2d (torch's stride, padding,
// dilation and groups). Zero fields take torch's defaults: stride 1,
// padding 0, dilation 1, groups 1.
type ConvParams struct {
	Stride   [2]int // (h, w)
	Padding  [2]int // zero padding on both sides of (h, w)
	Dilation [2]int // (h, w)
	Groups   int
	// Same is torch's padding="same": the output has the input's size. The
	// total padding dilation*(kernel-1) is split with the smaller half at
	// the top/left, as torch does. It needs stride 1 and ignores Padding.
	Same bool
	// Precision of the products: tensor.PrecisionBFloat16 is autocast's
	// bf16 convolution (bfloat16 inputs, float32 accumulation and result).
	Precision tensor.Precision
}

// convGeom is one convolution's shapes, resolved from ConvParams.
type convGeom struct {
	n, c, h, w     int // input
	o, kh, kw      int // weight [o, c/groups, kh, kw]
	sh, sw         int // stride
	ph, pw         int // top and left padding
	pb, pr         int // bottom and right padding (one more than ph, pw for an odd "same" total)
	dh, dw         int // dilation
	oh, ow         int // output size
	groups, cg, og int // groups, input and output channels per group
	bf16           bool
}

// k is the row count of one group's im2col matrix (cg*kh*kw); l the column count (oh*ow).
func (g *convGeom) k() int { return g.cg * g.kh * g.kw }
func (g *convGeom) l() int { return g.oh * g.ow }

// pointwise reports a 1x1 convolution whose im2col matrix is the input itself.
func (g *convGeom) pointwise() bool {
	return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.oh == g.h && g.ow == g.w
}

func newConvGeom(xs, ws []int, p ConvParams) convGeom {
	if len(xs) != 4 || len(ws) != 4 {
		panic(fmt.Sprintf("autograd: Conv2d: input %v and weight %v must both be 4-d ([N, C, H, W] and [out, in/groups, kh, kw])", xs, ws))
	}
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	g := convGeom{n: xs[0], c: xs[1], h: xs[2], w: xs[3], o: ws[0], kh: ws[2], kw: ws[3],
		sh: def(p.Stride[0], 1), sw: def(p.Stride[1], 1), dh: def(p.Dilation[0], 1), dw: def(p.Dilation[1], 1),
		groups: def(p.Groups, 1), bf16: p.Precision == tensor.PrecisionBFloat16}
	if g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.groups < 1 || p.Padding[0] < 0 || p.Padding[1] < 0 {
		panic(fmt.Sprintf("autograd: Conv2d: invalid params %+v", p))
	}
	if g.c%g.groups != 0 || g.o%g.groups != 0 {
		panic(fmt.Sprintf("autograd: Conv2d: %d input and %d output channels must both be divisible by groups=%d", g.c, g.o, g.groups))
	}
	g.cg, g.og = g.c/g.groups, g.o/g.groups
	if ws[1] != g.cg {
		panic(fmt.Sprintf("autograd: Conv2d: weight %v expects %d input channels per group, input %v with groups=%d has %d",
			ws, ws[1], xs, g.groups, g.cg))
	}
	padH, padW := 2*p.Padding[0], 2*p.Padding[1]
	g.ph, g.pw = p.Padding[0], p.Padding[1]
	if p.Same {
		if g.sh != 1 || g.sw != 1 {
			panic(fmt.Sprintf("autograd: Conv2d: padding='same' is not supported for strided convolutions (stride %d, %d)", g.sh, g.sw))
		}
		padH, padW = g.dh*(g.kh-1), g.dw*(g.kw-1)
		g.ph, g.pw = padH/2, padW/2
	}
	g.pb, g.pr = padH-g.ph, padW-g.pw
	g.oh = (g.h+padH-g.dh*(g.kh-1)-1)/g.sh + 1
	g.ow = (g.w+padW-g.dw*(g.kw-1)-1)/g.sw + 1
	if g.h+padH-g.dh*(g.kh-1) < 1 || g.w+padW-g.dw*(g.kw-1) < 1 {
		panic(fmt.Sprintf("autograd: Conv2d: kernel %dx%d (dilation %d, %d) is larger than the padded input %v", g.kh, g.kw, g.dh, g.dw, xs))
	}
	return g
}

// Conv2d is torch.nn.functional.conv2d over x [N, C, H, W] with weight
// [out, C/groups, kh, kw] and bias [out] (nil for none), in NCHW like torch.
//
// float32 runs on the engine's convolution kernels where it has them
// (tensor.Conv2dForward and friends: oneDNN's primitives, each on one
// thread), with the samples split over tensor.Threads() goroutines and a
// private weight gradient per goroutine, summed at the end. Elsewhere
// (float64, the pure-Go and -tags nodnnl builds, shapes oneDNN refuses)
// the im2col path below runs.
//
// Each sample and group is one GEMM, weight [out/g, C/g*kh*kw] times the
// im2col matrix [C/g*kh*kw, oh*ow] of that sample, written straight into the
// output (a 1x1 convolution multiplies the input itself). The im2col buffer
// is per worker and reused across samples, so it stays in cache. Backward
// recomputes it (rather than keeping N of them alive) for dW = gy·colsᵀ and
// scatters dcols = Wᵀ·gy back with col2im for dX. With tensor.Threads() > 1
// the samples are split over that many goroutines (each GEMM then runs on
// its caller's thread), with a private dW per worker summed at the end.
func Conv2d(x, w, b *Variable, p ConvParams) *Variable { return conv2d(x, w, b, p, false) }

// conv2d is Conv2d, followed by ReLU when relu is set (Conv2dReLU): fused
// into the engine's kernel on the host in float32 where it has one, the
// two ops elsewhere.
func conv2d(x, w, b *Variable, p ConvParams, relu bool) *Variable {
	g := newConvGeom(x.Value.Shape(), w.Value.Shape(), p)
	sameDType("Conv2d", x.Value, w.Value)
	if b != nil {
		sameDType("Conv2d", x.Value, b.Value)
		if b.Value.Numel() != g.o {
			panic(fmt.Sprintf("autograd: Conv2d: bias shape %v does not match %d output channels", b.Value.Shape(), g.o))
		}
	}
	xc := x.Value.Contiguous()
	in := ins(x, w)
	if b != nil {
		in = ins(x, w, b)
	}
	op := conv2dOp{inputs: in, x: x, w: w, b: b, xc: xc, g: g}
	if y := tensor.Conv2dDevice(xc, w.Value, biasValue(b), new(g.engineShape(g.n))); y != nil {
		return reluIf(relu, FromOp(y, &op))
	}
	// The engine overwrites every element, so its output is not zeroed
	// first (the benchmark convnet's first layer makes 6.4 MB a step at
	// batch 64); the loops get zeros.
	y := tensor.Empty(xc.DType(), g.n, g.o, g.oh, g.ow)
	if relu && xc.DType() == tensor.Float32 &&
		convFwdEngine(&g, y.F32(), xc.F32(), data[float32](w.Value), biasData[float32](b), true) {
		return FromOp(y, &conv2dReLUOp{conv2dOp: op, y: y})
	}
	if xc.DType() == tensor.Float64 {
		tensor.Fill(y, 0)
		convFwd(&g, y.F64(), xc.F64(), data[float64](w.Value), biasData[float64](b))
	} else if w32, b32 := data[float32](w.Value), biasData[float32](b); !convFwdEngine(&g, y.F32(), xc.F32(), w32, b32, false) {
		tensor.Fill(y, 0)
		convFwd(&g, y.F32(), xc.F32(), w32, b32)
	}
	return reluIf(relu, FromOp(y, &op))
}

func reluIf(relu bool, v *Variable) *Variable {
	if relu {
		return ReLU(v)
	}
	return v
}

type conv2dOp struct {
	inputs
	x, w, b *Variable
	xc      *tensor.Tensor
	g       convGeom
}

func (o *conv2dOp) Name() string { return "Conv2d" }
func (o *conv2dOp) freshGrads()  {}

// convWorkers returns how many goroutines share the n samples.
func convWorkers(n int) int { return max(1, min(tensor.Threads(), n)) }

// parallelSamples runs fn(worker, lo, hi) over contiguous ranges of the n
// samples, on the calling goroutine when there is one worker.
func parallelSamples(n, workers int, fn func(worker, lo, hi int)) {
	if workers <= 1 {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			fn(i, i*n/workers, (i+1)*n/workers)
		}(i)
	}
	fn(0, 0, n/workers)
	wg.Wait()
}

// engineShape is g for n samples, in tensor's terms.
func (g *convGeom) engineShape(n int) tensor.Conv2dShape {
	return tensor.Conv2dShape{N: n, C: g.c, H: g.h, W: g.w, O: g.o, KH: g.kh, KW: g.kw,
		StrideH: g.sh, StrideW: g.sw, PadTop: g.ph, PadLeft: g.pw, PadBottom: g.pb, PadRight: g.pr,
		DilationH: g.dh, DilationW: g.dw, Groups: g.groups, OH: g.oh, OW: g.ow, BF16: g.bf16}
}

// convEngineChunk is the most samples one engine call gets. oneDNN works on
// blocked copies of its arguments in per-thread staging buffers, so chunks
// keep them small: the first convolution's output of 16 samples is 1.6 MB,
// inside L2, where at 64 it was 6.4 MB and each reorder went to memory
// (BenchmarkConvNetConvLayers on one thread: 27-28 cpu-ms per step at 8 or
// 16, 29-30 at 32 or 64); and an evaluation batch of 1000 does not grow the
// buffers, which last as long as their thread, to hundreds of MB.
const convEngineChunk = 16

// convChunks calls fn(lo, hi) for consecutive ranges of at most
// convEngineChunk samples covering [lo, hi), stopping at the first false.
func convChunks(lo, hi int, fn func(lo, hi int) bool) bool {
	for c := lo; c < hi; c += convEngineChunk {
		if !fn(c, min(hi, c+convEngineChunk)) {
			return false
		}
	}
	return true
}

// convFwdEngine runs the forward pass on the engine's kernels, split over
// samples, with the ReLU fused when relu is set, and reports false (for
// im2col, or the two ops, to redo all of it) where the engine has no
// kernel for a part.
func convFwdEngine(g *convGeom, y, x, w, b []float32, relu bool) bool {
	fwd := tensor.Conv2dForward
	if relu {
		fwd = tensor.Conv2dForwardReLU
	}
	workers := convWorkers(g.n)
	ok := make([]bool, workers)
	xs, ys := g.c*g.h*g.w, g.o*g.l()
	parallelSamples(g.n, workers, func(wk, lo, hi int) {
		ok[wk] = convChunks(lo, hi, func(lo, hi int) bool {
			s := g.engineShape(hi - lo)
			return fwd(&s, y[lo*ys:hi*ys], x[lo*xs:hi*xs], w, b)
		})
	})
	for _, v := range ok {
		if !v {
			return false
		}
	}
	return true
}

// convBwdEngine computes dx (overwritten) and adds the weight and bias
// gradients into dw and db on the engine's kernels (each nil when not
// wanted; db only with dw), split over samples; false as convFwdEngine.
func convBwdEngine(g *convGeom, dx, dw, db, gy, x, w []float32) bool {
	workers := convWorkers(g.n)
	ok := make([]bool, workers)
	// Per worker: its weight and bias gradient sums, and one chunk's.
	pdw, pdb := make([][]float32, workers), make([][]float32, workers)
	xs, ys := g.c*g.h*g.w, g.o*g.l()
	parallelSamples(g.n, workers, func(wk, lo, hi int) {
		var cdw, cdb []float32
		if dw != nil {
			pdw[wk], cdw = make([]float32, len(dw)), make([]float32, len(dw))
			if db != nil {
				pdb[wk], cdb = make([]float32, len(db)), make([]float32, len(db))
			}
		}
		ok[wk] = convChunks(lo, hi, func(lo, hi int) bool {
			s := g.engineShape(hi - lo)
			gys := gy[lo*ys : hi*ys]
			if dx != nil && !tensor.Conv2dBackwardData(&s, dx[lo*xs:hi*xs], w, gys) {
				return false
			}
			if dw == nil {
				return true
			}
			if !tensor.Conv2dBackwardWeights(&s, cdw, cdb, x[lo*xs:hi*xs], gys) {
				return false
			}
			addTo(pdw[wk], cdw)
			addTo(pdb[wk], cdb)
			return true
		})
	})
	for _, v := range ok {
		if !v {
			return false
		}
	}
	for wk := range workers {
		addTo(dw, pdw[wk])
		addTo(db, pdb[wk])
	}
	return true
}

// convGemm is the im2col path's product, in bf16 when g asks for it.
func convGemm[T float](g *convGeom, ta, tb bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if g.bf16 {
		if a32, ok := any(a).([]float32); ok {
			tensor.GemmBF16(ta, tb, m, n, k, float32(alpha), a32, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
			return
		}
	}
	gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func addTo(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}

func convFwd[T float](g *convGeom, y, x, w, b []T) {
	K, L := g.k(), g.l()
	hw := g.h * g.w
	parallelSamples(g.n, convWorkers(g.n), func(_, lo, hi int) {
		var cols []T
		if !g.pointwise() {
			cols = make([]T, K*L)
		}
		for s := lo; s < hi; s++ {
			for gr := 0; gr < g.groups; gr++ {
				xs := x[(s*g.c+gr*g.cg)*hw : (s*g.c+(gr+1)*g.cg)*hw]
				src := xs
				if cols != nil {
					im2col(g, cols, xs)
					src = cols
				}
				ys := y[(s*g.o+gr*g.og)*L : (s*g.o+(gr+1)*g.og)*L]
				var beta T
				if b != nil {
					for oc := 0; oc < g.og; oc++ {
						fillT(ys[oc*L:(oc+1)*L], b[gr*g.og+oc])
					}
					beta = 1
				}
				convGemm(g, false, false, g.og, L, K, 1, w[gr*g.og*K:(gr+1)*g.og*K], K, src, L, beta, ys, L)
			}
		}
	})
}

func fillT[T float](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// im2col writes the [cg*kh*kw, oh*ow] patch matrix of one sample's group
// (x holds its cg channels, [cg, h, w]) into cols; padding reads as zero.
func im2col[T float](g *convGeom, cols, x []T) {
	L := g.l()
	row := 0
	for c := 0; c < g.cg; c++ {
		xc := x[c*g.h*g.w : (c+1)*g.h*g.w]
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				dst := cols[row*L : (row+1)*L]
				row++
				ix0 := kj*g.dw - g.pw
				// Output columns whose input column is inside the image.
				lo, hi := validRange(ix0, g.sw, g.w, g.ow)
				for oy := 0; oy < g.oh; oy++ {
					d := dst[oy*g.ow : (oy+1)*g.ow]
					iy := oy*g.sh - g.ph + ki*g.dh
					if iy < 0 || iy >= g.h || lo >= hi {
						clear(d)
						continue
					}
					xr := xc[iy*g.w : (iy+1)*g.w]
					clear(d[:lo])
					if g.sw == 1 {
						copy(d[lo:hi], xr[lo+ix0:hi+ix0])
					} else {
						for ox := lo; ox < hi; ox++ {
							d[ox] = xr[ox*g.sw+ix0]
						}
					}
					clear(d[hi:])
				}
			}
		}
	}
}

// col2im adds the [cg*kh*kw, oh*ow] matrix cols back into the group's input
// gradient dx [cg, h, w] (the adjoint of im2col).
func col2im[T float](g *convGeom, dx, cols []T) {
	L := g.l()
	row := 0
	for c := 0; c < g.cg; c++ {
		dc := dx[c*g.h*g.w : (c+1)*g.h*g.w]
		for ki := 0; ki < g.kh; ki++ {
			for kj := 0; kj < g.kw; kj++ {
				src := cols[row*L : (row+1)*L]
				row++
				ix0 := kj*g.dw - g.pw
				lo, hi := validRange(ix0, g.sw, g.w, g.ow)
				if lo >= hi {
					continue
				}
				for oy := 0; oy < g.oh; oy++ {
					iy := oy*g.sh - g.ph + ki*g.dh
					if iy < 0 || iy >= g.h {
						continue
					}
					s := src[oy*g.ow : (oy+1)*g.ow]
					dr := dc[iy*g.w : (iy+1)*g.w]
					if g.sw == 1 {
						d := dr[lo+ix0 : hi+ix0]
						for i, v := range s[lo:hi] {
							d[i] += v
						}
					} else {
						for ox := lo; ox < hi; ox++ {
							dr[ox*g.sw+ix0] += s[ox]
						}
					}
				}
			}
		}
	}
}

// validRange returns the output columns [lo, hi) whose input column
// ox*stride+ix0 lies in [0, w), for ow output columns.
func validRange(ix0, stride, w, ow int) (lo, hi int) {
	if ix0 < 0 {
		lo = (-ix0 + stride - 1) / stride
	}
	if w-ix0 <= 0 {
		return 0, 0
	}
	hi = min(ow, (w-ix0-1)/stride+1)
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// convBiasGrad adds the per-channel sums of gy into db.
func convBiasGrad[T float](g *convGeom, db, gy []T) {
	L := g.l()
	for s := 0; s < g.n; s++ {
		for oc := 0; oc < g.o; oc++ {
			var sum T
			for _, v := range gy[(s*g.o+oc)*L : (s*g.o+oc+1)*L] {
				sum += v
			}
			db[oc] += sum
		}
	}
}

func (o *conv2dOp) Backward(gy *tensor.Tensor) []*tensor.Tensor { return o.backwardInto(gy, nil) }

func (o *conv2dOp) backwardInto(gy *tensor.Tensor, dst []*tensor.Tensor) []*tensor.Tensor {
	gy = gy.Contiguous()
	if dg, ok := tensor.Conv2dBackwardDevice(gy, o.xc, o.w.Value, o.needs(), at3(dst), new(o.g.engineShape(o.g.n))); ok {
		return dg[:len(o.Inputs())]
	}
	grads := make([]*tensor.Tensor, len(o.Inputs()))
	if gy.DType() == tensor.Float64 {
		convBwd[float64](o, gy, dst, grads)
	} else {
		convBwd[float32](o, gy, dst, grads)
	}
	if len(dst) > 0 && dst[0] != nil && grads[0] != nil {
		// The engine offered x's Grad (x a leaf): dx goes into it, as dW does.
		tensor.AddInto(dst[0], grads[0])
		grads[0] = nil
	}
	return grads
}

func convBwd[T float](o *conv2dOp, gyT *tensor.Tensor, dst, grads []*tensor.Tensor) {
	g := &o.g
	K, L := g.k(), g.l()
	hw := g.h * g.w
	gy, x, w := data[T](gyT), data[T](o.xc), data[T](o.w.Value)
	var dx, dw, db []T
	if needs(o.x) {
		grads[0] = tensor.New(gyT.DType(), o.x.Value.Shape()...)
		dx = data[T](grads[0])
	}
	if needs(o.w) {
		dw = paramGrad[T](1, dst, grads, gyT.DType(), o.w.Value.Shape())
	}
	if o.b != nil && needs(o.b) {
		db = paramGrad[T](2, dst, grads, gyT.DType(), o.b.Value.Shape())
	}
	if gy32, ok := any(gy).([]float32); ok && (dx != nil || dw != nil) {
		// oneDNN sums the bias gradient with the weights'; alone it is the loop below.
		edb := any(db).([]float32)
		if dw == nil {
			edb = nil
		}
		if convBwdEngine(g, any(dx).([]float32), any(dw).([]float32), edb, gy32, any(x).([]float32), any(w).([]float32)) {
			if db != nil && edb == nil {
				convBiasGrad(g, db, gy)
			}
			return
		}
		clear(dx) // a part may have run: col2im below adds into dx
	}
	if db != nil {
		convBiasGrad(g, db, gy)
	}
	if dx == nil && dw == nil {
		return
	}
	workers := convWorkers(g.n)
	// Each worker sums dWᵀ [K, out/g] per group over its samples as
	// colsᵀ-shaped GEMMs (m = K): with op(B) transposed the engine's faster
	// kernel needs the long side in m, which dW [out/g, K] would not give.
	partial := make([][]T, workers)
	pw := g.pointwise()
	parallelSamples(g.n, workers, func(wk, lo, hi int) {
		var cols, dcols, dwt []T
		if !pw {
			if dw != nil {
				cols = make([]T, K*L)
			}
			if dx != nil {
				dcols = make([]T, K*L)
			}
		}
		if dw != nil {
			dwt = make([]T, len(dw))
			partial[wk] = dwt
		}
		for s := lo; s < hi; s++ {
			for gr := 0; gr < g.groups; gr++ {
				off := (s*g.c + gr*g.cg) * hw
				gys := gy[(s*g.o+gr*g.og)*L : (s*g.o+(gr+1)*g.og)*L]
				wg := w[gr*g.og*K : (gr+1)*g.og*K]
				if dwt != nil {
					src := x[off : off+g.cg*hw]
					if !pw {
						im2col(g, cols, src)
						src = cols
					}
					convGemm(g, false, true, K, g.og, L, 1, src, L, gys, L, 1, dwt[gr*g.og*K:(gr+1)*g.og*K], g.og)
				}
				if dx != nil {
					dxs := dx[off : off+g.cg*hw]
					if pw {
						convGemm(g, true, false, K, L, g.og, 1, wg, K, gys, L, 0, dxs, L)
					} else {
						convGemm(g, true, false, K, L, g.og, 1, wg, K, gys, L, 0, dcols, L)
						col2im(g, dxs, dcols)
					}
				}
			}
		}
	})
	if dw == nil {
		return
	}
	for _, p := range partial {
		for gr := 0; gr < g.groups; gr++ {
			src, dst := p[gr*g.og*K:(gr+1)*g.og*K], dw[gr*g.og*K:(gr+1)*g.og*K]
			for k := 0; k < K; k++ {
				row := src[k*g.og : (k+1)*g.og]
				for oc, v := range row {
					dst[oc*K+k] += v
				}
			}
		}
	}
}

// needs reports which of dx, dw, db the backward pass wants.
func (o *conv2dOp) needs() [3]bool {
	return [3]bool{needs(o.x), needs(o.w), o.b != nil && needs(o.b)}
}

// at3 is the engine's gradient buffers (up to 3) as an array.
func at3(dst []*tensor.Tensor) (a [3]*tensor.Tensor) {
	copy(a[:], dst)
	return a
}

func biasValue(b *Variable) *tensor.Tensor {
	if b == nil {
		return nil
	}
	return b.Value
}
