//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

// The ops below run goddp's kernels (package kernels) and cuBLAS on
// float32 device tensors, on the context's compute stream. Wrong shapes or
// dtypes are programmer errors and panic, naming the op, as the tensor
// package does; CUDA failures are returned. None of them has run on a GPU
// yet.

const (
	block = 256
	// maxGrid caps the blocks per launch; the kernels loop over the
	// rest (grid-stride), so any element count works.
	maxGrid = 1 << 20
)

// grid is the number of blocks for n elements.
func grid(n int) uint32 { return uint32(min((int64(n)+block-1)/block, maxGrid)) }

// The kernel arguments, each 8 bytes: pointers, 64-bit counts and
// indices, float32 bits in the low half.
func ptrArg(t *Tensor) uint64 { return t.ptr }
func intArg(n int) uint64     { return uint64(int64(n)) }
func f32Arg(f float32) uint64 { return uint64(math.Float32bits(f)) }

// launch runs kernel name over n elements on the compute stream.
func (c *Context) launch(name string, n int, args ...uint64) error {
	return c.do(func() error { return c.launchHere(name, n, args...) })
}

// launchHere launches with the lock held (inside do).
func (c *Context) launchHere(name string, n int, args ...uint64) error {
	if n == 0 {
		return nil
	}
	if err := c.dev.launch(name, grid(n), block, args); err != nil {
		return fmt.Errorf("cuda: kernel %s over %d elements: %w", name, n, err)
	}
	return nil
}

func must32(op string, ts ...*Tensor) {
	for _, t := range ts {
		if t.dtype.Size() != 4 {
			panic(fmt.Sprintf("cuda: %s: float32 tensors only, got %v", op, t.dtype))
		}
	}
}

func sameShape(op string, a, b *Tensor) {
	if a.n != b.n || len(a.shape) != len(b.shape) {
		panic(fmt.Sprintf("cuda: %s: shapes %v and %v differ", op, a.shape, b.shape))
	}
	for i := range a.shape {
		if a.shape[i] != b.shape[i] {
			panic(fmt.Sprintf("cuda: %s: shapes %v and %v differ", op, a.shape, b.shape))
		}
	}
}

func dims2(op string, t *Tensor) (rows, cols int) {
	if len(t.shape) != 2 {
		panic(fmt.Sprintf("cuda: %s: want a 2-D tensor, got shape %v", op, t.shape))
	}
	return t.shape[0], t.shape[1]
}

// fits32 checks that every cuBLAS dimension fits its 32-bit int.
func fits32(op string, dims ...int) error {
	for _, d := range dims {
		if d > math.MaxInt32 {
			return fmt.Errorf("%w: %s: dimension %d", ErrTooLarge, op, d)
		}
	}
	return nil
}

// MatMul computes out = alpha·op(a)·op(b) + beta·out for row-major 2-D
// float32 tensors, where op transposes when asked (cuBLAS SGEMM; out is
// [m, n], op(a) [m, k], op(b) [k, n]). A Linear layer is
// MatMul(y, x, w, false, true, 1, 0) then AddBias(y, b); its gradients
// are MatMul(dx, dy, w, false, false, 1, 0), MatMul(dw, dy, x, true, false,
// 1, 1) and SumRows(db, dy).
func (c *Context) MatMul(out, a, b *Tensor, transA, transB bool, alpha, beta float32) error {
	must32("MatMul", out, a, b)
	ar, ac := dims2("MatMul", a)
	br, bc := dims2("MatMul", b)
	m, n := dims2("MatMul", out)
	k := ac
	if transA {
		ar, k = ac, ar
	}
	if transB {
		br, bc = bc, br
	}
	if ar != m || br != k || bc != n {
		panic(fmt.Sprintf("cuda: MatMul: %v%s x %v%s into %v", a.shape, tmark(transA), b.shape, tmark(transB), out.shape))
	}
	if err := fits32("MatMul", m, n, k, a.shape[1], b.shape[1]); err != nil {
		return err
	}
	lda, ldb := max(a.shape[1], 1), max(b.shape[1], 1)
	return c.do(func() error {
		if m == 0 || n == 0 {
			return nil
		}
		if k == 0 {
			// A product over nothing: out = beta·out, as cuBLAS does.
			return c.scale(out, beta)
		}
		// cuBLAS is column-major: the row-major C = op(A)·op(B) is the
		// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so swap the operands.
		if err := c.dev.sgemm(transB, transA, n, m, k, alpha, b.ptr, ldb, a.ptr, lda, beta, out.ptr, n); err != nil {
			return fmt.Errorf("cuda: MatMul %v%s x %v%s: %w", a.shape, tmark(transA), b.shape, tmark(transB), err)
		}
		return nil
	})
}

// scale sets t = beta·t (beta 0 writes zeros, NaNs included, as BLAS).
func (c *Context) scale(t *Tensor, beta float32) error {
	if beta == 0 {
		return c.dev.zero(t.ptr, t.bytes())
	}
	for off := 0; off < t.n; off += math.MaxInt32 {
		n := min(t.n-off, math.MaxInt32)
		if err := c.dev.sscal(n, beta, t.ptr+uint64(4*off)); err != nil {
			return fmt.Errorf("cuda: scaling %v: %w", t.shape, err)
		}
	}
	return nil
}

func tmark(t bool) string {
	if t {
		return "ᵀ"
	}
	return ""
}

// AddBias adds b [cols] to every row of y [rows, cols] in place.
func (c *Context) AddBias(y, b *Tensor) error {
	must32("AddBias", y, b)
	rows, cols := dims2("AddBias", y)
	if b.n != cols {
		panic(fmt.Sprintf("cuda: AddBias: bias %v for rows of %d", b.shape, cols))
	}
	return c.launch("add_bias_f32", rows*cols, ptrArg(y), ptrArg(b), intArg(rows), intArg(cols))
}

// SumRows sets out [cols] to the column sums of x [rows, cols] (a bias
// gradient), as a GEMV with a ones vector. Zero rows (an empty shard)
// give zeros, as torch's sum over an empty dimension.
func (c *Context) SumRows(out, x *Tensor) error {
	must32("SumRows", out, x)
	rows, cols := dims2("SumRows", x)
	if out.n != cols {
		panic(fmt.Sprintf("cuda: SumRows: %v for the columns of %v", out.shape, x.shape))
	}
	if err := fits32("SumRows", rows, cols); err != nil {
		return err
	}
	return c.withScratch(func() error {
		if cols == 0 {
			return nil
		}
		if rows == 0 {
			return c.dev.zero(out.ptr, out.bytes())
		}
		if rows > c.onesN {
			if err := c.regrow(&c.ones, &c.onesN, rows, "SumRows ones"); err != nil {
				return err
			}
			if err := c.launchHere("fill_f32", rows, c.ones, f32Arg(1), intArg(rows)); err != nil {
				c.onesN = 0 // refill next time
				return err
			}
		}
		// Column-major, x is xᵀ [cols, rows]: out = xᵀ·ones.
		if err := c.dev.sgemv(false, cols, rows, 1, x.ptr, cols, c.ones, 0, out.ptr); err != nil {
			return fmt.Errorf("cuda: SumRows %v: %w", x.shape, err)
		}
		return nil
	})
}

// regrow makes *p hold at least n float32s (smu held).
func (c *Context) regrow(p *uint64, have *int, n int, what string) error {
	if n <= *have {
		return nil
	}
	if *p != 0 {
		c.dev.free(*p)
		*p, *have = 0, 0
	}
	q, err := c.dev.alloc(4 * int64(n))
	if err != nil {
		return fmt.Errorf("cuda: %s scratch: %w", what, err)
	}
	*p, *have = q, n
	return nil
}

// ReLU sets y = max(x, 0); y may be x.
func (c *Context) ReLU(y, x *Tensor) error {
	must32("ReLU", y, x)
	sameShape("ReLU", y, x)
	return c.launch("relu_f32", x.n, ptrArg(y), ptrArg(x), intArg(x.n))
}

// ReLUBackward sets dx = dy where x > 0, else 0; dx may be dy.
func (c *Context) ReLUBackward(dx, dy, x *Tensor) error {
	must32("ReLUBackward", dx, dy, x)
	sameShape("ReLUBackward", dx, dy)
	sameShape("ReLUBackward", dy, x)
	return c.launch("relu_bwd_f32", x.n, ptrArg(dx), ptrArg(dy), ptrArg(x), intArg(x.n))
}

// SGD sets w -= lr·g.
func (c *Context) SGD(w, g *Tensor, lr float32) error {
	must32("SGD", w, g)
	sameShape("SGD", w, g)
	return c.launch("sgd_f32", w.n, ptrArg(w), ptrArg(g), intArg(w.n), f32Arg(lr))
}

// Fill sets every element of x to v.
func (c *Context) Fill(x *Tensor, v float32) error {
	must32("Fill", x)
	return c.launch("fill_f32", x.n, ptrArg(x), f32Arg(v), intArg(x.n))
}

// sum adds n non-negative float32s at p (Sasum, in 32-bit-sized chunks).
func (c *Context) sum(p uint64, n int) (float64, error) {
	var s float64
	for off := 0; off < n; off += math.MaxInt32 {
		k := min(n-off, math.MaxInt32)
		v, err := c.dev.sasum(k, p+uint64(4*off))
		if err != nil {
			return 0, err
		}
		s += float64(v)
	}
	return s, nil
}

// MSE returns mean((pred - target)²) and sets grad to its gradient with
// respect to pred, 2(pred - target)/n (torch's mse_loss, mean reduction).
func (c *Context) MSE(grad, pred, target *Tensor) (float64, error) {
	must32("MSE", grad, pred, target)
	sameShape("MSE", pred, target)
	sameShape("MSE", grad, pred)
	n := pred.n
	var loss float64
	err := c.withScratch(func() error {
		if n == 0 {
			loss = math.NaN() // torch: the mean of nothing
			return nil
		}
		if err := c.regrow(&c.scr, &c.scrN, n, "loss"); err != nil {
			return err
		}
		if err := c.launchHere("mse_f32", n, ptrArg(grad), c.scr, ptrArg(pred), ptrArg(target), intArg(n), f32Arg(2/float32(n))); err != nil {
			return err
		}
		// The squares are non-negative, so their absolute sum is their sum.
		s, err := c.sum(c.scr, n)
		if err != nil {
			return fmt.Errorf("cuda: MSE: %w", err)
		}
		loss = s / float64(n)
		return nil
	})
	return loss, err
}

// SoftmaxCrossEntropy returns the mean cross-entropy of logits [N, C]
// against class labels (len N, each in [0, C)) and sets grad [N, C] to its
// gradient, (softmax(logits) - onehot)/N (torch's cross_entropy, mean
// reduction). A label out of range panics.
func (c *Context) SoftmaxCrossEntropy(grad, logits *Tensor, labels []int) (float64, error) {
	must32("SoftmaxCrossEntropy", grad, logits)
	sameShape("SoftmaxCrossEntropy", grad, logits)
	rows, cols := dims2("SoftmaxCrossEntropy", logits)
	if len(labels) != rows {
		panic(fmt.Sprintf("cuda: SoftmaxCrossEntropy: %d labels for %d rows", len(labels), rows))
	}
	lab := make([]int32, rows)
	for i, y := range labels {
		if y < 0 || y >= cols {
			panic(fmt.Sprintf("cuda: SoftmaxCrossEntropy: label %d at row %d outside [0, %d)", y, i, cols))
		}
		lab[i] = int32(y)
	}
	var loss float64
	err := c.withScratch(func() error {
		if rows == 0 {
			loss = math.NaN()
			return nil
		}
		if err := c.regrow(&c.scr, &c.scrN, rows, "loss"); err != nil {
			return err
		}
		if err := c.regrow(&c.labels, &c.labN, rows, "label"); err != nil {
			return err
		}
		if err := c.dev.htod(c.labels, unsafe.Pointer(&lab[0]), 4*int64(rows)); err != nil {
			return fmt.Errorf("cuda: copying labels: %w", err)
		}
		if err := c.launchHere("softmax_ce_f32", rows, ptrArg(grad), c.scr, ptrArg(logits), c.labels,
			intArg(rows), intArg(cols), f32Arg(1/float32(rows))); err != nil {
			return err
		}
		// Each row's loss is non-negative.
		s, err := c.sum(c.scr, rows)
		if err != nil {
			return fmt.Errorf("cuda: SoftmaxCrossEntropy: %w", err)
		}
		loss = s / float64(rows)
		return nil
	})
	return loss, err
}
