package tensor

import (
	"fmt"
	"time"
)

// Conv2dShape is one 2-d convolution over row-major NCHW float32 arrays, in
// torch's terms: input [N, C, H, W], weight [O, C/Groups, KH, KW], bias [O],
// output [N, O, OH, OW]. Padding is given per side (torch's padding="same"
// can pad one more at the bottom/right than at the top/left); dilation 1
// means none.
type Conv2dShape struct {
	N, C, H, W                           int
	O, KH, KW                            int
	StrideH, StrideW                     int
	PadTop, PadLeft, PadBottom, PadRight int
	DilationH, DilationW                 int
	Groups                               int
	OH, OW                               int
	// BF16 runs the products with bfloat16 inputs and float32 accumulation
	// (autocast's bf16 convolution); the arrays stay float32.
	BF16 bool
}

// convArg is one array argument's name, length and required length.
type convArg struct {
	name      string
	have, use int
}

func (s *Conv2dShape) check(op string, args ...convArg) {
	if s.N < 1 || s.C < 1 || s.O < 1 || s.Groups < 1 || s.C%s.Groups != 0 || s.O%s.Groups != 0 ||
		s.StrideH < 1 || s.StrideW < 1 || s.DilationH < 1 || s.DilationW < 1 {
		panic(fmt.Sprintf("tensor: %s: invalid shape %+v", op, *s))
	}
	for _, a := range args {
		if a.have != a.use {
			panic(fmt.Sprintf("tensor: %s: %s has %d elements, shape %+v needs %d", op, a.name, a.have, *s, a.use))
		}
	}
}

// biasArg checks an optional bias or bias gradient (nil: none).
func biasArg(name string, b []float32, o int) convArg {
	if b == nil {
		return convArg{name, 0, 0}
	}
	return convArg{name, len(b), o}
}

func (s *Conv2dShape) sizes() (x, w, y int) {
	return s.N * s.C * s.H * s.W, s.O * (s.C / s.Groups) * s.KH * s.KW, s.N * s.O * s.OH * s.OW
}

// Conv2dForward computes y = conv2d(x, w) + b (b nil: no bias) with the
// engine's convolution kernels (oneDNN's), on the calling thread alone, and
// reports true. It reports false, writing nothing, where the engine has
// none for this shape (the pure-Go and -tags nodnnl builds have none at
// all): the caller then computes it another way (autograd's im2col).
func Conv2dForward(s *Conv2dShape, y, x, w, b []float32) bool {
	return conv2dForward("Conv2dForward", "fwd", engineConvFwd, s, y, x, w, b)
}

// conv2dForward checks a forward's arguments and runs it on kernel,
// recording it as pass in a KernelProfile.
func conv2dForward(op, pass string, kernel func(s *Conv2dShape, y, x, w, b []float32) bool, s *Conv2dShape, y, x, w, b []float32) bool {
	nx, nw, ny := s.sizes()
	s.check(op, convArg{"x", len(x), nx}, convArg{"w", len(w), nw}, convArg{"y", len(y), ny}, biasArg("b", b, s.O))
	schedHintOn(s.flops(), 1)
	if p := recorder(); p != nil {
		t0 := time.Now()
		ok := kernel(s, y, x, w, b)
		if ok {
			profileConv(p, pass, s, t0)
		}
		return ok
	}
	return kernel(s, y, x, w, b)
}

// Conv2dForwardReLU is Conv2dForward followed by y = max(0, y), the ReLU
// running inside the convolution's kernel (a oneDNN post-op) instead of as
// a pass of its own over y. It reports false, writing nothing, where the
// engine has no such kernel; the caller then runs the two ops.
func Conv2dForwardReLU(s *Conv2dShape, y, x, w, b []float32) bool {
	return conv2dForward("Conv2dForwardReLU", "fwd_relu", engineConvFwdReLU, s, y, x, w, b)
}

// Conv2dBackwardData overwrites dx with the gradient of conv2d(x, w) with
// respect to x, for the output gradient dy, as Conv2dForward does.
func Conv2dBackwardData(s *Conv2dShape, dx, w, dy []float32) bool {
	nx, nw, ny := s.sizes()
	s.check("Conv2dBackwardData", convArg{"dx", len(dx), nx}, convArg{"w", len(w), nw}, convArg{"dy", len(dy), ny})
	schedHintOn(s.flops(), 1)
	if p := recorder(); p != nil {
		t0 := time.Now()
		ok := engineConvBwdData(s, dx, w, dy)
		if ok {
			profileConv(p, "bwd_data", s, t0)
		}
		return ok
	}
	return engineConvBwdData(s, dx, w, dy)
}

// Conv2dBackwardWeights overwrites dw (and db, the bias gradient, unless
// nil) with the gradients of conv2d(x, w) + b for the output gradient dy,
// summed over the N samples, as Conv2dForward does.
func Conv2dBackwardWeights(s *Conv2dShape, dw, db, x, dy []float32) bool {
	nx, nw, ny := s.sizes()
	s.check("Conv2dBackwardWeights", convArg{"x", len(x), nx}, convArg{"dw", len(dw), nw}, convArg{"dy", len(dy), ny},
		biasArg("db", db, s.O))
	schedHintOn(s.flops(), 1)
	if p := recorder(); p != nil {
		t0 := time.Now()
		ok := engineConvBwdWeights(s, dw, db, x, dy)
		if ok {
			profileConv(p, "bwd_weights", s, t0)
		}
		return ok
	}
	return engineConvBwdWeights(s, dw, db, x, dy)
}

// Conv2dKernel names the implementation the engine would run for shape s
// (op "fwd", "bwd_data" or "bwd_weights"), such as oneDNN's
// "jit:avx512_core", or "" where it has none. Tests and benchmarks use it.
func Conv2dKernel(s *Conv2dShape, op string, bias bool) string {
	kind := map[string]int{"fwd": 0, "bwd_data": 1, "bwd_weights": 2}
	k, ok := kind[op]
	if !ok {
		panic(fmt.Sprintf("tensor: Conv2dKernel: unknown op %q (fwd, bwd_data or bwd_weights)", op))
	}
	return engineConvKernel(s, k, bias)
}

// flops is the multiply-adds of one pass, times 2.
func (s *Conv2dShape) flops() float64 {
	return 2 * float64(s.N) * float64(s.O) * float64(s.OH*s.OW) * float64(s.C/s.Groups*s.KH*s.KW)
}
