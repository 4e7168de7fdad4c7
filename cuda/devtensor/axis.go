package devtensor

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// The entries of the ops along one axis and the pointwise gradients
// (tensor/op_grads.go, tensor/index.go): Gather, ScatterAdd, MaxDim,
// CopyBlock, Clamp, PowScalar, Pow's gradient and BCEWithLogits, each one
// launch of its kernel in kernels.cu ("Ops along one axis ..."). Indices
// were checked by package tensor; the shapes are checked here.
func (d *Device) axisKernels(k *tensor.Kernels) {
	k.Gather = func(y, x *tensor.Tensor, index []int, outer, n, inner int) {
		d.gatherScatter("gather_f32", "gather", y, x, index, outer, n, inner)
	}
	k.ScatterAdd = func(gx, gy *tensor.Tensor, index []int, outer, n, inner int) {
		d.gatherScatter("scatter_add_f32", "scatter add", gy, gx, index, outer, n, inner)
	}
	k.MaxDim = func(y, arg, x *tensor.Tensor, outer, n, inner int) {
		const op = "max along an axis"
		bnArgs(op, outer*inner, y, arg)
		bnArgs(op, outer*n*inner, x)
		if outer*inner > 0 {
			d.launch("max_dim_f32", grid(outer*inner), d.ptr(op, y), d.ptr(op, arg), d.ptr(op, x), i64(outer), i64(n), i64(inner))
		}
	}
	k.MaxDimBackward = func(dx, dy, arg *tensor.Tensor, outer, n, inner int) {
		const op = "max along an axis backward"
		bnArgs(op, outer*inner, dy, arg)
		bnArgs(op, outer*n*inner, dx)
		if m := outer * n * inner; m > 0 {
			d.launch("max_dim_bwd_f32", grid(m), d.ptr(op, dx), d.ptr(op, dy), d.ptr(op, arg), i64(outer), i64(n), i64(inner))
		}
	}
	k.CopyBlock = func(dst, src *tensor.Tensor, outer, w, ds, dof, ss, so int) {
		const op = "block copy"
		if outer*w == 0 {
			return
		}
		if dof+(outer-1)*ds+w > dst.Numel() || so+(outer-1)*ss+w > src.Numel() || dof < 0 || so < 0 {
			panic(fmt.Sprintf("devtensor: %s: %d runs of %d (strides %d, %d; offsets %d, %d) outside %v or %v",
				op, outer, w, ds, ss, dof, so, dst.Shape(), src.Shape()))
		}
		d.launch("copy_block_f32", grid(outer*w), d.ptr(op, dst), d.ptr(op, src), i64(outer), i64(w), i64(ds), i64(dof), i64(ss), i64(so))
	}
	k.Clamp = func(y, x *tensor.Tensor, lo, hi float64) {
		n := same("clamp", y, x)
		d.launch("clamp_f32", grid(n), d.ptr("clamp", y), d.ptr("clamp", x), f32(float32(lo)), f32(float32(hi)), i64(n))
	}
	k.ClampBackward = func(dx, dy, x *tensor.Tensor, lo, hi float64) {
		const op = "clamp backward"
		n := same(op, dx, dy, x)
		d.launch("clamp_bwd_f32", grid(n), d.ptr(op, dx), d.ptr(op, dy), d.ptr(op, x), f32(float32(lo)), f32(float32(hi)), i64(n))
	}
	k.PowScalar = func(y, x *tensor.Tensor, p float64) {
		n := same("pow", y, x)
		d.launch("pow_scalar_f32", grid(n), d.ptr("pow", y), d.ptr("pow", x), f32(float32(p)), i64(n))
	}
	k.PowScalarBackward = func(dx, dy, x *tensor.Tensor, p float64) {
		const op = "pow backward"
		n := same(op, dx, dy, x)
		d.launch("pow_scalar_bwd_f32", grid(n), d.ptr(op, dx), d.ptr(op, dy), d.ptr(op, x), f32(float32(p)), i64(n))
	}
	k.PowBackward = func(da, db, gy, a, b, y *tensor.Tensor) {
		const op = "pow backward"
		n := same(op, gy, a, b, y)
		bnArgs(op, n, da, db)
		d.launch("pow_bwd_f32", grid(n), d.optPtr(op, da), d.optPtr(op, db), d.ptr(op, gy), d.ptr(op, a), d.ptr(op, b), d.ptr(op, y), i64(n))
	}
	k.BCEWithLogits = func(loss, x, t *tensor.Tensor, reduce bool, div float64) {
		const op = "binary cross-entropy"
		n := same(op, x, t)
		if !reduce {
			bnArgs(op, n, loss)
			d.launch("bce_logits_f32", grid(n), d.ptr(op, loss), d.ptr(op, x), d.ptr(op, t), i64(n))
			return
		}
		bnArgs(op, 1, loss)
		if n == 0 {
			d.k.Fill(loss, float32(0/div)) // an empty sum; its mean NaN, as the host's
			return
		}
		l := tensor.MustEmptyOn(d, n) // written whole, then summed
		d.launch("bce_logits_f32", grid(n), d.ptr(op, l), d.ptr(op, x), d.ptr(op, t), i64(n))
		d.k.SumAll(loss, l)
		d.k.Scale(loss, loss, float32(1/div))
		tensor.ReleaseScratch(l)
	}
	k.BCEWithLogitsBackward = func(dx, dt, gy, x, t *tensor.Tensor, reduced bool, div float64) {
		const op = "binary cross-entropy backward"
		n := same(op, x, t)
		bnArgs(op, n, dx, dt)
		if reduced {
			bnArgs(op, 1, gy)
		} else {
			bnArgs(op, n, gy)
		}
		d.launch("bce_logits_bwd_f32", grid(n), d.optPtr(op, dx), d.optPtr(op, dt), d.ptr(op, gy), d.ptr(op, x), d.ptr(op, t),
			flag(reduced), f32(float32(div)), i64(n))
	}
}

// gatherScatter launches gather_f32 (y [outer, inner] from x [outer, n,
// inner]) or scatter_add_f32 (its adjoint: small is gy, big gx) with
// index uploaded as int32.
func (d *Device) gatherScatter(kernel, op string, small, big *tensor.Tensor, index []int, outer, n, inner int) {
	bnArgs(op, outer*inner, small)
	bnArgs(op, outer*n*inner, big)
	if len(index) != outer*inner {
		panic(fmt.Sprintf("devtensor: %s: %d indices for [%d, %d, %d]", op, len(index), outer, n, inner))
	}
	if outer*inner == 0 {
		return
	}
	iv := make([]int32, len(index))
	for i, j := range index {
		iv[i] = int32(j)
	}
	it := d.int32s(op, iv)
	if kernel == "gather_f32" {
		d.launch(kernel, grid(outer*inner), d.ptr(op, small), d.ptr(op, big), d.ptr(op, it), i64(outer), i64(n), i64(inner))
	} else {
		d.launch(kernel, grid(outer*inner), d.ptr(op, big), d.ptr(op, small), d.ptr(op, it), i64(outer), i64(n), i64(inner))
	}
	tensor.ReleaseScratch(it)
}
