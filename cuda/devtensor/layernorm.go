package devtensor

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

// layerNorm is the LayerNorm entry: one thread per row (layer_norm_f32)
// writes y and the row's mean and rstd, which the backward takes with x.
func (d *Device) layerNorm(y, mean, rstd, x, w, b *tensor.Tensor, eps float64) {
	rows := rstd.Numel()
	n := same("layer norm", y, x)
	same("layer norm", mean, rstd)
	if rows == 0 || n%rows != 0 {
		panic(fmt.Sprintf("devtensor: layer norm of %v with %d rows", x.Shape(), rows))
	}
	dd := n / rows
	for _, p := range []*tensor.Tensor{w, b} {
		if p != nil && p.Numel() != dd {
			panic(fmt.Sprintf("devtensor: layer norm over %d features with an affine parameter of shape %v", dd, p.Shape()))
		}
	}
	d.launch("layer_norm_f32", grid(rows), d.ptr("layer norm", y), d.ptr("layer norm", mean), d.ptr("layer norm", rstd),
		d.ptr("layer norm", x), d.optPtr("layer norm", w), d.optPtr("layer norm", b), i64(rows), i64(dd), f32(float32(eps)))
}

// layerNormBackward is the LayerNormBackward entry. xhat is recomputed
// into a scratch tensor (layer_norm_xhat_f32, to the forward's bits) that
// lives only through this call: dx's row kernel and the parameters'
// column sums read it, and it goes back to the cache at once, so the
// forward keeps no activation-sized tensor for the backward.
func (d *Device) layerNormBackward(dx, dw, db, gy, x, mean, rstd, w *tensor.Tensor) {
	const op = "layer norm backward"
	rows := rstd.Numel()
	n := same(op, gy, x)
	same(op, mean, rstd)
	if rows == 0 || n%rows != 0 {
		panic(fmt.Sprintf("devtensor: layer norm backward of %v with %d rows", gy.Shape(), rows))
	}
	dd := n / rows
	for _, p := range []*tensor.Tensor{dw, db, w} {
		if p != nil && p.Numel() != dd {
			panic(fmt.Sprintf("devtensor: layer norm backward over %d features with a parameter of shape %v", dd, p.Shape()))
		}
	}
	if dx != nil {
		same(op, dx, gy)
	}
	if dx != nil || dw != nil {
		xhat := tensor.MustEmptyOn(d, n) // written whole
		d.launch("layer_norm_xhat_f32", grid(n), d.ptr(op, xhat), d.ptr(op, x), d.ptr(op, mean), d.ptr(op, rstd), i64(rows), i64(dd))
		if dx != nil {
			d.launch("layer_norm_bwd_f32", grid(rows), d.ptr(op, dx), d.ptr(op, gy), d.ptr(op, xhat), d.ptr(op, rstd),
				d.optPtr(op, w), i64(rows), i64(dd))
		}
		if dw != nil {
			d.colSums(op, dw, gy, xhat, rows, dd, true)
		}
		tensor.ReleaseScratch(xhat)
	}
	if db != nil {
		d.colSums(op, db, gy, nil, rows, dd, true)
	}
}
