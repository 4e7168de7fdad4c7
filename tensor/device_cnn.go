package tensor

import "fmt"

// The device paths of the convolutional-network ops whose CPU code lives in
// goddp/autograd (Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Dropout). Each function here runs its
// op on the device its operands live on and reports, by a nil result or a
// false, that they all live on the host: the caller then runs its CPU
// code. So the op asks where nothing lives; this package does.

// Pool2dShape is one 2-d pooling over [N, C, H, W] into [N, C, OH, OW]
// with a KH×KW window, stride and symmetric padding (torch's kernel_size,
// stride, padding).
type Pool2dShape struct {
	N, C, H, W       int
	KH, KW           int
	StrideH, StrideW int
	PadH, PadW       int
	OH, OW           int
}

// convColsMax bounds a device convolution's im2col matrix, in elements: the
// samples go through in chunks whose matrix fits (at least one sample a
// chunk), so an evaluation batch does not allocate a matrix of gigabytes.
const convColsMax = 1 << 24

// convChunk returns how many samples a chunk holds for s.
func convChunk(s *Conv2dShape) int {
	per := s.C * s.KH * s.KW * s.OH * s.OW
	return max(1, min(s.N, convColsMax/max(per, 1)))
}

// flat is the contiguous t's elements [off, off+n) as a 1-d view.
func flat(t *Tensor, off, n int) *Tensor { return Narrow(t.Reshape(t.Numel()), 0, off, n) }

// Conv2dDevice returns conv2d(x, w) + b (b nil: no bias) for contiguous
// x [N, C, H, W], w [O, C/Groups, KH, KW] and b [O] on their device, or nil
// when they all live on the host. The device's convolution library runs
// it when it takes s (Kernels.Conv2dForward: cuDNN on goddp/cuda, in
// bfloat16 under autocast); else, per chunk of samples: im2col into
// [C*KH*KW, n*OH*OW], one GEMM per group (weight rows times that group's
// block of rows) into [O, n, OH*OW], then a transpose into NCHW. The bias
// is added at the end. With s.BF16 the GEMMs are the device's GemmBF16.
func Conv2dDevice(x, w, b *Tensor, s *Conv2dShape) *Tensor {
	if !onDevice(x, w, b) {
		return nil
	}
	k := kernelsFor("Conv2d", x, w, b)
	NeedKernel(k.Gemm != nil && k.Im2col != nil && k.Swap01 != nil && k.AddChannelBias != nil, "Conv2d", x.Device())
	gemm := deviceGemm(k, convPrecision(s), "Conv2d", x.Device())
	nx, nw, ny := s.sizes()
	s.check("Conv2d", convArg{"x", x.Numel(), nx}, convArg{"w", w.Numel(), nw}, convArg{"y", ny, ny})
	if b != nil && b.Numel() != s.O {
		panic(fmt.Sprintf("tensor: Conv2d: bias %v for %d output channels", b.shape, s.O))
	}
	if !x.IsContiguous() || !w.IsContiguous() {
		panic(fmt.Sprintf("tensor: Conv2d: input %v and weight %v must be contiguous", x.shape, w.shape))
	}
	y := MustEmptyOn(x.Device(), s.N, s.O, s.OH, s.OW) // the library or Swap01 writes it whole
	L, G := s.OH*s.OW, s.Groups
	if k.Conv2dForward != nil && k.Conv2dForward(y, x, w, s, 0) {
		if b != nil {
			k.AddChannelBias(y, b, s.N, s.O, L)
		}
		return y
	}
	K, og := s.C/G*s.KH*s.KW, s.O/G
	chunk := convChunk(s)
	cols := MustEmptyOn(x.Device(), G*K*chunk*L) // Im2col and the GEMMs (beta 0) write what is read
	yt := MustEmptyOn(x.Device(), s.O*chunk*L)
	for lo := 0; lo < s.N; lo += chunk {
		n := min(chunk, s.N-lo)
		cs := *s
		cs.N = n
		nl := n * L
		c := flat(cols, 0, G*K*nl)
		k.Im2col(c, flat(x, lo*s.C*s.H*s.W, n*s.C*s.H*s.W), &cs)
		t := flat(yt, 0, s.O*nl)
		for g := range G {
			gemm(false, false, og, nl, K, 1, flat(w, g*og*K, og*K), K, flat(c, g*K*nl, K*nl), nl,
				0, flat(t, g*og*nl, og*nl), nl)
		}
		k.Swap01(flat(y, lo*s.O*L, n*s.O*L), t, s.O, n, L)
	}
	ReleaseScratch(cols)
	ReleaseScratch(yt)
	if b != nil {
		k.AddChannelBias(y, b, s.N, s.O, L)
	}
	return y
}

// Conv2dBackwardDevice computes Conv2d's gradients from gy [N, O, OH, OW]
// and the forward's contiguous x and w on their device, and reports false,
// doing nothing, when they all live on the host. need says which of dx,
// dw, db to compute; into[i], when not nil, is a buffer the gradient is
// added to (a Grad accumulating in place), else grads[i] is a fresh one.
// dx and dw come from the device's convolution library when it takes s
// (Kernels.Conv2dBackwardData and Conv2dBackwardFilter, accumulating with
// beta 1; in bfloat16 under autocast); else dW = gy·colsᵀ per group as one
// GEMM over a chunk's samples,
// accumulated over chunks, and dx is col2im (gathered) of Wᵀ·gy. db is the
// channel sums of gy.
func Conv2dBackwardDevice(gy, x, w *Tensor, need [3]bool, into [3]*Tensor, s *Conv2dShape) (grads [3]*Tensor, ok bool) {
	if !onDevice(gy, x, w, into[0], into[1], into[2]) {
		return grads, false
	}
	k := kernelsFor("Conv2dBackward", gy, x, w, into[0], into[1], into[2])
	NeedKernel(k.Gemm != nil && k.Im2col != nil && k.Col2im != nil && k.Swap01 != nil && k.SumChannels != nil,
		"Conv2dBackward", gy.Device())
	gemm := deviceGemm(k, convPrecision(s), "Conv2dBackward", gy.Device())
	nx, nw, ny := s.sizes()
	s.check("Conv2dBackward", convArg{"x", x.Numel(), nx}, convArg{"w", w.Numel(), nw}, convArg{"gy", gy.Numel(), ny})
	gy = gy.Contiguous()
	dev := gy.Device()
	var out [3]*Tensor
	var acc [3]bool
	shapes := [3][]int{{s.N, s.C, s.H, s.W}, w.shape, {s.O}}
	for i := range 3 {
		if !need[i] {
			continue
		}
		if into[i] != nil {
			out[i], acc[i] = into[i], true
			continue
		}
		grads[i] = MustZerosOn(dev, shapes[i]...)
		out[i] = grads[i]
	}
	L, G := s.OH*s.OW, s.Groups
	K, og := s.C/G*s.KH*s.KW, s.O/G
	if out[2] != nil {
		k.SumChannels(out[2], gy, s.N, s.O, L, acc[2])
	}
	// The library's passes first; what it cannot run goes through the
	// chunks below.
	beta := func(acc bool) float32 {
		if acc {
			return 1
		}
		return 0
	}
	if out[1] != nil && k.Conv2dBackwardFilter != nil && k.Conv2dBackwardFilter(out[1], x, gy, s, beta(acc[1])) {
		out[1] = nil
	}
	if out[0] != nil && k.Conv2dBackwardData != nil && k.Conv2dBackwardData(out[0], gy, w, s, beta(acc[0])) {
		out[0] = nil
	}
	if out[0] == nil && out[1] == nil {
		return grads, true
	}
	chunk := convChunk(s)
	cols := MustZerosOn(dev, G*K*chunk*L)
	gt := MustZerosOn(dev, s.O*chunk*L)
	for lo := 0; lo < s.N; lo += chunk {
		n := min(chunk, s.N-lo)
		cs := *s
		cs.N = n
		nl := n * L
		c, t := flat(cols, 0, G*K*nl), flat(gt, 0, s.O*nl)
		k.Swap01(t, flat(gy, lo*s.O*L, n*s.O*L), n, s.O, L)
		if dw := out[1]; dw != nil {
			k.Im2col(c, flat(x, lo*s.C*s.H*s.W, n*s.C*s.H*s.W), &cs)
			var beta float32
			if acc[1] || lo > 0 {
				beta = 1
			}
			for g := range G {
				gemm(false, true, og, K, nl, 1, flat(t, g*og*nl, og*nl), nl, flat(c, g*K*nl, K*nl), nl,
					beta, flat(dw, g*og*K, og*K), K)
			}
		}
		if dx := out[0]; dx != nil {
			// c is free again: the dW GEMMs before it in the stream read it.
			for g := range G {
				gemm(true, false, K, nl, og, 1, flat(w, g*og*K, og*K), K, flat(t, g*og*nl, og*nl), nl,
					0, flat(c, g*K*nl, K*nl), nl)
			}
			dxc := flat(dx, lo*s.C*s.H*s.W, n*s.C*s.H*s.W)
			if !acc[0] {
				k.Col2im(dxc, c, &cs)
				continue
			}
			tmp := MustZerosOn(dev, dxc.Numel())
			k.Col2im(tmp, c, &cs)
			NeedKernel(k.Axpy != nil, "Conv2dBackward", dev)
			k.Axpy(dxc, 1, tmp)
			ReleaseScratch(tmp)
		}
	}
	ReleaseScratch(cols)
	ReleaseScratch(gt)
	return grads, true
}

// MaxPool2dDevice returns max_pool2d of the contiguous x [N, C, H, W] on its
// device and the argmax of each window (int32 offsets in its plane, held in
// a float32 tensor for MaxPool2dBackwardDevice), or nils when x lives on
// the host.
func MaxPool2dDevice(x *Tensor, s *Pool2dShape) (y, idx *Tensor) {
	if !onDevice(x) {
		return nil, nil
	}
	k := kernelsFor("MaxPool2d", x)
	NeedKernel(k.MaxPool2d != nil, "MaxPool2d", x.Device())
	if x.Numel() != s.N*s.C*s.H*s.W || !x.IsContiguous() {
		panic(fmt.Sprintf("tensor: MaxPool2d: input %v (contiguous %v) for %+v", x.shape, x.IsContiguous(), *s))
	}
	y = MustEmptyOn(x.Device(), s.N, s.C, s.OH, s.OW)
	idx = MustEmptyOn(x.Device(), s.N, s.C, s.OH, s.OW)
	k.MaxPool2d(y, idx, x, s)
	return y, idx
}

// MaxPool2dBackwardDevice returns max_pool2d's input gradient from gy and
// MaxPool2dDevice's idx on their device, or nil when gy lives on the host.
func MaxPool2dBackwardDevice(gy, idx *Tensor, s *Pool2dShape) *Tensor {
	if !onDevice(gy, idx) {
		return nil
	}
	k := kernelsFor("MaxPool2dBackward", gy, idx)
	NeedKernel(k.MaxPool2dBackward != nil, "MaxPool2dBackward", gy.Device())
	if idx == nil || gy.Numel() != s.N*s.C*s.OH*s.OW {
		panic(fmt.Sprintf("tensor: MaxPool2dBackward: gradient %v for %+v (indices kept: %v)", gy.shape, *s, idx != nil))
	}
	dx := MustEmptyOn(gy.Device(), s.N, s.C, s.H, s.W) // gathered: every element written
	k.MaxPool2dBackward(dx, gy.Contiguous(), idx, s)
	return dx
}

// DropoutDevice returns inverted dropout of x on its device and the seed of
// its mask, drawn from rng (one draw a call), or nil when x lives on the
// host, where rng is not touched. The mask is the device's hash of (seed,
// element index): every device running goddp/cuda/kernels draws the same
// mask from the same seed, but not the CPU op's, which draws one number
// per element from rng as torch's CPU kernel does.
func DropoutDevice(x *Tensor, p float64, rng *RNG) (*Tensor, uint64) {
	if !onDevice(x) {
		return nil, 0
	}
	seed := rng.Uint64()
	y := MustEmptyOn(x.Device(), x.shape...)
	DropoutMaskDevice(y, x.Contiguous(), p, seed)
	return y, seed
}

// DropoutMaskDevice sets dst = src times the mask DropoutDevice drew from
// seed (dst may be src; both contiguous, of one size) and reports true, or
// reports false, doing nothing, when they live on the host. It is
// dropout's backward pass.
func DropoutMaskDevice(dst, src *Tensor, p float64, seed uint64) bool {
	if !onDevice(dst, src) {
		return false
	}
	k := kernelsFor("Dropout", dst, src)
	NeedKernel(k.Dropout != nil, "Dropout", dst.Device())
	if !dst.IsContiguous() || !src.IsContiguous() || dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("tensor: Dropout: %v into %v: operands must be contiguous and of one size", src.shape, dst.shape))
	}
	k.Dropout(dst, src, p, seed)
	return true
}

// AvgPool2dDevice returns avg_pool2d (adaptive_avg_pool2d when adaptive)
// of the contiguous x [N, C, H, W] on its device, or nil when x lives on
// the host.
func AvgPool2dDevice(x *Tensor, s *Pool2dShape, countIncludePad, adaptive bool) *Tensor {
	if !onDevice(x) {
		return nil
	}
	k := kernelsFor("AvgPool2d", x)
	NeedKernel(k.AvgPool2d != nil, "AvgPool2d", x.Device())
	if x.Numel() != s.N*s.C*s.H*s.W || !x.IsContiguous() {
		panic(fmt.Sprintf("tensor: AvgPool2d: input %v (contiguous %v) for %+v", x.shape, x.IsContiguous(), *s))
	}
	y := MustEmptyOn(x.Device(), s.N, s.C, s.OH, s.OW)
	k.AvgPool2d(y, x, s, countIncludePad, adaptive)
	return y
}

// AvgPool2dBackwardDevice returns AvgPool2dDevice's input gradient from gy
// on its device, or nil when gy lives on the host.
func AvgPool2dBackwardDevice(gy *Tensor, s *Pool2dShape, countIncludePad, adaptive bool) *Tensor {
	if !onDevice(gy) {
		return nil
	}
	k := kernelsFor("AvgPool2dBackward", gy)
	NeedKernel(k.AvgPool2dBackward != nil, "AvgPool2dBackward", gy.Device())
	if gy.Numel() != s.N*s.C*s.OH*s.OW {
		panic(fmt.Sprintf("tensor: AvgPool2dBackward: gradient %v for %+v", gy.shape, *s))
	}
	dx := MustEmptyOn(gy.Device(), s.N, s.C, s.H, s.W) // gathered
	k.AvgPool2dBackward(dx, gy.Contiguous(), s, countIncludePad, adaptive)
	return dx
}

// deviceContiguous is Contiguous on a device: a strided copy.
func (t *Tensor) deviceContiguous() *Tensor {
	k := kernelsFor("contiguous", t)
	NeedKernel(k.StridedCopy != nil, "contiguous", t.Device())
	out := MustEmptyOn(t.Device(), t.shape...)
	k.StridedCopy(out, t)
	return out
}
