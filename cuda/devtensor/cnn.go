package devtensor

import (
	"fmt"
	"runtime"

	"github.com/goddp/goddp/tensor"
)

// Helpers of the convolutional-network entries of the op table (kernels.go).

// ConvPass is one pass of a convolution library's conv2d.
type ConvPass int

const (
	// ConvForward is y = conv2d(x, w) + beta*y: out y, a x, b w.
	ConvForward ConvPass = iota
	// ConvBackwardData is dx = conv2d's input gradient + beta*dx: out dx,
	// a gy, b w.
	ConvBackwardData
	// ConvBackwardFilter is dw = conv2d's weight gradient + beta*dw: out
	// dw, a x, b gy.
	ConvBackwardFilter
)

func (p ConvPass) String() string {
	return [...]string{"forward", "backward data", "backward filter"}[p]
}

// ConvLauncher is a Launcher with a convolution library (goddp/cuda's
// cuDNN): the op table's Conv2dForward and Conv2dBackward go to it, and
// fall back to im2col and GEMM when it declines. The launcher decides per
// call (the library may be missing or turned off) and keeps its own record
// of which engine ran.
type ConvLauncher interface {
	// ConvWorkspace returns the scratch bytes pass of s needs, or an
	// error when the library cannot run it.
	ConvWorkspace(pass ConvPass, s *tensor.Conv2dShape) (int, error)
	// Conv queues pass on contiguous NCHW operands at byte offsets, with
	// ws (wsBytes, from ConvWorkspace) as scratch; an error means nothing
	// was queued. The operands are float32; with s.BF16, a and b hold
	// bfloat16 values (float32 with the low 16 bits zero).
	Conv(pass ConvPass, s *tensor.Conv2dShape, out Mem, outOff int, a Mem, aOff int, b Mem, bOff int, beta float32,
		ws Mem, wsBytes int) error
}

// conv runs pass through the launcher's library, reporting false, having
// queued nothing, when it declines. The workspace comes from the caching
// allocator and goes back to it as soon as the pass is queued: its next
// owner's work is queued on the same compute stream after this pass, so it
// cannot run before the pass is done with it.
//
// With s.BF16 (autocast) the library runs on copies of a and b rounded to
// bfloat16 values (round_bf16_f32, the rounding of GemmBF16 and the CPU)
// held in float32, into the float32 out: bfloat16 products with float32
// sums and a float32 result, the CPU's bf16 convolution. The launcher may
// multiply them on TF32 tensor cores, which hold a bfloat16 value exactly.
func (d *Device) conv(cl ConvLauncher, pass ConvPass, s *tensor.Conv2dShape, out, a, b *tensor.Tensor, beta float32) bool {
	what := "conv2d " + pass.String()
	om, oo := d.mem(what, out)
	am, ao := d.mem(what, a)
	bm, bo := d.mem(what, b)
	bytes, err := cl.ConvWorkspace(pass, s)
	if err != nil {
		return false
	}
	var ws Mem
	if bytes > 0 {
		m, class, _, err := d.cache.AllocFresh(bytes, tensor.CacheStream(0))
		if err != nil {
			return false // no room for the scratch: im2col works in chunks
		}
		defer d.cache.Free(m, class, tensor.CacheStream(0))
		ws = m
	}
	if !s.BF16 {
		return cl.Conv(pass, s, om, oo, am, ao, bm, bo, beta, ws, bytes) == nil
	}
	// The rounded copies go back to the cache once the pass is queued: their
	// next owner's work queues after it on this stream.
	na, nb := a.Numel(), b.Numel()
	a16, b16 := d.scratch(na, 4), d.scratch(nb, 4)
	defer a16.Release()
	defer b16.Release()
	d.launch("round_bf16_f32", grid(na), a16.mem.Ptr(), am.Ptr()+uint64(ao), i64(na))
	d.launch("round_bf16_f32", grid(nb), b16.mem.Ptr(), bm.Ptr()+uint64(bo), i64(nb))
	return cl.Conv(pass, s, om, oo, a16.mem, 0, b16.mem, 0, beta, ws, bytes) == nil
}

// convKernels fills k's convolution-library entries when the launcher has
// a library.
func (d *Device) convKernels(k *tensor.Kernels) {
	cl, ok := d.l.(ConvLauncher)
	if !ok {
		return
	}
	// The library has no fused ReLU here (tensor.Conv2dReLU then runs the
	// ReLU entry); the bias and its gradient are the channel kernels.
	k.Conv2dForward = func(y, x, w, b *tensor.Tensor, s *tensor.Conv2dShape, relu bool) bool {
		if relu || !d.conv(cl, ConvForward, s, y, x, w, 0) {
			return false
		}
		if b != nil {
			k.AddChannelBias(y, b, s.N, s.O, s.OH*s.OW)
		}
		return true
	}
	k.Conv2dBackward = func(dx, dw, db, gy, x, w *tensor.Tensor, s *tensor.Conv2dShape, acc [3]bool) (okX, okW bool) {
		beta := func(acc bool) float32 {
			if acc {
				return 1
			}
			return 0
		}
		if dw != nil && d.conv(cl, ConvBackwardFilter, s, dw, x, gy, beta(acc[1])) {
			okW = true
			if db != nil {
				k.SumChannels(db, gy, s.N, s.O, s.OH*s.OW, acc[2])
			}
		}
		if dx != nil {
			okX = d.conv(cl, ConvBackwardData, s, dx, gy, w, beta(acc[0]))
		}
		return okX, okW
	}
}

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
	st, err := d.own(s)
	if err != nil {
		panic(fmt.Sprintf("devtensor: contiguous: %v", err))
	}
	shape, strides := src.Shape(), src.Strides()
	meta := make([]int64, 0, 2*len(shape))
	for _, v := range shape {
		meta = append(meta, int64(v))
	}
	for _, v := range strides {
		meta = append(meta, int64(v))
	}
	mt := tensor.MustEmptyOn(d, max(2*len(meta), 1)) // the upload writes it whole
	mm, mo := d.mem("contiguous", mt)
	if len(meta) > 0 {
		d.l.CopyHtoD(mm, mo, hostBytes(meta))
	}
	d.launch("strided_copy_f32", grid(n), d.ptr("contiguous", dst), st.mem.Ptr()+4*uint64(off), i64(n), i64(len(shape)),
		d.ptr("contiguous", mt))
	tensor.ReleaseScratch(mt)
	runtime.KeepAlive(st)
}
