package devtensor

import (
	"fmt"
	"runtime"

	"github.com/goddp/goddp/tensor"
)

// Helpers of the convolutional-network entries of the op table (kernels.go).

// convArgs are im2col_f32's and col2im_f32's geometry arguments. The
// bottom and right padding are implied by OH and OW.
func convArgs(s *tensor.Conv2dShape) []uint64 {
	return []uint64{i64(s.N), i64(s.C), i64(s.H), i64(s.W), i64(s.KH), i64(s.KW), i64(s.StrideH), i64(s.StrideW),
		i64(s.PadTop), i64(s.PadLeft), i64(s.DilationH), i64(s.DilationW), i64(s.OH), i64(s.OW)}
}

// poolArgs are the pooling kernels' geometry arguments.
func poolArgs(s *tensor.Pool2dShape) []uint64 {
	return []uint64{i64(s.N * s.C), i64(s.H), i64(s.W), i64(s.KH), i64(s.KW), i64(s.StrideH), i64(s.StrideW),
		i64(s.PadH), i64(s.PadW), i64(s.OH), i64(s.OW)}
}

// stridedCopy copies the view src into the contiguous dst; the view's sizes
// and strides travel as int64 in a device buffer.
func (d *Device) stridedCopy(dst, src *tensor.Tensor) {
	n := same("contiguous", dst, src)
	if n == 0 {
		return
	}
	s, off := src.Storage()
	st, ok := s.(*storage)
	if !ok || st.dev != d {
		panic(fmt.Sprintf("devtensor: contiguous: operand on %v, not %v", src.Device(), d))
	}
	shape, strides := src.Shape(), src.Strides()
	meta := make([]int64, 0, 2*len(shape))
	for _, v := range shape {
		meta = append(meta, int64(v))
	}
	for _, v := range strides {
		meta = append(meta, int64(v))
	}
	mt := tensor.MustZerosOn(d, max(2*len(meta), 1))
	mm, mo := d.mem("contiguous", mt)
	if len(meta) > 0 {
		d.l.CopyHtoD(mm, mo, hostBytes(meta))
	}
	d.launch("strided_copy_f32", grid(n), d.ptr("contiguous", dst), st.mem.Ptr()+4*uint64(off), i64(n), i64(len(shape)),
		d.ptr("contiguous", mt))
	runtime.KeepAlive(st)
}
