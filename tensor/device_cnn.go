package tensor

import "fmt"

// The convolutional-network ops (Conv2d, MaxPool2d, AvgPool2d and
// AdaptiveAvgPool2d, Dropout) on every device, the CPU's table included
// (cpu_cnn.go): each looks up its operands' table and calls the entries,
// so goddp/autograd's ops are written once.

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

// Conv2d returns conv2d(x, w) + b (b nil: no bias) for x [N, C, H, W],
// w [O, C/Groups, KH, KW] and b [O] (x contiguous) on their device, by
// its table: the Conv2dForward entry where it takes s (the CPU's takes
// every shape: oneDNN, else im2col and GEMM per sample; cuDNN on
// goddp/cuda, in bfloat16 under autocast); else, per chunk of samples:
// Im2col into [C*KH*KW, n*OH*OW], one GEMM per group (weight rows times
// that group's block of rows) into [O, n, OH*OW], then Swap01 into NCHW,
// and AddChannelBias. With s.BF16 the GEMMs are the device's GemmBF16.
func Conv2d(x, w, b *Tensor, s *Conv2dShape) *Tensor { return conv2dOn("Conv2d", x, w, b, s, false) }

// Conv2dReLU is max(Conv2d(x, w, b, s), 0): the ReLU inside the
// convolution where the device's Conv2dForward fuses it (the CPU's
// oneDNN post-op, float32), else the ReLU entry over the output in place.
func Conv2dReLU(x, w, b *Tensor, s *Conv2dShape) *Tensor {
	return conv2dOn("Conv2dReLU", x, w, b, s, true)
}

func conv2dOn(op string, x, w, b *Tensor, s *Conv2dShape, relu bool) *Tensor {
	k := table(op, x, w, b)
	nx, nw, ny := s.sizes()
	s.check(op, convArg{"x", x.Numel(), nx}, convArg{"w", w.Numel(), nw}, convArg{"y", ny, ny})
	if b != nil && b.Numel() != s.O {
		panic(fmt.Sprintf("tensor: %s: bias %v for %d output channels", op, b.shape, s.O))
	}
	if !x.IsContiguous() {
		panic(fmt.Sprintf("tensor: %s: input %v must be contiguous", op, x.shape))
	}
	w, b = w.Contiguous(), contiguousOrNil(b)
	y := EmptyAs(x, s.N, s.O, s.OH, s.OW) // the entries write it whole
	if relu && k.Conv2dForward != nil && k.Conv2dForward(y, x, w, b, s, true) {
		return y
	}
	if k.Conv2dForward == nil || !k.Conv2dForward(y, x, w, b, s, false) {
		conv2dIm2col(op, k, y, x, w, b, s)
	}
	if relu {
		need(k.ReLU != nil, op, x)
		k.ReLU(y, y)
	}
	return y
}

// conv2dIm2col is Conv2d's forward through Im2col and Gemm, in chunks of
// samples.
func conv2dIm2col(op string, k *Kernels, y, x, w, b *Tensor, s *Conv2dShape) {
	need(k.Im2col != nil && k.Swap01 != nil && (b == nil || k.AddChannelBias != nil), op, x)
	gemm := deviceGemm(k, convPrecision(s), op, x.Device())
	L, G := s.OH*s.OW, s.Groups
	K, og := s.C/G*s.KH*s.KW, s.O/G
	chunk := convChunk(s)
	cols := EmptyAs(x, G*K*chunk*L) // Im2col and the GEMMs (beta 0) write what is read
	yt := EmptyAs(x, s.O*chunk*L)
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
}

// Conv2dBackward computes Conv2d's gradients from gy [N, O, OH, OW] and
// the forward's contiguous x and w on their device. want says which of
// dx, dw, db to compute; into[i], when not nil, is a contiguous buffer the
// gradient is added to (a Grad accumulating in place), else grads[i] is a
// fresh one. The device's Conv2dBackward entry runs what it takes (the
// CPU's: everything, on oneDNN or im2col; cuDNN on goddp/cuda), db with
// dw; the rest goes through SumChannels and, per chunk of samples, dW =
// gy·colsᵀ per group as one GEMM over the chunk, accumulated over chunks,
// and dx as Col2im (gathered) of Wᵀ·gy.
func Conv2dBackward(gy, x, w *Tensor, want [3]bool, into [3]*Tensor, s *Conv2dShape) (grads [3]*Tensor) {
	const op = "Conv2dBackward"
	k := table(op, gy, x, w, into[0], into[1], into[2])
	nx, nw, ny := s.sizes()
	s.check(op, convArg{"x", x.Numel(), nx}, convArg{"w", w.Numel(), nw}, convArg{"gy", gy.Numel(), ny})
	gy, x, w = gy.Contiguous(), x.Contiguous(), w.Contiguous()
	var out [3]*Tensor
	var acc [3]bool
	// The shapes of x, w and b: slices of the operands' own, since a
	// literal here cost the step two allocations.
	shapes := [3][]int{x.shape, w.shape, w.shape[:1]}
	for i := range 3 {
		switch {
		case !want[i]:
		case into[i] != nil:
			if !into[i].IsContiguous() || into[i].Numel() != numel(shapes[i]) {
				panic(fmt.Sprintf("tensor: %s: gradient buffer %v (contiguous %v) for %v", op, into[i].shape, into[i].IsContiguous(), shapes[i]))
			}
			out[i], acc[i] = into[i], true
		case i == 0:
			grads[0] = EmptyAs(gy, shapes[0]...) // every path overwrites a fresh dx
			out[0] = grads[0]
		default:
			grads[i] = ZerosAs(gy, shapes[i]...)
			out[i] = grads[i]
		}
	}
	L := s.OH * s.OW
	// db goes with dw where both are overwritten or both accumulate.
	dbWithDW := out[2] != nil && out[1] != nil && acc[1] == acc[2]
	var okX, okW bool
	if k.Conv2dBackward != nil && (out[0] != nil || out[1] != nil) {
		var db *Tensor
		if dbWithDW {
			db = out[2]
		}
		okX, okW = k.Conv2dBackward(out[0], out[1], db, gy, x, w, s, acc)
	}
	if out[2] != nil && !(dbWithDW && okW) {
		need(k.SumChannels != nil, op, gy)
		k.SumChannels(out[2], gy, s.N, s.O, L, acc[2])
	}
	if okX {
		out[0] = nil
	}
	if okW {
		out[1] = nil
	}
	if out[0] != nil || out[1] != nil {
		conv2dBackwardIm2col(k, gy, x, w, out[0], out[1], acc, s)
	}
	return grads
}

// conv2dBackwardIm2col is Conv2dBackward's dx and dw (each nil when done
// or not wanted) through Im2col, Gemm and Col2im, in chunks of samples.
func conv2dBackwardIm2col(k *Kernels, gy, x, w, dx, dw *Tensor, acc [3]bool, s *Conv2dShape) {
	const op = "Conv2dBackward"
	need(k.Im2col != nil && k.Col2im != nil && k.Swap01 != nil, op, gy)
	gemm := deviceGemm(k, convPrecision(s), op, gy.Device())
	L, G := s.OH*s.OW, s.Groups
	K, og := s.C/G*s.KH*s.KW, s.O/G
	chunk := convChunk(s)
	cols := ZerosAs(gy, G*K*chunk*L)
	gt := ZerosAs(gy, s.O*chunk*L)
	for lo := 0; lo < s.N; lo += chunk {
		n := min(chunk, s.N-lo)
		cs := *s
		cs.N = n
		nl := n * L
		c, t := flat(cols, 0, G*K*nl), flat(gt, 0, s.O*nl)
		k.Swap01(t, flat(gy, lo*s.O*L, n*s.O*L), n, s.O, L)
		if dw != nil {
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
		if dx != nil {
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
			tmp := ZerosAs(gy, dxc.Numel())
			k.Col2im(tmp, c, &cs)
			need(k.Axpy != nil, op, gy)
			k.Axpy(dxc, 1, tmp)
			ReleaseScratch(tmp)
		}
	}
	ReleaseScratch(cols)
	ReleaseScratch(gt)
}

// MaxPool2d returns max_pool2d of x [N, C, H, W] on its device and the
// argmax of each window, as its device's MaxPool2d entry holds it (see
// Kernels.MaxPool2d: int64 offsets in the plane on the host, as torch's
// max_pool2d_with_indices returns; int32 bits in a float32 tensor on a
// device, which holds float32 only), for MaxPool2dBackward.
func MaxPool2d(x *Tensor, s *Pool2dShape) (y, idx *Tensor) {
	k := table("MaxPool2d", x)
	need(k.MaxPool2d != nil, "MaxPool2d", x)
	if x.Numel() != s.N*s.C*s.H*s.W {
		panic(fmt.Sprintf("tensor: MaxPool2d: input %v for %+v", x.shape, *s))
	}
	x = x.Contiguous()
	y = EmptyAs(x, s.N, s.C, s.OH, s.OW) // every output is written
	// From the host cache on the CPU: FreeGraph recycles the block, where a
	// make per step cost the GC a zeroed 3.2 MB for a convnet's first
	// pooling.
	if x.dev == nil {
		idx = newFull(Int64, s.N, s.C, s.OH, s.OW)
	} else {
		idx = EmptyAs(x, s.N, s.C, s.OH, s.OW)
	}
	k.MaxPool2d(y, idx, x, s)
	return y, idx
}

// MaxPool2dBackward returns max_pool2d's input gradient from gy and
// MaxPool2d's idx on their device.
func MaxPool2dBackward(gy, idx *Tensor, s *Pool2dShape) *Tensor {
	k := table("MaxPool2dBackward", gy, idx)
	need(k.MaxPool2dBackward != nil, "MaxPool2dBackward", gy)
	if idx == nil || gy.Numel() != s.N*s.C*s.OH*s.OW || idx.Numel() != gy.Numel() {
		panic(fmt.Sprintf("tensor: MaxPool2dBackward: gradient %v for %+v (indices kept: %v)", gy.shape, *s, idx != nil))
	}
	dx := EmptyAs(gy, s.N, s.C, s.H, s.W) // every element written
	k.MaxPool2dBackward(dx, gy.Contiguous(), idx, s)
	return dx
}

// DropoutState is what Dropout's backward needs: the mask, where the
// device keeps one (the CPU), or the probability and the seed that the
// device regenerates it from.
type DropoutState struct {
	mask *Tensor
	p    float64
	seed uint64
}

// Scratch returns the mask Dropout allocated, which freeing the graph
// recycles, or nil where the device keeps none.
func (s DropoutState) Scratch() *Tensor { return s.mask }

// Dropout returns inverted dropout of x (each element zeroed with
// probability p, the rest scaled by 1/(1-p)) on its device, drawing from
// rng, and what DropoutBackward needs. Where the device's table has
// DropoutFromRNG (the CPU) the mask is drawn from rng's stream as torch's
// CPU kernel draws it, one number per element, and kept; elsewhere one
// seed is drawn from rng and the mask is the device's hash of (seed,
// element index) (Kernels.Dropout): every device running
// goddp/cuda/kernels draws the same mask from the same seed, but not the
// CPU's.
func Dropout(x *Tensor, p float64, rng *RNG) (*Tensor, DropoutState) {
	k := table("Dropout", x)
	x = x.Contiguous()
	y := EmptyAs(x, x.shape...) // written whole
	if k.DropoutFromRNG != nil {
		mask := EmptyAs(x, x.shape...)
		k.DropoutFromRNG(y, mask, x, p, rng)
		return y, DropoutState{mask: mask}
	}
	need(k.Dropout != nil, "Dropout", x)
	seed := rng.Uint64()
	k.Dropout(y, x, p, seed)
	return y, DropoutState{p: p, seed: seed}
}

// DropoutBackward returns gy times Dropout's mask, written over gy when
// inPlace (the caller owns it).
func DropoutBackward(gy *Tensor, st DropoutState, inPlace bool) *Tensor {
	k := table("Dropout backward", gy, st.mask)
	g := gy.Contiguous()
	gx := g
	if !inPlace {
		gx = EmptyAs(g, g.shape...) // written whole
	}
	if st.mask != nil {
		need(k.Mul != nil, "Dropout backward", gy)
		k.Mul(gx, g, st.mask)
		return gx
	}
	need(k.Dropout != nil, "Dropout backward", gy)
	k.Dropout(gx, g, st.p, st.seed)
	return gx
}

// AvgPool2d returns avg_pool2d (adaptive_avg_pool2d when adaptive) of x
// [N, C, H, W] on its device.
func AvgPool2d(x *Tensor, s *Pool2dShape, countIncludePad, adaptive bool) *Tensor {
	k := table("AvgPool2d", x)
	need(k.AvgPool2d != nil, "AvgPool2d", x)
	if x.Numel() != s.N*s.C*s.H*s.W {
		panic(fmt.Sprintf("tensor: AvgPool2d: input %v for %+v", x.shape, *s))
	}
	x = x.Contiguous()
	y := EmptyAs(x, s.N, s.C, s.OH, s.OW) // every output is written
	k.AvgPool2d(y, x, s, countIncludePad, adaptive)
	return y
}

// AvgPool2dBackward returns AvgPool2d's input gradient from gy on its
// device.
func AvgPool2dBackward(gy *Tensor, s *Pool2dShape, countIncludePad, adaptive bool) *Tensor {
	k := table("AvgPool2dBackward", gy)
	need(k.AvgPool2dBackward != nil, "AvgPool2dBackward", gy)
	if gy.Numel() != s.N*s.C*s.OH*s.OW {
		panic(fmt.Sprintf("tensor: AvgPool2dBackward: gradient %v for %+v", gy.shape, *s))
	}
	dx := EmptyAs(gy, s.N, s.C, s.H, s.W) // gathered
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
