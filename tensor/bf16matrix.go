package tensor

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/goddp/goddp/internal/half"
)

// A BF16Matrix is a row-major float32 matrix rounded to bfloat16 once
// (round to nearest even, as GemmBF16 rounds its operands), to serve as
// the operand of more than one bf16 product. Autocast's Linear keeps its
// input this way for the weight gradient, as torch's autocast saves the
// bf16 cast of the input for backward: the backward then reads half the
// bytes and rounds nothing again. Its storage comes from the host cache
// (Storage, for a Recycler).
type BF16Matrix struct {
	rows, cols int
	buf        *Tensor // ⌈rows·cols/2⌉ float32 slots holding the halves
}

func newBF16Matrix(rows, cols int) *BF16Matrix {
	return &BF16Matrix{rows: rows, cols: cols, buf: newFull(Float32, (rows*cols+1)/2)}
}

// RoundToBF16 rounds the rows×cols row-major float32 matrix x (at least
// rows·cols values) to a BF16Matrix.
func RoundToBF16(x []float32, rows, cols int) *BF16Matrix {
	checkRows("RoundToBF16", rows, cols, len(x))
	m := newBF16Matrix(rows, cols)
	engineToBF16(m.halves(), x[:rows*cols])
	return m
}

// Rows and Cols are the matrix's shape.
func (m *BF16Matrix) Rows() int { return m.rows }
func (m *BF16Matrix) Cols() int { return m.cols }

// Storage is the tensor that holds the values, for a Recycler; the matrix
// must not be used after its storage is recycled.
func (m *BF16Matrix) Storage() *Tensor { return m.buf }

// At returns element (i, j) widened to float32 (tests, debugging).
func (m *BF16Matrix) At(i, j int) float32 {
	if i < 0 || i >= m.rows || j < 0 || j >= m.cols {
		panic(fmt.Sprintf("tensor: BF16Matrix.At(%d, %d) out of range for %dx%d", i, j, m.rows, m.cols))
	}
	h := m.halves()[i*m.cols+j]
	return half.BF16ToF32(h)
}

// Halves returns the matrix's bfloat16 values, row-major, as stored (for
// a BF16Operand).
func (m *BF16Matrix) Halves() []uint16 { return m.halves() }

func (m *BF16Matrix) halves() []uint16 {
	f := m.buf.F32()
	n := m.rows * m.cols
	if n == 0 {
		return []uint16{}
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(f))), n)
}

// A BF16Operand is an operand of a bfloat16 product (GemmTriBF16): float32
// values F, which the product rounds to bfloat16 (ties to even) as it reads
// them, or bfloat16 values H (a BF16Matrix's Halves, or a slice of them),
// used as they are. H wins when both are set.
type BF16Operand struct {
	F []float32
	H []uint16
}

func (o BF16Operand) len() int {
	if o.H != nil {
		return len(o.H)
	}
	return len(o.F)
}

// gemmBF16Mixed is GemmBF16 where either operand may be rounded already.
func gemmBF16Mixed(transA, transB bool, m, n, k int, alpha float32, a BF16Operand, lda int,
	b BF16Operand, ldb int, beta float32, c []float32, ldc int) {
	checkGemm("GemmBF16", transA, transB, m, n, k, a.len(), lda, b.len(), ldb, len(c), ldc)
	if gemmTrivial(m, n, k, alpha, beta, c, ldc) {
		return
	}
	if p := recorder(); p != nil {
		defer profileGemm(p, "bf16gemm", transA, transB, m, n, k, time.Now())
	}
	schedHint(2 * float64(m) * float64(n) * float64(k))
	engineGemmBF16Mixed(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// LinearBF16 is LinearWith(x, w, b, PrecisionBFloat16) that also returns
// x and w rounded to bfloat16, for LinearBackwardBF16: its weight gradient
// takes x again and its input gradient w, which torch's autocast likewise
// keeps as the bf16 casts of its forward. xh and wh are nil where the
// product does not round on the host (x on a device, or not float32);
// LinearBackwardBF16 then takes x and w themselves.
func LinearBF16(x, w, b *Tensor) (y *Tensor, xh, wh *BF16Matrix) {
	xc := x.Contiguous()
	if xc.dtype != Float32 || onDevice(xc, w, b) {
		return LinearWith(xc, w, b, PrecisionBFloat16), nil, nil
	}
	out, in := w.shape[0], w.shape[1]
	n := xc.Numel() / in
	shape := append([]int(nil), xc.shape...)
	shape[len(shape)-1] = out
	y = Empty(Float32, shape...)
	if in == 0 {
		y = New(Float32, shape...)
	}
	var bias []float32
	if b != nil {
		bias = b.Contiguous().F32()
	}
	xh = RoundToBF16(xc.F32(), n, in)
	wh = RoundToBF16(w.Contiguous().F32(), out, in)
	linearFwdBF16(y.F32(), xh, wh, bias, n, in, out)
	return y, xh, wh
}

// LinearBF16Rounded is LinearBF16 for an input rounded already (xh, n
// rows of w's in features): y [n, out] and w's rounding, for
// LinearBackwardBF16.
func LinearBF16Rounded(xh *BF16Matrix, w, b *Tensor) (y *Tensor, wh *BF16Matrix) {
	out, in := w.shape[0], w.shape[1]
	if xh.cols != in {
		panic(fmt.Sprintf("tensor: LinearBF16Rounded: input of %d features for a weight of shape %v", xh.cols, w.shape))
	}
	var bias []float32
	if b != nil {
		bias = b.Contiguous().F32()
	}
	y = Empty(Float32, xh.rows, out)
	if in == 0 {
		y = New(Float32, xh.rows, out)
	}
	wh = RoundToBF16(w.Contiguous().F32(), out, in)
	linearFwdBF16(y.F32(), xh, wh, bias, xh.rows, in, out)
	return y, wh
}

// GELUToBF16WithGrad returns GELU(x) rounded to bfloat16, as a matrix of
// x's rows (its last dimension the columns), and GELU'(x) [rows, cols]: the
// values of GELUWithGradF32 then RoundToBF16, in one pass that never stores
// the float32 GELU. For x contiguous float32 on the host; nil, nil
// elsewhere.
func GELUToBF16WithGrad(x *Tensor) (*BF16Matrix, *Tensor) {
	if !x.IsCPU() || x.dtype != Float32 || !x.IsContiguous() || x.Dim() == 0 {
		return nil, nil
	}
	cols := x.shape[len(x.shape)-1]
	rows := 0
	if cols > 0 {
		rows = x.Numel() / cols
	}
	h := newBF16Matrix(rows, cols)
	d := Empty(Float32, rows, cols)
	if rows*cols > 0 {
		engineGELUWithGradToBF16(h.halves(), d.F32(), x.F32()[:rows*cols])
	}
	return h, d
}

// linearFwdBF16 is linearFwd32's bf16 path with x and w rounded already:
// the same products, so the same results to the bit.
func linearFwdBF16(y []float32, xh, wh *BF16Matrix, b []float32, n, in, out int) {
	x, w := BF16Operand{H: xh.halves()}, BF16Operand{H: wh.halves()}
	if linearSwapped(n, in, out) {
		linearTransposed(y, b, n, out, func(yt []float32) {
			gemmBF16Mixed(false, true, out, n, in, 1, w, in, x, in, 0, yt, n)
		})
		return
	}
	if b != nil && n > 0 && out > 0 && in > 0 {
		checkGemm("LinearBF16", false, true, n, out, in, len(x.H), in, len(w.H), in, len(y), out)
		checkBias("LinearBF16", b, out)
		if p := recorder(); p != nil {
			defer profileGemm(p, "bf16matmul+bias", false, true, n, out, in, time.Now())
		}
		schedHint(2 * float64(n) * float64(out) * float64(in))
		engineLinearBF16Mixed(y, x, w, b, n, in, out)
		return
	}
	var beta float32
	if b != nil {
		copyRows(y[:n*out], b)
		beta = 1
	}
	gemmBF16Mixed(false, true, n, out, in, 1, x, in, w, in, beta, y, out)
}

// LinearBackwardBF16 is LinearBackwardWith(..., PrecisionBFloat16) that
// takes the forward's rounded input xh and weight wh (LinearBF16) for the
// weight and input gradients, and rounds gy once for both of its products,
// in the pass that sums its rows for db. With xh nil it is
// LinearBackwardWith on x; with wh nil the input gradient rounds w.
func LinearBackwardBF16(gy *Tensor, x *Tensor, xh, wh *BF16Matrix, w, dx, dw, db *Tensor, accX, accW, accB bool) {
	if xh == nil {
		LinearBackwardWith(gy, x, w, dx, dw, db, accX, accW, accB, PrecisionBFloat16)
		return
	}
	linearBwdBF16(gy, nil, xh, wh, w, dx, dw, db, accX, accW, accB)
}

// linearBwdBF16 is the host's bf16 Linear backward (LinearBackwardBF16,
// and LinearBackwardWith at PrecisionBFloat16, which rounds x first), for
// the output gradient gy, or gy ⊙ gate when gate is not nil
// (LinearBackwardGated).
func linearBwdBF16(gy, gate *Tensor, xh, wh *BF16Matrix, w, dx, dw, db *Tensor, accX, accW, accB bool) {
	out, in := w.shape[0], w.shape[1]
	gy = gy.Contiguous()
	n := gy.Numel() / out
	if xh.rows != n || xh.cols != in {
		panic(fmt.Sprintf("tensor: LinearBackwardBF16: rounded input %dx%d does not match %d rows of %d", xh.rows, xh.cols, n, in))
	}
	g := gy.F32()[:n*out]
	gh := newBF16Matrix(n, out)
	var s []float32
	if gate != nil {
		s = gate.Contiguous().F32()
		checkRows("LinearBackwardGated", n, out, len(s))
	}
	switch {
	case db != nil:
		d := db.F32()[:out]
		if !accB {
			clear(d)
		}
		checkRows("LinearBackwardBF16", n, out, len(g))
		if n*out > 0 && s != nil {
			engineToBF16MulAddRows(gh.halves(), g, s, d, n, out)
		} else if n*out > 0 {
			engineToBF16AddRows(gh.halves(), g, d, n, out)
		}
	case s != nil:
		gs := EmptyAs(gy, n, out)
		binVV(opMul, gs.F32(), g, s[:n*out])
		engineToBF16(gh.halves(), gs.F32())
		ReleaseScratch(gs)
	default:
		engineToBF16(gh.halves(), g)
	}
	beta := func(acc bool) float32 {
		if acc {
			return 1
		}
		return 0
	}
	if dx != nil {
		wo := BF16Operand{F: w.Contiguous().F32()}
		if wh != nil {
			if wh.rows != out || wh.cols != in {
				panic(fmt.Sprintf("tensor: LinearBackwardBF16: rounded weight %dx%d does not match %dx%d", wh.rows, wh.cols, out, in))
			}
			wo = BF16Operand{H: wh.halves()}
		}
		gemmBF16Mixed(false, false, n, in, out, 1, BF16Operand{H: gh.halves()}, out, wo, in, beta(accX), dx.F32(), in)
	}
	if dw != nil {
		gemmBF16Mixed(true, false, out, in, n, 1, BF16Operand{H: gh.halves()}, out, BF16Operand{H: xh.halves()}, in, beta(accW), dw.F32(), in)
	}
	ReleaseScratch(gh.buf)
}
