//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gorgonia.org/cu"
)

// The ops below run goddp's kernels (package kernels) and cuBLAS on
// float32 device tensors. Wrong shapes or dtypes are programmer errors and
// panic, naming the op, as the tensor package does; CUDA failures are
// returned. None of them has run on a GPU yet.

const block = 256

func grid(n int) int { return (n + block - 1) / block }

// arg is one kernel parameter, widened to the 8 bytes that cu's Launch
// copies per parameter.
type arg uint64

func ptrArg(t *Tensor) arg { return arg(t.ptr) }
func intArg(n int) arg     { return arg(uint32(int32(n))) }
func f32Arg(f float32) arg { return arg(math.Float32bits(f)) }

// launch runs kernel name over n threads on the default stream.
func (c *Context) launch(name string, n int, args ...arg) error {
	if n == 0 {
		return nil
	}
	return c.do(func() error { return c.launchHere(name, n, args...) })
}

// launchHere launches on the Context's thread (inside do).
func (c *Context) launchHere(name string, n int, args ...arg) error {
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	if err := c.fns[name].Launch(grid(n), 1, 1, block, 1, 1, 0, cu.NoStream, params); err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", name, err)
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
	if m == 0 || n == 0 {
		return nil
	}
	// cuBLAS is column-major: the row-major C = op(A)·op(B) is the
	// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, so swap the operands.
	tA, tB := blas.NoTrans, blas.NoTrans
	if transA {
		tA = blas.Trans
	}
	if transB {
		tB = blas.Trans
	}
	lda, ldb := a.shape[1], b.shape[1]
	return c.do(func() error {
		if k == 0 {
			// cuBLAS with k = 0 scales C by beta only; do the same.
			c.blas.Sscal(m*n, beta, devF32(out.ptr, m*n), 1)
			return c.blas.Err()
		}
		c.blas.Sgemm(tB, tA, n, m, k, alpha, devF32(b.ptr, b.n), ldb, devF32(a.ptr, a.n), lda, beta, devF32(out.ptr, out.n), n)
		return c.blas.Err()
	})
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
// gradient), as a GEMM with a ones vector.
func (c *Context) SumRows(out, x *Tensor) error {
	must32("SumRows", out, x)
	rows, cols := dims2("SumRows", x)
	if out.n != cols {
		panic(fmt.Sprintf("cuda: SumRows: %v for the columns of %v", out.shape, x.shape))
	}
	if cols == 0 {
		return nil
	}
	return c.do(func() error {
		if rows > c.onesN {
			if c.ones != 0 {
				cu.MemFree(c.ones)
				c.ones, c.onesN = 0, 0
			}
			p, err := cu.MemAlloc(int64(4 * rows))
			if err != nil {
				return fmt.Errorf("cuda: SumRows scratch: %w", err)
			}
			c.ones, c.onesN = p, rows
			one := &Tensor{ctx: c, ptr: p, n: rows}
			if err := c.launchHere("fill_f32", rows, ptrArg(one), f32Arg(1), intArg(rows)); err != nil {
				return err
			}
		}
		// Column-major: out (1 x cols)ᵀ... i.e. out[cols] = xᵀ[cols, rows]·ones[rows].
		c.blas.Sgemv(blas.NoTrans, cols, rows, 1, devF32(x.ptr, x.n), cols, devF32(c.ones, rows), 1, 0, devF32(out.ptr, cols), 1)
		return c.blas.Err()
	})
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

// growScratch makes c.scratch hold at least n float32s (on the Context's thread).
func (c *Context) growScratch(n int) error {
	if n <= c.scrN {
		return nil
	}
	if c.scratch != 0 {
		cu.MemFree(c.scratch)
		c.scratch, c.scrN = 0, 0
	}
	p, err := cu.MemAlloc(int64(4 * n))
	if err != nil {
		return fmt.Errorf("cuda: loss scratch: %w", err)
	}
	c.scratch, c.scrN = p, n
	return nil
}

// MSE returns mean((pred - target)²) and sets grad to its gradient with
// respect to pred, 2(pred - target)/n (torch's mse_loss, mean reduction).
func (c *Context) MSE(grad, pred, target *Tensor) (float64, error) {
	must32("MSE", grad, pred, target)
	sameShape("MSE", pred, target)
	sameShape("MSE", grad, pred)
	n := pred.n
	if n == 0 {
		return math.NaN(), nil // torch: the mean of nothing
	}
	var loss float64
	err := c.do(func() error {
		if err := c.growScratch(n); err != nil {
			return err
		}
		sq := &Tensor{ctx: c, ptr: c.scratch, n: n}
		if err := c.launchHere("mse_f32", n, ptrArg(grad), ptrArg(sq), ptrArg(pred), ptrArg(target), intArg(n), f32Arg(2/float32(n))); err != nil {
			return err
		}
		// The squares are non-negative, so their absolute sum is their sum.
		loss = float64(c.blas.Sasum(n, devF32(c.scratch, n), 1)) / float64(n)
		return c.blas.Err()
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
	if rows == 0 {
		return math.NaN(), nil
	}
	lab := make([]int32, rows)
	for i, y := range labels {
		if y < 0 || y >= cols {
			panic(fmt.Sprintf("cuda: SoftmaxCrossEntropy: label %d at row %d outside [0, %d)", y, i, cols))
		}
		lab[i] = int32(y)
	}
	var loss float64
	err := c.do(func() error {
		if err := c.growScratch(rows); err != nil {
			return err
		}
		if rows > c.labN {
			if c.labels != 0 {
				cu.MemFree(c.labels)
				c.labels, c.labN = 0, 0
			}
			p, err := cu.MemAlloc(int64(4 * rows))
			if err != nil {
				return fmt.Errorf("cuda: label scratch: %w", err)
			}
			c.labels, c.labN = p, rows
		}
		if err := cu.MemcpyHtoD(c.labels, unsafe.Pointer(&lab[0]), int64(4*rows)); err != nil {
			return fmt.Errorf("cuda: copying labels: %w", err)
		}
		perRow := &Tensor{ctx: c, ptr: c.scratch, n: rows}
		labs := &Tensor{ctx: c, ptr: c.labels, n: rows}
		if err := c.launchHere("softmax_ce_f32", rows, ptrArg(grad), ptrArg(perRow), ptrArg(logits), ptrArg(labs),
			intArg(rows), intArg(cols), f32Arg(1/float32(rows))); err != nil {
			return err
		}
		// Each row's loss is non-negative.
		loss = float64(c.blas.Sasum(rows, devF32(c.scratch, rows), 1)) / float64(rows)
		return c.blas.Err()
	})
	return loss, err
}
