package tensor

import "sync"

// The host's convolutional-network entries (Kernels.Conv2dForward,
// Conv2dBackward, Im2col, Col2im, Swap01, AddChannelBias, SumChannels,
// MaxPool2d, AvgPool2d, DropoutFromRNG and their backwards): the loops
// autograd's Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and Dropout
// ran on host slices until 2026-11-29, moved behind the table unchanged.
// float32 convolutions run on the engine's kernels (oneDNN's, one thread
// each) with the samples split over Threads() goroutines; float64, the
// pure-Go and -tags nodnnl builds and the shapes oneDNN refuses run
// im2col and GEMM per sample, in the same goroutines. The 2x2 max pool
// runs the C kernels of pool_cgo.go.

// ---- convolution geometry, per group.

// cg and og are the input and output channels of one group; k is the row
// count of one group's im2col matrix, l its column count.
func (s *Conv2dShape) cg() int { return s.C / s.Groups }
func (s *Conv2dShape) og() int { return s.O / s.Groups }
func (s *Conv2dShape) k() int  { return s.cg() * s.KH * s.KW }
func (s *Conv2dShape) l() int  { return s.OH * s.OW }

// pointwise reports a 1x1 convolution whose im2col matrix is the input itself.
func (s *Conv2dShape) pointwise() bool {
	return s.KH == 1 && s.KW == 1 && s.StrideH == 1 && s.StrideW == 1 && s.PadTop == 0 && s.PadLeft == 0 &&
		s.OH == s.H && s.OW == s.W
}

// convWorkers returns how many goroutines share the n samples.
func convWorkers(n int) int { return max(1, min(Threads(), n)) }

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

// convEngineChunk is the most samples one engine call gets. oneDNN works
// on blocked copies of its arguments in per-thread staging buffers, so
// chunks keep them small: the first convolution's output of 16 samples is
// 1.6 MB, inside L2, where at 64 it was 6.4 MB and each reorder went to
// memory (BenchmarkConvNetConvLayers on one thread: 27-28 cpu-ms per step
// at 8 or 16, 29-30 at 32 or 64); and an evaluation batch of 1000 does
// not grow the buffers, which last as long as their thread, to hundreds
// of MB.
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

// ---- Conv2dForward and Conv2dBackward.

// cpuConv2dForward is the host's Conv2dForward: it runs every shape
// without the ReLU (reporting false only for a ReLU the engine cannot
// fuse: float64, builds without oneDNN, shapes it refuses).
func cpuConv2dForward(y, x, w, b *Tensor, s *Conv2dShape, relu bool) bool {
	if x.dtype == Float64 {
		if relu {
			return false
		}
		clear(f64s(y))
		convFwd(s, f64s(y), f64s(x), f64s(w), optHostF64(b))
		return true
	}
	y32, x32, w32, b32 := f32s(y), f32s(x), f32s(w), optHostF32(b)
	if convFwdEngine(s, y32, x32, w32, b32, relu) {
		return true
	}
	if relu {
		return false
	}
	clear(y32) // a chunk may have run
	convFwd(s, y32, x32, w32, b32)
	return true
}

// convFwdEngine runs the forward pass on the engine's kernels, split over
// samples, with the ReLU fused when relu is set, and reports false (for
// im2col, or the two ops, to redo all of it) where the engine has no
// kernel for a part.
func convFwdEngine(s *Conv2dShape, y, x, w, b []float32, relu bool) bool {
	fwd := Conv2dForward
	if relu {
		fwd = Conv2dForwardReLU
	}
	workers := convWorkers(s.N)
	ok := make([]bool, workers)
	xs, ys := s.C*s.H*s.W, s.O*s.l()
	parallelSamples(s.N, workers, func(wk, lo, hi int) {
		ok[wk] = convChunks(lo, hi, func(lo, hi int) bool {
			cs := *s
			cs.N = hi - lo
			return fwd(&cs, y[lo*ys:hi*ys], x[lo*xs:hi*xs], w, b)
		})
	})
	for _, v := range ok {
		if !v {
			return false
		}
	}
	return true
}

// convFwd is the im2col path: per sample and group one GEMM, weight
// [O/G, K] times the sample's im2col matrix [K, L] (a 1x1 convolution
// multiplies the input itself), written straight into y (zeroed by the
// caller) over the bias. The im2col buffer is per worker and reused across
// samples, so it stays in cache.
func convFwd[T float](s *Conv2dShape, y, x, w, b []T) {
	K, L, cg, og := s.k(), s.l(), s.cg(), s.og()
	hw := s.H * s.W
	parallelSamples(s.N, convWorkers(s.N), func(_, lo, hi int) {
		var cols []T
		if !s.pointwise() {
			cols = make([]T, K*L)
		}
		for n := lo; n < hi; n++ {
			for gr := range s.Groups {
				xs := x[(n*s.C+gr*cg)*hw : (n*s.C+(gr+1)*cg)*hw]
				src := xs
				if cols != nil {
					im2col(s, cols, xs)
					src = cols
				}
				ys := y[(n*s.O+gr*og)*L : (n*s.O+(gr+1)*og)*L]
				var beta T
				if b != nil {
					for oc := range og {
						fillT(ys[oc*L:(oc+1)*L], b[gr*og+oc])
					}
					beta = 1
				}
				convGemm(s, false, false, og, L, K, 1, w[gr*og*K:(gr+1)*og*K], K, src, L, beta, ys, L)
			}
		}
	})
}

// cpuConv2dBackward is the host's Conv2dBackward: it runs every shape.
// dx with acc is computed into a scratch tensor and added, as autograd
// did; dw and db accumulate per worker and are added at the end.
func cpuConv2dBackward(dx, dw, db, gy, x, w *Tensor, s *Conv2dShape, acc [3]bool) (okX, okW bool) {
	out := dx
	if dx != nil && acc[0] {
		out = newFull(dx.dtype, dx.shape...) // written whole
	}
	if dw != nil && !acc[1] {
		clearTensor(dw)
	}
	if db != nil && !acc[2] {
		clearTensor(db)
	}
	if gy.dtype == Float64 {
		convBwd(s, optHostF64(out), optHostF64(dw), optHostF64(db), f64s(gy), f64s(x), f64s(w))
	} else {
		dx32, dw32, db32 := optHostF32(out), optHostF32(dw), optHostF32(db)
		if !convBwdEngine(s, dx32, dw32, db32, f32s(gy), f32s(x), f32s(w)) {
			convBwd(s, dx32, dw32, db32, f32s(gy), f32s(x), f32s(w))
		}
	}
	if out != dx {
		AddInto(dx, out)
		ReleaseScratch(out)
	}
	return true, true
}

func clearTensor(t *Tensor) {
	if t.dtype == Float64 {
		clear(f64s(t))
	} else {
		clear(f32s(t))
	}
}

// convBwdEngine overwrites dx and adds the weight and bias gradients into
// dw and db on the engine's kernels (each nil when not wanted; db only
// with dw), split over samples, each chunk's input gradient and weight
// gradient in turn while its gy is in cache; false as convFwdEngine, with
// dw and db untouched.
func convBwdEngine(s *Conv2dShape, dx, dw, db, gy, x, w []float32) bool {
	workers := convWorkers(s.N)
	ok := make([]bool, workers)
	// Per worker: its weight and bias gradient sums, and one chunk's.
	pdw, pdb := make([][]float32, workers), make([][]float32, workers)
	xs, ys := s.C*s.H*s.W, s.O*s.l()
	parallelSamples(s.N, workers, func(wk, lo, hi int) {
		var cdw, cdb []float32
		if dw != nil {
			pdw[wk], cdw = make([]float32, len(dw)), make([]float32, len(dw))
			if db != nil {
				pdb[wk], cdb = make([]float32, len(db)), make([]float32, len(db))
			}
		}
		ok[wk] = convChunks(lo, hi, func(lo, hi int) bool {
			cs := *s
			cs.N = hi - lo
			gys := gy[lo*ys : hi*ys]
			if dx != nil && !Conv2dBackwardData(&cs, dx[lo*xs:hi*xs], w, gys) {
				return false
			}
			if dw == nil {
				return true
			}
			if !Conv2dBackwardWeights(&cs, cdw, cdb, x[lo*xs:hi*xs], gys) {
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

func addTo(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}

// convBwd is the im2col path of the backward: it overwrites dx and adds
// into dw and db (each nil when not wanted). Backward recomputes the
// im2col matrix (rather than keeping N of them alive) for dW = gy·colsᵀ
// and scatters dcols = Wᵀ·gy back with col2im for dX.
func convBwd[T float](s *Conv2dShape, dx, dw, db, gy, x, w []T) {
	K, L, cg, og := s.k(), s.l(), s.cg(), s.og()
	hw := s.H * s.W
	if db != nil {
		sumChannels(db, gy, s.N, s.O, L)
	}
	if dx == nil && dw == nil {
		return
	}
	clear(dx) // col2im adds into it
	workers := convWorkers(s.N)
	// Each worker sums dWᵀ [K, O/G] per group over its samples as
	// colsᵀ-shaped GEMMs (m = K): with op(B) transposed the engine's faster
	// kernel needs the long side in m, which dW [O/G, K] would not give.
	partial := make([][]T, workers)
	pw := s.pointwise()
	parallelSamples(s.N, workers, func(wk, lo, hi int) {
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
		for n := lo; n < hi; n++ {
			for gr := range s.Groups {
				off := (n*s.C + gr*cg) * hw
				gys := gy[(n*s.O+gr*og)*L : (n*s.O+(gr+1)*og)*L]
				wg := w[gr*og*K : (gr+1)*og*K]
				if dwt != nil {
					src := x[off : off+cg*hw]
					if !pw {
						im2col(s, cols, src)
						src = cols
					}
					convGemm(s, false, true, K, og, L, 1, src, L, gys, L, 1, dwt[gr*og*K:(gr+1)*og*K], og)
				}
				if dx != nil {
					dxs := dx[off : off+cg*hw]
					if pw {
						convGemm(s, true, false, K, L, og, 1, wg, K, gys, L, 0, dxs, L)
					} else {
						convGemm(s, true, false, K, L, og, 1, wg, K, gys, L, 0, dcols, L)
						col2im(s, dxs, dcols)
					}
				}
			}
		}
	})
	if dw == nil {
		return
	}
	for _, p := range partial {
		for gr := range s.Groups {
			src, dst := p[gr*og*K:(gr+1)*og*K], dw[gr*og*K:(gr+1)*og*K]
			for k := range K {
				row := src[k*og : (k+1)*og]
				for oc, v := range row {
					dst[oc*K+k] += v
				}
			}
		}
	}
}

// convGemm is the im2col path's product, in bf16 when s asks for it.
func convGemm[T float](s *Conv2dShape, ta, tb bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	switch av := any(a).(type) {
	case []float32:
		if s.BF16 {
			GemmBF16(ta, tb, m, n, k, float32(alpha), av, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
			return
		}
		Gemm(ta, tb, m, n, k, float32(alpha), av, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		Gemm64(ta, tb, m, n, k, float64(alpha), av, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
}

func fillT[T float](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// ---- im2col and col2im.

// im2col writes the [cg*kh*kw, oh*ow] patch matrix of one sample's group
// (x holds its cg channels, [cg, h, w]) into cols; padding reads as zero.
func im2col[T float](s *Conv2dShape, cols, x []T) {
	L := s.l()
	row := 0
	for c := range s.cg() {
		xc := x[c*s.H*s.W : (c+1)*s.H*s.W]
		for ki := range s.KH {
			for kj := range s.KW {
				im2colRow(s, cols[row*L:(row+1)*L], xc, ki, kj)
				row++
			}
		}
	}
}

// im2colRow writes the row (ki, kj) of one channel plane xc [h, w] into
// dst [oh*ow].
func im2colRow[T float](s *Conv2dShape, dst, xc []T, ki, kj int) {
	ix0 := kj*s.DilationW - s.PadLeft
	// Output columns whose input column is inside the image.
	lo, hi := validRange(ix0, s.StrideW, s.W, s.OW)
	for oy := range s.OH {
		d := dst[oy*s.OW : (oy+1)*s.OW]
		iy := oy*s.StrideH - s.PadTop + ki*s.DilationH
		if iy < 0 || iy >= s.H || lo >= hi {
			clear(d)
			continue
		}
		xr := xc[iy*s.W : (iy+1)*s.W]
		clear(d[:lo])
		if s.StrideW == 1 {
			copy(d[lo:hi], xr[lo+ix0:hi+ix0])
		} else {
			for ox := lo; ox < hi; ox++ {
				d[ox] = xr[ox*s.StrideW+ix0]
			}
		}
		clear(d[hi:])
	}
}

// col2im adds the [cg*kh*kw, oh*ow] matrix cols back into the group's input
// gradient dx [cg, h, w] (the adjoint of im2col).
func col2im[T float](s *Conv2dShape, dx, cols []T) {
	L := s.l()
	row := 0
	for c := range s.cg() {
		dc := dx[c*s.H*s.W : (c+1)*s.H*s.W]
		for ki := range s.KH {
			for kj := range s.KW {
				col2imRow(s, dc, cols[row*L:(row+1)*L], ki, kj)
				row++
			}
		}
	}
}

// col2imRow adds the row (ki, kj) src [oh*ow] into one channel plane's
// gradient dc [h, w].
func col2imRow[T float](s *Conv2dShape, dc, src []T, ki, kj int) {
	ix0 := kj*s.DilationW - s.PadLeft
	lo, hi := validRange(ix0, s.StrideW, s.W, s.OW)
	if lo >= hi {
		return
	}
	for oy := range s.OH {
		iy := oy*s.StrideH - s.PadTop + ki*s.DilationH
		if iy < 0 || iy >= s.H {
			continue
		}
		r := src[oy*s.OW : (oy+1)*s.OW]
		dr := dc[iy*s.W : (iy+1)*s.W]
		if s.StrideW == 1 {
			d := dr[lo+ix0 : hi+ix0]
			for i, v := range r[lo:hi] {
				d[i] += v
			}
		} else {
			for ox := lo; ox < hi; ox++ {
				dr[ox*s.StrideW+ix0] += r[ox]
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

// cpuIm2col and cpuCol2im are the table's Im2col and Col2im over the s.N
// samples: row (channel, ki, kj), column (sample, oy, ox).
func cpuIm2col(cols, x *Tensor, s *Conv2dShape) {
	if x.dtype == Float64 {
		im2colBatch(s, f64s(cols), f64s(x))
	} else {
		im2colBatch(s, f32s(cols), f32s(x))
	}
}

func im2colBatch[T float](s *Conv2dShape, cols, x []T) {
	L, hw, nl := s.l(), s.H*s.W, s.N*s.l()
	for c := range s.C {
		for ki := range s.KH {
			for kj := range s.KW {
				row := cols[((c*s.KH+ki)*s.KW+kj)*nl:][:nl]
				for n := range s.N {
					im2colRow(s, row[n*L:(n+1)*L], x[(n*s.C+c)*hw:(n*s.C+c+1)*hw], ki, kj)
				}
			}
		}
	}
}

func cpuCol2im(dx, cols *Tensor, s *Conv2dShape) {
	if dx.dtype == Float64 {
		col2imBatch(s, f64s(dx), f64s(cols))
	} else {
		col2imBatch(s, f32s(dx), f32s(cols))
	}
}

func col2imBatch[T float](s *Conv2dShape, dx, cols []T) {
	clear(dx)
	L, hw, nl := s.l(), s.H*s.W, s.N*s.l()
	for c := range s.C {
		for ki := range s.KH {
			for kj := range s.KW {
				row := cols[((c*s.KH+ki)*s.KW+kj)*nl:][:nl]
				for n := range s.N {
					col2imRow(s, dx[(n*s.C+c)*hw:(n*s.C+c+1)*hw], row[n*L:(n+1)*L], ki, kj)
				}
			}
		}
	}
}

// cpuSwap01 is dst[b, a, k] = src[a, b, k] for src [na, nb, nk].
func cpuSwap01(dst, src *Tensor, na, nb, nk int) {
	if src.dtype == Float64 {
		swap01(f64s(dst), f64s(src), na, nb, nk)
	} else {
		swap01(f32s(dst), f32s(src), na, nb, nk)
	}
}

func swap01[T float](dst, src []T, na, nb, nk int) {
	for a := range na {
		for b := range nb {
			copy(dst[(b*na+a)*nk:(b*na+a+1)*nk], src[(a*nb+b)*nk:(a*nb+b+1)*nk])
		}
	}
}

// ---- channel bias.

func cpuAddChannelBias(y, bias *Tensor, n, c, l int) {
	if y.dtype == Float64 {
		addChannelBias(f64s(y), f64s(bias), n, c, l)
	} else {
		addChannelBias(f32s(y), f32s(bias), n, c, l)
	}
}

func addChannelBias[T float](y, bias []T, n, c, l int) {
	for s := range n {
		for ch, b := range bias[:c] {
			row := y[(s*c+ch)*l : (s*c+ch+1)*l]
			for i := range row {
				row[i] += b
			}
		}
	}
}

func cpuSumChannels(out, x *Tensor, n, c, l int, acc bool) {
	if !acc {
		clearTensor(out)
	}
	if x.dtype == Float64 {
		sumChannels(f64s(out), f64s(x), n, c, l)
	} else {
		sumChannels(f32s(out), f32s(x), n, c, l)
	}
}

// sumChannels adds the per-channel sums of x [n, c, l] into out [c].
func sumChannels[T float](out, x []T, n, c, l int) {
	for s := range n {
		for ch := range c {
			var sum T
			for _, v := range x[(s*c+ch)*l : (s*c+ch+1)*l] {
				sum += v
			}
			out[ch] += sum
		}
	}
}

// ---- max pooling.

// window2x2 reports the common 2x2, stride-2, unpadded window, whose
// windows are disjoint and which the fast paths handle.
func (s *Pool2dShape) window2x2() bool {
	return s.KH == 2 && s.KW == 2 && s.StrideH == 2 && s.StrideW == 2 && s.PadH == 0 && s.PadW == 0
}

// cpuMaxPool2d is the host's MaxPool2d: idx is an Int64 tensor, as
// torch's max_pool2d_with_indices returns.
func cpuMaxPool2d(y, idx, x *Tensor, s *Pool2dShape) {
	i64 := idx.I64()[:idx.Numel()]
	if x.dtype == Float64 {
		maxPoolFwd(s, f64s(y), f64s(x), i64)
	} else {
		maxPoolFwd(s, f32s(y), f32s(x), i64)
	}
}

func maxPoolFwd[T float](s *Pool2dShape, y, x []T, idx []int64) {
	hw, ohw := s.H*s.W, s.OH*s.OW
	window2x2 := s.window2x2()
	if y32, ok := any(y).([]float32); ok && window2x2 {
		MaxPool2x2F32(y32, idx, any(x).([]float32), s.N*s.C, s.H, s.W)
		return
	}
	for pl := range s.N * s.C {
		xp, yp, ip := x[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw], idx[pl*ohw:(pl+1)*ohw]
		if window2x2 {
			maxPool2x2(s, yp, xp, ip)
			continue
		}
		for oy := range s.OH {
			y0 := oy*s.StrideH - s.PadH
			ylo, yhi := max(y0, 0), min(y0+s.KH, s.H)
			for ox := range s.OW {
				x0 := ox*s.StrideW - s.PadW
				xlo, xhi := max(x0, 0), min(x0+s.KW, s.W)
				best, bi := xp[ylo*s.W+xlo], ylo*s.W+xlo
				for iy := ylo; iy < yhi; iy++ {
					for ix := xlo; ix < xhi; ix++ {
						if v := xp[iy*s.W+ix]; v > best || v != v {
							best, bi = v, iy*s.W+ix
						}
					}
				}
				yp[oy*s.OW+ox], ip[oy*s.OW+ox] = best, int64(bi)
			}
		}
	}
}

// maxPool2x2 is the common 2x2, stride 2, unpadded window (float64; float32
// runs MaxPool2x2F32), with the general loop's rule: the first maximum,
// or the last NaN.
func maxPool2x2[T float](s *Pool2dShape, y, x []T, idx []int64) {
	w := s.W
	for oy := range s.OH {
		r0, r1 := x[2*oy*w:(2*oy+1)*w], x[(2*oy+1)*w:(2*oy+2)*w]
		yr, ir := y[oy*s.OW:(oy+1)*s.OW], idx[oy*s.OW:(oy+1)*s.OW]
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

// cpuMaxPool2dBackward overwrites dx: the 2x2 window's kernels write
// every element (disjoint windows), the general loop scatters into zeros.
func cpuMaxPool2dBackward(dx, dy, idx *Tensor, s *Pool2dShape) {
	i64 := idx.I64()[:idx.Numel()]
	switch {
	case s.window2x2() && dy.dtype == Float64:
		maxPool2x2Bwd(s, f64s(dx), f64s(dy), i64)
	case s.window2x2():
		MaxPool2x2BackwardF32(f32s(dx), f32s(dy), i64, s.N*s.C, s.H, s.W)
	case dy.dtype == Float64:
		clear(f64s(dx))
		maxPoolBwd(s, f64s(dx), f64s(dy), i64)
	default:
		clear(f32s(dx))
		maxPoolBwd(s, f32s(dx), f32s(dy), i64)
	}
}

func maxPoolBwd[T float](s *Pool2dShape, gx, gy []T, idx []int64) {
	hw, ohw := s.H*s.W, s.OH*s.OW
	for pl := range s.N * s.C {
		gp := gx[pl*hw : (pl+1)*hw]
		for j, v := range gy[pl*ohw : (pl+1)*ohw] {
			gp[idx[pl*ohw+j]] += v
		}
	}
}

// maxPool2x2Bwd is maxPoolBwd for the 2x2, stride-2, unpadded window
// (float64; float32 runs MaxPool2x2BackwardF32), writing all of gx: each
// window's four elements get 0 but the argmax, which gets the output's
// gradient; an odd size's last row or column, in no window, gets 0.
func maxPool2x2Bwd[T float](s *Pool2dShape, gx, gy []T, idx []int64) {
	hw, ohw, w := s.H*s.W, s.OH*s.OW, s.W
	for pl := range s.N * s.C {
		gp, yp, ip := gx[pl*hw:(pl+1)*hw], gy[pl*ohw:(pl+1)*ohw], idx[pl*ohw:(pl+1)*ohw]
		for oy := range s.OH {
			r0, r1 := gp[2*oy*w:(2*oy+1)*w], gp[(2*oy+1)*w:(2*oy+2)*w]
			for ox := range s.OW {
				r0[2*ox], r0[2*ox+1], r1[2*ox], r1[2*ox+1] = 0, 0, 0, 0
			}
			clear(r0[2*s.OW:])
			clear(r1[2*s.OW:])
			for ox, v := range yp[oy*s.OW : (oy+1)*s.OW] {
				gp[ip[oy*s.OW+ox]] = v
			}
		}
		clear(gp[2*s.OH*w:])
	}
}

// ---- average pooling.

// window returns output (oy, ox)'s input rows [ylo, yhi), columns [xlo,
// xhi) and the divisor: avg_pool2d's window (the divisor counting padding
// when incl), or adaptive_avg_pool2d's when adaptive (row i averages
// input rows [floor(i*H/OH), ceil((i+1)*H/OH)), columns likewise).
func (s *Pool2dShape) window(oy, ox int, incl, adaptive bool) (ylo, yhi, xlo, xhi int, div float64) {
	if adaptive {
		ylo, yhi = oy*s.H/s.OH, ((oy+1)*s.H+s.OH-1)/s.OH
		xlo, xhi = ox*s.W/s.OW, ((ox+1)*s.W+s.OW-1)/s.OW
		return ylo, yhi, xlo, xhi, float64((yhi - ylo) * (xhi - xlo))
	}
	y0, x0 := oy*s.StrideH-s.PadH, ox*s.StrideW-s.PadW
	ylo, yhi = max(y0, 0), min(y0+s.KH, s.H)
	xlo, xhi = max(x0, 0), min(x0+s.KW, s.W)
	if incl {
		// The window clipped to the padded input, as torch computes pool_size.
		return ylo, yhi, xlo, xhi, float64((min(y0+s.KH, s.H+s.PadH) - y0) * (min(x0+s.KW, s.W+s.PadW) - x0))
	}
	return ylo, yhi, xlo, xhi, float64((yhi - ylo) * (xhi - xlo))
}

func cpuAvgPool2d(y, x *Tensor, s *Pool2dShape, incl, adaptive bool) {
	if x.dtype == Float64 {
		avgPoolFwd(s, f64s(y), f64s(x), incl, adaptive)
	} else {
		avgPoolFwd(s, f32s(y), f32s(x), incl, adaptive)
	}
}

func avgPoolFwd[T float](s *Pool2dShape, y, x []T, incl, adaptive bool) {
	hw, ohw := s.H*s.W, s.OH*s.OW
	for pl := range s.N * s.C {
		xp, yp := x[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw]
		for oy := range s.OH {
			for ox := range s.OW {
				ylo, yhi, xlo, xhi, div := s.window(oy, ox, incl, adaptive)
				var sum T
				for iy := ylo; iy < yhi; iy++ {
					for _, v := range xp[iy*s.W+xlo : iy*s.W+xhi] {
						sum += v
					}
				}
				yp[oy*s.OW+ox] = T(float64(sum) / div)
			}
		}
	}
}

// cpuAvgPool2dBackward overwrites dx, scattering each output's share of
// its gradient over its window.
func cpuAvgPool2dBackward(dx, dy *Tensor, s *Pool2dShape, incl, adaptive bool) {
	if dy.dtype == Float64 {
		avgPoolBwd(s, f64s(dx), f64s(dy), incl, adaptive)
	} else {
		avgPoolBwd(s, f32s(dx), f32s(dy), incl, adaptive)
	}
}

func avgPoolBwd[T float](s *Pool2dShape, gx, gy []T, incl, adaptive bool) {
	clear(gx)
	hw, ohw := s.H*s.W, s.OH*s.OW
	for pl := range s.N * s.C {
		gp, yp := gx[pl*hw:(pl+1)*hw], gy[pl*ohw:(pl+1)*ohw]
		for oy := range s.OH {
			for ox := range s.OW {
				ylo, yhi, xlo, xhi, div := s.window(oy, ox, incl, adaptive)
				v := T(float64(yp[oy*s.OW+ox]) / div)
				for iy := ylo; iy < yhi; iy++ {
					row := gp[iy*s.W+xlo : iy*s.W+xhi]
					for i := range row {
						row[i] += v
					}
				}
			}
		}
	}
}

// ---- dropout.

// cpuDropoutFromRNG is torch's CPU dropout, bit for bit: torch computes
// noise = bernoulli_(1-p) (one float64 uniform per element, kept when it
// is below 1-p), noise /= (1-p) in the tensor's dtype, and returns x·noise;
// so the same generator state gives the same zeros and the same scaled
// values. RNG.DropoutF32 and DropoutF64 write every element of y and mask.
func cpuDropoutFromRNG(y, mask, x *Tensor, p float64, rng *RNG) {
	keep := 1 - p
	if x.dtype == Float64 {
		rng.DropoutF64(f64s(y), f64s(mask), f64s(x), keep, 1/keep)
		return
	}
	// torch divides the float32 noise by the float32 scalar 1-p.
	rng.DropoutF32(f32s(y), f32s(mask), f32s(x), keep, 1/float32(keep))
}
