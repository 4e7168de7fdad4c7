package devtensor

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// Batch norm and where (tensor/device_norm.go): per-channel kernels run
// one thread per channel, elementwise ones over every element.

// bnArgs checks that each tensor of ts (nil skipped) has want elements.
func bnArgs(op string, want int, ts ...*tensor.Tensor) {
	for _, t := range ts {
		if t != nil && t.Numel() != want {
			panic(fmt.Sprintf("devtensor: %s: an operand of shape %v where %d elements were expected", op, t.Shape(), want))
		}
	}
}

func (d *Device) batchNormStats(stats, x *tensor.Tensor, n, c, l int, sums bool) {
	bnArgs("batch norm statistics", n*c*l, x)
	bnArgs("batch norm statistics", 2*c+1, stats)
	d.launch("bn_stats_f32", grid(c), d.ptr("batch norm statistics", stats), d.ptr("batch norm statistics", x),
		i64(n), i64(c), i64(l), flag(sums))
}

func (d *Device) batchNormFinalize(coef, stats, rm, rv *tensor.Tensor, training, sums bool, momentum, eps float64) {
	c := coef.Numel() / 2
	bnArgs("batch norm", 2*c+1, stats)
	bnArgs("batch norm", c, rm, rv)
	if (rm == nil) != (rv == nil) || (!training && rm == nil) || (training && stats == nil) {
		panic("devtensor: batch norm: training needs the statistics, evaluation both running statistics")
	}
	d.launch("bn_finalize_f32", grid(c), d.ptr("batch norm", coef), d.optPtr("batch norm", stats),
		d.optPtr("batch norm", rm), d.optPtr("batch norm", rv), i64(c), flag(training), flag(sums), f32(float32(momentum)), f32(float32(eps)))
}

func (d *Device) batchNormApply(y, xhat, x, coef, w, b *tensor.Tensor, n, c, l int) {
	bnArgs("batch norm", n*c*l, y, xhat, x)
	bnArgs("batch norm", 2*c, coef)
	bnArgs("batch norm", c, w, b)
	d.launch("bn_apply_f32", grid(n*c*l), d.ptr("batch norm", y), d.ptr("batch norm", xhat), d.ptr("batch norm", x),
		d.ptr("batch norm", coef), d.optPtr("batch norm", w), d.optPtr("batch norm", b), i64(n), i64(c), i64(l))
}

func (d *Device) batchNormBackwardReduce(sums, dw, db, gy, xhat *tensor.Tensor, n, c, l int) {
	bnArgs("batch norm backward", n*c*l, gy, xhat)
	bnArgs("batch norm backward", 2*c, sums)
	bnArgs("batch norm backward", c, dw, db)
	d.launch("bn_bwd_reduce_f32", grid(c), d.ptr("batch norm backward", sums), d.optPtr("batch norm backward", dw),
		d.optPtr("batch norm backward", db), d.ptr("batch norm backward", gy), d.ptr("batch norm backward", xhat),
		i64(n), i64(c), i64(l))
}

func (d *Device) batchNormBackwardInput(dx, gy, xhat, coef, w, sums, stats *tensor.Tensor, n, c, l int) {
	bnArgs("batch norm backward", n*c*l, dx, gy, xhat)
	bnArgs("batch norm backward", 2*c, coef, sums)
	bnArgs("batch norm backward", 2*c+1, stats)
	bnArgs("batch norm backward", c, w)
	if (sums == nil) != (stats == nil) {
		panic("devtensor: batch norm backward: training needs both the gradient sums and the statistics")
	}
	d.launch("bn_bwd_input_f32", grid(n*c*l), d.ptr("batch norm backward", dx), d.ptr("batch norm backward", gy),
		d.ptr("batch norm backward", xhat), d.ptr("batch norm backward", coef), d.optPtr("batch norm backward", w),
		d.optPtr("batch norm backward", sums), d.optPtr("batch norm backward", stats), i64(n), i64(c), i64(l))
}

func (d *Device) where(y, m, a, b *tensor.Tensor, va, vb float64) {
	n := y.Numel()
	bnArgs("where", n, m, a, b)
	d.launch("where_f32", grid(n), d.ptr("where", y), d.ptr("where", m), d.optPtr("where", a), d.optPtr("where", b),
		f32(float32(va)), f32(float32(vb)), i64(n))
}

// binary is the table entry of an elementwise kernel y = a op b.
func (d *Device) binary(kernel string) func(y, a, b *tensor.Tensor) {
	return func(y, a, b *tensor.Tensor) {
		n := same(kernel, y, a, b)
		d.launch(kernel, grid(n), d.ptr(kernel, y), d.ptr(kernel, a), d.ptr(kernel, b), i64(n))
	}
}

// unary is the table entry of an elementwise kernel y = f(x).
func (d *Device) unary(kernel string) func(y, x *tensor.Tensor) {
	return func(y, x *tensor.Tensor) {
		n := same(kernel, y, x)
		d.launch(kernel, grid(n), d.ptr(kernel, y), d.ptr(kernel, x), i64(n))
	}
}
