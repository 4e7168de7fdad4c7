//go:build cgo && !noblas && !nodnnl

package tensor

/*
#include "engine.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

func cConv(s *Conv2dShape) C.goddp_conv_t {
	return C.goddp_conv_t{n: C.int64_t(s.N), c: C.int64_t(s.C), h: C.int64_t(s.H), w: C.int64_t(s.W),
		o: C.int64_t(s.O), kh: C.int64_t(s.KH), kw: C.int64_t(s.KW), sh: C.int64_t(s.StrideH), sw: C.int64_t(s.StrideW),
		pt: C.int64_t(s.PadTop), pl: C.int64_t(s.PadLeft), pb: C.int64_t(s.PadBottom), pr: C.int64_t(s.PadRight),
		dh: C.int64_t(s.DilationH), dw: C.int64_t(s.DilationW), groups: C.int64_t(s.Groups),
		oh: C.int64_t(s.OH), ow: C.int64_t(s.OW), bf16: C.int64_t(b2i(s.BF16))}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func fptr(s []float32) *C.float {
	if s == nil {
		return nil
	}
	return (*C.float)(unsafe.Pointer(unsafe.SliceData(s)))
}

// convResult turns a kernel status into the Conv2d* result: 0 ran, 1 no
// implementation for the shape, anything else a failure inside oneDNN.
func convResult(op string, s *Conv2dShape, rc C.int) bool {
	switch rc {
	case 0:
		return true
	case 1:
		return false
	}
	panic(fmt.Sprintf("tensor: %s: oneDNN failed on shape %+v (status %d)", op, *s, int(rc)))
}

func engineConvFwd(s *Conv2dShape, y, x, w, b []float32) bool {
	g := cConv(s)
	return convResult("Conv2dForward", s, C.goddp_conv_fwd(&g, fptr(x), fptr(w), fptr(b), fptr(y)))
}

func engineConvFwdReLU(s *Conv2dShape, y, x, w, b []float32) bool {
	g := cConv(s)
	return convResult("Conv2dForwardReLU", s, C.goddp_conv_fwd_relu(&g, fptr(x), fptr(w), fptr(b), fptr(y)))
}

func engineConvBwdData(s *Conv2dShape, dx, w, dy []float32) bool {
	g := cConv(s)
	return convResult("Conv2dBackwardData", s, C.goddp_conv_bwd_data(&g, fptr(w), fptr(dy), fptr(dx)))
}

func engineConvBwdWeights(s *Conv2dShape, dw, db, x, dy []float32) bool {
	g := cConv(s)
	return convResult("Conv2dBackwardWeights", s, C.goddp_conv_bwd_weights(&g, fptr(x), fptr(dy), fptr(dw), fptr(db)))
}

func engineConvKernel(s *Conv2dShape, kind int, bias bool) string {
	g := cConv(s)
	return C.GoString(C.goddp_conv_impl(C.int(kind), cbool(bias), &g))
}
