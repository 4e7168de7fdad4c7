package tensor

import (
	"fmt"
	"time"
)

// Linear returns x @ wᵀ + b for x [..., in], w [out, in] and b [out] (b
// may be nil), as torch.nn.functional.linear; shapes are the caller's to
// check. The forward is one GEMM with the bias folded in: the output rows
// start as b and the GEMM runs with beta = 1.
func Linear(x, w, b *Tensor) *Tensor { return LinearWith(x, w, b, PrecisionFloat32) }

// LinearWith is Linear whose float32 product runs in precision p (see
// Precision; autocast's bf16 linear). Float64 operands always run at their
// own precision; device ones run bfloat16 through the device's GemmBF16.
func LinearWith(x, w, b *Tensor, p Precision) *Tensor {
	out, in := w.shape[0], w.shape[1]
	xc := x.Contiguous()
	n := xc.Numel() / in
	shape := append([]int(nil), xc.shape...)
	shape[len(shape)-1] = out
	if onDevice(xc, w, b) {
		k := kernelsFor("Linear", xc, w, b)
		NeedKernel(k.AddBias != nil, "Linear", xc.Device())
		gemm := deviceGemm(k, p, "Linear", xc.Device())
		// add_bias adds to y, so y starts at zero for it; the GEMM alone
		// (beta 0) writes y whole, unless it has no product (in = 0).
		var y *Tensor
		if b != nil || in == 0 {
			y = MustZerosOn(xc.Device(), shape...)
		} else {
			y = MustEmptyOn(xc.Device(), shape...)
		}
		var beta float32
		if b != nil {
			k.AddBias(y, b)
			beta = 1
		}
		gemm(false, true, n, out, in, 1, xc, in, w, in, beta, y, out)
		return y
	}
	// The bias rows or the GEMM (beta 0) write y whole; with in = 0 the
	// GEMM has no product to write, so y must start at zero.
	y := Empty(xc.dtype, shape...)
	if in == 0 {
		y = New(xc.dtype, shape...)
	}
	if xc.dtype == Float64 {
		var bias []float64
		if b != nil {
			bias = b.Contiguous().F64()
		}
		linearFwd64(y.F64(), xc.F64(), w.Contiguous().F64(), bias, n, in, out)
	} else {
		var bias []float32
		if b != nil {
			bias = b.Contiguous().F32()
		}
		linearFwd32(y.F32(), xc.F32(), w.Contiguous().F32(), bias, n, in, out, p)
	}
	return y
}

func linearFwd32(y, x, w, b []float32, n, in, out int, p Precision) {
	if p == PrecisionBFloat16 {
		xh, wh := RoundToBF16(x, n, in), RoundToBF16(w, out, in)
		linearFwdBF16(y, xh, wh, b, n, in, out)
		ReleaseScratch(xh.buf)
		ReleaseScratch(wh.buf)
		return
	}
	if linearSwapped(n, in, out) {
		linearTransposed(y, b, n, out, func(yt []float32) {
			Gemm(false, true, out, n, in, 1, w, in, x, in, 0, yt, n)
		})
		return
	}
	LinearF32(y, x, w, b, n, in, out)
}

// LinearF32 writes y = x·wᵀ + b for row-major x [n, in], w [out, in] and y
// [n, out], b [out] (nil: no bias): a float32 Linear's product. Where the
// engine runs the shape through oneDNN, the bias is added in the epilogue
// of oneDNN's matmul (see linear_fused in engine.c); elsewhere y's rows
// start as b and Gemm adds the product, as Linear did before. Bad shapes
// or short slices panic, as in Gemm.
func LinearF32(y, x, w, b []float32, n, in, out int) {
	if b == nil || n == 0 || out == 0 || in == 0 || !engineLinearFused(n, out, in) {
		var beta float32
		if b != nil {
			copyRows(y[:n*out], b[:out])
			beta = 1
		}
		Gemm(false, true, n, out, in, 1, x, in, w, in, beta, y, out)
		return
	}
	checkGemm("LinearF32", false, true, n, out, in, len(x), in, len(w), in, len(y), out)
	checkBias("LinearF32", b, out)
	if p := recorder(); p != nil {
		defer profileGemm(p, "matmul+bias", false, true, n, out, in, time.Now())
	}
	schedHint(2 * float64(n) * float64(out) * float64(in))
	engineLinear(y, x, w, b, n, in, out)
}

func checkBias(op string, b []float32, out int) {
	if len(b) < out {
		panic(fmt.Sprintf("tensor: %s: bias has %d values for %d outputs", op, len(b), out))
	}
}

// linearSwapped reports whether a float32 Linear of n rows runs as yᵀ =
// w·xᵀ, then a transpose. With few rows against a wide weight the product
// y = x·wᵀ has a short M, and oneDNN's sgemm runs it well below its rate:
// at one thread, 64x1024x3136 (a convnet's Linear(3136, 1024) at batch
// 64) ran at 91-115 GFLOPS, its transpose 1024x64x3136 at 139-165, and
// 32x1024x1024 at 93 against 139 (scripts/gemm_kernels.c). The transpose
// of the n×out result is a small pass next to the product. Rows up to 64,
// out at least 8 times that and in at least 1024 is where it was measured
// to gain; 64x512x784 ran the same both ways, so smaller weights keep the
// one product.
func linearSwapped(n, in, out int) bool { return n <= 64 && out >= 8*n && in >= 1024 }

// linearTransposed writes y [n, out] = ytᵀ + b, where product writes yt
// [out, n] = w·xᵀ into scratch from the host cache (linearSwapped's way).
func linearTransposed(y, b []float32, n, out int, product func(yt []float32)) {
	t := newFull(Float32, out*n)
	yt := t.f32[:out*n]
	product(yt)
	transposeAddBias(y, yt, b, n, out)
	ReleaseScratch(t)
}

// transposeAddBias writes y [n, out] = ytᵀ + b (b nil: no bias) from yt
// [out, n], in tiles that keep both sides' lines in cache.
func transposeAddBias(y, yt, b []float32, n, out int) {
	const tile = 16
	for j0 := 0; j0 < out; j0 += tile {
		j1 := min(j0+tile, out)
		for i := range n {
			row := y[i*out : (i+1)*out]
			for j := j0; j < j1; j++ {
				v := yt[j*n+i]
				if b != nil {
					v += b[j]
				}
				row[j] = v
			}
		}
	}
}

func linearFwd64(y, x, w, b []float64, n, in, out int) {
	var beta float64
	if b != nil {
		copyRows(y[:n*out], b)
		beta = 1
	}
	Gemm64(false, true, n, out, in, 1, x, in, w, in, beta, y, out)
}

// LinearBackward computes Linear's gradients from gy [..., out] and the
// forward's contiguous input x [..., in] and weight w [out, in]: dx = gy @
// w, dw = gyᵀ @ x, db = the column sums of gy. Each of dx, dw and db that is
// not nil is overwritten, or added to when its acc flag is set (a Grad
// buffer accumulating in place, so a training step makes no parameter-sized
// temporaries); a nil one is skipped.
func LinearBackward(gy, x, w, dx, dw, db *Tensor, accX, accW, accB bool) {
	LinearBackwardWith(gy, x, w, dx, dw, db, accX, accW, accB, PrecisionFloat32)
}

// LinearBackwardWith is LinearBackward whose float32 products run in
// precision p, as the backward of autocast's bf16 linear does.
func LinearBackwardWith(gy, x, w, dx, dw, db *Tensor, accX, accW, accB bool, p Precision) {
	out, in := w.shape[0], w.shape[1]
	gy = gy.Contiguous()
	n := gy.Numel() / out
	if onDevice(gy, x, w, dx, dw, db) {
		linearBwdDevice(gy, x, w, dx, dw, db, accX, accW, accB, n, in, out, p)
		return
	}
	switch {
	case gy.dtype == Float64:
		linearBwd(gy.F64(), x, w.Contiguous().F64(), dx, dw, db, accX, accW, accB, n, in, out,
			(*Tensor).F64, Gemm64)
	case p == PrecisionBFloat16:
		xh := RoundToBF16(x.Contiguous().F32(), n, in)
		linearBwdBF16(gy, nil, xh, nil, w, dx, dw, db, accX, accW, accB)
		ReleaseScratch(xh.buf)
	default:
		linearBwd(gy.F32(), x, w.Contiguous().F32(), dx, dw, db, accX, accW, accB, n, in, out,
			(*Tensor).F32, Gemm)
	}
}

func linearBwd[T float](gy []T, x *Tensor, w []T, dx, dw, db *Tensor, accX, accW, accB bool, n, in, out int,
	data func(*Tensor) []T, gemm func(bool, bool, int, int, int, T, []T, int, []T, int, T, []T, int)) {
	beta := func(acc bool) T {
		if acc {
			return 1
		}
		return 0
	}
	if dx != nil {
		gemm(false, false, n, in, out, 1, gy, out, w, in, beta(accX), data(dx), in)
	}
	if dw != nil {
		gemm(true, false, out, in, n, 1, gy, out, data(x), in, beta(accW), data(dw), in)
	}
	if db != nil {
		d := data(db)[:out]
		if !accB {
			clear(d)
		}
		AddRows(d, gy[:n*out], n, out)
	}
}

func linearBwdDevice(gy, x, w, dx, dw, db *Tensor, accX, accW, accB bool, n, in, out int, p Precision) {
	k := kernelsFor("LinearBackward", gy, x, w, dx, dw, db)
	NeedKernel(k.SumRows != nil && k.Axpy != nil, "LinearBackward", gy.Device())
	gemm := deviceGemm(k, p, "LinearBackward", gy.Device())
	beta := func(acc bool) float32 {
		if acc {
			return 1
		}
		return 0
	}
	if dx != nil {
		gemm(false, false, n, in, out, 1, gy, out, w, in, beta(accX), dx, in)
	}
	if dw != nil {
		gemm(true, false, out, in, n, 1, gy, out, x, in, beta(accW), dw, in)
	}
	if db != nil {
		g2 := gy.Reshape(n, out)
		if !accB {
			k.SumRows(db, g2)
		} else {
			s := MustZerosOn(gy.Device(), out)
			k.SumRows(s, g2)
			k.Axpy(db, 1, s)
			ReleaseScratch(s)
		}
	}
}

// LinearBackwardGated is the backward of a Linear whose output went through
// an activation with derivative gate (as GELUWithGradF32 keeps it; the
// Linear's shape): the Linear's output gradient is gy ⊙ gate. On the host
// in float32 the product is formed in the pass that sums the bias gradient
// (and, for bf16 products, rounds it for them), where the activation's
// backward and the Linear's each passed over it. xh and wh are
// LinearBF16's roundings under PrecisionBFloat16 (xh nil: x is rounded
// here), x the input otherwise. The same bits as GELUBackwardF32 (the
// product), then LinearBackwardWith or LinearBackwardBF16.
func LinearBackwardGated(gy, gate, x *Tensor, xh, wh *BF16Matrix, w, dx, dw, db *Tensor, accX, accW, accB bool, p Precision) {
	gy = gy.Contiguous()
	if !sameShape(gy, gate) {
		panic(fmt.Sprintf("tensor: LinearBackwardGated: gate of shape %v for an output gradient of shape %v", gate.shape, gy.shape))
	}
	if onDevice(gy, gate, x, w, dx, dw, db) || gy.dtype != Float32 || gate.dtype != Float32 {
		g := Mul(gy, gate)
		if p == PrecisionBFloat16 && xh != nil {
			LinearBackwardBF16(g, x, xh, wh, w, dx, dw, db, accX, accW, accB)
		} else {
			LinearBackwardWith(g, x, w, dx, dw, db, accX, accW, accB, p)
		}
		return
	}
	out, in := w.shape[0], w.shape[1]
	n := gy.Numel() / out
	if p == PrecisionBFloat16 {
		if xh == nil {
			xh = RoundToBF16(x.Contiguous().F32(), n, in)
			defer ReleaseScratch(xh.buf)
		}
		linearBwdBF16(gy, gate, xh, wh, w, dx, dw, db, accX, accW, accB)
		return
	}
	s := gate.Contiguous().F32()[:n*out]
	gs := EmptyAs(gy, n, out)
	g := gs.F32()
	if db != nil {
		d := db.F32()[:out]
		if !accB {
			clear(d)
		}
		mulAddRows(g, gy.F32()[:n*out], s, d, n, out)
		db = nil
	} else {
		binVV(opMul, g, gy.F32()[:n*out], s)
	}
	linearBwd(g, x, w.Contiguous().F32(), dx, dw, db, accX, accW, accB, n, in, out, (*Tensor).F32, Gemm)
	ReleaseScratch(gs)
}

// mulAddRows writes y = x ⊙ s and adds y's rows to d (AddRows's sums).
func mulAddRows(y, x, s, d []float32, rows, cols int) {
	if rows*cols == 0 || mulAddRowsC(y, x, s, d, rows, cols) {
		return
	}
	binVV(opMul, y, x, s)
	AddRows(d, y, rows, cols)
}
